"""Block costs over many shapes at once (``block_costs.block_cost_arrays``) equal the per-shape
calls (``block_costs``, its one-shape case) to 1e-12, on every recorded golden scenario with
random (tp, cp, ep, micro-batch) shapes mixed in one call; and the cost model's block table
(``cost_model.block_table.block_data``) holds, per shape, what a scenario of that shape gives."""
from __future__ import annotations

import dataclasses
import json
import random

import numpy as np
import pytest

from tests.conftest import ROOT
from workbench.estimate.memory import activations as act
from workbench.estimate.time.block_costs import block_cost_arrays, block_costs
from workbench.estimate.cost_model.block_table import block_data
from workbench.scenario import parse_scenario

GOLDEN = json.loads((ROOT / "tests/data/estimate_golden.json").read_text())
# What the golden scenarios lack (all are dense or torchtitan-style MoE in 16/32-bit or FP8,
# without LoRA): Megatron's sequence-shard dispatch (expert TP, shared experts), MLA, the
# expert loop, async TP, TE comm overlap, NVFP4, LoRA / QLoRA, layer and op recompute, eager
# attention.
_H100 = {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2}
_NODE = {"gpu": "h100-sxm", "gpus_per_node": 8}
_MIXTRAL = {"preset": "mixtral-8x7b"}
_LLAMA = {"preset": "llama3-8b"}


def _d(model: dict, par: dict, tr: dict, hw: dict = _H100) -> dict:
    return {"hardware": hw, "model": model, "parallel": {"zero": 1, **par},
            "training": {"seq_len": 4096, "micro_batch": 1, "global_batch": 64, **tr}}


_SP = {"sequence_parallel": True}
VARIANTS = {
    "megatron-moe-sp": _d(_MIXTRAL, {"dp": 4, "tp": 4, "ep": 2, **_SP},
                          {"engine": "megatron", "recompute": "selective"}),
    "megatron-moe-shared-fp8": _d(
        {**_MIXTRAL, "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 14336,
                             "shared_experts": 1}},
        {"dp": 4, "tp": 4, "ep": 2, **_SP},
        {"engine": "megatron", "precision": "fp8", "recompute": "full"}),
    "megatron-mla": _d({"preset": "deepseek-v3"}, {"dp": 32, "tp": 4, "pp": 4, "ep": 8, **_SP},
                       {"engine": "megatron", "recompute": "full", "global_batch": 256},
                       {"gpu": "h200-sxm", "gpus_per_node": 8, "nodes": 64}),
    "megatron-mla-tp-overlap": _d({"preset": "deepseek-v3"},
                                  {"dp": 32, "tp": 4, "pp": 4, "ep": 8, "tp_comm_overlap": True,
                                   **_SP},
                                  {"engine": "megatron", "global_batch": 256},
                                  {"gpu": "h200-sxm", "gpus_per_node": 8, "nodes": 64}),
    "torchtitan-mla-fp8": _d({"preset": "deepseek-v3"},
                             {"dp": 32, "tp": 4, "pp": 4, "ep": 8, "zero": 3, "async_tp": True,
                              **_SP},
                             {"engine": "torchtitan", "precision": "fp8", "recompute": "op",
                              "global_batch": 256},
                             {"gpu": "h200-sxm", "gpus_per_node": 8, "nodes": 64}),
    "megatron-expert-tp1": _d(_MIXTRAL, {"dp": 4, "tp": 4, "ep": 8, "expert_tp": 1, **_SP},
                              {"engine": "megatron"}),
    "deepspeed-moe-loop": _d(_MIXTRAL, {"dp": 16, "ep": 4},
                             {"engine": "deepspeed", "recompute": "full"}),
    "torchtitan-async-tp": _d(_LLAMA, {"dp": 2, "tp": 8, "zero": 3, "async_tp": True, **_SP},
                              {"engine": "torchtitan", "recompute": "op", "compile": True}),
    "torchtitan-moe-fp8": _d(_MIXTRAL, {"dp": 4, "tp": 4, "ep": 4, "zero": 3, **_SP},
                             {"engine": "torchtitan", "precision": "fp8", "recompute": "op"}),
    "megatron-tp-overlap-fp8": _d(_LLAMA, {"dp": 2, "tp": 8, "tp_comm_overlap": True, **_SP},
                                  {"engine": "megatron", "precision": "fp8",
                                   "fp8_attention": True}),
    "megatron-nvfp4-b200": _d(_LLAMA, {"dp": 4, "tp": 2, "cp": 2, **_SP},
                              {"engine": "megatron", "precision": "nvfp4"},
                              {"gpu": "b200", "gpus_per_node": 8, "nodes": 2}),
    "torchtune-lora": _d(_LLAMA, {"dp": 8, "zero": 3},
                         {"engine": "torchtune", "method": "lora", "recompute": "full",
                          "lora": {"rank": 16, "targets": ["q", "k", "v", "o", "gate", "up",
                                                           "down"]}}, _NODE),
    "torchtune-qlora": _d(_LLAMA, {"dp": 8, "zero": 3},
                          {"engine": "torchtune", "method": "qlora",
                           "lora": {"rank": 8, "targets": ["q", "v"]}}, _NODE),
    "hf-lora-moe": _d(_MIXTRAL, {"dp": 16, "zero": 3},
                      {"engine": "hf", "method": "lora",
                       "lora": {"rank": 8, "targets": ["q", "v", "gate", "up", "down"]}}),
    "torchtitan-layer": _d(_LLAMA, {"dp": 4, "tp": 2, "cp": 2, "zero": 3, **_SP},
                           {"engine": "torchtitan", "recompute": "layer"}),
    "generic-eager-attention": _d(_LLAMA, {"dp": 4, "tp": 4},
                                  {"attention": "eager", "recompute": "selective"}),
}
DOCS = [r["doc"] for r in GOLDEN] + list(VARIANTS.values())


def _shaped(s, tp: int, cp: int, ep: int, mb: int):
    """``s`` with one shape's degrees (what the cost model's block table keys on)."""
    par = dataclasses.replace(s.parallel, tp=tp, cp=cp, ep=ep, dp=max(ep, 1), pp=1,
                              virtual_stages=1, shard_group=None)
    return dataclasses.replace(s, parallel=par, training=dataclasses.replace(
        s.training, micro_batch=mb))


def _shapes(s, rng: random.Random, n: int = 12) -> list[tuple]:
    """``n`` random shapes the model divides: tp of the KV heads, ep of the experts."""
    m = s.model
    tps = [t for t in (1, 2, 4, 8) if m.heads % t == 0]
    eps = [e for e in (1, 2, 4, 8) if m.moe is not None and m.moe.experts % e == 0] or [1]
    out = [(s.parallel.tp, s.parallel.cp, s.parallel.ep, s.training.micro_batch)]
    out += [(rng.choice(tps), rng.choice((1, 2, 4)), rng.choice(eps), rng.choice((1, 2, 3)))
            for _ in range(n - 1)]
    return out


def _close(a: float, b: float) -> bool:
    """Equal to 1e-12 relative (inf where a shape spans nodes the hardware lacks: both)."""
    return a == b or abs(a - b) <= 1e-12 * max(abs(a), abs(b))


@pytest.mark.parametrize("i", range(len(DOCS)))
def test_arrays_over_random_shapes_equal_the_per_shape_calls(i):
    s = parse_scenario(DOCS[i])
    shapes = _shapes(s, random.Random(i))
    arrays = block_cost_arrays(s, *(np.array(col) for col in zip(*shapes)))
    for j, shape in enumerate(shapes):
        one = block_costs(_shaped(s, *shape))
        assert set(one) == set(arrays)
        for kind, cost in one.items():
            got = arrays[kind].one(j)
            for field in ("fwd", "bwd", "wgrad", "recompute"):
                assert _close(getattr(got, field), getattr(cost, field)), (kind, field, shape)
            assert [d for d, _ in got.comm] == [d for d, _ in cost.comm]
            assert all(_close(a, b) for (_, a), (_, b) in zip(got.comm, cost.comm))
            assert [v[:2] for v in got.volume] == [v[:2] for v in cost.volume], (kind, shape)
            assert all(_close(a[2], b[2]) and a[3] == b[3]
                       for a, b in zip(got.volume, cost.volume)), (kind, shape)


def test_a_collective_that_does_not_run_has_count_zero_and_costs_nothing():
    """tp 1 and tp 8 in one call: the TP collectives run (count > 0, seconds > 0) on the tp 8
    shape only; the tp 1 shape's volume lists none of them."""
    s = parse_scenario(GOLDEN[0]["doc"])
    a = block_cost_arrays(s, np.array([1, 8]), 1, 1, 1)["dense"]
    tp = [v for v in a.volume if v[0] == "tp"]
    assert tp and all(n[0] == 0 and n[1] > 0 for _, _, _, n in tp)
    assert a.comm["tp"][0] == 0.0 and a.comm["tp"][1] > 0
    assert not [v for v in a.one(0).volume if v[0] == "tp"]


@pytest.mark.parametrize("i", [*range(0, len(GOLDEN), 16), *range(len(GOLDEN), len(DOCS))])
def test_block_table_entries_are_the_per_shape_figures(i):
    """Each shape's block data from one ``block_data`` call over all the shapes: its costs
    are ``block_costs`` of a scenario of that shape, its activation shape
    ``activation_shape`` of that shape's training and parallelism."""
    s = parse_scenario(DOCS[i])
    shapes = list(dict.fromkeys(_shapes(s, random.Random(100 + i))))
    for sp in (False, True):
        cols, entries = block_data(s, shapes, sp, False)
        for j, shape in enumerate(shapes):
            one = _shaped(s, *shape)
            one = dataclasses.replace(one, parallel=dataclasses.replace(
                one.parallel, sequence_parallel=sp))
            assert entries[j]["x"] == act.activation_shape(one.training, one.parallel)
            for kind, cost in block_costs(one).items():
                assert _close(cols[kind, "fwd"][j], cost.fwd)
                assert _close(cols[kind, "rc"][j], cost.recompute)
                for dim, secs in cost.comm:
                    assert _close(cols[kind, f"comm_{dim}"][j], secs)
                vol: dict = {}
                for dim, coll, nbytes, count in cost.volume:
                    b, n = vol.get((dim, coll), (0.0, 0.0))
                    vol[dim, coll] = (b + nbytes * count, n + count)
                got = entries[j][kind]["vol"]
                assert set(got) == set(vol)
                assert all(_close(got[k][0], vol[k][0]) and got[k][1] == vol[k][1]
                           for k in vol)

"""Overlap as the engines do it (#43 mechanisms 4 and 5): data-parallel reduction and gathers
follow the engine record and the scenario's switches; async TP and TE userbuffers through the
chunked GEMMs of the kernel model; DeepSpeed's blocking pipeline sends per micro-batch."""
from __future__ import annotations

import dataclasses
import json

import pytest

from workbench.catalog.gpus import GPUS
from workbench.catalog.types import GPU
from workbench.errors import ScenarioError
from workbench.estimate.time import kernels as eff
from workbench.estimate.memory import device as dm
from workbench.estimate import estimate
from workbench.estimate.time import sustained
from workbench.estimate.time import tp_overlap as tpo
from workbench.estimate.time.collectives import collective_time
from workbench.estimate.placement import group_span
from workbench.catalog.gpu_parts import sm_count
from workbench.estimate.cost_model.pipeline_ranks import blocking_transfers
from workbench.estimate.time.block_costs import tp_gemms, block_costs
from workbench.estimate.time.step_time import dp_exposed, dp_overlap
from workbench.export import export
from workbench.imports import deepspeed as ds_import
from workbench.imports import megatron as mlm_import
from workbench.scenario import parse_scenario


def doc(training=None, parallel=None, model="llama3-8b"):
    return {"hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "model": {"preset": model},
            "parallel": {"dp": 8, "zero": 1, **(parallel or {})},
            "training": {"seq_len": 8192, "global_batch": 64, **(training or {})}}


def test_megatron_without_overlap_grad_reduce_exposes_the_whole_reduction():
    s = parse_scenario(doc({"engine": "megatron"}, {"zero": 0}))
    hw, par = s.hardware, s.parallel
    grads = 8.0e9
    # DDP: one fp32 all-reduce of every gradient over dp = 8 (one node)
    ar = collective_time("all_reduce", grads * 4, group_span(8, 1, 8), hw)
    common = dict(par=par, hw=hw, precision="bf16", mbs=1, dense=grads, expert=0.0,
                  fwd=0.1, bwd=0.2)
    assert dp_exposed(**common, overlap_grad=False) == pytest.approx(ar, rel=1e-12)
    assert dp_exposed(**common, overlap_grad=True) == pytest.approx(max(0.0, ar - 0.2),
                                                                    rel=1e-12)
    # through the scenario: the record's default (the published recipes) hides it, the key
    # turns it off, and the export writes the flag only where it is on
    on = estimate(s)
    off_s = parse_scenario(doc({"engine": "megatron"}, {"zero": 0,
                                                          "overlap_grad_reduce": False}))
    off = estimate(off_s)
    assert dp_overlap(s, 0) == (True, True) and dp_overlap(off_s, 0) == (False, True)
    assert on.time.comm_exposed["dp"] == 0.0
    assert off.time.comm_exposed["dp"] > 0.1
    assert off.time.step - on.time.step == pytest.approx(off.time.comm_exposed["dp"], rel=1e-9)
    assert "--overlap-grad-reduce" in str(export(s, "megatron"))
    assert "--overlap-grad-reduce" not in str(export(off_s, "megatron"))


def test_megatron_import_reads_the_overlap_flags_back():
    s = parse_scenario(doc({"engine": "megatron"}, {"dp": 4, "tp": 2, "zero": 1,
                                                    "tp_comm_overlap": True,
                                                    "overlap_param_gather": False}))
    text = str(export(s, "megatron"))
    assert "--tp-comm-overlap" in text and "--overlap-param-gather" not in text
    par = mlm_import.read("run.sh", text).document["parallel"]
    assert (par["tp_comm_overlap"], par["overlap_grad_reduce"],
            par["overlap_param_gather"]) == (True, True, False)
    # Megatron-LM's own defaults are off (arguments.py store_true): a command line without
    # the flags imports as not overlapped
    plain = mlm_import.read("run.sh", "torchrun pretrain_gpt.py --tensor-model-parallel-size 2 "
                                      "--use-distributed-optimizer").document["parallel"]
    assert (plain["overlap_grad_reduce"], plain["overlap_param_gather"]) == (False, False)
    assert "tp_comm_overlap" not in plain


def test_deepspeed_overlap_comm_off_and_on():
    base = {"engine": "deepspeed"}
    z2 = parse_scenario(doc(base, {"zero": 2}))
    z2_on = parse_scenario(doc(base, {"zero": 2, "overlap_grad_reduce": True}))
    z3 = parse_scenario(doc(base, {"zero": 3}))
    # overlap_comm defaults to stage == 3 (deepspeed/runtime/zero/config.py)
    assert dp_overlap(z2, 2) == (False, False) and dp_overlap(z3, 3) == (True, True)
    assert dp_overlap(z2_on, 2) == (True, False)
    off, on = estimate(z2), estimate(z2_on)
    assert on.time.comm_exposed["dp"] < off.time.comm_exposed["dp"]
    # with the reduction hidden under the backward, only the all-gather after the step stays
    hw, par = z2.hardware, z2.parallel
    common = dict(par=par, hw=hw, precision="bf16", mbs=1, dense=8.0e9, expert=0.0, fwd=0.1,
                  bwd=10.0)
    span = group_span(8, 1, 8)
    ag = collective_time("all_gather", 8.0e9 * 2, span, hw)
    rs = collective_time("reduce_scatter", 8.0e9 * 4, span, hw)
    assert dp_exposed(**common, overlap_grad=True, overlap_gather=False) == pytest.approx(
        ag, rel=1e-12)
    assert dp_exposed(**common, overlap_grad=False, overlap_gather=False) == pytest.approx(
        ag + rs, rel=1e-12)
    # exported as overlap_comm and read back
    for s, want in ((z2, False), (z2_on, True), (z3, True)):
        cfg = json.loads(str(export(s, "deepspeed")))
        assert cfg["zero_optimization"]["overlap_comm"] is want
        r = ds_import.read("ds_config.json", json.dumps(cfg))
        assert r.problems == []
        assert r.document["parallel"]["overlap_grad_reduce"] is want


def test_overlap_keys_only_where_the_engine_has_the_switch():
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc({"engine": "torchtitan", "recompute": "op"},
                           {"zero": 3, "overlap_grad_reduce": False}))
    assert [f"{p.path}: {p.message}" for p in err.value.problems] == [
        "parallel.overlap_grad_reduce: engine torchtitan has no switch for it: at zero 3 its "
        "gradient reduction is overlapped; set it null or true"]
    # stating what the engine does anyway is accepted
    parse_scenario(doc({"engine": "torchtitan", "recompute": "op"},
                       {"zero": 3, "overlap_grad_reduce": True}))
    with pytest.raises(ScenarioError, match="parallel.overlap_param_gather"):
        parse_scenario(doc({"engine": "deepspeed"}, {"zero": 1, "overlap_param_gather": True}))
    with pytest.raises(ScenarioError, match="parallel.overlap_grad_reduce: must be true"):
        parse_scenario(doc({"engine": "megatron"}, {"overlap_grad_reduce": "yes"}))


def _tp_scenario(engine: str, switch: str):
    training = {"engine": engine, **({"recompute": "op"} if engine == "torchtitan" else {})}
    return parse_scenario(doc(training, {"dp": 1, "tp": 8, "zero": 1 if engine == "megatron"
                                         else 3, switch: True}))


def test_async_tp_exposes_at_least_the_chunked_gemms_extra_time():
    s = _tp_scenario("torchtitan", "async_tp")
    m, t = s.model, 8
    gpu = eff.on_hardware(s.hardware)
    tokens = 8192.0
    pairs = [tpo.Pair(k, 1e-9, g, tokens * m.hidden * 2) for k, g in zip(
        ("all_gather", "all_gather", "reduce_scatter", "reduce_scatter"),
        tp_gemms(m, t, tokens, 3, m.ffn_hidden / t))]
    extra = sum(tpo.gemms_time(p.gemms, gpu, "bf16", t) - tpo.gemms_time(p.gemms, gpu, "bf16")
                for p in pairs)
    assert extra > 0     # smaller GEMMs run below the whole one's rate (GEMM_K0, launches)
    assert tpo.async_tp_exposed(pairs, t, gpu, "bf16", 1.0) >= extra
    # in the layer's cost: at least the extra time per pass, and less than no overlap
    sync = dataclasses.replace(s, parallel=dataclasses.replace(s.parallel, async_tp=False))
    over, plain = block_costs(s)["dense"], block_costs(sync)["dense"]
    assert dict(over.comm)["tp"] >= 3 * extra           # full recompute: 3 passes
    assert dict(over.comm)["tp"] < dict(plain.comm)["tp"]
    assert over.volume == plain.volume


def test_tp_comm_overlap_pays_the_sms_it_takes():
    s = _tp_scenario("megatron", "tp_comm_overlap")
    gpu = eff.on_hardware(s.hardware)
    assert sm_count(gpu) == 132
    whole = tpo.gemms_time(((8192, 4096, 14336 / 8),), gpu, "bf16")
    # the bulk reduce-scatter of the backward: its GEMM on 116 of 132 SMs, comm hidden
    pair = tpo.Pair("reduce_scatter", 1e-9, ((8192, 4096, 14336 / 8),))
    assert tpo.userbuffers_exposed([pair], 8, gpu, "bf16", 1.0, True) == pytest.approx(
        whole * (132 / 116 - 1), rel=1e-12)
    over = estimate(s)
    plain = estimate(parse_scenario(doc({"engine": "megatron"}, {"dp": 1, "tp": 8,
                                                                 "zero": 1})))
    assert 0 < over.time.comm_exposed["tp"] < plain.time.comm_exposed["tp"]


def test_deepspeed_pipeline_cost_grows_with_the_micro_batch_count():
    assert blocking_transfers(1) == 0 and blocking_transfers(2) == 2
    assert blocking_transfers(4) == 4

    def pp_term(engine: str, global_batch: int) -> float:
        s = parse_scenario(doc({"engine": engine, "global_batch": global_batch},
                               {"dp": 2, "pp": 4, "zero": 1}))
        return estimate(s).time.comm_exposed["pp"]

    # Megatron: the fill and drain only, whatever the micro-batch count
    assert pp_term("megatron", 16) == pytest.approx(pp_term("megatron", 64), rel=1e-12)
    # DeepSpeed: four blocking transfers per micro-batch on a middle stage on top of them
    d16, d64, m16 = pp_term("deepspeed", 16), pp_term("deepspeed", 64), pp_term("megatron", 16)
    one = m16 / (2 * 3)                  # one send: the fill and drain are 2 (pp - 1) of them
    assert d16 - m16 == pytest.approx(4 * 8 * one, rel=1e-9)     # 8 micro-batches
    assert d64 - m16 == pytest.approx(4 * 32 * one, rel=1e-9)    # 32 micro-batches


def test_tp_comm_overlap_gathers_fp8_inputs_in_fp8():
    s = parse_scenario(doc({"engine": "megatron", "precision": "fp8"},
                           {"dp": 1, "tp": 8, "zero": 1, "tp_comm_overlap": True}))
    plain = dataclasses.replace(s, parallel=dataclasses.replace(s.parallel,
                                                                tp_comm_overlap=False))
    gathers = [b for dim, k, b, n in block_costs(s)["dense"].volume if k == "all_gather"]
    assert gathers == [8192 * 4096 * 1.0, 8192 * 4096 * 1.0]          # 1 byte per element
    assert [b for dim, k, b, n in block_costs(plain)["dense"].volume
            if k == "all_gather"] == [8192 * 4096 * 2.0, 8192 * 4096 * 2.0]


def test_one_sm_count_per_part_for_userbuffers_clocks_and_the_context():
    # gpu_parts is the one source: the catalog part's count, else its architecture's
    counts = {k: sm_count(GPUS[k]) for k in ("b200", "h200-nvl", "h200-sxm", "h100-pcie",
                                             "a100-pcie-80gb")}
    assert counts == {"b200": 148, "h200-nvl": 132, "h200-sxm": 132, "h100-pcie": 114,
                      "a100-pcie-80gb": 108}
    for key, (ref, sms, ref_sms) in sustained.SAME_DIE.items():
        assert (sms, ref_sms) == (sm_count(GPUS[key]), sm_count(GPUS[ref]))
    inline = GPU("inline", 80, 3000, 1000, 2000, 700, arch="blackwell", form_factor="pcie")
    assert sm_count(inline) == 148
    (s0, b0), (s1, b1) = dm.CTX_FIT_POINTS
    assert dm.cuda_context_bytes("b200") == b0 + (148 - s0) * (b1 - b0) / (s1 - s0)

"""Candidate layouts of a scenario: every combination of the parallel degrees (dp fills the rest
of the GPUs), ZeRO stage, HSDP shard group, virtual stages and micro-batch, per pipeline
schedule.

Each degree's values are bounded, then screened by the rule table: the conditions that read that
degree alone (``scenario.rules.allowed_values``: TP divides the heads, key/value heads and FFN
widths, a pipeline stage holds a layer, CP splits the sequence, EP divides the experts). TP is
screened with sequence parallelism off and on, and kept where either passes: the search tries
both where the engine runs both, and only SP on where the engine shards the sequence with every
TP (torchtitan, rule engine_sp). The bounds keep the space finite: TP and CP up to 64 (CP a
power of two), PP any divisor of the GPUs, virtual stages from 2 to as many as leave every
virtual stage a layer (pp x v <= layers, rule stages_hold_layers; NeMo's recipes run 10, 12 and
20, Megatron-Bridge's 24), every value up to 8 and above it those that split a rank's layers
evenly (``V_EVERY``), micro-batches every divisor of the global
batch up to 16 sequences or ``MICRO_BATCH_TOKENS`` tokens, HSDP shard groups of 1, 2, 4 or 8
nodes with ZeRO-3, as FSDP2 runs HSDP (``shard_group`` 0: shard over all of dp x cp;
``--fix shard_group=N`` searches it with every ZeRO stage). What the whole rule table rejects is
screened out afterwards (``scenario.rules.layout_mask``).

Expert TP (MoE parallel folding) is searched as separate passes of the grid, one per value
(``expert_tp_values``): None (the experts take the dense TP, EP from dp x cp) and each smaller
TP degree the rules allow, each pass listing only the layouts it adds (EP > 1 and TP a
multiple of expert TP above it), so no layout is listed twice.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from workbench.scenario.layouts import ROW_FIELDS
from workbench.scenario.rules import DEGREES, allowed_values
from workbench.scenario.schedules import SCHEDULES
from workbench.scenario.types import Parallel, Scenario

__all__ = ["MICRO_BATCH_TOKENS", "ROW_FIELDS", "V_EVERY", "candidate_rows", "divisors",
           "expert_tp_values"]

# The largest micro-batch searched, in tokens (sequences x seq_len), beside the 16 sequences
# searched at any length: the largest micro-batch in benchmarks/data/published_runs.yaml,
# torchtitan's Llama 3 70B 2D run (16 x 8,192; torchtitan docs/performance.md @ 2412); MosaicML's
# llm-foundry runs of small models at short sequences (up to 128 x 512 and 3 x 32,768 =
# 98,304 tokens: llm-foundry scripts/train/benchmarking/README.md @061f2c7c) fall within it.
MICRO_BATCH_TOKENS = 131_072
TP_MAX = 64                      # TP and CP bounds (see the docstring)
# Virtual stages: every v up to 8 (the planner's bound before; the layers may split unevenly,
# as PyTorch's pipelining and torchtitan's module split allow), above it only the v that divide
# the layers per pipeline rank (rounded up): Megatron-Core requires the layers on each pipeline
# rank to be divisible by the virtual pipeline size (megatron/core/transformer/
# transformer_config.py @ megatron-core 0.16.1, "must be divisible by
# virtual_pipeline_model_parallel_size"), and the recipes above 8 (NeMo's 10, 12, 20,
# Megatron-Bridge's 24) are one or two layers per virtual stage. Every v the layers allow would
# list 4x the interleaved layouts for the 405B (56k valid per schedule against 14k).
V_EVERY = 8


def divisors(n: int, up_to: int | None = None) -> list[int]:
    """The divisors of ``n`` (at most ``up_to``), ascending; trial division up to the square
    root, so a global batch of 10^9 sequences costs 3 x 10^4 steps, not 10^9."""
    low, high, d = [], [], 1
    while d * d <= n:
        if n % d == 0:
            low.append(d)
            if d * d != n:
                high.append(n // d)
        d += 1
    out = low + high[::-1]
    return out if up_to is None else [d for d in out if d <= up_to]


def expert_tp_values(s: Scenario, engine) -> list[int | None]:
    """The expert-TP settings the search tries for ``s`` with ``engine`` (an ``Engine``
    record): None (experts at the dense TP) and, for an MoE model where the engine offers
    ``parallel.expert_tp``, every TP degree up to ``TP_MAX`` dividing the GPUs and the expert
    FFN width (rule ep), or only 1 where the engine runs expert TP 1 or tp (torchtitan's
    ``expert_tp_tp_or_1``)."""
    if s.model.moe is None or not engine.offers("expert_tp"):
        return [None]
    if engine.expert_tp_tp_or_1:
        return [None, 1]
    ffn = s.model.moe.expert_ffn_hidden
    return [None] + [t for t in divisors(s.hardware.world) if t <= TP_MAX // 2 and ffn % t == 0]


def candidate_rows(s: Scenario, world: int, schedule: str, fixed: dict) -> np.ndarray:
    """A (9, n) integer array of candidate layouts (``ROW_FIELDS`` order) for ``world`` GPUs
    and one schedule, for ``s.parallel.expert_tp`` (see the docstring). Layouts without
    pipelining are listed under the first schedule only (the schedule does not change them)."""
    m, tr = s.model, s.training
    etp = s.parallel.expert_tp
    # Each degree is screened by the conditions that read no other degree, the rest at their
    # most permissive: one model chunk per rank, no sequence parallelism (a candidate serves
    # both settings) -- except TP, screened with SP off and on (rule engine_sp refuses TP
    # without SP in some engines; seq_split needs seq_len % tp with SP).
    probes = [dataclasses.replace(s, parallel=Parallel(sequence_parallel=sp, expert_tp=etp))
              for sp in (False, True)]
    probe = probes[0]
    div = divisors(world)
    tps = [t for t in div if t <= TP_MAX]
    ok_tp = {t for p in probes for t in allowed_values(p, "tp", tps, DEGREES)}
    interleaved = SCHEDULES[schedule].interleaved
    pick = {
        "tp": [t for t in tps if t in ok_tp],
        "pp": allowed_values(probe, "pp", div, DEGREES),
        "cp": allowed_values(probe, "cp", [c for c in div if c & (c - 1) == 0 and c <= TP_MAX],
                             DEGREES),
        "ep": allowed_values(probe, "ep", divisors(m.moe.experts) if m.moe else [1], DEGREES),
        "zero": [0, 1, 2, 3],
        # v = 1 keeps the unpipelined layouts (v >= 2 with pp > 1 is screened by the rules);
        # pp >= 2, so v <= layers / 2 bounds every pipeline (the rows are cut below)
        "virtual_stages": list(range(1, max(m.layers // 2, 1) + 1)) if interleaved else [1],
        "micro_batch": divisors(tr.global_batch, max(16, MICRO_BATCH_TOKENS // tr.seq_len)),
        "shard_group": [0] + [s.hardware.gpus_per_node * k for k in (1, 2, 4, 8)],
    }
    for key, value in fixed.items():
        if key in pick:
            pick[key] = [value]
    # the product built one degree at a time, each cut as soon as its rule can be read, so
    # the long lists (virtual stages, micro-batches) never meet the whole product
    c = _cross({}, "tp", pick["tp"])
    c = _cross(c, "pp", pick["pp"])
    c = _cross(c, "cp", pick["cp"])
    c = _keep(c, world % (c["tp"] * c["pp"] * c["cp"]) == 0)
    c["dp"] = world // (c["tp"] * c["pp"] * c["cp"])
    if "dp" in fixed:
        c = _keep(c, c["dp"] == fixed["dp"])
    first = schedule == "1f1b" if "pp_schedule" not in fixed else True   # Parallel's default
    c = _cross(c, "virtual_stages", pick["virtual_stages"])
    pp, v = c["pp"], c["virtual_stages"]
    # every virtual stage holds a layer (rule stages_hold_layers; interleaved: v chunks a rank),
    # and above V_EVERY the virtual stages split a rank's layers evenly (see V_EVERY)
    per_rank = -(-m.layers // pp)
    c = _keep(c, ((pp > 1) | (first & (v == 1)))
              & ((v == 1) | ((pp * v <= m.layers) & ((v <= V_EVERY) | (per_rank % v == 0)))))
    c = _cross(c, "micro_batch", pick["micro_batch"])
    # the micro-batch divides the global batch over dp (rule global_batch)
    c = _keep(c, tr.global_batch % (c["micro_batch"] * c["dp"]) == 0)
    c = _cross(c, "ep", pick["ep"])
    if etp is not None and "expert_tp" not in fixed:
        # the layouts this expert TP adds: folding under EP, expert TP below TP (expert TP =
        # TP is the pass without it). EP 1 with a smaller expert TP (the experts copied over
        # the rest of TP) is left to --fix: no published run uses it, and for Mixtral 8x7B on
        # 16 H100 (megatron, torchtitan) it adds a quarter more valid layouts, none of them
        # the fastest (measured 2026-12-07)
        c = _keep(c, (c["ep"] > 1) & (c["tp"] % etp == 0) & (c["tp"] > etp))
    c = _cross(c, "zero", pick["zero"])
    c = _cross(c, "shard_group", pick["shard_group"])
    sg = c["shard_group"]
    # an HSDP group of all of dp x cp is plain sharding: listed once, as shard_group 0; HSDP is
    # searched with ZeRO-3 (FSDP2's HSDP) unless a shard group is fixed
    keep = sg < c["dp"] * c["cp"]
    if "shard_group" not in fixed:
        keep &= (sg == 0) | (c["zero"] == 3)
    c = _keep(c, keep)
    # the order of the whole product (tp, pp, cp, ep, zero, v, micro-batch, shard group), as
    # the search has always listed it: equal rows rank in this order
    order = np.lexsort(tuple(c[k] for k in reversed(_ORDER)))
    return np.stack([c[k][order] for k in ROW_FIELDS]).astype(np.int64)


_ORDER = ("tp", "pp", "cp", "ep", "zero", "virtual_stages", "micro_batch", "shard_group")


def _cross(cols: dict, name: str, values) -> dict:
    """Every row of ``cols`` (column arrays) with every one of ``values`` as column ``name``."""
    vals = np.asarray(values, dtype=np.int64)
    if not cols:
        return {name: vals}
    n = len(next(iter(cols.values())))
    out = {k: np.repeat(col, len(vals)) for k, col in cols.items()}
    out[name] = np.tile(vals, n)
    return out


def _keep(cols: dict, mask: np.ndarray) -> dict:
    return {k: col[mask] for k, col in cols.items()}

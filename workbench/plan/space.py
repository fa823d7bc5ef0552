"""Candidate layouts of a scenario: every combination of the parallel degrees (dp fills the rest
of the GPUs), ZeRO stage, HSDP shard group, virtual stages and micro-batch, per pipeline
schedule.

Each degree's values are bounded, then screened by the rule table: the conditions that read that
degree alone (``scenario.rules.allowed_values``: TP divides the heads, key/value heads and FFN
widths, a pipeline stage holds a layer, CP splits the sequence, EP divides the experts). The
bounds keep the space finite without cutting layouts people run: TP and CP up to 64 (CP a power
of two), PP any divisor of the GPUs, virtual stages 2..8, micro-batches powers of two up to 16,
HSDP shard groups of 1, 2, 4 or 8 nodes with ZeRO-3, as FSDP2 runs HSDP (``shard_group`` 0:
shard over all of dp x cp; ``--fix shard_group=N`` searches it with every ZeRO stage). What
the whole rule table rejects is screened out afterwards (``scenario.rules.layout_mask``).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from workbench.scenario.layouts import ROW_FIELDS
from workbench.scenario.rules import DEGREES, allowed_values
from workbench.scenario.schedules import SCHEDULES
from workbench.scenario.types import Parallel, Scenario

__all__ = ["ROW_FIELDS", "candidate_rows"]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def candidate_rows(s: Scenario, world: int, schedule: str, fixed: dict) -> np.ndarray:
    """A (9, n) integer array of candidate layouts (``ROW_FIELDS`` order) for ``world`` GPUs
    and one schedule. Layouts without pipelining are listed under the first schedule only (the
    schedule does not change them)."""
    m, tr = s.model, s.training
    # Each degree is screened by the conditions that read no other degree, the rest at their
    # most permissive: one model chunk per rank, no sequence parallelism (a candidate serves
    # both settings).
    probe = dataclasses.replace(s, parallel=Parallel(sequence_parallel=False))
    div = _divisors(world)
    pick = {
        "tp": allowed_values(probe, "tp", [t for t in div if t <= 64], DEGREES),
        "pp": allowed_values(probe, "pp", div, DEGREES),
        "cp": allowed_values(probe, "cp", [c for c in div if c & (c - 1) == 0 and c <= 64],
                             DEGREES),
        "ep": allowed_values(probe, "ep", _divisors(m.moe.experts) if m.moe else [1], DEGREES),
        "zero": [0, 1, 2, 3],
        # v = 1 keeps the unpipelined layouts (v >= 2 with pp > 1 is screened by the rules)
        "virtual_stages": list(range(1, 9)) if SCHEDULES[schedule].interleaved else [1],
        "micro_batch": [b for b in (1, 2, 4, 8, 16) if tr.global_batch % b == 0],
        "shard_group": [0] + [s.hardware.gpus_per_node * k for k in (1, 2, 4, 8)],
    }
    for key, value in fixed.items():
        if key in pick:
            pick[key] = [value]
    grids = np.meshgrid(*(np.asarray(pick[k], dtype=np.int64) for k in (
        "tp", "pp", "cp", "ep", "zero", "virtual_stages", "micro_batch", "shard_group")),
        indexing="ij")
    tp, pp, cp, ep, zero, v, mb, sg = (x.reshape(-1) for x in grids)
    first = schedule == "1f1b" if "pp_schedule" not in fixed else True   # Parallel's default
    keep = (world % (tp * pp * cp) == 0) & ((pp > 1) | (first & (v == 1)))
    dp = world // (tp * pp * cp)
    # an HSDP group of all of dp x cp is plain sharding: listed once, as shard_group 0; HSDP is
    # searched with ZeRO-3 (FSDP2's HSDP) unless a shard group is fixed
    keep &= sg < dp * cp
    if "shard_group" not in fixed:
        keep &= (sg == 0) | (zero == 3)
    if "dp" in fixed:
        keep &= dp == fixed["dp"]
    rows = np.stack([dp, tp, pp, cp, ep, zero, v, mb, sg])[:, keep]
    return rows.astype(np.int64)

"""Candidate layouts of a scenario: every combination of the parallel degrees (dp fills the rest
of the GPUs), ZeRO stage, virtual stages and micro-batch size, per pipeline schedule.

Bounds keep the space finite without cutting useful layouts: TP divides the heads, key/value
heads and FFN width; PP at most the layers; CP a power of two up to 64 that splits the sequence
into 2·cp chunks (load-balanced causal ring); EP divides the experts; virtual stages 2..8;
micro-batches powers of two up to 16 that divide the per-replica batch. Whatever the
validation rules reject is screened out afterwards (``estimate.grid.valid_layouts``).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from workbench.scenario.types import Scenario

ROW_FIELDS = ("dp", "tp", "pp", "cp", "ep", "zero", "virtual_stages", "micro_batch")


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def candidate_rows(s: Scenario, world: int, schedule: str, fixed: dict) -> np.ndarray:
    """An (8, n) integer array of candidate layouts (``ROW_FIELDS`` order) for ``world`` GPUs
    and one schedule. Layouts without pipelining are listed under the first schedule only (the
    schedule does not change them)."""
    m, tr = s.model, s.training
    width = math.gcd(m.heads, m.kv_heads, m.ffn_hidden)
    if m.moe is not None:
        width = math.gcd(width, m.moe.expert_ffn_hidden)
    tps = [t for t in _divisors(world) if width % t == 0 and t <= 64]
    pps = [p for p in _divisors(world) if p <= m.layers]
    cps = [c for c in _divisors(world) if c & (c - 1) == 0 and c <= 64
           and tr.seq_len % (2 * c) == 0]
    eps = [e for e in _divisors(m.moe.experts) if e <= world] if m.moe is not None else [1]
    zeros = [0, 1, 2, 3]
    # v = 1 keeps the unpipelined layouts (v >= 2 with pp > 1 is screened by the rules)
    vs = list(range(1, 9)) if schedule in ("interleaved-1f1b", "zero-bubble") else [1]
    mbs = [b for b in (1, 2, 4, 8, 16) if tr.global_batch % b == 0]
    first = schedule == "1f1b" if "pp_schedule" not in fixed else True   # Parallel's default
    pick = {"tp": tps, "pp": pps, "cp": cps, "ep": eps, "zero": zeros, "virtual_stages": vs,
            "micro_batch": mbs}
    for key, value in fixed.items():
        if key in pick:
            pick[key] = [value]
    rows = []
    for tp, pp, cp, ep, zero, v, mb in itertools.product(
            pick["tp"], pick["pp"], pick["cp"], pick["ep"], pick["zero"],
            pick["virtual_stages"], pick["micro_batch"]):
        if world % (tp * pp * cp):
            continue
        if pp == 1 and (not first or v != 1):
            continue
        if pp > 1 and pp * v > m.layers:
            continue
        dp = world // (tp * pp * cp)
        if "dp" in fixed and dp != fixed["dp"]:
            continue
        rows.append((dp, tp, pp, cp, ep, zero, v, mb))
    if not rows:
        return np.zeros((len(ROW_FIELDS), 0), dtype=np.int64)
    return np.array(rows, dtype=np.int64).T

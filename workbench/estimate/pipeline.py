"""Pipeline schedules: how many microbatches' activations a pipeline rank holds at its peak.

Counts are in *chunk units*: one microbatch's activations through one model chunk of the rank
(a whole stage when each rank holds one chunk).
- GPipe (Huang et al. 2019): every microbatch's forward runs before any backward: m.
- 1F1B (PipeDream-Flush, Narayanan et al. 2021): rank i (0-based) warms up with p-i-1 forwards
  and then holds one more: min(p - i, m).
- Interleaved 1F1B (Narayanan et al. 2021; Megatron-LM's schedules.py warm-up count
  2(p-i-1) + (v-1)p, plus the one in flight): min(2(p-i-1) + (v-1)p + 1, m·v). For rank 0 this is
  Korthikanti et al. (2022) Eq. 5's factor L(1 + (p-1)/(pv)) layers.
- Zero-bubble (Qi et al. 2023, ZB-H1): same peak as 1F1B (the paper's H1 keeps 1F1B's memory);
  with virtual stages (PyTorch's ScheduleInterleavedZeroBubble) the interleaved count.
- DualPipeV (DeepSeek-AI 2025, the "cut-in-half" DualPipe): rank i runs 2(p-i-1) forwards of its
  first chunk, then i+1 forwards of both chunks before the first backward, and one more forward
  overlaps the first backward in the steady phase: 2p + 1 chunk units, at most 2m.
The tests check these against PyTorch's own schedule generators.
"""
from __future__ import annotations

from workbench.spec.scenario import Parallel


def inflight_chunks(par: Parallel, microbatches: int, rank: int) -> int:
    """Peak number of (microbatch, chunk) activation sets alive on pipeline ``rank``."""
    p, m, v = par.pp, microbatches, par.chunks_per_rank
    if p == 1:
        return 1
    sched = par.pp_schedule
    if sched == "gpipe":
        return m * v
    if sched == "dualpipev":
        return min(2 * p + 1, 2 * m)
    if v > 1:  # interleaved-1f1b, or zero-bubble with virtual stages
        return min(2 * (p - rank - 1) + (v - 1) * p + 1, m * v)
    return min(p - rank, m)


def inflight_first_chunk(par: Parallel, microbatches: int) -> int:
    """Microbatches alive in the first model chunk (the one with the embedding) on rank 0."""
    p, m = par.pp, microbatches
    if p == 1:
        return 1
    if par.pp_schedule == "gpipe":
        return m
    if par.pp_schedule == "dualpipev" or par.chunks_per_rank > 1:
        return min(2 * p - 1, m)
    return min(p, m)


def inflight_last_chunk(par: Parallel, microbatches: int) -> int:
    """Microbatches alive in the last model chunk (the one with the head and loss)."""
    if par.pp == 1:
        return 1
    return microbatches if par.pp_schedule == "gpipe" else 1


def bubble_fraction(par: Parallel, microbatches: int) -> float:
    """Idle fraction of a step, (p-1)/(v·m) for 1F1B-family schedules (Narayanan et al. 2021)."""
    p, m, v = par.pp, microbatches, par.chunks_per_rank
    if p == 1:
        return 0.0
    return (p - 1) / (v * m + p - 1)

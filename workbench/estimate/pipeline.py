"""Pipeline schedules: how many microbatches' activations a pipeline rank holds at its peak.

Counts are in *chunk units*: one microbatch's activations through one model chunk of the rank
(a whole stage when each rank holds one chunk). They follow the schedules PyTorch's
``torch.distributed.pipelining`` runs (what the trials execute; tests compare them with its
``_schedule_visualizer.get_schedule_ops`` action lists):
- GPipe (Huang et al. 2019): every forward before any backward: m·v.
- 1F1B (PipeDream-Flush, Narayanan et al. 2021): rank i warms up with p-i forwards; PyTorch runs
  the steady phase forward-first, so the last ranks hold 2: min(m, max(p-i, 2)). (Megatron-LM's
  order holds p-i, one fewer on the last rank.)
- Interleaved 1F1B (Narayanan et al. 2021; Megatron-LM's warm-up count 2(p-i-1) + (v-1)p, plus
  the one in flight): min(2(p-i-1) + (v-1)p + 1, m·v). For rank 0 this is Korthikanti et al.
  (2022) Eq. 5's L(1 + (p-1)/(pv)) layers.
- Zero-bubble (Qi et al. 2023; PyTorch's ScheduleInterleavedZeroBubble, which needs v >= 2):
  the deferred weight-gradient passes keep p·v chunk units alive on every rank, at most m·v.
- DualPipeV (DeepSeek-AI 2025, the "cut-in-half" DualPipe; two chunks per rank in a V):
  2p chunk units on every rank, 2p+1 on the last, at most 2m.
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
        return min(2 * p + (1 if rank == p - 1 else 0), 2 * m)
    if sched == "zero-bubble":
        return min(p, m) * v
    if v > 1:  # interleaved-1f1b
        return min(2 * (p - rank - 1) + (v - 1) * p + 1, m * v)
    return min(m, max(p - rank, 2))


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
    return microbatches if par.pp_schedule == "gpipe" else min(2, microbatches)


def bubble_fraction(par: Parallel, microbatches: int) -> float:
    """Idle fraction of a step, (p-1)/(v·m) for 1F1B-family schedules (Narayanan et al. 2021)."""
    p, m, v = par.pp, microbatches, par.chunks_per_rank
    if p == 1:
        return 0.0
    return (p - 1) / (v * m + p - 1)

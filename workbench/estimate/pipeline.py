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

import numpy as np

from workbench.estimate.arrays import plain



def inflight_chunks(par, microbatches, rank):
    """Peak number of (microbatch, chunk) activation sets alive on pipeline ``rank``.
    ``par`` is a Parallel, or a grid of layouts with array fields (workbench.estimate.grid)."""
    p, m, v = np.asarray(par.pp), np.asarray(microbatches), np.asarray(par.chunks_per_rank)
    rank = np.asarray(rank)
    sched = par.pp_schedule
    if sched == "gpipe":
        n = m * v
    elif sched == "dualpipev":
        n = np.minimum(2 * p + (rank == p - 1), 2 * m)
    elif sched == "zero-bubble":
        n = np.minimum(p, m) * v
    else:   # 1f1b (v = 1) and interleaved-1f1b (v > 1)
        n = np.where(v > 1, np.minimum(2 * (p - rank - 1) + (v - 1) * p + 1, m * v),
                     np.minimum(m, np.maximum(p - rank, 2)))
    return plain(np.where(p == 1, 1, n))


def inflight_first_chunk(par, microbatches):
    """Microbatches alive in the first model chunk (the one with the embedding) on rank 0."""
    p, m = np.asarray(par.pp), np.asarray(microbatches)
    if par.pp_schedule == "gpipe":
        n = m
    else:
        n = np.where((par.pp_schedule == "dualpipev") | (np.asarray(par.chunks_per_rank) > 1),
                     np.minimum(2 * p - 1, m), np.minimum(p, m))
    return plain(np.where(p == 1, 1, n))


def inflight_last_chunk(par, microbatches):
    """Microbatches alive in the last model chunk (the one with the head and loss)."""
    p, m = np.asarray(par.pp), np.asarray(microbatches)
    n = m if par.pp_schedule == "gpipe" else np.minimum(2, m)
    return plain(np.where(p == 1, 1, n))

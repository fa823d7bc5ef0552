"""Pipeline schedules, one record each: what the validator, the estimator, the timeline, the
trials and the exporters need to know about a schedule, written once.

Every formula accepts numbers or numpy arrays (one entry per layout of a grid).

In-flight activations are counted in *chunk units* (one microbatch's activations through one
model chunk of the rank; a whole stage when each rank holds one chunk). They follow the schedules
PyTorch's ``torch.distributed.pipelining`` runs (what the trials execute; tests compare them with
its ``_schedule_visualizer.get_schedule_ops`` action lists):

- GPipe (Huang et al. 2019): every forward before any backward: m·v. Bubble (p-1)(F+B).
- 1F1B (PipeDream-Flush, Narayanan et al. 2021): rank i warms up with p-i forwards; PyTorch runs
  the steady phase forward-first, so the last ranks hold 2: min(m, max(p-i, 2)). (Megatron-LM's
  order holds p-i, one fewer on the last rank.) Bubble (p-1)(F+B).
- Interleaved 1F1B (Narayanan et al. 2021; Megatron-LM's warm-up count 2(p-i-1) + (v-1)p, plus
  the one in flight): min(2(p-i-1) + (v-1)p + 1, m·v); for rank 0 this is Korthikanti et al.
  (2022) Eq. 5's L(1 + (p-1)/(pv)) layers. Bubble (p-1)(F+B)/v.
- Zero-bubble (Qi et al. 2023, ZB-H1; PyTorch's ScheduleInterleavedZeroBubble, which needs
  v >= 2): the deferred weight-gradient passes keep p·v chunk units alive on every rank, at most
  m·v. Bubble (p-1)(F+B-2W)/v.
- DualPipeV (DeepSeek-AI 2025, the "cut-in-half" DualPipe; two chunks per rank in a V): 2p chunk
  units on every rank, 2p+1 on the last, at most 2m. Bubble (p/2-1)(F&B+B-3W) of DualPipe with
  2p chunk-stages; chunk times are half the rank's (DeepSeek-AI 2025, DualPipe README), F&B ~ F+B.

F, B and W are a rank's mean per-microbatch forward, backward and weight-gradient times;
``estimate.time.timeline.simulate`` reproduces the bubbles for uniform stages (tests/test_step_time.py).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def _plain(x):
    return x.item() if np.ndim(x) == 0 else x


@dataclass(frozen=True)
class Schedule:
    """One pipeline schedule."""

    name: str                 # the scenario's parallel.pp_schedule
    trial_class: str          # torch.distributed.pipelining class the trials run
    torchtitan: str           # the name torchtitan's get_schedule_class() takes
    interleaved: bool         # takes parallel.virtual_stages >= 2 model chunks per rank
    v_shape: bool             # two chunks per rank placed in a V (chunks r and 2p-1-r)
    split_backward: bool      # weight gradients (W) run apart from input gradients
    forward_first: bool       # every forward before any backward
    # (p, v, F, B, W) -> idle seconds of one step
    _bubble: Callable
    # (p, m, v, rank) -> peak chunk units alive on the rank
    _inflight: Callable
    # microbatches per step it needs per pipeline (pp > 1)
    _min_microbatches: Callable

    def chunks_per_rank(self, pp, virtual_stages):
        """Model chunks each pipeline rank holds: 1 without pipelining, 2 in a V, v when
        interleaved, else 1."""
        pp = np.asarray(pp)
        per = 2 if self.v_shape else (np.asarray(virtual_stages) if self.interleaved else 1)
        return _plain(np.where(pp == 1, 1, per))

    def min_microbatches(self, pp):
        """Microbatches per step the schedule needs (measured with torch.distributed.pipelining
        here, docs/platform.md): 1F1B-style schedules one per stage, DualPipeV two per stage,
        GPipe one."""
        return _plain(np.where(np.asarray(pp) == 1, 1, self._min_microbatches(np.asarray(pp))))

    def bubble(self, p, v, f, b, w):
        """Idle time of one step (fill and drain), from a rank's mean per-microbatch F, B, W."""
        p = np.asarray(p)
        return _plain(np.where(p == 1, 0.0, self._bubble(p, np.asarray(v), f, b, w)))

    def inflight(self, p, m, v, rank):
        """Peak number of (microbatch, chunk) activation sets alive on pipeline ``rank``."""
        p, m, v, rank = (np.asarray(x) for x in (p, m, v, rank))
        return _plain(np.where(p == 1, 1, self._inflight(p, m, v, rank)))

    def inflight_first_chunk(self, p, m):
        """Microbatches alive in the first model chunk (the one with the embedding)."""
        p, m = np.asarray(p), np.asarray(m)
        if self.forward_first:
            n = m
        else:
            n = np.minimum(2 * p - 1, m) if (self.v_shape or self.interleaved) else np.minimum(p, m)
        return _plain(np.where(p == 1, 1, n))

    def inflight_last_chunk(self, p, m):
        """Microbatches alive in the last model chunk (the one with the head and loss)."""
        p, m = np.asarray(p), np.asarray(m)
        return _plain(np.where(p == 1, 1, m if self.forward_first else np.minimum(2, m)))


def _one_f_one_b(p, m, v, rank):
    return np.where(v > 1, np.minimum(2 * (p - rank - 1) + (v - 1) * p + 1, m * v),
                    np.minimum(m, np.maximum(p - rank, 2)))


SCHEDULES: dict[str, Schedule] = {s.name: s for s in (
    Schedule("gpipe", "ScheduleGPipe", "GPipe", interleaved=False,
             v_shape=False, split_backward=False, forward_first=True,
             _bubble=lambda p, v, f, b, w: (p - 1) * (f + b),
             _inflight=lambda p, m, v, r: m * v,
             _min_microbatches=lambda p: 1),
    Schedule("1f1b", "Schedule1F1B", "1F1B", interleaved=False, v_shape=False,
             split_backward=False, forward_first=False,
             _bubble=lambda p, v, f, b, w: (p - 1) * (f + b),
             _inflight=_one_f_one_b, _min_microbatches=lambda p: p),
    Schedule("interleaved-1f1b", "ScheduleInterleaved1F1B", "Interleaved1F1B",
             interleaved=True, v_shape=False, split_backward=False, forward_first=False,
             _bubble=lambda p, v, f, b, w: (p - 1) * (f + b) / v,
             _inflight=_one_f_one_b, _min_microbatches=lambda p: p),
    # the workbench's zero-bubble is PyTorch's looped interleaved one
    Schedule("zero-bubble", "ScheduleInterleavedZeroBubble", "InterleavedZeroBubble",
             interleaved=True, v_shape=False, split_backward=True,
             forward_first=False,
             _bubble=lambda p, v, f, b, w: (p - 1) * np.maximum(0.0, f + b - 2 * w) / v,
             _inflight=lambda p, m, v, r: np.minimum(p, m) * v,
             _min_microbatches=lambda p: p),
    Schedule("dualpipev", "ScheduleDualPipeV", "DualPipeV", interleaved=False,
             v_shape=True, split_backward=True, forward_first=False,
             _bubble=lambda p, v, f, b, w: (p - 1) * np.maximum(0.0, (f + b) / 2 + b / 2
                                                                - 3 * w / 2),
             _inflight=lambda p, m, v, r: np.minimum(2 * p + (r == p - 1), 2 * m),
             _min_microbatches=lambda p: 2 * p),
)}

SCHEDULE_NAMES = tuple(SCHEDULES)


def schedule(name: str) -> Schedule:
    """The record of ``name`` (a validated ``parallel.pp_schedule``)."""
    return SCHEDULES[name]

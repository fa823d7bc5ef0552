"""Which pipeline ranks the cost model evaluates per layout of a ``LayoutGrid``: every rank for
a single estimate (the report lists them all); for a search, one rank of each kind that can be
the worst, which is exact (tests/test_grid.py holds it against every rank):
- rank 0 (the embedding; the most microbatches in flight) and the last rank (the head, except
  under DualPipeV, whose V puts it on rank 0; DualPipeV's last rank holds one more in flight);
- of an MoE model, every rank holding one of the leading dense layers, and the first rank after
  them;
- the first rank of the other layer count: layers split into equal chunks with the first
  ``layers % chunks`` one longer, so middle ranks hold one of two counts (two of three under
  DualPipeV), and within a count the lowest rank holds the most in flight (every schedule's
  in-flight count falls or stays with the rank).
"""
from __future__ import annotations

import numpy as np

from workbench.catalog.types import ModelShape
from workbench.scenario.layouts import LayoutGrid


def rank_rows(model: ModelShape, g: LayoutGrid, every_rank: bool) -> tuple[np.ndarray, np.ndarray]:
    """(layout, rank): one row per pipeline rank to evaluate, sorted by layout and rank, each
    once (``every_rank``: all ranks of every layout)."""
    n, p = len(g), g.pp
    if every_rank:
        layout = np.repeat(np.arange(n), p)
        return layout, np.arange(len(layout)) - np.repeat(np.cumsum(p) - p, p)
    chunks = p * g.chunks_per_rank
    base, rem = np.divmod(model.layers, chunks)
    k = np.ones(n, dtype=np.int64)
    if model.moe is not None and model.moe.dense_layers:
        d = model.moe.dense_layers          # chunks holding a dense layer, ranks holding them
        long_part = rem * (base + 1)
        held = np.where(d <= long_part, -(-d // (base + 1)),
                        rem + -(-(d - long_part) // np.maximum(base, 1)))
        k = np.clip(np.minimum(held, p), 1, None)
    other = np.where(rem <= p, rem, 2 * p - rem) if g.v_shape else rem % p
    last, most = p - 1, int(k.max())
    lead = np.minimum(np.arange(most + 1)[None, :], last[:, None])
    ranks = np.concatenate([lead, np.minimum(np.maximum(other, k), last)[:, None],
                            last[:, None]], axis=1)
    if most > 1:
        # leading ranks 0..max k clipped to the last may pass a row's own other-count rank
        # (at least min(its k, last)); with k 1 everywhere the columns are already ascending
        ranks = np.sort(ranks, axis=1)
    once = np.ones(ranks.shape, dtype=bool)
    once[:, 1:] = ranks[:, 1:] != ranks[:, :-1]
    layout, column = np.nonzero(once)      # row-major: by layout, then rank
    return layout, ranks[layout, column]


def blocking_transfers(pp) -> np.ndarray:
    """Activation and gradient transfers per micro-batch on the busiest pipeline rank where
    the engine's sends and receives are blocking (``Engine.pp_blocking_p2p``, DeepSpeed's
    PipelineEngine): DeepSpeed's TrainSchedule gives a middle stage RecvActivation,
    SendActivation, RecvGrad and SendGrad per micro-batch, the first and last stages two of
    them (deepspeed 0.19.8 deepspeed/runtime/pipe/schedule.py TrainSchedule.steps); each waits
    in line with the stage's compute (pipe/p2p.py: async_op is refused), so each is a fixed cost
    per micro-batch, its latency included (``collectives.collective_time``). None without pipelining."""
    pp = np.asarray(pp)
    return np.where(pp > 2, 4, np.where(pp == 2, 2, 0))

"""Pipeline parallelism with ``torch.distributed.pipelining``: cut the model into the chunks this
rank owns (the same placement the estimator uses: looped for interleaved schedules, V-shaped for
DualPipeV) and build the schedule."""
from __future__ import annotations

import copy

import torch
from torch import nn

from workbench.estimate.params import chunk_layers, rank_chunks
from workbench.spec.scenario import Parallel

SCHEDULES = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B",
             "interleaved-1f1b": "ScheduleInterleaved1F1B",
             "zero-bubble": "ScheduleInterleavedZeroBubble", "dualpipev": "ScheduleDualPipeV"}


def chunk_model(full: nn.Module, plan: Parallel, chunk: int) -> nn.Module:
    """A copy of ``full`` keeping only model chunk ``chunk``'s layers (and the embedding on the
    first chunk, the final norm and head on the last)."""
    n_chunks = plan.pp * plan.chunks_per_rank
    keep = {str(i) for i in chunk_layers(full.shape.layers, n_chunks)[chunk]}
    m = copy.deepcopy(full)
    for name in list(m.layers.keys()):
        if name not in keep:
            del m.layers[name]
    if chunk != 0:
        m.tok_embeddings = None
        m.pos_embeddings = None
    if chunk != n_chunks - 1:
        m.norm = None
        m.output = None
    return m


def stage_chunks(plan: Parallel, pp_rank: int) -> tuple[int, ...]:
    return rank_chunks(plan)[pp_rank]


def build_schedule(stages: list, plan: Parallel, microbatches: int, loss_fn):
    """The torch.distributed.pipelining schedule named by ``plan.pp_schedule``."""
    from torch.distributed import pipelining

    cls = getattr(pipelining.schedules, SCHEDULES[plan.pp_schedule])
    if plan.chunks_per_rank == 1:
        return cls(stages[0], n_microbatches=microbatches, loss_fn=loss_fn)
    return cls(stages, n_microbatches=microbatches, loss_fn=loss_fn)


def make_stage(module: nn.Module, chunk: int, plan: Parallel, group) -> object:
    from torch.distributed.pipelining import PipelineStage

    return PipelineStage(module, chunk, plan.pp * plan.chunks_per_rank, torch.device("cpu"),
                         group=group)

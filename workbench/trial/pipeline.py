"""Pipeline parallelism with ``torch.distributed.pipelining``: cut the model into the chunks this
rank owns (the same placement the estimator uses: looped for interleaved schedules, V-shaped for
DualPipeV) and build the schedule."""
from __future__ import annotations

import copy

import torch
from torch import nn

from workbench.estimate.model.params import chunk_layers, rank_chunks
from workbench.scenario.schedules import schedule
from workbench.scenario.types import Parallel



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
        m.embeddings = None
    if chunk != n_chunks - 1:
        m.norm = None
        m.output = None
    return m


def stage_chunks(plan: Parallel, pp_rank: int) -> tuple[int, ...]:
    return rank_chunks(plan)[pp_rank]


def build_schedule(stages: list, plan: Parallel, microbatches: int, loss_fn,
                   scale_grads: bool = True):
    """The torch.distributed.pipelining schedule named by ``plan.pp_schedule`` (``scale_grads``:
    the schedule divides each stage's gradients by the microbatch count)."""
    from torch.distributed import pipelining

    cls = getattr(pipelining.schedules, schedule(plan.pp_schedule).trial_class)
    kw = {"n_microbatches": microbatches, "loss_fn": loss_fn, "scale_grads": scale_grads}
    return cls(stages[0] if plan.chunks_per_rank == 1 else stages, **kw)


def make_stage(module: nn.Module, chunk: int, plan: Parallel, group) -> object:
    from torch.distributed.pipelining import PipelineStage

    return PipelineStage(module, chunk, plan.pp * plan.chunks_per_rank, torch.device("cpu"),
                         group=group)


def tied_embedding_group(mesh, plan: Parallel):
    """Megatron's embedding group: for each (dp, cp, tp) position, the first and the last
    pipeline rank, which hold the two copies of a tied embedding. Every rank creates every group
    (torch.distributed requires it) and gets back its own, or None."""
    import torch.distributed as dist

    chunks = rank_chunks(plan)
    n_chunks = plan.pp * plan.chunks_per_rank
    head_pp = next(r for r, cs in enumerate(chunks) if n_chunks - 1 in cs)
    if head_pp == 0:          # DualPipeV: both copies live on pipeline rank 0
        return None
    grid = mesh.mesh
    mine = None
    me = dist.get_rank()
    for idx in torch.cartesian_prod(*(torch.arange(n) for n in grid.shape[1:])).reshape(
            -1, grid.dim() - 1).tolist():
        first, last = int(grid[(0, *idx)]), int(grid[(head_pp, *idx)])
        group = dist.new_group(sorted({first, last}))
        if me in (first, last):
            mine = group
    return mine


def tie_across_chunks(modules: list) -> None:
    """One tied weight when the embedding and the head chunks live on this rank (DualPipeV's
    V-shape puts both on pipeline rank 0), as in the unsplit model."""
    emb = next((m.embeddings for m in modules if m.embeddings is not None), None)
    for m in modules:
        if emb is not None and m.output is not None:
            m.output.weight = emb.tok.weight


def sync_tied_grads(modules: list, group) -> None:
    """Sum the tied embedding's gradient over its copies (on this rank and in the group), so
    both copies take the same optimizer step, as one tied weight would."""
    import torch.distributed as dist

    weights = {}
    for m in modules:
        if m.embeddings is not None:
            weights[id(m.embeddings.tok.weight)] = m.embeddings.tok.weight
        if m.output is not None:
            weights[id(m.output.weight)] = m.output.weight
    grads = [w.grad for w in weights.values() if w.grad is not None]
    if not grads or (len(grads) == 1 and group is None):
        return
    local = [g.to_local() if hasattr(g, "to_local") else g for g in grads]
    total = sum(local[1:], local[0].clone())
    if group is not None and dist.get_world_size(group) > 1:
        dist.all_reduce(total, group=group)
    for g in local:
        g.copy_(total)

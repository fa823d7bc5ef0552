"""Build one trial rank after it joined the process group: the device mesh, this rank's model
chunk(s), parallelized, the optimizer and, under pipeline parallelism, the schedule."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from workbench.process_runner import Phase
from workbench.scenario.types import Scenario
from workbench.trial.device import Compute
from workbench.trial.expert_parallel import expert_groups, expert_parameters
from workbench.trial.adapters import apply_method
from workbench.trial.model import Transformer, init_weights
from workbench.trial.parallelize import make_optimizer, parallelize
from workbench.trial.pipeline import (
    build_schedule, chunk_model, make_stage, stage_chunks, tie_across_chunks,
    tied_embedding_group,
)


@dataclass
class Rank:
    """Everything one rank trains with."""

    scenario: Scenario
    compute: Compute             # the device and precision (device.py)
    mesh: DeviceMesh             # (pp, dp, cp, tp); "dp_cp" flattened under CP
    pp_rank: int
    dp_rank: int
    cp_rank: int
    chunks: tuple[int, ...]      # the model chunks this rank holds (pipeline: one or two)
    modules: list[nn.Module]     # one per chunk, parallelized in place
    wrapped: list[nn.Module]     # what to call (DDP wraps its module)
    params: list[nn.Parameter]   # every parameter once (a tied weight shared by two chunks)
    optimizer: object
    schedule: object | None      # the pipeline schedule, None without PP
    shared_tied: bool            # embedding and head on this rank are one weight (DualPipeV)
    tied_group: object | None    # the embedding group across pipeline ranks (tied, PP)
    ep_group: object | None
    edp_group: object | None     # the expert-data-parallel group (EP)

    @property
    def tied(self) -> bool:
        """A tied embedding split across pipeline stages: its copies' gradients are summed."""
        return self.scenario.model.tied_embeddings and self.scenario.parallel.pp > 1


def loss_fn(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over every token, in fp32."""
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())


def build_mesh(s: Scenario, device_type: str = "cpu") -> DeviceMesh:
    """The (pp, dp, cp, tp) mesh on ``device_type`` ("cuda" under nccl); under CP also
    "dp_cp", the group data parallelism reduces over (CP ranks hold the same weights)."""
    par = s.parallel
    mesh = init_device_mesh(device_type, (par.pp, par.dp, par.cp, par.tp),
                            mesh_dim_names=("pp", "dp", "cp", "tp"))
    if par.cp > 1:
        mesh["dp", "cp"]._flatten("dp_cp")
    return mesh


def build_chunks(s: Scenario, seed: int, pp_rank: int,
                 device: torch.device | str = "cpu") -> tuple[tuple[int, ...], list[nn.Module]]:
    """This pipeline rank's chunk indices and models, cut from one identically initialised
    full model (the whole model without PP), created on ``device`` (a GPU slice of a large
    model is never built in host memory first)."""
    par = s.parallel
    with torch.device(device):
        full = Transformer(s.model)
    init_weights(full, seed)
    apply_method(full, s.training, seed)      # LoRA / QLoRA: frozen base, adapters (PEFT)
    chunks = stage_chunks(par, pp_rank) if par.pp > 1 else (0,)
    return chunks, [chunk_model(full, par, c) if par.pp > 1 else full for c in chunks]


def build(s: Scenario, seed: int, phase: Phase, compute: Compute) -> Rank:
    """Build this rank (in a process group of ``s.parallel.world`` ranks) on ``compute``'s
    device. Every rank creates every process group, in the same order."""
    par, tr = s.parallel, s.training
    phase.value = "building the device mesh"
    mesh = build_mesh(s, compute.device.type)
    pp_rank = mesh["pp"].get_local_rank()
    phase.value = "building the model"
    chunks, modules = build_chunks(s, seed, pp_rank, compute.device)
    phase.value = "parallelizing"
    ep = edp_group = edp_mesh = None
    if par.ep > 1:
        ep, edp_mesh = expert_groups(mesh, par)
        edp_group = edp_mesh.get_group()
    wrapped = [parallelize(mod, mesh, par, ep, tr.seq_len, edp_mesh, compute.mp_policy(),
                           shard_alone=compute.fsdp)
               for mod in modules]
    # DualPipeV puts both ends of the model on pipeline rank 0: one tied weight there.
    # The schedule would divide its gradient by the microbatch count once per stage that
    # uses it, so this rank scales its gradients itself.
    shared = s.model.tied_embeddings and len(modules) > 1 and par.zero < 2
    if shared:
        tie_across_chunks(modules)
    joined = _Joined(modules)
    params = list(joined.parameters())
    opt = make_optimizer(joined, par, mesh, tr.optimizer,
                         (expert_parameters(modules), edp_group) if par.ep > 1 else None)
    schedule = None
    if par.pp > 1:
        stages = [make_stage(w, c, par, mesh["pp"].get_group()) for w, c in zip(wrapped, chunks)]
        schedule = build_schedule(stages, par, s.microbatches, loss_fn, scale_grads=not shared)
    tied = s.model.tied_embeddings and par.pp > 1
    return Rank(scenario=s, compute=compute, mesh=mesh, pp_rank=pp_rank, dp_rank=mesh["dp"].get_local_rank(),
                cp_rank=mesh["cp"].get_local_rank(), chunks=chunks, modules=modules,
                wrapped=wrapped, params=params, optimizer=opt, schedule=schedule,
                shared_tied=shared,
                tied_group=tied_embedding_group(mesh, par) if tied else None,
                ep_group=ep[0] if ep is not None else None, edp_group=edp_group)


class _Joined:
    """All chunks' parameters as one module-like object for the optimizer."""

    def __init__(self, modules: list[nn.Module]) -> None:
        self.modules = modules

    def parameters(self) -> Iterator[nn.Parameter]:
        seen = set()
        for m in self.modules:
            for p in m.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield p

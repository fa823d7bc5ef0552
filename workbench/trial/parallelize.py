"""Apply a parallel layout to the trial model on a DeviceMesh, with PyTorch's own APIs.

Recipe order as torchtitan's ``parallelize_llama``: tensor (+ sequence) parallelism with
``parallelize_module``, expert parallelism (``expert_parallel.py``), context parallelism
(``context_parallel.py``), then data parallelism — DDP, ZeRO-1 (``ZeroRedundancyOptimizer``, in
``make_optimizer``) or FSDP2 ``fully_shard`` per transformer block (ZeRO-2 keeps parameters
unsharded between forward and backward: ``reshard_after_forward=False``; ZeRO-3 reshards).
Under EP the rank's experts replicate only over the expert-data-parallel group, so each data-
parallel flavour treats them over that group (``apply_fsdp``, ``make_optimizer``).
Pipeline stages are cut before this step (``pipeline.chunk_model`` / ``make_stage``).
"""
from __future__ import annotations

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import MixedPrecisionPolicy

from workbench.scenario.types import Parallel
from workbench.trial.context_parallel import apply_cp
from workbench.trial.expert_parallel import apply_ep
from workbench.trial.model import MoE


def tensor_plan(model: nn.Module, sequence_parallel: bool) -> dict:
    """The TP plan as data: module path -> style (Megatron-LM's column/row split)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel, PrepareModuleInput, PrepareModuleOutput, RowwiseParallel,
        SequenceParallel,
    )

    sp = sequence_parallel
    plan: dict = {}
    seq_in = Shard(1) if sp else Replicate()
    for name, layer in model.layers.items():
        p = f"layers.{name}"
        if sp:
            plan[f"{p}.attention_norm"] = SequenceParallel()
            plan[f"{p}.ffn_norm"] = SequenceParallel()
        plan[f"{p}.attention"] = PrepareModuleInput(input_layouts=(seq_in,),
                                                    desired_input_layouts=(Replicate(),))
        for w in ("wq", "wk", "wv"):
            plan[f"{p}.attention.{w}"] = ColwiseParallel()
        plan[f"{p}.attention.wo"] = RowwiseParallel(output_layouts=seq_in)
        ff = layer.feed_forward
        if hasattr(ff, "w1"):
            plan[f"{p}.feed_forward"] = PrepareModuleInput(input_layouts=(seq_in,),
                                                           desired_input_layouts=(Replicate(),))
            plan[f"{p}.feed_forward.w1"] = ColwiseParallel()
            if ff.w3 is not None:
                plan[f"{p}.feed_forward.w3"] = ColwiseParallel()
            plan[f"{p}.feed_forward.w2"] = RowwiseParallel(output_layouts=seq_in)
    emb = getattr(model, "embeddings", None)
    if emb is not None:
        # Vocab-parallel lookup (Megatron's VocabParallelEmbedding): partial sums over the
        # vocabulary shards. With SP and no learned positions they are reduce-scattered along
        # the sequence; otherwise all-reduced, positions added, then split (Megatron's
        # ``reduce_scatter_embeddings`` rule in LanguageModelEmbedding).
        positions = emb.pos is not None
        plan["embeddings.tok"] = RowwiseParallel(
            input_layouts=Replicate(),
            output_layouts=Shard(1) if sp and not positions else Replicate())
        if sp and positions:
            plan["embeddings"] = PrepareModuleOutput(output_layouts=Replicate(),
                                                     desired_output_layouts=seq_in)
    if getattr(model, "norm", None) is not None and sp:
        plan["norm"] = SequenceParallel()
    if getattr(model, "output", None) is not None:
        # Logits stay sharded over the vocabulary and the loss runs under ``loss_parallel``
        # (Megatron's vocab-parallel cross-entropy); a tied head shares the embedding's
        # Shard(0) weight (``tie_weights`` after the plan is applied).
        plan["output"] = ColwiseParallel(input_layouts=seq_in, output_layouts=Shard(-1),
                                         use_local_output=False)
    return {k: v for k, v in plan.items() if v is not None}


def apply_tp(model: nn.Module, mesh: DeviceMesh, sequence_parallel: bool) -> None:
    """Tensor (+ sequence) parallelism over ``mesh`` (1-D)."""
    from torch.distributed.tensor.parallel import parallelize_module

    parallelize_module(model, mesh, tensor_plan(model, sequence_parallel))
    emb, out = getattr(model, "embeddings", None), getattr(model, "output", None)
    if model.shape.tied_embeddings and emb is not None and out is not None:
        # each style registered its own Parameter around the same Shard(0) weight: tie again
        out.weight = emb.tok.weight


def finalize_tp_grads(params: list) -> None:
    """Bring gradients to their parameters' layouts once per step, as Megatron-LM's
    ``finalize_model_grads`` does: weights replicated inside the sequence-parallel region
    (norms, row-parallel biases) have Partial gradients, summed here in one coalesced
    all-reduce over the TP group (Megatron's ``_allreduce_layernorm_grads``) instead of the
    all-reduce DTensor would run inside every optimizer op that touches them; the vocab-parallel
    embedding's Replicate gradient is cut to its Shard(0) rows (no communication)."""
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor, Replicate

    partial = []
    for p in params:
        g = p.grad
        if not isinstance(g, DTensor) or g.placements == p.placements:
            continue
        if any(pl.is_partial() for pl in g.placements):
            partial.append(p)
        else:
            p.grad = g.redistribute(g.device_mesh, p.placements)
    if not partial:
        return
    mesh = partial[0].grad.device_mesh
    dim = next(i for i, pl in enumerate(partial[0].grad.placements) if pl.is_partial())
    local = [p.grad.to_local() for p in partial]
    flat = torch.cat([t.reshape(-1) for t in local])
    dist.all_reduce(flat, group=mesh.get_group(dim))
    offset = 0
    for p, t in zip(partial, local):
        placements = [Replicate() if pl.is_partial() else pl for pl in p.grad.placements]
        part = flat[offset:offset + t.numel()].view_as(t)
        offset += t.numel()
        p.grad = DTensor.from_local(part, mesh, placements, run_check=False)


def apply_fsdp(model: nn.Module, mesh: DeviceMesh, reshard_after_forward: bool,
               expert_mesh: DeviceMesh | None = None,
               mp_policy: MixedPrecisionPolicy | None = None) -> None:
    """FSDP2: one unit per transformer block, the rest at the root. Under EP each MoE layer's
    rank-local experts are a unit of their own over ``expert_mesh`` (the expert-data-parallel
    group: the ranks holding the same experts), as torchtitan's ``apply_fsdp`` does.
    ``mp_policy``: FSDP2's ``MixedPrecisionPolicy`` on a GPU (trial/device.py), None in fp32."""
    import functools

    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    if mp_policy is not None:
        fully_shard = functools.partial(fully_shard, mp_policy=mp_policy)

    for layer in model.layers.values():
        ff = layer.feed_forward
        if expert_mesh is not None and isinstance(ff, MoE):
            fully_shard(ff.experts, mesh=expert_mesh, reshard_after_forward=reshard_after_forward)
            # FSDP2 would average over the EDP group only; the loss is a mean over all dp x cp
            # ranks (each expert's gradient already sums its EP group's tokens), so divide by
            # dp x cp, torchtitan's fsdp_gradient_divide_factor for the experts.
            ff.experts.set_gradient_divide_factor(float(mesh.size()))
            if dist.get_backend() == "gloo":     # gloo has no PREMUL_SUM: sum, then divide
                ff.experts.set_force_sum_reduction_for_comms(True)
        fully_shard(layer, mesh=mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward)


def apply_ddp(model: nn.Module, mesh: DeviceMesh, ignore: list[str] = ()) -> nn.Module:
    """DDP over the data-parallel group (gradients live in the buckets: bucket views);
    ``ignore`` names parameters DDP must not reduce (the experts under EP)."""
    from torch.nn.parallel import DistributedDataParallel

    if ignore:
        DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model, list(ignore))
    return DistributedDataParallel(model, process_group=mesh.get_group(),
                                   gradient_as_bucket_view=True)


def parallelize(model: nn.Module, mesh: DeviceMesh, plan: Parallel, ep=None,
                seq_len: int = 0, expert_mesh: DeviceMesh | None = None,
                mp_policy: MixedPrecisionPolicy | None = None,
                shard_alone: bool = False) -> nn.Module:
    """Apply TP/SP, EP, CP, then DP (DDP, ZeRO-1's plain replicas, or FSDP2) to one pipeline
    stage's model. ``ep`` = (group, rank in it) and ``expert_mesh`` the 1-D expert-data-parallel
    mesh when plan.ep > 1; ``seq_len`` the whole sequence CP splits; ``mp_policy`` FSDP2's mixed
    precision (GPU trials); ``shard_alone``: apply FSDP2 (ZeRO-2/3) even on a 1-rank data-
    parallel group, so a one-GPU slice of an FSDP layout gathers, casts and frees its units as
    the full run does. Returns the module to call (DDP wraps; the others change the model in
    place)."""
    if plan.tp > 1:
        apply_tp(model, mesh["tp"], plan.sequence_parallel)
    experts = apply_ep(model, ep[0], ep[1], plan.ep) if plan.ep > 1 else []
    if plan.cp > 1:
        cp = mesh["cp"]
        apply_cp(model, cp.get_group(), cp.mesh.flatten().tolist(), seq_len)
    # CP ranks hold the same weights: gradients reduce over dp x cp (torchtitan's dp_shard_cp)
    dp_mesh = mesh["dp_cp"] if plan.cp > 1 else mesh["dp"]
    if plan.dp * plan.cp == 1 and not (shard_alone and plan.zero >= 2):
        return model
    if plan.zero >= 2:
        # ZeRO-2: gathered weights stay until backward (torchtitan's ZeRO-2 setting)
        apply_fsdp(model, dp_mesh, reshard_after_forward=plan.zero == 3 and plan.reshards,
                   expert_mesh=expert_mesh if plan.ep > 1 else None, mp_policy=mp_policy)
        return model
    return apply_ddp(model, dp_mesh, experts)   # ZeRO-1 = DDP gradients + a sharded optimizer


class Optimizers:
    """Several optimizers stepped as one (ZeRO-1 under EP: one per parameter group)."""

    def __init__(self, parts: list) -> None:
        self.parts = parts

    def step(self) -> None:
        for opt in self.parts:
            opt.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self.parts:
            opt.zero_grad(set_to_none=set_to_none)


def make_optimizer(model: nn.Module, plan: Parallel, mesh: DeviceMesh, optimizer: str,
                   experts: tuple[list, object] | None = None):
    """The scenario's optimizer (``adapters.optimizer_class``: AdamW, fused on GPUs; SGD with
    momentum; bitsandbytes' 8-bit AdamW; torchao's 4-bit AdamW; Adafactor) over the trainable
    parameters; ZeRO-1 wraps it in ZeroRedundancyOptimizer
    over the DP group.
    Under EP, ``experts`` = (the rank's expert parameters, the expert-data-parallel group):
    experts differ between EP ranks, so ZeRO-1 partitions them over that group with a second
    ZeroRedundancyOptimizer (Megatron-LM's expert distributed optimizer), the dense parameters
    over dp x cp."""
    from workbench.trial.adapters import optimizer_class

    # trainable parameters only: a LoRA base is frozen (trial/adapters.py)
    params = [p for p in model.parameters() if p.requires_grad]
    cls, kwargs = optimizer_class(optimizer, params[0].device.type if params else "cpu")
    if plan.zero == 1 and plan.dp * plan.cp > 1:
        import torch.distributed as dist
        from torch.distributed.optim import ZeroRedundancyOptimizer

        group = mesh["dp_cp" if plan.cp > 1 else "dp"].get_group()   # the estimator's dp x cp
        if experts is None:
            return ZeroRedundancyOptimizer(params, optimizer_class=cls, process_group=group,
                                           **kwargs)
        expert_params, edp_group = experts
        mine = {id(p) for p in expert_params}
        dense = [p for p in params if id(p) not in mine]
        routed = [p for p in params if id(p) in mine]
        parts = [ZeroRedundancyOptimizer(dense, optimizer_class=cls, process_group=group,
                                         **kwargs)]
        if dist.get_world_size(edp_group) > 1:
            parts.append(ZeroRedundancyOptimizer(routed, optimizer_class=cls,
                                                 process_group=edp_group, **kwargs))
        else:                   # no other rank holds these experts: nothing to shard
            parts.append(cls(routed, **kwargs))
        return Optimizers(parts)
    return cls(params, **kwargs)

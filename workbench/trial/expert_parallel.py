"""Expert parallelism for the trial model, kept out of the model as torchtitan's
``ExpertParallel`` is: each EP rank keeps E/ep experts of every MoE layer, and hooks on the
experts module dispatch the routed tokens to their experts' ranks before it runs and bring the
results back after (``all_to_all_single`` with uneven splits, differentiable). Also here: the EP
and expert-data-parallel groups, and the experts' gradient reduction over the latter."""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed._functional_collectives import all_to_all_single_autograd
from torch.distributed.device_mesh import DeviceMesh

from workbench.scenario.types import Parallel
from workbench.trial.model import Experts, MoE


class ExpertParallel:
    """One MoE layer's token dispatch and combine over an EP group, as forward hooks on its
    ``experts``: the experts module computes its local experts on the rows it is given."""

    def __init__(self, group, ep_rank: int, ep_size: int) -> None:
        self.group, self.ep_rank, self.ep_size = group, ep_rank, ep_size
        self._routing: tuple = ()        # one call's routing, from dispatch to combine

    def apply(self, moe: MoE) -> None:
        """Keep this rank's experts [ep_rank x E/ep, (ep_rank + 1) x E/ep) and hook them."""
        per = moe.experts.num_experts // self.ep_size
        moe.experts = moe.experts.local(self.ep_rank * per, per)
        moe.experts.register_forward_pre_hook(self._dispatch)
        moe.experts.register_forward_hook(self._combine)

    def _dispatch(self, experts: Experts, args: tuple) -> tuple:
        """Send each (token, expert) pair to the rank holding the expert. The row counts travel
        first: one all-to-all of the tokens per expert (Megatron's dispatcher exchanges the
        same counts with an all-gather), from which every rank knows which local expert each
        row it receives is for; rows arrive by source rank, each source's sorted by expert."""
        tokens, weights, chosen = args
        local = experts.num_experts
        flat_expert = chosen.reshape(-1)
        order = torch.argsort(flat_expert, stable=True)
        token_of = torch.arange(tokens.shape[0]).repeat_interleave(chosen.shape[1])[order]
        per_expert = torch.bincount(flat_expert, minlength=local * self.ep_size)
        got = torch.empty_like(per_expert)     # (source rank, local expert) row counts
        dist.all_to_all_single(got, per_expert, group=self.group)
        send_sizes = per_expert.view(self.ep_size, local).sum(1).tolist()
        recv_sizes = got.view(self.ep_size, local).sum(1).tolist()
        recv_expert = torch.arange(local).repeat(self.ep_size).repeat_interleave(got)
        x_in = all_to_all_single_autograd(tokens[token_of], recv_sizes, send_sizes, self.group)
        self._routing = (tokens, weights, order, token_of, send_sizes, recv_sizes)
        # the routing weights stay here (applied in _combine): each row goes to one expert, 1x
        return x_in, torch.ones(x_in.shape[0], 1, dtype=x_in.dtype), recv_expert[:, None]

    def _combine(self, experts: Experts, args: tuple, y: torch.Tensor) -> torch.Tensor:
        """Send the experts' rows back to their tokens' ranks and sum them per token, weighted."""
        tokens, weights, order, token_of, send_sizes, recv_sizes = self._routing
        self._routing = ()
        back = all_to_all_single_autograd(y, send_sizes, recv_sizes, self.group)
        w = weights.reshape(-1)[order, None].to(tokens.dtype)
        return torch.zeros_like(tokens).index_add(0, token_of, back * w)


def apply_ep(model: nn.Module, group, ep_rank: int, ep_size: int) -> list[str]:
    """Expert parallelism on every MoE layer of ``model`` (``ExpertParallel``). Returns the names
    of the expert parameters (they are not replicated over data parallelism: the caller
    excludes them from DDP and reduces their gradients over the expert-data-parallel group,
    FSDP2 shards them over it)."""
    names = []
    for mod_name, mod in model.named_modules():
        if isinstance(mod, MoE):
            ExpertParallel(group, ep_rank, ep_size).apply(mod)
            names += [f"{mod_name}.experts.{n}" for n, _ in mod.experts.named_parameters()]
    return names


def expert_groups(mesh: DeviceMesh, par: Parallel) -> tuple[tuple[object, int], DeviceMesh]:
    """((this rank's EP group, its rank in it), its expert-data-parallel group as a 1-D
    DeviceMesh for FSDP2). EP groups are ``ep`` consecutive ranks of the dp x cp index (EP is
    drawn from dp x cp, contract 1; the index is the flattened ``dp_cp`` mesh's); the expert-
    data-parallel groups stride across them (ranks holding the same experts). Every rank
    creates every group, in the same order. Both are new groups, never the default one, so
    their traffic is told apart from the dense dp x cp group's."""
    grid = mesh.mesh.reshape(par.pp, par.dp * par.cp, par.tp)    # (pp, dp x cp, tp)
    me = dist.get_rank()
    mine_ep = mine_edp = None
    ep_rank = 0
    for pp in range(grid.shape[0]):
        for tp in range(grid.shape[2]):
            ranks = grid[pp, :, tp].tolist()
            for g0 in range(0, len(ranks), par.ep):
                members = ranks[g0:g0 + par.ep]
                group = dist.new_group(members)
                if me in members:
                    mine_ep, ep_rank = group, members.index(me)
            for j in range(par.ep):
                members = ranks[j::par.ep]
                group = dist.new_group(members)
                if me in members:
                    mine_edp, edp_ranks = group, members
    edp_mesh = DeviceMesh.from_group(mine_edp, mesh.device_type, mesh=edp_ranks,
                                     mesh_dim_names=("edp",))
    return (mine_ep, ep_rank), edp_mesh


def expert_parameters(modules: list[nn.Module]) -> list[nn.Parameter]:
    """The rank's routed-expert parameters (every MoE layer's ``experts``)."""
    return [p for m in modules for mod in m.modules() if isinstance(mod, MoE)
            for p in mod.experts.parameters()]


def reduce_expert_grads(modules: list[nn.Module], edp_group, dp: int) -> None:
    """Expert gradients arrive summed over the EP group's tokens; summing over the expert-data-
    parallel replicas and dividing by ``dp`` (= dp x cp) gives the mean over every data-parallel
    rank's loss, as DDP gives the dense parameters."""
    grads = [p.grad for p in expert_parameters(modules) if p.grad is not None]
    if not grads:
        return
    if dist.get_world_size(edp_group) > 1:   # one coalesced all-reduce, as a DDP bucket
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat, group=edp_group)
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()
    for g in grads:
        g.div_(dp)

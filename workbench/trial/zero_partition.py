"""What PyTorch's ZeroRedundancyOptimizer gives each rank, predicted from the model shape.

The trials run ZeRO-1 as PyTorch ships it (``torch.distributed.optim.ZeroRedundancyOptimizer``),
which assigns whole parameter tensors to ranks — largest first, each to the rank with the
fewest elements so far (``_partition_parameters``) — where Megatron-LM's distributed optimizer
splits one flat buffer evenly (the estimator's ZeRO-1). After its step every rank broadcasts
the tensors it owns (``_sync_params``), and the gradients are all-reduced by DDP beforehand.
This module lists the trial model's parameter tensors in registration order from the shape
(no torch), so the prediction stays a calculation; a test holds it equal to the module.
"""
from __future__ import annotations

from workbench.catalog.types import ModelShape


def parameter_tensors(m: ModelShape, experts: int | None = None) -> list[int]:
    """Element counts of the trial Transformer's parameters, in ``Module.parameters()`` order
    (tied output weight once), for the unsharded model. ``experts``: routed experts listed per
    MoE layer (all by default; 0 gives the dense tensors an expert-parallel rank shares with
    its whole data-parallel group, ``routed_expert_tensors`` its own experts)."""
    h, q, kv = m.hidden, m.heads * m.dim_per_head, m.kv_dim
    norm = [h, h] if m.norm == "layernorm" else [h]

    def linear(n_in: int, n_out: int, bias: bool) -> list[int]:
        return [n_in * n_out] + ([n_out] if bias else [])

    def mlp(ffn: int, bias: bool) -> list[int]:
        out = linear(h, ffn, bias) + linear(ffn, h, bias)
        return out + (linear(h, ffn, bias) if m.mlp == "swiglu" else [])

    from workbench.estimate.params import is_moe_layer

    sizes = [m.vocab * h]
    positions = int(m.extra.get("position_embeddings", 0))
    if positions:
        sizes.append(positions * h)
    for i in range(m.layers):
        sizes += norm
        sizes += (linear(h, q, m.bias) + linear(h, kv, m.bias) + linear(h, kv, m.bias)
                  + linear(q, h, m.bias))
        sizes += norm
        if is_moe_layer(m, i):
            e = m.moe
            sizes.append(e.experts * h)                              # router
            for _ in range(e.experts if experts is None else experts):
                sizes += mlp(e.expert_ffn_hidden, False)
            if e.shared_experts:
                sizes += mlp(e.shared_experts * e.expert_ffn_hidden, False)
        else:
            sizes += mlp(m.ffn_hidden, m.bias)
    sizes += norm
    if not m.tied_embeddings:
        sizes.append(m.vocab * h)
    return sizes


def routed_expert_tensors(m: ModelShape, local: int) -> list[int]:
    """Element counts of ``local`` routed experts per MoE layer (an expert-parallel rank's
    ``experts`` modules), in ``Module.parameters()`` order: each expert's bias-free w1, w2
    (and w3 for SwiGLU), hidden x expert_ffn_hidden elements each."""
    from workbench.estimate.params import is_moe_layer

    if m.moe is None:
        return []
    per_expert = [m.hidden * m.moe.expert_ffn_hidden] * (3 if m.mlp == "swiglu" else 2)
    moe_layers = sum(is_moe_layer(m, i) for i in range(m.layers))
    return per_expert * local * moe_layers


def zero_redundancy_partition(sizes: list[int], world: int) -> list[list[int]]:
    """Indices of the tensors each rank owns: sorted by size, largest first (a stable sort), each
    to the rank holding the fewest elements so far (the lowest rank on a tie)."""
    owned: list[list[int]] = [[] for _ in range(world)]
    load = [0] * world
    for i in sorted(range(len(sizes)), key=lambda j: sizes[j], reverse=True):
        r = load.index(min(load))
        owned[r].append(i)
        load[r] += sizes[i]
    return owned

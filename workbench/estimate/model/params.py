"""Parameter counts: per layer, per pipeline rank, and per GPU after TP/EP sharding.

Counting follows the shape family of ``ModelShape`` (the same rules the presets' expected counts
use, see catalog/models.py): q/k/v/o projections with GQA or multi-head latent attention
(estimate/model/attention.py), MLP (SwiGLU: 3·h·f; GELU: 2·h·f),
MoE layers with a router of h·E, routed and shared experts, norms, embeddings and an untied head.
Tensor-parallel sharding follows Megatron-LM (Shoeybi et al. 2019): q/k/v and the first MLP
matrix column-parallel, o and the second MLP matrix row-parallel, embedding and head
vocab-parallel; norms, the row-parallel biases and the router are replicated. Experts are split
over EP ranks (E/ep each) and each expert's MLP over TP ranks (expert TP = TP).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workbench.catalog.types import ModelShape
from workbench.estimate.model.attention import (attention_weights,
                                                 sequence_parallel_attention_weights)
from workbench.scenario.schedules import schedule
from workbench.scenario.types import Parallel


def _plain(x):
    return x.item() if np.ndim(x) == 0 else x


@dataclass(frozen=True)
class LayerParams:
    """Parameters of one transformer layer as one GPU holds them (after TP/EP sharding)."""

    dense: int     # replicated over data-parallel ranks: attention, norms, router, dense/shared MLP
    expert: int    # routed experts held by this EP rank
    is_moe: bool

    @property
    def total(self) -> int:
        return self.dense + self.expert


def _mlp(model: ModelShape, ffn: int, tp: int) -> tuple[int, int]:
    """(tp-sharded, replicated) parameters of one MLP of hidden size ``ffn``."""
    h = model.hidden
    if model.mlp == "swiglu":
        sharded = 3 * h * ffn
        replicated = 0
        if model.bias:
            sharded += 2 * ffn
            replicated += h
    else:
        sharded = 2 * h * ffn
        replicated = 0
        if model.bias:
            sharded += ffn
            replicated += h
    return sharded // tp, replicated


def norm_params(model: ModelShape) -> int:
    """One norm: RMSNorm has a weight; LayerNorm a weight and a bias."""
    return model.hidden * (2 if model.norm == "layernorm" else 1)


def attention_params(model: ModelShape, tp: int = 1) -> int:
    """Attention projections (+ biases; MLA: + q/kv norms) held by one TP rank. MLA's
    down-projections and q/kv norms are replicated over TP (attention_shapes)."""
    sharded, replicated = attention_weights(model)
    return sharded // tp + replicated


def is_moe_layer(model: ModelShape, index: int) -> bool:
    """Layer ``index`` (0-based) has an MoE block: all but the leading ``dense_layers``."""
    return model.moe is not None and index >= model.moe.dense_layers


def layer_kinds(model: ModelShape) -> tuple[tuple[bool, int], ...]:
    """(is MoE, how many layers) for each kind of layer present: the layers of one kind are
    identical, so a whole-model sum is a product per kind, not a loop over every layer."""
    moe = 0 if model.moe is None else max(0, model.layers - model.moe.dense_layers)
    return tuple((kind, n) for kind, n in ((False, model.layers - moe), (True, moe)) if n)


def _first_of(model: ModelShape, moe: bool) -> int:
    """Index of the first layer of that kind."""
    return model.moe.dense_layers if moe else 0


def layer_params(model: ModelShape, index: int, tp: int = 1, ep: int = 1,
                 etp: int | None = None) -> LayerParams:
    """Parameters of layer ``index`` held by one GPU of a (tp, ep) layout whose routed experts
    are split over ``etp`` ranks (MoE parallel folding; default ``tp``)."""
    dense = attention_params(model, tp) + 2 * norm_params(model)
    expert = 0
    moe = is_moe_layer(model, index)
    if moe:
        m = model.moe
        dense += model.hidden * m.experts  # router, replicated
        if m.shared_experts:
            s, r = _mlp(model, m.shared_experts * m.expert_ffn_hidden, tp)
            dense += s + r
        s, r = _mlp(model, m.expert_ffn_hidden, etp or tp)
        expert = (m.experts // ep) * (s + r)
    else:
        s, r = _mlp(model, model.ffn_hidden, tp)
        dense += s + r
    return LayerParams(dense=dense, expert=expert, is_moe=moe)


def embedding_params(model: ModelShape, tp: int = 1) -> int:
    """Input embedding on one TP rank (vocab-parallel, ceil(v/tp) rows) plus learned positions."""
    positions = int(model.extra.get("position_embeddings", 0)) * model.hidden
    return math.ceil(model.vocab / tp) * model.hidden + positions


def head_params(model: ModelShape, tp: int = 1, separate_stage: bool = False) -> int:
    """Final norm and output projection on one TP rank. A tied head costs nothing extra unless
    it sits on another pipeline stage than the embedding (Megatron then keeps a copy there)."""
    head = 0 if (model.tied_embeddings and not separate_stage) else \
        math.ceil(model.vocab / tp) * model.hidden
    return norm_params(model) + head


def sequence_parallel_replicated(model: ModelShape, layers, has_head):
    """(elements, tensors) of the norms a pipeline rank holding ``layers`` layers (and the head
    when ``has_head``) replicates over TP inside the sequence-parallel region: two per layer and
    the final norm (arrays allowed). Each rank normalises only its part of the sequence, so
    their gradients are partial sums that TP must add up. Megatron-LM also adds the biases of
    row-parallel layers to that all-reduce (they are added after the reduce-scatter); PyTorch's
    RowwiseParallel gives them full gradients (measured in the trials), so they are not
    counted: h elements per bias, a few KB a step. MLA layers add their replicated
    down-projections and q/kv norms (``sequence_parallel_attention_weights``)."""
    norm_tensors = 2 if model.norm == "layernorm" else 1
    norms = 2 * layers + has_head
    if model.mla:
        el, ts = sequence_parallel_attention_weights(model)
        return norms * norm_params(model) + layers * el, norms * norm_tensors + layers * ts
    return norms * norm_params(model), norms * norm_tensors


def total_params(model: ModelShape) -> int:
    """All parameters of the model (unsharded; tied embeddings counted once)."""
    layers = sum(n * layer_params(model, _first_of(model, moe)).total
                 for moe, n in layer_kinds(model))
    return layers + embedding_params(model) + head_params(model)


def active_params(model: ModelShape) -> int:
    """Parameters one token passes through: routed experts count top_k of E."""
    total = total_params(model)
    if model.moe is None:
        return total
    m = model.moe
    s, r = _mlp(model, m.expert_ffn_hidden, 1)
    moe_layers = sum(n for moe, n in layer_kinds(model) if moe)
    return total - moe_layers * (m.experts - m.top_k) * (s + r)


def chunk_start(layers, chunks, chunk):
    """First layer of model chunk ``chunk`` when ``layers`` split into ``chunks`` contiguous
    runs, the first ``layers % chunks`` one longer (torchtitan's even split; arrays allowed)."""
    base, rem = np.divmod(layers, chunks)
    return _plain(chunk * base + np.minimum(chunk, rem))


def chunk_size(layers, chunks, chunk):
    """Layers in model chunk ``chunk`` (arrays allowed)."""
    base, rem = np.divmod(layers, chunks)
    return _plain(base + (np.asarray(chunk) < rem))


def chunk_layers(layers: int, chunks: int) -> list[range]:
    """Each model chunk's run of layer indices."""
    out = []
    for j in range(chunks):
        start = chunk_start(layers, chunks, j)
        out.append(range(start, start + chunk_size(layers, chunks, j)))
    return out


def chunk_of(rank, k, pp, v_shape: bool):
    """The ``k``-th model chunk of pipeline ``rank``: looped (chunk rank + k*pp) for interleaved
    schedules, V-shaped (chunks rank and 2pp-1-rank) for DualPipeV (PyTorch pipelining's
    placements; arrays allowed)."""
    rank, k, pp = np.asarray(rank), np.asarray(k), np.asarray(pp)
    if v_shape:
        return _plain(np.where(k == 0, rank, 2 * pp - 1 - rank))
    return _plain(rank + k * pp)


def chunk_owner(chunk, pp, v_shape: bool):
    """The pipeline rank holding model ``chunk`` (the inverse of ``chunk_of``)."""
    chunk, pp = np.asarray(chunk), np.asarray(pp)
    if v_shape:
        return _plain(np.where(chunk < pp, chunk, 2 * pp - 1 - chunk))
    return _plain(chunk % pp)


def rank_chunks(par: Parallel) -> list[tuple[int, ...]]:
    """Model chunks of each pipeline rank, in placement order."""
    v_shape = schedule(par.pp_schedule).v_shape and par.pp > 1
    return [tuple(int(chunk_of(r, k, par.pp, v_shape)) for k in range(par.chunks_per_rank))
            for r in range(par.pp)]

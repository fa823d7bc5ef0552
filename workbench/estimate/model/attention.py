"""Shapes of a layer's attention: its projection GEMMs under tensor parallelism, the widths of
the query/key/value tensors the attention kernel reads, and the core-attention widths.

Two families (``ModelShape.mla``):

- MHA / GQA (Megatron-LM ``SelfAttention``): one column-parallel ``linear_qkv`` (hidden ->
  (q + 2 kv) / t) and the row-parallel ``linear_proj`` (q / t -> hidden).
- Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434 Sec. 2.1; Megatron-Core
  ``MLASelfAttention`` in megatron/core/transformer/multi_latent_attention.py @ d98e8a64):
  W_DQ (hidden -> q_lora) and W_DKV (hidden -> kv_lora + rope) are ``TELinear`` with
  ``parallel_mode='duplicated'`` (gpt_layer_specs.py: ``linear_q_down_proj=backend.linear()``):
  replicated on every TP rank and, under sequence parallelism, run on the rank's s/t tokens
  (``q_compressed: [s / TP, b, q_lora_rank]``); W_UQ (q_lora -> heads (nope + rope) / t, or
  W_Q hidden -> heads (nope + rope) / t without query compression) and W_UKV (kv_lora ->
  heads (nope + v) / t) are column-parallel; W_O (heads v / t -> hidden) is row-parallel.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from workbench.catalog.types import ModelShape


class AttentionGemm(NamedTuple):
    """One projection GEMM per token row: (rows x k) @ (k x n), ``count`` of them, on
    ``rows`` x the caller's token rows (1, or 1/t for MLA's down-projections under SP)."""

    n: float
    k: float
    count: int = 1
    rows: float = 1.0
    name: str = ""          # qkv, proj; MLA: q_down, q_up (q without compression), kv_down,
    #                         kv_up, proj


def attention_gemms(m: ModelShape, t: int = 1, sp: bool = False) -> list[AttentionGemm]:
    """The attention projection GEMMs of one layer on one rank of TP degree ``t`` (``sp``:
    sequence parallelism, which shards MLA's replicated down-projections' rows)."""
    h = m.hidden
    if not m.mla:
        q, kv = m.heads * m.dim_per_head, m.kv_dim
        return [AttentionGemm((q + 2 * kv) / t, h, 1, 1.0, "qkv"),
                AttentionGemm(h, q / t, 1, 1.0, "proj")]
    qk = m.heads * m.qk_head_dim
    down = 1.0 / t if sp else 1.0
    out = []
    if m.q_lora_rank:
        out += [AttentionGemm(m.q_lora_rank, h, 1, down, "q_down"),
                AttentionGemm(qk / t, m.q_lora_rank, 1, 1.0, "q_up")]
    else:
        out.append(AttentionGemm(qk / t, h, 1, 1.0, "q"))
    out += [AttentionGemm(m.kv_lora_rank + m.qk_rope_head_dim, h, 1, down, "kv_down"),
            AttentionGemm(m.heads * (m.qk_nope_head_dim + m.v_head_dim) / t, m.kv_lora_rank,
                          1, 1.0, "kv_up"),
            AttentionGemm(h, m.heads * m.v_head_dim / t, 1, 1.0, "proj")]
    return out


def attention_gemm_macs(m: ModelShape) -> float:
    """Multiply-adds per token of the attention projections (whole layer, no TP split)."""
    h = m.hidden
    if not m.mla:
        q, kv = m.heads * m.dim_per_head, m.kv_dim
        return h * (q + 2 * kv) + q * h
    return sum(g.n * g.k * g.count for g in attention_gemms(m, 1))


def attention_weights(m: ModelShape) -> tuple[int, int]:
    """(TP-sharded, TP-replicated) attention weights of one layer, biases and MLA's q/kv norms
    included, before the TP split. MLA: the down-projections and the q/kv norms are replicated;
    only ``linear_proj`` has a bias (Megatron-Core builds every MLA q/kv linear with
    ``bias=False``; ``linear_proj`` follows ``add_bias_linear``)."""
    h = m.hidden
    if not m.mla:
        q, kv = m.heads * m.dim_per_head, m.kv_dim
        sharded = h * q + 2 * h * kv + q * h
        replicated = 0
        if m.bias:
            sharded += q + 2 * kv
            replicated += h  # the row-parallel output bias is added after the all-reduce
        return sharded, replicated
    sharded, replicated = 0, 0
    norm = 2 if m.norm == "layernorm" else 1
    for g in attention_gemms(m, 1):
        w = int(g.n * g.k) * g.count
        if g.name in ("q_down", "kv_down"):
            replicated += w
        else:
            sharded += w
    replicated += norm * (m.q_lora_rank + m.kv_lora_rank)      # q_layernorm, kv_layernorm
    if m.bias:
        replicated += h
    return sharded, replicated


def sequence_parallel_attention_weights(m: ModelShape) -> tuple[int, int]:
    """(elements, tensors) of one layer's attention weights that are replicated over TP and,
    under sequence parallelism, see only the rank's tokens, so TP all-reduces their gradients
    (besides the layer norms, which params.sequence_parallel_replicated counts): MLA's
    down-projections and q/kv norms (Megatron-Core marks duplicated ``TELinear`` weights
    ``sequence_parallel``, extensions/transformer_engine.py @ d98e8a64). 0 for MHA/GQA."""
    if not m.mla:
        return 0, 0
    norm = 2 if m.norm == "layernorm" else 1
    q = m.q_lora_rank
    elements = m.hidden * (q + m.kv_lora_rank + m.qk_rope_head_dim) + norm * (q + m.kv_lora_rank)
    tensors = (2 if q else 1) * (1 + norm)
    return elements, tensors


def qkv_widths(m: ModelShape) -> tuple[int, int, int]:
    """Per-token widths of the query, key and value tensors fed to the attention kernel (whole
    layer, before the TP split). MHA/GQA: (heads d, kv_heads d, kv_heads d); MLA: every head
    gets its own key (nope + shared rope) and value, (heads (nope+rope), heads (nope+rope),
    heads v)."""
    if not m.mla:
        return m.heads * m.dim_per_head, m.kv_dim, m.kv_dim
    qk = m.heads * m.qk_head_dim
    return qk, qk, m.heads * m.v_head_dim


def core_attention_widths(m: ModelShape) -> tuple[int, int]:
    """(QK^T contraction width, AV output width) per token over all heads: heads x qk head dim
    and heads x value head dim (equal for MHA/GQA)."""
    return m.heads * m.qk_head_dim, m.heads * m.value_head_dim


def tp_gather_width(m: ModelShape) -> int:
    """Per-token width the attention block all-gathers over TP under sequence parallelism (and
    reduce-scatters in backward): the hidden state for MHA/GQA; for MLA the up-projections'
    inputs (q_lora, or hidden without query compression, + kv_lora) and the shared RoPE key,
    since the down-projections run on the rank's own tokens."""
    if not m.mla:
        return m.hidden
    return (m.q_lora_rank or m.hidden) + m.kv_lora_rank + m.qk_rope_head_dim


class AttentionKernel(NamedTuple):
    """One rank's attention kernel call: ``batch`` sequences of ``seq`` queries (the rank's
    share of the sequence under context parallelism), its ``heads`` and ``kv_heads`` (per TP
    rank; a KV head is replicated when there are fewer than TP ranks), query/key head dim and
    value head dim. What a calibrated GPU profile looks its measured attention up by."""

    batch: int
    seq: int
    heads: int
    kv_heads: int
    head_dim: int
    value_dim: int


def attention_kernel(m: ModelShape, micro_batch: int, seq_len: int, t: int = 1,
                     cp: int = 1) -> AttentionKernel:
    """The attention kernel of one rank of TP degree ``t`` and CP degree ``cp``. MLA gives
    every head its own key and value (``qkv_widths``): as many KV heads as heads. Numbers, or
    arrays over shapes (then the fields that vary are integer arrays)."""
    kv = m.heads if m.mla else m.kv_heads
    t = np.asarray(t)
    # np.rint rounds half to even, as Python's round does
    return AttentionKernel(batch=_int(micro_batch),
                           seq=_int(np.maximum(1, np.rint(seq_len / np.asarray(cp)))),
                           heads=_int(np.maximum(1, m.heads // t)),
                           kv_heads=_int(np.maximum(1, kv // t)),
                           head_dim=m.qk_head_dim, value_dim=m.value_head_dim)


def _int(x):
    """A Python int for a number, an int64 array for an array."""
    x = np.asarray(x).astype(np.int64)
    return int(x) if x.ndim == 0 else x

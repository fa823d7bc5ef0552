"""Floating-point work of one training step, per layer and per GPU.

Counts follow the standard matmul accounting (2 FLOPs per multiply-add; Kaplan et al. 2020,
Narayanan et al. 2021 Eq. 2): a GEMM of (m x k) by (k x n) is 2·m·k·n FLOPs forward, and its
backward is twice that (input gradient + weight gradient).

Attention convention: *model* FLOPs (for MFU, as reported by Megatron-LM, PaLM and torchtitan)
count the full s x s score matrix — 4·s·h_q FLOPs per token per layer forward (QK^T and AV),
12·s·h_q forward + backward. Multi-head latent attention: QK^T contracts over heads·(nope + rope)
and AV produces heads·v_head_dim, 2·s·(heads·(nope+rope) + heads·v) per token forward.
*Executed* FLOPs for a causal FlashAttention kernel skip the masked upper triangle, about half;
FlashAttention's backward recomputes the scores, so it runs 5 matmuls to the forward's 2 (Dao
2023, FlashAttention-2 Sec. 3), i.e. 2.5 x the forward.
"""
from __future__ import annotations

from dataclasses import dataclass

from workbench.catalog.types import ModelShape
from workbench.estimate.model.attention import attention_gemm_macs, core_attention_widths


@dataclass(frozen=True)
class LayerFlops:
    """Forward FLOPs of one layer for ``tokens`` tokens with ``s_kv`` keys each (whole layer,
    before any parallel split)."""

    gemm: float            # q/k/v/o projections, MLP or router + experts, all matmuls
    attention: float       # QK^T and AV, full (non-causal) count
    expert_gemm: float     # the part of ``gemm`` done by routed experts (split by EP)


def layer_flops(model: ModelShape, tokens: float, s_kv: float, moe_layer: bool) -> LayerFlops:
    """Forward FLOPs of one transformer layer."""
    h = model.hidden
    mats = 3 if model.mlp == "swiglu" else 2
    gemm = 2 * tokens * attention_gemm_macs(model)
    expert = 0.0
    if moe_layer:
        m = model.moe
        gemm += 2 * tokens * h * m.experts                                   # router
        expert = 2 * tokens * m.top_k * mats * h * m.expert_ffn_hidden
        gemm += expert + 2 * tokens * m.shared_experts * mats * h * m.expert_ffn_hidden
    else:
        gemm += 2 * tokens * mats * h * model.ffn_hidden
    qk, v = core_attention_widths(model)
    attention = 2 * 2 * tokens * s_kv * qk if qk == v else 2 * tokens * s_kv * (qk + v)
    return LayerFlops(gemm=gemm, attention=attention, expert_gemm=expert)


def logits_flops(model: ModelShape, tokens: float) -> float:
    """Forward FLOPs of the output projection."""
    return 2 * tokens * model.hidden * model.vocab


def step_flops(model: ModelShape, seq_len: int, global_batch: int, training=None
               ) -> tuple[float, float]:
    """(forward, forward + backward) model FLOPs of one optimizer step (no recompute, full
    attention). Training every weight, the backward is twice the forward (input and weight
    gradients). LoRA / QLoRA (``training.method``): frozen weights get no weight gradient, so a
    frozen linear's backward equals its forward; attention's backward stays twice its forward;
    the adapters add 6 x their forward (2 x (k + n) x r per token and projection); a frozen
    output head computes its input gradient only."""
    from workbench.estimate.model.params import layer_kinds
    tokens = seq_len * global_batch
    head = logits_flops(model, tokens)
    gemm = attention = adapters = 0.0
    for moe, n in layer_kinds(model):
        lf = layer_flops(model, tokens, seq_len, moe)
        gemm += n * lf.gemm
        attention += n * lf.attention
        if training is not None and training.adapters:
            from workbench.estimate.model.finetune import adapted
            k_tokens = {False: tokens, True: tokens * (model.moe.top_k / model.moe.experts
                                                       if model.moe else 0)}
            adapters += n * sum(2 * k_tokens[p.expert] * (p.k + p.n) * training.lora.rank
                                * p.count for p in adapted(training, model, moe,
                                                           model.moe.experts if moe else 1))
    forward = head + gemm + attention + adapters
    if training is None or not training.adapters:
        return forward, 3 * forward
    from workbench.estimate.model.finetune import edge_trainable
    head_back = 2 * head if edge_trainable(training, "head") else head
    return forward, forward + gemm + 2 * attention + 2 * adapters + head_back


def model_flops_per_step(model: ModelShape, seq_len: int, global_batch: int,
                         training=None) -> float:
    """Model FLOPs of one optimizer step (``step_flops``): the numerator of MFU."""
    return step_flops(model, seq_len, global_batch, training)[1]

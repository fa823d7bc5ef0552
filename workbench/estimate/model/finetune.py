"""Fine-tuning: which weights train, the stored format of the frozen ones, and the adapters.

``training.method`` pretrain and full train every weight (the same mechanisms; a fine-tune only
trains on fewer tokens). LoRA (Hu et al. 2021, arXiv:2106.09685) freezes the base and trains
two low-rank matrices per target projection, y = W x + (alpha/r) B A x, A: r x k, B: n x r;
QLoRA (Dettmers et al. 2023, arXiv:2305.14314) stores the frozen base of the block linears in
4-bit NormalFloat (or 8 bits) and dequantises it for every GEMM. What follows from that,
mechanism by mechanism (the cost model composes them):

- memory: frozen weights in their stored format, no gradient and no optimizer state; adapters
  (and ``lora.trainable`` parts) with the engine's state bytes (``model_states``);
- activations: a linear whose weight is frozen needs its input only for the input gradient's
  GEMM with the weight, which autograd does not save: PyTorch's codegen saves ``mm``'s ``self``
  only under ``grad_fn->should_compute_output(1)`` (torchgen/packaged/autograd/
  gen_variable_type.py ``guard_for``, torch 2.13.0; derivatives.yaml ``mm``: ``mat2:
  mm_mat2_backward(grad, self, ...)``), and bitsandbytes' ``MatMul4Bit`` saves ``(None, B)``
  (bitsandbytes/autograd/_functions.py @ 95f9af30, L357-360). An adapted projection's input is
  saved all the same, by its ``lora_A``; each adapter also saves its r-wide hidden for
  ``lora_B`` (``activations``);
- time: no weight-gradient GEMMs for frozen weights; the adapters' skinny GEMMs (four
  backward, two forward per projection, through the kernel model: most are memory-bound);
  QLoRA's dequantisation of each linear's weight in forward, backward and recompute (bitsandbytes
  ``MatMul4Bit.backward`` dequantises again, L381-384);
- communication: gradients of the trainable parameters only; FSDP still gathers the frozen base,
  in its stored format.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.catalog.types import ModelShape
from workbench.scenario.types import Training

# NF4 (QLoRA Sec. 3; bitsandbytes Params4bit blocksize 64, nn/modules.py L219-231 @ 95f9af30):
# 4 bits per weight plus one fp32 absmax per 64-weight block; double quantisation stores the
# absmax in 8 bits with an fp32 constant per 256 of them (functional.py L939-941): 8/64 +
# 32/(64 x 256) bits per weight instead of 32/64. torchtune's to_nf4 uses the same blocks
# (torchao nf4tensor.py L988 ``block_size=64, scaler_block_size=256``).
NF4_BYTES = {False: 0.5 + 4 / 64, True: 0.5 + 1 / 64 + 4 / (64 * 256)}
# LLM.int8 (bitsandbytes Int8Params): one byte per weight and one fp32 scale per output row.
INT8_BYTES_PER_ROW = 4


@dataclass(frozen=True)
class Projection:
    """One linear projection of a layer as a GPU holds it: ``k`` inputs, ``n`` outputs (whole,
    before TP), its TP style (column: output split; row: input split; replicated), ``count``
    copies on the GPU (local routed experts), ``expert``: a routed expert's (it sees top_k x
    tokens spread over the experts)."""

    name: str
    k: int
    n: int
    style: str
    count: float = 1.0
    expert: bool = False


def projections(m: ModelShape, moe_layer: bool, local_experts: int = 1) -> list[Projection]:
    """The linear projections of one layer, named as LoRA targets name them (q, k, v, o, gate,
    up, down). Multi-head latent attention: q covers q_down and q_up (or q), k and v the shared
    kv_down / kv_up pair (PEFT names them q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj)."""
    h = m.hidden
    out: list[Projection] = []
    if m.mla:
        if m.q_lora_rank:
            out += [Projection("q", h, m.q_lora_rank, "replicated"),
                    Projection("q", m.q_lora_rank, m.heads * m.qk_head_dim, "column")]
        else:
            out.append(Projection("q", h, m.heads * m.qk_head_dim, "column"))
        out += [Projection("k", h, m.kv_lora_rank + m.qk_rope_head_dim, "replicated"),
                Projection("v", m.kv_lora_rank,
                           m.heads * (m.qk_nope_head_dim + m.v_head_dim), "column"),
                Projection("o", m.heads * m.v_head_dim, h, "row")]
    else:
        q, kv = m.heads * m.dim_per_head, m.kv_dim
        out += [Projection("q", h, q, "column"), Projection("k", h, kv, "column"),
                Projection("v", h, kv, "column"), Projection("o", q, h, "row")]

    def mlp(ffn: int, count: float = 1.0, expert: bool = False) -> list[Projection]:
        first = ["gate", "up"] if m.mlp == "swiglu" else ["up"]
        return ([Projection(p, h, ffn, "column", count, expert) for p in first]
                + [Projection("down", ffn, h, "row", count, expert)])

    if moe_layer:
        mo = m.moe
        if mo.shared_experts:
            out += mlp(mo.shared_experts * mo.expert_ffn_hidden)
        out += mlp(mo.expert_ffn_hidden, local_experts, expert=True)
    else:
        out += mlp(m.ffn_hidden)
    return out


def adapter_elements(p: Projection, r: int, t: int) -> float:
    """LoRA parameters of one projection on one TP rank: A (r x k) and B (n x r); a
    column-parallel projection splits B's rows, a row-parallel one A's columns, the other
    factor is replicated (Megatron/NeMo ``ParallelLinearAdapter``)."""
    if p.style == "column":
        return p.count * r * (p.k + p.n / t)
    if p.style == "row":
        return p.count * r * (p.k / t + p.n)
    return p.count * r * (p.k + p.n)


def adapted(tr: Training, m: ModelShape, moe_layer: bool, local_experts: int = 1
            ) -> list[Projection]:
    """The projections of one layer that carry adapters."""
    if not tr.adapters:
        return []
    return [p for p in projections(m, moe_layer, local_experts) if p.name in tr.lora.targets]


@dataclass(frozen=True)
class LayerSplit:
    """Elements of one layer on one GPU by role (after TP/EP sharding)."""

    trainable_dense: float
    trainable_expert: float
    quantized_dense: float      # frozen block-linear weights stored quantised (QLoRA)
    quantized_expert: float
    adapter_dense: float        # the adapters' elements: held beside the base's
    adapter_expert: float


def layer_split(m: ModelShape, tr: Training, moe_layer: bool, dense: float, expert: float,
                norms: float, t: int, etp: int, local_experts: int) -> LayerSplit:
    """Which of a layer's ``dense`` and ``expert`` elements train (all of them unless LoRA):
    the adapters and, with ``lora.trainable`` norms, the layer's norms. QLoRA quantises every
    block linear's weight (bitsandbytes replaces each ``nn.Linear`` but the output head;
    torchtune's qlora builders every block linear): all but the norms."""
    if not tr.adapters:
        return LayerSplit(dense, expert, 0.0, 0.0, 0.0, 0.0)
    t_dense = t_expert = 0.0
    for p in adapted(tr, m, moe_layer, local_experts):
        n = adapter_elements(p, tr.lora.rank, etp if p.expert else t)
        if p.expert:
            t_expert += n
        else:
            t_dense += n
    added = (t_dense, t_expert)
    if "norms" in tr.lora.trainable:
        t_dense += norms
    base_dense, base_expert = dense - norms, expert
    quantized = tr.method == "qlora"
    return LayerSplit(t_dense, t_expert, base_dense if quantized else 0.0,
                      base_expert if quantized else 0.0, *added)


def edge_trainable(tr: Training, part: str) -> bool:
    """Whether the embedding (``part`` "embeddings"), the output head ("head") or the final norm
    ("norms") trains."""
    return not tr.adapters or part in tr.lora.trainable


def quantized_bytes_per_param(tr: Training, m: ModelShape) -> float:
    """Bytes per frozen block-linear weight as QLoRA stores it (NF4 with its block constants,
    or int8 with a scale per output row)."""
    if tr.lora.quant == "int8":
        return 1 + INT8_BYTES_PER_ROW / m.hidden
    return NF4_BYTES[tr.lora.double_quant]


def largest_linear(m: ModelShape, t=1):
    """Elements of the largest block-linear weight on one TP rank (QLoRA dequantises one
    linear at a time into a compute-dtype buffer)."""
    ffn = m.ffn_hidden if m.moe is None else max(
        m.moe.expert_ffn_hidden, m.moe.shared_experts * m.moe.expert_ffn_hidden, m.ffn_hidden)
    return m.hidden * max(ffn, m.heads * m.dim_per_head) / t    # t: a number or an array


def linear_weights(m: ModelShape, moe: bool, tp, local_experts=1, etp=1):
    """Elements of one layer's linear weights on one GPU (TP-sharded: column and row
    projections split over ``tp``, routed experts over ``etp``; replicated MLA
    down-projections whole); arrays allowed. What an FP8 parameter all-gather carries in
    1 byte (torchao's ``Float8Linear.weight``; Megatron's ``fp8_param``: "primarily the
    weights of GEMMs")."""
    total = 0.0
    for p in projections(m, moe, local_experts):
        split = 1 if p.style == "replicated" else (etp if p.expert else tp)
        total = total + p.count * p.k * p.n / np.asarray(split, dtype=float)
    return total


def trainable_params(m: ModelShape, tr: Training) -> float:
    """Parameters that train in the whole model (no sharding): all of them without adapters;
    with LoRA / QLoRA the adapters of every layer (each routed expert's too) and the parts
    ``lora.trainable`` names (embeddings, the output head, the norms)."""
    from workbench.estimate.model.params import (embedding_params, head_params, layer_kinds,
                                                 norm_params, total_params)

    if not tr.adapters:
        return float(total_params(m))
    experts = m.moe.experts if m.moe is not None else 1
    total = 0.0
    for moe, n in layer_kinds(m):
        total += n * sum(adapter_elements(p, tr.lora.rank, 1)
                         for p in adapted(tr, m, moe, experts))
    if "embeddings" in tr.lora.trainable:
        total += embedding_params(m)
    if "head" in tr.lora.trainable and not m.tied_embeddings:
        total += head_params(m) - norm_params(m)
    if "norms" in tr.lora.trainable:
        total += (2 * m.layers + 1) * norm_params(m)
    return total

"""Activation memory saved for the backward pass, per layer and per microbatch.

Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
(arXiv:2205.05198), Section 4, generalised term by term:

- Their GPT layer (GELU MLP of 4h, LayerNorm, dropout, eager attention, 16-bit activations)
  stores ``s·b·h·(34 + 5·a·s/h)`` bytes (Eq. 1): attention 11·sbh + 5·a·s²·b, MLP 19·sbh,
  LayerNorms 4·sbh. This module reproduces that exactly for that layer and extends each term:
  GQA (K and V have kv_heads·head_dim columns), multi-head latent attention (``_mla_terms``),
  SwiGLU (Megatron's fused swiglu saves the
  2f-wide gate+up input and the f-wide product), RMSNorm, no dropout (modern pre-training),
  FlashAttention (Dao 2022: saves the output and the fp32 log-sum-exp instead of the s² scores),
  MoE (Megatron-Core MoE: tokens dispatched top_k times; per expert token count = k·tokens·
  capacity_factor/E on average), FP8 (GEMM inputs saved as 1-byte FP8, Transformer Engine),
  NVFP4 (the blocks' GEMM inputs as 4-bit E2M1 with a 1-byte scale per 16,
  ``engines.types.QUANTIZED_BYTES``).
- Tensor parallelism (Table 2): tensors inside the TP region divide by t; with sequence
  parallelism the rest divides by t too (Megatron saves the *sharded* GEMM inputs and
  all-gathers again in backward). ``pytorch_eager=True`` counts instead what eager PyTorch keeps
  (the trials' convention, checked against their saved-tensor hooks): the all-gathered
  sequence-parallel input, SwiGLU's four saved tensors, a 2-D copy of a 3-D input fed to a
  linear layer without bias (the q/k/v, first MLP and head inputs; not under SP), a
  sequence-parallel RMSNorm's sharded output, and the int64 token ids and targets.
- Context parallelism divides the sequence by cp (ring attention).
- Recompute: ``layer`` (torchtitan's layer SAC) checkpoints every ``recompute_every``-th block
  whole and keeps everything of the others. ``selective`` recomputes the core attention (drops the s² terms: Korthikanti's
  selective recomputation, ``sbh·34/t`` with SP); ``full`` stores only each layer's input
  (2·sbh, /t with SP) and recomputes the rest; one layer's full set is alive during recompute.
  Megatron's ``recompute_modules`` under selective free what each module discards
  (``module_recomputed``), rebuilt one layer at a time.
- LoRA: each adapter's r-wide hidden; with ``lora.dropout`` each adapted projection's dropped
  input and mask (``_adapter_dropout``).
Small terms are kept (norm statistics in fp32) so trials can be matched; Korthikanti omits them.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from itertools import chain

from workbench.catalog.types import ModelShape
from workbench.estimate.model.attention import qkv_widths
from workbench.engines.types import QUANTIZED_BYTES
from workbench.scenario.types import FP4_PRECISIONS, Parallel, Training


@dataclass(frozen=True)
class ActivationShape:
    """The per-GPU quantities the formulas need."""

    s: int            # local sequence length (seq_len / cp)
    s_kv: int         # keys each query attends to (the full sequence under ring attention)
    b: int            # micro-batch size
    t: int            # tensor-parallel degree
    sp: bool          # sequence parallelism
    elem: int         # bytes of a saved activation (2 for 16-bit, 4 for fp32)
    gemm_in: float    # bytes of a saved GEMM input (1 for fp8, 0.5625 for nvfp4)
    flash: bool
    recompute: str
    pytorch_eager: bool = False
    recompute_every: int = 2      # recompute "layer": every k-th block checkpointed
    et: int = 0                   # the routed experts' tensor-parallel degree (0: t)
    recompute_modules: frozenset = frozenset()   # Megatron's module recompute (selective)
    head_in: float = 0.0          # bytes of the output head's saved input (0: ``gemm_in``)
    # LoRA / QLoRA (estimate/model/finetune.py): linear inputs nothing keeps ("qkv", "proj", "fc1",
    # "fc2", "router", "head"), and the adapters, each saving an r-wide hidden per token
    dropped: frozenset = frozenset()
    lora_rank: int = 0
    lora_attention: int = 0       # adapted attention projections
    lora_mlp: int = 0             # adapted MLP projections (each routed expert's too)
    lora_dropout: frozenset = frozenset()   # adapted projections whose input goes through
    #                                         dropout (lora.dropout > 0): each keeps its own
    norm_trains: bool = True      # the norms' weights train (not under LoRA unless asked)
    logprobs_saved: bool = True   # the loss keeps fp32 log-probabilities for its backward (not
    #                               when compiled and fused, nor flash-attn's kernel: a
    #                               log-sum-exp per token instead)
    first_input_grad: bool = True  # the first layer's input needs a gradient (no: a frozen
    #                                embedding under LoRA; that layer's first norm keeps nothing)
    # The engine's conventions (``Engine`` fields of the same meaning):
    recompute_from_first: bool = False   # recompute "layer" checkpoints blocks 0, k, 2k, ...
    fused_swiglu: bool = False    # the SwiGLU saves its two inputs only (Liger), even eager
    probs_in_activation: bool = False   # the routing weights multiply the experts' activation
    fused_linear_loss: bool = False   # head + loss over token chunks (Liger): no logits kept
    vocab_split: bool = True      # the loss sees V / tp columns (False: the head gathers them)
    norm_square: bool = False     # an eager RMSNorm keeps x * x for its mean's backward
    fused_qkv: bool = False       # one fused q/k/v linear kept whole (LitGPT, ``Engine``)
    lora_targets: frozenset = frozenset()   # the adapted projections (training.lora.targets)
    quant_keeps: bool = False     # QLoRA's quantized linears keep their inputs themselves


def with_fields(x: ActivationShape, **changes) -> ActivationShape:
    """``x`` with ``changes`` (``dataclasses.replace``'s value): its fields copied into a new
    instance. ``ActivationShape`` is frozen and has no ``__post_init__``, so the copy is the
    value ``replace`` builds without re-running ``__init__`` (which costs more than the
    formulas reading it, on the cost model's block table: one per shape); a class that checks
    on init gets ``dataclasses.replace`` itself."""
    if hasattr(type(x), "__post_init__"):
        return dataclasses.replace(x, **changes)
    y = object.__new__(type(x))
    y.__dict__.update(x.__dict__)
    y.__dict__.update(changes)
    return y


def activation_shape(tr: Training, par: Parallel, pytorch_eager: bool = False) -> ActivationShape:
    """Collect the per-GPU activation quantities of a scenario."""
    from workbench.engines import engine_of
    eng = engine_of(tr)
    elem = 4 if tr.precision == "fp32" else 2   # the compute dtype (buffers.compute_dtype_bytes)
    lora = {}
    if tr.adapters:
        targets = set(tr.lora.targets)
        quant_keeps = tr.method == "qlora" and eng.qlora_keeps_inputs
        lora = {"dropped": saved_inputs_dropped(tr, quant_keeps, eng.qlora_head),
                "lora_rank": tr.lora.rank, "lora_targets": frozenset(targets),
                "quant_keeps": quant_keeps,
                "lora_attention": len(targets & {"q", "k", "v", "o"}),
                "lora_mlp": len(targets & {"gate", "up", "down"}),
                "norm_trains": "norms" in tr.lora.trainable,
                "lora_dropout": frozenset(targets) if tr.lora.dropout > 0 else frozenset(),
                "first_input_grad": "embeddings" in tr.lora.trainable}
    # torchtune compiles its chunked loss with the model (training/_compile.py compile_loss @
    # v0.6.1), torchtitan its upcast loss (``Engine.loss_compiled``): Inductor fuses the
    # upcast, log-softmax and NLL and keeps the per-token log-sum-exp instead of the fp32
    # log-probabilities
    fused_loss = (tr.compile and eng.loss_compiled and eng.loss in ("upcast", "chunked")
                  or eng.loss == "xentropy")   # flash-attn's kernel saves the log-sum-exp too
    fused_linear = eng.loss == "fused_linear"
    # A saved GEMM input, where it is not the compute dtype: Transformer Engine's linears save
    # the quantized input their weight-gradient GEMM reads (QUANTIZED_BYTES) — FP8 1 B; NVFP4
    # the columnwise (Hadamard-transformed) E2M1 copy with its E4M3 block scales
    # (transformer_engine/pytorch/module/linear.py saves ``inputmat`` with columnwise usage for
    # wgrad; recipe/__init__.py NVFP4BlockScaling "RHT is currently only applied to column-wise
    # usage so that it can be used for wgrad GEMM"). The output head is no TE module under
    # NVFP4 (engines/megatron.py): its input stays in the compute dtype.
    gemm_in = QUANTIZED_BYTES.get(tr.precision, elem)
    return ActivationShape(
        s=tr.seq_len // par.cp, s_kv=tr.seq_len, b=tr.micro_batch, t=par.tp, et=par.etp,
        sp=par.sp,
        elem=elem, gemm_in=gemm_in, flash=tr.flash,
        head_in=elem if tr.precision in FP4_PRECISIONS else gemm_in,
        recompute=tr.recompute, pytorch_eager=pytorch_eager, recompute_every=tr.recompute_every,
        recompute_modules=frozenset(tr.recompute_modules or ()) - {"core_attn"},
        logprobs_saved=not (fused_loss or fused_linear), recompute_from_first=
        eng.recompute_from_first, fused_swiglu=eng.fused_swiglu,
        probs_in_activation=eng.probs_in_activation, fused_linear_loss=fused_linear,
        vocab_split=not eng.tp_gathers_logits, norm_square=eng.norm_keeps_square,
        fused_qkv=eng.fused_qkv, **lora)


def saved_inputs_dropped(tr: Training, quant_keeps: bool = False, quant_head: bool = False
                         ) -> frozenset[str]:
    """The linear inputs autograd does not keep because no weight reading them trains and no
    adapter reads them (autograd keeps ``mm``'s input only for the weight's gradient:
    estimate/model/finetune.py's docstring): "qkv" (q, k, v's shared input), "proj"
    (o's), "fc1" (gate and up's), "fc2" (down's), "router", "head". ``quant_keeps``
    (QLoRA under ``Engine.qlora_keeps_inputs``: bitsandbytes 0.41's ``MatMul4Bit`` keeps its
    input whether or not the weight trains): the quantized block linears keep theirs, and the
    head its own where it is quantized too (``quant_head``)."""
    if not tr.adapters:
        return frozenset()
    if quant_keeps:
        return frozenset({"router"} | (set() if quant_head else {"head"}))
    t = set(tr.lora.targets)
    out = {"router"}
    if not t & {"q", "k", "v"}:
        out.add("qkv")
    if "o" not in t:
        out.add("proj")
    if not t & {"gate", "up"}:
        out.add("fc1")
    if "down" not in t:
        out.add("fc2")
    if "head" not in tr.lora.trainable:
        out.add("head")
    return frozenset(out)


def _adapter_hidden(x: ActivationShape, tokens: float, adapters: int) -> float:
    """The r-wide hiddens ``adapters`` LoRA adapters save for ``tokens`` tokens (``lora_A``'s
    output, the input ``lora_B`` keeps: one copy, measured in the LoRA trials)."""
    return adapters * tokens * x.lora_rank * x.elem


def _adapter_dropout(x: ActivationShape, tokens: float, widths: dict[str, float]) -> float:
    """What LoRA dropout keeps for ``tokens`` tokens: each adapted projection of ``widths``
    (name -> its input's width) runs its own dropout on its input (PEFT
    ``lora_B(lora_A(dropout(x)))`` with one ``nn.Dropout`` per adapted module,
    peft/tuners/lora/layer.py ``Linear.forward``; torchtune ``LoRALinear.dropout``), and
    ``lora_A`` keeps the dropped copy for its weight's gradient (the compute dtype) beside the
    dropout's mask (one byte per element, ``native_dropout``). Without dropout ``lora_A`` reads
    the input the base projection keeps anyway: nothing more."""
    return tokens * sum(w for name, w in widths.items() if name in x.lora_dropout) * (x.elem + 1)


def _norm_fed(x: ActivationShape, bias: bool, linear: str | None) -> int:
    """Saved copies of a norm's output that feeds linear layers (``linear``: the group's name in
    ``x.dropped``; None for one that always trains). Eager PyTorch keeps two (``_copies``): the
    linears' input, and — the second copy — the normalised input an eager RMSNorm keeps for its
    weight's gradient (its decomposed ``x * rstd`` before ``* weight``; measured in the LoRA
    trials: with the norm's weight frozen it is gone). Each copy goes with what needs it: the
    first with a linear (or adapter) that trains, the second with a norm weight that trains."""
    linear_kept = linear is None or linear not in x.dropped
    extra = _copies(x, bias) - 1
    return int(linear_kept) + (extra if x.norm_trains else 0)


def _copies(x: ActivationShape, bias: bool = False) -> int:
    """Saved copies of a linear layer's input: eager PyTorch keeps the 3-D input and a folded
    2-D copy when the layer has no bias (``matmul``); with a bias (``addmm`` on a view) and
    behind a sequence-parallel all-gather (DTensor) only one (measured in the trials)."""
    return 2 if (x.pytorch_eager and not x.sp and not bias) else 1


def _norm_terms(model: ModelShape, x: ActivationShape, r: int) -> dict[str, float]:
    """A norm saves its input and fp32 statistics (rstd; LayerNorm also the mean); in eager
    PyTorch a sequence-parallel (DTensor) RMSNorm runs decomposed and keeps its normalised
    sharded output as well (a LayerNorm stays one fused op; both measured in the trials)."""
    sb = x.s * x.b
    stats = 2 if model.norm == "layernorm" else 1
    copies = 2 if (x.pytorch_eager and x.sp and model.norm == "rmsnorm") else 1
    if x.norm_square and model.norm == "rmsnorm":
        copies += 1   # the squared input the mean's backward keeps (``Engine.norm_keeps_square``)
    return {"input": sb * model.hidden / r * x.elem * copies, "stats": sb / r * 4 * stats}


def attention_terms(model: ModelShape, x: ActivationShape) -> dict[str, float]:
    """Bytes saved by one attention block (norm included), by tensor."""
    sb, h, t = x.s * x.b, model.hidden, x.t
    r = t if x.sp else 1                       # divisor of tensors outside the TP region
    rg = 1 if (x.sp and x.pytorch_eager) else r
    q, kv = model.heads * model.dim_per_head, model.kv_dim
    a_loc = model.heads // t
    norm = _norm_terms(model, x, r)
    terms = {
        "norm_input": norm["input"], "norm_stats": norm["stats"],
        "qkv_input": sb * h / rg * x.gemm_in * _norm_fed(x, model.bias, "qkv"),
        "q": sb * q / t * x.elem,
        "k": sb * kv / t * x.elem,
        "v": sb * kv / t * x.elem,
    }
    if model.mla:
        terms.update(_mla_terms(model, x, r))
        q = model.heads * model.value_head_dim      # attention output width
    if not terms["qkv_input"]:
        del terms["qkv_input"]
    if x.lora_attention:
        terms["lora_hidden"] = _adapter_hidden(x, sb, x.lora_attention)
        if x.lora_dropout:
            terms["lora_dropout"] = _adapter_dropout(x, sb, {"q": h, "k": h, "v": h,
                                                             "o": q / t})
    if x.fused_qkv and not model.mla:
        terms.update(_fused_qkv_terms(model, x, terms))
        if not terms.get("qkv_input", 1):
            del terms["qkv_input"]
    if x.flash:
        terms["attn_out"] = sb * q / t * x.elem
        terms["softmax_lse"] = sb * a_loc * 4
        if x.gemm_in != x.elem:
            terms["proj_input"] = sb * q / t * x.gemm_in
    else:
        scores = a_loc * x.s * x.s_kv * x.b
        if x.recompute == "none":
            terms["softmax"] = scores * x.elem
            if model.dropout:
                terms["attn_dropout_mask"] = scores * 1
                terms["attn_dropout_out"] = scores * x.elem
        terms["proj_input"] = sb * q / t * x.gemm_in
    if "proj" in x.dropped:
        terms.pop("proj_input", None)
    if model.dropout:
        terms["dropout_mask"] = sb * h / r * 1
    return terms


def _fused_qkv_terms(model: ModelShape, x: ActivationShape, terms: dict) -> dict[str, float]:
    """What one fused q/k/v linear changes in ``attention_terms``' ``terms`` (LitGPT's
    ``attn``: ``Engine.fused_qkv``; engines/litgpt.py cites each). SDPA saves v, a view of the
    fused output, so the whole output stays alive beside the roped q and k, which are new
    tensors: q's and k's widths once more ("qkv_fused"). LoRA on the fused linear keeps the
    source of its ``zero_pad`` scatter, the adapted parts' outputs ("lora_zero_pad"), and runs
    one dropout on the shared input for all its parts (one dropped copy and mask, not one per
    part); with that dropout the frozen base's input (the norm's output) is kept only for a
    norm weight that trains, or by a quantized linear that keeps its input
    (``quant_keeps``)."""
    sb, h, t = x.s * x.b, model.hidden, x.t
    q, kv = model.heads * model.dim_per_head, model.kv_dim
    out = {"qkv_fused": sb * (q + kv) / t * x.elem}
    widths = {"q": q, "k": kv, "v": kv}
    adapted = [p for p in widths if p in x.lora_targets]
    if adapted:
        out["lora_zero_pad"] = sb * sum(widths[p] for p in adapted) / t * x.elem
    dropped = [p for p in adapted if p in x.lora_dropout]
    if dropped:
        out["lora_dropout"] = terms["lora_dropout"] - _adapter_dropout(
            x, sb, {p: h for p in dropped[1:]})
        if "qkv_input" in terms and not x.quant_keeps:
            rg = 1 if (x.sp and x.pytorch_eager) else (x.t if x.sp else 1)
            out["qkv_input"] = sb * h / rg * x.gemm_in * (_norm_fed(x, model.bias, "qkv") - 1)
    return out


def _mla_terms(model: ModelShape, x: ActivationShape, r: int) -> dict[str, float]:
    """Multi-head latent attention's saved tensors (Megatron-Core ``MLASelfAttention``,
    megatron/core/transformer/multi_latent_attention.py @ d98e8a64; shapes of DeepSeek-V2,
    arXiv:2405.04434 Sec. 2.1), replacing the q/k/v of ``attention_terms``. ``qkv_input`` is
    the input both replicated down-projections share (sharded under SP: they run on the rank's
    s/t tokens); the compressed query (q_lora) and latent (kv_lora) are outside the TP region
    (/r): each norm saves its input and statistics and each up-projection its (normalised)
    input; the kernel's q and k have heads x (nope + rope) columns (the shared RoPE key is
    expanded to every head), v heads x v_head_dim; all /t (heads are split)."""
    sb, t = x.s * x.b, x.t
    qk, _, v = qkv_widths(model)
    stats = 2 if model.norm == "layernorm" else 1
    out = {}
    if model.q_lora_rank:
        ql = model.q_lora_rank
        out.update({"q_norm_input": sb * ql / r * x.elem, "q_norm_stats": sb / r * 4 * stats,
                    "q_up_input": sb * ql / r * x.gemm_in})
    kl = model.kv_lora_rank
    out.update({"kv_norm_input": sb * kl / r * x.elem, "kv_norm_stats": sb / r * 4 * stats,
                "kv_up_input": sb * kl / r * x.gemm_in,
                "q": sb * qk / t * x.elem, "k": sb * qk / t * x.elem, "v": sb * v / t * x.elem})
    return out


def _mlp_inner(model: ModelShape, x: ActivationShape, tokens: float, ffn: int) -> dict[str, float]:
    """Saved tensors inside one MLP of width ``ffn`` (already divided by TP) for ``tokens``."""
    if model.mlp == "swiglu":
        if x.pytorch_eager and not x.fused_swiglu:   # eager: silu in, silu out, up, product
            return {"act": tokens * ffn * 3 * x.elem, "fc2_input": tokens * ffn * x.gemm_in}
        return {"act": tokens * 2 * ffn * x.elem, "fc2_input": tokens * ffn * x.gemm_in}
    return {"act": tokens * ffn * x.elem, "fc2_input": tokens * ffn * x.gemm_in}


def mlp_terms(model: ModelShape, x: ActivationShape, moe_layer: bool) -> dict[str, float]:
    """Bytes saved by one MLP or MoE block (norm included), by tensor."""
    sb, h, t = x.s * x.b, model.hidden, x.t
    r = t if x.sp else 1
    rg = 1 if (x.sp and x.pytorch_eager) else r
    norm = _norm_terms(model, x, r)
    terms = {"norm_input": norm["input"], "norm_stats": norm["stats"]}
    if not moe_layer:
        terms["fc1_input"] = sb * h / rg * x.gemm_in * _norm_fed(x, model.bias, "fc1")
        terms.update(_mlp_inner(model, x, sb, model.ffn_hidden // t))
    else:
        m = model.moe
        cf = m.capacity_factor or 1.0
        terms["router_input"] = sb * h / r * x.elem
        terms["router_probs"] = sb / r * m.experts * 4
        # Rows each GPU's experts process (balanced routing): k copies of the TP group's
        # tokens, split over the TP ranks and gathered again over the expert-TP group, each of
        # whose ranks computes ffn/et of its experts — k·s·b·et/t rows of ffn/et (et = t: every
        # token, ffn/t), as both dispatchers run it (``time.moe_block``: Megatron-Core's
        # all-to-all of the rank's sequence-parallel shard, then the expert-TP all-gather;
        # torchtitan's gathered input, split over TP for expert TP 1).
        routed = _routed_rows(x, m, sb)
        terms["expert_input"] = routed * h * x.gemm_in
        inner = _mlp_inner(model, x, routed, m.expert_ffn_hidden // (x.et or t))
        terms["expert_act"] = inner["act"]
        terms["expert_fc2_input"] = inner["fc2_input"]
        if x.probs_in_activation:   # Megatron-Core: the weights (fp32) saved by the activation
            terms["expert_probs"] = routed * 4
        else:                       # kept to weight by the router probs
            terms["expert_output"] = routed * h * x.elem
        if x.pytorch_eager and not x.probs_in_activation:
            # eager PyTorch also keeps the weighted output for the scatter-add, the gather and
            # scatter indices (int64), the top-k indices and the gathered routing weights
            terms["expert_output"] *= 2
            terms["routing_indices"] = routed * (8 + 8 + 4) + sb / r * m.top_k * 8
        if m.shared_experts:
            terms["shared_fc1_input"] = sb * h / rg * x.gemm_in
            inner = _mlp_inner(model, x, sb, m.shared_experts * m.expert_ffn_hidden // t)
            terms["shared_act"] = inner["act"]
            terms["shared_fc2_input"] = inner["fc2_input"]
    for key in [k for k in terms if ("fc1" in x.dropped and k.endswith(("shared_fc1_input",
                                                                        "expert_input")))
                or not terms[k]
                or ("fc2" in x.dropped and k.endswith("fc2_input"))
                or ("router" in x.dropped and k == "router_input")]:
        del terms[key]
    if x.lora_mlp:
        routed = _routed_rows(x, model.moe, sb) if moe_layer else 0
        shared = bool(moe_layer and model.moe.shared_experts)
        terms["lora_hidden"] = _adapter_hidden(
            x, (sb if not moe_layer or shared else 0) + routed, x.lora_mlp)
        if x.lora_dropout:
            dense = model.ffn_hidden if not moe_layer else \
                model.moe.shared_experts * model.moe.expert_ffn_hidden
            ffn = {"gate": h, "up": h}
            terms["lora_dropout"] = (
                (_adapter_dropout(x, sb, {**ffn, "down": dense / t}) if dense else 0.0)
                + (_adapter_dropout(x, routed, {**ffn, "down": model.moe.expert_ffn_hidden
                                                / (x.et or t)}) if moe_layer else 0.0))
    if model.dropout:
        terms["dropout_mask"] = sb * h / r * 1
    return terms


def _routed_rows(x: ActivationShape, moe, sb: float) -> float:
    """Token rows the experts on one GPU process for ``sb`` tokens of its TP group
    (``mlp_terms``)."""
    return sb * moe.top_k * (moe.capacity_factor or 1.0) * (x.et or x.t) / x.t


def layer_terms(model: ModelShape, x: ActivationShape, moe_layer: bool) -> dict[str, float]:
    """All saved tensors of one layer without recompute (keys prefixed attn./mlp.)."""
    out = {f"attn.{k}": v for k, v in attention_terms(model, x).items()}
    out.update({f"mlp.{k}": v for k, v in mlp_terms(model, x, moe_layer).items()})
    return out


def _layer_total(model: ModelShape, x: ActivationShape, moe_layer: bool) -> float:
    """``layer_terms``' sum, added in its order, without building its prefixed names."""
    return sum(chain(attention_terms(model, x).values(), mlp_terms(model, x, moe_layer).values()))


def checkpointed_fraction(model: ModelShape, every: int, from_first: bool = False) -> float:
    """The share of blocks recompute "layer" checkpoints: one in ``every``, counted from the
    ``every``-th (torchtitan's ``_layer_sac_count % ac_freq == 0``): floor(layers / k) of the
    layers; ``from_first``: blocks 0, k, 2k, ... (Transformers' ``layer_index % every_n_layers
    == 0``, transformers 5.25.0 modeling_utils.py L3246-3249): ceil(layers / k)."""
    k = max(1, every)
    return (-(-model.layers // k) if from_first else model.layers // k) / model.layers


def module_recomputed(model: ModelShape, x: ActivationShape, moe_layer: bool) -> dict[str, float]:
    """What Megatron's module recompute (``training.recompute_modules`` beyond core_attn) frees
    of one layer's saved tensors (``layer_terms``' names and bytes), to rebuild in the backward
    (engines/megatron.py cites each): "layernorm" the outputs of the norms that are their own
    module (MLA's input norm, an MoE layer's pre-MLP norm that the router reads: the TE spec
    fuses the others into their linears); "moe_act" the routed experts' activation output;
    "mla_up_proj" the up-projected query, key and value; "mlp" a dense layer's MLP but its
    input; "moe" an MoE layer's MLP but its input; "shared_experts" the shared experts' inner
    tensors."""
    mods = x.recompute_modules
    if x.recompute != "selective" or not mods:
        return {}
    terms = layer_terms(model, x, moe_layer)
    drop: set[str] = set()
    if "layernorm" in mods:
        if model.mla:
            drop.add("attn.qkv_input")
        if moe_layer:
            drop.add("mlp.router_input")
    if "mla_up_proj" in mods and model.mla:
        drop |= {"attn.q", "attn.k", "attn.v"}
    if moe_layer and "moe_act" in mods:
        drop.add("mlp.expert_fc2_input")
    if moe_layer and "shared_experts" in mods:
        drop |= {"mlp.shared_act", "mlp.shared_fc2_input"}
    mlp_whole = ("moe" in mods) if moe_layer else ("mlp" in mods)
    if mlp_whole:   # the module's input (the norm's output) stays, and the norm's own tensors
        kept = {"mlp.norm_input", "mlp.norm_stats", "mlp.fc1_input", "mlp.router_input"}
        drop |= {k for k in terms if k.startswith("mlp.") and k not in kept}
        if moe_layer and "layernorm" not in mods:
            drop.discard("mlp.router_input")
    return {k: v for k, v in terms.items() if k in drop}


def layer_bytes(model: ModelShape, x: ActivationShape, moe_layer: bool) -> float:
    """Bytes one layer keeps for backward for one microbatch, under the recompute policy."""
    if x.recompute_modules and x.recompute == "selective":
        return _layer_total(model, x, moe_layer) - sum(
            module_recomputed(model, x, moe_layer).values())
    if x.recompute == "full":
        r = x.t if x.sp else 1
        return x.s * x.b * model.hidden / r * x.elem   # the layer's input (checkpoint)
    if x.recompute == "op":
        return sum(op_saved_terms(model, x, moe_layer).values())
    if x.recompute == "layer":
        # torchtitan's layer SAC wraps every k-th block in a checkpoint (the block's input is
        # kept) and leaves the others as they are: per layer, the average of the two
        f = checkpointed_fraction(model, x.recompute_every, x.recompute_from_first)
        full = layer_bytes(model, with_fields(x, recompute="full"), moe_layer)
        none = _layer_total(model, with_fields(x, recompute="none"), moe_layer)
        return full * f + none * (1 - f)
    return _layer_total(model, x, moe_layer)


def op_saved_terms(model: ModelShape, x: ActivationShape, moe_layer: bool) -> dict[str, float]:
    """What torchtitan's per-op selective checkpointing keeps of one layer (``_op_sac_save_list``
    in torchtitan's llama3 parallelize.py: the outputs of ``aten.mm`` except every second one,
    of the attention kernel and of reduce-scatters; everything else is recomputed from the
    block's input). In a Llama block the matmuls run wq, wk, wv, wo, then w1, w3, w2 (GELU:
    fc1, fc2), so wq, wv, w1 and w2 (fc1) outputs are kept; an MoE layer's routed experts run
    ``_grouped_mm``, not in the list, and are recomputed (its router and shared experts are
    matmuls, counted as the dense MLP's)."""
    sb, h, t = x.s * x.b, model.hidden, x.t
    r = t if x.sp else 1
    q, kv = model.heads * model.dim_per_head, model.kv_dim
    terms = {"block_input": sb * h / r * x.elem, "wq_out": sb * q / t * x.elem,
             "wv_out": sb * kv / t * x.elem, "attn_out": sb * q / t * x.elem,
             "softmax_lse": sb * (model.heads // t) * 4}
    if moe_layer:
        m = model.moe
        terms["router_logits"] = sb / r * m.experts * x.elem
        ffn = m.shared_experts * m.expert_ffn_hidden // t
    else:
        ffn = model.ffn_hidden // t
    if ffn:
        terms["fc1_out"] = sb * ffn * x.elem
        if model.mlp == "swiglu":
            terms["fc2_out"] = sb * h * x.elem
    return terms


def full_recompute_working_set(model: ModelShape, x: ActivationShape, moe_layer: bool) -> float:
    """Under full, per-op or layer recompute, one layer's complete activations are rebuilt during
    its backward; under Megatron's module recompute, what the modules freed
    (``module_recomputed``)."""
    if x.recompute == "selective":
        return sum(module_recomputed(model, x, moe_layer).values())
    if x.recompute not in ("full", "op", "layer"):
        return 0.0
    return _layer_total(model, with_fields(x, recompute="none"), moe_layer)


def embedding_bytes(model: ModelShape, x: ActivationShape) -> float:
    """First stage, per microbatch: the embedding-output dropout mask (Korthikanti Sec. 4.3);
    under the PyTorch-eager convention also the token ids."""
    r = x.t if x.sp else 1
    ids = x.s * x.b * 8 if x.pytorch_eager else 0      # int64 token ids for the lookup's backward
    out = (x.s * x.b * model.hidden / r if model.dropout else 0.0) + ids
    if not x.first_input_grad and x.recompute not in ("full", "layer"):
        # A frozen embedding's output needs no gradient, and autograd saves only for gradients
        # something needs: the first layer's attention norm keeps neither its input nor its
        # statistics; without attention adapters (and frozen norms) nothing in that layer's
        # attention block needs a gradient, nor the MLP's norm after it (measured in the LoRA
        # trials). Counted here, on the rank holding layer 0.
        norm = _norm_terms(model, x, r)
        out -= norm["input"] + norm["stats"]
        if not x.lora_attention and not x.norm_trains:
            attn = attention_terms(model, x)
            out -= sum(v for k, v in attn.items() if not k.startswith("norm_"))
            out -= norm["input"] + norm["stats"]
    return out


def head_bytes(model: ModelShape, x: ActivationShape) -> float:
    """Last stage, per microbatch: final norm input, head input and fp32 log-probabilities
    (Korthikanti Sec. 4.3: 4·sbh/t·(1 + v/h) with SP, plus the norm statistics). A fused
    linear cross-entropy (Liger) saves no head input and no logits: it computes the head's
    input gradient in its forward and keeps that (one [tokens, hidden] tensor in the input's
    dtype) and an fp32 loss per token (linkedin/Liger-Kernel@00eba63 ops/
    fused_linear_cross_entropy.py ``grad_input = torch.zeros_like(_input)``, ``loss_1d``
    float32); the head weight's gradient it keeps too is a buffer (``buffers``)."""
    r = x.t if x.sp else 1
    rg = 1 if (x.sp and x.pytorch_eager) else r
    sb = x.s * x.b
    norm = _norm_terms(model, x, r)
    vocab_local = -(-model.vocab // x.t) if x.vocab_split else model.vocab
    targets = sb * 8 if x.pytorch_eager else 0
    if x.fused_linear_loss:
        return norm["input"] + norm["stats"] + sb * model.hidden / rg * x.elem + sb * 4 + targets
    head_in = sb * model.hidden / rg * (x.head_in or x.gemm_in) * _norm_fed(x, False, "head")
    logprobs = sb * vocab_local * 4 if x.logprobs_saved else sb * 4
    return norm["input"] + norm["stats"] + head_in + logprobs + targets

"""Block costs: the per-microbatch cost of a dense layer, an MoE layer, the output head and the
embedding on one GPU, for every (tp, cp, ep, micro-batch) shape of a grid at once.

Each quantity is a numpy array with one entry per shape; the engine, precision, recompute and
the other switches are the scenario's (one value for all shapes). What the formulas branch on
per shape (CP > 1, TP > 1, EP > 1, expert TP > 1, more than one local expert) is a mask: a
collective that does not run costs 0 and has count 0. ``block_costs(s)`` is the one-shape
case (the scenario's own degrees), as plain numbers.

Per microbatch and block: forward F = GEMMs + attention kernel + memory-bound ops + exposed
TP / EP / CP communication; backward B = 2 x the GEMMs (input and weight gradients; W is the
weight half), 2.5 x the attention forward (FlashAttention's backward), 2 x the memory-bound
bytes, the same TP / EP collectives again, plus recompute (full: the whole forward again;
selective with eager attention: the core attention again). CP ring passes overlap the
attention blocks they feed; TP and EP collectives are exposed, except under async TP / TE
comm overlap (``tp_overlap``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.engines import engine_of
from workbench.estimate.time import eager_ops
from workbench.estimate.time import kernels as eff
from workbench.estimate.model import finetune as ft
from workbench.estimate.time import fp8_casts
from workbench.estimate.time import tp_overlap as tpo
from workbench.estimate.memory.activations import checkpointed_fraction
from workbench.estimate.model.attention import (
    attention_gemms, attention_kernel, qkv_widths, tp_gather_width,
)
from workbench.estimate.memory.buffers import compute_dtype_bytes
from workbench.estimate.time.collectives import collective_time, collective_times
from workbench.estimate.placement import group_span
from workbench.estimate.time.engine_terms import conventions
from workbench.estimate.model.flops import layer_flops
from workbench.estimate.time.block_shapes import BlockShapes
from workbench.estimate.time.moe_block import moe_part
from workbench.scenario.types import FP4_PRECISIONS, Scenario

# The loss over the vocabulary, bytes per logit (forward, backward) at the memory-bound rate
# (``Engine.loss``). "upcast": cross-entropy on fp32-upcast 16-bit logits
# (``F.cross_entropy(logits.float(), y)``) measured on the H200 table at 14.2-14.4 ps per logit
# forward+backward (8192-16384 tokens x 32,000-128,256) = 34 B at 2,427 GB/s; split as the
# passes move data: forward upcast (2 + 4) and log-softmax (4 + 4) = 14, backward 20.
# "fused": one kernel reads the 16-bit logits and writes their gradient in the forward (2 + 2),
# the backward scales that gradient (2 + 2) — bytes counted, not measured here.
# "xentropy" (flash-attn's kernel, ``Engine.loss``): the forward reads the 16-bit logits (2) and
# writes a loss and log-sum-exp per token; the backward reads them again and writes their
# gradient (2 + 2) — bytes counted.
# "chunked" (torchtune): the upcast loss run chunk by chunk moves the same bytes.
# "fused_linear" (Liger's fused linear cross-entropy): per chunk of tokens the head GEMM writes
# the logits, one kernel reads them and writes their gradient in place (2 + 2), and the
# gradient GEMMs run in the forward too; the backward only scales the input and weight
# gradients by the loss's gradient (linkedin/Liger-Kernel@00eba63 ops/
# fused_linear_cross_entropy.py ``element_mul_kernel``): nothing per logit.
LOSS_BYTES = {"upcast": (14.0, 20.0), "fused": (4.0, 4.0), "xentropy": (2.0, 4.0),
              "chunked": (14.0, 20.0), "fused_linear": (4.0, 0.0)}


@dataclass(frozen=True)
class BlockCost:
    """Per-microbatch cost of one building block on one GPU: a dense layer, an MoE layer, the
    output head, or the embedding. ``volume`` lists (dim, collective, bytes, count) per pass."""

    fwd: float = 0.0
    bwd: float = 0.0
    wgrad: float = 0.0
    recompute: float = 0.0
    comm: tuple = ()          # (dim, exposed seconds per microbatch)
    volume: tuple = ()


@dataclass(frozen=True)
class BlockArrays:
    """``BlockCost`` over shapes: each field an array with one entry per shape; ``comm``
    {dim: exposed seconds}; ``volume`` (dim, collective, bytes, count) per pass, count 0 on the
    shapes where that collective does not run."""

    fwd: np.ndarray
    bwd: np.ndarray
    wgrad: np.ndarray
    recompute: np.ndarray
    comm: dict
    volume: list

    def one(self, i: int) -> BlockCost:
        """Shape ``i``'s cost as plain numbers, its volume the collectives that run there."""
        return BlockCost(float(self.fwd[i]), float(self.bwd[i]), float(self.wgrad[i]),
                         float(self.recompute[i]),
                         tuple((d, float(v[i])) for d, v in self.comm.items()),
                         tuple((d, k, float(b[i]), float(n[i])) for d, k, b, n in self.volume
                               if n[i] > 0))


def block_cost_arrays(s: Scenario, tp, cp, ep, micro_batch) -> dict[str, BlockArrays]:
    """Costs of the blocks a pipeline stage is made of for each (``tp``, ``cp``, ``ep``,
    ``micro_batch``) shape (numbers or arrays, broadcast together) under ``s``'s model,
    hardware, training and parallel switches (sequence parallelism, async TP, TP comm overlap,
    expert TP). They do not depend on DP, PP, ZeRO or the schedule; what the wrappers of those
    add on a calibrated machine (``kernels.wrapper_time``) the cost model adds per rank."""
    m, par, tr = s.model, s.parallel, s.training
    t, cp, ep, mb = np.broadcast_arrays(*(np.atleast_1d(np.asarray(x, dtype=np.int64))
                                          for x in (tp, cp, ep, micro_batch)))
    eng = engine_of(tr)
    layer_share = checkpointed_fraction(m, tr.recompute_every, eng.recompute_from_first)
    passes = 3 if tr.recompute == "full" else (
        2 + layer_share if tr.recompute == "layer" else 2)
    et = np.broadcast_to(np.int64(par.expert_tp), t.shape) if par.expert_tp else t
    tokens = tr.seq_len * mb / cp
    x = BlockShapes(s, t, cp, ep, et, tokens, par.sequence_parallel, passes, layer_share,
                    eff.on_hardware(s.hardware), conventions(s), eng,
                    group_span(t, 1, s.hardware.gpus_per_node),
                    tokens * m.hidden * compute_dtype_bytes(tr.precision),
                    recomputed=frozenset(tr.recompute_modules or ()) - {"core_attn"}
                    if tr.recompute == "selective" else frozenset())
    kernel = attention_kernel(m, mb, tr.seq_len, t, cp)
    out = {"dense": _layer(x, False, kernel), **_edges(x)}
    if m.moe is not None:
        out["moe"] = _layer(x, True, kernel)
    return out


def block_costs(s: Scenario) -> dict[str, BlockCost]:
    """``block_cost_arrays`` for the scenario's own (tp, cp, ep, micro-batch), as numbers."""
    par = s.parallel
    arrays = block_cost_arrays(s, par.tp, par.cp, par.ep, s.training.micro_batch)
    return {kind: a.one(0) for kind, a in arrays.items()}


def _layer(x: BlockShapes, moe: bool, kernel) -> BlockArrays:
    """One transformer layer (dense or MoE) per shape."""
    s, t, cp, tokens, gpu, run = x.s, x.t, x.cp, x.tokens, x.gpu, x.run
    hw, m, tr = s.hardware, s.model, s.training
    prec, passes = tr.precision, x.passes
    e = compute_dtype_bytes(prec)
    h = m.hidden
    mats = 3 if m.mlp == "swiglu" else 2
    zero = x.full(0.0)
    comm = {"tp": zero, "cp": zero, "ep": zero}
    volume: list = []
    ge = 0.0                                  # the routed experts' grouped GEMMs
    lf = layer_flops(m, tokens, tr.seq_len, moe)
    g = sum(eff.gemm_time(tokens * a.rows, a.n, a.k, gpu, prec, a.count)
            for a in attention_gemms(m, t, x.sp))
    # Memory-bound bytes, fused kernels (Megatron-LM / Transformer Engine style), forward:
    # 2 norms (read x, write y), 2 residual adds (read 2, write 1), RoPE on q and k, and the
    # q/k/v layout copy; the backward reads and writes about twice as much (norm backward
    # reads x and dy and writes dx; RoPE and layout again; gradient adds at branch merges).
    qw, kw, vw = qkv_widths(m)
    r = t if x.sp else 1
    mem = (2 * 2 + 2 * 3) * tokens * h * e / r + 2 * tokens * (2 * qw + 2 * kw + vw) / t * e
    # (layer_operands and _adapter_costs read these on MoE layers only)
    routed, local_experts, fe, expert_rows = 0.0, 0, 0.0, 0.0
    g_attn, mem_attn = g, mem
    if moe:
        (g, ge, mem, comm["ep"], ep_volume, routed, local_experts, fe,
         expert_rows, parts) = moe_part(x, g, mem)
        volume += ep_volume
    else:
        f = m.ffn_hidden / t
        g = g + eff.gemm_time(tokens, (mats - 1) * f, h, gpu, prec)
        g = g + eff.gemm_time(tokens, h, f, gpu, prec)
        mem = mem + (mats + 1) * tokens * f * e     # activation: read gate/up, write product
        parts = {}
    # Megatron's recomputed modules: the GEMM seconds and memory-bound bytes they run again
    rc_g, rc_mem = _module_recompute(x, moe, g - g_attn, mem - mem_attn, parts) \
        if x.recomputed else (0.0, 0.0)
    mem = mem * run.elementwise_traffic
    casts = fp8_casts.CastTraffic(0.0, 0.0)
    low = prec in ("fp8", *FP4_PRECISIONS)
    rate = run.fp8.gemm_rate if low else 1.0     # the recipe's GEMM rate (Fp8Recipe.gemm_rate)
    if low:                                # the recipe's casts of every linear's operands
        ops = fp8_casts.layer_operands(
            m, run.fp8, run.fp8_cast_fusion, run.fp8_separate_projections, tokens, t,
            x.sp, moe, routed, local_experts, fe)
        casts = fp8_casts.cast_traffic(ops, run.fp8.casts)
        g, ge = g / rate, ge / rate
    causal = 0.5 if tr.flash else 1.0
    attn_fwd = lf.attention / t * causal
    a_f = eff.attention_time(attn_fwd, gpu, "fwd", tr.attention, kernel)
    a_b = eff.attention_time(2.5 * attn_fwd, gpu, "bwd", tr.attention, kernel)
    if prec == "fp8" and tr.fp8_attention and gpu.profile is None and gpu.fp8_tflops > 0:
        # TE's FP8 DotProductAttention runs cuDNN's FP8 fused attention: Q K^T and P V
        # (forward and backward) read FP8 operands on the FP8 tensor cores. No published
        # measurement of that kernel is in the catalog, so it runs at the bf16 kernel's
        # fraction of the FP8 peak (an upper bound: the softmax does not speed up).
        a_f, a_b = (a * gpu.bf16_tflops / gpu.fp8_tflops for a in (a_f, a_b))
    if not tr.flash:   # eager softmax: scores written and read in 16 bits
        mem = mem + 3 * (m.heads / t) * tokens * tr.seq_len * e
    # the casts as their passes run them: a recomputed forward (mem_t) casts again
    mem_t = eff.memory_time(mem + casts.fwd, gpu, kernels=12)
    mem_b = eff.memory_time(2 * mem + casts.bwd, gpu, kernels=16)
    recompute = 0.0
    if tr.recompute == "full":
        recompute = g + a_f + mem_t
    elif tr.recompute == "layer":     # every k-th block's whole forward again
        recompute = (g + a_f + mem_t) * x.layer_share
    elif tr.recompute == "selective" and not tr.flash:
        recompute = a_f
    elif x.recomputed:
        recompute = rc_g / rate + eff.memory_time(rc_mem * run.elementwise_traffic, gpu,
                                                  kernels=len(x.recomputed))
        if moe and "moe" in x.recomputed:
            # the MoE layer's forward again: its dispatch and combine too (one pass more)
            comm["ep"] = comm["ep"] * (passes + 1) / passes
            volume = [(d, k, b, n * (passes + 1) / passes) if d == "ep" else (d, k, b, n)
                      for d, k, b, n in volume]
    elif tr.recompute == "op":
        # torchtitan's per-op policy saves the outputs of matmuls (all but every second
        # one), attention and reduce-scatters, and recomputes the rest: the memory-bound
        # forward, every second projection GEMM, and the routed experts' grouped GEMMs
        # (``_grouped_mm`` is not in its save list).
        recompute = mem_t + (g - ge) / 2 + ge
    # ring attention (cp > 1): cp-1 K/V block passes forward, K/V + dK/dV backward
    ring = cp > 1
    block = tokens * (kw + vw) / t * e
    if ring.any():      # (none of the shapes: 0 s, not worth timing)
        step_t = collective_time("send_recv", block, group_span(cp, t, hw.gpus_per_node), hw)
        ring_f, ring_b = (cp - 1) * step_t, 2 * (cp - 1) * step_t
        comm["cp"] = np.where(ring, np.maximum(0.0, ring_f - a_f)
                              + np.maximum(0.0, ring_b - a_b), 0.0)
    volume.append(("cp", "send_recv", block, np.where(ring, 3 * (cp - 1), 0)))
    comm["tp"], tp_volume = _tp_layer(x, moe, mats, rate)
    volume += tp_volume
    ops_f, ops_b = eager_ops.layer_ops(m, moe, m.moe.experts // x.ep if moe else None,
                                       grouped=not run.expert_loop)
    mem_t = mem_t + eff.runtime_ops(gpu, ops_f)
    mem_b = mem_b + eff.runtime_ops(gpu, 0, ops_b)
    if tr.adapters:
        # frozen base: input-gradient GEMMs only; the adapters' GEMMs; QLoRA dequantises
        # each linear's weight in forward, backward and any recomputed forward
        ad = _adapter_costs(x, moe, expert_rows)
        recompute = recompute + (ad.fwd + ad.dequant) * (passes - 2)
        return BlockArrays(x.full(g + ad.fwd + ad.dequant + a_f + mem_t),
                           x.full(g + ad.dgrad + ad.wgrad + ad.dequant + a_b + mem_b),
                           x.full(ad.wgrad), x.full(recompute), comm, volume)
    return BlockArrays(x.full(g + a_f + mem_t), x.full(2 * g + a_b + mem_b), x.full(g),
                       x.full(recompute), comm, volume)


def _module_recompute(x: BlockShapes, moe: bool, g_mlp, mem_mlp, parts: dict) -> tuple:
    """(GEMM seconds, memory-bound bytes) one layer's forward runs again for Megatron's
    recomputed modules (``x.recomputed``; what each frees:
    ``memory.activations.module_recomputed``): the norms that are their own module (MLA's input
    norm, an MoE layer's pre-MLP norm: read and write the hidden states), MLA's up-projection
    GEMMs with RoPE and the q/k/v layout, the routed experts' activation, the shared experts,
    or the whole MLP / MoE layer (``g_mlp``, ``mem_mlp``: its GEMM seconds and bytes)."""
    s, t, tokens, gpu = x.s, x.t, x.tokens, x.gpu
    m, prec, mods = s.model, s.training.precision, x.recomputed
    e = compute_dtype_bytes(prec)
    g, mem = 0.0, 0.0
    if "layernorm" in mods:
        mem = mem + (int(bool(m.mla)) + int(moe)) * 2 * tokens * m.hidden * e / (
            t if x.sp else 1)
    if "mla_up_proj" in mods and m.mla:
        g = g + sum(eff.gemm_time(tokens * a.rows, a.n, a.k, gpu, prec, a.count)
                    for a in attention_gemms(m, t, x.sp) if a.name in ("q_up", "kv_up"))
        qw, kw, vw = qkv_widths(m)
        mem = mem + 2 * tokens * (2 * qw + 2 * kw + vw) / t * e
    whole = "moe" in mods if moe else "mlp" in mods
    if whole:
        g, mem = g + g_mlp, mem + mem_mlp
    elif moe:
        if "moe_act" in mods:
            mem = mem + parts["act"]
        if "shared_experts" in mods:
            g, mem = g + parts["shared"], mem + parts["shared_act"]
    return g, mem


def _tp_layer(x: BlockShapes, moe: bool, mats: int, rate: float) -> tuple:
    """A layer's exposed TP seconds and TP volume: two collectives per layer per pass
    (Korthikanti et al. 2022 Sec. 4.2), where t > 1; ``rate``, the layer's GEMM rate under
    its FP8 / FP4 recipe (``_layer``), for the GEMMs an overlapped collective hides under."""
    s, t, tokens, gpu, passes = x.s, x.t, x.tokens, x.gpu, x.passes
    hw, m, par, prec = s.hardware, s.model, s.parallel, s.training.precision
    e = compute_dtype_bytes(prec)
    tp_span = x.tp_span
    on = t > 1
    nbytes = x.hidden_bytes
    # (collective, bytes) per pass: under SP the attention gathers what its first
    # GEMMs read (MLA: the latent inputs, attention_shapes.tp_gather_width; else the hidden
    # states, the buffer itself: timed once)
    width = tp_gather_width(m)
    gather = nbytes if width == m.hidden else tokens * width * e
    ops = ([("all_gather", gather), ("all_gather", nbytes),
            ("reduce_scatter", nbytes), ("reduce_scatter", nbytes)] if x.sp
           else [("all_reduce", nbytes), ("all_reduce", nbytes)])
    # Megatron-Core's MoE layer under SP has no MLP all-gather / reduce-scatter: its
    # dispatcher routes the rank's own sequence shard (above); only shared experts, a
    # sequence-parallel MLP (moe/shared_experts.py SharedExpertMLP(MLP)), keep the pair
    mlp_pair = not (moe and x.sp and x.eng.moe_dispatch == "sequence_shard"
                    and not m.moe.shared_experts)
    keep = (0, 1, 2, 3) if mlp_pair else (0, 2)     # indices into the SP ops
    ops = [ops[i] for i in keep] if x.sp else ops
    if x.sp and par.tp_comm_overlap and prec == "fp8":
        # TE userbuffers gather FP8 inputs in FP8: "AllGather buffers use fp8 when
        # using fp8 recipe" (transformer_engine/pytorch/module/base.py initialize_ub,
        # fp8_buf for the all-gather layers): 1 byte per element
        ops = [(k, b / e if k == "all_gather" else b) for k, b in ops]
    if x.sp and (par.async_tp or par.tp_comm_overlap):
        # Each collective split into chunks under the GEMMs it feeds or drains
        # (tp_overlap): the chunked GEMMs' extra time, the part no chunk covers and,
        # under TE userbuffers, the SMs the collective takes all show.
        gemms = tp_gemms(m, t, tokens, mats, None if moe else m.ffn_hidden / t)
        pairs = [tpo.Pair(k, sec, gemms[i], nbytes if k == "reduce_scatter" else 0.0)
                 for i, (k, _), sec in zip(keep, ops, collective_times(ops, tp_span, hw,
                                                                         x.timed))]
        if par.tp_comm_overlap:
            exposed = ((passes - 1) * tpo.userbuffers_exposed(pairs, t, gpu, prec, rate, False)
                       + tpo.userbuffers_exposed(pairs, t, gpu, prec, rate, True))
        else:
            exposed = passes * tpo.async_tp_exposed(pairs, t, gpu, prec, rate)
    else:
        exposed = passes * sum(collective_times(ops, tp_span, hw, x.timed))
    count = np.where(on, passes, 0)      # (every op's: one array)
    return np.where(on, exposed, 0.0), [("tp", k, x.full(b), count) for k, b in ops]


def _edges(x: BlockShapes) -> dict[str, BlockArrays]:
    """The output head (its GEMM, the loss over the vocabulary) and the embedding."""
    s, t, tokens, gpu = x.s, x.t, x.tokens, x.gpu
    hw, m, tr = s.hardware, s.model, s.training
    g = eff.gemm_time(tokens, m.vocab / t, m.hidden, gpu, eff.edge_precision(tr.precision))
    # the loss runs over every vocabulary column where the head gathers them (Engine field)
    logits = tokens * m.vocab / (1 if x.eng.tp_gathers_logits else t)
    loss_f, loss_b = LOSS_BYTES[x.run.loss]
    ops_f, ops_b = eager_ops.head_ops(m)
    # a frozen head computes its input gradient only
    head_w = g if ft.edge_trainable(tr, "head") else 0.0
    head_f = g + eff.memory_time(loss_f * logits, gpu, kernels=4) + eff.runtime_ops(gpu, ops_f)
    head_b = (g + head_w + eff.memory_time(loss_b * logits, gpu, kernels=4)
              + eff.runtime_ops(gpu, 0, ops_b))
    emb_f, emb_b = eager_ops.embedding_ops(m)
    on = t > 1
    head_ops, emb_ops = _tp_edge_ops(m, x.sp, x.hidden_bytes, tokens)
    # both blocks' collectives timed at once: they share their buffer (and the layers')
    times = iter(collective_times([(k, nb) for k, nb, _ in head_ops + emb_ops], x.tp_span, hw,
                                  x.timed))
    counts = {n: np.where(on, n, 0) for n in {n for _, _, n in head_ops + emb_ops}}
    out = {}
    for kind, (f, b, w), ops in (("head", (head_f, head_b, head_w), head_ops),
                                 ("embedding", (eff.runtime_ops(gpu, emb_f),
                                                eff.runtime_ops(gpu, 0, emb_b), 0.0), emb_ops)):
        secs = sum(n * next(times) for _, _, n in ops)
        out[kind] = BlockArrays(x.full(f), x.full(b), x.full(w), x.full(0.0),
                                {"tp": np.where(on, secs, 0.0)},
                                [("tp", k, x.full(nb), counts[n]) for k, nb, n in ops])
    return out


@dataclass(frozen=True)
class AdapterCost:
    """One layer's LoRA work per microbatch on one GPU (seconds; arrays over shapes)."""

    fwd: object        # x A, then (x A) B^T, per adapted projection
    dgrad: object      # the two input-gradient GEMMs
    wgrad: object      # the two weight-gradient GEMMs (dA, dB)
    dequant: object    # QLoRA: one pass of dequantising every block linear's weight


def _adapter_costs(x: BlockShapes, moe: bool, expert_rows) -> AdapterCost:
    """Adapter GEMMs through the kernel model (r is small, so most are memory-bound: the
    model's roofline takes the larger of FLOPs and bytes) and QLoRA's dequantisation traffic:
    each pass reads the stored weight and writes its compute-dtype copy
    (bitsandbytes ``dequantize_4bit``). An expert's adapters run on the token rows its base
    GEMMs do (``expert_rows``: ``moe_block.moe_part``'s rows per local expert, with the
    capacity factor and the expert-TP share)."""
    m, tr, gpu, tokens = x.s.model, x.s.training, x.gpu, x.tokens
    prec, r = eff.edge_precision(tr.precision), tr.lora.rank   # adapters are not TE linears
    local = m.moe.experts // x.ep if moe else 1
    fwd = dgrad = wgrad = 0.0
    for p in ft.adapted(tr, m, moe, local):
        t = x.et if p.expert else x.t
        k = p.k / t if p.style == "row" else p.k
        n = p.n / t if p.style == "column" else p.n
        rows = expert_rows if p.expert else tokens
        fwd += (eff.gemm_time(rows, r, k, gpu, prec, p.count)
                + eff.gemm_time(rows, n, r, gpu, prec, p.count))
        dgrad += (eff.gemm_time(rows, k, r, gpu, prec, p.count)
                  + eff.gemm_time(rows, r, n, gpu, prec, p.count))
        wgrad += (eff.gemm_time(r, k, rows, gpu, prec, p.count)
                  + eff.gemm_time(n, r, rows, gpu, prec, p.count))
    dequant = 0.0
    if tr.method == "qlora":
        elements = sum(p.count * p.k * p.n / ((x.et if p.expert else x.t)
                                              if p.style != "replicated" else 1)
                       for p in ft.projections(m, moe, local))
        nbytes = elements * (ft.quantized_bytes_per_param(tr, m) + compute_dtype_bytes(prec))
        dequant = eff.memory_time(nbytes, gpu, kernels=len(ft.projections(m, moe, local)))
    return AdapterCost(fwd, dgrad, wgrad, dequant)


def _tp_edge_ops(m, sp: bool, nbytes, tokens) -> tuple[list, list]:
    """TP collectives of the output head and the embedding per microbatch, as Megatron-LM runs
    them: (collective, bytes, count).

    Head: the column-parallel output layer gathers its sequence-parallel input (all-gather
    forward, reduce-scatter backward) or, without SP, all-reduces its input gradient; the
    vocab-parallel cross-entropy all-reduces the max, the target logit and the sum of
    exponentials, fp32 per token (``vocab_parallel_cross_entropy``). Embedding: the vocab-
    parallel lookup sums its partial outputs: a reduce-scatter along the sequence with SP and no
    learned positions, else an all-reduce (positions are added to the full sequence, then split:
    ``LanguageModelEmbedding.reduce_scatter_embeddings``); with SP the backward all-gathers."""
    loss = ("all_reduce", tokens * 4, 3)
    if not sp:
        return [("all_reduce", nbytes, 1), loss], [("all_reduce", nbytes, 1)]
    first = "all_reduce" if m.extra.get("position_embeddings") else "reduce_scatter"
    return ([("all_gather", nbytes, 1), ("reduce_scatter", nbytes, 1), loss],
            [(first, nbytes, 1), ("all_gather", nbytes, 1)])


def tp_gemms(m, t, tokens, mats: int, ffn) -> tuple:
    """The GEMMs each of the four sequence-parallel TP collectives of a layer's pass feeds or
    drains (``_tp_layer``'s order: attention all-gather, MLP all-gather, attention
    reduce-scatter, MLP reduce-scatter), as (m, n, k) shapes (``tp_overlap.Pair.gemms``). The
    attention gather feeds the column-parallel projections on the gathered rows (MLA: the
    up-projections; its replicated down-projections run on the rank's own rows before the
    gather); an MoE layer's MLP collectives feed the router and experts, no fused GEMM (``ffn``
    None). Numbers or arrays over shapes."""
    att = attention_gemms(m, t, True)
    # MLA's down-projections (rows 1/t under SP) run before the gather; over shapes, rows is 1
    # for every t only for the projections on the gathered rows (where t is 1 nothing is
    # exposed: the caller masks it)
    first = tuple((tokens * a.rows, a.n, a.k) for a in att for _ in range(a.count)
                  if a.name != "proj" and np.all(np.asarray(a.rows) == 1.0))
    proj = tuple((tokens, a.n, a.k) for a in att if a.name == "proj")
    fc1 = ((tokens, (mats - 1) * ffn, m.hidden),) if ffn is not None else ()
    fc2 = ((tokens, m.hidden, ffn),) if ffn is not None else ()
    return first, fc1, proj, fc2

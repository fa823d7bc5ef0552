"""Step time: compute per pipeline stage, exposed communication per parallel dimension, the
pipeline bubble, the optimizer step and offload traffic.

Per microbatch and pipeline rank (one GPU; all GPUs of a rank are alike):
- forward F = GEMMs + attention kernel + memory-bound ops + exposed TP / EP / CP communication;
- backward B = 2 x the GEMMs (input and weight gradients; W is the weight half), 2.5 x the
  attention forward (FlashAttention's backward), 2 x the memory-bound bytes, the same TP / EP
  collectives again, plus recompute (full: the whole forward again; selective with eager
  attention: the core attention again).
What overlaps (stated, as the engines do it): DP gradient reduction overlaps the backward of the
last microbatch where the engine overlaps it (Megatron-LM ``overlap_grad_reduce``, DDP buckets,
FSDP2 reduce-scatter per unit, DeepSpeed ``overlap_comm``; ``dp_overlap``); ZeRO parameter
all-gathers overlap the forward where the engine prefetches them; CP ring passes overlap the
attention blocks they feed; PP sends are exposed only in the fill and drain. TP and EP
collectives are exposed, except under async TP / TE comm overlap (``tp_overlap``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from workbench.estimate.activations import checkpointed_fraction
from workbench.estimate.arrays import plain

from workbench.estimate import eager_ops
from workbench.estimate import efficiency as eff
from workbench.estimate import finetune as ft
from workbench.estimate import fp8_casts
from workbench.estimate import tp_overlap as tpo
from workbench.estimate.attention_shapes import (
    attention_gemms, attention_kernel, qkv_widths, tp_gather_width,
)
from workbench.estimate.buffers import compute_dtype_bytes
from workbench.scenario.types import FP4_PRECISIONS
from workbench.estimate.comm import collective_time, group_span
from workbench.engines import engine_of
from workbench.estimate.engine_terms import conventions
from workbench.estimate.flops import layer_flops
from workbench.estimate.params import sequence_parallel_replicated
from workbench.scenario.types import Scenario

DIMS = ("dp", "tp", "pp", "cp", "ep")
# The loss over the vocabulary, bytes per logit (forward, backward) at the memory-bound rate
# (``Engine.loss``). "upcast": cross-entropy on fp32-upcast 16-bit logits
# (``F.cross_entropy(logits.float(), y)``) measured on the H200 table at 14.2-14.4 ps per logit
# forward+backward (8192-16384 tokens x 32,000-128,256) = 34 B at 2,427 GB/s; split as the
# passes move data: forward upcast (2 + 4) and log-softmax (4 + 4) = 14, backward 20.
# "fused": one kernel reads the 16-bit logits and writes their gradient in the forward (2 + 2),
# the backward scales that gradient (2 + 2) — bytes counted, not measured here.
# "chunked" (torchtune): the upcast loss run chunk by chunk moves the same bytes.
# "fused_linear" (Liger's fused linear cross-entropy): per chunk of tokens the head GEMM writes
# the logits, one kernel reads them and writes their gradient in place (2 + 2), and the
# gradient GEMMs run in the forward too; the backward only scales the input and weight
# gradients by the loss's gradient (linkedin/Liger-Kernel@00eba63 ops/
# fused_linear_cross_entropy.py ``element_mul_kernel``): nothing per logit.
LOSS_BYTES = {"upcast": (14.0, 20.0), "fused": (4.0, 4.0), "chunked": (14.0, 20.0),
              "fused_linear": (4.0, 0.0)}


@dataclass
class StageTime:
    """One pipeline rank, per microbatch (seconds)."""

    rank: int
    fwd: float = 0.0          # forward compute
    bwd: float = 0.0          # backward compute (input + weight gradients)
    wgrad: float = 0.0        # the weight-gradient part of ``bwd``
    recompute: float = 0.0
    comm: dict = field(default_factory=lambda: {d: 0.0 for d in DIMS})   # exposed, per mb

    @property
    def f(self) -> float:
        """Forward block on the timeline: compute plus half the exposed communication (the
        collectives are split evenly between the passes, as TP and EP issue them)."""
        return self.fwd + sum(self.comm.values()) / 2

    @property
    def b(self) -> float:
        """Backward block on the timeline: compute, recompute and the other half."""
        return self.bwd + self.recompute + sum(self.comm.values()) / 2


@dataclass
class StepTime:
    step: float
    compute: float
    recompute: float
    bubble: float
    optimizer: float
    offload: float
    comm_exposed: dict
    stages: list[StageTime]
    volume: dict          # bytes and counts per dimension and collective, per GPU per step
    #                       (a GPU of pipeline rank 0)
    volume_per_stage: list[dict] = field(default_factory=list)   # one per pp rank


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


def block_costs(s: Scenario) -> dict[str, BlockCost]:
    """Costs of the blocks a pipeline stage is made of, for this scenario's TP/CP/EP degrees and
    micro-batch (they do not depend on DP, PP, ZeRO or the schedule; what the wrappers of those
    add on a calibrated machine, ``efficiency.wrapper_time``, the cost model adds per rank)."""
    hw, m, par, tr = s.hardware, s.model, s.parallel, s.training
    gpu, prec = eff.on_hardware(hw), tr.precision
    # the GEMMs outside the blocks' linears (router, output head, adapters): bf16 under NVFP4
    edge = eff.edge_precision(prec)
    t, cp = par.tp, par.cp
    e = compute_dtype_bytes(prec)
    tokens = tr.seq_len * tr.micro_batch / cp           # tokens on this GPU per microbatch
    h = m.hidden
    r = t if par.sp else 1
    gpn = hw.gpus_per_node
    tp_span = group_span(t, 1, gpn)
    cp_span = group_span(cp, t, gpn)
    et = par.etp                                          # the experts' TP degree
    ep_span = group_span(par.ep, et, gpn)
    mats = 3 if m.mlp == "swiglu" else 2
    # forward, backward, recomputed forward (layer: the checkpointed share of the blocks)
    eng = engine_of(tr)
    layer_share = checkpointed_fraction(m, tr.recompute_every, eng.recompute_from_first)
    passes = 3 if tr.recompute == "full" else (
        2 + layer_share if tr.recompute == "layer" else 2)
    run = conventions(s)
    kernel_shape = attention_kernel(m, tr.micro_batch, tr.seq_len, t, cp)

    def layer(moe: bool) -> BlockCost:
        comm = {"tp": 0.0, "cp": 0.0, "ep": 0.0}
        volume = []
        ge = 0.0                                  # the routed experts' grouped GEMMs
        lf = layer_flops(m, tokens, tr.seq_len, moe)
        g = sum(eff.gemm_time(tokens * a.rows, a.n, a.k, gpu, prec, a.count)
                for a in attention_gemms(m, t, par.sp))
        # Memory-bound bytes, fused kernels (Megatron-LM / Transformer Engine style), forward:
        # 2 norms (read x, write y), 2 residual adds (read 2, write 1), RoPE on q and k, and the
        # q/k/v layout copy; the backward reads and writes about twice as much (norm backward
        # reads x and dy and writes dx; RoPE and layout again; gradient adds at branch merges).
        qw, kw, vw = qkv_widths(m)
        mem = (2 * 2 + 2 * 3) * tokens * h * e / r + 2 * tokens * (2 * qw + 2 * kw + vw) / t * e
        if moe:
            mo = m.moe
            cap = mo.capacity_factor or 1.0
            local_experts = mo.experts // par.ep
            sharded = eng.moe_dispatch == "sequence_shard"
            if sharded:
                # Megatron-Core's MoEAlltoAllTokenDispatcher (Engine.moe_dispatch): the rank
                # routes its own sequence-parallel shard (MoE training with TP requires SP,
                # moe_layer.py), sends its k copies over EP, and the expert-TP group all-gathers
                # what its et ranks received (dispatch_postprocess).
                own = tokens / t
                sent = own * mo.top_k * cap
                routed = sent * et
            else:
                # torchtitan: the MoE input is all-gathered over TP, the router sees every
                # token; with expert TP = tp each TP rank sends all k copies over EP
                # (ExpertTensorParallel), with expert TP 1 they are split over the TP ranks
                # (ReordererSequenceParallel): et / t of them on this GPU.
                own = tokens
                routed = sent = tokens * mo.top_k * cap * et / t
            rows = routed * par.ep / mo.experts     # tokens per local expert (balanced)
            fe = mo.expert_ffn_hidden / et
            g += eff.gemm_time(own, mo.experts, h, gpu, edge)    # the router's gate
            # Router scores: softmax in fp32 then top-k, as both engines run it (Megatron-Core
            # router.py ``torch.softmax(logits, dim=-1, dtype=torch.float32)`` and moe_utils.py
            # ``torch.topk``; torchtitan moe.py ``F.softmax(scores.to(torch.float32))``,
            # ``torch.topk``): the softmax reads and writes, the top-k reads, 4 B per logit.
            mem += 3 * 4 * own * mo.experts
            if run.expert_loop:
                # One matmul chain per local expert from a Python loop: the host dispatches the
                # expert's forward operations (eager_ops._EXPERT) while the GPU waits on short
                # kernels; the backward runs in autograd's C++ engine (GEMM time only).
                host = local_experts * eager_ops.expert_ops(m)
                ge = (eff.looped_gemm_time(rows, (mats - 1) * fe, h, gpu, prec, local_experts,
                                           host)
                      + eff.gemm_time(rows, h, fe, gpu, prec, local_experts))
            else:
                # Grouped GEMMs: one kernel per projection over every local expert, as fast as
                # one dense GEMM of the same FLOPs (H200 table: 128 experts 2048 -> 768 at
                # 603 TFLOP/s grouped vs 564 dense); timed as count x the per-expert shape.
                ge = (eff.gemm_time(rows * local_experts, (mats - 1) * fe, h, gpu, prec)
                      + eff.gemm_time(rows * local_experts, h, fe, gpu, prec))
            g += ge
            if mo.shared_experts:
                sf = mo.shared_experts * mo.expert_ffn_hidden / t
                g += eff.gemm_time(tokens, (mats - 1) * sf, h, gpu, prec)
                g += eff.gemm_time(tokens, h, sf, gpu, prec)
                mem += mats * tokens * sf * e
            # Permutation, index copies that read and write each row: the rank's k copies of its
            # tokens are gathered by expert before the all-to-all and weighted and summed back
            # after the combine (2 + 2 passes over ``sent`` rows: Megatron ``permute`` /
            # ``unpermute``, fused or not under --moe-permute-fusion; torchtitan the reorderer's
            # gather and the combine's scatter-add); the rows received are sorted by local
            # expert and unsorted before the combine (2 + 2 over ``routed``: Megatron
            # ``sort_chunks_by_idxs`` where a rank holds more than one expert; torchtitan
            # moe/utils.py ``_permute`` / ``_unpermute``, always). Then the activation.
            second = local_experts > 1 or not sharded
            mem += (4 * sent + (4 * routed if second else 0)) * h * e + mats * routed * fe * e
            # Dispatch and combine run in every forward pass and its backward: a full (or
            # layer) recompute runs them again; torchtitan's per-op policy saves
            # all_to_all_single's output (deepseek_v3/infra/parallelize.py _op_sac_save_list),
            # Megatron's selective recompute is the core attention only.
            ep_ops = []
            if par.ep > 1:
                ep_ops.append(("all_to_all", sent * h * e, 2 * passes, ep_span))
            if sharded and (par.ep > 1 or et > 1):
                # Megatron: the tokens-per-expert counts (int64) all-gathered over the tp x ep
                # group in preprocess; the routing probabilities (fp32) travel with the tokens
                # (token_dispatch's second all_to_all), and in the expert-TP group the tokens
                # and probabilities are all-gathered (dispatch_postprocess) and the outputs
                # reduce-scattered (combine_preprocess); an all-gather's backward is a
                # reduce-scatter and the reverse.
                ep_ops.append(("all_gather", et * par.ep * mo.experts * 8, passes - 1,
                               group_span(et * par.ep, 1, gpn)))
                if par.ep > 1:
                    ep_ops.append(("all_to_all", sent * 4, passes, ep_span))
                if et > 1:
                    et_span = group_span(et, 1, gpn)
                    ep_ops += [("all_gather", routed * h * e, passes, et_span),
                               ("reduce_scatter", routed * h * e, passes, et_span),
                               ("all_gather", routed * 4, passes - 1, et_span),
                               ("reduce_scatter", routed * 4, 1, et_span)]
            elif par.ep > 1:
                # torchtitan: the counts go by one all_to_all_single before the tokens
                # (ExpertParallel._token_dispatch)
                ep_ops.append(("all_to_all", mo.experts * 8, passes - 1, ep_span))
            comm["ep"] = sum(n * collective_time(k, b, span, hw) for k, b, n, span in ep_ops)
            volume += [("ep", k, b, n) for k, b, n, _ in ep_ops]
        else:
            f = m.ffn_hidden / t
            g += eff.gemm_time(tokens, (mats - 1) * f, h, gpu, prec)
            g += eff.gemm_time(tokens, h, f, gpu, prec)
            mem += (mats + 1) * tokens * f * e     # activation: read gate/up, write product
        mem *= run.elementwise_traffic
        casts = fp8_casts.CastTraffic(0.0, 0.0)
        if prec in ("fp8", *FP4_PRECISIONS):   # the recipe's casts of every linear's operands
            ops = fp8_casts.layer_operands(
                m, run.fp8, run.fp8_cast_fusion, run.fp8_separate_projections, tokens, t,
                par.sp, moe, **(dict(routed=routed, local_experts=local_experts,
                                     expert_ffn=fe) if moe else {}))
            casts = fp8_casts.cast_traffic(ops, run.fp8.casts)
            g, ge = g / run.fp8_gemm_rate, ge / run.fp8_gemm_rate
        causal = 0.5 if tr.flash else 1.0
        attn_fwd = lf.attention / t * causal
        a_f = eff.attention_time(attn_fwd, gpu, "fwd", tr.attention, kernel_shape)
        a_b = eff.attention_time(2.5 * attn_fwd, gpu, "bwd", tr.attention, kernel_shape)
        if prec == "fp8" and tr.fp8_attention and gpu.profile is None and gpu.fp8_tflops > 0:
            # TE's FP8 DotProductAttention runs cuDNN's FP8 fused attention: Q K^T and P V
            # (forward and backward) read FP8 operands on the FP8 tensor cores. No published
            # measurement of that kernel is in the catalog, so it runs at the bf16 kernel's
            # fraction of the FP8 peak (an upper bound: the softmax does not speed up).
            a_f, a_b = (a * gpu.bf16_tflops / gpu.fp8_tflops for a in (a_f, a_b))
        if not tr.flash:   # eager softmax: scores written and read in 16 bits
            mem += 3 * (m.heads / t) * tokens * tr.seq_len * e
        # the casts as their passes run them: a recomputed forward (mem_t) casts again
        mem_t = eff.memory_time(mem + casts.fwd, gpu, kernels=12)
        mem_b = eff.memory_time(2 * mem + casts.bwd, gpu, kernels=16)
        recompute = 0.0
        if tr.recompute == "full":
            recompute = g + a_f + mem_t
        elif tr.recompute == "layer":     # every k-th block's whole forward again
            recompute = (g + a_f + mem_t) * layer_share
        elif tr.recompute == "selective" and not tr.flash:
            recompute = a_f
        elif tr.recompute == "op":
            # torchtitan's per-op policy saves the outputs of matmuls (all but every second
            # one), attention and reduce-scatters, and recomputes the rest: the memory-bound
            # forward, every second projection GEMM, and the routed experts' grouped GEMMs
            # (``_grouped_mm`` is not in its save list).
            recompute = mem_t + (g - ge) / 2 + ge
        if cp > 1:   # ring attention: cp-1 K/V block passes forward, K/V + dK/dV backward
            block = tokens * (kw + vw) / t * e
            step_t = collective_time("send_recv", block, cp_span, hw)
            ring_f, ring_b = (cp - 1) * step_t, 2 * (cp - 1) * step_t
            comm["cp"] = max(0.0, ring_f - a_f) + max(0.0, ring_b - a_b)
            volume.append(("cp", "send_recv", block, 3 * (cp - 1)))
        if t > 1:   # two TP collectives per layer per pass (Korthikanti et al. 2022 Sec. 4.2)
            nbytes = tokens * h * e
            # (collective, bytes) per pass: under SP the attention gathers what its first
            # GEMMs read (MLA: the latent inputs, attention_shapes.tp_gather_width)
            ops = ([("all_gather", tokens * tp_gather_width(m) * e), ("all_gather", nbytes),
                    ("reduce_scatter", nbytes), ("reduce_scatter", nbytes)] if par.sp
                   else [("all_reduce", nbytes), ("all_reduce", nbytes)])
            # Megatron-Core's MoE layer under SP has no MLP all-gather / reduce-scatter: its
            # dispatcher routes the rank's own sequence shard (above); only shared experts, a
            # sequence-parallel MLP (moe/shared_experts.py SharedExpertMLP(MLP)), keep the pair
            mlp_pair = not (moe and par.sp and eng.moe_dispatch == "sequence_shard"
                            and not m.moe.shared_experts)
            keep = (0, 1, 2, 3) if mlp_pair else (0, 2)     # indices into the SP ops
            ops = [ops[i] for i in keep] if par.sp else ops
            if par.sp and par.tp_comm_overlap and prec == "fp8":
                # TE userbuffers gather FP8 inputs in FP8: "AllGather buffers use fp8 when
                # using fp8 recipe" (transformer_engine/pytorch/module/base.py initialize_ub,
                # fp8_buf for the all-gather layers): 1 byte per element
                ops = [(k, b / e if k == "all_gather" else b) for k, b in ops]
            per_pass = sum(collective_time(k, b, tp_span, hw) for k, b in ops)
            if par.sp and (par.async_tp or par.tp_comm_overlap):
                # Each collective split into chunks under the GEMMs it feeds or drains
                # (tp_overlap): the chunked GEMMs' extra time, the part no chunk covers and,
                # under TE userbuffers, the SMs the collective takes all show.
                secs = dict(zip(keep, (collective_time(k, b, tp_span, hw) for k, b in ops)))
                pairs = [p for i, p in enumerate(_tp_pairs(
                    m, t, tokens, mats, None if moe else m.ffn_hidden / t,
                    [secs.get(i, 0.0) for i in range(4)], nbytes)) if i in keep]
                rate = run.fp8_gemm_rate if prec == "fp8" else 1.0
                if par.tp_comm_overlap:
                    comm["tp"] = ((passes - 1) * tpo.userbuffers_exposed(pairs, t, gpu, prec,
                                                                         rate, False)
                                  + tpo.userbuffers_exposed(pairs, t, gpu, prec, rate, True))
                else:
                    comm["tp"] = passes * tpo.async_tp_exposed(pairs, t, gpu, prec, rate)
            else:
                comm["tp"] = passes * per_pass
            volume += [("tp", k, b, passes) for k, b in ops]
        ops_f, ops_b = eager_ops.layer_ops(m, moe, m.moe.experts // par.ep if moe else None,
                                           grouped=not run.expert_loop)
        mem_t += eff.runtime_ops(gpu, ops_f)
        mem_b += eff.runtime_ops(gpu, 0, ops_b)
        if tr.adapters:
            # frozen base: input-gradient GEMMs only; the adapters' GEMMs; QLoRA dequantises
            # each linear's weight in forward, backward and any recomputed forward
            ad = _adapter_costs(s, moe, tokens, gpu)
            recompute = recompute + (ad.fwd + ad.dequant) * (passes - 2)
            return BlockCost(fwd=g + ad.fwd + ad.dequant + a_f + mem_t,
                             bwd=g + ad.dgrad + ad.wgrad + ad.dequant + a_b + mem_b,
                             wgrad=ad.wgrad, recompute=recompute, comm=tuple(comm.items()),
                             volume=tuple(volume))
        return BlockCost(fwd=g + a_f + mem_t, bwd=2 * g + a_b + mem_b, wgrad=g,
                         recompute=recompute, comm=tuple(comm.items()), volume=tuple(volume))

    g = eff.gemm_time(tokens, m.vocab / t, h, gpu, edge)
    # the loss runs over every vocabulary column where the head gathers them (Engine field)
    logits = tokens * m.vocab / (1 if eng.tp_gathers_logits else t)
    loss_f, loss_b = LOSS_BYTES[run.loss]
    ops_f, ops_b = eager_ops.head_ops(m)
    # a frozen head computes its input gradient only
    head_w = g if ft.edge_trainable(tr, "head") else 0.0
    head = BlockCost(
        fwd=g + eff.memory_time(loss_f * logits, gpu, kernels=4) + eff.runtime_ops(gpu, ops_f),
        bwd=g + head_w + eff.memory_time(loss_b * logits, gpu, kernels=4)
        + eff.runtime_ops(gpu, 0, ops_b), wgrad=head_w)
    ops_f, ops_b = eager_ops.embedding_ops(m)
    embedding = BlockCost(fwd=eff.runtime_ops(gpu, ops_f), bwd=eff.runtime_ops(gpu, 0, ops_b))
    if t > 1:
        nbytes = tokens * h * e
        head_ops, emb_ops = _tp_edge_ops(m, par.sp, nbytes, tokens)
        head = dataclasses.replace(head, **_comm_of(head_ops, tp_span, hw))
        embedding = dataclasses.replace(embedding, **_comm_of(emb_ops, tp_span, hw))
    out = {"dense": layer(False), "head": head, "embedding": embedding}
    if m.moe is not None:
        out["moe"] = layer(True)
    return out


@dataclass(frozen=True)
class AdapterCost:
    """One layer's LoRA work per microbatch on one GPU (seconds)."""

    fwd: float        # x A, then (x A) B^T, per adapted projection
    dgrad: float      # the two input-gradient GEMMs
    wgrad: float      # the two weight-gradient GEMMs (dA, dB)
    dequant: float    # QLoRA: one pass of dequantising every block linear's weight


def _adapter_costs(s: Scenario, moe: bool, tokens: float, gpu) -> AdapterCost:
    """Adapter GEMMs through the kernel model (r is small, so most are memory-bound: the
    model's roofline takes the larger of FLOPs and bytes) and QLoRA's dequantisation traffic:
    each pass reads the stored weight and writes its compute-dtype copy
    (bitsandbytes ``dequantize_4bit``)."""
    m, par, tr = s.model, s.parallel, s.training
    prec, r = eff.edge_precision(tr.precision), tr.lora.rank   # adapters are not TE linears
    local = m.moe.experts // par.ep if moe else 1
    fwd = dgrad = wgrad = 0.0
    for p in ft.adapted(tr, m, moe, local):
        t = par.etp if p.expert else par.tp
        k = p.k / t if p.style == "row" else p.k
        n = p.n / t if p.style == "column" else p.n
        # tokens per local expert, balanced routing (block_costs' ``rows``)
        rows = tokens * m.moe.top_k * par.ep / m.moe.experts if p.expert else tokens
        fwd += (eff.gemm_time(rows, r, k, gpu, prec, p.count)
                + eff.gemm_time(rows, n, r, gpu, prec, p.count))
        dgrad += (eff.gemm_time(rows, k, r, gpu, prec, p.count)
                  + eff.gemm_time(rows, r, n, gpu, prec, p.count))
        wgrad += (eff.gemm_time(r, k, rows, gpu, prec, p.count)
                  + eff.gemm_time(n, r, rows, gpu, prec, p.count))
    dequant = 0.0
    if tr.method == "qlora":
        elements = sum(p.count * p.k * p.n / ((par.etp if p.expert else par.tp)
                                              if p.style != "replicated" else 1)
                       for p in ft.projections(m, moe, local))
        nbytes = elements * (ft.quantized_bytes_per_param(tr, m) + compute_dtype_bytes(prec))
        dequant = eff.memory_time(nbytes, gpu, kernels=len(ft.projections(m, moe, local)))
    return AdapterCost(fwd, dgrad, wgrad, dequant)


def _tp_edge_ops(m, sp: bool, nbytes: float, tokens: float) -> tuple[list, list]:
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


def _comm_of(ops: list, span, hw) -> dict:
    """BlockCost fields (exposed seconds, volume) of a list of TP collectives."""
    secs = sum(n * collective_time(k, b, span, hw) for k, b, n in ops)
    return {"comm": (("tp", secs),), "volume": tuple(("tp", k, b, n) for k, b, n in ops)}


def _tp_pairs(m, t: int, tokens: float, mats: int, ffn: float | None, secs: list,
              nbytes: float) -> list:
    """The four sequence-parallel TP collectives of a layer's pass (``block_costs``' order:
    attention all-gather, MLP all-gather, attention reduce-scatter, MLP reduce-scatter), each
    with the GEMMs it feeds or drains (``tp_overlap.Pair``). The attention gather feeds the
    column-parallel projections on the gathered rows (MLA: the up-projections; its replicated
    down-projections run on the rank's own rows before the gather); an MoE layer's MLP
    collectives feed the router and experts, no fused GEMM (``ffn`` None)."""
    att = attention_gemms(m, t, True)
    first = tuple((tokens * a.rows, a.n, a.k) for a in att for _ in range(a.count)
                  if a.name != "proj" and a.rows == 1.0)
    proj = tuple((tokens, a.n, a.k) for a in att if a.name == "proj")
    fc1 = ((tokens, (mats - 1) * ffn, m.hidden),) if ffn else ()
    fc2 = ((tokens, m.hidden, ffn),) if ffn else ()
    return [tpo.Pair("all_gather", secs[0], first), tpo.Pair("all_gather", secs[1], fc1),
            tpo.Pair("reduce_scatter", secs[2], proj, nbytes),
            tpo.Pair("reduce_scatter", secs[3], fc2, nbytes)]


def group_sizes(par) -> dict[str, int]:
    """Ranks in one group of each dimension's collectives (pipeline sends pair two ranks)."""
    return {"dp": par.dp * par.cp, "tp": par.tp, "cp": par.cp, "ep": par.ep, "pp": 2}


def serial_comm_time(volume: dict, par, hw) -> dict:
    """Seconds per dimension when every collective of ``volume`` (per dim and collective:
    bytes and count per step; numbers or arrays, one entry per row of a grid ``par``) runs in
    turn, none overlapped. Broadcasts are issued together and waited for at once
    (ZeroRedundancyOptimizer's ``_sync_params``): one in-step latency, the rest back to back.
    Expert reductions over the expert-data-parallel group are timed at the dense group's size
    (an upper bound)."""
    sizes = group_sizes(par)
    gpn = hw.gpus_per_node
    out = {}
    for dim, ops in volume.items():
        span = group_span(sizes.get(dim, 2), 1, gpn)
        total = 0.0
        for kind, v in ops.items():
            count = np.asarray(v["count"], dtype=float)
            one = np.asarray(v["bytes"]) / np.where(count > 0, count, 1)
            each = collective_time(kind, one, span, hw)
            if kind == "broadcast":
                rest = collective_time(kind, one, span, hw, back_to_back=True)
                secs = each + (count - 1) * rest
            else:
                secs = count * each
            total = total + np.where(count > 0, secs, 0.0)
        out[dim] = plain(np.asarray(total, dtype=float))
    return out


def sp_grad_reduction(s: Scenario, layers, has_head, zero, tp, mbs, sp, dp_cp=1, pp=1) -> tuple:
    """(bytes, count, seconds) per step of the TP all-reduce of sequence-parallel weights'
    gradients on a pipeline rank (arrays allowed). Megatron-LM coalesces them into one fp32
    all-reduce per step (``_allreduce_layernorm_grads``); FSDP2 (ZeRO-2/3 over dp x cp > 1)
    redistributes each one's partial gradient to its layout before it reduce-scatters, in the
    compute dtype: every microbatch, or once per step under pipelining (no-sync until the last
    microbatch, as ``_dp_counts`` counts the reduce-scatters)."""
    elements, tensors = sequence_parallel_replicated(s.model, layers, has_head)
    fsdp = (np.asarray(zero) >= 2) & (np.asarray(dp_cp) > 1)
    nbytes = np.where(fsdp, elements / np.maximum(tensors, 1)
                      * compute_dtype_bytes(s.training.precision), elements * 4)
    per_step = np.where(np.asarray(pp) > 1, 1, mbs)
    count = np.where(sp & (tensors > 0), np.where(fsdp, tensors * per_step, 1), 0)
    span = group_span(tp, 1, s.hardware.gpus_per_node)
    secs = np.where(count > 0, count * collective_time("all_reduce", nbytes, span, s.hardware),
                    0.0)
    return nbytes, count, secs


def dp_overlap(s: Scenario, zero) -> tuple:
    """(gradient reduction overlapped with the backward, parameter all-gathers overlapped with
    the forward) for ``s`` at ZeRO stage ``zero`` (an int or an array): the scenario's
    ``parallel.overlap_grad_reduce`` / ``overlap_param_gather`` where set, else what its engine
    does at that stage (``Engine.dp_overlap_at``)."""
    grad, gather = engine_of(s.training).dp_overlap_at(zero)
    par = s.parallel
    return (grad if par.overlap_grad_reduce is None else par.overlap_grad_reduce,
            gather if par.overlap_param_gather is None else par.overlap_param_gather)


def dp_exposed(par, hw, precision: str, mbs, dense, expert, fwd, bwd,
               vol=None, units=1, expert_units=None, trained=None, grad_bytes=4,
               gather_bytes=None, overlap_grad=True, overlap_gather=True, upload_s=0.0):
    """Exposed data-parallel communication of one pipeline rank per step (arrays allowed).
    Dense parameters reduce over dp x cp (ZeRO shards over ``dense_shard``, HSDP replicas
    all-reduce the shards); expert parameters over their expert-data-parallel group
    (dp x cp / ep). Gradients hide behind the last microbatch's backward where
    ``overlap_grad`` (else they run after it, in full: Megatron-LM without
    --overlap-grad-reduce, DeepSpeed without overlap_comm), parameter gathers behind the forward
    where ``overlap_gather`` (ZeRO-3: behind each microbatch's forward and backward; else each
    in full: Megatron's distributed optimizer without --overlap-param-gather and DeepSpeed
    ZeRO-1/2 gather after the optimizer step); both arrays allowed (``dp_overlap``). Under ZeRO-3
    each of the stage's ``units`` FSDP units (a block each, plus the root) gathers and reduces
    its own parameters: ``units`` collectives of 1/units of the bytes each. Under EP the experts
    of each MoE layer are a unit of their own over the expert-data-parallel group (torchtitan's
    ``apply_fsdp``: ``fully_shard(block.moe.experts, mesh=edp_mesh)``): ``expert_units`` (the
    stage's MoE layers; default ``units``) collectives for the expert bytes. Fine-tuning:
    gradients exist for the ``trained`` (dense, expert) parameters only, reduced in
    ``grad_bytes`` each (DDP and FSDP2 reduce only parameters with gradients), while ZeRO-3
    gathers every parameter in its stored format (``gather_bytes`` per parameter).
    ``upload_s``: seconds to copy the stage's ZeRO-3 parameter shard from host memory or NVMe
    to the GPU once; with the parameters offloaded every all-gather round pays it first
    (FSDP2 ``CPUOffloadPolicy``: the sharded parameter is copied to the device in the
    all-gather's copy-in, torch 2.13 distributed/fsdp/_fully_shard/_fsdp_param.py
    ``FSDPParam.all_gather_inputs`` ``self._sharded_param_data.to(self.device)``; DeepSpeed
    ZeRO-3 ``offload_param`` fetches the partition before each gather)."""
    gpn = hw.gpus_per_node
    zero = np.asarray(par.zero)
    grad_b = grad_bytes   # fp32 gradient reduction (Megatron-LM main grads; FSDP2 reduce_dtype)
    param_b = compute_dtype_bytes(precision) if gather_bytes is None else gather_bytes
    tdense, texpert = (dense, expert) if trained is None else trained
    counts = _dp_counts(par, mbs)
    tp, ep = np.asarray(par.tp), np.asarray(par.ep)
    # Without EP the experts replicate over the same ranks as the dense weights: one reduction
    # (DDP buckets and FSDP2 units hold both), so they join the dense group.
    joined = ep == 1
    expert_units = units if expert_units is None else np.maximum(expert_units, 1)
    groups = [(dense + np.where(joined, expert, 0), tdense + np.where(joined, texpert, 0),
               np.asarray(par.dp) * par.cp, par.dense_shard, tp, units),
              (np.where(joined, 0, expert), np.where(joined, 0, texpert),
               np.asarray(par.expert_data_parallel), par.expert_shard, tp * ep, expert_units)]
    ag = rs = ar = 0.0
    for nparams, ngrads, n, shard, stride, group_units in groups:
        if not np.any(nparams):      # no expert group (dense model, or experts joined): no cost
            continue
        shard = np.where(zero > 0, shard, n)
        rep = n // shard
        shard_span = group_span(shard, stride, gpn)
        rep_span = group_span(rep, stride * shard, gpn)
        # DDP all-reduces the whole gradient over the group; under ZeRO the shard group
        # reduce-scatters it and, with HSDP replicas, the replicas all-reduce their shard.
        ar_span = type(shard_span)(*(np.where(zero > 0, a, b) for a, b in zip(
            (rep_span.size, rep_span.per_node, rep_span.nodes),
            (shard_span.size, shard_span.per_node, shard_span.nodes))))
        ar_bytes = np.where(zero > 0, np.where(rep > 1, ngrads * grad_b / shard, 0),
                            ngrads * grad_b)
        per_unit = np.where(zero == 3, group_units, 1)
        for kind, nbytes, span in (("all_gather", nparams * param_b, shard_span),
                                   ("reduce_scatter", ngrads * grad_b, shard_span),
                                   ("all_reduce", ar_bytes, ar_span)):
            split = per_unit if kind != "all_reduce" else 1
            one = np.where((counts[kind] > 0) & (n > 1) & (nbytes > 0),
                           split * collective_time(kind, nbytes / split, span, hw), 0.0)
            if vol is not None:
                vol.add("dp", kind, nbytes / split, np.where(one > 0, counts[kind] * split, 0))
            if kind == "all_gather":
                ag = ag + one
            elif kind == "reduce_scatter":
                rs = rs + one
            else:
                ar = ar + one
    og, ogather = np.asarray(overlap_grad, dtype=bool), np.asarray(overlap_gather, dtype=bool)
    ddp = np.where(og, np.maximum(0.0, ar - bwd), ar)
    zero12 = (np.where(og, np.maximum(0.0, rs + ar - bwd), rs + ar)
              + np.where(ogather, np.maximum(0.0, ag - fwd), ag))
    gathers_bwd = np.where(par.reshards, mbs, 0)
    gathers_fwd = counts["all_gather"] - gathers_bwd
    # ZeRO-3 with the parameter shard offloaded: each unit's shard is copied in before its
    # all-gather, on the same prefetching stream (``upload_s``: the stage's whole shard once)
    ag3 = ag + upload_s
    zero3 = (np.where(ogather, gathers_fwd * np.maximum(0.0, ag3 - fwd)
                      + gathers_bwd * np.maximum(0.0, ag3 - bwd / 2),
                      counts["all_gather"] * ag3)
             + counts["reduce_scatter"] * np.where(og, np.maximum(0.0, rs - bwd / 2), rs) + ar)
    return plain(np.where(zero == 0, ddp, np.where(zero < 3, zero12, zero3)))


def _dp_counts(par, mbs) -> dict:
    """Data-parallel collectives per step: DDP one all-reduce; ZeRO-1/2 one reduce-scatter and
    one all-gather (plus the HSDP-style replica all-reduce); ZeRO-3 (FSDP2) an all-gather per
    microbatch forward (once under pipelining without resharding) and per microbatch backward
    when resharding, a reduce-scatter per microbatch (once under pipelining: no-sync until the
    last microbatch)."""
    zero, pp = np.asarray(par.zero), np.asarray(par.pp)
    fwd = np.where(np.asarray(par.reshards) | (pp == 1), mbs, 1)
    bwd = np.where(par.reshards, mbs, 0)
    return {"all_gather": np.where(zero == 0, 0, np.where(zero < 3, 1, fwd + bwd)),
            "reduce_scatter": np.where(zero == 0, 0, np.where(zero < 3, 1,
                                                              np.where(pp > 1, 1, mbs))),
            "all_reduce": np.asarray(1)}


def pcie_bytes_per_s(hw) -> float:
    """Host copies over the GPU's PCIe link per direction: 80 % of its x16 rate (15.75 GB/s
    per PCIe 3.0 x16, doubling each generation; the 80 % an assumption, not a measurement)."""
    return hw.gpu.pcie_lanes / 16 * 15.75e9 * 2 ** (hw.gpu.pcie_gen - 3) * 0.8


def param_upload_time(hw, tr, params_far):
    """Seconds to copy a GPU's offloaded ZeRO-3 parameter shard (``params_far`` bytes; arrays
    allowed) to it once: over its PCIe link, and from NVMe first (every GPU of the node reads
    its shard through the node's drives) when offload is nvme."""
    far = np.asarray(params_far, dtype=float)
    t = far / pcie_bytes_per_s(hw)
    if tr.offload == "nvme":
        drives = max(1, hw.storage.drives)
        t = t + far * hw.gpus_per_node / (drives * hw.storage.drive.read_gb_per_s * 1e9)
    return plain(t)


def optimizer_bytes_moved(state) -> float:
    """HBM bytes an optimizer step moves per parameter for ``state`` (a ``BytesPerParam``): it
    reads the gradient, reads and writes every state (master copy included), and writes the
    parameter; without a master copy it reads the parameter too. The mixed-precision table's
    AdamW gives the 30 B of ``optimizer_and_offload``."""
    master = state.params < 4 and state.optimizer >= 4 + 4   # a 16-bit weight beside fp32 ones
    return state.grads + 2 * state.optimizer + state.params * (1 if master else 2)


def optimizer_and_offload(hw, tr, local_params, moved_per_param: float | None = None,
                          params_up=True) -> tuple:
    """(optimizer step on the GPU, offload traffic) in seconds for one GPU updating
    ``local_params`` parameters (arrays allowed).
    On the GPU, Adam reads master, grad, m, v and writes master, m, v and the 16-bit copy:
    30 B/param (SGD: 22), at HBM speed. With ZeRO-Offload, 16-bit gradients go down and
    parameters up over the GPU's PCIe link (80 % of its x16 rate per direction, 15.75 GB/s per
    PCIe 3.0 x16 doubling each generation), the CPU streams the optimizer for every GPU of the node
    through DDR (70 % of channels x MT/s x 8 B), and ZeRO-Infinity reads and writes 12 B/param
    on the NVMe drives. The 80 % and 70 % are assumptions, not measurements.
    ``moved_per_param`` replaces the 30 / 22 B where the states differ (``optimizer_bytes_moved``).
    ``params_up`` False (per row): ZeRO-3 keeps the updated parameters in host memory and copies
    each shard in before its all-gathers instead (``param_upload_time``), not once here."""
    per = moved_per_param if moved_per_param is not None else (
        30 if tr.optimizer == "adamw" else 22)
    moved = per * np.asarray(local_params, dtype=float)
    if tr.offload == "none":
        return plain(eff.memory_time(moved, eff.on_hardware(hw), kernels=4,
                                     kind="optimizer")), 0.0
    t_pcie = (2 + 2 * np.asarray(params_up)) * np.asarray(local_params) / pcie_bytes_per_s(hw)
    t_cpu = hw.gpus_per_node * moved / (hw.host.memory_gb_per_s * 1e9 * 0.7)
    t_nvme = 0.0
    if tr.offload == "nvme":
        drives, d = max(1, hw.storage.drives), hw.storage.drive
        per_node = 12 * np.asarray(local_params) * hw.gpus_per_node
        t_nvme = per_node / (drives * d.read_gb_per_s * 1e9) + per_node / (
            drives * d.write_gb_per_s * 1e9)
    return 0.0, plain(t_pcie + t_cpu + t_nvme)

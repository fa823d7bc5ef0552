"""An MoE layer's own costs on one GPU per microbatch, for every shape of a grid at once
(``block_costs``): the router, the routed and shared experts, the permutations around the
dispatch, and the dispatch itself as each engine runs it (``Engine.moe_dispatch``)."""
from __future__ import annotations

import numpy as np

from workbench.estimate.time import eager_ops
from workbench.estimate.time import kernels as eff
from workbench.estimate.memory.buffers import compute_dtype_bytes
from workbench.estimate.time.block_shapes import BlockShapes
from workbench.estimate.time.collectives import collective_times
from workbench.estimate.placement import group_span


def moe_part(x: BlockShapes, g, mem) -> tuple:
    """An MoE layer's router, experts, permutations and dispatch, added to the attention's GEMM
    seconds ``g`` and memory-bound bytes ``mem``: (g, the routed experts' GEMM seconds, mem,
    exposed EP seconds, EP volume, routed token copies, local experts, expert FFN width, token
    rows per local expert, and the parts a recomputed module runs again: the activation's
    bytes, the shared experts' GEMM seconds and activation bytes)."""
    s, t, ep, et, tokens, gpu, run = x.s, x.t, x.ep, x.et, x.tokens, x.gpu, x.run
    hw, m, tr = s.hardware, s.model, s.training
    prec, edge, passes = tr.precision, eff.edge_precision(tr.precision), x.passes
    e, h, gpn = compute_dtype_bytes(prec), m.hidden, hw.gpus_per_node
    mats = 3 if m.mlp == "swiglu" else 2
    mo = m.moe
    cap = mo.capacity_factor or 1.0
    local_experts = mo.experts // ep
    sharded = x.eng.moe_dispatch == "sequence_shard"
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
    rows = routed * ep / mo.experts     # tokens per local expert (balanced; adapters too)
    fe = mo.expert_ffn_hidden / et
    g = g + eff.gemm_time(own, mo.experts, h, gpu, edge)    # the router's gate
    # Router scores: softmax in fp32 then top-k, as both engines run it (Megatron-Core
    # router.py ``torch.softmax(logits, dim=-1, dtype=torch.float32)`` and moe_utils.py
    # ``torch.topk``; torchtitan moe.py ``F.softmax(scores.to(torch.float32))``,
    # ``torch.topk``): the softmax reads and writes, the top-k reads, 4 B per logit.
    mem = mem + 3 * 4 * own * mo.experts
    if run.expert_loop:
        # One matmul chain per local expert from a Python loop: the host dispatches the
        # expert's forward operations (eager_ops._EXPERT) while the GPU waits on short
        # kernels; the backward runs in autograd's C++ engine (GEMM time only).
        host = local_experts * eager_ops.expert_ops(m)
        ge = (eff.looped_gemm_time(rows, (mats - 1) * fe, h, gpu, prec, local_experts, host)
              + eff.gemm_time(rows, h, fe, gpu, prec, local_experts))
    else:
        # Grouped GEMMs: one kernel per projection over every local expert, as fast as
        # one dense GEMM of the same FLOPs (H200 table: 128 experts 2048 -> 768 at
        # 603 TFLOP/s grouped vs 564 dense); timed as count x the per-expert shape.
        ge = (eff.gemm_time(rows * local_experts, (mats - 1) * fe, h, gpu, prec)
              + eff.gemm_time(rows * local_experts, h, fe, gpu, prec))
    g = g + ge
    # what a recomputed module runs again (``block_costs._module_recompute``)
    parts = {"act": mats * routed * fe * e, "shared": 0.0, "shared_act": 0.0}
    if mo.shared_experts:
        sf = mo.shared_experts * mo.expert_ffn_hidden / t
        parts["shared"] = (eff.gemm_time(tokens, (mats - 1) * sf, h, gpu, prec)
                           + eff.gemm_time(tokens, h, sf, gpu, prec))
        parts["shared_act"] = mats * tokens * sf * e
        g = g + parts["shared"]
        mem = mem + parts["shared_act"]
    # Permutation, index copies that read and write each row: the rank's k copies of its
    # tokens are gathered by expert before the all-to-all and weighted and summed back
    # after the combine (2 + 2 passes over ``sent`` rows: Megatron ``permute`` /
    # ``unpermute``, fused or not under --moe-permute-fusion; torchtitan the reorderer's
    # gather and the combine's scatter-add); the rows received are sorted by local
    # expert and unsorted before the combine (2 + 2 over ``routed``: Megatron
    # ``sort_chunks_by_idxs`` where a rank holds more than one expert; torchtitan
    # moe/utils.py ``_permute`` / ``_unpermute``, always). Then the activation.
    second = (local_experts > 1) | (not sharded)
    mem = mem + (4 * sent + np.where(second, 4 * routed, 0)) * h * e + parts["act"]
    # Dispatch and combine run in every forward pass and its backward: a full (or
    # layer) recompute runs them again; torchtitan's per-op policy saves
    # all_to_all_single's output (deepseek_v3/infra/parallelize.py _op_sac_save_list),
    # Megatron's selective recompute is the core attention only.
    multi = ep > 1
    ep_span = group_span(ep, et, gpn)
    ops = [("all_to_all", sent * h * e, 2 * passes, ep_span, multi)]
    if sharded:
        # Megatron: the tokens-per-expert counts (int64) all-gathered over the tp x ep
        # group in preprocess (where ep > 1 or et > 1); the routing probabilities (fp32)
        # travel with the tokens (token_dispatch's second all_to_all), and in the expert-TP
        # group the tokens and probabilities are all-gathered (dispatch_postprocess) and the
        # outputs reduce-scattered (combine_preprocess); an all-gather's backward is a
        # reduce-scatter and the reverse. Each all-gather and reduce-scatter pair shares its
        # buffer and group, so ``collective_times`` times it once where the two take the
        # same time (as ``block_costs._tp_layer``'s pairs).
        wide = et > 1
        et_span = group_span(et, 1, gpn)
        tokens_b, probs_b = routed * h * e, routed * 4
        ops += [("all_gather", et * ep * mo.experts * 8, passes - 1,
                 group_span(et * ep, 1, gpn), multi | wide),
                ("all_to_all", sent * 4, passes, ep_span, multi),
                ("all_gather", tokens_b, passes, et_span, wide),
                ("reduce_scatter", tokens_b, passes, et_span, wide),
                ("all_gather", probs_b, passes - 1, et_span, wide),
                ("reduce_scatter", probs_b, 1, et_span, wide)]
    else:
        # torchtitan: the counts go by one all_to_all_single before the tokens
        # (ExpertParallel._token_dispatch)
        ops.append(("all_to_all", mo.experts * 8, passes - 1, ep_span, multi))
    # (a collective that runs on none of the shapes is not timed: 0 s there)
    exposed = sum(np.where(on, n * collective_times([(k, b)], span, hw, x.timed)[0], 0.0)
                  if on.any() else x.full(0.0) for k, b, n, span, on in ops)
    volume = [("ep", k, x.full(b), np.where(on, n, 0)) for k, b, n, _, on in ops]
    return g, ge, mem, exposed, volume, routed, local_experts, fe, rows, parts

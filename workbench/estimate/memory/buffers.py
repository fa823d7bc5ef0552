"""Transient buffers on one GPU: communication staging, working copies, and the allocator.

Each term is the peak size of a buffer alive at the same time as the saved activations:
- FSDP2 / ZeRO-3: unsharded parameters of the current unit and the prefetched next one (two
  units in the compute dtype), plus one unit's unsharded gradient in the compute dtype and its
  fp32 copy for the reduce-scatter (FSDP2 ``MixedPrecisionPolicy(reduce_dtype=fp32)``). Without
  resharding after forward, every unit of the stage stays unsharded from forward to backward.
  A unit is one transformer block, the embedding or the head (torchtitan wraps each). With
  pipeline parallelism the schedule skips gradient sync until the last microbatch, so the whole
  stage's unsharded gradients (fp32) are alive (torch.distributed.pipelining's no-sync backward).
- DDP and ZeRO-1/2: none beyond the gradients. Gradients live in the communication buckets
  (PyTorch DDP ``gradient_as_bucket_view=True``, Megatron-LM's contiguous grad buffer), so the
  all-reduce / reduce-scatter works in place.
- TP: the output of a row-parallel GEMM before its all-reduce (s·b·h); with SP, the all-gathered
  input and the pre-reduce-scatter output (2·s·b·h) — Korthikanti et al. 2022 Sec. 4.2.2.
- CP (ring attention): the K/V block being sent and the one being received (2 × 2·s/cp·kv/t).
- EP: all-to-all send and receive buffers of the dispatched tokens (2 × k·s·b·h).
- Loss: on the stage holding the head, while the loss runs its backward: the logits in the
  compute dtype, and the gradient(s) the loss makes (``loss_moments``; its forward's figure is
  the ``forward`` phase's, ``estimate.memory.peak``). Compiled (``Engine.loss_compiled`` with
  ``training.compile``) the loss holds no fp32 tensor per logit and its backward writes the
  gradient in the compute dtype; a vocabulary-parallel loss (``Engine.loss_vocab_parallel``)
  turns its saved fp32 softmax into the gradient in place and casts that to the compute
  dtype. A fused loss kernel writes one fp32
  gradient (4 B per logit); the fp32-upcast loss (``Engine.loss`` "upcast":
  ``F.cross_entropy(logits.float(), y)``) holds the gradient of its log-probabilities and of its
  fp32 input at once (4 + 4 B), beside the fp32 log-probabilities the head saved (activations).
  Where the trainer drops the model's output before backward (``Engine.logits_kept_in_backward``
  false: Hugging Face's ``Trainer.compute_loss`` returns the loss alone) the compute-dtype
  logits are gone by then; where the head gathers the whole vocabulary onto every TP rank
  (``Engine.tp_gathers_logits``) the loss holds all V columns. A fused linear cross-entropy
  (``Engine.loss`` "fused_linear", Liger) holds no logits: ``fused_linear_loss_bytes``.
- FP8: the FP8 copies of the current unit's weights (1 B/param, two units in flight).
- Allocator allowance (``generic`` only, which keeps its first estimates): ``ALLOCATOR_FRACTION``
  of everything else. The other engines split peak allocated from peak reserved
  (``memory.allocator``). The CUDA context (outside PyTorch's statistics) is in
  ``memory.device``.
"""
from __future__ import annotations

import numpy as np

from workbench.catalog.types import ModelShape
from workbench.engines.types import QUANTIZED_BYTES
from workbench.estimate.memory.activations import ActivationShape
from workbench.estimate.arrays import plain
from workbench.estimate.model.attention import qkv_widths
from workbench.scenario.types import Parallel

ALLOCATOR_FRACTION = 0.05
# Gradient bytes per logit the loss holds at once in its backward (``Engine.loss``): fused
# kernel 4; flash-attn's xentropy kernel the compute dtype (``loss_per_logit``); fp32 upcast 4 + 4; chunked upcast (torchtune ``CEWithChunkedOutputLoss``,
# num_output_chunks 8, each chunk ``logits.float()`` on its own: modules/loss/
# ce_chunked_output_loss.py L30-43 @ v0.6.1) the upcast's 8 for one chunk in 8.
LOSS_GRADIENT_BYTES = {"fused": 4.0, "upcast": 8.0, "chunked": 8.0 / 8}


def fused_linear_loss_bytes(tokens, vocab: int, hidden: int, elem: int, weight_grad: bool):
    """Bytes Liger's fused linear cross-entropy holds beyond what it saves for backward
    (linkedin/Liger-Kernel@00eba634c2e9b5f05badbfb67e9b0a4caba301a2
    src/liger_kernel/ops/fused_linear_cross_entropy.py ``fused_linear_cross_entropy_forward``):
    the head weight's gradient, computed in the forward and kept until backward
    (``torch.zeros_like(weight)``: the weight as the head sees it, in the compute dtype), and one
    chunk of logits in the input's dtype, reused chunk after chunk: ``chunk_size =
    next_power_of_2(cdiv(BT, cdiv(V, H)))`` tokens, at most BT (``chunk_mem_const`` 1).
    ``tokens`` may be an array."""
    bt = np.asarray(tokens, dtype=float)
    inc = -(-vocab // hidden)
    chunk = np.minimum(2.0 ** np.ceil(np.log2(np.maximum(np.ceil(bt / inc), 1))), bt)
    return chunk * vocab * elem + (vocab * hidden * elem if weight_grad else 0)


def loss_per_logit(loss: str, cd: int, logits_kept: bool, compiled: bool = False,
                   vocab_parallel: bool = False, shift_copy: bool = False,
                   output_fp32: bool = False) -> tuple[float, float]:
    """(end of the loss's forward, its backward): bytes per logit the loss holds beyond what
    it saves for backward (the fp32 log-probabilities or softmax, ``activations.head_bytes``),
    for ``Engine.loss`` (not "fused_linear") in a compute dtype of ``cd`` bytes.

    - vocabulary-parallel (Megatron-Core 0.16.1 fusions/fused_cross_entropy.py and
      tensor_parallel/cross_entropy.py; nanotron@00708b8 tensor_parallel/functional.py
      _ShardedCrossEntropy): forward, the 16-bit logits beside the fp32 copy that becomes the
      saved softmax in place (nanotron's max subtraction makes a second fp32 tensor,
      ``shift_copy``); backward, the softmax made the gradient in place plus its 16-bit cast
      (``grad_input.to(torch.bfloat16)``; autograd's cast for the unfused one); the 16-bit
      logits are gone by then.
    - compiled (torchtitan / torchtune under ``training.compile``): Inductor reads the 16-bit
      logits and saves a log-sum-exp per token; its backward writes the 16-bit gradient (one
      chunk in 8 for torchtune's chunked loss).
    - eager upcast: the logits and their fp32 copy in the forward; the gradients of
      ``LOSS_GRADIENT_BYTES`` in the backward. "fused": its fp32 gradient from the forward on.
    - "xentropy" (flash-attn's kernel): nothing beyond the logits in the forward (it saves the
      logits themselves and a log-sum-exp per token, ``activations.head_bytes``); its backward
      writes the gradient in the logits' dtype.
    - ``output_fp32`` (``Engine.output_fp32``: Lightning Fabric casts the model's output to
      fp32 and the script holds it): the forward ends with the 16-bit output beside its fp32
      copy; the logits kept into the backward are the fp32 copy.
    """
    if vocab_parallel:
        return cd + (4.0 if shift_copy else 0.0), float(cd)
    chunks = 8 if loss == "chunked" else 1
    kept = (4 if output_fp32 else cd) if logits_kept else 0
    if loss == "xentropy":   # the logits it saved, then beside them their gradient
        return float(cd), 2.0 * cd
    if compiled:
        return float(cd), kept + cd / chunks
    held = 4.0 / chunks if loss in ("upcast", "chunked") else LOSS_GRADIENT_BYTES[loss]
    return cd + (4.0 if output_fp32 else held), kept + LOSS_GRADIENT_BYTES[loss]


def loss_moments(model: ModelShape, x: ActivationShape, tp, loss: str, cd: int,
                 logits_kept: bool = True, vocab_split: bool = True, head_trains: bool = True,
                 compiled: bool = False, vocab_parallel: bool = False,
                 shift_copy: bool = False, output_fp32: bool = False) -> tuple:
    """(forward, backward) bytes the loss holds on the stage with the head beyond its saved
    tensors (``loss_per_logit``; Liger's fused linear loss: ``fused_linear_loss_bytes`` at
    both moments). ``tp`` may be an array."""
    sb = np.asarray(x.s) * x.b
    vocab = -(-model.vocab // np.asarray(tp)) if vocab_split else np.asarray(model.vocab)
    if loss == "fused_linear":
        held = fused_linear_loss_bytes(sb, vocab, model.hidden, cd, head_trains)
        return held, held
    fwd, bwd = loss_per_logit(loss, cd, logits_kept, compiled, vocab_parallel, shift_copy,
                              output_fp32)
    return sb * vocab * fwd, sb * vocab * bwd


def zero3_gathered(stage_params, unit, largest, live_bound=None):
    """(parameters, gradients) in elements that ZeRO-3 holds unsharded at once on a rank whose
    pipeline stage has ``stage_params``, with resharding after forward.

    - FSDP (``live_bound`` None): the unit in use and the prefetched next one (``unit`` the
      largest wrapped unit), and one unit's gradient before its reduce-scatter.
    - DeepSpeed (``live_bound`` its stage3_max_live_parameters): parameters are fetched module by
      module, and prefetching stops once ``live_bound`` elements are available, so at most that
      bound plus the module being fetched and the one prefetched parameter past the bound
      (``largest`` each, the largest weight); never more than the stage. A gradient is copied
      into the reduce bucket (``Engine.dp_bucket_bytes``) as autograd makes it, so one
      parameter's gradient is alive on its own (DS deepspeed/runtime/zero/stage3.py:1543
      ``__add_grad_to_ipg_bucket``; a gradient larger than the bucket stays where it is).
    Arrays allowed."""
    if live_bound is None:
        return 2 * np.asarray(unit), np.asarray(unit)
    return np.minimum(np.asarray(stage_params), live_bound + 2 * np.asarray(largest)), \
        np.asarray(largest)


def flat_param_grads(fsdp, block_frozen, unit_frozen, root, shard, accumulating, cd: int,
                     gather_bytes) -> dict:
    """What FSDP1's flat parameters add on a GPU under LoRA (``Engine.fsdp1_flat_params``):

    - "flat_param_frozen_grads": a wrapped block's flat parameter requires grad when any of
      its weights does (torch 2.1 torch/distributed/fsdp/flat_param.py ~L713-743: "For
      ``use_orig_params=True``, permit non-uniform ``requires_grad``"; its _wrap_utils.py
      L157-165 warns that the gradient "will be higher than expected"), so the backward makes a
      gradient for the frozen weights too (``block_frozen`` elements of the stage), in the
      compute dtype. Under gradient accumulation (``accumulating``) the micro-steps run in
      ``no_sync``, which neither reduces nor frees it (``_post_backward_hook`` L761-765): every
      block's whole gradient stays unsharded until the sync step; without it the
      reduce-scatter leaves the ``shard``-th part of it as the flat ``.grad``.
    - "flat_param_unit_grad": the frozen share of the block in its backward (``unit_frozen``
      elements), made before it is accumulated or reduced.
    - "fsdp_root_unsharded": FULL_SHARD does not free the root unit's parameters after the
      forward (``_post_forward_reshard`` L529-535, "Do not free the root's parameters"): the
      embedding, final norm and head (``root`` elements) stay gathered into the backward.
    Arrays allowed (one entry per layout); zero where ``fsdp`` is false."""
    fsdp = np.asarray(fsdp)
    kept = np.where(accumulating, 1.0, 1.0 / np.asarray(shard, dtype=float))
    return {"flat_param_frozen_grads": np.where(fsdp, block_frozen * cd * kept, 0.0),
            "flat_param_unit_grad": np.where(fsdp, unit_frozen * cd, 0.0),
            "fsdp_root_unsharded": np.where(
                fsdp, root * gather_bytes * (1 - 1 / np.asarray(shard, dtype=float)), 0.0)}


def compute_dtype_bytes(precision: str) -> int:
    """Bytes of the dtype GEMMs run in (fp8 GEMMs read bf16 master copies cast on the fly)."""
    return 4 if precision == "fp32" else 2


def buffer_terms(model: ModelShape, par: Parallel, x: ActivationShape, precision: str,
                 stage_params, unit, has_head, has_moe_layer, loss: str = "fused",
                 gather_bytes=None, grad_share=1.0, grad_bytes=None, logits_kept=True,
                 vocab_split=True, head_trains=True, loss_style=None, loss_bytes=None,
                 zero3_live=None) -> dict:
    """Named transient buffers (bytes) on one GPU of a pipeline rank holding ``stage_params``
    parameters whose largest FSDP unit is ``unit``. Numbers, or numpy arrays for a grid of
    layouts (then every term is present: zero where it does not apply, a zero number where no
    layout has it). Fine-tuning:
    ``gather_bytes`` per gathered parameter (its stored format; default the compute dtype),
    ``grad_share`` of the parameters that have gradients, ``grad_bytes`` per unsharded gradient
    and its reduction copy (default: the compute dtype plus FSDP2's fp32 reduce copy). The
    loss: ``logits_kept`` (the compute-dtype logits alive in its backward), ``vocab_split``
    (V / tp columns, else all V), ``head_trains`` (a fused linear loss makes the head weight's
    gradient), ``loss_style`` (``loss_moments``' compiled / vocab_parallel / shift_copy);
    ``loss_bytes``: ``loss_moments``' (forward, backward) of these where the caller has them.
    ``zero3_live``: ``zero3_gathered``'s (parameters, gradient) elements where the engine gathers
    otherwise than FSDP's two units (default: ``unit`` twice and one unit's gradient)."""
    cd = compute_dtype_bytes(precision)
    gb = cd if gather_bytes is None else gather_bytes
    rb = cd + 4 if grad_bytes is None else grad_bytes
    tp, cp, ep, pp = (np.asarray(v) for v in (par.tp, par.cp, par.ep, par.pp))
    fsdp = (np.asarray(par.zero) == 3) & (np.asarray(par.dense_shard) > 1)
    sb = np.asarray(x.s) * x.b
    # the terms no layout can have are 0.0 (their formulas give zeros there), not computed
    quantized = QUANTIZED_BYTES.get(precision, 0)
    live_params, live_grad = zero3_gathered(stage_params, unit, None, None) \
        if zero3_live is None else zero3_live
    terms = {
        "fsdp_unsharded_params": np.where(fsdp, np.where(par.reshards, live_params * gb,
                                                         stage_params * gb), 0),
        # PyTorch's pipelining schedules run the backward of every microbatch but the last
        # without gradient sync, so FSDP2 accumulates unsharded fp32 gradients of the stage.
        "fsdp_unsharded_grads": grad_share * np.where(
            fsdp, np.where(pp > 1, stage_params * (rb - cd) + live_grad * cd,
                           live_grad * rb), 0),
        "tp_comm": np.where(tp > 1, np.where(par.sp, 2, 1) * sb * model.hidden * x.elem, 0),
        "cp_kv_ring": np.where(cp > 1, 2 * sb * sum(qkv_widths(model)[1:]) / tp * x.elem, 0)
        if np.any(cp > 1) else 0.0,
        "ep_all_to_all": np.where((ep > 1) & has_moe_layer, 2 * sb * model.moe.top_k
                                  * model.hidden * x.elem, 0) if model.moe else 0,
        "logits": np.where(has_head, (loss_bytes or loss_moments(
            model, x, tp, loss, cd, logits_kept, vocab_split, head_trains,
            **(loss_style or {})))[1], 0),
        # the quantized weights of the unit TE caches across the microbatches of a step, rowwise
        # and columnwise: FP8 1 B each, NVFP4 (16x16-block scaled) NVFP4_BYTES each
        "fp8_weights": np.asarray(2 * unit * quantized) if quantized else 0.0,
    }
    if all(np.ndim(v) == 0 for v in terms.values()):
        return {k: float(v) for k, v in terms.items() if v}
    return terms

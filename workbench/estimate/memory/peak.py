"""Peak allocated memory as a moment of the step, not a sum of everything a GPU ever holds.

The categories of ``memory.per_gpu`` (params, grads, optimizer, activations, buffers) say what
each holds; they are not all alive at once. The step passes four moments, and the peak is the
largest of them (each a sum of what lives then; arrays, one entry per evaluated row):

- ``forward``: the end of the forward, the loss computed: model states, the saved activations of
  every microbatch in flight, the forward's transient buffers and what the loss's forward holds
  (``buffers.loss_moments``).
- ``loss``: the loss's backward: the same, with the loss's backward buffers instead
  (``buffers`` "logits").
- ``backward``: activations are freed block by block while gradients are made. With ``a`` of
  the activations left and the gradients made so far ``g``, ``a + g`` moves linearly between its
  ends, so its largest value is at one of them: the first block's backward (every activation
  but the head's, the head's gradient made) or the last (every gradient made). Plus the
  backward's own buffers (FSDP's unsharded gradients, the in-backward optimizer's gradient).
- ``optimizer``: the step: parameters, gradients, optimizer states and what lives all step.

Gradients exist before the backward when the engine keeps them for the whole step (Megatron's
contiguous grad buffer, megatron/core/distributed/param_and_grad_buffer.py in megatron-core
0.16.1; DDP's buckets; DeepSpeed's flat partitions), or when an earlier microbatch of the step
made them (gradient accumulation, pipelining); else (``Engine.grads_in_backward``: FSDP's
sharded gradients, freed by ``zero_grad(set_to_none=True)``) the backward makes them.
"""
from __future__ import annotations

import numpy as np

from workbench.scenario.types import zero_in

PHASES = ("forward", "loss", "backward", "optimizer")
# Buffers by when they live (``buffers.buffer_terms`` and ``memory_pass.memory`` names); any
# other buffer is transient in the forward and backward.
LOSS_ONLY = ("logits",)
BACKWARD_ONLY = ("fsdp_unsharded_grads", "in_backward_gradient")
WHOLE_STEP = ("engine_grad_buffer", "lp_grads")
NOT_TRANSIENT = frozenset(LOSS_ONLY + BACKWARD_ONLY + WHOLE_STEP)


def grads_before_backward(engine, zero, microbatches, pp):
    """Whether the gradient memory is alive before the step's first backward, per row: always
    unless the engine makes its gradients in the backward at this ZeRO stage
    (``Engine.grads_in_backward``) and the step has one microbatch on one pipeline stage."""
    made = np.asarray(zero_in(zero, engine.grads_in_backward))
    return ~made | (np.asarray(microbatches) > 1) | (np.asarray(pp) > 1)


CATEGORIES = ("params", "grads", "optimizer", "activations", "buffers")


def phase_parts(params, grads, optimizer, activations, bufs: dict, early, head_grads,
                head_activations, loss_forward) -> dict:
    """Bytes alive at each of ``PHASES`` (module docstring), by category (``CATEGORIES``; the
    loss's and the engine's buffers under "buffers"). ``early``: gradients alive before the
    backward (``grads_before_backward``); ``head_grads``: the gradients the head's backward
    makes (alive at the first block's backward when not ``early``); ``head_activations``: what
    the head saved for one microbatch (freed by then); ``loss_forward``: the loss's forward
    bytes beyond its saved tensors."""
    def total(names) -> np.ndarray:
        return sum((bufs[k] for k in names if k in bufs), np.zeros(np.shape(params)))
    transient = total(k for k in bufs if k not in NOT_TRANSIENT)
    whole = total(WHOLE_STEP)
    before = np.where(early, grads, 0.0)
    made = grads - before
    head_made = np.where(early, 0.0, head_grads)
    start = activations - head_activations + head_made
    # the backward's larger end: its first block (activations but the head's) or its last
    # (every gradient made)
    at_start = start >= made
    zero = np.zeros(np.shape(params))

    def moment(g, a, b) -> dict:
        return {"params": params, "grads": g, "optimizer": optimizer, "activations": a,
                "buffers": b}
    return {
        "forward": moment(before, activations, whole + transient + loss_forward),
        "loss": moment(before, activations, whole + transient + total(LOSS_ONLY)),
        "backward": moment(before + np.where(at_start, head_made, made),
                           np.where(at_start, activations - head_activations, zero),
                           whole + transient + total(BACKWARD_ONLY)),
        "optimizer": moment(grads, zero, whole),
    }


def phase_totals(parts: dict) -> dict:
    """Each phase's bytes: the sum of its categories (``phase_parts``)."""
    out = {}
    for p in PHASES:
        q = parts[p]       # summed in CATEGORIES' order
        out[p] = q["params"] + q["grads"] + q["optimizer"] + q["activations"] + q["buffers"]
    return out


def at_peak(parts: dict, at) -> dict:
    """Per category, the bytes alive at the peak phase ``at`` (indices into ``PHASES``): the
    first phase's, replaced where the peak is at a later phase that holds the category
    differently (params and optimizer are alike in every phase: nothing to choose)."""
    at = np.asarray(at)
    at_phase = {}
    out = {}
    for c in CATEGORIES:
        first, *rest = (parts[p][c] for p in PHASES)
        chosen = first
        for i, value in enumerate(rest, 1):
            if value is not first:
                if i not in at_phase:
                    at_phase[i] = at == i
                chosen = np.where(at_phase[i], value, chosen)
        out[c] = chosen if np.shape(chosen) == at.shape else np.broadcast_to(chosen, at.shape)
    return out


def peak_bytes(phases: dict) -> np.ndarray:
    """The largest phase's bytes per row (``peak_of``'s first half, without the moment)."""
    out = np.asarray(phases[PHASES[0]], dtype=float)
    for p in PHASES[1:]:
        out = np.maximum(out, phases[p])
    return out


def peak_of(phases: dict) -> tuple[np.ndarray, np.ndarray]:
    """(the largest phase's bytes, its index in ``PHASES``) per row; the earlier phase on ties."""
    stack = np.stack([np.asarray(phases[p], dtype=float) for p in PHASES])
    return stack.max(axis=0), stack.argmax(axis=0)

"""How many operations the workbench's eager trial model dispatches, per block and pass.

On a GPU the host enqueues kernels ahead of the device and the per-operation cost hides behind
the kernels; on a CPU trial each ATen operation is paid in full (the Python call, the
dispatcher, autograd recording in the forward and one autograd node in the backward). A
calibrated machine profile measures that cost per operation (``workbench.calibrate``); this
module counts the operations. The counts are of ``workbench/trial/model.py`` as written:
they were counted with a ``TorchDispatchMode`` and ``tests/test_calibrate.py`` counts them
again for every model family and variant, so a change to the model that changes them fails.

Per transformer layer (forward, backward), with the feed-forward part apart:
- the rest of the layer: two norms, attention (q/k/v/o projections on 3-D inputs, views,
  scaled-dot-product attention), two residual adds: RMSNorm (42, 85), LayerNorm (30, 55);
  +12 backward with biases (the four projections' bias gradients);
- dense MLP: SwiGLU (14, 32), GELU (9, 20), +3 backward per biased linear;
- MoE: router, top-k, zeros and the reshape (8, 13); the routed experts as the trial runs
  them where ``torch._grouped_mm`` runs (``trial.model.expert_gemms``): one sort, the grouped
  GEMMs and the weighted scatter for every expert at once, SwiGLU (20, 38) or GELU (17, 28);
  in its per-expert loop (``trial.model._loop``, torchtitan's ``_run_experts_for_loop``; and
  an engine's, ``Engine.expert_gemms`` False) the same sort and scatter (12, 14) plus per
  local expert SwiGLU (11, 29) or GELU (7, 18) (the split rows' expert MLP); a shared expert
  (9, 26) SwiGLU or (6, 16) GELU.
Outside the layers: the embedding (1, 2), learned positions (+3, +4); the final norm, output
head and loss (RMSNorm 19, 32; LayerNorm 13, 17).
Optimizer step, per parameter tensor (steady state): AdamW 10 + 2 per step, SGD with
momentum 3 + 2 (``torch.optim`` single-tensor path, the CPU default).
"""
from __future__ import annotations

import numpy as np

from workbench.catalog.types import ModelShape
from workbench.estimate.arrays import plain

_LAYER_REST = {"rmsnorm": (42, 85), "layernorm": (30, 55)}
_MLP = {"swiglu": (14, 32), "gelu": (9, 20)}
_EXPERT = {"swiglu": (11, 29), "gelu": (7, 18)}
_LOOP = (12, 14)
_GROUPED = {"swiglu": (20, 38), "gelu": (17, 28)}
_SHARED = {"swiglu": (9, 26), "gelu": (6, 16)}
_MOE_BASE = (8, 13)
_EMBEDDING = (1, 2)
_POSITIONS = (3, 4)
_HEAD = {"rmsnorm": (19, 32), "layernorm": (13, 17)}
_OPTIMIZER = {"adamw": (10, 2), "sgd": (3, 2)}     # per tensor, per step


def layer_ops(m: ModelShape, moe: bool, local_experts: int | None = None,
              grouped: bool = True) -> tuple[int, int]:
    """(forward, backward) operations of one transformer layer for one microbatch; an MoE
    layer's routed experts ``grouped`` (``torch._grouped_mm``) or in a per-expert loop."""
    f, b = _LAYER_REST[m.norm]
    linears = 3 if m.mlp == "swiglu" else 2
    if m.bias:
        b += 12
    if moe:
        e = m.moe.experts if local_experts is None else local_experts
        ef, eb = _GROUPED[m.mlp] if grouped else (_LOOP[0] + e * _EXPERT[m.mlp][0],
                                                  _LOOP[1] + e * _EXPERT[m.mlp][1])
        f += _MOE_BASE[0] + ef
        b += _MOE_BASE[1] + eb
        if m.moe.shared_experts:
            f += _SHARED[m.mlp][0]
            b += _SHARED[m.mlp][1]
    else:
        f += _MLP[m.mlp][0]
        b += _MLP[m.mlp][1] + (3 * linears if m.bias else 0)
    return f, b


def expert_ops(m: ModelShape) -> int:
    """Forward operations of one routed expert in an eager per-expert loop."""
    return _EXPERT[m.mlp][0]


def embedding_ops(m: ModelShape) -> tuple[int, int]:
    """(forward, backward) operations of the token embedding (and learned positions)."""
    if m.extra.get("position_embeddings"):
        return _EMBEDDING[0] + _POSITIONS[0], _EMBEDDING[1] + _POSITIONS[1]
    return _EMBEDDING


def head_ops(m: ModelShape) -> tuple[int, int]:
    """(forward, backward) operations of the final norm, output head and loss."""
    return _HEAD[m.norm]


def optimizer_ops(tensors, optimizer: str):
    """Operations of one optimizer step over ``tensors`` parameter tensors (arrays allowed)."""
    per, fixed = _OPTIMIZER[optimizer]
    return plain(np.where(np.asarray(tensors) > 0, per * np.asarray(tensors) + fixed, 0))


def layer_tensors(m: ModelShape, moe: bool, local_experts: int | None = None) -> int:
    """Parameter tensors of one layer as the trial model holds them."""
    per_linear = 2 if m.bias else 1
    norms = 2 * (2 if m.norm == "layernorm" else 1)
    linears = 3 if m.mlp == "swiglu" else 2
    n = norms + 4 * per_linear
    if moe:
        e = m.moe.experts if local_experts is None else local_experts
        n += 1 + e * linears + (linears if m.moe.shared_experts else 0)
    else:
        n += linears * per_linear
    return n


def edge_tensors(m: ModelShape, has_embedding: bool, has_head: bool) -> int:
    """Parameter tensors outside the layers on a stage: embedding (+ positions), final norm
    and output head (one tensor with the embedding when tied on the same stage)."""
    n = 0
    if has_embedding:
        n += 1 + (1 if m.extra.get("position_embeddings") else 0)
    if has_head:
        n += (2 if m.norm == "layernorm" else 1)
        n += 0 if (m.tied_embeddings and has_embedding) else 1
    return n

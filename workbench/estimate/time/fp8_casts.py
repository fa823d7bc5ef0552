"""HBM bytes an FP8 recipe's casts move in one transformer layer, per microbatch on one GPU,
split by the pass that runs them.

Per linear (M tokens, K in, N out), as torchao's roofline counts it (pytorch/ao@0598012907d6
f6e88734088a65f788c38d294a65 torchao/testing/training/roofline_utils.py
``get_float8_mem_sympy``): the input (M x K) cast once in the forward, the weight (K x N) in
the forward and the backward, the output gradient (M x N) once in the backward; bytes per
element by role and pass are the recipe's (``engines.types.CastBytes``). A recomputed forward
casts its inputs and weights again (the caller adds the forward bytes to the recompute).

Where the cast runs under tensor parallelism (``Fp8Recipe.casts_before_gather``):
torchao's float8 TP (torchtitan applies it to tensorwise) casts a column-parallel linear's
input on the rank's sequence shard before the all-gather, once for every linear reading it
(``PrepareFloat8ModuleInput``: "if there are multiple float8 users of the input activation, we
perform fp8 allgather only once"), and a row-parallel linear's output gradient on the shard
before the backward all-gather (``Float8RowwiseParallel._prepare_output_fn``,
``_NoopFwToFloat8BwDynamic`` after the reduce-scatter) — pytorch/ao@0e0fba8f69f4986c3d67b775fd5
8062d1621065d torchao/float8/float8_tensor_parallel.py. Otherwise every linear casts what it
multiplies: the gathered sequence, each separate projection its own copy
(``Engine.fp8_separate_projections``). Column-parallel outputs and row-parallel inputs are
already the rank's 1/t share.

Fusion (``Engine.fp8_cast_fusion``): "compile" takes every input and output-gradient cast at
its fused bytes (torchao's ``fuse_with_prev``); "te" those Transformer Engine fuses: the
inputs written by a norm (``with_quantized_norm``) or by the activation (FC2's input), and
FC1's output gradient (the activation's backward); "none" no cast.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.catalog.types import ModelShape
from workbench.engines.types import SINGLE_READ_CAST, CastBytes, Fp8Recipe
from workbench.estimate.model.attention import attention_gemms

# The generic engine's FP8 (no recipe of its own): the single-read cast of Transformer Engine's
# delayed scaling (engines.types.SINGLE_READ_CAST).
GENERIC_RECIPE = Fp8Recipe(1.0, SINGLE_READ_CAST,
                           "TE performance_considerations.rst (single-read cast)")


@dataclass(frozen=True)
class Operand:
    """One cast: ``elements`` on this GPU per microbatch, its role, whether the engine fuses
    it into the kernel producing it."""

    elements: float
    role: str            # input | weight | grad_output
    fused: bool = False


@dataclass(frozen=True)
class CastTraffic:
    """Bytes per microbatch on one GPU: the forward's casts (again in a recomputed forward) and
    the backward's."""

    fwd: float
    bwd: float


def _linear(rows_in: float, rows_out: float, k: float, n: float, in_fused: bool,
            grad_fused: bool, copies: int = 1) -> list[Operand]:
    """The three casts of a linear of ``k`` -> ``n`` (weight ``k x n``): its input cast on ``rows_in`` tokens (``copies`` times: separate projections
    of one input), its output gradient on ``rows_out``; ``rows_in = 0`` for an input another
    linear's cast already serves."""
    return [Operand(copies * rows_in * k, "input", in_fused),
            Operand(k * n, "weight"),
            Operand(rows_out * n, "grad_output", grad_fused)]


def layer_operands(m: ModelShape, recipe: Fp8Recipe, fusion: str, separate: bool,
                   tokens: float, t: int, sp: bool, moe: bool, routed: float = 0.0,
                   local_experts: int = 0, expert_ffn: float = 0.0) -> list[Operand]:
    """Every FP8 cast of one layer per microbatch on one GPU of TP degree ``t`` holding
    ``tokens`` tokens (the full sequence a TP group shares). MoE layers: the routed experts'
    linears on ``routed`` token copies over ``local_experts`` experts of FFN width
    ``expert_ffn`` (their expert-TP share), and the shared experts as a dense MLP. ``fusion``
    and ``separate``: the engine's ``fp8_cast_fusion`` as it runs ("compile" only when
    compiled) and ``fp8_separate_projections``."""
    fuse_all = fusion == "compile"
    te = fusion == "te"
    r = t if sp else 1
    # numbers or arrays over shapes (``t``, ``tokens``, ``routed``, ``local_experts``)
    shard = recipe.casts_before_gather & (np.asarray(t) > 1)
    gathered_in = np.where(shard, tokens / r, tokens)   # a column-parallel input's cast
    row_grad = np.where(shard, tokens / r, tokens)      # a row-parallel output gradient's cast
    # separate projections cast the shared input each, unless the float8 TP cast serves all
    separate = separate & ~shard
    ops: list[Operand] = []
    hidden_cast = False               # the normed hidden state's cast is done
    for a in attention_gemms(m, t, sp):
        rows = tokens * a.rows
        if a.name == "proj":          # row-parallel: the rank's heads in, the sequence out
            ops += _linear(rows, row_grad, a.k, a.n, fuse_all, fuse_all)
        elif a.k == m.hidden:         # reads the normed hidden state (MLA's down-projections
            #                           under SP already run on the rank's own tokens)
            n_in = np.where(np.asarray(a.rows) == 1.0, gathered_in, rows)
            if hidden_cast:
                n_in = np.where(separate, n_in, 0.0)
            ops += _linear(n_in, rows, a.k, a.n, fuse_all or te, fuse_all,
                           np.where(separate, 3, 1) if a.name == "qkv" else 1)
            hidden_cast = True
        else:                         # MLA's up-projections read the latent vectors
            ops += _linear(rows, rows, a.k, a.n, fuse_all, fuse_all)
    mats = 3 if m.mlp == "swiglu" else 2
    mlps = []
    if not moe:
        mlps.append((tokens, gathered_in, row_grad, m.ffn_hidden / t, 1))
    else:
        mo = m.moe
        if mo.shared_experts:
            mlps.append((tokens, gathered_in, row_grad,
                         mo.shared_experts * mo.expert_ffn_hidden / t, 1))
        if np.any(np.asarray(local_experts) > 0):
            per = routed / np.maximum(local_experts, 1)
            mlps.append((per, per, per, expert_ffn, local_experts))
    for rows, rows_in, rows_out, f, count in mlps:
        # gate/up (FC1) reads the normed input; its output gradient comes from the
        # activation's backward; FC2 (down) reads the activation's output. ``count`` experts
        # of the same shape.
        one = (_linear(rows_in, rows, m.hidden, (mats - 1) * f, fuse_all or te,
                       fuse_all or te, np.where(separate, mats - 1, 1))
               + _linear(rows, rows_out, f, m.hidden, fuse_all or te, fuse_all))
        ops += [Operand(o.elements * count, o.role, o.fused) for o in one]
    return ops


def cast_traffic(ops: list[Operand], casts: CastBytes) -> CastTraffic:
    """Bytes the casts ``ops`` move at the recipe's bytes per element, by pass."""
    fwd = bwd = 0.0
    for op in ops:
        if op.role == "input":
            fwd += op.elements * (casts.input_fused if op.fused else casts.input)
        elif op.role == "weight":
            fwd += op.elements * casts.weight_fwd
            bwd += op.elements * casts.weight_bwd
        else:
            bwd += op.elements * (casts.grad_output_fused if op.fused else casts.grad_output)
    return CastTraffic(fwd, bwd)

"""Parameters, gradients and optimizer states per GPU, for DDP, ZeRO-1/2/3 (FSDP2) and HSDP.

Mixed-precision convention (bytes per parameter, before sharding) — stated once, used everywhere:

=========  ======  =====  =========  ==============================================================
precision  params  grads  optimizer  follows
=========  ======  =====  =========  ==============================================================
fp32       4       4      8 (Adam)   PyTorch fp32 training: exp_avg + exp_avg_sq
bf16/fp8   2       4      12         Megatron-LM distributed-optimizer table: bf16 params, fp32
                                     main grads, fp32 master + Adam moments (18 B, 6 + 12/d)
fp16       2       2      16         same table: fp16 grads plus fp32 main grads in the optimizer
                                     (20 B, 4 + 16/d)
=========  ======  =====  =========  ==============================================================

SGD (with momentum) keeps one moment instead of two: optimizer bytes drop by 4.
ZeRO (Rajbhandari et al. 2020): stage 1 shards optimizer states, stage 2 also gradients, stage 3
also parameters, over ``dense_shard`` ranks (expert parameters over ``expert_shard``).
Stage 3 follows FSDP2 (``fully_shard`` with ``MixedPrecisionPolicy(param_dtype=bf16,
reduce_dtype=fp32)``): the sharded parameter *is* the fp32 master, so params 4, grads 4,
optimizer 8 (Adam) — 16 B/param / d, the ZeRO paper's 16Ψ/Nd. The unsharded bf16 copies are
transient and counted in buffers.
FP8 (Transformer Engine / torchao float8): parameters, fp32 master weights and optimizer as for
bf16 (18 B/param); FP8 changes activations and adds transient FP8 weight copies (buffers).

Offload: ``cpu`` moves the optimizer states (ZeRO-Offload, Ren et al. 2021), and for stage >= 2
the gradient shard, to host memory; with stage 3 the sharded parameters too (FSDP2
``CPUOffloadPolicy``). ``nvme`` (ZeRO-Infinity, Rajbhandari et al. 2021) puts optimizer states,
and for stage 3 the parameters, on NVMe; gradients stay in host memory.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from workbench.catalog.types import ModelShape
from workbench.estimate.arrays import plain
from workbench.estimate.memory.optimizer_states import AO_BLOCK_4BIT, BNB_BLOCK
from workbench.estimate.model.finetune import linear_weights
from workbench.scenario.types import StateDtypes


@dataclass(frozen=True)
class BytesPerParam:
    params: float
    grads: float
    optimizer: float


# Optimizer state per trained parameter, besides any master copy (``moment_bytes``), in the
# large-tensor limit of ``estimate/memory/optimizer_states.py`` (one tensor's exact bytes, cited to
# the libraries; the trial's prediction counts tensor by tensor with it): adamw two moments,
# sgd one, in the state dtype; bitsandbytes' 8-bit AdamW two uint8 states with an fp32 absmax
# per block; torchao's 4-bit AdamW two 4-bit states with an fp32 scale per block; Adafactor
# no first moment and an R x C matrix's second moment factored into R + C values.
LOW_BIT_MOMENTS = {"adamw8bit": 2 * (1 + 4 / BNB_BLOCK),
                   "paged_adamw8bit": 2 * (1 + 4 / BNB_BLOCK),
                   "adamw4bit": 2 * (0.5 + 4 / AO_BLOCK_4BIT)}


def moment_bytes(optimizer: str, elem: float, factored: tuple[float, float] = (1, 1)) -> float:
    """Optimizer state bytes per parameter (``LOW_BIT_MOMENTS`` and the table above) with
    32-bit-style states in ``elem``-byte elements; ``factored``: the (rows, cols) of a typical
    trained matrix, for Adafactor."""
    if optimizer in LOW_BIT_MOMENTS:
        return LOW_BIT_MOMENTS[optimizer]
    if optimizer == "adafactor":
        rows, cols = factored
        return elem * (1 / rows + 1 / cols)
    return (2 if optimizer == "adamw" else 1) * elem


def stage_dtype(state_dtype, zero: int) -> str:
    """The state dtype at ZeRO stage ``zero``: ``state_dtype`` itself, or its ``zero``-th entry
    where it is given per stage (``Engine.state_dtype_by_zero``: the Hugging Face stack keeps a
    bf16-loaded model as it is under DDP and upcasts it to fp32 masters under FSDP)."""
    return state_dtype[zero] if isinstance(state_dtype, (tuple, list)) else state_dtype


def bytes_per_param(precision: str, optimizer: str, zero: int, state_dtype: str = "mixed",
                    factored: tuple[float, float] = (1, 1)) -> BytesPerParam:
    """The convention table above, for one precision, optimizer and ZeRO stage, and for the
    engines whose trained weights, gradients and states all stay in one dtype
    (``state_dtype`` "param": the compute dtype, as torchtune and a bf16-loaded Trainer run;
    "fp32": PEFT's upcast adapters): no master copy then; a ``StateDtypes``
    (``training.state_dtypes``): 16-bit weights, and its gradient, master and moment bytes at
    every stage (Megatron-FSDP keeps the distributed optimizer's dtypes); "master16": 16-bit
    weights and gradients beside fp32 masters and moments at every stage (DeepSpeed's bf16
    engine with its default ``grad_accum_dtype``, the model's: deepspeed 0.19.8 runtime/engine.py
    ``get_data_types`` L1806-1807, zero/stage3.py L791-793 gradient partitions in it)."""
    if isinstance(state_dtype, StateDtypes):   # training.state_dtypes: 16-bit weights
        g, master, elem = state_dtype.bytes
        return BytesPerParam(2, g, master + moment_bytes(optimizer, elem, factored))
    if precision == "fp32" or state_dtype == "fp32":
        w = g = elem = 4
        master = 0
    elif state_dtype == "param":
        w = g = elem = 2
        master = 0
    elif state_dtype == "master16":   # 16-bit weights and gradients, fp32 master and moments
        w, g, elem, master = 2, 2, 4, 4
    elif zero == 3:  # FSDP2: fp32 sharded params are the master weights
        w, g, elem, master = 4, 4, 4, 0
    elif precision == "fp16":
        w, g, elem, master = 2, 2, 4, 4 + 4
    else:  # bf16, fp8, nvfp4: TE quantizes on the fly from the bf16 weights (nothing of its
        # own in the states; megatron-core 0.16 TransformerConfig.fp4_param, which would keep
        # FP4 weights, is off in Megatron-Bridge's NVFP4 runs), fp32 main grads and masters
        w, g, elem, master = 2, 4, 4, 4
    return BytesPerParam(w, g, master + moment_bytes(optimizer, elem, factored))


@dataclass(frozen=True)
class ModelStates:
    """Bytes of model states on one GPU, and what offload moved off it."""

    params: float
    grads: float
    optimizer: float
    host: float = 0.0   # bytes this GPU's states occupy in host DDR
    nvme: float = 0.0   # bytes this GPU's states occupy on NVMe
    params_frozen: float = 0.0   # the frozen weights' share of ``params``
    paged: float = 0.0  # optimizer states in CUDA managed memory (bitsandbytes paged optimizers)
    # ZeRO-3's parameter shard in host memory or on NVMe: copied to the GPU before every
    # all-gather of its unit (``step_time.dp_exposed``'s ``upload_s``)
    params_far: float = 0.0


def _sharded(n, k):
    """Elements of an ``n``-element state on one of ``k`` shards (padded up, as FSDP2 does).
    In floating point, which is exact here (counts below 2**53: an exact quotient is
    represented exactly, an inexact one is further from an integer than the rounding) and
    several times faster than integer division on arrays."""
    return np.ceil(np.asarray(n, dtype=float) / np.asarray(k))


def optimizer_params(dense, expert, zero, dense_shard, expert_shard):
    """Parameters whose optimizer state one GPU updates (all of them, or its ZeRO shard).
    Scalars, or numpy arrays for a grid of layouts."""
    return plain(np.where(np.asarray(zero) == 0, np.asarray(dense) + expert,
                         _sharded(dense, dense_shard) + _sharded(expert, expert_shard)))


@functools.lru_cache(maxsize=256)
def _per_stage(precision: str, optimizer: str, state_dtype, factored: tuple) -> np.ndarray:
    """``bytes_per_param`` at ZeRO stages 0-3: rows params, grads, optimizer; a column per
    stage (the same few settings recur in every call of a search)."""
    stages = [bytes_per_param(precision, optimizer, z, stage_dtype(state_dtype, z), factored)
              for z in range(4)]
    out = np.array([[b.params for b in stages], [b.grads for b in stages],
                    [b.optimizer for b in stages]])
    out.flags.writeable = False
    return out


def model_states(dense, expert, precision: str, optimizer: str, zero, dense_shard,
                 expert_shard, offload: str = "none", *, trained=None, frozen_bytes=(0, 0),
                 state_dtype: str = "mixed", factored: tuple[float, float] = (1, 1),
                 paged: bool = False) -> ModelStates:
    """Model-state bytes on one GPU holding ``dense`` and ``expert`` parameters (after TP/EP/PP).
    ``trained``: the (dense, expert) parameters among them that train (default: all); the
    others are frozen and cost ``frozen_bytes`` = (dense, expert) bytes unsharded, sharded by
    ZeRO-3 like the rest. ``paged``: the optimizer states live in CUDA managed memory.
    ``state_dtype``: one for every stage, or four (``stage_dtype``). The
    numeric arguments may be numpy arrays (one entry per layout)."""
    zero = np.asarray(zero)
    tdense, texpert = (dense, expert) if trained is None else trained
    full = np.asarray(tdense) + texpert
    shard = _sharded(tdense, dense_shard) + _sharded(texpert, expert_shard)
    stage_of = np.clip(zero, 0, 3) if zero.ndim == 0 or zero.min() < 0 or zero.max() > 3 else zero
    # bytes per parameter at each ZeRO stage, one row per field (params, grads, optimizer)
    per_stage = _per_stage(precision, optimizer, tuple(state_dtype)
                           if isinstance(state_dtype, list) else state_dtype, tuple(factored))
    sharded = {3: zero >= 3, 2: zero >= 2, 1: zero >= 1}

    def column(stage: int, field: int) -> np.ndarray:
        # each row's bytes per parameter at its ZeRO stage: a gather from the four stages'
        return per_stage[field][stage_of] * np.where(sharded[stage], shard, full)

    params, grads, opt = column(3, 0), column(2, 1), column(1, 2)
    fd, fe = (np.asarray(b, dtype=float) for b in frozen_bytes)
    frozen = np.where(sharded[3], fd / np.asarray(dense_shard) + fe / np.asarray(expert_shard),
                      fd + fe)
    params = params + frozen
    host = np.zeros_like(params, dtype=float)
    nvme = np.zeros_like(params, dtype=float)
    params_far = np.zeros_like(params, dtype=float)
    if offload != "none":
        far_is_host = offload == "cpu"     # where optimizer and ZeRO-3 params go
        (host if far_is_host else nvme)[...] += opt
        opt = opt * 0
        moved = np.where(sharded[2], grads, 0)   # the gradient shard lives in host memory
        host = host + moved
        grads = grads - moved
        moved = np.where(sharded[3], params, 0)
        params_far = moved
        if far_is_host:
            host = host + moved
        else:
            nvme = nvme + moved
        params = params - moved
        frozen = np.where(sharded[3], 0, frozen)
    in_managed = opt if paged else opt * 0
    opt = opt - in_managed
    return ModelStates(*(_float(x) for x in (
        params, grads, opt, host, nvme, frozen, in_managed, params_far)))


def _float(x):
    """``x`` as floats: a float array as it is, else converted (``plain``: a number for one)."""
    if type(x) is np.ndarray and x.dtype == np.float64 and x.ndim:
        return x
    return plain(np.asarray(x, dtype=float))


def fp8_gather_bytes(m: ModelShape, stored, dense_layers, moe_layers, held, cd: float, grid):
    """Bytes per parameter the data-parallel all-gather moves (and the gathered buffer holds)
    when the blocks' linear weights travel in FP8 (1 byte) and the rest — norms, router,
    embedding, output head — in ``stored`` bytes per parameter (None: the compute dtype
    ``cd``); a grid of layouts (``grid``: tp, ep, etp) allowed."""
    base = cd if stored is None else stored
    local = (m.moe.experts // np.asarray(grid.ep)) if m.moe is not None else 1
    lin = dense_layers * linear_weights(m, False, grid.tp)
    if m.moe is not None:
        lin = lin + moe_layers * linear_weights(m, True, grid.tp, local, grid.etp)
    held = np.maximum(held, 1)
    return base - np.minimum(lin, held) * (cd - 1) / held

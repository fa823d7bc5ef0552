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

from dataclasses import dataclass

import numpy as np

from workbench.estimate.arrays import plain


@dataclass(frozen=True)
class BytesPerParam:
    params: int
    grads: int
    optimizer: int


def bytes_per_param(precision: str, optimizer: str, zero: int) -> BytesPerParam:
    """The convention table above, for one precision, optimizer and ZeRO stage."""
    moments = 8 if optimizer == "adamw" else 4
    if precision == "fp32":
        return BytesPerParam(4, 4, moments)
    if zero == 3:  # FSDP2: fp32 sharded params are the master weights
        return BytesPerParam(4, 4, moments)
    if precision == "fp16":
        return BytesPerParam(2, 2, 4 + 4 + moments)
    return BytesPerParam(2, 4, 4 + moments)  # bf16, fp8


@dataclass(frozen=True)
class ModelStates:
    """Bytes of model states on one GPU, and what offload moved off it."""

    params: float
    grads: float
    optimizer: float
    host: float = 0.0   # bytes this GPU's states occupy in host DDR
    nvme: float = 0.0   # bytes this GPU's states occupy on NVMe



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


def model_states(dense, expert, precision: str, optimizer: str, zero, dense_shard,
                 expert_shard, offload: str = "none") -> ModelStates:
    """Model-state bytes on one GPU holding ``dense`` and ``expert`` parameters (after TP/EP/PP).
    The numeric arguments may be numpy arrays (one entry per layout)."""
    zero = np.asarray(zero)
    full = np.asarray(dense) + expert
    shard = _sharded(dense, dense_shard) + _sharded(expert, expert_shard)

    def column(stage: int, field: str) -> np.ndarray:
        nbytes = np.choose(np.clip(zero, 0, 3), [getattr(bytes_per_param(precision, optimizer, z),
                                                         field) for z in range(4)])
        return nbytes * np.where(zero >= stage, shard, full)

    params, grads, opt = column(3, "params"), column(2, "grads"), column(1, "optimizer")
    host = np.zeros_like(params, dtype=float)
    nvme = np.zeros_like(params, dtype=float)
    if offload != "none":
        far_is_host = offload == "cpu"     # where optimizer and ZeRO-3 params go
        (host if far_is_host else nvme)[...] += opt
        opt = opt * 0
        moved = np.where(zero >= 2, grads, 0)   # the gradient shard lives in host memory
        host = host + moved
        grads = grads - moved
        moved = np.where(zero >= 3, params, 0)
        if far_is_host:
            host = host + moved
        else:
            nvme = nvme + moved
        params = params - moved
    return ModelStates(*(plain(np.asarray(x, dtype=float)) for x in (params, grads, opt, host,
                                                                    nvme)))

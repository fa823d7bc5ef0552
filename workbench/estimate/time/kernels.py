"""The kernel model: how long each kernel of a training step runs on a GPU, from its shape.

- GEMM (M x K) @ (K x N): ``2 M N (K + GEMM_K0) / (ceiling x peak)`` or the HBM roof of its three
  operands, whichever is longer, plus ``KERNEL_OVERHEAD_S``. The ceiling is the sustained
  fraction of the datasheet dense peak a GPU's cuBLAS reaches on large shapes; ``GEMM_K0`` is
  each output tile's fixed prologue/epilogue work in K-steps (why a GEMM of small K runs below
  the ceiling, whatever M and N). Wave quantisation was tried and left out: cuBLAS's split-K /
  stream-K kernels smooth it away (the form with 128 x 128 tiles fits the H200 table worse).
- Attention (fused kernels): executed FLOPs at ``c x S / (S + a)`` of the bf16 peak, forward and
  backward apart (short sequences pay the per-block Q load / O write and the causal diagonal).
- Memory-bound kernels (norms, activations, residual adds, RoPE, casts, permutations, the loss
  over the vocabulary): bytes at the fraction of the HBM peak such kernels reach; the fused
  optimizer step at its own measured fraction.
- Eager Python loops (an MoE layer's per-expert matmuls): the host dispatches each operation in
  ``HOST_OP_S``; a loop takes the longer of its kernels and its dispatches.

Every constant is a measurement: ``benchmarks/kernel_model.py`` derives the fitted forms from
the H200 table (benchmarks/data/h200-reference/kernels.jsonl: one NVIDIA H200 SXM, PyTorch 2.11,
2026-12-04) and the published kernel records (benchmarks/data/published_kernels.yaml), and
prints the error of the form on every measured shape.
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from workbench.catalog.gpus import GPUS as CATALOG_GPUS
from workbench.catalog.types import GPU
from workbench.engines.types import QUANTIZED_BYTES
from workbench.estimate.time import sustained
from workbench.estimate.arrays import plain

# GEMM form fitted on the 76 bf16 shapes of the H200 table longer than 0.2 ms (shorter ones
# carry the table's host dispatch, not kernel time): K0 = 566 K-steps per output tile,
# ceiling 0.708 of 989.5 TFLOP/s; median |error| 6 % over those shapes (benchmarks/
# kernel_model.py). K0 is carried over to every GPU (tile work relative to the main loop).
GEMM_K0 = 566.0
# Fused attention, (c, a) forward and backward: efficiency c x S / (S + a) of the bf16 peak,
# S = the sequence each kernel call sees. Fitted on the H200 table's 24 causal SDPA points
# (head dim 128, S 1024-32768, 8-64 heads; PyTorch's Hopper default, a FlashAttention-3/cuDNN-
# class kernel: 598 TFLOP/s forward at 8k against FA3's published 602 on H100): forward
# (0.644, 635), backward (0.561, 1221); median |error| 4.6 % / 2.9 %. Other kernels and GPUs
# keep ``a`` and take c from their published 8k-token figure (c = f x (8192 + a) / 8192):
#   Hopper FlashAttention-2 333/318 TFLOP/s (fa3paper-h100-fa2-*); cuDNN 529/518
#   (fa3paper-h100-cudnn-*); A100 FlashAttention-2 179.5 forward+backward
#   (azure-fa2-a100-sxm-80gb-fwdbwd); GB200 FlashAttention-2 373.9 of 2,500 (azure-fa2-gb200-
#   fwdbwd); Blackwell FA3/cuDNN: Hopper's fractions (no record).
ATTENTION_A = (635.0, 1221.0)


def _at8k(fwd: float, bwd: float) -> tuple[float, float]:
    return (fwd * (8192 + ATTENTION_A[0]) / 8192, bwd * (8192 + ATTENTION_A[1]) / 8192)


ATTENTION_C = {
    "hopper": {"flash3": (0.644, 0.561), "cudnn": _at8k(0.535, 0.523),
               "flash2": _at8k(0.337, 0.321)},
    "ampere": {k: _at8k(0.575, 0.575) for k in ("flash2", "flash3", "cudnn")},
    "blackwell": {"flash2": _at8k(0.150, 0.150), "flash3": (0.644, 0.561),
                  "cudnn": _at8k(0.535, 0.523)},
}
# Eager attention (no fused kernel): the scores and AV run as batched GEMMs (timed by the GEMM
# form) and the softmax as memory traffic (step_time); the FLOPs here take half the peak, an
# assumption (no measurement).
EAGER_ATTENTION = (0.5, 0.5)
# Memory-bound kernels on the H200 table: RMSNorm 2,099 / 2,400 GB/s, SwiGLU eager 2,330 /
# 2,454, compiled 2,643 / 2,580 -> median 2,427 of 4,800 = 0.506 of the HBM peak. The fused
# AdamW step: 3,353 GB/s = 0.699. Carried over to other GPUs as fractions of their HBM peak.
MEMORY_BOUND_FRACTION = 0.506
OPTIMIZER_FRACTION = 0.699
# Launch and tail of one kernel inside a step whose host runs ahead (an assumption of the order
# of published launch latencies; the table's own floor, ~40 us for a lone matmul, is host time).
KERNEL_OVERHEAD_S = 4e-6
# One eager PyTorch operation dispatched from Python while the GPU waits: the H200 table's MoE
# loop of 128 experts (2048 -> 768, 512 rows each) took 3.38 ms, 26.4 us per expert for two
# operations (index, matmul) -> 13.2 us per operation (the grouped GEMM took 0.34 ms).
HOST_OP_S = 13.2e-6


# Ada (compute capability 8.9) has Ampere's tensor-core instructions (mma.sync; no Hopper
# wgmma or TMA), and FlashAttention-2 ships only SM80 and SM90 kernels (Dao-AILab/flash-attention
# setup.py @00291362: -gencode arch=compute_80,code=sm_80 and compute_90, the *_sm80.cu
# sources), so an Ada GPU runs the SM80 code: Ada takes Ampere's measured fractions.
_KERNEL_FAMILY = {"ada": "ampere"}


def _arch(gpu: GPU) -> str:
    arch = _KERNEL_FAMILY.get(gpu.arch, gpu.arch)
    return arch if arch in ATTENTION_C else "hopper"


def matmul_efficiency(gpu: GPU, precision: str) -> float:
    """The sustained large-GEMM ceiling of this GPU and precision (fraction of the dense peak)
    under the power limit it runs at (``sustained.ceiling``)."""
    # the GEMM family is the arch's own (CDNA3 has its measurement), not attention's fallback
    family = _KERNEL_FAMILY.get(gpu.arch, gpu.arch)
    return sustained.ceiling(gpu, family, precision if precision in ("fp8", "nvfp4") else "bf16")


# The sustained large-GEMM ceiling at each part's own power limit, fraction of its dense
# datasheet peak, by catalog GPU name and by kernel family (what an inline GPU of that ``arch``
# takes): measured where the part has a sustained measurement, else derived from a measured
# part of the same die through its power limit and SM count (workbench/estimate/time/sustained.py
# says which and why). Printed by benchmarks/kernel_model.py.
GEMM_CEILING = {
    **{g.name: {p: sustained.stock_ceiling(g, _KERNEL_FAMILY.get(g.arch, g.arch), p)
                for p in ("bf16", "fp8") + (("nvfp4",) if g.fp4_tflops else ())}
       for g in CATALOG_GPUS.values()},
    **{fam: {p: sustained.stock_ceiling(GPU("inline", 1, 1, 1, 0, 1, arch=fam), fam, p)
             for p in ("bf16", "fp8") + (("nvfp4",) if fam == "blackwell" else ())}
       for fam in ("hopper", "ampere", "blackwell", "cdna3")},
}


def edge_precision(precision: str) -> str:
    """The precision of the GEMMs outside the blocks' linears — the MoE router, the output
    head, LoRA adapters — under training ``precision``. NVFP4: bf16; Megatron-Core quantizes
    only inside the transformer layers' TE modules (megatron/core/fp4_utils.py
    get_fp4_context per layer), its output layer and router are plain bf16 GEMMs, and the NVFP4
    paper (arXiv:2509.25149) keeps the embeddings and the output head in BF16. FP8 keeps the estimate's convention
    (those GEMMs at the FP8 rate)."""
    return "bf16" if precision == "nvfp4" else precision


def peak_flops(gpu: GPU, precision: str) -> float:
    """Dense peak FLOP/s for the precision GEMMs run in (fp32 trains on TF32 tensor cores)."""
    if precision == "nvfp4":
        return gpu.fp4_tflops * 1e12
    if precision == "fp8":
        return gpu.fp8_tflops * 1e12
    if precision == "fp32":
        return (gpu.tf32_tflops or gpu.fp32_tflops or gpu.bf16_tflops / 2) * 1e12
    return gpu.bf16_tflops * 1e12


# Bytes per element of a GEMM's inputs: fp8 and nvfp4 engines.types.QUANTIZED_BYTES; fp32 4;
# 16-bit 2.
GEMM_INPUT_BYTES = {**QUANTIZED_BYTES, "fp32": 4}


def on_hardware(hw) -> GPU:
    """The scenario's GPU; a calibrated machine profile is told how many ranks share the
    machine (``gpus_per_node`` processes on its cores)."""
    gpu = hw.gpu
    if gpu.profile is None:
        return gpu
    return dataclasses.replace(gpu, profile=gpu.profile.with_ranks(hw.gpus_per_node))


def _each(fn, *args):
    """``fn`` of plain numbers applied to each entry of ``args`` broadcast together (a calibrated
    profile looks one shape up at a time); a number for numbers."""
    if all(np.ndim(a) == 0 for a in args):
        return fn(*args)
    flat = [np.ravel(a).tolist() for a in np.broadcast_arrays(*args)]
    shape = np.broadcast_shapes(*(np.shape(a) for a in args))
    return np.fromiter((fn(*one) for one in zip(*flat)), dtype=float,
                       count=len(flat[0])).reshape(shape)


@functools.lru_cache(maxsize=256)
def _gemm_rate(gpu: GPU, precision: str) -> float:
    """The large-GEMM FLOP/s ``gemm_time`` divides by: the dense peak x the sustained ceiling,
    once per (GPU, precision): the ceiling looks the part up in the catalog
    (``sustained.catalog_key``), too slow for every GEMM of a grid. A ``GPU`` hashes and
    compares on its datasheet fields (its profile excluded, which neither factor reads)."""
    return peak_flops(gpu, precision) * matmul_efficiency(gpu, precision)


def gemm_time(m, n, k, gpu: GPU, precision: str, count=1):
    """Seconds for ``count`` GEMMs of (m x k) @ (k x n) (on a calibrated profile: the measured
    seconds of that shape; the eager runtime's per-operation cost is ``runtime_ops``). Numbers
    or arrays (one entry per shape)."""
    live = True          # where every operand is positive (True: everywhere, no mask to apply)
    for v in (m, n, k, count):
        if isinstance(v, np.ndarray):
            live = v > 0 if live is True else live & (v > 0)
        elif not v > 0:
            live = False
    if gpu.profile is not None:
        return _each(lambda m, n, k, c, on: c * gpu.profile.gemm(m, n, k, precision) if on
                     else 0.0, m, n, k, count, live)
    work = 2.0 * m * n * (k + GEMM_K0)
    elem = GEMM_INPUT_BYTES.get(precision, 2)
    nbytes = elem * (m * k + k * n) + 2 * m * n   # low-precision inputs, 16-bit output
    compute = work / _gemm_rate(gpu, precision)
    memory = nbytes / (gpu.hbm_gb_per_s * 1e9 * MEMORY_BOUND_FRACTION)
    out = np.maximum(compute, memory) + KERNEL_OVERHEAD_S
    if not (type(count) is int and count == 1):     # (1 x out is out)
        out = count * out
    return plain(out if live is True else np.where(live, out, 0.0))


def looped_gemm_time(m, n, k, gpu: GPU, precision: str, count, host_ops):
    """Seconds for ``count`` GEMMs issued one by one from a Python loop that dispatches
    ``host_ops`` operations in all: the GPU waits on the host when the kernels are short
    (numbers or arrays)."""
    kernels = gemm_time(m, n, k, gpu, precision, count)
    if gpu.profile is not None:
        return kernels
    return plain(np.maximum(kernels, host_ops * HOST_OP_S))


def attention_time(flops, gpu: GPU, direction: str, kernel: str = "flash2", shape=None):
    """Seconds for attention kernels executing ``flops`` (bf16 even under fp8 training);
    ``shape`` (``attention.AttentionKernel``) lets a calibrated GPU profile answer from
    the measured point nearest it (a CPU profile: the best measured fp32 GEMM rate). Numbers
    or arrays (``shape``'s fields then arrays over the same shapes)."""
    live = np.asarray(flops) > 0
    if gpu.profile is not None:
        if shape is None:
            return _each(lambda f, on: gpu.profile.attention(f, direction, kernel) if on
                         else 0.0, flops, live)
        return _each(lambda f, on, *fields: gpu.profile.attention(
            f, direction, kernel, type(shape)(*fields)) if on else 0.0, flops, live, *shape)
    i = 0 if direction == "fwd" else 1
    if kernel == "eager":
        return plain(np.where(live, flops / (gpu.bf16_tflops * 1e12 * EAGER_ATTENTION[i]), 0.0))
    c = ATTENTION_C[_arch(gpu)][kernel][i]
    seq = shape.seq if shape is not None else 4096
    return plain(np.where(live, flops / (gpu.bf16_tflops * 1e12 * c * seq
                                         / (seq + ATTENTION_A[i])), 0.0))


def memory_time(nbytes: float, gpu: GPU, kernels: float = 0, kind: str = "elementwise") -> float:
    """Seconds for streaming ``nbytes`` through HBM in ``kernels`` launches; ``kind``
    ``optimizer`` runs at the fused optimizer's measured rate (on a calibrated profile: the
    measured copy bandwidth; a CPU profile counts its operations in ``runtime_ops``)."""
    if gpu.profile is not None:
        return gpu.profile.stream(nbytes)
    fraction = OPTIMIZER_FRACTION if kind == "optimizer" else MEMORY_BOUND_FRACTION
    return nbytes / (gpu.hbm_gb_per_s * 1e9 * fraction) + kernels * KERNEL_OVERHEAD_S


def runtime_ops(gpu: GPU, forward: float, backward: float = 0, no_grad: float = 0) -> float:
    """Seconds the eager runtime spends dispatching ``forward`` recorded operations,
    ``backward`` autograd nodes and ``no_grad`` unrecorded ones (the optimizer's), on a
    calibrated CPU profile; 0 on a catalog GPU, whose launch cost is ``KERNEL_OVERHEAD_S`` per
    kernel inside the kernel times, and on a calibrated GPU, whose measured kernel times
    include their launch."""
    if gpu.profile is None:
        return 0.0
    return gpu.profile.ops(forward, backward, no_grad)


def wrapper_time(gpu: GPU, par, part: str) -> tuple:
    """What PyTorch's wrappers add on a calibrated CPU profile (0 elsewhere): DDP when ZeRO-0/1
    replicate over dp x cp > 1 (trials refuse DDP with TP or PP), tensor parallelism when
    tp > 1, FSDP2 (with or without resharding) when ZeRO-2/3 shards over dp x cp > 1.
    ``part``: ``layer`` / ``rest`` (forward, backward seconds per microbatch) or ``tensor``
    (optimizer seconds per parameter tensor; a tensor is one DTensor however many wrappers
    made it, so the larger of the two counts). ``par`` may be a grid of layouts."""
    if gpu.profile is None:
        return 0.0, 0.0
    zero, replicas = np.asarray(par.zero), np.asarray(par.dp) * np.asarray(par.cp)
    sharded = (zero >= 2) & (replicas > 1)
    used = {"ddp": (zero < 2) & (replicas > 1), "tp": np.asarray(par.tp) > 1,
            "fsdp_reshard": sharded & np.asarray(par.reshards),
            "fsdp": sharded & ~np.asarray(par.reshards)}
    parts = {name: gpu.profile.wrapper(name, part) for name in used}
    if part == "tensor":
        return plain(np.maximum.reduce([np.where(used[k], parts[k][0], 0.0) for k in used])), 0.0
    return tuple(plain(sum(np.where(used[k], parts[k][i], 0.0) for k in used)) for i in (0, 1))


def overlap(hw) -> float:
    """1 when communication can hide behind compute, 0 when it cannot: on a calibrated CPU
    machine whose ranks occupy every core (a CPU rank's collective runs on the cores its
    compute needs, and a rank waiting for a descheduled peer has nothing to overlap with;
    ``MachineProfile.overlap``). A catalog or calibrated GPU overlaps."""
    prof = hw.gpu.profile
    return 1.0 if prof is None else prof.overlap(hw.gpus_per_node)

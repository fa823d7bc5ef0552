"""How fast a GPU runs each class of operation: a roofline per operation class.

- Matrix multiplies: ``max(flops / (peak * MATMUL_EFFICIENCY), bytes / hbm) + KERNEL_OVERHEAD_S``,
  with bytes = the three operands once. Large training GEMMs are compute-bound at the best
  *achievable* fraction of the dense peak (measured "maximum achievable matmul FLOPS"); small
  local shapes (high TP, small micro-batches) fall to the memory roof and the launch overhead.
- Attention: executed FLOPs at the measured efficiency of the chosen kernel (FlashAttention-2,
  FlashAttention-3, cuDNN fused attention) on the GPU's architecture, forward and backward.
- Memory-bound operations (norms, activations, residual adds, RoPE, casts, softmax of the loss,
  the optimizer step): bytes / (HBM peak x HBM_EFFICIENCY).
Every constant below cites its measurement in benchmarks/data/published_kernels.yaml.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from workbench.catalog.types import GPU
from workbench.estimate.arrays import plain

# Measured figures, by GPU architecture. Each is a measurement divided by the datasheet dense
# peak; the record ids are in benchmarks/data/published_kernels.yaml.
#   matmul: a large square GEMM through cuBLAS(Lt), 8192^3 — the shape class of LLM layers,
#     not the best shape a search finds: A100 fp16 253.7/312 (azure-cublaslt-a100-sxm-80gb-
#     fp16-8192x8192x8192), H100 bf16 797.8/989.5 (fastcu-h100-bf16-cublas-8192), H100 fp8
#     1290.1/1979 (azure-cublaslt-h100-sxm-fp8-8192x8192x8192). B200 has no such record: its
#     maximum achievable figures, bf16 1745/2250 and fp8 3432.5/4500 (mamf-b200-*), are used.
#   attention, (forward, backward) per kernel, causal, head_dim 128, 8k tokens:
#     H100 FlashAttention-2 333/318, FlashAttention-3 602/559, cuDNN 529/518 TFLOP/s
#     (fa3paper-h100-*-s8192, Shah et al. 2024 Fig. 5-7); A100 FlashAttention-2 forward+backward
#     179.5 (azure-fa2-a100-sxm-80gb-fwdbwd); GB200 FlashAttention-2 373.9 of 2,500
#     (azure-fa2-gb200-fwdbwd: FA2 does not use Blackwell's tensor-core path).
# Where no measurement exists the nearest architecture's fraction is used, and it says so.
ARCH = {
    "ampere": {"matmul": {"bf16": 0.813, "fp8": 0.813},
               "attention": {"flash2": (0.575, 0.575), "flash3": (0.575, 0.575),
                             "cudnn": (0.575, 0.575)}},      # FA3 is Hopper-only; cuDNN ~ FA2
    "hopper": {"matmul": {"bf16": 0.806, "fp8": 0.652},
               "attention": {"flash2": (0.337, 0.321), "flash3": (0.608, 0.565),
                             "cudnn": (0.535, 0.523)}},
    "blackwell": {"matmul": {"bf16": 0.776, "fp8": 0.763},
                  "attention": {"flash2": (0.150, 0.150), "flash3": (0.535, 0.523),
                                "cudnn": (0.535, 0.523)}},   # cuDNN/FA3: Hopper's fractions
}
ARCH["ada"] = ARCH["hopper"]       # no measurement: Hopper's fractions (stated assumption)
ARCH["cdna3"] = ARCH["hopper"]
ARCH[""] = ARCH["hopper"]          # an inline GPU without ``arch``
# Eager attention (no fused kernel) runs the scores as batched GEMMs and a softmax pass: an
# assumption (no measurement in published_kernels.yaml), half of the dense peak.
EAGER_ATTENTION = (0.5, 0.5)
# Sustained fraction of the HBM peak for streaming kernels: BabelStream triad H100 2,970 of
# 3,350 GB/s, H200 4,150 of 4,800, A100 1,700 of 2,039 (azure-babelstream-*-triad).
HBM_EFFICIENCY = 0.85
# Kernels in a training step run slower than the same kernels benchmarked alone: sustained clocks
# under the board power limit over hours, NCCL kernels sharing SMs with overlapped compute, and
# launch gaps between dependent kernels. One factor covers them, calibrated once on a single
# source — NVIDIA's DGX Cloud benchmark tables (NVIDIA/dgxc-benchmarking, 70 measured step times,
# Megatron/NeMo on H100 and B200, records dgxc-* in benchmarks/data/published_runs.yaml): the
# factor that makes the median step-time error of those 70 runs zero. Every other published run
# is out of sample (docs/step-time-model.md reports both).
SUSTAINED_FRACTION = 0.913
# Launch and tail cost of one kernel (CUDA launch latency plus the partial last wave); an
# assumption of the order of published launch latencies, not a measurement here.
KERNEL_OVERHEAD_S = 4e-6


def matmul_efficiency(gpu: GPU, precision: str) -> float:
    """Best achievable fraction of the dense peak for large GEMMs of this GPU and precision."""
    table = ARCH.get(gpu.arch, ARCH["hopper"])["matmul"]
    return table["fp8"] if precision == "fp8" else table["bf16"]


def peak_flops(gpu: GPU, precision: str) -> float:
    """Dense peak FLOP/s for the precision GEMMs run in (fp32 trains on TF32 tensor cores)."""
    if precision == "fp8":
        return gpu.fp8_tflops * 1e12
    if precision == "fp32":
        return (gpu.tf32_tflops or gpu.fp32_tflops or gpu.bf16_tflops / 2) * 1e12
    return gpu.bf16_tflops * 1e12


def on_hardware(hw) -> GPU:
    """The scenario's GPU; a calibrated machine profile is told how many ranks share the
    machine (``gpus_per_node`` processes on its cores)."""
    gpu = hw.gpu
    if gpu.profile is None:
        return gpu
    return dataclasses.replace(gpu, profile=gpu.profile.with_ranks(hw.gpus_per_node))


def gemm_time(m: float, n: float, k: float, gpu: GPU, precision: str, count: float = 1) -> float:
    """Seconds for ``count`` GEMMs of (m x k) @ (k x n) (on a calibrated profile: the measured
    seconds of that shape; the eager runtime's per-operation cost is ``runtime_ops``)."""
    if m <= 0 or n <= 0 or k <= 0 or count <= 0:
        return 0.0
    if gpu.profile is not None:
        return count * gpu.profile.gemm(m, n, k, precision)
    flops = 2.0 * m * n * k
    elem = 1 if precision == "fp8" else (4 if precision == "fp32" else 2)
    nbytes = elem * (m * k + k * n) + 2 * m * n   # fp8 inputs, 16-bit output
    compute = flops / (peak_flops(gpu, precision) * matmul_efficiency(gpu, precision))
    memory = nbytes / (gpu.hbm_gb_per_s * 1e9 * HBM_EFFICIENCY)
    return count * (max(compute, memory) / SUSTAINED_FRACTION + KERNEL_OVERHEAD_S)


def attention_time(flops: float, gpu: GPU, direction: str, kernel: str = "flash2",
                   shape=None) -> float:
    """Seconds for attention kernels executing ``flops`` (bf16 even under fp8 training);
    ``shape`` (``attention_shapes.AttentionKernel``) lets a calibrated GPU profile answer from
    the measured point nearest it (a CPU profile: the best measured fp32 GEMM rate)."""
    if flops <= 0:
        return 0.0
    if gpu.profile is not None:
        return gpu.profile.attention(flops, direction, kernel, shape)
    fwd_bwd = EAGER_ATTENTION if kernel == "eager" else \
        ARCH.get(gpu.arch, ARCH["hopper"])["attention"][kernel]
    return flops / (gpu.bf16_tflops * 1e12 * fwd_bwd[0 if direction == "fwd" else 1]
                    * SUSTAINED_FRACTION)


def memory_time(nbytes: float, gpu: GPU, kernels: float = 0) -> float:
    """Seconds for streaming ``nbytes`` through HBM in ``kernels`` launches (on a calibrated
    profile: the measured copy bandwidth; a CPU profile counts its operations in
    ``runtime_ops``)."""
    if gpu.profile is not None:
        return gpu.profile.stream(nbytes)
    return (nbytes / (gpu.hbm_gb_per_s * 1e9 * HBM_EFFICIENCY * SUSTAINED_FRACTION)
            + kernels * KERNEL_OVERHEAD_S)


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

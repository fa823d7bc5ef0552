"""How fast a GPU runs each class of operation: a roofline per operation class.

- Matrix multiplies: ``max(flops / (peak * MATMUL_EFFICIENCY), bytes / hbm) + KERNEL_OVERHEAD_S``,
  with bytes = the three operands once. Large training GEMMs are compute-bound at the best
  *achievable* fraction of the dense peak (measured "maximum achievable matmul FLOPS"); small
  local shapes (high TP, small micro-batches) fall to the memory roof and the launch overhead.
- Attention (FlashAttention): executed FLOPs at ATTENTION_EFFICIENCY of the bf16 peak, forward
  and backward separately (FlashAttention-2/3 papers' measured TFLOP/s).
- Memory-bound operations (norms, activations, residual adds, RoPE, casts, softmax of the loss,
  the optimizer step): bytes / (HBM peak x HBM_EFFICIENCY).
Every constant below cites its measurement in benchmarks/data/published_kernels.yaml.
"""
from __future__ import annotations

from workbench.catalog.types import GPU

# Best achievable fraction of the dense peak for large GEMMs, by precision.
MATMUL_EFFICIENCY = {"bf16": 0.80, "fp16": 0.80, "fp8": 0.70, "fp32": 0.80}
# FlashAttention executed TFLOP/s as a fraction of the bf16 dense peak (forward, backward).
ATTENTION_EFFICIENCY = {"fwd": 0.60, "bwd": 0.45}
# Sustained fraction of the HBM peak for streaming kernels.
HBM_EFFICIENCY = 0.85
# Launch and tail cost of one kernel (CUDA launch latency plus the partial last wave).
KERNEL_OVERHEAD_S = 4e-6


def peak_flops(gpu: GPU, precision: str) -> float:
    """Dense peak FLOP/s for the precision GEMMs run in (fp32 trains on TF32 tensor cores)."""
    if precision == "fp8":
        return gpu.fp8_tflops * 1e12
    if precision == "fp32":
        return (gpu.tf32_tflops or gpu.fp32_tflops or gpu.bf16_tflops / 2) * 1e12
    return gpu.bf16_tflops * 1e12


def gemm_time(m: float, n: float, k: float, gpu: GPU, precision: str, count: float = 1) -> float:
    """Seconds for ``count`` GEMMs of (m x k) @ (k x n)."""
    if m <= 0 or n <= 0 or k <= 0 or count <= 0:
        return 0.0
    flops = 2.0 * m * n * k
    elem = 1 if precision == "fp8" else (4 if precision == "fp32" else 2)
    nbytes = elem * (m * k + k * n) + 2 * m * n   # fp8 inputs, 16-bit output
    compute = flops / (peak_flops(gpu, precision) * MATMUL_EFFICIENCY[precision])
    memory = nbytes / (gpu.hbm_gb_per_s * 1e9 * HBM_EFFICIENCY)
    return count * (max(compute, memory) + KERNEL_OVERHEAD_S)


def attention_time(flops: float, gpu: GPU, direction: str) -> float:
    """Seconds for FlashAttention kernels executing ``flops`` (bf16 even under fp8 training)."""
    if flops <= 0:
        return 0.0
    return flops / (gpu.bf16_tflops * 1e12 * ATTENTION_EFFICIENCY[direction])


def memory_time(nbytes: float, gpu: GPU, kernels: float = 0) -> float:
    """Seconds for streaming ``nbytes`` through HBM in ``kernels`` launches."""
    return nbytes / (gpu.hbm_gb_per_s * 1e9 * HBM_EFFICIENCY) + kernels * KERNEL_OVERHEAD_S

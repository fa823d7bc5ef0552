"""Kernel timings on the GPU at hand that a kernel model of the step needs and earlier tables
lack (one JSON object per line on stdout; run where CUDA is):

- ``gemm_tp``: the GEMMs of one transformer layer at tensor-parallel degree tp (1, 2, 4, 8) for
  Llama-3-8B and -70B widths, in the three forms a training step runs them — forward
  ``x @ W`` (M x K x N), input gradient ``dy @ W^T`` (M x N x K) and weight gradient
  ``x^T @ dy`` (K x M x N) — bf16, M = tokens per GPU per microbatch;
- ``block``: one transformer block of the trial model (``workbench.trial.model.Block``: RMSNorm,
  GQA attention through SDPA, SwiGLU) forward and forward+backward under bf16 autocast, eager
  and ``torch.compile``d (what Inductor's fusion saves in time, and in peak memory).
Each time is the median of 10 CUDA-event timings after 3 warm-ups (compile: after its own
warm-up calls, which compile). bf16 ``tflops`` = 2MKN / time.

    python benchmarks/gpu_kernels.py > gpu-kernels.jsonl
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LAYERS = {   # hidden, heads, kv heads, ffn (Llama 3 8B and 70B, Meta's config.json)
    "llama3-8b": (4096, 32, 8, 14336),
    "llama3-70b": (8192, 64, 8, 28672),
}


def median_ms(fn, warm: int = 3, reps: int = 10) -> float:
    """Median milliseconds of ``fn`` over ``reps`` CUDA-event timings after ``warm`` calls
    (the trials' clock, ``workbench.trial.device.stamp``)."""
    from workbench.trial.device import seconds_between, stamp

    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = stamp(cuda=True)
        fn()
        times.append(seconds_between(start, stamp(cuda=True)) * 1e3)
    times.sort()
    return times[len(times) // 2]


def out(**row) -> None:
    print(json.dumps(row), flush=True)


def gemm_tp() -> None:
    """The layer's GEMMs per TP degree: forward, input-gradient and weight-gradient forms."""
    from workbench.hardware.gpu_profile import gemm_flops

    for model, (h, heads, kv, f) in LAYERS.items():
        d = h // heads
        for tp in (1, 2, 4, 8):
            shapes = {"qkv": (h, (heads + 2 * kv) * d // tp), "o": (heads * d // tp, h),
                      "gate_up": (h, 2 * f // tp), "down": (f // tp, h)}
            for m in (4096, 8192, 16384):
                for name, (k, n) in shapes.items():
                    forms = {"fwd": (m, k, n), "dgrad": (m, n, k), "wgrad": (k, m, n)}
                    for form, (mm, kk, nn) in forms.items():
                        a = torch.randn(mm, kk, device="cuda", dtype=torch.bfloat16)
                        b = torch.randn(kk, nn, device="cuda", dtype=torch.bfloat16)
                        ms = median_ms(lambda: a @ b)
                        out(kind="gemm_tp", model=model, tp=tp, gemm=name, form=form, M=mm,
                            K=kk, N=nn, ms=ms, tflops=gemm_flops(mm, nn, kk) / ms / 1e9)
                        del a, b


def block() -> None:
    """One trial-model block, eager and compiled: forward and forward+backward, peak memory."""
    from workbench.catalog.types import ModelShape
    from workbench.trial.model import Block

    for model, seq in (("llama3-8b", 8192), ("llama3-70b", 4096)):
        h, heads, kv, f = LAYERS[model]
        shape = ModelShape(name=model, layers=1, hidden=h, heads=heads, kv_heads=kv,
                           ffn_hidden=f, vocab=128256, mlp="swiglu", tied_embeddings=False)
        for compiled in (False, True):
            torch.manual_seed(0)
            layer = Block(shape, moe=False).cuda()
            run = torch.compile(layer) if compiled else layer
            x = torch.randn(1, seq, h, device="cuda", requires_grad=True)
            g = torch.randn(1, seq, h, device="cuda", dtype=torch.bfloat16)

            def fwd():
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    return run(x)

            def fwd_bwd():
                fwd().backward(g)

            t0 = time.time()
            try:
                fwd_bwd()                  # compiles forward and backward when compiled
                torch.cuda.synchronize()
                setup = time.time() - t0
                with torch.no_grad():
                    ms_f = median_ms(fwd)
                ms_fb = median_ms(fwd_bwd)
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                fwd_bwd()
                torch.cuda.synchronize()
                peak = torch.cuda.max_memory_allocated() - base
                out(kind="block", model=model, seq=seq, micro_batch=1, compiled=compiled,
                    ms_fwd_no_grad=ms_f, ms_fwd_bwd=ms_fb, peak_extra_bytes=peak,
                    first_call_s=setup)
            except Exception as exc:       # a compile failure is a finding, not a crash
                out(kind="block", model=model, compiled=compiled, error=repr(exc)[:300])
            del layer, run, x, g
            torch.cuda.empty_cache()


if __name__ == "__main__":
    t0 = time.time()
    p = torch.cuda.get_device_properties(0)
    out(kind="device", name=p.name, sm_count=p.multi_processor_count, torch=torch.__version__,
        capability=f"{p.major}.{p.minor}")
    gemm_tp()
    out(kind="progress", s=time.time() - t0)
    block()
    out(kind="done", s=time.time() - t0)

"""The CUDA measurements of a GPU profile, made in ONE spawned process (``measure_gpu.py``
starts it: CUDA cannot be used in a process forked after its parent initialised it, and the
parent never initialises it).

What it measures on device 0 (the first of CUDA_VISIBLE_DEVICES), after the patterns of the
team's H200 kernel sweep ("kernel sweep" below: one H200 SXM, PyTorch 2.11.0+cu130, driver 580,
measured 2026-12-04), whose calls all ran there:
- GEMMs ``a @ b`` (a m x k, b k x n) in bf16 over a log-spaced grid covering LLM training shapes
  (m tokens 512..16384, n and k 1024..28672), and in fp8 through ``torch._scaled_mm`` with
  tensorwise scales (a row-major, b column-major, bf16 output: the layout its meta function
  checks, torch/_meta_registrations.py ``_check_scaled_mm_sizes``) where ``torch._scaled_mm``
  exists and the compute capability is >= 8.9 (FP8 tensor cores: Ada, Hopper, Blackwell);
  plus a scenario's exact GEMM shapes when one is given.
- SDPA attention (``F.scaled_dot_product_attention(..., is_causal=True, enable_gqa=...)``,
  bf16, (batch, heads, seq, head_dim) layout) forward and forward+backward at a few points.
- grouped GEMM ``torch._grouped_mm(x, w, offs=offs)`` (x (T, h) bf16, w (E, h, f) bf16, offs
  int32 cumulative row ends; its meta function: torch/_meta_registrations.py
  ``_meta_grouped_mm_common``) for a couple of expert shapes, next to one dense GEMM of the
  same FLOPs.
- HBM bandwidth: a device-to-device copy of ``hbm_bytes`` (bytes read + written / seconds).
Timing (``cuda_seconds``): CUDA events (``torch.cuda.Event(enable_timing=True)``;
``elapsed_time`` is in milliseconds, torch/cuda/streams.py) around a loop of calls long enough
to spread the launch and the event resolution, after warm-up; the median over repeats. Every
measurement that fails (an unsupported kernel, out of memory) becomes one line in ``errors``.

The grid, the FLOP counts, the plan and the assembly of the tables are pure (no torch).
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from workbench.hardware.profile import grid_shapes

# GEMM grids (m tokens x k in -> n out). Log-spaced in each coordinate so that log-linear
# interpolation between neighbours holds; the widths are real layers' (Llama 3 8B 4096 / 14336,
# 70B 8192 / 28672) where log spacing allows.
FULL_GRID = {"m": [512, 1024, 2048, 4096, 8192, 16384],
             "n": [1024, 2048, 4096, 8192, 14336, 28672],
             "k": [1024, 2048, 4096, 8192, 14336, 28672]}
QUICK_GRID = {"m": [512, 2048, 8192, 16384],
              "n": [1024, 4096, 14336, 28672],
              "k": [1024, 4096, 14336, 28672]}
# Attention points (seq, heads, kv_heads, head_dim) at a fixed number of tokens per call (batch
# = tokens // seq), as the kernel sweep measured them (32768 tokens there).
FULL_ATTENTION = tuple((s, h, kv, 128) for s in (512, 1024, 2048, 4096, 8192, 16384, 32768)
                       for h, kv in ((8, 8), (16, 8), (32, 8), (64, 8))) + tuple(
    (s, 16, 16, 64) for s in (1024, 4096, 16384))
QUICK_ATTENTION = tuple((s, h, kv, 128) for s in (1024, 4096, 16384)
                        for h, kv in ((8, 8), (32, 8)))
ATTENTION_TOKENS = {"full": 32768, "quick": 16384}
# Grouped expert GEMMs (tokens routed to this GPU, hidden, expert FFN width, local experts):
# Mixtral 8x7B-like and fine-grained DeepSeek/Qwen-MoE-like (the kernel sweep's rows).
FULL_GROUPED = ((16384, 4096, 14336, 8), (65536, 7168, 2048, 32), (65536, 2048, 768, 128),
                (65536, 4096, 1408, 64))
QUICK_GROUPED = ((16384, 4096, 14336, 8), (65536, 2048, 768, 128))
# A few GB through HBM: far beyond the L2 cache (50 MB on H100/H200).
HBM_BYTES = 2 << 30
# FP8 tensor cores from compute capability 8.9 (Ada) on (CUDA C++ Programming Guide, "Compute
# Capabilities"); torch._scaled_mm refuses older parts.
FP8_CAPABILITY = (8, 9)
# Timing: warm-ups and repeats (the kernel sweep: 3 and 10), the length one repeat aims at, the
# most calls per repeat, and the seconds one measurement aims to stay within (``cuda_seconds``).
TIMING = {"full": {"warmup": 3, "repeats": 10, "target_s": 2e-3, "budget_s": 2.0},
          "quick": {"warmup": 2, "repeats": 5, "target_s": 1e-3, "budget_s": 0.5}}
MAX_CALLS = 200


@dataclass(frozen=True)
class GpuPlan:
    """What the spawned process measures (picklable: it crosses the spawn)."""

    grid: dict
    attention: tuple           # (batch, seq, heads, kv_heads, head_dim, value_dim) per point
    grouped: tuple             # (tokens, hidden, expert_ffn, experts) per shape
    gemm_shapes: tuple         # (m, n, k, table) exact shapes, table bf16 | fp8
    hbm_bytes: int
    timing: dict
    quick: bool = False


def attention_point(seq: int, heads: int, kv_heads: int, head_dim: int, tokens: int,
                    value_dim: int | None = None, batch: int | None = None) -> tuple:
    """One attention point of a plan: (batch, seq, heads, kv_heads, head_dim, value_dim), the
    batch filling ``tokens`` unless given."""
    b = batch if batch is not None else max(1, tokens // seq)
    return (b, seq, heads, kv_heads, head_dim, value_dim or head_dim)


def make_plan(quick: bool, gemm_shapes=(), attention_kernels=()) -> GpuPlan:
    """The plan of a calibration (``quick``: the smaller grid, fewer points and repeats), with
    a scenario's exact GEMM shapes ((m, n, k, precision) as the estimator asks them; bf16 for
    every one, fp8 too where the scenario trains in fp8) and attention kernels (objects with
    batch, seq, heads, kv_heads, head_dim, value_dim) added."""
    mode = "quick" if quick else "full"
    tokens = ATTENTION_TOKENS[mode]
    attention = [attention_point(*p, tokens) for p in (QUICK_ATTENTION if quick
                                                       else FULL_ATTENTION)]
    for a in attention_kernels:
        point = (int(a.batch), int(a.seq), int(a.heads), int(a.kv_heads), int(a.head_dim),
                 int(a.value_dim))
        if point not in attention:
            attention.append(point)
    shapes = []
    for m, n, k, precision in gemm_shapes:
        key = tuple(max(1, int(round(v))) for v in (m, n, k))
        for table in ("bf16", "fp8") if precision == "fp8" else ("bf16",):
            if (*key, table) not in shapes:
                shapes.append((*key, table))
    return GpuPlan(grid=QUICK_GRID if quick else FULL_GRID, attention=tuple(attention),
                   grouped=QUICK_GROUPED if quick else FULL_GROUPED, gemm_shapes=tuple(shapes),
                   hbm_bytes=HBM_BYTES, timing=dict(TIMING[mode]), quick=quick)


def gemm_tables(grid: dict, seconds: dict[str, dict]) -> tuple[dict, list[str]]:
    """The profile's GEMM tables from per-shape seconds ({table: {(m, n, k): s}}): a table is
    kept only when every grid shape has a time (interpolation needs the whole grid); bf16 is
    required. Returns (tables, lines saying what was dropped)."""
    shapes = grid_shapes(grid)
    tables, notes = {}, []
    for table, by_shape in seconds.items():
        missing = [s for s in shapes if not by_shape.get(s)]
        if missing:
            notes.append(f"{table} GEMM table left out: {len(missing)} of {len(shapes)} grid "
                         f"shapes not measured (first {'x'.join(map(str, missing[0]))})")
            continue
        tables[table] = [float(by_shape[s]) for s in shapes]
    if "bf16" not in tables:
        raise RuntimeError("GPU calibration: the bf16 GEMM grid could not be measured"
                           + (f" ({notes[0]})" if notes else ""))
    return tables, notes


# --- inside the spawned process -------------------------------------------------------------

def cuda_seconds(fn: Callable[[], object], timing: dict) -> float:
    """Median seconds per call of ``fn`` on the current CUDA stream (module docstring): a first
    call (lazy initialisation, cuBLAS's choice of kernel), one timed call, the rest of the
    warm-ups, then ``repeats`` loops of calls; a call that outlasts a third of ``budget_s``
    gets fewer warm-ups and repeats (at least one), so one long kernel cannot eat the budget."""
    fn()
    one = max(_event_seconds(fn, 1), 1e-7)
    budget = timing["budget_s"]
    for _ in range(max(0, min(timing["warmup"] - 2, int(budget / one) - 1))):
        fn()
    calls = max(1, min(MAX_CALLS, int(timing["target_s"] / one)))
    fits = int(budget / (one * calls))
    repeats = min(timing["repeats"], max(3, fits)) if fits >= 3 else max(1, fits)
    return statistics.median(_event_seconds(fn, calls) for _ in range(repeats))


def _event_seconds(fn: Callable[[], object], calls: int) -> float:
    """Seconds per call of ``calls`` back-to-back calls, between two CUDA events."""
    from workbench.trial.device import seconds_between, stamp

    start = stamp(cuda=True)
    for _ in range(calls):
        fn()
    return seconds_between(start, stamp(cuda=True)) / calls


def _gemm_fn(m: int, n: int, k: int, table: str):
    """A closure running one (m x k) @ (k x n) product in ``table``'s precision."""
    import torch

    dev = "cuda"
    if table == "bf16":
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        return lambda: a @ b
    # fp8, tensorwise scales, as the kernel sweep ran it on the H200: a row-major (m, k),
    # b column-major (k, n) = the transpose of a row-major (n, k), bf16 output.
    a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0, device=dev)
    return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)


def _attention_seconds(point: tuple, timing: dict) -> dict:
    """Forward and forward+backward seconds of causal SDPA at ``point`` (and its backend)."""
    import torch
    import torch.nn.functional as F

    batch, seq, heads, kv, hd, vd = point
    opts = dict(device="cuda", dtype=torch.bfloat16, requires_grad=True)
    q = torch.randn(batch, heads, seq, hd, **opts)
    k = torch.randn(batch, kv, seq, hd, **opts)
    v = torch.randn(batch, kv, seq, vd, **opts)
    g = torch.randn(batch, heads, seq, vd, device="cuda", dtype=torch.bfloat16)
    gqa = kv != heads

    def fwd():
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)

    def fwd_bwd():     # autograd.grad: no accumulation into .grad between calls
        return torch.autograd.grad(fwd(), (q, k, v), g)

    backend = ""
    try:   # private, best effort: the backend SDPA dispatches to for these inputs
        from torch.nn.attention import SDPBackend

        backend = SDPBackend(torch._fused_sdp_choice(q, k, v, is_causal=True,
                                                     enable_gqa=gqa)).name.lower()
    except Exception:
        pass
    with torch.no_grad():
        fwd_s = cuda_seconds(fwd, timing)
    return {"batch": batch, "seq": seq, "heads": heads, "kv_heads": kv, "head_dim": hd,
            "value_dim": vd, "fwd_s": fwd_s, "fwd_bwd_s": cuda_seconds(fwd_bwd, timing),
            "backend": backend}


def _grouped_seconds(shape: tuple, timing: dict) -> dict:
    """``torch._grouped_mm`` over ``experts`` equal groups, and one dense GEMM of the same
    FLOPs (``x @ w[0]``), in seconds."""
    import torch

    tokens, hidden, ffn, experts = shape
    x = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(experts, hidden, ffn, device="cuda", dtype=torch.bfloat16)
    per = tokens // experts
    offs = torch.arange(per, per * experts + 1, per, device="cuda", dtype=torch.int32)
    row = {"tokens": per * experts, "hidden": hidden, "expert_ffn": ffn, "experts": experts,
           "dense_s": cuda_seconds(lambda: x @ w[0], timing)}
    row["grouped_s"] = cuda_seconds(lambda: torch._grouped_mm(x[:per * experts], w, offs=offs),
                                    timing)
    return row


def _copy_gb_per_s(nbytes: int, timing: dict) -> float:
    """GB/s of a device-to-device copy of ``nbytes`` (bytes read + written)."""
    import torch

    src = torch.ones(nbytes, device="cuda", dtype=torch.uint8)
    dst = torch.empty_like(src)
    return 2 * nbytes / cuda_seconds(lambda: dst.copy_(src), timing) / 1e9


def _line(what: str, exc: BaseException) -> str:
    return f"{what}: {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"


def measure_gpu(plan: GpuPlan, say: Callable[[str], None] = lambda what: None,
                step: Callable[[str], None] = lambda what: None) -> dict:
    """Run ``plan`` on CUDA device 0 and return the raw results: ``gpu`` (``gpu_facts``),
    ``gemm`` ({table: {(m, n, k): seconds}} over the grid), ``gemm_points``,
    ``attention_points``, ``grouped_gemm``, ``hbm_gb_per_s``, ``errors``, ``wall_s``. ``say``
    hears each section, ``step`` each measurement."""
    import torch

    t0 = time.perf_counter()
    from workbench.rank_devices import rank_device
    from workbench.trial.device import gpu_facts

    say("CUDA start and device facts")
    facts = gpu_facts(rank_device("nccl", 0))
    timing = plan.timing
    errors: list[str] = []
    fp8 = (hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn")
           and tuple(facts["capability"]) >= FP8_CAPABILITY)
    if not fp8:
        errors.append(f"fp8 GEMMs: compute capability "
                      f"{'.'.join(map(str, facts['capability']))} (they need >= 8.9 and "
                      "torch._scaled_mm)")
    tables = ("bf16", "fp8") if fp8 else ("bf16",)

    def timed(what: str, fn: Callable[[], float]):
        step(what)
        try:
            return fn()
        except Exception as exc:         # one line per failure; the rest still runs
            errors.append(_line(what, exc))
            return None
        finally:
            torch.cuda.empty_cache()

    gemm: dict[str, dict] = {t: {} for t in tables}
    for table in tables:
        say(f"GEMM grid, {table}: {len(grid_shapes(plan.grid))} shapes")
        for m, n, k in grid_shapes(plan.grid):
            s = timed(f"GEMM {table} {m}x{n}x{k}",
                      lambda: cuda_seconds(_gemm_fn(m, n, k, table), timing))
            if s is not None:
                gemm[table][(m, n, k)] = s
    points = []
    if plan.gemm_shapes:
        say(f"the scenario's GEMM shapes: {len(plan.gemm_shapes)}")
    for m, n, k, table in plan.gemm_shapes:
        if table == "fp8" and not fp8:
            continue
        s = timed(f"scenario GEMM {table} {m}x{n}x{k}",
                  lambda: cuda_seconds(_gemm_fn(m, n, k, table), timing))
        if s is not None:
            points.append({"m": m, "n": n, "k": k, "precision": table, "seconds": s})
    say(f"attention (SDPA, causal, bf16): {len(plan.attention)} points")
    attention = [r for r in (timed(f"attention b{p[0]} s{p[1]} h{p[2]}/{p[3]} d{p[4]}",
                                   lambda p=p: _attention_seconds(p, timing))
                             for p in plan.attention) if r is not None]
    grouped = []
    say("grouped GEMM (torch._grouped_mm) and HBM copy")
    if hasattr(torch, "_grouped_mm"):
        grouped = [r for r in (timed(f"grouped GEMM {s[3]} experts {s[1]}x{s[2]}",
                                     lambda s=s: _grouped_seconds(s, timing))
                               for s in plan.grouped) if r is not None]
    else:
        errors.append("grouped GEMM: this torch has no torch._grouped_mm")
    hbm = timed(f"HBM copy {plan.hbm_bytes / 2**30:.0f} GiB",
                lambda: _copy_gb_per_s(plan.hbm_bytes, timing))
    if hbm is None:
        raise RuntimeError("GPU calibration: the HBM copy could not be measured: "
                           + errors[-1])
    return {"gpu": facts, "gemm": gemm, "gemm_points": points, "attention_points": attention,
            "grouped_gemm": grouped, "hbm_gb_per_s": hbm, "errors": errors,
            "wall_s": time.perf_counter() - t0}


def measure_rank(rank: int, plan: GpuPlan, queue) -> None:
    """The spawned process's body (``processes.run_processes``): ``measure_gpu`` under the
    supervisor's protocol, each phase reported as a ``progress`` event, the results as one
    ``gpu`` event (grid keys as lists: the queue pickles, JSON does not take tuples as keys)."""
    from workbench.process_runner import supervised_rank

    def body(phase) -> None:
        def say(what: str) -> None:
            phase.value = what
            queue.put({"type": "progress", "rank": rank, "what": what})

        def step(what: str) -> None:
            phase.value = what

        raw = measure_gpu(plan, say, step)
        raw["gemm"] = {t: [[*s, v] for s, v in by.items()] for t, by in raw["gemm"].items()}
        queue.put({"type": "gpu", "rank": rank, "raw": raw})

    supervised_rank(rank, queue, body)

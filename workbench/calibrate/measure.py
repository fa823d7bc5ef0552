"""Measure this machine's profile: GEMM seconds over a grid of shapes per precision, copy
bandwidth, the eager runtime's per-operation cost, and collective latency/bandwidth per world
size (through ``workbench.bench``). Every figure is timed with one thread, as a trial rank runs
(``torch.set_num_threads(1)`` in ``workbench/trial/worker.py``), with the statistic of
``timing.median_mean``.
"""
from __future__ import annotations

import datetime as _dt
import os
import platform
import socket
from collections.abc import Callable

from workbench.hardware.profile import MachineProfile, fit_alpha_beta
from workbench.calibrate.runtime import DEPTHS, per_layer, probe_runtime_loaded
from workbench.calibrate.sync import in_loop_latency
from workbench.calibrate.timing import median_mean

# The grid spans the trial models' GEMMs (tokens 64..2048 per rank, widths 16..512) and beyond.
FULL_GRID = {"m": [16, 64, 256, 1024, 4096], "n": [16, 64, 256, 1024], "k": [16, 64, 256, 1024]}
QUICK_GRID = {"m": [16, 256, 4096], "n": [16, 256, 1024], "k": [16, 256, 1024]}
PRECISIONS = {"fp32": "float32", "bf16": "bfloat16"}
COLLECTIVE_SIZES = {"min_bytes": 1 << 10, "max_bytes": 16 << 20, "step_factor": 4}
QUICK_COLLECTIVE_SIZES = {"min_bytes": 1 << 10, "max_bytes": 4 << 20, "step_factor": 64}


def gemm_seconds(grid: dict, precision: str, budget_s: float) -> list[float]:
    """Seconds of one ``a @ b`` for every (m, n, k) of the grid, row-major."""
    import torch

    dtype = getattr(torch, PRECISIONS[precision])
    out = []
    for m in grid["m"]:
        for n in grid["n"]:
            for k in grid["k"]:
                a = torch.randn(m, k).to(dtype)
                b = torch.randn(k, n).to(dtype)
                out.append(median_mean(lambda: torch.mm(a, b), budget_s))
    return out


def copy_bandwidth(nbytes: int = 256 << 20) -> float:
    """GB/s of one thread copying a buffer larger than the caches (read + write bytes)."""
    import torch

    src = torch.ones(nbytes // 4)
    dst = torch.empty_like(src)
    t = median_mean(lambda: dst.copy_(src), budget_s=1.0, repeats=3)
    return 2 * nbytes / t / 1e9


def runtime_costs(gemm: dict, grid: dict, budget_s: float,
                  processes: int = 1) -> tuple[tuple, dict, dict]:
    """(forward, backward, no-grad) seconds per eager op, the wrappers' additions and the raw
    probe, from ``runtime.probe_runtime`` run in ``processes`` processes at once (its
    docstring has the method). Per-op costs are
    least-squares fits through the origin over the probe's depths: the plain model's seconds,
    less the GEMM seconds this profile predicts for it, against its operation counts
    (``estimate/time/eager_ops.py``), so the embedding, head and loss weigh in as they do in a
    trial. The optimizer's cost per op likewise, against AdamW's operations over the tensors."""
    from workbench.catalog import CATALOGS
    from workbench.estimate.time.eager_ops import (
        edge_tensors, embedding_ops, head_ops, layer_ops, layer_tensors, optimizer_ops,
    )
    from workbench.trial.shrink import TRIAL_SEQ, trial_model

    raw = probe_runtime_loaded(processes, budget_s)
    m = trial_model(CATALOGS["model"]["tiny-dense"], 1, 1, 1)
    probe = MachineProfile(date="", host={}, cores=1, memory_gb=0, gemm_grid=grid,
                           gemm_seconds=gemm, copy_gb_per_s=1, op_forward_s=0,
                           op_backward_s=0, op_no_grad_s=0, wrappers={}, collectives={})
    tokens, h, q, kv, f = 2 * TRIAL_SEQ, m.hidden, m.heads * m.dim_per_head, m.kv_dim, m.ffn_hidden
    layer_gemm = (probe.gemm(tokens, q + 2 * kv, h, "fp32") + probe.gemm(tokens, h, q, "fp32")
                  + probe.gemm(tokens, 2 * f, h, "fp32") + probe.gemm(tokens, h, f, "fp32"))
    head_gemm = probe.gemm(tokens, m.vocab, h, "fp32")
    fits = {"forward": [], "backward": [], "optimizer": []}
    for depth in DEPTHS:
        t = raw["plain"][depth]
        ops = [sum(x) for x in zip(*([layer_ops(m, False)] * depth), embedding_ops(m),
                                   head_ops(m))]
        gemm_s = depth * layer_gemm + head_gemm
        tensors = depth * layer_tensors(m, False) + edge_tensors(m, True, True)
        fits["forward"].append((ops[0], t["forward"] - gemm_s))
        fits["backward"].append((ops[1], t["backward"] - 2 * gemm_s))
        fits["optimizer"].append((optimizer_ops(tensors, "adamw"), t["optimizer"]))
    per_op = tuple(max(0.0, sum(n * y for n, y in pts) / sum(n * n for n, _ in pts))
                   for pts in fits.values())
    fit = per_layer(raw)
    plain = fit["plain"]
    tensors = layer_tensors(m, False)
    wrappers = {}
    for name in ("ddp", "tp", "fsdp", "fsdp_reshard"):
        w = fit[name]
        wrappers[name] = {
            "layer": tuple(max(0.0, w[k][0] - plain[k][0]) for k in ("forward", "backward")),
            "rest": tuple(max(0.0, w[k][1] - plain[k][1]) for k in ("forward", "backward")),
            "tensor": (max(0.0, w["optimizer"][0] - plain["optimizer"][0]) / tensors, 0.0)}
    return per_op, wrappers, raw


def collective_fits(world_sizes, backend: str, quick: bool,
                    on_event: Callable[[dict], None] | None = None,
                    sizes: dict | None = None) -> dict:
    """{kind: {world: (alpha, beta)}} fitted to ``workbench bench`` rows (``sizes``: the
    message ladder, default the CPU's)."""
    from workbench.bench.runner import run_bench

    sizes = sizes or (QUICK_COLLECTIVE_SIZES if quick else COLLECTIVE_SIZES)
    df = run_bench(list(world_sizes), backend=backend, on_event=on_event,
                   warmup=2 if quick else 5, iters=5 if quick else 20, **sizes)
    fits: dict = {}
    for (kind, world), rows in df.groupby(["collective", "world_size"]):
        fits.setdefault(str(kind), {})[int(world)] = fit_alpha_beta(
            list(zip(rows["bytes"], rows["time_s"])))
    return fits


def host_facts() -> dict:
    """What the profile was measured on."""
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        import psutil

        memory = psutil.virtual_memory().total / 1e9
    except ImportError:
        memory = 0.0
    return {"cpu": cpu, "cores": int(cores or 1), "memory_gb": round(memory, 1),
            "torch": torch.__version__, "python": platform.python_version(),
            "hostname": socket.gethostname()}


def measure_profile(quick: bool = False, world_sizes=(2, 4, 8), backend: str = "gloo",
                    on_event: Callable[[dict], None] | None = None) -> MachineProfile:
    """Measure everything the profile holds (``quick``: a coarser grid and fewer sizes). World
    sizes below 2 time no collective: with none left the collectives and their in-loop
    latency are skipped, and the estimate times collectives on the scenario's links."""
    import torch

    def say(what: str) -> None:
        if on_event is not None:
            on_event({"type": "phase", "what": what})

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        grid = QUICK_GRID if quick else FULL_GRID
        budget = 0.01 if quick else 0.04
        say("GEMM sweep")
        gemm = {p: gemm_seconds(grid, p, budget) for p in PRECISIONS}
        say("copy bandwidth")
        copy = copy_bandwidth(64 << 20 if quick else 256 << 20)
    finally:
        torch.set_num_threads(threads)
    say("eager runtime on the reference model")
    facts = host_facts()
    (fwd, bwd, no_grad), wrappers, raw = runtime_costs(gemm, grid, 0.15 if quick else 0.6,
                                                       processes=facts["cores"])
    worlds = tuple(w for w in world_sizes if w >= 2)
    fits, in_loop = {}, {}
    if worlds:
        say("collectives")
        fits = collective_fits(worlds, backend, quick, on_event)
        say("collective latency inside a training loop")
        in_loop = in_loop_latency(tuple(sorted({*worlds, 16})), iters=30 if quick else 80)
    return MachineProfile(
        date=_dt.date.today().isoformat(), host=facts, cores=facts["cores"],
        memory_gb=facts["memory_gb"], gemm_grid=grid, gemm_seconds=gemm,
        copy_gb_per_s=copy, op_forward_s=fwd, op_backward_s=bwd, op_no_grad_s=no_grad,
        wrappers=wrappers, runtime_probe=raw, in_loop_s=in_loop,
        collectives={backend: fits} if fits else {}, backend=backend,
        source=f"workbench calibrate{' --quick' if quick else ''} on {facts['hostname']}")

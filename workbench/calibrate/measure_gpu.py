"""Measure a GPU machine's profile: find the GPUs without initialising CUDA here, run the
kernel measurements (``gpu.measure_gpu``) in ONE spawned process, time nccl collectives
through ``workbench.bench`` when two or more GPUs are asked for, and assemble a
``gpu_profile.GpuProfile``.

Why the parent never initialises CUDA: a process forked after its parent initialised CUDA
cannot use it ("CUDA error: initialization error"), and ``torch.cuda.is_available()`` does
initialise it. torch/cuda/__init__.py (PyTorch 2.13 as installed here; the same branch in the
2.x sources of pytorch/pytorch read through the search index): ``is_available`` returns
``torch._C._cuda_getDeviceCount() > 0``, "the CUDA Runtime API ``cudaGetDeviceCount`` which
in turn initializes the CUDA Driver API via ``cuInit``", unless
``PYTORCH_NVML_BASED_CUDA_CHECK=1``, which asks ``device_count`` -> NVML (and falls back to
``cudaGetDeviceCount`` when NVML fails); ``_is_compiled`` only checks that torch was built
with CUDA. So GPUs are counted here through NVML (``rank_devices.visible_gpus``: honours
CUDA_VISIBLE_DEVICES) when this torch has CUDA (``torch.version.cuda``), and every process that
uses CUDA is spawned; the nccl benchmark's ranks are spawned too
(``process_runner.start_method``).
"""
from __future__ import annotations

import datetime as _dt
from collections.abc import Callable

from workbench.calibrate.gpu import GpuPlan, gemm_tables, make_plan, measure_rank
from workbench.hardware.gpu_profile import GpuProfile

# nccl over NVLink/PCIe reaches its bus bandwidth only at large messages (nccl-tests sweeps to
# GBs); 1 KiB .. 256 MiB covers latency and bandwidth for the alpha-beta fit.
NCCL_SIZES = {"min_bytes": 1 << 10, "max_bytes": 256 << 20, "step_factor": 4}
QUICK_NCCL_SIZES = {"min_bytes": 1 << 10, "max_bytes": 64 << 20, "step_factor": 16}
# The spawned process reports a new phase at every measurement; two minutes without one is a
# hang.
STALL_S = 120.0


def run_gpu_process(plan: GpuPlan, on_event: Callable[[dict], None] | None = None) -> dict:
    """``gpu.measure_gpu(plan)`` in one spawned process (supervised and reaped as trials
    are); its raw results with the grid tables as {table: {(m, n, k): seconds}}."""
    from workbench.calibrate.processes import run_processes

    def forward(ev: dict) -> None:
        if on_event is not None and ev["type"] == "progress":
            on_event({"type": "phase", "what": f"GPU: {ev['what']}"})

    events = run_processes(measure_rank, lambda port: [(0, plan)], "GPU measurement",
                           stall_s=STALL_S, method="spawn", on_event=forward)
    (raw,) = [ev["raw"] for ev in events if ev["type"] == "gpu"]
    raw["gemm"] = {t: {tuple(row[:3]): row[3] for row in rows} for t, rows in raw["gemm"].items()}
    return raw


def assemble(raw: dict, plan: GpuPlan, host: dict, date: str, source: str,
             collectives: dict | None = None) -> GpuProfile:
    """The profile of the spawned process's raw results (``run_gpu_process``) and the nccl
    fits ({kind: {world: (alpha, beta)}}); a grid table with a missing shape is left out and
    said in ``errors`` (``gpu.gemm_tables``)."""
    tables, notes = gemm_tables(plan.grid, raw["gemm"])
    return GpuProfile(
        date=date, host=host, gpu=raw["gpu"], gemm_grid=plan.grid, gemm_seconds=tables,
        hbm_gb_per_s=float(raw["hbm_gb_per_s"]), attention_points=list(raw["attention_points"]),
        gemm_points=list(raw["gemm_points"]), grouped_gemm=list(raw["grouped_gemm"]),
        collectives={"nccl": collectives} if collectives else {}, backend="nccl",
        source=source, errors=[*raw["errors"], *notes],
        wall_s=float(raw["wall_s"]))


def measure_gpu_profile(quick: bool = False, world_sizes=(), scenario=None,
                        on_event: Callable[[dict], None] | None = None) -> GpuProfile:
    """Measure this GPU machine (``quick``: the smaller grid, fewer points and repeats): the
    kernels in one spawned process, then nccl collectives at the world sizes >= 2 of
    ``world_sizes`` (none: skipped, the estimate uses the scenario's links). ``scenario``
    adds the exact GEMM shapes and attention kernels the estimator times for it
    (``scenario_shapes``)."""
    from workbench.calibrate.measure import collective_fits, host_facts

    def say(what: str) -> None:
        if on_event is not None:
            on_event({"type": "phase", "what": what})

    shapes, kernels = [], []
    if scenario is not None:
        from workbench.calibrate.scenario_shapes import scenario_shapes

        shapes, kernels = scenario_shapes(scenario)
    plan = make_plan(quick, shapes, kernels)
    say("GPU kernels, in one spawned process")
    raw = run_gpu_process(plan, on_event)
    worlds = tuple(w for w in world_sizes if w >= 2)
    fits = {}
    if worlds:
        say("collectives (nccl)")
        fits = collective_fits(worlds, "nccl", quick, on_event,
                               sizes=QUICK_NCCL_SIZES if quick else NCCL_SIZES)
    facts = host_facts()
    return assemble(raw, plan, facts, _dt.date.today().isoformat(),
                    f"workbench calibrate{' --quick' if quick else ''} on {facts['hostname']}",
                    fits)

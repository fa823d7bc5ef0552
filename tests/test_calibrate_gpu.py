"""Calibration on GPU machines, tested without one: the GPU profile's file and arithmetic, its
use as a scenario's hardware (the estimate reads the measured seconds exactly), the pure parts
of the CUDA measurement (grid, FLOPs, plan, tables, assembly), GPU detection without CUDA
initialisation, world size 1 (no collectives: the scenario's links) and the command's choice
between a CPU and a GPU profile."""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from workbench import rank_devices
from workbench.calibrate import gpu as gpu_mod
from workbench.hardware.gpu_profile import (
    GpuProfile, arch_of_capability, attention_rates, causal_attention_flops, gemm_flops,
    gpu_record,
)
from workbench.hardware.calibration import load_profile
from workbench.hardware.profile import MachineProfile
from workbench.errors import ScenarioError
from workbench.estimate.time import kernels as eff
from workbench.scenario import parse_scenario

# Seconds measured on one H200 SXM with PyTorch 2.11.0+cu130 by the team's kernel sweep
# (2026-12-04; median of 10 CUDA-event timings): bf16 a @ b with a (m x k), keyed (m, n, k).
# The sweep did not measure (n, k) = (14336, 14336): those two are filled at 720 TFLOP/s.
SWEEP_BF16 = {(2048, 4096, 4096): 0.1260479986667633e-3,
              (2048, 14336, 4096): 0.36579200625419617e-3,
              (2048, 4096, 14336): 0.3516800105571747e-3, (8192, 4096, 4096): 0.4413119852542877e-3,
              (8192, 14336, 4096): 1.3779840469360352e-3,
              (8192, 4096, 14336): 1.350111961364746e-3}
SWEEP_FP8 = {(2048, 4096, 4096): 0.08659200370311737e-3, (2048, 14336, 4096): 0.213919997215271e-3,
             (2048, 4096, 14336): 0.2126079946756363e-3, (8192, 4096, 4096): 0.28566399216651917e-3,
             (8192, 14336, 4096): 0.864736020565033e-3,
             (8192, 4096, 14336): 0.8250240087509155e-3}
GRID = {"m": [2048, 8192], "n": [4096, 14336], "k": [4096, 14336]}
# The sweep's causal SDPA rows (flash on Hopper), head dim 128: seconds forward, forward+backward.
ATTENTION = [
    {"batch": 4, "seq": 8192, "heads": 32, "kv_heads": 8, "head_dim": 128, "value_dim": 128,
     "fwd_s": 3.5568320751190186e-3, "fwd_bwd_s": 15.245408058166504e-3},
    {"batch": 16, "seq": 2048, "heads": 32, "kv_heads": 8, "head_dim": 128, "value_dim": 128,
     "fwd_s": 1.0847680568695068e-3, "fwd_bwd_s": 4.668831825256348e-3},
    {"batch": 4, "seq": 8192, "heads": 8, "kv_heads": 8, "head_dim": 128, "value_dim": 128,
     "fwd_s": 0.9639999866485596e-3, "fwd_bwd_s": 3.700000047683716e-3},
]
# Llama 3 8B at 8192 tokens per microbatch, TP 1: the shapes block_costs times (qkv, proj,
# gate+up, down, head). The sweep measured proj, down and the head (M 8192, K 4096, N 128256:
# 13.38 ms); qkv and gate+up are filled at 700 TFLOP/s.
LLAMA_POINTS = [(8192, 6144, 4096, 2 * 8192 * 6144 * 4096 / 700e12),
                (8192, 4096, 4096, 0.4413119852542877e-3),
                (8192, 28672, 4096, 2 * 8192 * 28672 * 4096 / 700e12),
                (8192, 4096, 14336, 1.350111961364746e-3),
                (8192, 128256, 4096, 13.383711814880371e-3)]


@pytest.fixture(autouse=True)
def _profiles_in_tmp_path(calibration_folder):
    """Profiles these tests write to tmp_path are read from there."""


def _table(sweep: dict, rate: float) -> list[float]:
    return [sweep.get((m, n, k), 2.0 * m * n * k / rate) for m, n, k in
            gpu_mod.grid_shapes(GRID)]


def _profile(**changes) -> GpuProfile:
    base = dict(
        date="2026-12-05", host={"cpu": "test host", "cores": 16},
        gpu={"name": "NVIDIA H200", "capability": [9, 0], "sms": 132,
             "memory_bytes": 150_754_820_096, "count": 1, "driver": "580.95.05",
             "cuda": "13.0", "torch": "2.11.0+cu130", "cudnn": 91300},
        gemm_grid=GRID, gemm_seconds={"bf16": _table(SWEEP_BF16, 720e12),
                                      "fp8": _table(SWEEP_FP8, 1300e12)},
        hbm_gb_per_s=4150.0, attention_points=[dict(a) for a in ATTENTION],
        gemm_points=[{"m": m, "n": n, "k": k, "precision": "bf16", "seconds": s}
                     for m, n, k, s in LLAMA_POINTS],
        grouped_gemm=[{"tokens": 16384, "hidden": 4096, "expert_ffn": 14336, "experts": 8,
                       "grouped_s": 2.5140480995178223e-3, "dense_s": 2.954751968383789e-3}],
        source="workbench calibrate --quick on test-host")
    base.update(changes)
    return GpuProfile(**base)


def _scenario(path, **training) -> object:
    return parse_scenario({"hardware": {"gpu": f"calibration:{path}", "gpus_per_node": 8},
                           "model": "llama3-8b", "parallel": {"dp": 8, "zero": 3},
                           "training": {"seq_len": 8192, "micro_batch": 1, "global_batch": 64,
                                        "precision": "bf16", **training}})


# -- the file ------------------------------------------------------------------------------

def test_a_gpu_profile_round_trips_and_cpu_profiles_still_load(tmp_path):
    p = _profile(collectives={"nccl": {"all_reduce": {2: (2e-5, 3e-12)}}})
    path = p.save(tmp_path / "gpu.json")
    doc = json.loads(path.read_text())
    assert doc["format"] == 2 and doc["device"] == "cuda"
    back = load_profile(path)
    assert isinstance(back, GpuProfile) and back == p
    # the committed CPU profile (format 1, no device key) loads as before
    (committed,) = sorted((ROOT / "calibrations").glob("amd-epyc-2core-*.json"))
    assert "device" not in json.loads(committed.read_text())
    cpu = load_profile(committed)
    assert isinstance(cpu, MachineProfile) and cpu.device == "cpu"
    # a CPU profile written now says its device, and reads back equal
    again = load_profile(cpu.save(tmp_path / "cpu.json"))
    assert json.loads((tmp_path / "cpu.json").read_text())["device"] == "cpu"
    assert again == cpu


def test_a_calibration_file_is_a_gpu_record_of_the_device(tmp_path):
    from workbench.units import hbm_bytes

    path = _profile().save(tmp_path / "gpu.json")
    s = _scenario(path)
    g = s.hardware.gpu
    assert g.name == "NVIDIA H200 (calibrated 2026-12-05)"
    assert hbm_bytes(g.memory_gb) == pytest.approx(150_754_820_096, rel=1e-12)
    assert g.hbm_gb_per_s == 4150.0
    # the datasheet peaks, power and form factor of the matching catalog entry (for MFU)
    assert (g.bf16_tflops, g.fp8_tflops, g.power_w, g.arch, g.form_factor) == (
        989.5, 1979.0, 700, "hopper", "sxm")
    assert "catalog entry h200-sxm" in g.source and str(path) in g.source
    assert s.hardware.intra_node.name.lower().startswith("nvlink")
    # a device no catalog entry matches: the best measured rates, the capability's arch, 0 W
    other = gpu_record(_profile(gpu={**_profile().gpu, "name": "NVIDIA Foo 9000",
                                     "capability": [12, 0]}))
    p = _profile()
    assert other.bf16_tflops == pytest.approx(p.peak_flops("bf16") / 1e12)
    assert other.fp8_tflops == pytest.approx(p.peak_flops("fp8") / 1e12)
    assert (other.arch, other.power_w, other.form_factor) == ("blackwell", 0.0, "pcie")
    assert "no catalog entry matches" in other.source


def test_arch_follows_the_compute_capability():
    assert [arch_of_capability(*cc) for cc in ((8, 0), (8, 6), (8, 9), (9, 0), (10, 0),
                                                (12, 0), (7, 0))] == [
        "ampere", "ampere", "ada", "hopper", "blackwell", "blackwell", ""]


# -- what the estimator reads ---------------------------------------------------------------

def test_gemm_time_of_a_measured_shape_is_the_tables_seconds(tmp_path):
    gpu = _scenario(_profile().save(tmp_path / "gpu.json")).hardware.gpu
    bf16, fp8 = _profile().gemm_seconds["bf16"], _profile().gemm_seconds["fp8"]
    for i, (m, n, k) in enumerate(gpu_mod.grid_shapes(GRID)):
        assert eff.gemm_time(m, n, k, gpu, "bf16") == bf16[i]
        assert eff.gemm_time(m, n, k, gpu, "fp16") == bf16[i]
        assert eff.gemm_time(m, n, k, gpu, "fp8") == fp8[i]
        assert eff.gemm_time(m, n, k, gpu, "fp32") == 2 * bf16[i]     # TF32: half the rate
        assert eff.gemm_time(m, n, k, gpu, "bf16", count=3) == 3 * bf16[i]
    for m, n, k, seconds in LLAMA_POINTS:                  # a scenario's exact shapes
        assert eff.gemm_time(m, n, k, gpu, "bf16") == seconds
    # between grid points: log-linear, so a power law in m is exact at the geometric mean
    t2, t8 = SWEEP_BF16[(2048, 4096, 4096)], SWEEP_BF16[(8192, 4096, 4096)]
    assert eff.gemm_time(4096, 4096, 4096, gpu, "bf16") == pytest.approx(math.sqrt(t2 * t8))
    # outside the grid: the nearest grid shape's seconds times the FLOP ratio
    assert eff.gemm_time(16384, 4096, 4096, gpu, "bf16") == pytest.approx(2 * t8)
    # no fp8 table (a GPU before compute capability 8.9): fp8 reads bf16's
    no_fp8 = _profile(gemm_seconds={"bf16": bf16})
    assert no_fp8.gemm(2048, 4096, 4096, "fp8") == t2
    assert _profile().peak_flops("bf16") == pytest.approx(max(
        2.0 * m * n * k / t for (m, n, k), t in zip(gpu_mod.grid_shapes(GRID), bf16)))


def test_attention_reads_the_nearest_measured_point(tmp_path):
    from workbench.estimate.model.attention import AttentionKernel

    gpu = _scenario(_profile().save(tmp_path / "gpu.json")).hardware.gpu
    point = ATTENTION[0]
    flops = causal_attention_flops(4, 8192, 32, 128)
    exact = AttentionKernel(4, 8192, 32, 8, 128, 128)
    assert eff.attention_time(flops, gpu, "fwd", shape=exact) == pytest.approx(
        point["fwd_s"], rel=1e-12)
    assert eff.attention_time(2.5 * flops, gpu, "bwd", shape=exact) == pytest.approx(
        point["fwd_bwd_s"] - point["fwd_s"], rel=1e-12)
    # the same point answers a batch of one of that shape, at its rate
    one = AttentionKernel(1, 8192, 32, 8, 128, 128)
    assert eff.attention_time(flops / 4, gpu, "fwd", shape=one) == pytest.approx(
        point["fwd_s"] / 4, rel=1e-12)
    # 8 heads of 8 KV heads is another measured point; 4096 tokens the nearer of 2048 / 8192
    assert gpu.profile.nearest_attention(AttentionKernel(4, 8192, 8, 8, 128, 128)) == ATTENTION[2]
    assert gpu.profile.nearest_attention(AttentionKernel(1, 3000, 32, 8, 128, 128)) == ATTENTION[1]
    fwd_rate, bwd_rate = attention_rates(point)
    assert fwd_rate == pytest.approx(causal_attention_flops(4, 8192, 32, 128) / point["fwd_s"])
    assert bwd_rate == pytest.approx(2.5 * fwd_rate * point["fwd_s"]
                                     / (point["fwd_bwd_s"] - point["fwd_s"]))


def test_memory_bound_work_runs_at_the_measured_bandwidth_with_no_eager_costs(tmp_path):
    s = _scenario(_profile().save(tmp_path / "gpu.json"))
    gpu, hw = s.hardware.gpu, s.hardware
    assert eff.memory_time(3e9, gpu, kernels=12) == 3e9 / 4150e9
    assert eff.runtime_ops(gpu, 100, 200, 300) == 0.0
    assert eff.wrapper_time(gpu, s.parallel, "layer") == (0.0, 0.0)
    assert eff.overlap(hw) == 1.0
    assert eff.on_hardware(hw).profile is gpu.profile


def test_an_estimate_on_the_profile_times_its_blocks_from_the_measurements(tmp_path):
    from workbench.estimate import estimate
    from workbench.estimate.time.block_costs import block_costs

    s = _scenario(_profile().save(tmp_path / "gpu.json"))       # generic engine: factors 1
    blocks = block_costs(s)
    layer_gemms = sum(t for m, n, k, t in LLAMA_POINTS[:4])
    assert blocks["dense"].wgrad == pytest.approx(layer_gemms, rel=1e-12)
    assert blocks["head"].wgrad == pytest.approx(LLAMA_POINTS[4][3], rel=1e-12)
    est = estimate(s)
    assert math.isfinite(est.time.step) and est.time.step > 0
    # a calibrated GPU sits in the scenario's node: build checks and host power apply
    assert est.checks and est.run.host_power_w > 0 and est.run.gpu_power_w > 0
    # the engine's conventions apply too (only a CPU machine's profile drops them)
    from workbench.estimate.time.engine_terms import RunConventions, conventions

    tt = _scenario(tmp_path / "gpu.json", engine="torchtitan")
    assert conventions(tt) != RunConventions()


def test_collectives_use_the_nccl_fits_inside_a_node_else_the_links(tmp_path):
    import numpy as np

    from workbench.estimate.time.collectives import link_time, collective_time
    from workbench.estimate.placement import Span

    hw = _scenario(_profile().save(tmp_path / "gpu.json")).hardware
    # a group across two nodes needs the NICs a one-node scenario does not have
    hw = dataclasses.replace(hw, inter_node=dataclasses.replace(hw.inter_node, nics_per_node=8))
    span2 = Span(2, 2, 1)
    assert collective_time("all_reduce", 1e8, span2, hw) == link_time("all_reduce", 1e8,
                                                                       span2, hw)
    fitted = _profile(collectives={"nccl": {"all_reduce": {2: (2e-5, 3e-12)}}})
    hw = dataclasses.replace(hw, gpu=dataclasses.replace(hw.gpu, profile=fitted))
    assert collective_time("all_reduce", 1e8, span2, hw) == 2e-5 + 3e-12 * 1e8
    across = Span(2, 1, 2)                                  # one rank in each of two nodes
    assert collective_time("all_reduce", 1e8, across, hw) == link_time("all_reduce", 1e8,
                                                                        across, hw)
    both = Span(np.array([2, 2]), np.array([2, 1]), np.array([1, 2]))
    got = collective_time("all_reduce", np.array([1e8, 1e8]), both, hw)
    assert list(got) == [2e-5 + 3e-12 * 1e8, link_time("all_reduce", 1e8, across, hw)]


def test_a_cpu_profile_measured_at_world_size_1_times_collectives_on_the_links(tmp_path):
    from tests.test_calibrate import _calibrated_scenario, _profile as cpu_profile
    from workbench.calibrate.command import SKIPPED, summary
    from workbench.estimate import estimate
    from workbench.estimate.time.collectives import link_time, collective_time
    from workbench.estimate.placement import Span

    p = cpu_profile(collectives={}, in_loop_s={})
    s = _calibrated_scenario(p.save(tmp_path / "cpu.json"), dp=2)
    span = Span(2, 2, 1)
    assert collective_time("all_reduce", 1e6, span, s.hardware) == link_time(
        "all_reduce", 1e6, span, s.hardware)
    assert estimate(s).time.step > 0
    assert SKIPPED in summary(p)


# -- the measurement's pure parts ----------------------------------------------------------

def test_the_grid_plan_and_flop_counts():
    assert len(gpu_mod.grid_shapes(gpu_mod.QUICK_GRID)) == 64
    assert len(gpu_mod.grid_shapes(gpu_mod.FULL_GRID)) == 216
    assert gpu_mod.grid_shapes(GRID)[:3] == [(2048, 4096, 4096), (2048, 4096, 14336),
                                             (2048, 14336, 4096)]
    for grid in (gpu_mod.QUICK_GRID, gpu_mod.FULL_GRID):   # LLM training shapes, ascending
        assert grid["m"][0] == 512 and grid["m"][-1] == 16384
        assert grid["n"][0] == grid["k"][0] == 1024 and grid["n"][-1] == grid["k"][-1] == 28672
        assert all(sorted(v) == v for v in grid.values())
    assert gemm_flops(8192, 4096, 14336) == 2.0 * 8192 * 4096 * 14336
    quick = gpu_mod.make_plan(True)
    assert quick.quick and len(quick.attention) == 6 and len(quick.grouped) == 2
    assert all(b * s == gpu_mod.ATTENTION_TOKENS["quick"] for b, s, *_ in quick.attention)
    assert gpu_mod.make_plan(False).timing["repeats"] == 10
    # a scenario's shapes: rounded, once each, in fp8 as well when it trains in fp8
    plan = gpu_mod.make_plan(True, [(8192.0, 6144.0, 4096.0, "fp8"), (8192, 6144, 4096, "bf16"),
                                    (2560.4, 4096, 4096, "bf16")],
                             [type("K", (), dict(batch=1, seq=8192, heads=32, kv_heads=8,
                                                 head_dim=128, value_dim=128))()])
    assert plan.gemm_shapes == ((8192, 6144, 4096, "bf16"), (8192, 6144, 4096, "fp8"),
                                (2560, 4096, 4096, "bf16"))
    assert plan.attention[-1] == (1, 8192, 32, 8, 128, 128)


def test_attention_flops_follow_the_estimators_convention():
    from workbench.catalog import CATALOGS
    from workbench.estimate.model.attention import attention_kernel
    from workbench.estimate.model.flops import layer_flops

    m = CATALOGS["model"]["llama3-8b"]
    k = attention_kernel(m, micro_batch=2, seq_len=8192)
    assert k == (2, 8192, 32, 8, 128, 128)
    causal_forward = layer_flops(m, 2 * 8192, 8192, False).attention * 0.5   # step_time.py
    assert causal_attention_flops(k.batch, k.seq, k.heads, k.head_dim) == causal_forward
    assert attention_kernel(m, 1, 8192, t=4, cp=2) == (1, 4096, 8, 2, 128, 128)
    assert attention_kernel(m, 1, 8192, t=16) == (1, 8192, 2, 1, 128, 128)


def test_gemm_tables_keep_complete_grids_and_need_bf16():
    shapes = gpu_mod.grid_shapes(GRID)
    full = {s: 1e-3 for s in shapes}
    tables, notes = gpu_mod.gemm_tables(GRID, {"bf16": full, "fp8": {**full, shapes[3]: None}})
    assert tables == {"bf16": [1e-3] * 8} and len(notes) == 1 and "fp8" in notes[0]
    with pytest.raises(RuntimeError, match="bf16 GEMM grid"):
        gpu_mod.gemm_tables(GRID, {"bf16": {s: 1e-3 for s in shapes[:-1]}})


def _raw() -> dict:
    p = _profile()
    shapes = gpu_mod.grid_shapes(GRID)
    return {"gpu": p.gpu, "gemm": {t: dict(zip(shapes, v)) for t, v in p.gemm_seconds.items()},
            "gemm_points": p.gemm_points, "attention_points": p.attention_points,
            "grouped_gemm": p.grouped_gemm, "hbm_gb_per_s": p.hbm_gb_per_s,
            "errors": ["grouped GEMM 128 experts 2048x768: RuntimeError: x"], "wall_s": 21.5}


def test_the_results_assemble_into_the_profile():
    from workbench.calibrate.measure_gpu import assemble

    plan = dataclasses.replace(gpu_mod.make_plan(True), grid=GRID)
    raw = _raw()
    raw["gemm"]["fp8"].pop((8192, 14336, 14336))
    p = assemble(raw, plan, {"cpu": "test host"}, "2026-12-05", "test",
                 {"all_reduce": {2: (2e-5, 3e-12)}})
    assert p.gemm_seconds == {"bf16": _profile().gemm_seconds["bf16"]}
    assert p.errors[0].startswith("grouped GEMM") and "fp8 GEMM table left out" in p.errors[1]
    assert p.collectives == {"nccl": {"all_reduce": {2: (2e-5, 3e-12)}}}
    assert (p.wall_s, p.hbm_gb_per_s, p.attention_points) == (21.5, 4150.0, ATTENTION)
    assert assemble(_raw(), plan, {}, "d", "s").collectives == {}


def test_the_gpu_process_reports_its_results_through_the_queue(monkeypatch):
    """``measure_rank`` (the spawned body) and ``run_gpu_process`` (the parent) agree on the
    events, run in this process with ``measure_gpu`` stubbed."""
    from workbench.calibrate import measure_gpu, processes

    class Queue(list):
        put = list.append

        def close(self):
            pass

        def join_thread(self):
            pass

    def fake(plan, say, step):
        say("GEMM grid")
        step("GEMM bf16 2048x4096x4096")
        return _raw()

    monkeypatch.setattr(gpu_mod, "measure_gpu", fake)

    def run_here(target, rank_args, what, stall_s, method, on_event):
        assert method == "spawn"
        q = Queue()
        (entry,) = rank_args(0)
        target(*entry, q)
        events = [e for e in q if e["type"] not in ("heartbeat", "done")]
        for e in events:
            on_event(e)
        return events

    monkeypatch.setattr(processes, "run_processes", run_here)
    seen = []
    raw = measure_gpu.run_gpu_process(gpu_mod.make_plan(True), seen.append)
    assert seen == [{"type": "phase", "what": "GPU: GEMM grid"}]
    assert raw["gemm"]["bf16"] == _raw()["gemm"]["bf16"]


@pytest.mark.slow
def test_the_gpu_process_is_spawned_and_its_failure_is_one_line():
    """On this CPU-only torch the spawned process fails at CUDA's start: the plan crossed the
    spawn, the child imported the measuring code, and the failure comes back as one line. In
    a process of its own: spawn starts multiprocessing's resource tracker, which lives as long
    as its parent (and other tests count this one's children)."""
    code = ("from workbench.calibrate.gpu import make_plan\n"
            "from workbench.calibrate.measure_gpu import run_gpu_process\n"
            "try:\n    run_gpu_process(make_plan(True))\n"
            "except RuntimeError as exc:\n    print(exc)\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    (line,) = run.stdout.strip().splitlines()
    assert line.startswith("GPU measurement: rank 0 failed while CUDA start"), line


def test_scenario_shapes_are_what_the_estimator_times():
    from workbench.calibrate.scenario_shapes import scenario_shapes
    from workbench.scenario import load_scenario

    s = load_scenario(ROOT / "examples/llama3-8b-8xh100.yaml")
    gemms, kernels = scenario_shapes(s)
    assert [g[:3] for g in gemms] == sorted((float(m), float(n), float(k))
                                            for m, n, k, _ in LLAMA_POINTS)
    assert {g[3] for g in gemms} == {"bf16"}
    assert kernels == [(1, 8192, 32, 8, 128, 128)]
    tp = dataclasses.replace(s, parallel=dataclasses.replace(s.parallel, tp=2, dp=4))
    gemms, kernels = scenario_shapes(tp)
    assert (8192.0, 3072.0, 4096.0, "bf16") in gemms and kernels[0].heads == 16


# -- detection and the command --------------------------------------------------------------

def test_a_machine_without_cuda_is_not_a_gpu_machine(monkeypatch):
    import types

    import torch

    from workbench import rank_devices

    def initialises(*a):
        raise AssertionError("CUDA initialised in the parent")

    # cudaGetDeviceCount (cuInit) is what must never run in a parent that forks
    monkeypatch.setattr(torch._C, "_cuda_getDeviceCount", initialises, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", initialises)
    uuids = ["GPU-aaaa", "GPU-bbbb", "GPU-cccc"]
    fake = types.SimpleNamespace(          # NVML that sees three H200s
        nvmlInit=lambda: None, nvmlDeviceGetCount=lambda: 3,
        nvmlDeviceGetHandleByIndex=lambda i: i, nvmlDeviceGetName=lambda h: f"NVIDIA H200 #{h}",
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(total=150_754_820_096))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(torch.cuda, "_raw_device_uuid_nvml", lambda: uuids)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(torch.version, "cuda", None)
    assert rank_devices.visible_gpus() == []          # NVML sees GPUs, torch has no CUDA
    assert rank_devices.cuda_gpus() == 0
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    names = lambda: [n for n, _ in rank_devices.visible_gpus()]   # noqa: E731
    assert names() == ["NVIDIA H200 #0", "NVIDIA H200 #1", "NVIDIA H200 #2"]
    assert rank_devices.cuda_gpus() == 3
    for visible, want in (("2,0", [2, 0]), ("", []), ("1,-1,2", [1]), ("1,7,2", [1]),
                          ("GPU-cccc,GPU-aaaa", [2, 0])):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        assert names() == [f"NVIDIA H200 #{i}" for i in want], visible


def test_world_sizes_on_cpu_and_gpu_machines():
    from workbench.calibrate.command import world_sizes

    assert world_sizes(None, 0) == (2, 4, 8)
    assert world_sizes(None, 1) == (1,) and world_sizes(None, 4) == (2, 4)
    assert world_sizes("1", 0) == (1,) and world_sizes("1,2", 2) == (1, 2)
    for value, gpus, word in (("0", 0, ">= 1"), ("4", 2, "one GPU per rank"), ("x", 0, "list")):
        with pytest.raises(ScenarioError) as err:
            world_sizes(value, gpus)
        assert err.value.problems[0].path == "--world-size" and word in str(err.value)


def _args(tmp_path, **kw) -> argparse.Namespace:
    return argparse.Namespace(**{"out": str(tmp_path / "p.json"), "quick": True,
                                 "world_size": "1", "scenario": None, **kw})


def test_the_command_measures_the_gpu_when_there_is_one(tmp_path, monkeypatch, capsys):
    from workbench.calibrate import command, measure, measure_gpu
    from workbench.calibrate.command import SKIPPED

    calls = {}
    monkeypatch.setattr(rank_devices, "visible_gpus", lambda: [("NVIDIA H200", 1)])
    monkeypatch.setattr(measure, "measure_profile", lambda **kw: pytest.fail("CPU measured"))

    def gpu(**kw):
        calls.update(kw)
        return _profile()

    monkeypatch.setattr(measure_gpu, "measure_gpu_profile", gpu)
    args = _args(tmp_path, scenario=str(ROOT / "examples/llama3-8b-8xh100.yaml"))
    assert command.run(args) == 0
    out = capsys.readouterr().out
    assert SKIPPED in out and "catalog entry h200-sxm" in out and "HBM: 4,150 GB/s" in out
    assert calls["world_sizes"] == (1,) and calls["scenario"].model.name
    assert isinstance(load_profile(args.out), GpuProfile)
    assert command.run(_args(tmp_path, world_size="2")) == 2     # one GPU: nccl needs two


def test_the_command_measures_the_cpu_without_cuda(tmp_path, monkeypatch, capsys):
    from tests.test_calibrate import _profile as cpu_profile
    from workbench.calibrate import command, measure, measure_gpu
    from workbench.calibrate.command import SKIPPED

    calls = {}
    monkeypatch.setattr(measure_gpu, "measure_gpu_profile",
                        lambda **kw: pytest.fail("GPU measured"))

    def cpu(**kw):
        calls.update(kw)
        return cpu_profile(collectives={}, in_loop_s={})

    monkeypatch.setattr(measure, "measure_profile", cpu)
    assert command.run(_args(tmp_path)) == 0
    assert SKIPPED in capsys.readouterr().out
    assert calls["world_sizes"] == (1,) and calls["backend"] == "gloo"


@pytest.mark.slow
def test_calibrate_at_world_size_1_on_this_cpu_writes_a_profile_without_collectives(tmp_path):
    from workbench.calibrate.command import SKIPPED

    out = tmp_path / "one.json"
    run = subprocess.run([sys.executable, "-m", "workbench", "calibrate", "--quick",
                          "--world-size", "1", "--out", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert SKIPPED in run.stdout and "written to" in run.stdout
    p = load_profile(out)
    assert isinstance(p, MachineProfile) and p.collectives == {} and p.in_loop_s == {}
    assert p.op_forward_s > 0 and all(t > 0 for t in p.gemm_seconds["fp32"])


def test_cuda_seconds_warms_up_repeats_and_bounds_long_kernels(monkeypatch):
    """The timing loop against a fake CUDA clock: every call of ``fn`` advances it by ``per``."""
    import torch

    clock = {"t": 0.0, "calls": 0}

    class Event:
        def __init__(self, enable_timing=False):
            self.at = None

        def record(self):
            self.at = clock["t"]

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return (end.at - self.at) * 1e3            # milliseconds, as CUDA events

    monkeypatch.setattr(torch.cuda, "Event", Event)

    def timed(per: float) -> tuple[float, int]:
        clock["calls"] = 0

        def fn():
            clock["t"] += per
            clock["calls"] += 1

        return gpu_mod.cuda_seconds(fn, gpu_mod.TIMING["quick"]), clock["calls"]

    # 2 ms a call: 2 warm-ups (one timed), then 5 repeats of one call
    assert timed(2e-3) == (pytest.approx(2e-3), 7)
    # 10 us a call: repeats of 100 calls (1 ms each)
    assert timed(1e-5) == (pytest.approx(1e-5), 2 + 5 * 100)
    # 0.4 s a call, over a third of the 0.5 s budget: one repeat
    assert timed(0.4) == (pytest.approx(0.4), 3)


def test_the_committed_h200_profile_is_a_scenarios_gpu_and_answers_from_its_tables():
    """calibrations/ keeps the quick profile `benchmarks/gpu_check.py` measured on a real H200
    (2026-12-04): it loads as a GPU profile, becomes the H200's record, and the estimator's
    GEMM time for a measured grid shape is the measured seconds."""
    from workbench.hardware.calibration import load_profile
    from workbench.estimate.time import kernels as efficiency
    from workbench.scenario import load_scenario

    path = ROOT / "calibrations/nvidia-h200-2026-12-04.json"
    p = load_profile(path)
    assert p.device == "cuda" and p.gpu["name"] == "NVIDIA H200" and p.gpu["sms"] == 132
    doc = json.loads(path.read_text())
    grid, table = doc["gemm_grid"], doc["gemm_seconds"]["bf16"]
    m, n, k = grid["m"][1], grid["n"][2], grid["k"][3]
    i = (grid["m"].index(m) * len(grid["n"]) + grid["n"].index(n)) * len(grid["k"]) + \
        grid["k"].index(k)
    s = load_scenario(ROOT / "examples/brief-8xh200-70b.yaml",
                      [f"hardware.gpu=calibration:{path}"])
    gpu = s.hardware.gpu
    assert gpu.arch == "hopper" and gpu.bf16_tflops == 989.5
    assert efficiency.gemm_time(m, n, k, gpu, "bf16") == pytest.approx(table[i], rel=1e-12)

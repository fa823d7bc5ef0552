"""The GPU path of trials, exercised on the CPU: device and precision chosen in one place
(``trial/device.py``), the slice of a model at its real widths (``trial/slice.py``), the slice
measured against its estimate (``proof/slice_compare.py``), the planned step time a GPU trial
exports, and a clear refusal of nccl on a machine without CUDA. The CUDA branches themselves run
in ``benchmarks/gpu_check.py`` on a GPU machine."""
from __future__ import annotations

import dataclasses
import subprocess
import sys
import warnings

import pytest
import torch

from workbench.catalog import CATALOGS
from workbench.catalog.gpus import catalog_key_for_device
from workbench.errors import ScenarioError
from workbench.scenario import load_scenario, parse_scenario


def _scenario(model: str = "tiny-dense", training: dict | None = None, **parallel):
    world = (parallel.get("dp", 1) * parallel.get("tp", 1) * parallel.get("pp", 1)
             * parallel.get("cp", 1))
    return parse_scenario({"hardware": {"gpu": "h200-sxm", "gpus_per_node": world},
                           "model": model, "parallel": parallel,
                           "training": {"seq_len": 256, "global_batch": 16,
                                        **(training or {})}})


@pytest.mark.parametrize("name, key", [
    ("NVIDIA H200", "h200-sxm"), ("NVIDIA H200 NVL", "h200-nvl"),
    ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"), ("nvidia  b200", "b200"),
    ("NVIDIA H100 NVL", None), ("NVIDIA GeForce RTX 3090", None)])
def test_the_drivers_gpu_name_finds_its_catalog_entry_or_none(name, key):
    assert catalog_key_for_device(name) == key


def test_asking_for_nccl_without_cuda_is_one_clear_line():
    import os

    p = subprocess.run([sys.executable, "-m", "workbench", "trial",
                        "examples/tiny-trial-4d.yaml", "--world-size", "1", "--backend", "nccl"],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})   # no GPU, anywhere
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr
    assert "--backend" in lines[0] and "nccl needs one CUDA GPU per rank: 1 ranks, 0 GPUs here" \
        in lines[0] and "use gloo" in lines[0]


@pytest.mark.parametrize("parallel, training, dtype, fsdp, label", [
    # torchtitan's maybe_enable_amp: FSDP2 casts; a single device or DDP runs autocast; TP or PP
    # without FSDP runs fp32
    ({"dp": 1, "zero": 3}, {}, torch.bfloat16, True, "bf16 (FSDP2 MixedPrecisionPolicy"),
    ({"dp": 2, "zero": 2}, {}, torch.bfloat16, True, "bf16 (FSDP2 MixedPrecisionPolicy"),
    ({"dp": 2, "zero": 0}, {}, torch.bfloat16, False, "bf16 (torch.autocast"),
    ({"dp": 1, "tp": 2, "zero": 0}, {}, torch.float32, False, "fp32"),
    ({"dp": 1, "zero": 3}, {"precision": "fp32"}, torch.float32, True, "fp32"),
])
def test_a_gpu_rank_runs_mixed_precision_as_torchtitan_does(monkeypatch, parallel, training,
                                                            dtype, fsdp, label):
    import workbench.trial.device as device

    monkeypatch.setattr(device, "rank_device", lambda backend, rank: torch.device("cuda", 0))
    c = device.compute_for(_scenario(training=training, **parallel), "nccl", 0)
    assert (c.device.type, c.dtype, c.fsdp) == ("cuda", dtype, fsdp)
    assert c.label.startswith(label)
    policy = c.mp_policy()
    if dtype == torch.bfloat16 and fsdp:
        assert (policy.param_dtype, policy.reduce_dtype) == (torch.bfloat16, torch.float32)
        assert c.autocast().__class__.__name__ == "nullcontext"
    else:
        assert policy is None
    if dtype == torch.bfloat16 and not fsdp:
        with warnings.catch_warnings():       # "CUDA is not available": none on a CPU machine
            warnings.simplefilter("ignore")
            assert isinstance(c.autocast(), torch.autocast)


def test_a_cpu_rank_computes_in_fp32_on_the_cpu():
    from workbench.trial.device import compute_for, memory_figures

    c = compute_for(_scenario(dp=2, zero=3), "gloo", 1)
    assert (str(c.device), c.dtype, c.fsdp, c.label) == ("cpu", torch.float32, True, "fp32")
    assert c.mp_policy() is None and memory_figures(c) == {}


def test_a_slice_keeps_the_real_widths_and_takes_as_many_layers_as_fit():
    from workbench.estimate.single import estimate_memory
    from workbench.trial import sub_layout
    from workbench.trial.slice import FILL, slice_scenario

    s = sub_layout(load_scenario("examples/llama3-8b-8xh100.yaml"), 1)
    capacity = CATALOGS["gpu"]["h200-sxm"].memory_gb * 1e9
    cut = slice_scenario(s, "NVIDIA H200", capacity)
    m, full = cut.scenario.model, s.model
    assert (m.hidden, m.heads, m.kv_heads, m.ffn_hidden, m.vocab) == (
        full.hidden, full.heads, full.kv_heads, full.ffn_hidden, full.vocab)
    tr = cut.scenario.training
    assert (tr.seq_len, tr.micro_batch, tr.precision, tr.recompute, tr.engine) == (
        8192, 1, "bf16", "none", "torchtitan")
    assert cut.scenario.hardware.gpu is CATALOGS["gpu"]["h200-sxm"]
    assert 1 <= m.layers < full.layers
    # the largest number of layers whose nvidia-smi estimate stays under FILL x capacity
    assert estimate_memory(cut.scenario).per_gpu.device <= FILL * capacity
    more = dataclasses.replace(cut.scenario, model=dataclasses.replace(m, layers=m.layers + 1))
    assert estimate_memory(more).per_gpu.device > FILL * capacity
    assert any("recompute selective is not run" in n for n in cut.notes)
    assert any(f"{m.layers} of the model's 32 layers" in n for n in cut.notes)


def test_a_slice_that_cannot_hold_one_block_is_refused_naming_the_field():
    from workbench.trial import sub_layout
    from workbench.trial.slice import slice_scenario

    s = sub_layout(load_scenario("examples/llama3-8b-8xh100.yaml"), 1)
    with pytest.raises(ScenarioError) as err:
        slice_scenario(s, "NVIDIA H200", 8e9)
    assert "trial.world_size" in err.value.one_line() and "one block per pipeline chunk" in \
        err.value.one_line()


def test_an_unknown_gpu_is_estimated_as_the_scenarios_and_says_so():
    from workbench.trial import sub_layout
    from workbench.trial.slice import slice_scenario

    cut = slice_scenario(sub_layout(_scenario(dp=1), 1), "Some Future GPU", 80e9)
    assert cut.scenario.hardware.gpu is CATALOGS["gpu"]["h200-sxm"]
    assert any("Some Future GPU is not in the GPU catalogue" in n for n in cut.notes)


@pytest.mark.slow
def test_a_slice_trial_runs_through_the_same_code_on_the_cpu():
    """``--shape slice`` on gloo: the worker, the block timer, the result and the comparison of
    the GPU path, with the CPU as the device (no memory figures there)."""
    from workbench.proof.slice_compare import render_rows, slice_rows
    from workbench.trial import run_trial

    s = _scenario(dp=2, zero=3, training={"seq_len": 128, "global_batch": 4})
    result = run_trial(s, world_size=2, steps=4, backend="gloo", shape="slice")
    assert result.error is None and result.shape == "slice"
    m = result.scenario.model
    assert (m.hidden, m.vocab, result.scenario.training.seq_len) == (
        s.model.hidden, s.model.vocab, 128)
    doc = result.to_dict()
    assert doc["shape"] == "slice" and doc["device"] == "cpu" and doc["precision_ran"] == "fp32"
    steady = [e for e in result.steps if e["step"] >= 1 and not e["measured"]]
    assert steady and all(e["block_forward_s"] > 0 and e["block_backward_s"] > 0
                          and e["blocks_timed"] == m.layers for e in steady)
    rows = {r.component: r for r in slice_rows(result)}
    for name in ("block forward (one block, one microbatch)", "forward + backward",
                 "optimizer", "step"):
        assert rows[name].measured > 0 and rows[name].estimated > 0
    assert rows["memory allocated"].measured is None      # no allocator statistics on a CPU
    assert "memory device (nvidia-smi)" in render_rows(list(rows.values()))


def _planned_step(metrics) -> float | None:
    line = next((ln for ln in metrics.exposition().decode().splitlines()
                 if ln.startswith("workbench_planned_step_seconds ")), None)
    return None if line is None else float(line.split()[1])


def test_a_gpu_trial_exports_its_slices_planned_step_time_and_a_cpu_trial_none():
    from workbench.estimate import estimate
    from workbench.monitor.trial_metrics import TrialMetrics
    from workbench.trial import prepare, sub_layout
    from workbench.trial.slice import slice_scenario

    full = load_scenario("examples/llama3-8b-8xh100.yaml")
    cut = slice_scenario(sub_layout(full, 1), "NVIDIA H200", 141e9).scenario
    planned = _planned_step(TrialMetrics(cut, on_gpu=True).metrics)
    # the 18-layer slice on one H200, in torchtitan's conventions, without recompute: not the
    # full 8-GPU scenario's plan, not the scaled-down model's
    h200 = dataclasses.replace(full.hardware, gpu=CATALOGS["gpu"]["h200-sxm"])
    assert planned == pytest.approx(estimate(cut).time.step, rel=1e-12)
    assert planned != pytest.approx(estimate(dataclasses.replace(full, hardware=h200))
                                    .time.step, rel=0.05)
    assert 0.3 < planned < 2.0           # seconds per step of 18 Llama-8B blocks at 8k tokens
    assert _planned_step(TrialMetrics(prepare(full, 1)).metrics) in (None, 0.0)


def test_a_gpu_ranks_allocator_and_nvidia_smi_memory_reach_the_metrics():
    from workbench.monitor.trial_metrics import TrialMetrics
    from workbench.trial import prepare

    live = TrialMetrics(prepare(_scenario(dp=1), 1))
    live.observe({"type": "step", "rank": 0, "step": 1, "time": 0.5, "at": 1.0, "params": 10,
                  "grads": 10, "optimizer": 20, "activations_per_microbatch": 5,
                  "allocated": 1000, "reserved": 1200, "device_memory": 1700})
    text = live.metrics.exposition().decode()
    for kind, value in (("allocated", 1000), ("reserved", 1200), ("device", 1700),
                        ("peak", 45)):
        assert f'workbench_memory_bytes{{kind="{kind}",rank="0"}} {float(value)}' in text \
            or f'workbench_memory_bytes{{rank="0",kind="{kind}"}} {float(value)}' in text


def test_the_dashboard_shows_a_gpu_slices_rows_and_notes():
    """The Trial and Compare tabs render the H200 slice trial's own JSON (benchmarks/data)."""
    import json

    from tests.conftest import ROOT
    from widgets.charts.trial import comparison_html

    res = json.loads((ROOT / "benchmarks/data/h200-2026-12-04/trial-llama3-8b-8xh100.json")
                     .read_text())
    page = comparison_html(res)
    assert "On NVIDIA H200 (bf16 (FSDP2 MixedPrecisionPolicy" in page
    assert "<td>block forward (one block, one microbatch)</td><td>10.94 ms</td>" \
        "<td>6.09 ms</td><td>-44.4%</td>" in page
    assert "<td>memory device (nvidia-smi)</td><td>108.76 GiB</td><td>119.22 GiB</td>" in page
    assert "<li>recompute selective is not run: the slice keeps every activation</li>" in page
    small = {k: v for k, v in res.items() if k not in ("comparison", "notes")}
    assert "wb-slice" not in comparison_html(small)

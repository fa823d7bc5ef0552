"""Issue 45, on the CPU: the GPU paths of trials against a fake NVML (nvidia-ml-py's calls and
answers) and a fake ``torch.cuda`` (PyTorch's ``_parse_visible_devices`` as it is, NVML's UUIDs
as the driver lists them): memory from a step with optimizer state, a queue that counts GPUs,
the CUDA order the ranks get, MIG slices, and a note when NCCL traffic cannot be read."""
from __future__ import annotations

import dataclasses
import os
import types

import pytest
import torch

from workbench.scenario import parse_scenario


def _scenario(**parallel):
    world = parallel.get("dp", 1) * parallel.get("tp", 1) * parallel.get("pp", 1)
    return parse_scenario({"hardware": {"gpu": "h200-sxm", "gpus_per_node": world},
                           "model": "tiny-dense", "parallel": parallel,
                           "training": {"seq_len": 256, "global_batch": 16}})


# --- 1. memory from a step that has optimizer state -------------------------------------------

def _gpu_step(step: int, measured: bool, n_params: int) -> dict:
    """A GPU rank's step event as the worker reports it: the trial's own counters (params,
    grads, AdamW's two fp32 moments) and the allocator's peak of that step's forward and
    backward, which holds the optimizer state only once an earlier step created it."""
    params, grads, optimizer, acts = 4 * n_params, 4 * n_params, 8 * n_params, 1000
    state_in_peak = optimizer if step >= 1 else 0
    peak = params + grads + acts + state_in_peak
    return {"type": "step", "rank": 0, "step": step, "time": 0.1, "measured": measured,
            "params": params, "grads": grads, "optimizer": optimizer,
            "activations_per_microbatch": acts, "allocated": peak, "reserved": peak + 512,
            "device_memory": peak + 4096, "device_scope": "process"}


@pytest.mark.parametrize("steps", [2, 3, 5])
def test_memory_comes_from_a_step_with_optimizer_state_whatever_the_step_count(steps):
    from workbench.proof.slice_compare import _peak
    from workbench.trial.result import TrialResult, memory_steps

    n = 10_000
    counted = min(1, steps - 1)          # the worker's metered step
    events = [_gpu_step(i, i == counted, n) for i in range(steps)]
    result = TrialResult(scenario=_scenario(dp=1), backend="nccl", world_size=1, steps=events)
    m = result.ranks()[0]["measured"]
    assert m["optimizer"] == 8 * n                    # AdamW's state, the trial's own counter
    with_state = 4 * n + 4 * n + 8 * n + 1000
    assert m["allocated"] == with_state and m["reserved"] == with_state + 512
    assert m["device"] == with_state + 4096
    assert 0 not in m["memory_steps"] and m["memory_steps"] == list(range(1, steps))
    assert _peak(memory_steps(events), "allocated") == with_state


def test_a_one_step_trial_reports_its_only_step():
    from workbench.trial.result import TrialResult

    events = [_gpu_step(0, True, 10)]
    m = TrialResult(scenario=_scenario(dp=1), backend="nccl", world_size=1,
                    steps=events).ranks()[0]["measured"]
    assert m["memory_steps"] == [0] and m["allocated"] == events[0]["allocated"]


# --- a fake NVML (nvidia-ml-py's names and answers) and torch.cuda's NVML view ----------------

class FakeNVMLError(Exception):
    """pynvml.NVMLError: raised by a call the driver refuses (NVML_ERROR_NOT_FOUND here)."""


@dataclasses.dataclass
class FakeGPU:
    uuid: str                     # "GPU-..." or, for a MIG slice, "MIG-..."
    name: str
    total: int                    # bytes
    sms: int
    pci_index: int = -1           # NVML's index (PCI order); -1 for a MIG slice
    parent: FakeGPU | None = None  # a MIG slice's physical GPU


def fake_nvml(monkeypatch, gpus: list[FakeGPU], migs: list[FakeGPU] = ()) -> types.ModuleType:
    """Install a fake ``pynvml`` answering for ``gpus`` (NVML numbers them in PCI order) and the
    MIG slices ``migs`` (reached only by UUID, as NVML reaches a MIG device outside its
    parent's enumeration), and a CUDA build of torch whose NVML UUID list is theirs."""
    import sys

    m = types.ModuleType("pynvml")
    m.NVMLError = FakeNVMLError
    m.calls = []
    physical = sorted(gpus, key=lambda g: g.pci_index)
    m.nvmlInit = lambda: m.calls.append("init")
    m.nvmlDeviceGetCount = lambda: len(physical)
    m.nvmlDeviceGetHandleByIndex = lambda i: physical[i]

    def by_uuid(uuid):
        u = uuid.decode() if isinstance(uuid, bytes) else uuid
        for g in [*physical, *migs]:
            if g.uuid == u:
                return g
        raise FakeNVMLError("Not Found")

    m.nvmlDeviceGetHandleByUUID = by_uuid
    m.nvmlDeviceGetName = lambda h: h.name
    m.nvmlDeviceGetUUID = lambda h: h.uuid
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=h.total, used=h.total // 4,
                                                                free=h.total - h.total // 4)
    m.nvmlDeviceIsMigDeviceHandle = lambda h: int(h.parent is not None)
    m.nvmlDeviceGetAttributes = lambda h: types.SimpleNamespace(multiprocessorCount=h.sms,
                                                                 memorySizeMB=h.total >> 20)
    m.nvmlDeviceGetComputeRunningProcesses = lambda h: [
        types.SimpleNamespace(pid=os.getpid(), usedGpuMemory=h.total // 8)]
    m.nvmlSystemGetDriverVersion = lambda: "550.54"
    monkeypatch.setitem(sys.modules, "pynvml", m)
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.cuda, "_raw_device_uuid_nvml", lambda: [g.uuid for g in physical])
    return m


H100 = dict(name="NVIDIA H100 80GB HBM3", total=80 * 2**30, sms=132)


# --- 2. the queue admits GPU trials by the GPUs free ------------------------------------------

def test_two_nccl_trials_on_a_one_gpu_machine_do_not_run_at_once(monkeypatch, tmp_path):
    import time

    from workbench.trial.slots import slots_for

    fake_nvml(monkeypatch, [FakeGPU("GPU-aaaa", pci_index=0, **H100)])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("WORKBENCH_TRIAL_SLOTS", "4")       # cores for four CPU trials
    first = slots_for("nccl", 1, tmp_path)
    assert (first.gpu, first.n, first.need) == (True, 1, 1)
    held = first.acquire()
    deadline = time.monotonic() + 0.6
    seen = []
    second = slots_for("nccl", 1, tmp_path).acquire(
        keep_waiting=lambda: time.monotonic() < deadline, on_wait=lambda a, r: seen.append(r))
    assert second is None and seen == [1]                  # waited: the one GPU is busy
    cpu = slots_for("gloo", 2, tmp_path).acquire()
    assert cpu is not None                                 # CPU trials count cores, not GPUs
    cpu.release()
    held.release()
    again = slots_for("nccl", 1, tmp_path).acquire(keep_waiting=lambda: time.monotonic()
                                                   < deadline + 5)
    assert again is not None
    again.release()


def test_a_two_rank_nccl_trial_waits_for_two_free_gpus(monkeypatch, tmp_path):
    import time

    from workbench.trial.slots import slots_for

    fake_nvml(monkeypatch, [FakeGPU("GPU-aaaa", pci_index=0, **H100),
                            FakeGPU("GPU-bbbb", pci_index=1, **H100)])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    one = slots_for("nccl", 1, tmp_path).acquire()
    deadline = time.monotonic() + 0.6
    assert slots_for("nccl", 2, tmp_path).acquire(
        keep_waiting=lambda: time.monotonic() < deadline) is None
    other = slots_for("nccl", 1, tmp_path).acquire(keep_waiting=lambda: time.monotonic()
                                                   < deadline + 5)
    assert other is not None                               # the second GPU was free
    one.release(), other.release()
    both = slots_for("nccl", 2, tmp_path).acquire(keep_waiting=lambda: time.monotonic()
                                                  < deadline + 5)
    assert both is not None
    both.release()


# --- 3. CUDA's order made NVML's, and the measured GPU found by its UUID ----------------------

def _report_env(rank: int, queue) -> None:
    from workbench.process_runner import supervised_rank

    supervised_rank(rank, queue, lambda phase: queue.put(
        {"type": "env", "rank": rank, "order": os.environ.get("CUDA_DEVICE_ORDER")}))


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_nccl_ranks_start_with_cuda_in_pci_order_and_the_parent_keeps_its_own(monkeypatch,
                                                                              method):
    from workbench.process_runner import run_ranks
    from workbench.rank_devices import rank_environment

    monkeypatch.setenv("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    assert rank_environment("nccl") == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert rank_environment("gloo") == {}
    events = list(run_ranks(_report_env, lambda port: [(r,) for r in range(2)], method=method,
                            env=rank_environment("nccl"), stall_s=60))
    assert events[-1] == {"type": "result", "error": None}
    assert sorted((e["rank"], e["order"]) for e in events if e["type"] == "env") == [
        (0, "PCI_BUS_ID"), (1, "PCI_BUS_ID")]
    assert os.environ["CUDA_DEVICE_ORDER"] == "FASTEST_FIRST"      # restored in the parent


def test_the_trial_launcher_gives_nccl_ranks_the_pci_order(monkeypatch):
    import workbench.trial.launcher as launcher

    seen = {}

    def fake_run_ranks(target, rank_args, **kw):
        seen.update(kw)
        yield {"type": "result", "error": None}

    monkeypatch.setattr(launcher, "run_ranks", fake_run_ranks)
    list(launcher.stream(_scenario(dp=1), steps=1, backend="nccl"))
    assert seen["env"] == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"} and seen["method"] == "spawn"
    list(launcher.stream(_scenario(dp=1), steps=1, backend="gloo"))
    assert seen["env"] == {}


def test_a_ranks_memory_is_read_from_its_own_gpu_by_uuid_not_by_index(monkeypatch):
    """A mixed host: CUDA (fastest first) calls the H100 device 0, NVML's index 0 is the
    slower A100 at the lower PCI address. The rank's NVML handle is found by the UUID CUDA
    reports for its device."""
    import workbench.trial.device as device

    a100 = FakeGPU("GPU-a100-0000", "NVIDIA A100-SXM4-40GB", 40 * 2**30, 108, pci_index=0)
    h100 = FakeGPU("GPU-h100-1111", pci_index=1, **H100)
    nvml = fake_nvml(monkeypatch, [a100, h100])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: types.SimpleNamespace(
        uuid="h100-1111", name=h100.name))          # CUDA's uuid: no GPU- prefix
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda d: 10)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda d: 20)
    device._nvml_handle.cache_clear()
    c = device.Compute(device=torch.device("cuda", 0), dtype=torch.bfloat16, fsdp=True)
    figures = device.memory_figures(c)
    assert figures["device_memory"] == h100.total // 8 and figures["device_scope"] == "process"
    device.memory_figures(c)
    assert nvml.calls.count("init") == 1           # NVML initialised once per rank
    device._nvml_handle.cache_clear()


# --- 4. MIG: a slice named by its UUID is one GPU, sized and estimated as the slice -----------

MIG_UUID = "MIG-4b8f3e4c-5a8e-5f5e-9d2a-0c6a2b7e1f11"


def _mig_host(monkeypatch, visible: str):
    """An H100 split into MIG slices; CUDA_VISIBLE_DEVICES names ``visible``."""
    gpu = FakeGPU("GPU-h100-1111", pci_index=0, **H100)
    nvml = fake_nvml(monkeypatch, [gpu], migs=[
        FakeGPU(MIG_UUID, "NVIDIA H100 80GB HBM3 MIG 3g.40gb", 40 * 2**30, 60, parent=gpu),
        FakeGPU(MIG_UUID[:-2] + "22", "NVIDIA H100 80GB HBM3 MIG 3g.40gb", 40 * 2**30, 60,
                parent=gpu)])
    nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle = lambda h: h.parent
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    return nvml


def test_a_mig_slice_is_one_gpu_and_nccl_runs_on_it(monkeypatch):
    from workbench import rank_devices

    _mig_host(monkeypatch, MIG_UUID)
    # torch's own count gives up on MIG (it falls back to cudaGetDeviceCount)
    assert torch.cuda._device_count_nvml() == -1
    assert rank_devices.visible_gpus() == [("NVIDIA H100 80GB HBM3 MIG 3g.40gb", 40 * 2**30)]
    [g] = rank_devices.visible_devices()
    assert (g.mig, g.sms, g.parent_sms, g.parent_memory) == (True, 60, 132, 80 * 2**30)
    assert g.share() == pytest.approx((60 / 132, 0.5))
    assert rank_devices.cuda_gpus() == 1
    assert rank_devices.choose_backend("auto", 1) == "nccl"
    assert rank_devices.check_backend("nccl", 1) == "nccl"


def test_a_layout_needing_more_mig_slices_than_visible_is_one_clear_line(monkeypatch):
    from workbench.errors import ScenarioError
    from workbench.rank_devices import check_backend

    _mig_host(monkeypatch, f"{MIG_UUID},{MIG_UUID[:-2]}22")     # CUDA enumerates the first
    with pytest.raises(ScenarioError) as err:
        check_backend("nccl", 2)
    line = err.value.one_line()
    assert "\n" not in line and "2 ranks, 1 GPUs here" in line
    assert "MIG slices" in line and "only one MIG slice" in line and "fewer ranks" in line
    _mig_host(monkeypatch, "MIG-unknown")
    assert check_backend("auto", 1) == "gloo"                 # NVML does not know it: none


def test_a_mig_slice_sizes_the_trial_slice_and_its_estimate(monkeypatch):
    from workbench.catalog import CATALOGS
    from workbench.trial import prepare_for

    _mig_host(monkeypatch, MIG_UUID)
    ready = prepare_for(_scenario(dp=1), 1, "nccl", "slice")
    assert ready.backend == "nccl" and ready.sliced
    gpu = ready.scenario.hardware.gpu
    h100 = CATALOGS["gpu"]["h100-sxm"]
    assert gpu.memory_gb == pytest.approx(40 * 2**30 / 1e9)
    assert gpu.bf16_tflops == pytest.approx(h100.bf16_tflops * 60 / 132)
    assert gpu.hbm_gb_per_s == pytest.approx(h100.hbm_gb_per_s * 0.5)
    assert any("is a MIG slice" in n and "45% of its SMs" in n for n in ready.notes)


def test_a_mig_ranks_memory_is_read_from_its_slice_and_nvml_starts_once(monkeypatch):
    import workbench.trial.device as device

    nvml = _mig_host(monkeypatch, MIG_UUID)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: types.SimpleNamespace(
        uuid=MIG_UUID[4:], name="NVIDIA H100 80GB HBM3 MIG 3g.40gb"))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda d: 10)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda d: 20)
    device._nvml_handle.cache_clear()
    c = device.Compute(device=torch.device("cuda", 0), dtype=torch.bfloat16, fsdp=True)
    for _ in range(3):                                    # three steps
        figures = device.memory_figures(c)
    assert figures["device_memory"] == 40 * 2**30 // 8 and figures["device_scope"] == "process"
    assert nvml.calls.count("init") == 1
    device._nvml_handle.cache_clear()


# --- 5. NCCL traffic: read on every supported PyTorch, or a one-line note --------------------

def test_an_unreadable_flight_recorder_is_a_one_line_note_in_the_result(monkeypatch):
    import torch.distributed as dist

    from workbench.trial import measure
    from workbench.trial.result import TrialResult

    def refuses(**kw):
        raise RuntimeError("flight recorder is not enabled\nsecond line")

    fake_c10d = types.SimpleNamespace(_dump_nccl_trace=refuses)     # no _dump_fr_trace
    monkeypatch.setattr(torch._C, "_distributed_c10d", fake_c10d)
    monkeypatch.setattr(dist, "get_backend", lambda *a: "nccl")
    rec = measure.CommRecorder({})
    assert rec.collect() == {}
    note = rec.note
    assert note.startswith("nccl traffic not measured: the flight recorder could not be read")
    assert "_dump_nccl_trace: RuntimeError: flight recorder is not enabled" in note
    assert "_dump_fr_trace: AttributeError" in note and "\n" not in note
    events = [{**_gpu_step(i, i == 1, 10), "comm": {}, "comm_note": note} for i in range(3)]
    doc = TrialResult(scenario=_scenario(dp=1), backend="nccl", world_size=1, steps=events,
                      notes=["the model is sliced"]).to_dict()
    assert doc["notes"] == ["the model is sliced", note]        # once, not per step
    assert doc["ranks"][0]["comm"]["note"] == note


def test_a_readable_recorder_leaves_no_note(monkeypatch):
    import pickle

    import torch.distributed as dist

    from workbench.trial import measure

    entry = {"process_group": ("0", ""), "collective_seq_id": 1, "p2p_seq_id": 0,
             "record_id": 1, "profiling_name": "nccl:all_reduce", "input_sizes": [[1024]],
             "input_dtypes": ["Float"]}
    fake_c10d = types.SimpleNamespace(
        _dump_nccl_trace=lambda **kw: pickle.dumps({"entries": [entry]}))
    monkeypatch.setattr(torch._C, "_distributed_c10d", fake_c10d)
    monkeypatch.setattr(dist, "get_backend", lambda *a: "nccl")
    rec = measure.CommRecorder({"0": ("dp", 2)})
    assert rec.collect() == {"dp": {"all_reduce": {"bytes": 4096, "count": 1}}}
    assert rec.note is None


@pytest.mark.parametrize("given, version, want", [
    ({}, "2.9.1+cu128", {"TORCH_FR_BUFFER_SIZE": "20000"}),
    ({}, "2.6.0", {"TORCH_NCCL_TRACE_BUFFER_SIZE": "20000"}),       # the older name only
    ({"TORCH_NCCL_TRACE_BUFFER_SIZE": "500"}, "2.8.0", {"TORCH_FR_BUFFER_SIZE": "500"}),
    ({"TORCH_FR_BUFFER_SIZE": "800", "TORCH_NCCL_TRACE_BUFFER_SIZE": "500"}, "2.5.1",
     {"TORCH_NCCL_TRACE_BUFFER_SIZE": "800"})])
def test_the_recorder_size_is_set_under_the_name_this_pytorch_reads(given, version, want):
    from workbench.trial.measure import recorder_environment

    assert recorder_environment(given, version) == want

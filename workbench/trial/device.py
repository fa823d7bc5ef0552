"""Where and in what precision a trial rank computes, and how its time and memory are read:
the one place a trial chooses its device (``rank_devices.rank_device`` picks the GPU).

- gloo: the CPU in fp32 (classrooms, CI, laptops; this CPU runs bf16 matmuls ~50x slower than
  fp32, docs/platform.md): the precision is modelled analytically.
- nccl: the rank's own GPU, in mixed precision as torchtitan runs it
  (pytorch/torchtitan@73a0e6979dd10b6b1904098eb3c8f62c18ab87ce torchtitan/distributed/utils.py
  ``maybe_enable_amp``): FSDP2 units carry ``MixedPrecisionPolicy(param_dtype=bf16,
  reduce_dtype=fp32)`` (fp32 sharded parameters are the master); a model without FSDP runs
  under ``torch.autocast(bf16)`` when it is a single device or DDP, and in fp32 under TP or PP
  without FSDP ("Mixed precision training with TP or PP is only supported when FSDP/HSDP/CP is
  enabled").
Time on a GPU is read with CUDA events on the rank's stream after a synchronise (kernels launch
asynchronously: a host clock around them measures the launches); memory with the caching
allocator's peaks and NVML's view of the device (what nvidia-smi shows).
"""
from __future__ import annotations

import contextlib
import functools
import os
import time
from dataclasses import dataclass

import torch

from workbench.rank_devices import rank_device
from workbench.scenario.types import Scenario


@dataclass(frozen=True)
class Compute:
    """One rank's device and compute dtype, and the mixed-precision mechanism it uses."""

    device: torch.device
    dtype: torch.dtype           # the dtype matmuls run in
    fsdp: bool                   # FSDP2 applies the precision (else autocast, or none)

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def mixed(self) -> bool:
        return self.dtype != torch.float32

    def mp_policy(self):
        """FSDP2's policy (None in fp32): bf16 parameters in compute, fp32 gradient reduction."""
        if not (self.mixed and self.fsdp):
            return None
        from torch.distributed.fsdp import MixedPrecisionPolicy

        return MixedPrecisionPolicy(param_dtype=self.dtype, reduce_dtype=torch.float32)

    def autocast(self):
        """The forward's precision context: autocast where FSDP2 does not cast."""
        if self.mixed and not self.fsdp:
            return torch.autocast(self.device.type, dtype=self.dtype)
        return contextlib.nullcontext()

    @property
    def label(self) -> str:
        """What ran, in words (trial JSON ``precision_ran``)."""
        if not self.mixed:
            return "fp32"
        how = "FSDP2 MixedPrecisionPolicy" if self.fsdp else "torch.autocast"
        return f"bf16 ({how}, fp32 master weights)"


def compute_for(s: Scenario, backend: str, rank: int) -> Compute:
    """The device and precision rank ``rank`` of trial scenario ``s`` computes with."""
    device = rank_device(backend, rank)
    par = s.parallel
    # parallelize.apply_fsdp runs over dp x cp > 1, and on a GPU also over a 1-rank group (a
    # one-GPU slice of an FSDP layout runs FSDP2's per-block gather / cast / free)
    fsdp = par.zero >= 2 and (par.dp * par.cp > 1 or device.type == "cuda")
    mixed = (device.type == "cuda" and s.training.precision != "fp32"
             and (fsdp or (par.tp == 1 and par.pp == 1)))
    return Compute(device=device, dtype=torch.bfloat16 if mixed else torch.float32, fsdp=fsdp)


def stamp(cuda: bool) -> torch.cuda.Event | float:
    """A point in time: a CUDA event recorded on the current stream on a GPU (kernels launch
    asynchronously: a host clock would time the launches), the host clock on the CPU."""
    if cuda:
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev
    return time.perf_counter()


def seconds_between(a: torch.cuda.Event | float, b: torch.cuda.Event | float) -> float:
    """Seconds from stamp ``a`` to stamp ``b`` (waits for ``b``'s event on a GPU)."""
    if isinstance(a, float):
        return b - a
    b.synchronize()
    return a.elapsed_time(b) / 1e3                 # milliseconds -> seconds


class Clock:
    """Named stamps of one step and the seconds between them."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.marks: dict[str, object] = {}

    def mark(self, name: str) -> None:
        """Stamp now as ``name``."""
        self.marks[name] = stamp(self.cuda)

    def elapsed(self, start: str, end: str) -> float:
        """Seconds from mark ``start`` to mark ``end``."""
        return seconds_between(self.marks[start], self.marks[end])


def reset_peaks(c: Compute) -> None:
    """Start the allocator's peak statistics afresh (each step reports its own peaks)."""
    if c.cuda:
        torch.cuda.reset_peak_memory_stats(c.device)


def memory_figures(c: Compute) -> dict:
    """The three memory figures of a GPU rank, bytes: ``allocated`` and ``reserved`` (the
    caching allocator's peaks since ``reset_peaks``: torch.cuda.max_memory_allocated /
    max_memory_reserved) and ``device_memory`` (NVML: this process's used memory, or the whole device's
    when NVML lists no process of ours, as inside some containers; ``device_scope`` says which).
    Empty on the CPU."""
    if not c.cuda:
        return {}
    out = {"allocated": int(torch.cuda.max_memory_allocated(c.device)),
           "reserved": int(torch.cuda.max_memory_reserved(c.device)),
           "device_memory": None, "device_scope": None}
    try:
        import pynvml

        handle = _nvml_handle(c.device)
        mine = [p.usedGpuMemory for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
                if p.pid == os.getpid() and p.usedGpuMemory]
        if mine:
            out.update(device_memory=int(mine[0]), device_scope="process")
        else:
            out.update(device_memory=int(pynvml.nvmlDeviceGetMemoryInfo(handle).used),
                       device_scope="device")
    except Exception as exc:     # no NVML (driver library missing): say so, keep the rest
        out["device_scope"] = f"unavailable: {type(exc).__name__}"
    return out


@functools.lru_cache(maxsize=None)
def _nvml_handle(device: torch.device):
    """NVML initialised once per rank, and the handle of its GPU, found by the UUID CUDA gives
    the device (``GPU-<uuid>``, or ``MIG-<uuid>`` for a MIG slice): NVML numbers GPUs in PCI
    order, CUDA fastest first unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, and a MIG slice has no
    NVML index at all. Without a UUID, torch's own index mapping."""
    import pynvml

    pynvml.nvmlInit()
    uuid = str(getattr(torch.cuda.get_device_properties(device), "uuid", "") or "")
    if uuid.startswith(("GPU-", "MIG-")):
        names = [uuid]
    else:
        names = [f"GPU-{uuid}", f"MIG-{uuid}"] if uuid else []
    for name in names:
        try:
            return pynvml.nvmlDeviceGetHandleByUUID(name)
        except pynvml.NVMLError:
            continue
    return pynvml.nvmlDeviceGetHandleByIndex(torch.cuda._get_nvml_device_index(device))


def gpu_facts(device: torch.device) -> dict:
    """The GPU's name, compute capability, SM count and total memory
    (``torch.cuda.get_device_properties``), the GPU count, driver (NVML), CUDA runtime, torch
    and cuDNN versions, and which SDPA backends are enabled: what a trial and a calibration
    record of the device they ran on."""
    props = torch.cuda.get_device_properties(device)
    driver = ""
    try:
        import pynvml

        pynvml.nvmlInit()
        d = pynvml.nvmlSystemGetDriverVersion()
        driver = d.decode() if isinstance(d, bytes) else str(d)
    except Exception:          # NVML missing or refusing: the driver stays unnamed
        pass
    sdpa = {}
    for name in ("flash", "mem_efficient", "cudnn", "math"):
        enabled = getattr(torch.backends.cuda, f"{name}_sdp_enabled", None)
        if enabled is not None:
            sdpa[name] = bool(enabled())
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {"name": props.name, "capability": [props.major, props.minor],
            "sms": props.multi_processor_count, "memory_bytes": int(props.total_memory),
            "count": torch.cuda.device_count(), "driver": driver, "cuda": torch.version.cuda,
            "torch": torch.__version__, "cudnn": cudnn, "sdpa_enabled": sdpa}


def device_facts(c: Compute) -> dict:
    """What a trial's step events say of the rank's GPU (``gpu_facts``; empty on the CPU)."""
    if not c.cuda:
        return {}
    g = gpu_facts(c.device)
    return {"device_name": g["name"], "device_memory_bytes": g["memory_bytes"],
            "sm_count": g["sms"], "capability": ".".join(map(str, g["capability"])),
            "torch": g["torch"], "driver": g["driver"]}

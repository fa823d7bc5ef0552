"""The devices a rank can run on, found without initialising CUDA: the CUDA GPUs this process
can use (NVML, MIG slices included), the process-group backend that follows from them, each
rank's device and environment, and the memory free for new processes. Trials, the collective
benchmark and calibration choose through it; ``process_runner`` starts the ranks.

This module imports torch only inside the functions that need it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:      # imported by the functions that choose a device, not by this module
    import torch


@dataclass(frozen=True)
class VisibleGPU:
    """A CUDA device this process can use, as NVML describes it: a whole GPU or a MIG slice
    (``mig``: then ``parent_memory`` / ``parent_sms`` are its physical GPU's)."""

    name: str
    memory: int                  # bytes
    sms: int | None = None       # streaming multiprocessors (NVML device attributes)
    mig: bool = False
    parent_memory: int | None = None
    parent_sms: int | None = None

    def share(self) -> tuple[float, float] | None:
        """A MIG slice's fraction of its GPU's SMs and of its memory (None for a whole GPU,
        or where NVML did not say)."""
        if not (self.mig and self.sms and self.parent_sms and self.parent_memory):
            return None
        return self.sms / self.parent_sms, self.memory / self.parent_memory


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _sms(pynvml, handle) -> int | None:
    try:
        return int(pynvml.nvmlDeviceGetAttributes(handle).multiprocessorCount)
    except Exception:     # not supported on this GPU or driver
        return None


def visible_devices() -> list[VisibleGPU]:
    """The CUDA devices this process could use, in CUDA's numbering, read through NVML without
    initialising CUDA. CUDA_VISIBLE_DEVICES is read as CUDA reads it, with torch's own parser
    (indices, UUIDs, a list cut at the first invalid entry: ``torch.cuda._parse_visible_devices``
    / ``_transform_uuid_to_ordinals``, the mapping ``torch.cuda._get_nvml_device_index`` uses;
    indices in NVML's PCI order: ranks run with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``). A MIG slice
    (``MIG-<uuid>``) is found by its UUID (``nvmlDeviceGetHandleByUUID``: torch matches only
    ``GPU-`` UUIDs, and its own count gives up on MIG); CUDA enumerates one MIG device per
    process, the first listed. Empty without a CUDA build of torch, without NVML
    (``nvidia-ml-py``) or the driver."""
    try:
        import pynvml
        import torch

        if not torch.version.cuda:
            return []
        pynvml.nvmlInit()
        visible = torch.cuda._parse_visible_devices()
        if visible and isinstance(visible[0], str) and visible[0].startswith("MIG-"):
            return _mig_device(pynvml, visible[0])
        count = pynvml.nvmlDeviceGetCount()
        if visible and isinstance(visible[0], str):      # GPU- UUIDs
            uuids = torch.cuda._raw_device_uuid_nvml()
            visible = torch.cuda._transform_uuid_to_ordinals(visible, uuids) if uuids else []
        order = []
        for i in visible:
            if not 0 <= int(i) < count:      # CUDA stops at the first device it cannot use
                break
            order.append(int(i))
        out = []
        for i in order:
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            out.append(VisibleGPU(_text(pynvml.nvmlDeviceGetName(h)),
                                  int(pynvml.nvmlDeviceGetMemoryInfo(h).total), _sms(pynvml, h)))
        return out
    except Exception:
        return []


def _mig_device(pynvml, uuid: str) -> list[VisibleGPU]:
    """The MIG slice ``uuid`` names (one: what CUDA enumerates), or none when NVML does not
    know it."""
    try:
        h = pynvml.nvmlDeviceGetHandleByUUID(uuid)
    except Exception:
        return []
    parent_memory = parent_sms = None
    try:
        parent = pynvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(h)
        parent_memory = int(pynvml.nvmlDeviceGetMemoryInfo(parent).total)
        parent_sms = _sms(pynvml, parent)
    except Exception:     # an older driver: the slice alone
        pass
    return [VisibleGPU(_text(pynvml.nvmlDeviceGetName(h)),
                       int(pynvml.nvmlDeviceGetMemoryInfo(h).total), _sms(pynvml, h), mig=True,
                       parent_memory=parent_memory, parent_sms=parent_sms)]


def mig_visible() -> bool:
    """CUDA_VISIBLE_DEVICES names MIG slices."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "").strip().startswith("MIG-")


def visible_gpus() -> list[tuple[str, int]]:
    """(name, total bytes) of the CUDA devices this process could use (``visible_devices``)."""
    return [(g.name, g.memory) for g in visible_devices()]


def cuda_gpus() -> int:
    """CUDA GPUs this process can use (0 without a CUDA build of torch, NVML or a driver),
    counted through NVML only (``visible_gpus``): ``torch.cuda.is_available`` calls
    cudaGetDeviceCount, which runs cuInit, and a process forked after that cannot use CUDA
    ("initialization error"); ``torch.cuda.device_count`` falls back to it when NVML discovery
    fails. So a parent may still fork CPU ranks and spawn GPU ranks after asking."""
    return len(visible_gpus())


def choose_backend(requested: str, world: int) -> str:
    """``requested``, or for ``auto`` nccl when CUDA has a GPU per rank and gloo otherwise."""
    if requested != "auto":
        return requested
    return "nccl" if cuda_gpus() >= max(1, world) else "gloo"


def check_backend(requested: str, world: int, field: str = "--backend") -> str:
    """The backend to run ``world`` ranks with (``choose_backend``), refusing nccl where this
    machine has fewer CUDA GPUs than ranks, in one line that says what it found."""
    from workbench.errors import Problem, ScenarioError

    if requested not in ("auto", "gloo", "nccl"):
        raise ScenarioError([Problem(field, requested, "choose auto, gloo or nccl")])
    backend = choose_backend(requested, world)
    if backend == "nccl":
        gpus = cuda_gpus()
        if gpus < world:
            try:
                import torch

                why = (f"this torch ({torch.__version__}) has no CUDA" if not torch.version.cuda
                       else "CUDA sees no GPU" if gpus == 0 else f"CUDA sees {gpus}")
                if mig_visible() and gpus:
                    why = ("CUDA_VISIBLE_DEVICES names MIG slices, and a process sees only one "
                           "MIG slice")
            except ImportError:
                why = "torch is not installed"
            raise ScenarioError([Problem(field, "nccl", f"nccl needs one CUDA GPU per rank: "
                                         f"{world} ranks, {gpus} GPUs here ({why}); use gloo "
                                         "(CPU) or fewer ranks")])
    return backend


def rank_device(backend: str, rank: int) -> torch.device:
    """The torch device rank ``rank`` computes on: its own GPU under nccl (made the current
    device, as ``init_process_group``'s ``device_id`` and NCCL expect), the CPU under gloo.
    The one place trials, the collective benchmark and calibration choose a device."""
    import torch

    if backend != "nccl":
        return torch.device("cpu")
    device = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    return device


# CUDA numbers GPUs fastest first unless told otherwise; NVML (and so ``visible_gpus``, the
# slice's size and ``device.memory_figures``) numbers them in PCI order. On a host with mixed
# GPUs the GPU measured would not be the GPU used: ranks run with CUDA in PCI order.
CUDA_ORDER = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def rank_environment(backend: str) -> dict[str, str]:
    """Environment variables every rank of ``backend`` starts with: for nccl, CUDA's device
    order made NVML's (``CUDA_DEVICE_ORDER=PCI_BUS_ID``); nothing for gloo."""
    return dict(CUDA_ORDER) if backend == "nccl" else {}


def available_memory() -> float | None:
    """Bytes of memory available to new processes now (None without psutil)."""
    try:
        import psutil

        return float(psutil.virtual_memory().available)
    except ImportError:
        return None

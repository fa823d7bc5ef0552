"""GPU telemetry through NVML (the ``pynvml`` module of the ``nvidia-ml-py`` package).

``open_telemetry()`` initialises NVML once and returns a ``Telemetry`` (one handle per GPU) or,
where NVML cannot be used, ``None`` and the reason in a few words: on a machine without the
NVIDIA driver ``nvmlInit`` raises ``NVMLError_LibraryNotFound`` and the reason is
"NVML library not found". ``Telemetry.sample(metrics)`` sets the GPU series of ``METRICS``.

The NVML calls (NVML API reference, docs.nvidia.com/deploy/nvml-api):
  temperature  nvmlDeviceGetTemperature(handle, NVML_TEMPERATURE_GPU)    degrees C
  power        nvmlDeviceGetPowerUsage(handle)                           milliwatts
  memory       nvmlDeviceGetMemoryInfo(handle).used                      bytes
  utilisation  nvmlDeviceGetUtilizationRates(handle).gpu                 percent of the period
  PCIe         nvmlDeviceGetPcieThroughput(handle, NVML_PCIE_UTIL_TX/RX_BYTES)   KB/s
  NVLink       nvmlDeviceGetFieldValues(handle, [(NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX,
               link)])  cumulative KiB per link (scopeId = link id), links from
               NVML_FI_DEV_NVLINK_LINK_COUNT
Every call can fail on one device with ``NVMLError_NotSupported`` (a GPU without a power
sensor, a PCIe card without NVLink): that series is then left out for that GPU, silently.
Other per-call errors (a GPU fallen off the bus) are reported once each through ``warn``.

The NVLink counters use the field-values API rather than
``nvmlDeviceGetNvLinkUtilizationCounter``: the installed bindings mark that function deprecated
("use nvmlDeviceGetFieldValues with NVML_FI_DEV_NVLINK_THROUGHPUT_*") and it needs a counter
set-up call (``nvmlDeviceSetNvLinkUtilizationControl``) that changes device state.
"""
from __future__ import annotations

import sys
from typing import Callable

from workbench.monitor.metrics import MetricSet

DIRECTIONS = ("tx", "rx")


def _value(field) -> float:
    """The number in an ``nvmlFieldValue_t`` by its ``valueType`` (the C union ``nvmlValue_t``)."""
    attr = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal",
            6: "usVal"}.get(int(field.valueType), "ullVal")
    return getattr(field.value, attr)


class Telemetry:
    """NVML opened, with a handle per GPU: ``sample`` sets the GPU series of a ``MetricSet``."""

    def __init__(self, nvml, warn: Callable[[str], None] | None = None) -> None:
        self._nvml = nvml
        self._warn = warn or (lambda line: print(line, file=sys.stderr, flush=True))
        self._warned: set[tuple[str, str]] = set()
        # nvmlDeviceGetCount / nvmlDeviceGetHandleByIndex: NVML's index order (PCI bus order),
        # which is what nvidia-smi and dcgm-exporter label GPUs with.
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i)
                        for i in range(nvml.nvmlDeviceGetCount())]
        # NVLink: the last cumulative KiB reading per (gpu, direction, link), so the exported
        # counter only ever grows by the difference (a driver reload resets NVML's counters).
        self._nvlink_last: dict[tuple[int, str, int], float] = {}
        self._nvlink_off: set[int] = set()      # GPUs where NVLink is not supported
        self._links: dict[int, int] = {}        # NVLink links per GPU, read once

    @property
    def count(self) -> int:
        """Number of GPUs NVML sees."""
        return len(self.handles)

    def _call(self, gpu: int, what: str, fn, *args):
        """One NVML call on one GPU: its result, or None (not supported: silently; any other
        NVML error: said once per GPU and series, so a lost GPU does not flood stderr)."""
        nvml = self._nvml
        try:
            return fn(*args)
        except nvml.NVMLError as exc:
            if not isinstance(exc, getattr(nvml, "NVMLError_NotSupported", ())):
                key = (f"{gpu}:{what}", str(exc))
                if key not in self._warned:
                    self._warned.add(key)
                    self._warn(f"GPU telemetry: GPU {gpu} {what}: {exc}")
            return None

    def sample(self, metrics: MetricSet) -> None:
        """Read every GPU once and set its series in ``metrics``."""
        nvml = self._nvml
        for i, h in enumerate(self.handles):
            g = str(i)
            temp = self._call(i, "temperature", nvml.nvmlDeviceGetTemperature, h,
                              nvml.NVML_TEMPERATURE_GPU)
            if temp is not None:
                metrics["workbench_gpu_temperature_celsius"].labels(g).set(temp)
            power = self._call(i, "power", nvml.nvmlDeviceGetPowerUsage, h)
            if power is not None:                            # milliwatts
                metrics["workbench_gpu_power_watts"].labels(g).set(power / 1000)
            mem = self._call(i, "memory", nvml.nvmlDeviceGetMemoryInfo, h)
            if mem is not None:
                metrics["workbench_gpu_memory_used_bytes"].labels(g).set(mem.used)
            util = self._call(i, "utilization", nvml.nvmlDeviceGetUtilizationRates, h)
            if util is not None:                             # percent of the sample period
                metrics["workbench_gpu_utilization_ratio"].labels(g).set(util.gpu / 100)
            for direction, counter in (("tx", nvml.NVML_PCIE_UTIL_TX_BYTES),
                                       ("rx", nvml.NVML_PCIE_UTIL_RX_BYTES)):
                kbps = self._call(i, f"pcie {direction}", nvml.nvmlDeviceGetPcieThroughput, h,
                                  counter)
                if kbps is not None:                         # KB/s over NVML's 20 ms window
                    metrics["workbench_gpu_pcie_bytes_per_second"].labels(g, direction).set(
                        kbps * 1024)
            self._sample_nvlink(i, h, metrics)

    def _nvlink_links(self, h) -> int:
        """Links of one GPU (NVML_FI_DEV_NVLINK_LINK_COUNT), 0 when NVLink is not there."""
        nvml = self._nvml
        try:
            [f] = nvml.nvmlDeviceGetFieldValues(h, [nvml.NVML_FI_DEV_NVLINK_LINK_COUNT])
        except nvml.NVMLError:
            return 0
        return int(_value(f)) if f.nvmlReturn == nvml.NVML_SUCCESS else 0

    def _sample_nvlink(self, i: int, h, metrics: MetricSet) -> None:
        """Increase each NVLink counter by the KiB its links moved since the last sample."""
        nvml = self._nvml
        if i in self._nvlink_off or not hasattr(nvml, "nvmlDeviceGetFieldValues"):
            return
        if i not in self._links:         # a GPU's link count does not change while it runs
            self._links[i] = self._nvlink_links(h)
        links = self._links[i]
        if links == 0:           # a GPU without NVLink: skip it for the rest of the run
            self._nvlink_off.add(i)
            return
        ids = {"tx": nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
               "rx": nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX}
        query = [(ids[d], link) for d in DIRECTIONS for link in range(links)]
        try:
            values = nvml.nvmlDeviceGetFieldValues(h, query)
        except nvml.NVMLError:
            self._nvlink_off.add(i)
            return
        delta = {d: 0.0 for d in DIRECTIONS}
        seen = False
        for (fid, link), f in zip(query, values):
            if f.nvmlReturn != nvml.NVML_SUCCESS:        # this link is down or unsupported
                continue
            seen = True
            d = "tx" if fid == ids["tx"] else "rx"
            kib = float(_value(f))
            last = self._nvlink_last.get((i, d, link))
            self._nvlink_last[(i, d, link)] = kib
            # the first reading only sets the base (the counters count since driver load);
            # a smaller reading is a counter reset, not negative traffic
            if last is not None and kib >= last:
                delta[d] += kib - last
        if not seen:
            self._nvlink_off.add(i)
            return
        for d in DIRECTIONS:
            # .labels() first, so both directions are exported (at 0) from the first sample
            metrics["workbench_gpu_nvlink_bytes_total"].labels(str(i), d).inc(delta[d] * 1024)

    def memory_used(self, index: int | None = None, uuid: str | None = None) -> int | None:
        """Used bytes of one GPU (by NVML index or by UUID, e.g. ``"GPU-8c0e..."``: a process
        with CUDA_VISIBLE_DEVICES sees its GPU under another index), or None."""
        nvml = self._nvml
        try:
            h = nvml.nvmlDeviceGetHandleByUUID(uuid) if uuid else self.handles[index or 0]
            return int(nvml.nvmlDeviceGetMemoryInfo(h).used)
        except (nvml.NVMLError, IndexError):
            return None

    def close(self) -> None:
        """Shut NVML down (nvmlShutdown; NVML counts inits, so other users are unaffected)."""
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError:
            pass


def open_telemetry(warn: Callable[[str], None] | None = None) -> tuple[Telemetry | None, str]:
    """``(Telemetry, "")`` when NVML works and sees a GPU, else ``(None, reason)``.

    ``warn`` receives per-call NVML errors later on (default: one line on stderr)."""
    try:
        import pynvml
    except ImportError:                     # nvidia-ml-py is a dependency, but say so plainly
        return None, "pynvml is not installed (pip install nvidia-ml-py)"
    try:
        pynvml.nvmlInit()                   # nvmlInit_v2: loads libnvidia-ml.so.1
    except pynvml.NVMLError as exc:
        if isinstance(exc, pynvml.NVMLError_LibraryNotFound):
            return None, "NVML library not found"
        return None, str(exc)
    try:
        telemetry = Telemetry(pynvml, warn)
    except pynvml.NVMLError as exc:      # initialised, but the devices cannot be listed
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass
        return None, str(exc)
    if telemetry.count == 0:
        telemetry.close()
        return None, "NVML sees no GPU"
    return telemetry, ""

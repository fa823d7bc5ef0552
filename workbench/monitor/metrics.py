"""Every series the workbench exports, named once (Prometheus conventions: the ``workbench_``
prefix, base units in the name, ``_total`` for counters), and the registry that holds them.

The run: step time per rank, tokens/s, MFU, loss, memory per rank and kind, traffic per rank,
dimension and collective. The plan (the estimate of the scenario): the same figures as planned,
and the GPU's capacity. GPU telemetry (NVML), each series with the DCGM exporter field it
corresponds to, so a cluster's existing ``DCGM_FI_*`` series can stand in for ours.
"""
from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import (
    CollectorRegistry, Counter, Gauge, disable_created_metrics, generate_latest,
)

disable_created_metrics()       # no *_created series: the names below are the whole contract

MEMORY_KINDS = ("params", "grads", "optimizer", "activations", "peak")
GPU_MEMORY_KINDS = ("allocated", "reserved", "device")   # on a GPU: allocator and nvidia-smi


@dataclass(frozen=True)
class Metric:
    """One exported series."""

    name: str                  # the exposed name (counters end in _total)
    kind: str                  # gauge | counter
    labels: tuple[str, ...]
    help: str
    dcgm: str = ""             # the DCGM exporter field it corresponds to, if any


METRICS: tuple[Metric, ...] = (
    # -- the run ------------------------------------------------------------------------------
    Metric("workbench_step_seconds", "gauge", ("rank",),
           "Seconds of the last optimizer step on each rank."),
    Metric("workbench_steps_total", "counter", ("rank",), "Optimizer steps finished per rank."),
    Metric("workbench_last_step_timestamp_seconds", "gauge", ("rank",),
           "Unix time when each rank last finished a step."),
    Metric("workbench_tokens_per_second", "gauge", (),
           "Tokens per second of the last step (all ranks together)."),
    Metric("workbench_mfu_ratio", "gauge", (),
           "Model FLOPs utilisation of the last step: model FLOPs / (seconds x GPUs x peak)."),
    Metric("workbench_loss", "gauge", (), "Training loss of the last step."),
    Metric("workbench_memory_bytes", "gauge", ("rank", "kind"),
           "Bytes on each rank by kind: params, grads, optimizer, activations (one microbatch), "
           "peak (their sum); on a GPU also allocated and reserved (PyTorch's caching allocator "
           "peaks) and device (what nvidia-smi shows).", "DCGM_FI_DEV_FB_USED (kind=device)"),
    Metric("workbench_comm_bytes_total", "counter", ("rank", "dim", "collective"),
           "Bytes each rank moved, per parallel dimension and collective."),
    # -- the plan -----------------------------------------------------------------------------
    Metric("workbench_planned_step_seconds", "gauge", (), "The estimate's seconds per step."),
    Metric("workbench_planned_tokens_per_second", "gauge", (), "The estimate's tokens per second."),
    Metric("workbench_planned_mfu_ratio", "gauge", (), "The estimate's model FLOPs utilisation."),
    Metric("workbench_planned_memory_bytes", "gauge", ("kind",),
           "The estimate's bytes on the worst GPU by kind (params, grads, optimizer, "
           "activations, buffers, total)."),
    Metric("workbench_planned_comm_bytes_per_step", "gauge", ("dim", "collective"),
           "The estimate's bytes per step a GPU of pipeline rank 0 moves, per dimension and "
           "collective."),
    Metric("workbench_gpu_capacity_bytes", "gauge", (), "Memory of one GPU, as nvidia-smi reports it."),
    # -- GPU telemetry (NVML) ------------------------------------------------------------------
    Metric("workbench_gpu_temperature_celsius", "gauge", ("gpu",), "GPU temperature.",
           "DCGM_FI_DEV_GPU_TEMP"),
    Metric("workbench_gpu_power_watts", "gauge", ("gpu",), "GPU power draw.",
           "DCGM_FI_DEV_POWER_USAGE"),
    Metric("workbench_gpu_memory_used_bytes", "gauge", ("gpu",), "GPU memory in use.",
           "DCGM_FI_DEV_FB_USED (MiB)"),
    Metric("workbench_gpu_utilization_ratio", "gauge", ("gpu",),
           "Share of the last sample period a kernel ran (0..1).", "DCGM_FI_DEV_GPU_UTIL (%)"),
    Metric("workbench_gpu_pcie_bytes_per_second", "gauge", ("gpu", "direction"),
           "PCIe throughput, direction tx or rx.", "DCGM_FI_PROF_PCIE_TX_BYTES / _RX_BYTES"),
    Metric("workbench_gpu_nvlink_bytes_total", "counter", ("gpu", "direction"),
           "NVLink bytes, direction tx or rx.", "DCGM_FI_PROF_NVLINK_TX_BYTES / _RX_BYTES"),
)

BY_NAME = {m.name: m for m in METRICS}


class MetricSet:
    """A registry of the series of ``METRICS``, each registered when first set: a series
    nobody measured is absent from a scrape rather than a misleading 0 (a trial on a CPU has
    no planned step time and no GPU capacity)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.series: dict = {}

    def __getitem__(self, name: str):
        """The prometheus_client metric of ``name`` (a METRICS name; KeyError otherwise)."""
        if name not in self.series:
            m = BY_NAME[name]
            if m.kind == "counter":      # prometheus_client adds the _total suffix itself
                self.series[name] = Counter(name.removesuffix("_total"), m.help, m.labels,
                                            registry=self.registry)
            else:
                self.series[name] = Gauge(name, m.help, m.labels, registry=self.registry)
        return self.series[name]

    def exposition(self) -> bytes:
        """The text format a scrape returns."""
        return generate_latest(self.registry)

    def set_plan(self, estimate) -> None:
        """The plan's series from an ``Estimate`` of the scenario being run."""
        t, mem, run = estimate.time, estimate.memory, estimate.run
        self["workbench_planned_step_seconds"].set(t.step)
        self["workbench_planned_tokens_per_second"].set(run.tokens_per_s)
        self["workbench_planned_mfu_ratio"].set(run.mfu)
        for kind, value in mem.per_gpu.as_dict().items():
            self["workbench_planned_memory_bytes"].labels(kind).set(value)
        self.set_planned_comm(t.volume)
        self["workbench_gpu_capacity_bytes"].set(mem.capacity)

    def set_planned_comm(self, volume: dict) -> None:
        """Planned bytes per step per dimension and collective (``{dim: {kind: {bytes}}}``)."""
        for dim, ops in volume.items():
            for kind, v in ops.items():
                self["workbench_planned_comm_bytes_per_step"].labels(dim, kind).set(v["bytes"])

    def set_planned_memory(self, by_kind: dict) -> None:
        for kind, value in by_kind.items():
            self["workbench_planned_memory_bytes"].labels(kind).set(value)

    def record_step(self, rank: int, seconds: float, at: float, memory: dict | None = None,
                    comm: dict | None = None, loss: float | None = None) -> None:
        """One finished step of one rank: its time, memory by kind and traffic
        (``{dim: {collective: {bytes, count}}}``, this step's)."""
        r = str(rank)
        self["workbench_step_seconds"].labels(r).set(seconds)
        self["workbench_steps_total"].labels(r).inc()
        self["workbench_last_step_timestamp_seconds"].labels(r).set(at)
        for kind, value in (memory or {}).items():
            if value is not None:
                self["workbench_memory_bytes"].labels(r, kind).set(value)
        for dim, ops in (comm or {}).items():
            for kind, v in ops.items():
                self["workbench_comm_bytes_total"].labels(r, dim, kind).inc(v["bytes"])
        if loss is not None:
            self["workbench_loss"].set(loss)

    def set_throughput(self, tokens_per_s: float, mfu: float | None = None) -> None:
        self["workbench_tokens_per_second"].set(tokens_per_s)
        if mfu is not None:
            self["workbench_mfu_ratio"].set(mfu)

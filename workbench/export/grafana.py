"""A Grafana dashboard (JSON) of a run against its plan, built with the Grafana Foundation SDK
(``grafana_foundation_sdk``: dashboard, row, timeseries and stat builders, Prometheus queries).

Every PromQL expression uses only the series of ``workbench.monitor.metrics.METRICS`` and, for
the GPU panels, the DCGM exporter's documented ``DCGM_FI_*`` fields (the test reads every name
out of the JSON). Rows: the run against its plan (step time, tokens/s, MFU, loss), memory per
rank against the plan and the GPU's capacity, traffic per parallel dimension against the plan,
GPU telemetry.

Variables:

- ``datasource``: the Prometheus data source every panel queries.
- ``job``: the scrape job of the run (``label_values`` of ``workbench_step_seconds``); a
  Prometheus that scrapes several runs shows one at a time, and the plan series of that job.
- ``gpu_source``: where the GPU panels read from: the workbench's own NVML series, or a
  cluster's existing DCGM exporter. A custom variable whose *text* names the source and whose
  *value* is 0 or 1. Each GPU panel carries both queries; each ends in
  ``and on() (vector($gpu_source) == N)``, which is the query itself when the variable selects
  N and the empty result otherwise. So switching is one dropdown, every query stays valid
  PromQL for either value (no query text inside the variable to escape: custom-variable values
  are split on commas, and PromQL has commas), and the DCGM queries carry the unit conversions
  (MiB to bytes, % to a ratio) the NVML series do not need.
- ``dcgm_hostname``: a regex on the DCGM exporter's ``Hostname`` label, to show the run's nodes
  rather than the whole cluster (default ``.+``: a matcher that matches an empty label would
  leave the selector invalid).
"""
from __future__ import annotations

import hashlib
import json

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dashboards
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model

from workbench.export.common import Source, layout_summary, model_label
from workbench.export.prometheus_rules import (
    GPU_TEMPERATURE_CELSIUS, NO_STEP_SECONDS, PEAK_KINDS, STEP_TIME_OVER_PLAN,
)
from workbench.scenario.types import Scenario

DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
JOB = 'job=~"$job"'                   # every workbench selector is limited to the chosen run
DCGM = 'Hostname=~"$dcgm_hostname"'   # every DCGM selector to the chosen nodes
RATE = "$__rate_interval"             # Grafana's window for rate(): at least 4 scrape intervals
NVML, DCGM_EXPORTER = "0", "1"        # gpu_source's values
GPU_SOURCES = (("workbench (NVML)", NVML), ("DCGM exporter", DCGM_EXPORTER))   # (text, value)
MIB = 1024 * 1024                     # DCGM_FI_DEV_FB_USED is in MiB


def _when(source: str) -> str:
    """The gate that empties a GPU query unless ``gpu_source`` selects ``source``."""
    return f" and on() (vector($gpu_source) == {source})"


def _query(expr: str, legend: str, ref: str, instant: bool = False) -> prometheus.Dataquery:
    q = prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(DATASOURCE)
    return q.instant() if instant else q.range()


def _queries(pairs: list[tuple[str, str]], instant: bool = False) -> list[prometheus.Dataquery]:
    """(expr, legend) pairs as queries A, B, C, ..."""
    return [_query(e, legend, chr(ord("A") + i), instant) for i, (e, legend) in enumerate(pairs)]


def _limit(value: float) -> dashboards.ThresholdsConfig:
    """Green below ``value``, red from it (drawn as a dashed line on time series)."""
    return dashboards.ThresholdsConfig().mode(model.ThresholdsMode.ABSOLUTE).steps(
        [model.Threshold(None, "green"), model.Threshold(value, "red")])


class _Ids:
    """Panel ids: Grafana links, repeats and shares panels by id, so each is unique."""

    def __init__(self) -> None:
        self.last = 0

    def __call__(self) -> int:
        self.last += 1
        return self.last


def _series(ids: _Ids, title: str, unit: str, description: str,
            pairs: list[tuple[str, str]], width: int = 12,
            limit: float | None = None) -> timeseries.Panel:
    panel = (timeseries.Panel().id(ids()).title(title).description(description).unit(unit)
             .datasource(DATASOURCE).targets(_queries(pairs)).span(width).height(8)
             .legend(common_builders.VizLegendOptions().show_legend(True)
                     .display_mode(common.LegendDisplayMode.LIST)
                     .placement(common.LegendPlacement.BOTTOM))
             .tooltip(common_builders.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI)
                      .sort(common.SortOrder.DESCENDING)))
    if limit is not None:
        panel = panel.thresholds(_limit(limit)).thresholds_style(
            common_builders.GraphThresholdsStyleConfig().mode(
                common.GraphTresholdsStyleMode.DASHED))   # (sic: the SDK's spelling)
    return panel


def _stat(ids: _Ids, title: str, unit: str, description: str, pairs: list[tuple[str, str]],
          limit: float | None = None) -> stat.Panel:
    panel = (stat.Panel().id(ids()).title(title).description(description).unit(unit)
             .datasource(DATASOURCE).targets(_queries(pairs, instant=True)).span(6).height(4)
             .graph_mode(common.BigValueGraphMode.NONE)
             .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"])
                             .values(False)))
    return panel.thresholds(_limit(limit)) if limit is not None else panel


def _gpu(ids: _Ids, title: str, unit: str, description: str,
         nvml: list[tuple[str, str]], dcgm: list[tuple[str, str]],
         limit: float | None = None) -> timeseries.Panel:
    """A GPU panel with both sources' queries, each gated by ``gpu_source``."""
    pairs = ([(f"({e}){_when(NVML)}", legend) for e, legend in nvml]
             + [(f"({e}){_when(DCGM_EXPORTER)}", legend) for e, legend in dcgm])
    return _series(ids, title, unit, description, pairs, width=8, limit=limit)


def _variables() -> list:
    datasource = (dashboards.DatasourceVariable("datasource").label("Prometheus")
                  .type("prometheus"))
    job = (dashboards.QueryVariable("job").label("Run (scrape job)").datasource(DATASOURCE)
           .query("label_values(workbench_step_seconds, job)")
           .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
           .sort(model.VariableSort.ALPHABETICAL_ASC))
    options = [model.VariableOption(selected=i == 0, text=text, value=value)
               for i, (text, value) in enumerate(GPU_SOURCES)]
    source = (dashboards.CustomVariable("gpu_source").label("GPU series")
              .description("Read GPU telemetry from the workbench's NVML series or from the "
                           "cluster's DCGM exporter (DCGM_FI_* fields)")
              .values(", ".join(f"{text} : {value}" for text, value in GPU_SOURCES))
              .options(options).current(options[0]))
    hostname = (dashboards.TextBoxVariable("dcgm_hostname").label("DCGM Hostname (regex)")
                .default_value(".+")
                .current(model.VariableOption(selected=True, text=".+", value=".+")))
    return [datasource, job, source, hostname]


def dashboard(s: Scenario, source: Source = Source()) -> dashboards.Dashboard:
    """The dashboard builder for ``s`` (``to_grafana`` serialises it)."""
    ids = _Ids()
    summary = layout_summary(s)
    planned_step = f"max(workbench_planned_step_seconds{{{JOB}}} > 0)"
    planned_peak = (f"max(sum without (kind) (workbench_planned_memory_bytes{{{JOB}, "
                    f'kind=~"{"|".join(PEAK_KINDS)}"}}))')
    ranks = f"count(count by (rank) (workbench_comm_bytes_total{{{JOB}}}))"
    steps_per_s = f"avg(rate(workbench_steps_total{{{JOB}}}[{RATE}]))"
    # a stable uid (Grafana's limit is 40 characters): re-importing the same scenario's
    # dashboard replaces it instead of adding a copy
    uid = "workbench-" + hashlib.sha1(f"{model_label(s)} {summary}".encode()).hexdigest()[:12]

    d = (dashboards.Dashboard(f"Workbench: {model_label(s)} on {s.hardware.world} GPUs")
         .uid(uid).description(f"{model_label(s)}: {summary} (from {source.path})")
         .tags(["workbench", "distributed-training"]).editable().timezone("browser")
         .time("now-1h", "now").refresh("30s")
         .tooltip(model.DashboardCursorSync.CROSSHAIR).variables(_variables()))

    # measured and planned, shown as a last value (stat) and over time (series)
    mfu = [(f"max(workbench_mfu_ratio{{{JOB}}})", "measured"),
           (f"max(workbench_planned_mfu_ratio{{{JOB}}} > 0)", "planned")]
    tokens = [(f"max(workbench_tokens_per_second{{{JOB}}})", "measured"),
              (f"max(workbench_planned_tokens_per_second{{{JOB}}} > 0)", "planned")]
    d = d.with_row(dashboards.Row("Run against plan").id(ids()))
    d = d.with_panel(_stat(
        ids, "MFU: last step and plan", "percentunit",
        "Model FLOPs utilisation of the last step, and the estimate's.", mfu))
    d = d.with_panel(_stat(
        ids, "Tokens/s: last step and plan", "short",
        "Tokens per second of the last step (all ranks together), and the estimate's.", tokens))
    d = d.with_panel(_stat(
        ids, "Slowest rank's step time / plan", "percentunit",
        f"Red from {STEP_TIME_OVER_PLAN:g} x plan, the WorkbenchStepTimeAbovePlan alert.",
        [(f"max(workbench_step_seconds{{{JOB}}}) / {planned_step}", "slowest / plan")],
        limit=STEP_TIME_OVER_PLAN))
    d = d.with_panel(_stat(
        ids, "Since the last step", "s",
        f"Seconds since any rank last finished a step; red from {NO_STEP_SECONDS} s, the "
        "WorkbenchNoStep alert.",
        [(f"time() - max(workbench_last_step_timestamp_seconds{{{JOB}}})", "since last step")],
        limit=NO_STEP_SECONDS))
    d = d.with_panel(_series(
        ids, "Step time per rank vs plan", "s",
        "Seconds of each rank's last optimizer step, the estimate's step time, and the alert "
        f"threshold ({STEP_TIME_OVER_PLAN:g} x plan).",
        [(f"workbench_step_seconds{{{JOB}}}", "rank {{rank}}"),
         (planned_step, "planned"),
         (f"{STEP_TIME_OVER_PLAN:g} * {planned_step}", f"alert ({STEP_TIME_OVER_PLAN:g} x plan)")]))
    d = d.with_panel(_series(
        ids, "Tokens/s vs plan", "short", "Tokens per second of each step, all ranks together.",
        tokens))
    d = d.with_panel(_series(
        ids, "MFU vs plan", "percentunit",
        "Model FLOPs / (seconds x GPUs x peak FLOP/s), measured and planned.", mfu))
    d = d.with_panel(_series(
        ids, "Loss", "none", "Training loss of the last step.",
        [(f"max(workbench_loss{{{JOB}}})", "loss")]))

    d = d.with_row(dashboards.Row("Memory").id(ids()))
    d = d.with_panel(_series(
        ids, "Memory per rank vs plan", "bytes",
        "kind=peak: params + grads + optimizer + activations of one microbatch, as the ranks "
        "measure them; it excludes buffers, so the like-with-like plan is the plan without "
        "buffers (what the WorkbenchMemoryAbovePlan alert compares). kind=device: what "
        "nvidia-smi shows (on a GPU), compared with the plan's total and the capacity.",
        [(f'workbench_memory_bytes{{{JOB}, kind="peak"}}', "rank {{rank}} peak"),
         (f'workbench_memory_bytes{{{JOB}, kind="device"}}', "rank {{rank}} device"),
         (f'max(workbench_planned_memory_bytes{{{JOB}, kind="total"}})', "planned total"),
         (planned_peak, "planned without buffers"),
         (f"max(workbench_gpu_capacity_bytes{{{JOB}}} > 0)", "GPU capacity")], width=24))

    d = d.with_row(dashboards.Row("Traffic per parallel dimension").id(ids()))
    d = d.with_panel(_series(
        ids, "Traffic per GPU by dimension vs plan", "Bps",
        "Measured: bytes/s every rank moved in each dimension, over the ranks reporting (one "
        "GPU's mean). Planned: the plan's bytes per step of a GPU of pipeline rank 0 times the "
        "measured steps/s, so the two differ only when bytes per step do.",
        [(f"sum by (dim) (rate(workbench_comm_bytes_total{{{JOB}}}[{RATE}])) "
          f"/ on() group_left() {ranks}", "{{dim}} measured"),
         ("sum by (dim) (max by (dim, collective) "
          f"(workbench_planned_comm_bytes_per_step{{{JOB}}})) * on() group_left() {steps_per_s}",
          "{{dim}} planned")], width=24))

    d = d.with_row(dashboards.Row("GPU telemetry (${gpu_source:text})").id(ids()))
    nvml_gpu = "{{instance}} gpu {{gpu}}"
    dcgm_gpu = "{{Hostname}} gpu {{gpu}}"
    d = d.with_panel(_gpu(
        ids, "GPU temperature", "celsius",
        f"Red from {GPU_TEMPERATURE_CELSIUS:g} C, the WorkbenchGPUTemperatureHigh alert.",
        [(f"workbench_gpu_temperature_celsius{{{JOB}}}", nvml_gpu)],
        [(f"DCGM_FI_DEV_GPU_TEMP{{{DCGM}}}", dcgm_gpu)], limit=GPU_TEMPERATURE_CELSIUS))
    d = d.with_panel(_gpu(
        ids, "GPU power", "watt", "Power draw.",
        [(f"workbench_gpu_power_watts{{{JOB}}}", nvml_gpu)],
        [(f"DCGM_FI_DEV_POWER_USAGE{{{DCGM}}}", dcgm_gpu)]))
    d = d.with_panel(_gpu(
        ids, "GPU memory used", "bytes",
        "Device memory in use (DCGM_FI_DEV_FB_USED is in MiB, converted to bytes).",
        [(f"workbench_gpu_memory_used_bytes{{{JOB}}}", nvml_gpu)],
        [(f"DCGM_FI_DEV_FB_USED{{{DCGM}}} * {MIB}", dcgm_gpu)]))
    d = d.with_panel(_gpu(
        ids, "GPU utilisation", "percentunit",
        "Share of the sample period a kernel ran (DCGM_FI_DEV_GPU_UTIL is in %, divided by 100).",
        [(f"workbench_gpu_utilization_ratio{{{JOB}}}", nvml_gpu)],
        [(f"DCGM_FI_DEV_GPU_UTIL{{{DCGM}}} / 100", dcgm_gpu)]))
    d = d.with_panel(_gpu(
        ids, "PCIe throughput", "Bps", "PCIe bytes per second, tx and rx.",
        [(f"workbench_gpu_pcie_bytes_per_second{{{JOB}}}", nvml_gpu + " {{direction}}")],
        [(f"DCGM_FI_PROF_PCIE_TX_BYTES{{{DCGM}}}", dcgm_gpu + " tx"),
         (f"DCGM_FI_PROF_PCIE_RX_BYTES{{{DCGM}}}", dcgm_gpu + " rx")]))
    d = d.with_panel(_gpu(
        ids, "NVLink throughput", "Bps",
        "NVLink bytes per second, tx and rx (the workbench's series is a counter, hence rate(); "
        "DCGM's profiling fields are already per second).",
        [(f"rate(workbench_gpu_nvlink_bytes_total{{{JOB}}}[{RATE}])",
          nvml_gpu + " {{direction}}")],
        [(f"DCGM_FI_PROF_NVLINK_TX_BYTES{{{DCGM}}}", dcgm_gpu + " tx"),
         (f"DCGM_FI_PROF_NVLINK_RX_BYTES{{{DCGM}}}", dcgm_gpu + " rx")]))
    return d


def to_grafana(s: Scenario, source: Source = Source()) -> str:
    """The dashboard JSON for ``s`` (import it in Grafana: Dashboards > New > Import)."""
    return json.dumps(dashboard(s, source).build(), cls=JSONEncoder, indent=2) + "\n"

"""Prometheus alerting rules (YAML, one group) that hold a run to its plan: memory above plan,
step time above plan, a hot GPU, a run that stopped stepping.

The expressions use only the series of ``workbench.monitor.metrics.METRICS``; the plan is the
``workbench_planned_*`` series the exporter sets from the scenario's estimate (or, on a trial,
from the trial's prediction). Load the file with ``rule_files:`` in prometheus.yml
(docs/monitoring-artefacts.md); ``promtool check rules`` accepts it
(tests/test_monitoring_artefacts.py).

Plan series are matched to the run's series ``on(job)``: one scrape job per run, whichever of
its instances exposes the plan (every rank may expose it; ``max by (job)`` collapses the copies).
"""
from __future__ import annotations

from dataclasses import dataclass

import yaml

from workbench.export.common import Source, layout_summary, model_label
from workbench.scenario.types import Scenario

# Thresholds, from the monitoring issue ("Monitoring: Prometheus metrics against the plan, GPU
# telemetry, a Grafana dashboard and alert rules"): "memory above plan by more than 10 %",
# "step time above 1.25 x plan", "GPU temperature above 85 C", "no step for 5 minutes".
MEMORY_OVER_PLAN = 1.10        # measured peak / planned (like with like, see below)
STEP_TIME_OVER_PLAN = 1.25     # a rank's step seconds / planned step seconds
GPU_TEMPERATURE_CELSIUS = 85.0
NO_STEP_SECONDS = 300          # 5 minutes without a finished step

# How long a condition must hold before the alert fires (Prometheus ``for:``). Not in the
# issue: chosen so that one slow step (a checkpoint save, an evaluation) or a brief thermal
# spike does not page, while memory above plan, already a peak, only waits out one scrape.
MEMORY_FOR = "1m"
STEP_TIME_FOR = "5m"
TEMPERATURE_FOR = "5m"
NO_STEP_FOR = "0m"             # the expression itself waits NO_STEP_SECONDS

# The plan's kinds that the measured ``kind="peak"`` sums (metrics.py: peak = params + grads
# + optimizer + activations of one microbatch). The plan's ``total`` adds buffers (FSDP
# gather units, NCCL and TP/CP/EP staging, the allocator allowance), which a trial's hooks do
# not see: comparing the measured peak with the plan's total would hide an overrun of up to
# the buffers' size. So peak is compared with the same four kinds of the plan.
PEAK_KINDS = ("params", "grads", "optimizer", "activations")


@dataclass(frozen=True)
class AlertRule:
    """One alerting rule as Prometheus's rule file spells it."""

    alert: str
    expr: str
    duration: str              # ``for:``
    severity: str
    summary: str
    description: str

    def as_dict(self) -> dict:
        """The rule as one item of a group's ``rules:`` list."""
        return {"alert": self.alert, "expr": self.expr, "for": self.duration,
                "labels": {"severity": self.severity},
                "annotations": {"summary": self.summary, "description": self.description}}


def _number(x: float) -> str:
    """A threshold as PromQL and annotations write it: ``85`` not ``85.0``, ``1.1``."""
    return f"{x:g}"


def alert_rules() -> list[AlertRule]:
    """The rules, built from the thresholds above (the same for every scenario: the plan
    they compare with is a series, set by the exporter from the scenario's estimate)."""
    planned_peak = ("max by (job) (sum without (kind) (workbench_planned_memory_bytes"
                    f'{{kind=~"{"|".join(PEAK_KINDS)}"}}))')
    over_mem = round((MEMORY_OVER_PLAN - 1) * 100)
    return [
        AlertRule(
            "WorkbenchMemoryAbovePlan",
            f'(workbench_memory_bytes{{kind="peak"}} > on(job) group_left() '
            f"({_number(MEMORY_OVER_PLAN)} * {planned_peak})) or "
            f'(workbench_memory_bytes{{kind="allocated"}} > on(job) group_left() '
            f"({_number(MEMORY_OVER_PLAN)} * max by (job) "
            f'(workbench_planned_memory_bytes{{kind="total"}})))',
            MEMORY_FOR, "warning",
            "Rank {{ $labels.rank }} memory is more than "
            f"{over_mem} % above plan",
            "Rank {{ $labels.rank }} of job {{ $labels.job }} peaked at "
            "{{ $value | humanize1024 }}B, more than " f"{over_mem} % above the plan's "
            "params + grads + optimizer + activations. Like with like: the measured peak "
            "(kind=peak) is the sum of those four kinds and excludes buffers (on a trial the "
            "hooks do not see them), so it is compared with the plan's same four kinds, not "
            "with its total; on a GPU run (StepReporter) the allocator's peak allocated "
            "(kind=allocated) holds everything the plan's total does; kind=device "
            "(nvidia-smi) also holds the CUDA context, which the plan does not count."),
        AlertRule(
            "WorkbenchStepTimeAbovePlan",
            "workbench_step_seconds > on(job) group_left() "
            f"({_number(STEP_TIME_OVER_PLAN)} * max by (job) "
            "(workbench_planned_step_seconds > 0))",
            STEP_TIME_FOR, "warning",
            "Rank {{ $labels.rank }} step time is above "
            f"{_number(STEP_TIME_OVER_PLAN)} x plan",
            "Rank {{ $labels.rank }} of job {{ $labels.job }} took "
            "{{ $value | humanizeDuration }} per step, above "
            f"{_number(STEP_TIME_OVER_PLAN)} x the planned step time, for {STEP_TIME_FOR}. "
            "Without a planned step time (a trial on a CPU exports none) it never fires."),
        AlertRule(
            "WorkbenchGPUTemperatureHigh",
            f"workbench_gpu_temperature_celsius > {_number(GPU_TEMPERATURE_CELSIUS)}",
            TEMPERATURE_FOR, "warning",
            "GPU {{ $labels.gpu }} on {{ $labels.instance }} is above "
            f"{_number(GPU_TEMPERATURE_CELSIUS)} C",
            "GPU {{ $labels.gpu }} on {{ $labels.instance }} has been at {{ $value }} C "
            f"(above {_number(GPU_TEMPERATURE_CELSIUS)} C) for {TEMPERATURE_FOR}: it may "
            "throttle its clocks, and the step time with them."),
        AlertRule(
            "WorkbenchNoStep",
            f"time() - workbench_last_step_timestamp_seconds > {NO_STEP_SECONDS}",
            NO_STEP_FOR, "critical",
            "Rank {{ $labels.rank }} has not finished a step for "
            f"{NO_STEP_SECONDS // 60} minutes",
            "Rank {{ $labels.rank }} of job {{ $labels.job }} last finished a step "
            "{{ $value | humanizeDuration }} ago: the run is hung, stalled on a collective, "
            "or ended with its exporter still serving."),
    ]


def to_prometheus_rules(s: Scenario, source: Source = Source()) -> str:
    """The rules file (YAML) for ``s``'s run: a header naming the scenario, one group."""
    doc = {"groups": [{"name": "workbench", "rules": [r.as_dict() for r in alert_rules()]}]}
    header = (f"# Prometheus alerting rules for {model_label(s)}: {layout_summary(s)}\n"
              f"# from {source.path}; load with rule_files: in prometheus.yml, check with\n"
              "# promtool check rules FILE (docs/monitoring-artefacts.md)\n")
    # width: keep each PromQL expression on one line (PyYAML folds at 80 columns otherwise)
    return header + yaml.safe_dump(doc, sort_keys=False, width=10_000, allow_unicode=True)

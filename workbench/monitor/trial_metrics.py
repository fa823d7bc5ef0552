"""A running trial's figures as Prometheus series: every rank's step time, memory and traffic
as the ranks report them, against the trial's plan — the estimator's prediction for the
scaled-down scenario the trial runs (``workbench.trial.prediction``).

The plan of a trial is its memory and traffic. A trial on GPUs (a slice of the model at its
real widths, ``trial/slice.py``) has a step-time plan too: the estimate of that slice on that
GPU, exported as the planned step time, tokens/s and MFU (the Grafana panel "step time against
plan" and the alert rules read it). A trial of the scaled-down model on the CPU has none: the
scenario's GPU estimate does not describe this CPU (``workbench report`` compares step time on
a calibrated profile).
"""
from __future__ import annotations

from workbench.trial import prediction as trial_prediction
from workbench.monitor.metrics import MetricSet
from workbench.scenario.types import Scenario


class TrialMetrics:
    """Feeds a ``MetricSet`` from the events of one trial (``run_trial(on_event=...)``)."""

    def __init__(self, trial: Scenario, metrics: MetricSet | None = None,
                 on_gpu: bool = False) -> None:
        self.trial = trial
        self.metrics = metrics or MetricSet()
        self._step_times: dict[int, dict[int, float]] = {}
        if on_gpu:     # the slice's estimate on its GPU: step time, tokens/s, MFU, memory
            from workbench.estimate import estimate

            self.metrics.set_plan(estimate(trial_prediction.as_run(trial)))
            return
        predicted = trial_prediction.predicted_bytes(trial)
        worst = max(predicted.values(), key=lambda p: p["peak"])
        self.metrics.set_planned_memory({**{k: worst[k] for k in (
            "params", "grads", "optimizer", "activations")}, "total": worst["peak"]})

    def observe(self, ev: dict) -> None:
        """One trial event: ``start`` sets the planned traffic for the backend, ``step`` a
        rank's figures; when every rank has finished a step, tokens/s of that step."""
        if ev["type"] == "start":
            comm = trial_prediction.predicted_comm(self.trial, ev["backend"])
            self.metrics.set_planned_comm(comm.get(0, {}))
        elif ev["type"] == "step":
            memory = {k: ev.get(k) for k in ("params", "grads", "optimizer")}
            memory["activations"] = ev.get("activations_per_microbatch")
            if all(v is not None for v in memory.values()):
                memory["peak"] = sum(memory.values())
            # a GPU rank: the allocator's peaks and what nvidia-smi shows (trial/device.py)
            for kind, key in (("allocated", "allocated"), ("reserved", "reserved"),
                              ("device", "device_memory")):
                if ev.get(key) is not None:
                    memory[kind] = ev[key]
            self.metrics.record_step(ev["rank"], ev["time"], ev.get("at", 0.0), memory,
                                     ev.get("comm"), ev.get("loss"))
            times = self._step_times.setdefault(ev["step"], {})
            times[ev["rank"]] = ev["time"]
            if len(times) == self.trial.parallel.world:   # the slowest rank ends the step
                tr = self.trial.training
                self.metrics.set_throughput(tr.seq_len * tr.global_batch / max(times.values()))

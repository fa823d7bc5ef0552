"""One trial against the estimate: every predicted figure next to its measurement, with the error.

Rows (``Row``), per rank and component:
- ``params``, ``grads``, ``optimizer``: bytes of the rank's local tensors; exact.
- ``activations``: bytes saved for backward per microbatch (the counted step); within 5 %.
- ``comm <dim> <collective> bytes|count``: every rank's traffic per parallel dimension (flight
  recorder, profiler, the ring's own count) against its own prediction; exact. Expert-parallel
  payloads follow the routing, so they compare as the sum over ranks against the sum of the
  balanced predictions.
- ``step time``: the median over the unflagged steady steps (not the first, not the one that
  carried the measurement hooks) of the slowest rank's step, against the estimator on the
  machine's calibrated profile; within 25 %. Only when a profile is given.
"""
from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass

from workbench.trial.result import TrialResult

ACTIVATION_BOUND = 0.05
STEP_TIME_BOUND = 0.25


@dataclass(frozen=True)
class Row:
    """One predicted figure and its measurement."""

    rank: int | None          # None: a whole-trial row (step time, EP payload sums)
    component: str
    predicted: float
    measured: float | None
    bound: float              # 0: must be equal; else the largest allowed |relative error|
    unit: str = "B"

    @property
    def error(self) -> float | None:
        """(measured - predicted) / predicted; 0 when both are 0."""
        if self.measured is None:
            return None
        if self.predicted == 0:
            return 0.0 if self.measured == 0 else float("inf")
        return (self.measured - self.predicted) / self.predicted

    @property
    def kind(self) -> str:
        return "exact" if self.bound == 0 else "tolerance"

    @property
    def ok(self) -> bool:
        if self.measured is None:
            return False
        if self.bound == 0:
            return abs(self.measured - self.predicted) <= 1e-9 * max(1.0, abs(self.predicted))
        return abs(self.error) <= self.bound


def steady_step_time(result: TrialResult) -> tuple[float, int]:
    """(median over steady, unmeasured steps of the slowest rank's step time, steps used)."""
    by_step: dict[int, list[float]] = {}
    for e in result.steps:
        if e["step"] >= 1 and not e.get("measured"):
            by_step.setdefault(e["step"], []).append(e["time"])
    full = [max(v) for s, v in sorted(by_step.items()) if len(v) == result.world_size]
    if not full:
        raise ValueError("the trial has no steady unmeasured step: run at least 3 steps")
    return statistics.median(full), len(full)


def predicted_step_time(result: TrialResult, profile) -> float:
    """The estimator's step time for what the trial ran, on the calibrated profile. On a
    machine whose ranks fill its cores nothing overlaps, so the step's communication is the
    estimator's traffic *as the trial runs it* (``trial.prediction.predicted_comm``: ZeRO-1 as
    PyTorch's ZeroRedundancyOptimizer, reduce-scatters as gloo runs them), each collective timed
    on the profile, in place of the estimator's own engine-style traffic."""
    from workbench.hardware.calibration import profile_gpu
    from workbench.estimate.time import kernels as eff
    from workbench.estimate.single import estimate_step_time
    from workbench.estimate.time.step_time import serial_comm_time
    from workbench.trial.prediction import as_run

    trial = as_run(result.scenario)
    hw = dataclasses.replace(trial.hardware, gpu=profile_gpu(profile))
    est = estimate_step_time(dataclasses.replace(trial, hardware=hw))
    if eff.overlap(hw):
        return est.step
    ran = max((sum(serial_comm_time(v, trial.parallel, hw).values())
               for v in result.predicted_comm.values()), default=0.0)   # the slowest rank
    return est.step - sum(est.comm_exposed.values()) + ran


def compare(result: TrialResult, profile=None) -> list[Row]:
    """Every row of the comparison (module docstring); ``profile`` adds the step-time row."""
    if result.error is not None:
        raise ValueError(f"the trial failed: {result.error}")
    rows = compare_ranks(result.ranks())
    if profile is not None:
        t, _ = steady_step_time(result)
        rows.append(Row(None, "step time", predicted_step_time(result, profile), t,
                        STEP_TIME_BOUND, unit="s"))
    return rows


def compare_ranks(ranks: list[dict]) -> list[Row]:
    """The byte rows of a finished trial's ``ranks`` (``TrialResult.ranks()``, also the
    ``ranks`` of its JSON form): per rank, model states, activations and every collective's
    count and bytes per dimension (expert-parallel payloads as their sum over the ranks)."""
    rows: list[Row] = []
    ep_sums: dict[str, list[float]] = {}
    for r in ranks:
        if not r["predicted"]:          # a rank that never finished a step (failed trial)
            continue
        rank = r["rank"]
        for key in ("params", "grads", "optimizer"):
            rows.append(Row(rank, key, r["predicted"][key], r["measured"][key], 0.0))
        rows.append(Row(rank, "activations", r["predicted"]["activations"],
                        r["measured"]["activations"], ACTIVATION_BOUND))
        measured = r["comm"]["measured"] or {}
        predicted = r["comm"]["predicted"]
        for dim, ops in sorted(predicted.items()):
            for kind, want in sorted(ops.items()):
                got = measured.get(dim, {}).get(kind)
                name = f"comm {dim} {kind}"
                rows.append(Row(rank, f"{name} count", want["count"],
                                None if got is None else got["count"], 0.0, unit=""))
                if dim == "ep":     # routing decides each rank's share: compare the sums
                    pair = ep_sums.setdefault(kind, [0.0, 0.0])
                    pair[0] += want["bytes"]
                    pair[1] += 0.0 if got is None else got["bytes"]
                else:
                    rows.append(Row(rank, f"{name} bytes", want["bytes"],
                                    None if got is None else got["bytes"], 0.0))
        for dim, ops in sorted(measured.items()):     # traffic the estimate does not predict
            for kind, got in sorted(ops.items()):
                if kind not in predicted.get(dim, {}):
                    rows.append(Row(rank, f"comm {dim} {kind} count", 0, got["count"], 0.0,
                                    unit=""))
    for kind, (want, got) in sorted(ep_sums.items()):
        rows.append(Row(None, f"comm ep {kind} bytes (sum over ranks)", want, got, 0.0))
    return rows

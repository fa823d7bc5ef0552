"""One trial against the estimate: every predicted figure next to its measurement, with the error.

Rows (``Row``), per rank and component:
- ``params``, ``grads``, ``optimizer``: bytes of the rank's local tensors; exact.
- ``activations``: bytes saved for backward per microbatch (the counted step); within 5 %.
- ``comm <dim> <collective> bytes|count``: rank 0's traffic per parallel dimension (flight
  recorder, profiler, the ring's own count); exact. Expert-parallel payloads follow the
  routing, so they compare as the sum over ranks against the balanced prediction x ranks.
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
    estimator's traffic *as the trial runs it* (``trial.predicted_comm``: ZeRO-1 as PyTorch's
    ZeroRedundancyOptimizer, reduce-scatters as gloo runs them), each collective timed on the
    profile, in place of the estimator's own engine-style traffic."""
    from workbench.calibrate.profile import profile_gpu
    from workbench.estimate import efficiency as eff
    from workbench.estimate.step_time import estimate_step_time, serial_comm_time
    from workbench.trial import as_run

    trial = as_run(result.scenario)
    hw = dataclasses.replace(trial.hardware, gpu=profile_gpu(profile))
    est = estimate_step_time(dataclasses.replace(trial, hardware=hw))
    if eff.overlap(hw):
        return est.step
    ran = serial_comm_time(result.predicted_comm, trial.parallel, hw)
    return est.step - sum(est.comm_exposed.values()) + sum(ran.values())


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
    ``ranks`` of its JSON form): model states and activations per rank, rank 0's traffic."""
    rows: list[Row] = []
    if not ranks:
        return rows
    for r in ranks:
        if not r["predicted"]:          # a rank that never finished a step (failed trial)
            continue
        for key in ("params", "grads", "optimizer"):
            rows.append(Row(r["rank"], key, r["predicted"][key], r["measured"][key], 0.0))
        rows.append(Row(r["rank"], "activations", r["predicted"]["activations"],
                        r["measured"]["activations"], ACTIVATION_BOUND))
    measured = ranks[0]["comm"]["measured"] or {}
    for dim, ops in sorted(ranks[0]["comm"]["predicted"].items()):
        for kind, want in sorted(ops.items()):
            got = measured.get(dim, {}).get(kind)
            name = f"comm {dim} {kind}"
            rows.append(Row(0, f"{name} count", want["count"],
                            None if got is None else got["count"], 0.0, unit=""))
            if dim == "ep":     # routing decides each rank's share: compare the sums
                total = sum(x["comm"]["measured"].get(dim, {}).get(kind, {}).get("bytes", 0)
                            for x in ranks)
                rows.append(Row(None, f"{name} bytes (sum over ranks)",
                                want["bytes"] * len(ranks), total, 0.0))
            else:
                rows.append(Row(0, f"{name} bytes", want["bytes"],
                                None if got is None else got["bytes"], 0.0))
    for dim, ops in sorted(measured.items()):     # traffic the estimate does not predict
        for kind, got in sorted(ops.items()):
            if kind not in ranks[0]["comm"]["predicted"].get(dim, {}):
                rows.append(Row(0, f"comm {dim} {kind} count", 0, got["count"], 0.0, unit=""))
    return rows

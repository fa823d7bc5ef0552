"""The analytic estimator: scenario -> Estimate.

One module per cost: ``params`` (parameter counts, sharding, pipeline placement),
``model_states`` (ZeRO), ``activations`` (Korthikanti et al. 2022), ``buffers``, ``flops``,
``efficiency`` (roofline), ``comm`` (collectives on link tiers), ``step_time`` (block costs and
per-step collectives); pipeline schedules are ``scenario.schedules``. ``cost_model`` composes
them, once, for a ``grid`` of layouts; ``single`` reads a grid of one row into the ``memory``
and ``step_time`` records; ``run_level`` (throughput, MFU, power, energy, cost) and
``build_checks`` follow.
"""
from __future__ import annotations

from workbench.estimate.build_checks import build_checks
from workbench.estimate.memory import MemoryEstimate
from workbench.estimate.result import Estimate
from workbench.estimate.run_level import estimate_run
from workbench.estimate.single import estimate_memory, evaluate_scenario, memory_of, step_time_of
from workbench.scenario.types import Scenario


def estimate(scenario: Scenario) -> Estimate:
    """Estimate a validated scenario: memory, step time, run-level figures, build checks."""
    ev = evaluate_scenario(scenario)
    mem = memory_of(scenario, ev)
    step = step_time_of(scenario, ev)
    run = estimate_run(scenario, step)
    checks = build_checks(scenario, mem)
    warnings = list(mem.warnings) + [f"build check {c.name}: {c.reason}" for c in checks
                                     if c.status == "fail"]
    return Estimate(scenario=scenario, memory=mem, time=step, run=run, checks=checks,
                    warnings=warnings)


__all__ = ["Estimate", "MemoryEstimate", "estimate", "estimate_memory"]

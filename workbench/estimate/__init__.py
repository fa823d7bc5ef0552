"""The analytic estimator: scenario -> Estimate.

One module per cost: ``params`` (parameter counts and sharding), ``model_states`` (ZeRO),
``activations`` (Korthikanti et al. 2022), ``pipeline`` (schedules), ``buffers``, ``memory``
composing them per GPU; ``flops``, ``efficiency`` (roofline), ``comm`` (collectives on link
tiers), ``step_time``, ``run_level`` (throughput, MFU, power, energy, cost), ``build_checks``.
"""
from __future__ import annotations

from workbench.estimate.build_checks import build_checks
from workbench.estimate.memory import MemoryEstimate, estimate_memory
from workbench.estimate.result import Estimate
from workbench.estimate.run_level import estimate_run
from workbench.estimate.step_time import estimate_step_time
from workbench.scenario.types import Scenario


def estimate(scenario: Scenario) -> Estimate:
    """Estimate a validated scenario: memory, step time, run-level figures, build checks."""
    mem = estimate_memory(scenario)
    step = estimate_step_time(scenario)
    run = estimate_run(scenario, step)
    checks = build_checks(scenario, mem)
    warnings = list(mem.warnings) + [f"build check {c.name}: {c.reason}" for c in checks
                                     if c.status == "fail"]
    return Estimate(scenario=scenario, memory=mem, time=step, run=run, checks=checks,
                    warnings=warnings)


__all__ = ["Estimate", "MemoryEstimate", "estimate", "estimate_memory"]

"""The analytic estimator: scenario -> Estimate.

One module per cost: ``params`` (parameter counts and sharding), ``model_states`` (ZeRO),
``activations`` (Korthikanti et al. 2022), ``pipeline`` (schedules), ``buffers``, and
``memory`` composing them per GPU.
"""
from __future__ import annotations

from workbench.estimate.memory import MemoryEstimate, estimate_memory
from workbench.estimate.result import Estimate
from workbench.spec.scenario import Scenario


def estimate(scenario: Scenario) -> Estimate:
    """Estimate a validated scenario."""
    mem = estimate_memory(scenario)
    return Estimate(scenario=scenario, memory=mem, warnings=list(mem.warnings))


__all__ = ["Estimate", "MemoryEstimate", "estimate", "estimate_memory"]

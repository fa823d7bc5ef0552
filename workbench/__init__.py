"""Distributed Training Workbench: plan, estimate and prove distributed training layouts.

Importing this package is light (no torch, no plotting): the data flow is
``scenario`` -> ``estimate`` / ``plan`` / ``trial`` -> result -> ``render`` / widgets.
"""
from workbench.errors import Problem, ScenarioError

__version__ = "0.1.0"


def load_scenario(path, overrides=None):
    """Read, override and validate a scenario file (see ``workbench.scenario``)."""
    from workbench.scenario import load_scenario as _load

    return _load(path, overrides)


def parse_scenario(doc):
    """Validate a scenario document (dict)."""
    from workbench.scenario import parse_scenario as _parse

    return _parse(doc)


def estimate_scenario(scenario):
    """Estimate a validated scenario (``workbench.estimate.estimate``; the name differs because
    ``workbench.estimate`` is the estimator's package)."""
    from workbench.estimate import estimate as _estimate

    return _estimate(scenario)


__all__ = ["Problem", "ScenarioError", "load_scenario", "parse_scenario", "estimate_scenario",
           "__version__"]

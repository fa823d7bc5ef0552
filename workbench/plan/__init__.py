"""The planner: search every parallel layout of a scenario's model on its hardware, rank them,
explain the winner, and draw the Pareto fronts (contract 4's ``workbench plan``).

Flow: ``space`` enumerates candidate layouts per pipeline schedule, ``search`` screens them with
the rule table (``scenario.rules.layout_mask``) and evaluates them with the cost model
(``estimate.cost_model.compose``, the one a single estimate runs),
``explain`` compares the best with the next ones term by term, ``pareto`` keeps the layouts no
other beats on both axes. This package imports numpy and pandas, never widgets.
"""
from workbench.plan.constraints import Constraints
from workbench.plan.result import PlanResult
from workbench.plan.search import plan

__all__ = ["Constraints", "PlanResult", "plan"]

"""The scenario's cross-field rules: one table (``table.RULES``), filled by the rule modules
imported below, in the order docs/scenario.md lists them. A new rules module registers with
``table.rule`` / ``table.layout_rule`` and is added to the imports here.
"""
from workbench.scenario.rules import model, hardware, layout, engine, hf, training  # noqa: F401
from workbench.scenario.rules.engine import CLASSIC_OPTIMIZERS, engine_switches  # noqa: F401
from workbench.scenario.rules.table import (
    DEGREES, RULES, Condition, Layouts, Rule, allowed_values, check_rules, engine_allows,
    engine_problems, layout_mask, layout_masks, min_microbatches,
)
from workbench.scenario.rules.trial import TRIAL_LIMITS, trial_problems

__all__ = ["CLASSIC_OPTIMIZERS", "DEGREES", "RULES", "TRIAL_LIMITS", "Condition", "Layouts",
           "Rule", "allowed_values", "check_rules", "engine_allows", "engine_problems",
           "layout_mask", "layout_masks", "min_microbatches", "trial_problems"]

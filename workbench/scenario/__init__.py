"""Scenario: the validated description of hardware, model, parallel layout and training."""
from workbench.scenario.io import apply_overrides, dump_scenario, load_scenario, read_document
from workbench.scenario.types import Hardware, Parallel, Scenario, Training
from workbench.scenario.validate import parse_scenario

__all__ = ["Scenario", "Hardware", "Parallel", "Training", "parse_scenario", "load_scenario",
           "read_document", "apply_overrides", "dump_scenario"]

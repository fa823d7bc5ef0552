"""Scenario: the validated description of hardware, model, parallel layout and training."""
from workbench.spec.io import apply_overrides, dump_scenario, load_scenario, read_document
from workbench.spec.scenario import Hardware, Parallel, Scenario, Training
from workbench.spec.validate import parse_scenario

__all__ = ["Scenario", "Hardware", "Parallel", "Training", "parse_scenario", "load_scenario",
           "read_document", "apply_overrides", "dump_scenario"]

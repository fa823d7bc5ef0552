"""The scenario editor: drives the backend, shows its numbers, keeps the last valid state."""
from __future__ import annotations

import yaml

from tests.conftest import ROOT
from widgets import ScenarioEditor
from workbench.estimate import estimate
from workbench.spec import load_scenario
from workbench.units import GB


def test_picking_an_example_shows_the_backends_numbers():
    ed = ScenarioEditor()
    ed.picker.value = "llama3-8b-8xh100"
    expected = estimate(load_scenario(ROOT / "examples/llama3-8b-8xh100.yaml"))
    assert ed.estimate.memory.per_gpu == expected.memory.per_gpu
    assert f"{expected.memory.per_gpu.total / GB:,.2f}" in ed.table.value
    assert "pp rank 0" in ed.table.value and ed.error is None


def test_editing_a_degree_reestimates():
    ed = ScenarioEditor()
    ed.picker.value = "llama3-8b-8xh100"
    doc = yaml.safe_load(ed.text.value)
    doc["parallel"].update({"dp": 4, "tp": 2})
    ed.text.value = yaml.safe_dump(doc)
    assert ed.scenario.parallel.tp == 2
    assert "tp=2" not in ed.table.value  # the table shows numbers, the scenario holds the layout
    assert ed.estimate.memory.per_gpu.total == estimate(ed.scenario).memory.per_gpu.total


def test_invalid_input_shows_the_message_and_keeps_the_last_table():
    ed = ScenarioEditor()
    ed.picker.value = "llama3-8b-8xh100"
    table, est = ed.table.value, ed.estimate
    doc = yaml.safe_load(ed.text.value)
    doc["parallel"]["tp"] = 3
    ed.text.value = yaml.safe_dump(doc)
    assert "parallel" in ed.error and "must equal" in ed.error
    assert "wb-error" in ed.message.value and ed.table.value == table and ed.estimate is est
    ed.text.value = "hardware: [oops"
    assert "not valid YAML at line" in ed.error


def test_yaml_export_round_trips():
    ed = ScenarioEditor()
    from workbench.spec import parse_scenario

    assert parse_scenario(yaml.safe_load(ed.yaml())) == ed.scenario


def test_table_shows_step_time_and_build_checks_from_the_backend():
    ed = ScenarioEditor()
    ed.picker.value = "brief-8xh200-70b"
    est = ed.estimate
    assert f"Step {est.time.step:,.2f} s" in ed.table.value
    assert "FAIL pcie_lanes" in ed.table.value

"""Published peak-memory measurements reproduced within the tolerance each case states
(benchmarks/memory_accuracy.py holds the cases, their sources and assumptions)."""
from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location("memory_accuracy",
                                               ROOT / "benchmarks" / "memory_accuracy.py")
accuracy = importlib.util.module_from_spec(_spec)
sys.modules["memory_accuracy"] = accuracy   # dataclasses look their module up while defining
_spec.loader.exec_module(accuracy)


def test_every_case_names_a_published_record():
    import yaml

    ids = {r["id"] for r in yaml.safe_load((ROOT / "tests/data/published_memory.yaml").read_text())}
    for case in accuracy.CASES:
        assert case.id in ids


@pytest.mark.parametrize("case", [c for c in accuracy.CASES if c.tolerance],
                         ids=lambda c: c.id)
def test_within_stated_tolerance(case):
    row = accuracy.evaluate(case)
    assert abs(row["error"]) <= case.tolerance, row


def test_every_published_oom_report_reads_as_a_scenario_and_the_clear_ones_fail():
    """benchmarks/data/published_ooms.yaml (runs that ran out of memory, benchmarks/oom_reports.py):
    each report is a valid scenario, and one whose model states alone exceed the GPU (Llama 2
    7B trained in fp32 with AdamW on one A100 80GB: 16 B per parameter) fails the verdict."""
    import yaml

    from workbench.estimate import estimate
    from workbench.scenario import parse_scenario

    data = ROOT / "benchmarks" / "data" / "published_ooms.yaml"
    reports = yaml.safe_load(data.read_text())["reports"]
    assert len(reports) >= 30
    fits = {r["id"]: estimate(parse_scenario(r["scenario"])).memory.gpu_fit for r in reports}
    assert set(fits.values()) <= {"pass", "tight", "fail"}
    assert fits["llamarecipes-llama2-7b-full-1xa100-fp32"] == "fail"

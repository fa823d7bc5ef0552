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

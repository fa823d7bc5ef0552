"""The proof: the standard matrix of trials against the estimate on a calibration of this machine.

Exact rows (model-state bytes and every collective's bytes and count, per rank) must be equal;
activations within 5 %. Step time is not asserted: it is a measurement of a shared machine
whose load nobody controls (a busy second core moved single trials to 0.40x and 3.7x of their
estimate), so its agreement is reported by ``workbench report`` and docs/proof.md, and printed
here.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys

import psutil
import pytest

from tests.conftest import ROOT
from workbench.proof import QUICK, Row, run_matrix

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def profile_file(quick_calibration):
    """The session's quick calibration of this machine (tests/conftest.py)."""
    return quick_calibration.path


def test_row_checks():
    assert Row(0, "params", 100, 100, 0.0).ok
    assert not Row(0, "params", 100, 101, 0.0).ok
    assert Row(0, "activations", 100, 104, 0.05).ok
    assert not Row(0, "activations", 100, 106, 0.05).ok
    assert Row(None, "step time", 0.1, 0.12, 0.25).error == pytest.approx(0.2)
    assert not Row(0, "comm dp all_reduce count", 1, None, 0.0).ok
    assert Row(0, "grads", 0, 0, 0.0).error == 0.0


def test_the_quick_matrix_matches_the_estimate(profile_file):
    from workbench.hardware.calibration import load_profile

    outcomes = list(run_matrix(QUICK, load_profile(profile_file), steps=8))
    assert [o.case.depth for o in outcomes].count("4-D") == 1
    assert {o.case.model for o in outcomes} == {"tiny-dense", "tiny-gpt", "tiny-moe"}
    errors = []
    for o in outcomes:
        assert o.error is None, (o.case.label, o.error)
        assert o.steps_used >= 5, o.case.label
        for r in o.rows:
            if r.kind == "exact":
                assert r.measured == pytest.approx(r.predicted, rel=1e-12, abs=1e-9), (
                    o.case.label, r)
            elif r.component == "activations":
                assert abs(r.error) <= 0.05, (o.case.label, r)
        ranks = {r.rank for r in o.rows if r.component.startswith("comm ")}
        assert ranks >= set(range(o.case.world)), o.case.label    # every rank is compared
        step = [r for r in o.rows if r.component == "step time"]
        assert len(step) == 1 and step[0].predicted > 0 and step[0].measured > 0
        errors.append(abs(step[0].error))
    print(f'step time median |error| {statistics.median(errors):.0%} (reported, not asserted)')
    assert not [c for c in psutil.Process().children(recursive=True) if c.is_running()
                and c.status() != psutil.STATUS_ZOMBIE]


def test_report_command_prints_the_matrix_and_its_summary(profile_file):
    run = subprocess.run([sys.executable, "-m", "workbench", "report", "--calibration",
                          str(profile_file), "--only", "DDP;PP 1F1B", "--steps", "5",
                          "--detail"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "step predicted" in out and "DDP" in out and "PP 1F1B" in out
    assert "comm dp all_reduce bytes" in out            # --detail: every row
    assert "trials: 2 of 2 ran" in out
    assert "exact rows" in out and "equal" in out
    run = subprocess.run([sys.executable, "-m", "workbench", "report", "--calibration",
                          str(profile_file), "--only", "DDP", "--steps", "4", "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    (trial,) = doc["trials"]
    assert trial["label"] == "DDP" and trial["error"] is None
    assert any(r["component"] == "step time" for r in trial["rows"])


@pytest.mark.parametrize("args,message", [
    (["--only", "no such trial"], "unknown trial 'no such trial'"),
    (["--steps", "3"], "argument --steps: expected a whole number 4..1,000 (a warm-up step"),
    (["--calibration", "/nonexistent.json"],
     "--calibration '/nonexistent.json': calibration file: cannot read"),
])
def test_report_names_a_bad_option(args, message):
    run = subprocess.run([sys.executable, "-m", "workbench", "report", *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert message in run.stderr

"""The estimator's contract-2 JSON for 160 recorded scenarios is unchanged (relative 1e-9), key
for key: the oracle that lets the cost model's code move without its figures moving
(tests/golden_estimates.py records them)."""
from __future__ import annotations

import json
import math
import os

import pytest

from tests.conftest import ROOT
from workbench.estimate import estimate
from workbench.scenario import parse_scenario

GOLDEN = json.loads((ROOT / "tests/data/estimate_golden.json").read_text())
# Keys added to the JSON after the record, with the value every recorded (pre-training)
# scenario must give them: fine-tuning's frozen weights and paged optimizer states.
ADDED = {"params_frozen": 0.0, "paged": 0.0}


def _differences(want, got, path: str = "") -> list[str]:
    if isinstance(want, dict):
        if isinstance(got, dict) and set(want) < set(got):
            extra = set(got) - set(want)
            bad = [k for k in extra if k not in ADDED or got[k] != ADDED[k]]
            if bad:
                return [f"{path}: new keys {sorted(bad)} (not in ADDED, or not neutral)"]
            got = {k: got[k] for k in want}
        if not isinstance(got, dict) or set(want) != set(got):
            return [f"{path}: keys {sorted(want)} != {sorted(got) if isinstance(got, dict) else got}"]
        return [d for k in want for d in _differences(want[k], got[k], f"{path}.{k}")]
    if isinstance(want, list):
        if not isinstance(got, list) or len(want) != len(got):
            return [f"{path}: {want!r} != {got!r}"]
        return [d for i, (a, b) in enumerate(zip(want, got)) for d in _differences(a, b, f"{path}[{i}]")]
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        if math.isclose(want, got, rel_tol=1e-9, abs_tol=1e-12):
            return []
    elif want == got:
        return []
    return [f"{path}: recorded {want!r}, now {got!r}"]


@pytest.mark.parametrize("case", range(len(GOLDEN)))
def test_the_estimate_is_the_recorded_one(case, monkeypatch):
    monkeypatch.chdir(ROOT)           # the calibration profiles are named relative to the repo
    rec = GOLDEN[case]
    got = json.loads(json.dumps(estimate(parse_scenario(rec["doc"])).to_dict(), default=str))
    diffs = _differences(rec["estimate"], got)
    assert not diffs, f"{len(diffs)} differences, first: " + "; ".join(diffs[:5])


def test_the_recorded_set_spans_the_options():
    docs = [g["doc"] for g in GOLDEN]
    par = [d.get("parallel", {}) for d in docs]
    assert {p.get("pp_schedule", "1f1b") for p in par} == {
        "1f1b", "interleaved-1f1b", "zero-bubble", "dualpipev", "gpipe"}
    assert any(p.get("shard_group") for p in par) and any(p.get("ep", 1) > 1 for p in par)
    assert {d["training"].get("offload", "none") for d in docs} == {"none", "cpu", "nvme"}
    assert any(str(d["hardware"]["gpu"]).startswith("calibration:") for d in docs)
    assert os.path.exists(ROOT / "calibrations/amd-epyc-2core-2026-12-02.json")

"""Step-time accuracy against published runs stays where docs/step-time-model.md says it is
(a regression guard: a change that makes the model worse fails here)."""
from __future__ import annotations

import importlib.util
import statistics
import sys

import yaml

from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location("accuracy", ROOT / "benchmarks" / "accuracy.py")
accuracy = importlib.util.module_from_spec(_spec)
sys.modules["accuracy"] = accuracy
_spec.loader.exec_module(accuracy)


def _rows():
    return [accuracy.compare(r) for r in yaml.safe_load(accuracy.DATA.read_text())]


def test_published_runs_error_beats_the_naive_rule():
    """Every run compared; the median |error| where docs/step-time-model.md reports it (11.0 %,
    nothing fitted), below "40 % MFU everywhere" on the same runs; at most 11 runs off by 2x
    (10 until the Megatron-Bridge records stated their recipes' bf16 gradient reduction: the
    gpt-oss 120B run on 64 B200 then reduces half the bytes and its estimate, already too fast
    on Blackwell, passes 2x at -50.2 %); pairs within a published comparison ordered as
    measured at least 90 %, every precision pair among them."""
    rows = _rows()
    done = [r for r in rows if "error" in r]
    assert len(done) == len(rows) >= 391
    ours = statistics.median(abs(r["error"]) for r in done)
    naive = statistics.median(abs(r["naive_error"]) for r in done)
    assert ours <= 0.115 < naive
    assert sum(1 for r in done if not 0.5 <= 1 + r["error"] <= 2) <= 11
    assert accuracy.pairs(done)["ordered"] >= 0.9
    assert accuracy.pairs(done, kind="precision")["ordered"] == 1.0


def test_groups_are_reported_worst_first_and_bands_are_by_group():
    done = [r for r in _rows() if "error" in r]
    groups = accuracy.grouped(done)
    medians = [g[2]["median"] for g in groups]
    assert medians == sorted(medians, reverse=True)
    assert {g[1] for g in groups if g[0] == "organisation"} == {
        "NVIDIA", "Databricks (MosaicML)", "Meta (PyTorch)", "BigScience"}
    bands = accuracy.bands(done)
    megatron_moe = [r for r in done if r["engine"] == "megatron" and r["moe"]]
    assert bands["megatron/moe"]["runs"] == len(megatron_moe) > 0
    assert bands["megatron/moe"]["kind"] == "in-sample"
    assert bands["all"]["runs"] == len(done)
    assert bands["megatron/moe"]["median"] == round(
        statistics.median(abs(r["error"]) for r in megatron_moe), 4)


def test_committed_bands_are_the_measured_ones():
    """workbench/engines/accuracy.json is what benchmarks/accuracy.py --write measures today."""
    import json
    sys.path.insert(0, str(ROOT / "benchmarks"))     # accuracy.py reads finetune_accuracy.py
    done = [r for r in _rows() if "error" in r] + accuracy.finetune_rows()
    committed = json.loads((ROOT / "workbench/engines/accuracy.json").read_text())
    assert committed["bands"] == json.loads(json.dumps(accuracy.bands(done)))


def test_pairs_within_one_percent_are_not_ordered():
    a = {"comparison": "c", "step": 1.0, "error": 0.0, "e": 0.0}
    b = {"comparison": "c", "step": 2.0, "error": 0.0, "e": -0.496}   # estimate 1.008 vs 1.0
    assert accuracy.pairs([a, b], "e") == {"pairs": 1, "ordered": 0.0}
    assert accuracy.pairs([a, b], "error") == {"pairs": 1, "ordered": 1.0}


def test_pairs_are_classed_by_what_the_comparison_varies():
    base = {"precision": ("bf16", None), "dispatch": (8, 1, None),
            "layout": (8, 1, 1, 1, 1, False, "1f1b", 1), "micro-batch": 1}

    def row(**change):
        return {"setting": {**base, **change}}
    assert accuracy.pair_kind(row(), row(precision=("fp8", "tensorwise"),
                                         layout=(4, 2, 1, 1, 1, True, "1f1b", 1))) == "precision"
    assert accuracy.pair_kind(row(), row(dispatch=(4, 2, None))) == "MoE dispatch"
    assert accuracy.pair_kind(row(), row(layout=(4, 2, 1, 1, 1, True, "1f1b", 1),
                                         **{"micro-batch": 2})) == "layout"
    assert accuracy.pair_kind(row(), row(**{"micro-batch": 2})) == "micro-batch"
    assert accuracy.pair_kind(row(), row()) == "other"

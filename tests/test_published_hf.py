"""The Hugging Face stack's published runs (benchmarks/data/published_hf.yaml) and the harness
that reads them (benchmarks/finetune_accuracy.py): the records keep the documented layout, and the
harness drops a Contract 1 key only when the validator names it."""
from __future__ import annotations

import copy

import pytest

from benchmarks import finetune_accuracy as fa
from workbench.catalog.gpus import GPUS
from workbench.errors import ScenarioError
from workbench.estimate import estimate
from workbench.scenario import parse_scenario
from workbench.units import GiB

RECORDS = fa.load("hf")
MEASURED_KEYS = {"peak_memory_gib", "peak_memory_gb", "memory_kind", "tokens_per_s_per_gpu",
                 "tokens_per_s", "step_time_s"}


def test_records_follow_the_layout():
    ids = [r["id"] for r in RECORDS]
    assert len(ids) == len(set(ids)) >= 18
    assert len({fa.ORGANISATIONS[i.split("-")[0]] for i in ids}) >= 3
    for r in RECORDS:
        assert set(r) <= {"id", "source", "model", "hardware", "parallel", "training", "measured",
                          "ambiguous", "notes"}, r["id"]
        assert r["training"]["engine"] == "hf"
        assert r["training"]["backend"] in ("fsdp2", "fsdp1", "deepspeed")
        gpu = r["hardware"]["gpu"]
        assert gpu in GPUS if isinstance(gpu, str) else "source" in gpu
        assert {"gpus_per_node", "nodes"} <= set(r["hardware"])
        assert set(r["measured"]) <= MEASURED_KEYS and set(r["measured"]) - {"memory_kind"}
        assert "@" in r["source"] and "https://" in r["source"]


def test_no_record_repeats_a_published_finetune_run():
    finetune = fa.load("finetune")
    assert not {r["id"] for r in RECORDS} & {r["id"] for r in finetune}
    assert len(fa.load("all")) == len(RECORDS) + len(finetune)


@pytest.mark.parametrize("rec", RECORDS, ids=[r["id"] for r in RECORDS])
def test_harness_drops_backend_only_when_the_validator_refuses_it(rec):
    try:
        parse_scenario(fa.to_scenario(rec))
        refused = False
    except ScenarioError as e:
        assert str(e).startswith("training.backend: unknown key"), str(e)
        refused = True
    scenario, dropped = fa.parse(rec)
    assert dropped == (["backend"] if refused else [])
    assert scenario.training.seq_len == rec["training"]["seq_len"]


def test_a_real_mistake_is_not_swallowed_with_the_newer_keys():
    rec = copy.deepcopy(RECORDS[0])
    rec["training"]["seq_len"] = -1
    with pytest.raises(ScenarioError, match="seq_len"):
        fa.parse(rec)


def test_compare_reports_the_estimate_of_the_kind_measured_and_its_dominant_term():
    rec = RECORDS[0]   # reserved peak memory and aggregate tokens/s
    row = fa.compare(rec)
    scenario, _ = fa.parse(rec)
    mem = estimate(scenario).memory.per_gpu.as_dict()
    assert row["memory_estimated_gib"] == pytest.approx(mem["reserved"] / GiB, rel=1e-12)
    assert row["memory_error"] == pytest.approx(
        mem["reserved"] / (rec["measured"]["peak_memory_gib"] * GiB) - 1, rel=1e-12)
    assert row["dominant_memory_term"] == max(fa.MEMORY_TERMS, key=lambda k: mem[k])
    world = rec["hardware"]["gpus_per_node"] * rec["hardware"]["nodes"]
    assert row["tps_measured"] == pytest.approx(rec["measured"]["tokens_per_s"] / world, rel=1e-12)


def test_summary_without_ambiguous_rows_is_reported_separately():
    rows = [fa.compare(r) for r in RECORDS]
    assert sum(r["ambiguous"] for r in rows) == sum("ambiguous" in r for r in RECORDS) > 0
    text = "\n".join(fa.report(rows))
    assert "tokens/s, unambiguous rows only:" in text

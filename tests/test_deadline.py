"""'Within a day?': counts and times as people type them, the deadline and the budget the
verdict answers, and the steps that would meet them (issue 54, items 2 and 3)."""
from __future__ import annotations

from pathlib import Path

import pytest

from workbench.errors import ScenarioError
from workbench.estimate import estimate
from workbench.plan.next_steps import searched_verdict
from workbench.scenario import load_scenario
from workbench.units import (count_text, duration_text, hours_text, parse_count, parse_duration,
                             tokens_text)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "llama3-8b-8xh100.yaml"


@pytest.mark.parametrize("text, value", [
    ("100M", 1e8), ("100 M", 1e8), ("100m", 1e8), ("1.5B", 1.5e9), ("2T", 2e12),
    ("524k", 524e3), ("1,024", 1024), ("1 000 000", 1e6), ("1.4e12", 1.4e12), ("8", 8)])
def test_counts_as_people_write_them(text, value):
    assert parse_count(text) == value
    assert parse_count(count_text(value)) == pytest.approx(value, rel=5e-3)


@pytest.mark.parametrize("text", ["", "soon", "12 q", "1e", "M", "８０"])
def test_what_is_no_count(text):
    assert parse_count(text) is None


@pytest.mark.parametrize("text, hours", [
    ("24h", 24), ("24 h", 24), ("24", 24), ("2 days", 48), ("3d", 72), ("90 min", 1.5),
    ("1.5 weeks", 252), ("1 year", 8760)])
def test_times_as_people_write_them(text, hours):
    assert parse_duration(text) == pytest.approx(hours * 3600)
    assert parse_duration(hours_text(hours)) == pytest.approx(hours * 3600)


def test_the_scenario_reads_counts_and_deadlines_and_refuses_the_rest_in_words():
    s = load_scenario(EXAMPLE, ["training.tokens=100M", "training.deadline=2 days"])
    assert s.training.tokens == 1e8 and s.training.deadline == 48
    assert s.document["training"]["deadline"] == 48      # hours: read back the same
    assert load_scenario(EXAMPLE, ["training.deadline=36"]).training.deadline == 36
    with pytest.raises(ScenarioError) as err:
        load_scenario(EXAMPLE, ["training.deadline=soon", "training.tokens=lots"])
    said = str(err.value)
    assert "training.deadline: must be a time: hours (24), or 24h, 2 days" in said
    assert "training.tokens: must be a number: 100M, 1.5B, 2T" in said
    with pytest.raises(ScenarioError, match="training.budget: needs a price"):
        load_scenario(EXAMPLE, ["training.budget=5000"])


def test_a_run_within_its_deadline_says_so():
    s = load_scenario(EXAMPLE, ["training.tokens=100M", "training.deadline=24h"])
    e = estimate(s)
    v = e.verdict
    part = v.part("time to train")
    assert v.ok and part.status == "pass"
    assert part.says.startswith("100 M tokens in ") and "within your 24 h" in part.says
    assert "within your 24 h" in v.says


def test_a_missed_deadline_fails_and_says_what_would_meet_it():
    s = load_scenario(EXAMPLE, ["training.tokens=100B", "training.deadline=2 days"])
    e = estimate(s)
    v = searched_verdict(s, e, budget_s=None)
    part = v.part("time to train")
    assert not v.ok and part.status == "fail"
    assert "longer than your 2 days" in part.says and v.says.startswith("No:")
    within = e.run.tokens_per_s * 48 * 3600
    assert f"in 2 days this layout trains {tokens_text(within)}" in part.says
    fewer = next(n for n in v.next if n.kind == "tokens")
    assert fewer.set["training.tokens"] <= within
    assert estimate(load_scenario(EXAMPLE, [
        f"training.tokens={fewer.set['training.tokens']}", "training.deadline=2 days"])).verdict.ok
    # the planner's steps (methods, more nodes) each say whether they meet it
    searched = [n for n in v.next if n.kind in ("method", "nodes")]
    assert searched and all("your 2 days)" in n.says for n in searched)
    for n in searched:
        meets = n.figures["time_to_train_s"] <= 48 * 3600
        assert ("(within your 2 days)" in n.says) == meets


def test_a_budget_fails_the_cost_part_and_says_what_it_pays_for():
    over = load_scenario(EXAMPLE, ["training.tokens=100B", "training.price_per_gpu_hour=2",
                                   "training.budget=1000"])
    e = estimate(over)
    part = e.verdict.part("cost")
    assert part.status == "fail" and "more than your budget of 1,000 currency units" in part.says
    affordable = 100e9 * 1000 / e.run.cost["total"]
    assert f"it pays for {tokens_text(affordable)}" in part.says
    fewer = next(n for n in e.verdict.next if n.kind == "tokens")
    assert fewer.set["training.tokens"] <= affordable
    enough = load_scenario(EXAMPLE, ["training.tokens=100B", "training.price_per_gpu_hour=2",
                                     "training.budget=1M"])
    assert "within your budget" in estimate(enough).verdict.part("cost").says


def test_the_training_panel_takes_and_shows_counts_and_times():
    from widgets.panels.training import TrainingPanel
    from widgets.state import ScenarioState
    from workbench.scenario.io import read_document

    st = ScenarioState(read_document(ROOT / "examples" / "brief-8xh200-70b.yaml"))
    panel = TrainingPanel(st)
    panel.refresh()
    assert panel.tokens.value == "1.4 T"            # not "1.4e12"
    panel.tokens.value = "100M"
    panel.deadline.value = "2 days"
    assert st.scenario.training.tokens == 1e8 and st.scenario.training.deadline == 48
    panel.refresh()
    assert panel.tokens.value == "100 M"
    panel.deadline.value = "soon"
    panel.refresh()
    assert "Deadline must be a time" in panel.fields["training.deadline"][1].value
    panel.deadline.value = ""
    assert st.scenario.training.deadline is None and not st.problems


def test_where_it_fits_the_planners_faster_layout_is_offered_with_both_times():
    from workbench.plan.next_steps import FASTER_BY, faster_step

    s = load_scenario(ROOT / "examples" / "brief-8xh200-70b.yaml", ["training.method=lora"])
    e = estimate(s)
    assert e.memory.fits
    step = faster_step(s, e)
    assert step is not None and step.kind == "layout"
    assert step.figures["step_s"] < e.time.step * (1 - FASTER_BY)
    assert f"(yours: {duration_text(e.run.time_to_train_s)})" in step.says
    # the layout it names, set on the scenario, gives the step it says
    faster = load_scenario(ROOT / "examples" / "brief-8xh200-70b.yaml", [
        "training.method=lora", *(f"{k}={v}" for k, v in step.set.items())])
    assert estimate(faster).time.step == pytest.approx(step.figures["step_s"])
    # the 8B example's own layout is already within FASTER_BY of the planner's fastest
    s8 = load_scenario(EXAMPLE)
    assert faster_step(s8, estimate(s8)) is None


def test_a_box_that_exists_gets_its_build_checks_as_advice():
    """Issue 54: the person owns the 8 x H200 box on a desktop CPU; the headline said No for a
    LoRA that fits, because one node "cannot be built"."""
    brief = ROOT / "examples" / "brief-8xh200-70b.yaml"
    planned = estimate(load_scenario(brief, ["training.method=lora"])).verdict
    assert not planned.ok and planned.part("build").status == "fail"
    owned = estimate(load_scenario(brief, ["training.method=lora",
                                           "hardware.owned=true"])).verdict
    part = owned.part("build")
    assert owned.ok and owned.says.startswith("Yes, with care") and part.status == "warn"
    assert part.says.startswith("Your machine exists, so these are advice")
    assert "PCIe lanes" in part.says and "the step time assumes the intra-node link" in part.says
    assert not [n for n in owned.next if n.kind == "build"]


def test_a_failing_verdict_names_the_inputs_left_to_defaults():
    """Issue 52 item 5: a No a defaulted micro-batch caused read as the person's fault."""
    from workbench.scenario import parse_scenario

    doc = {"hardware": {"gpu": "h100-sxm", "gpus_per_node": 8}, "model": {"preset": "llama3-70b"},
           "parallel": {"dp": 8, "zero": 3}, "training": {"micro_batch": 2}}
    v = estimate(parse_scenario(doc)).verdict
    assert not v.ok
    said = v.says.split("Not given, so defaulted: ")[1]
    assert "global batch 256" in said and "sequence length 4,096" in said
    assert "recompute selective" in said and "micro-batch" not in said and "ZeRO" not in said
    # a verdict that passes, or fails on the build alone, names none
    ok = estimate(parse_scenario({**doc, "model": {"preset": "llama3-8b"}})).verdict
    assert ok.ok and "Not given" not in ok.says

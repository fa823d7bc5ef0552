"""One answer to "can this run?": the rule table (``scenario.rules``) holds every limit of an
engine once, and the validator, the planner and the exporters all ask it.

Two properties over random valid scenarios (``tests/test_validation_property.valid_docs``):

- every layout an export to an engine's format refuses is refused by the validator, with the
  same field, value and message, when the scenario names that engine;
- every layout the planner ranks for an engine exports to that engine's format without a
  refusal.
"""
from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.test_validation_property import valid_docs
from workbench.engines import ENGINES
from workbench.errors import ScenarioError
from workbench.export import ExportError, export
from workbench.plan import Constraints, plan
from workbench.scenario import parse_scenario

# engine -> the export target that writes its launch artefact
TARGETS = {"megatron": "megatron", "torchtitan": "torchtitan", "deepspeed": "deepspeed"}


def _problems(err: ScenarioError) -> list[tuple]:
    return [(p.path, p.value, p.message) for p in err.problems]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_docs(), st.sampled_from(sorted(TARGETS)))
def test_what_an_export_refuses_the_validator_refuses_word_for_word(doc, engine):
    s = parse_scenario(doc)               # the generic engine: no limits of its own
    try:
        export(s, TARGETS[engine])
    except ExportError as err:
        refused = _problems(err)
    else:
        return
    named = copy.deepcopy(doc)
    named["training"]["engine"] = engine
    with pytest.raises(ScenarioError) as v:
        parse_scenario(named)
    said = _problems(v.value)
    assert [p for p in refused if p not in said] == [], (refused, said)


def _planning_doc(doc: dict, engine: str) -> dict:
    """``doc`` as a planning scenario for ``engine``: its model, hardware and batch, no layout,
    the engine's default recompute."""
    d = copy.deepcopy(doc)
    d["training"]["engine"] = engine
    d["training"]["recompute"] = ENGINES[engine].recompute_default
    d["training"].pop("offload", None)
    d["parallel"] = {}
    return d


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_docs(), st.sampled_from(sorted(TARGETS)))
def test_every_layout_the_planner_ranks_exports_to_its_engine(doc, engine):
    s = parse_scenario(_planning_doc(doc, engine), layout_required=False)
    try:
        found = plan(s, Constraints())
    except ScenarioError:                # no layout runs this model here: nothing to export
        return
    n = len(found)
    ranks = sorted({r for r in (1, 2, 3, n, *range(1, n + 1, max(1, n // 12))) if r <= n})
    for rank in ranks:
        layout = found.scenario_of(rank)
        try:
            export(layout, TARGETS[engine])
        except ExportError as err:
            raise AssertionError(f"rank {rank} {found.layout(rank)}: {err}") from None


@pytest.mark.parametrize("fix", [
    # the cases: the planner used to rank these first and the export refused them
    ["engine=megatron", "pp=2", "zero=3"],
    ["engine=megatron", "pp=2", "pp_schedule=zero-bubble"],
])
def test_the_planner_never_ranks_what_megatron_refuses(fix):
    from workbench.scenario import load_scenario
    from tests.conftest import ROOT
    s = load_scenario(ROOT / "examples" / "llama3-8b-8xh100.yaml")
    with pytest.raises(ScenarioError) as err:
        plan(s, Constraints.parse(fix))
    (problem,) = err.value.problems
    assert problem.path == "constraints.fixed"
    assert problem.message.startswith("no layout of 8 GPUs passes the scenario rules with "
                                      + ", ".join(fix))

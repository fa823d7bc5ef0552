"""The planner: exhaustive against one-by-one estimates on a small case, never a layout the
validator rejects, constraints respected, infeasibility explained, contract-4 JSON."""
from __future__ import annotations

import itertools
import json
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT, scenario_doc
from workbench.errors import ScenarioError
from workbench.estimate import estimate
from workbench.plan import Constraints, plan
from workbench.plan.explain import describe_start, explain
from workbench.scenario import load_scenario, parse_scenario
from workbench.units import hbm_bytes

FIXED = {"recompute": "none", "offload": "none", "pp_schedule": "1f1b",
         "sequence_parallel": True}


def _four_gpus(**training):
    return parse_scenario(scenario_doc(hardware={"gpu": "h100-sxm", "gpus_per_node": 4},
                                       parallel={"dp": 4},
                                       training={"global_batch": 16, **training}))


def test_the_search_equals_estimating_every_layout_one_by_one():
    """Llama 3.1 8B on 4 H100, 1F1B, no recompute or offload: every layout the validator
    accepts, estimated alone, fits exactly when the planner says so, with the same step time,
    and the fastest is the planner's first."""
    s = _four_gpus()
    result = plan(s, Constraints(fixed=FIXED))
    brute = {}
    for tp, pp, cp, zero, mb in itertools.product((1, 2, 4), (1, 2, 4), (1, 2, 4), range(4),
                                                 (1, 2, 4, 8, 16)):
        if 4 % (tp * pp * cp):
            continue
        doc = scenario_doc(hardware={"gpu": "h100-sxm", "gpus_per_node": 4},
                           parallel={"dp": 4 // (tp * pp * cp), "tp": tp, "pp": pp, "cp": cp,
                                     "zero": zero},
                           training={"global_batch": 16, "micro_batch": mb,
                                     "recompute": "none"})
        try:
            est = estimate(parse_scenario(doc))
        except ScenarioError:
            continue
        # fits as the search judges it: within the default headroom (the memory band's share)
        if (est.memory.per_gpu.device <= result.limit and est.memory.host_fits
                and est.memory.nvme_fits):
            brute[(4 // (tp * pp * cp), tp, pp, cp, zero, mb)] = est.time.step
    assert result.limit == pytest.approx(result.fraction * est.memory.capacity, rel=1e-12)
    table = result.table
    found = {(r.dp, r.tp, r.pp, r.cp, r.zero, r.micro_batch): r.step for r in table.itertuples()}
    assert set(found) == set(brute) and len(brute) > 10
    for key, step in brute.items():
        assert found[key] == pytest.approx(step, rel=1e-9), key
    assert table["step"].iloc[0] == pytest.approx(min(brute.values()), rel=1e-9)


def test_the_counts_count_layouts_and_the_table_counts_rows():
    """"N of M valid layouts fit" counts layouts: a layout that fits under two settings (with
    recompute none and with CPU offload, say) is one fitting layout and two ranked rows; the
    valid count holds every layout some searched offload admits."""
    s = _four_gpus()
    r = plan(s, Constraints(fixed={"pp_schedule": "1f1b", "sequence_parallel": True}))
    t = r.table
    layout = ["dp", "tp", "pp", "cp", "ep", "shard_group", "zero", "virtual_stages",
              "micro_batch", "pp_schedule", "sequence_parallel"]
    assert r.counts["rows"] == len(t)
    assert r.counts["fit"] == len(t.drop_duplicates(layout))
    assert r.counts["fit"] < r.counts["rows"]          # the case the count once mixed up
    assert r.counts["fit"] <= r.counts["valid"] <= r.counts["candidates"]


def test_a_fixed_switch_is_searched_only_with_engines_that_offer_it():
    """--fix expert_tp=1 (or compile=true) on an engine without that switch is refused with
    the engines that offer it, as the validator refuses the scenario; with several engines
    it searches only those that offer it, and every ranked row passes the validator."""
    s = load_scenario(ROOT / "examples/mixtral-8x7b-ep.yaml")
    assert s.training.engine == "generic"
    with pytest.raises(ScenarioError) as e:
        plan(s, Constraints(fixed={"expert_tp": 1}))
    assert str(e.value.problems[0]) == (
        "fixed.expert_tp: engine generic does not offer it; search an engine that does "
        "(megatron, torchtitan: training.engine or --engines) (got 1)")
    with pytest.raises(ScenarioError) as e:
        plan(s, Constraints(fixed={"compile": True}))
    assert e.value.problems[0].path == "fixed.compile"
    with pytest.raises(ScenarioError) as e:            # a recipe needs FP8 to mean anything
        plan(s, Constraints(fixed={"fp8_recipe": "tensorwise"}, engines=("torchtitan",)))
    assert str(e.value.problems[0]) == ("fixed.fp8_recipe: a recipe only with "
                                        "training.precision fp8 (the scenario's is bf16) "
                                        "(got 'tensorwise')")
    r = plan(s, Constraints(fixed={"expert_tp": 1},
                            engines=("megatron", "deepspeed", "torchtitan")))
    t = r.table
    assert set(t["engine"]) <= {"megatron", "torchtitan"} and (t["expert_tp"] == 1).all()
    assert len(t) > 0 and (t["ep"] == 1).any()    # a fixed expert TP lists EP 1 too
    parse_scenario(r.scenario_of(1).to_dict())


def test_a_small_model_on_nvlink_trains_fastest_with_plain_data_parallelism():
    """Checked by hand: every layout splits the same compute; data parallelism hides its
    gradient reduction behind backward, while TP exposes collectives and PP adds a bubble."""
    s = parse_scenario(scenario_doc(model={"preset": "llama3-8b"},
                                    training={"global_batch": 64}))
    best = plan(s).layout(1)["parallel"]
    assert (best["dp"] * best["cp"], best["tp"], best["pp"]) == (8, 1, 1)


def test_every_ranked_layout_passes_the_validator_and_equals_its_estimate():
    s = load_scenario(ROOT / "examples/mixtral-8x7b-ep.yaml")
    result = plan(s)
    picks = sorted({1, 2, 3, 10, len(result.table) // 2, len(result.table)})
    for rank in picks:
        one = result.scenario_of(rank)          # parse_scenario raises on a rejected layout
        est = estimate(one)
        row = result.table.iloc[rank - 1]
        assert est.time.step == pytest.approx(row["step"], rel=1e-9)
        assert est.memory.per_gpu.total == pytest.approx(row["memory_per_gpu"], rel=1e-9)
        assert est.memory.fits


def test_constraints_are_respected():
    s = load_scenario(ROOT / "examples/llama3-8b-8xh100.yaml")
    r = plan(s, Constraints(fixed={"tp": 2, "zero": 3}, max_memory_fraction=0.5))
    assert (r.table["tp"] == 2).all() and (r.table["zero"] == 3).all()
    cap = hbm_bytes(80)                                  # H100 "80 GB" as nvidia-smi sees it
    assert (r.table["memory_per_gpu"] <= 0.5 * cap).all()
    loose = plan(s, Constraints(fixed={"tp": 2, "zero": 3}))
    assert len(loose.table) > len(r.table)


def test_an_empty_search_names_the_constraint_that_emptied_it():
    s = load_scenario(ROOT / "examples/llama3-8b-8xh100.yaml")
    with pytest.raises(ScenarioError, match=r"constraints\.fixed.*tp=3"):
        plan(s, Constraints(fixed={"tp": 3}))
    with pytest.raises(ScenarioError, match="max_memory_fraction.*least memory"):
        plan(s, Constraints(max_memory_fraction=0.005))
    big = parse_scenario(scenario_doc(hardware={"gpu": "h100-sxm", "gpus_per_node": 1},
                                      parallel={"dp": 1},
                                      training={"seq_len": 2 ** 21, "global_batch": 1}))
    with pytest.raises(ScenarioError, match="hardware.*no layout fits"):
        plan(big)
    with pytest.raises(ScenarioError, match="fixed.bogus"):
        Constraints(fixed={"bogus": 1})
    with pytest.raises(ScenarioError, match="max_memory_fraction"):
        Constraints(max_memory_fraction=1.5)


def test_pareto_front_and_explanations():
    s = load_scenario(ROOT / "examples/llama3-8b-8xh100.yaml")
    r = plan(s, Constraints(gpu_counts=(2, 4)))
    t = r.table
    front = t[t["pareto_memory"]]
    assert bool(t["pareto_memory"].iloc[0])                 # the fastest is on the front
    for _, p in front.iterrows():                           # nobody beats a front point on both
        better = t[(t["memory_per_gpu"] < p["memory_per_gpu"])
                   & (t["tokens_per_s"] > p["tokens_per_s"])]
        assert better.empty
    assert [d["gpus"] for d in r.by_gpu_count] == [2, 4, 8]
    assert all(np.isfinite(d["tokens_per_s"]) for d in r.by_gpu_count)
    lines = explain(r)
    assert lines[0].startswith("#1 ") and len(lines) == 4 and "s/step" in lines[1]


def test_cli_plan_json_has_contract_4_keys_and_bad_input_exits_2():
    out = subprocess.run([sys.executable, "-m", "workbench", "plan",
                          str(ROOT / "examples/llama3-8b-8xh100.yaml"), "--json", "--top", "3"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert len(doc["layouts"]) == 3
    for lay in doc["layouts"]:
        assert set(lay["parallel"]) >= {"dp", "tp", "pp", "cp", "ep", "zero", "pp_schedule",
                                        "virtual_stages", "sequence_parallel", "shard_group"}
        assert lay["time"]["step"] > 0 and lay["throughput"]["tokens_per_s"] > 0
        assert lay["memory"]["per_gpu"]["total"] > 0 and lay["fits"] is True
    bad = subprocess.run([sys.executable, "-m", "workbench", "plan",
                          str(ROOT / "examples/llama3-8b-8xh100.yaml"), "--fix", "tp"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert bad.returncode == 2 and "KEY=VALUE" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def _plan_cli(tmp_path, doc: dict, *args: str) -> subprocess.CompletedProcess:
    import yaml

    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc))
    return subprocess.run([sys.executable, "-m", "workbench", "plan", str(path), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_plan_needs_no_layout_and_a_bad_one_is_only_a_starting_point(tmp_path):
    """No parallel block: the planner plans (and reports no starting layout). A parallel block
    whose degrees fit neither the GPUs nor the global batch: it plans the same layouts and says
    why the given one is not valid."""
    base = {"hardware": {"gpu": "h200-sxm", "gpus_per_node": 8, "nodes": 2},
            "model": "llama3-8b", "training": {"seq_len": 8192, "global_batch": 512}}
    none = _plan_cli(tmp_path, base, "--json", "--top", "2")
    assert none.returncode == 0, none.stderr
    none = json.loads(none.stdout)
    assert none["start"] is None and len(none["layouts"]) == 2
    bad = _plan_cli(tmp_path, {**base, "parallel": {"dp": 3, "tp": 3}}, "--json", "--top", "2")
    assert bad.returncode == 0, bad.stderr
    bad = json.loads(bad.stdout)
    assert bad["layouts"] == none["layouts"]          # the start does not change the search
    assert bad["start"]["valid"] is False and bad["start"]["rank"] is None
    assert any(p.startswith("parallel: dp*tp*pp*cp = 3*3*1*1 = 9 must equal")
               for p in bad["start"]["problems"])
    text = _plan_cli(tmp_path, {**base, "parallel": {"dp": 3, "tp": 3, "zero": "x"}}, "--top", "1")
    assert text.returncode == 0, text.stderr
    assert "your layout" in text.stdout and "is not valid: parallel.zero: must be one of" \
        in text.stdout
    # a problem of the hardware, the model or the training is still an error
    wrong = _plan_cli(tmp_path, {**base, "training": {"precision": "fp9"}})
    assert wrong.returncode == 2 and "training.precision" in wrong.stderr


def test_a_valid_starting_layout_is_ranked_among_the_found_ones():
    s = parse_scenario(scenario_doc(hardware={"gpu": "h100-sxm", "gpus_per_node": 4},
                                    parallel={"dp": 2, "tp": 2, "zero": 3},
                                    training={"global_batch": 16, "recompute": "none"}),
                       layout_required=False)
    result = plan(s, Constraints(fixed=FIXED))
    st = result.start
    assert st["valid"] and st["problems"] == [] and st["fits"]
    rows = result.table[(result.table.dp == 2) & (result.table.tp == 2)
                        & (result.table.micro_batch == 1) & (result.table.zero == 3)]
    (row,) = rows.itertuples()
    assert st["step"] == pytest.approx(row.step, rel=1e-9)
    assert st["rank"] == 1 + int((result.table["step"] < row.step * (1 - 1e-9)).sum())
    assert st["rank"] <= row.rank
    assert st["device_per_gpu"] == pytest.approx(row.device_per_gpu, rel=1e-9)


def test_the_starting_layout_fits_as_the_search_judges_fit():
    """A layout whose allocated peak is within the limit but whose nvidia-smi figure is not
    is not ranked: the search judges fit on the device figure, and so does the start."""
    s = parse_scenario(scenario_doc(hardware={"gpu": "h100-sxm", "gpus_per_node": 4},
                                    parallel={"dp": 2, "tp": 2, "zero": 3},
                                    training={"global_batch": 16, "recompute": "none"}))
    from workbench.estimate import estimate as est_of
    m = est_of(s).memory.per_gpu
    limit = (m.total + m.device) / 2                  # between allocated and device
    cap = est_of(s).memory.capacity
    result = plan(s, Constraints(fixed=FIXED, max_memory_fraction=limit / cap))
    st = result.start
    assert st["fits"] is False and st["rank"] is None
    t = result.table
    assert not ((t.dp == 2) & (t.tp == 2) & (t.zero == 3) & (t.micro_batch == 1)).any()
    assert "as nvidia-smi counts it, above the limit" in describe_start(result)


def test_the_planner_panel_plans_a_scenario_whose_layout_is_invalid():
    from widgets.planner import PlannerPanel
    from widgets.state import ScenarioState

    st = ScenarioState(scenario_doc(hardware={"gpu": "h100-sxm", "gpus_per_node": 4},
                                    parallel={"dp": 4}, training={"global_batch": 16}))
    st.set("parallel.tp", 3)
    assert not st.valid
    pp = PlannerPanel(st)
    pp.fix["pp"].value = 1
    pp.search(wait=True)
    assert pp.result is not None and len(pp.result.table) > 0, pp.status.value
    assert "your layout (dp=4 tp=3" in pp.why.value and "is not valid" in pp.why.value
    st.set("training.precision", "fp9")
    pp.search(wait=True)
    assert "fix the scenario first: training.precision" in pp.status.value
    # the earlier result is gone from the panel and its chart
    assert pp.result is None and pp.table.value == ""
    assert pp.chart.widget.message.startswith("No layouts to draw: fix the scenario first")


def test_the_search_includes_hsdp_shard_groups_and_fix_pins_one(tmp_path):
    """Two nodes under ZeRO: HSDP groups of one node are searched beside full sharding, each
    ranked HSDP layout equals its estimate, and --fix shard_group=8 keeps only those."""
    s = parse_scenario(scenario_doc(hardware={"nodes": 2}, parallel={"dp": 16},
                                    training={"global_batch": 64}))
    table = plan(s, Constraints(fixed={"recompute": "selective", "offload": "none"})).table
    assert {0, 8} <= set(table["shard_group"]) and (table.loc[table["shard_group"] > 0,
                                                              "zero"] > 0).all()
    pinned = plan(s, Constraints.parse(["shard_group=8", "zero=3", "offload=none"]))
    assert (pinned.table["shard_group"] == 8).all() and len(pinned.table) > 3
    one = pinned.scenario_of(1)
    assert one.parallel.shard_group == 8
    row = pinned.table.iloc[0]
    est = estimate(one)
    assert est.time.step == pytest.approx(row["step"], rel=1e-9)
    assert est.memory.per_gpu.total == pytest.approx(row["memory_per_gpu"], rel=1e-9)
    run = _plan_cli(tmp_path, scenario_doc(hardware={"nodes": 2}, training={"global_batch": 64}),
                    "--fix", "shard_group=8", "--fix", "zero=3", "--json", "--top", "2")
    assert run.returncode == 0, run.stderr
    layouts = json.loads(run.stdout)["layouts"]
    assert [lay["parallel"]["shard_group"] for lay in layouts] == [8, 8]

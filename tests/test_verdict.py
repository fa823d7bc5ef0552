"""Issue 41, the backend half: the verdict (contract 2's ``verdict``), ``memory.fits`` counting
host DDR and NVMe, the one formatter of durations, token counts and memory, the planner's
answer in a sentence and the folding of rows that differ only in virtual stages."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from workbench.estimate import estimate
from workbench.estimate.run.verdict import verdict
from workbench.plan.next_steps import search_steps, searched_verdict
from workbench.render.text import verdict_lines
from workbench.scenario import load_scenario, parse_scenario
from workbench.units import (GiB, MiB, YEAR, duration_text, memory_text, money_text,
                             percent_text, tokens_text)

BRIEF = ROOT / "examples/brief-8xh200-70b.yaml"
LLAMA8 = ROOT / "examples/llama3-8b-8xh100.yaml"


@pytest.fixture(scope="module")
def offload_cpu():
    """The issue's wrong yes: the brief's box with CPU offload, ~1,051 GiB of host memory
    needed on a node with 256 GiB."""
    s = load_scenario(BRIEF, ["training.offload=cpu"])
    return s, estimate(s)


def _no_search(monkeypatch):
    """Make any planner search fail the test."""
    import workbench.plan
    import workbench.plan.methods

    def refuse(*a, **k):
        raise AssertionError("the verdict searched although nothing about memory fails")

    monkeypatch.setattr(workbench.plan, "plan", refuse)
    monkeypatch.setattr(workbench.plan.methods, "compare_methods", refuse)


def _apply(s, paths: dict):
    """The scenario with a next step's ``set`` applied (key paths as --set takes them)."""
    doc = s.to_dict()
    for path, value in paths.items():
        section, key = path.split(".")
        doc.setdefault(section, {})[key] = value
    return parse_scenario(doc)


def test_offload_beyond_host_memory_is_no_longer_a_fit(offload_cpu):
    s, est = offload_cpu
    m = est.memory
    assert m.gpu_fits and not m.host_fits and not m.fits
    out = est.to_dict()["memory"]
    assert out["fits"] is False and out["gpu_fits"] is True


def test_the_brief_with_cpu_offload_fails_on_host_memory_and_names_what_fits(offload_cpu):
    s, est = offload_cpu
    assert not est.verdict.searched          # the estimate alone never runs the planner
    v = searched_verdict(s, est, budget_s=None)     # every search, whatever it takes here
    assert not v.ok and v.says.startswith("No: Llama 3.1 70B")
    host = v.part("host memory")
    need, have = est.memory.host_per_node, est.memory.host_capacity_per_node
    assert need > 1000 * GiB and have == 256 * GiB
    assert not host.ok and host.status == "fail"
    assert memory_text(need) in host.says and "256 GiB" in host.says    # both, in GiB
    assert memory_text(need) == "1,051.3 GiB"
    assert v.part("gpu memory").ok and not v.part("build").ok
    assert v.searched and v.search_s > 0
    kinds = [n.kind for n in v.next]
    assert kinds[0] == "layout" and "nodes" in kinds and "method" in kinds and "build" in kinds
    layout = v.next[0]
    f = layout.figures
    assert f["device_per_gpu"] <= f["capacity"] and f["step_s"] > 0 and f["gpus"] == 8
    assert f"{duration_text(f['step_s'])} per step" in layout.says
    assert f"{memory_text(f['device_per_gpu'])} of {memory_text(f['capacity'])}" in layout.says
    # the layout it names does fit, with the figures it says
    there = estimate(_apply(s, layout.set))
    assert there.memory.fits and there.time.step == pytest.approx(f["step_s"], rel=1e-9)
    nodes = next(n for n in v.next if n.kind == "nodes")
    assert nodes.set["hardware.nodes"] == 2 and nodes.figures["gpus"] == 16
    assert nodes.figures["step_s"] < f["step_s"] and "On 2 nodes (16 GPUs)" in nodes.says
    methods = [n for n in v.next if n.kind == "method"]
    assert {n.set["training.method"] for n in methods} <= {"lora", "qlora"} and methods
    assert all(n.figures["device_per_gpu"] <= n.figures["capacity"] for n in methods)
    lanes = next(n for n in v.next if n.kind == "build" and "PCIe" in n.says)
    assert lanes.figures["pcie_lanes"] == 148 and "EPYC" in lanes.says
    d = v.as_dict()
    assert {"ok", "says", "parts", "next"} <= set(d)
    assert all({"name", "ok", "says"} <= set(p) for p in d["parts"])
    assert all("says" in n for n in d["next"])
    assert d["unsearched"] == [] and "[quick search" not in json.dumps(d)
    json.dumps(d)


def test_a_search_the_budget_cuts_short_is_named_not_shown(offload_cpu):
    """``workbench estimate`` answers within its budget (issue 55): with no time at all, no
    planner answer is shown and the verdict names each search left out with its command."""
    s, est = offload_cpu
    v = searched_verdict(s, est, budget_s=0.0)
    assert not v.ok and v.searched
    assert {n.kind for n in v.next} == {"build"}            # the steps that need no search
    said = " | ".join(v.unsearched)
    assert said.startswith("a layout that fits this hardware (`workbench plan`")
    assert "lora, qlora in place of pretrain" in said and "2 nodes (`workbench plan --set " \
        "hardware.nodes=2` searches them)" in said
    assert est.to_dict(v)["verdict"]["unsearched"] == v.unsearched
    text = "\n".join(verdict_lines(v))
    assert "not searched in the estimate's time: a layout that fits this hardware" in text


def test_a_quick_search_says_its_scope(offload_cpu):
    """Within a budget a search starts at 1F1B and micro-batch 1 (the least memory: what fits)
    and says so on every step it found that way."""
    s, est = offload_cpu
    found, _ = search_steps(s, est, budget_s=60.0)
    quick = [n for n in found if "[quick search: 1F1B, micro-batch 1]" in n.says]
    assert quick and all(n.kind in ("method", "nodes") for n in quick)
    layout = found[0]            # this hardware's, widened to every layout within the time
    assert layout.kind == "layout" and "[quick search" not in layout.says


def test_a_scenario_that_fits_is_ok_without_a_search(monkeypatch):
    _no_search(monkeypatch)
    s = load_scenario(LLAMA8)
    est = estimate(s)
    v = searched_verdict(s, est)
    assert est.memory.fits and v.ok and not v.searched and v.next == []
    assert v.says.startswith("Yes")
    assert [p.name for p in v.parts] == ["gpu memory", "host memory", "build", "time to train"]
    t = v.part("time to train")
    assert t.ok and tokens_text(s.training.tokens) in t.says
    assert duration_text(est.run.time_to_train_s) in t.says
    assert est.to_dict()["verdict"]["ok"] is True


def test_a_failed_build_check_fails_the_verdict_without_a_search(monkeypatch):
    _no_search(monkeypatch)
    # the brief's desktop CPU gives 24 PCIe lanes to eight GPUs: memory fits, the build fails
    s = load_scenario(BRIEF, ["model.preset=llama3-8b"])
    est = estimate(s)
    assert est.memory.fits and any(c.status == "fail" for c in est.checks)
    v = searched_verdict(s, est)
    assert not v.ok and not v.part("build").ok and v.part("gpu memory").ok
    assert "PCIe lanes" in v.part("build").says and "cannot be built" in v.says
    assert not v.searched and [n.kind for n in v.next] == ["build"]


def test_a_two_gpu_workstation_is_not_given_a_cluster_nodes_nics():
    """One node and no inter_node: no NICs (the network between nodes is ignored), so a box
    with two PCIe GPUs is not failed on the lanes and power of eight 400G NICs; two nodes
    take the default eight; NICs a one-node scenario names are counted."""
    doc = {"hardware": {"gpu": "rtx-4090", "gpus_per_node": 2},
           "model": {"preset": "llama3.2-1b"}, "parallel": {"dp": 2},
           "training": {"seq_len": 2048, "global_batch": 8}}
    s = parse_scenario(doc)
    lanes = next(c for c in estimate(s).checks if c.name == "pcie_lanes")
    assert s.hardware.inter_node.nics_per_node == 0 and lanes.status == "pass"
    assert lanes.reason.startswith("2 GPUs x16 + 0 NICs x16 + 1 drives x4 = 36 lanes")
    two = parse_scenario({**doc, "hardware": {**doc["hardware"], "nodes": 2},
                          "parallel": {"dp": 4}})
    assert two.hardware.inter_node.nics_per_node == 8
    named = parse_scenario({**doc, "hardware": {**doc["hardware"],
                                                "inter_node": {"nics_per_node": 1}}})
    assert named.hardware.inter_node.nics_per_node == 1


def test_a_warned_build_check_is_said_but_stays_ok():
    s = load_scenario(LLAMA8)
    v = verdict(s, estimate(s))
    b = v.part("build")
    assert b.ok and b.status == "warn" and "power" in b.says
    assert v.ok and v.says.startswith("Yes, with care") and "check build" in v.says


def test_memory_near_the_limit_is_tight_with_its_band():
    """Within the memory band of the capacity the GPU part is tight: not a failure, the band and
    what settles it said; past the band's other end it fails."""
    s = load_scenario(LLAMA8)
    est = estimate(s)
    band = est.memory.band
    g = est.memory.per_gpu
    assert est.verdict.part("gpu memory").status == "pass"
    near = dataclasses.replace(est, memory=dataclasses.replace(est.memory, capacity=g.device / 0.95))
    v = verdict(s, near)
    part = v.part("gpu memory")
    assert part.ok and part.status == "tight" and "95 %" in part.says
    assert f"{band['runs']} published runs like it" in part.says
    assert "workbench trial --shape slice" in part.says
    assert v.ok and v.says.startswith("Tight: Llama 3.1 8B")
    over = dataclasses.replace(est, memory=dataclasses.replace(
        est.memory, capacity=g.device_least / (1 + band["q90"]) * 0.98))
    v = verdict(s, over)
    assert not v.ok and v.part("gpu memory").status == "fail" and not v.searched
    assert "even at the memory estimate's low end" in v.part("gpu memory").says


def test_a_price_gives_a_cost_part_in_currency_units():
    s = load_scenario(LLAMA8, ["training.price_per_gpu_hour=2.5", "training.price_per_kwh=0.3"])
    est = estimate(s)
    cost = verdict(s, est).part("cost")
    assert cost is not None and cost.ok
    assert cost.says.startswith(money_text(est.run.cost["total"]) + ":")
    assert "currency units" in cost.says and "GPU-hours at 2.5 per GPU-hour" in cost.says
    assert "kWh at 0.3 per kWh" in cost.says
    assert verdict(load_scenario(LLAMA8), estimate(load_scenario(LLAMA8))).part("cost") is None


def test_the_one_formatter():
    assert duration_text(0.0789) == "78.9 ms"
    assert duration_text(0.00512) == "5.12 ms"
    assert duration_text(45e-6) == "45.0 µs"
    assert duration_text(2.5) == "2.50 s"
    assert duration_text(400.56) == "401 s"
    assert duration_text(45 * 60) == "45.0 min"
    assert duration_text(5.3 * 3600) == "5.3 h"
    assert duration_text(13.6 * 86400) == "13.6 days"
    assert duration_text(33.9 * YEAR) == "33.9 years"
    assert tokens_text(1.4e12) == "1.4 T tokens"
    assert tokens_text(15e9) == "15 B tokens"
    assert tokens_text(524_288) == "524 K tokens"
    assert tokens_text(900) == "900 tokens"
    assert memory_text(1_806_336) == "1.7 MiB"
    assert memory_text(310 * MiB) == "310 MiB"
    assert memory_text(171.5 * GiB) == "171.5 GiB"
    assert memory_text(256 * GiB, 0) == "256 GiB"
    assert percent_text(0.094) == "9 %" and percent_text(0.285, 1) == "28.5 %"
    assert money_text(1_017_950.4) == "1,017,950 currency units"
    from workbench.render.text import human_duration
    assert human_duration is duration_text          # the widgets' name for the same one


@pytest.fixture(scope="module")
def brief_plan():
    from workbench.plan import plan

    return plan(load_scenario(BRIEF, layout_required=False))


def test_the_planner_sentence_for_the_brief_box(brief_plan):
    from workbench.plan.summary import describe_layout
    from workbench.plan.summary import plan_sentence

    r = brief_plan
    best, over = r.row(1), r.fastest_over
    text = plan_sentence(r)
    assert text.startswith(
        f"Llama 3.1 70B on 8 x NVIDIA H200 NVL 141GB fits only with NVMe offload: "
        f"{duration_text(best['step'])} per step, MFU {percent_text(best['mfu'])}, "
        f"1.4 T tokens in {duration_text(1.4e12 / best['tokens_per_s'])} ({describe_layout(best)}")
    # within the default headroom (the memory band's share of the GPU): the fastest NVMe layout
    assert best["offload"] == "nvme" and best["device_per_gpu"] <= r.limit
    assert f"{duration_text(best['step'])} per step, MFU 9 %" in text
    # what more memory would buy: faster, and more than the GPU holds
    assert over["step"] < best["step"] and over["device_per_gpu"] > r.limit
    assert (f"; the fastest layout that needs more memory is {describe_layout(over)}: "
            f"{duration_text(over['step'])} per step, needing "
            f"{memory_text(over['device_per_gpu'])} per GPU of {memory_text(r.limit)}") in text
    assert text.endswith(f". {r.counts['fit']:,} of {r.counts['valid']:,} valid layouts fit.")
    assert r.to_dict(1)["summary"] == text


def test_rows_that_differ_only_in_virtual_stages_fold_into_one(brief_plan):
    import numpy as np

    from workbench.plan.summary import _LAYOUT_KEYS, fold_virtual_stages, range_text

    assert range_text([8, 3, 4, 5, 6, 7]) == "3-8"
    assert range_text([1, 2, 4]) == "1, 2, 4" and range_text([5]) == "5"
    assert range_text([1, 2, 3, 7, 10, 11, 12]) == "1-3, 7, 10-12"
    ranked = {"rank": np.array([1, 2, 3, 4]), "dp": np.array([2, 2, 4, 2]),
              "pp": np.array([4, 4, 2, 4]), "virtual_stages": np.array([8, 7, 1, 2]),
              "step": np.array([1.0, 1.1, 1.2, 1.3])}
    f = fold_virtual_stages(ranked)
    assert f["rank"] == [1, 3] and f["virtual_stages"] == ["2, 7, 8", "1"]
    assert f["ranks"] == ["1, 2, 4", "3"] and f["folded"] == [3, 1]
    assert f["step"] == [1.0, 1.2] and f["step_max"] == [1.3, 1.2]
    assert list(ranked["rank"]) == [1, 2, 3, 4]          # the ranked arrays stay as they are
    # a table of one row: the first group written out, grouped over every row all the same
    one = fold_virtual_stages(ranked, 1)
    assert {k: v for k, v in one.items()} == {k: v[:1] for k, v in f.items()}

    r = brief_plan
    f = fold_virtual_stages(r.ranked)
    n = len(r)
    assert sum(f["folded"]) == n and len(f["rank"]) < n and len(r.ranked["rank"]) == n
    keys = [tuple(f[k][i] for k in _LAYOUT_KEYS) for i in range(len(f["rank"]))]
    assert len(set(keys)) == len(keys)                   # no two rows are the same layout
    assert f["rank"] == sorted(f["rank"]) and f["rank"][0] == 1
    # 80 layers on pp 4: 20 a rank, so v 10 and 20 (Megatron-Core's even split) beside 2-8
    assert f["virtual_stages"][0] == "2-8, 10, 20" and f["folded"][0] > 1
    assert all(a <= b for a, b in zip(f["step"], f["step_max"]))


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)


def test_plan_text_says_the_answer_first_and_folds():
    r = _cli("plan", str(BRIEF), "--top", "5")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("Llama 3.1 70B on 8 x NVIDIA H200 NVL 141GB fits only with "
                               "NVMe offload: ")
    assert any(line.startswith("rows that differ only in virtual stages are folded") for line in lines)
    assert " ranks " in next(line for line in lines if line.lstrip().startswith("rank"))
    r = _cli("plan", str(BRIEF), "--top", "5", "--unfold")
    assert r.returncode == 0 and "are folded" not in r.stdout


def test_estimate_cli_prints_the_verdict_first_and_json_carries_it():
    r = _cli("estimate", str(BRIEF), "--set", "training.offload=cpu")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("VERDICT: No: ")
    assert lines[2].startswith("  [FAIL] host memory: CPU offload needs 1,051.3 GiB")
    assert "next steps (searched in " in r.stdout and "  - Take the planner's" in r.stdout
    out = json.loads(_cli("estimate", str(BRIEF), "--set", "training.offload=cpu",
                          "--json").stdout)
    assert out["memory"]["fits"] is False and out["memory"]["gpu_fits"] is True
    assert out["verdict"]["ok"] is False and out["verdict"]["next"][0]["kind"] == "layout"

"""The timeline, mesh and scaling charts draw exactly what their backends return, and the
backends agree with torch's device mesh, the trial's expert groups, the planner and single
estimates."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tests.conftest import ROOT, scenario_doc
from widgets.charts.mesh import MeshChart
from widgets.charts.scaling import ScalingChart
from widgets.charts.timeline import TimelineChart
from workbench.estimate import estimate
from workbench.plan import Constraints, plan
from workbench.plan.scaling import COLUMNS, scaling_curve
from workbench.units import hbm_bytes
from workbench.scenario import parse_scenario
from workbench.scenario.mesh import GROUP_KINDS, groups_of, node_of, rank_coords
from workbench.scenario.types import Parallel
from workbench.units import GiB

TINY = {"seq_len": 256, "micro_batch": 2, "global_batch": 16, "precision": "fp32",
        "recompute": "none"}


def _tiny(model: str = "tiny-dense", **par) -> dict:
    """16 GPUs (2 nodes of 8), a tiny model: the shape of tiny-trial-4d.yaml."""
    return scenario_doc(model=model, hardware={"nodes": 2},
                        parallel={"dp": 2, "tp": 2, "pp": 2, "cp": 2, "zero": 3, **par},
                        training=TINY)


# -- timeline --------------------------------------------------------------------------------
@pytest.mark.parametrize("parallel,kinds", [
    ({"dp": 2, "pp": 4}, {"F", "B"}),
    ({"dp": 2, "pp": 4, "pp_schedule": "zero-bubble", "virtual_stages": 2}, {"F", "I", "W"}),
    ({"dp": 2, "pp": 4, "pp_schedule": "interleaved-1f1b", "virtual_stages": 2}, {"F", "B"}),
])
def test_timeline_bars_are_the_estimates_blocks(parallel, kinds):
    s = parse_scenario(scenario_doc(parallel=parallel, training={"global_batch": 16}))
    est = estimate(s)
    chart = TimelineChart()
    chart.update(est)
    blocks = est.timeline()
    drawn = []
    for trace in chart.widget.data:
        assert len(trace.x) == len(trace.y) == len(trace.base) == len(trace.text)
        assert trace.showlegend == (trace.meta in kinds)
        for r, start, width, cd, text in zip(trace.y, trace.base, trace.x, trace.customdata,
                                             trace.text):
            drawn.append((r, trace.meta, int(cd[2]), start, start + width))
            assert text in ("", str(int(cd[2])))   # labelled with its microbatch, or not
    want = [(b.rank, b.kind, b.microbatch, b.start * 1e3, b.end * 1e3) for b in blocks]
    drawn, want = sorted(drawn), sorted(want)
    assert [d[:3] for d in drawn] == [w[:3] for w in want]       # rank, kind, microbatch
    assert [d[3:] for d in drawn] == [pytest.approx(w[3:], rel=1e-12) for w in want]
    per_rank = s.microbatches * s.parallel.chunks_per_rank * len(kinds)
    for r in range(s.parallel.pp):
        assert sum(1 for d in drawn if d[0] == r) == per_rank
    end = max(b.end for b in blocks) * 1e3
    assert max(d[4] for d in drawn) == pytest.approx(end) and all(d[4] <= end for d in drawn)
    title = chart.widget.layout.title.text
    assert s.parallel.pp_schedule in title
    assert f"bubble {est.time.bubble / est.time.step:.1%} of the step" in title
    assert list(chart.widget.layout.yaxis.tickvals) == list(range(s.parallel.pp))
    assert "(ms)" in chart.widget.layout.xaxis.title.text


def test_timeline_caps_the_drawn_microbatches_and_redraws_a_single_rank():
    s = parse_scenario(scenario_doc(parallel={"dp": 2, "pp": 4}, training={"global_batch": 32}))
    chart = TimelineChart()
    chart.update(estimate(s), microbatches=4)
    assert sum(len(t.x) for t in chart.widget.data) == 4 * 4 * 2
    assert {int(c[2]) for t in chart.widget.data for c in t.customdata} == {0, 1, 2, 3}
    assert f"4 of {s.microbatches} microbatches" in chart.widget.layout.title.text
    flat = estimate(parse_scenario(scenario_doc(training={"global_batch": 16})))   # pp = 1
    chart.update(flat)
    assert set(chart.widget.data[0].y) == {0} and len(chart.widget.data[0].x) == 2
    assert "no pipeline" in chart.widget.layout.title.text


# -- mesh backend ----------------------------------------------------------------------------
def _torch_groups(par: Parallel, rank: int) -> dict[str, list[int]]:
    """The groups as slices of torch's device-mesh tensor (pp, dp, cp, tp) and the trial's EP
    rule on its (pp, dp x cp, tp) view."""
    import torch

    mesh = torch.arange(par.world).reshape(par.pp, par.dp, par.cp, par.tp)
    p, d, c, t = (int(i) for i in (mesh == rank).nonzero()[0])
    flat = mesh.reshape(par.pp, par.dp * par.cp, par.tp)[p, :, t].tolist()
    dc = flat.index(rank)
    g0 = dc - dc % par.ep
    return {"pp": mesh[:, d, c, t].tolist(), "dp": mesh[p, :, c, t].tolist(),
            "cp": mesh[p, d, :, t].tolist(), "tp": mesh[p, d, c, :].tolist(),
            "ep": flat[g0:g0 + par.ep], "edp": flat[dc % par.ep::par.ep]}


@pytest.mark.parametrize("par", [Parallel(pp=2, dp=2, cp=2, tp=2),
                                 Parallel(pp=2, dp=2, cp=2, tp=2, ep=2),
                                 Parallel(pp=2, dp=2, cp=2, tp=2, ep=4),
                                 Parallel(pp=3, dp=4, cp=1, tp=2, ep=2)])
def test_groups_agree_with_torch_mesh_slicing(par):
    coords = rank_coords(par)
    assert [c["rank"] for c in coords] == list(range(par.world))
    for c in coords:
        r = c["rank"]
        assert r == ((c["pp"] * par.dp + c["dp"]) * par.cp + c["cp"]) * par.tp + c["tp"]
        got, want = groups_of(par, r), _torch_groups(par, r)
        assert set(got) == set(GROUP_KINDS)
        for kind in GROUP_KINDS:
            assert got[kind] == sorted(want[kind]), (r, kind)
        assert len(got["ep"]) == par.ep and len(got["edp"]) == par.dp * par.cp // par.ep
    assert [node_of(r, 8) for r in (0, 7, 8, 15, 16)] == [0, 0, 1, 1, 2]


def test_groups_agree_with_the_trials_process_groups():
    """A real ``init_device_mesh`` and the trial's ``expert_groups`` on a fake 16-rank world."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from workbench.trial.expert_parallel import expert_groups

    par = Parallel(pp=2, dp=2, cp=2, tp=2, ep=2)
    for rank in range(par.world):
        dist.init_process_group("fake", rank=rank, world_size=par.world, store=FakeStore())
        try:
            mesh = init_device_mesh("cpu", (par.pp, par.dp, par.cp, par.tp),
                                    mesh_dim_names=("pp", "dp", "cp", "tp"))
            got = groups_of(par, rank)
            for kind in ("pp", "dp", "cp", "tp"):
                assert sorted(dist.get_process_group_ranks(mesh[kind].get_group())) == got[kind]
            (ep_group, _), edp = expert_groups(mesh, par)
            assert sorted(dist.get_process_group_ranks(ep_group)) == got["ep"]
            assert sorted(np.asarray(edp.mesh).reshape(-1).tolist()) == got["edp"]
        finally:
            dist.destroy_process_group()


# -- mesh chart ------------------------------------------------------------------------------
def test_mesh_select_marks_exactly_the_groups_and_a_click_selects():
    s = parse_scenario(_tiny("tiny-moe", ep=2))
    chart = MeshChart(s)
    base = chart.widget.data[0]
    assert len(base.x) == 16 and list(base.customdata) == list(range(16))
    assert list(base.y) == [node_of(r, 8) for r in range(16)]     # a node per row
    assert list(base.x) == [r % 8 for r in range(16)]
    pos = {r: (x, y) for r, x, y in zip(base.customdata, base.x, base.y)}
    for rank in (0, 5, 10, 15):
        chart.select(rank)
        want = groups_of(s.parallel, rank)
        assert chart.selected == rank and chart.groups == want
        by_kind = {t.meta: t for t in chart.widget.data[1:]}
        assert set(by_kind) == {*GROUP_KINDS, "selected"}
        for kind in GROUP_KINDS:
            t = by_kind[kind]
            assert list(t.customdata) == want[kind]
            assert list(zip(t.x, t.y)) == [pos[r] for r in want[kind]]
            assert f"({len(want[kind])} GPU" in t.name
        assert list(by_kind["selected"].customdata) == [rank]
        assert f"rank {rank} " in chart.widget.layout.title.text
    # the page's click message, as widgets/charts/plot.js sends it (the browser test clicks)
    chart.widget._handle_custom_msg({"event": "click", "points": [{"trace": 0, "index": 11}]}, [])
    assert chart.selected == 11
    assert list(chart.widget.data[1].customdata) == groups_of(s.parallel, 11)["tp"]


def test_mesh_update_redraws_a_new_layout():
    chart = MeshChart(parse_scenario(_tiny()))
    chart.select(13)
    assert chart.widget.data[5].visible == "legendonly"          # ep = 1: EP outlines hidden
    small = parse_scenario(scenario_doc(parallel={"dp": 4, "tp": 2}, training={"global_batch": 16}))
    chart.update(small)
    assert len(chart.widget.data[0].x) == 8 and chart.selected == 0   # rank 13 is gone
    assert list(chart.widget.data[1].customdata) == [0, 1]          # tp pairs
    assert list(chart.widget.data[3].customdata) == [0, 2, 4, 6]    # dp stride tp
    # a large cluster wraps nodes into blocks side by side, one column apart
    big = parse_scenario(scenario_doc(hardware={"nodes": 64}, parallel={"dp": 64, "tp": 8},
                                      training={"global_batch": 64}))
    chart.update(big)
    xs, ys = chart.widget.data[0].x, chart.widget.data[0].y
    assert len(set(zip(xs, ys))) == 512 and max(ys) < 64 and max(xs) > 8


# -- scaling ---------------------------------------------------------------------------------
def test_gpu_sweep_is_the_planners_best_at_each_count():
    s = parse_scenario(_tiny())
    df = scaling_curve(s, "gpus")
    assert list(df.columns) == list(COLUMNS)
    assert df["value"].tolist() == [1, 2, 4, 8, 16] and (df["value"] == df["gpus"]).all()
    res = plan(s, Constraints(gpu_counts=(1, 2, 4, 8)))
    front = {d["gpus"]: d["tokens_per_s"] for d in res.by_gpu_count}
    for _, row in df.iterrows():
        assert row["fits"] and row["valid"]
        assert row["tokens_per_s"] == pytest.approx(front[row["gpus"]], rel=1e-12)
        assert row["dp"] * row["tp"] * row["pp"] * row["cp"] == row["gpus"]
    best = res.table.iloc[0]
    last = df.iloc[-1]
    for k in ("dp", "tp", "pp", "cp", "ep", "zero", "micro_batch", "step", "memory_per_gpu"):
        assert last[k] == best[k], k
    chart = ScalingChart()
    chart.update(s, over="gpus")
    tok, mem, cap, _above, _beyond = chart.widget.data
    assert list(tok.x) == [1, 2, 4, 8, 16]
    assert list(tok.y) == pytest.approx(df["tokens_per_s"].tolist(), rel=1e-12)
    assert list(mem.y) == pytest.approx((df["memory_per_gpu"] / GiB).tolist(), rel=1e-12)
    assert list(cap.y) == pytest.approx([hbm_bytes(s.hardware.gpu.memory_gb) / 2 ** 30] * 2)
    assert "GiB" in chart.widget.layout.yaxis2.title.text and chart.dropped == []


def _scalar(s, row) -> object:
    """The single estimate of a sweep row's layout on its GPUs."""
    doc = s.to_dict()
    doc["parallel"] = {**doc["parallel"], **{k: int(row[k]) for k in
                                             ("dp", "tp", "pp", "cp", "ep", "virtual_stages")}}
    doc["parallel"].pop("shard_group")
    doc["hardware"] = {**doc["hardware"], "nodes": int(row["nodes"]),
                       "gpus_per_node": int(row["gpus_per_node"])}
    return estimate(parse_scenario(doc))


@pytest.mark.parametrize("model,over,values,invalid", [
    ("tiny-dense", "tp", [1, 2, 3, 4, 8], {3, 8}),
    ("tiny-dense", "pp", None, set()),
    ("tiny-dense", "dp", [1, 2, 4, 8], {8}),  # dp 4: 32 GPUs; dp 8: 1 microbatch < pp 2
    ("tiny-moe", "ep", [1, 2, 3, 4, 8], {3, 8}),
    ("tiny-moe", "cp", [1, 2, 4], set()),
])
def test_degree_sweep_points_are_single_estimates(model, over, values, invalid):
    s = parse_scenario(_tiny(model, ep=2) if model == "tiny-moe" else _tiny(model))
    df = scaling_curve(s, over, values)
    assert df["value"].tolist() == sorted(values or df["value"].tolist())
    assert set(df.loc[~df["valid"], "value"]) == invalid
    for _, row in df[~df["valid"]].iterrows():
        assert row["reason"] and math.isnan(row["tokens_per_s"]) and not row["fits"]
    for _, row in df[df["valid"]].iterrows():
        assert row[over] == row["value"]
        if over in ("tp", "pp", "cp"):
            assert row["gpus"] == 16 and row["dp"] * row["tp"] * row["pp"] * row["cp"] == 16
        est = _scalar(s, row)
        assert row["step"] == pytest.approx(est.time.step, rel=1e-9)
        assert row["memory_per_gpu"] == pytest.approx(est.memory.per_gpu.total, rel=1e-9)
        assert row["tokens_per_s"] == pytest.approx(est.run.tokens_per_s, rel=1e-9)
        assert row["fits"] == est.memory.gpu_fits and (row["reason"] == "") == est.memory.gpu_fits
    chart = ScalingChart()
    chart.draw(df, over)
    ok = df[df["valid"]]
    assert list(chart.widget.data[0].x) == ok["value"].tolist()
    assert list(chart.widget.data[0].y) == pytest.approx(ok["tokens_per_s"].tolist())
    assert {v for v, _ in chart.dropped} == invalid
    assert all(why for _, why in chart.dropped)
    note = chart.widget.layout.annotations
    assert (len(note) == 1 and "not drawn" in note[0].text) if invalid else not note
    assert over in chart.widget.layout.xaxis2.title.text


def test_gpu_sweep_reports_progress_and_can_be_cancelled():
    from workbench.plan.search import Cancelled

    s = parse_scenario(_tiny())
    seen = []
    scaling_curve(s, "gpus", [4, 16], progress=lambda f, what: seen.append((f, what)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert any(w.startswith("4 GPUs: ") for _, w in seen)
    assert any(w.startswith("16 GPUs: ") for _, w in seen)
    with pytest.raises(Cancelled):
        scaling_curve(s, "gpus", [4, 16], progress=lambda f, what: f < 0.5)


def test_sweep_rejects_an_unknown_axis_and_bad_values():
    s = parse_scenario(_tiny())
    with pytest.raises(ValueError, match="over must be"):
        scaling_curve(s, "zero")
    with pytest.raises(ValueError, match="positive integers"):
        scaling_curve(s, "tp", [0, 2])
    row = scaling_curve(s, "gpus", [32]).iloc[0]
    assert not row["valid"] and "more than the scenario's 16 GPUs" in row["reason"]


def test_the_timeline_speaks_seconds_for_a_long_phase_and_milliseconds_for_a_short_one():
    """Units for people: the brief's 70B in 4 stages draws a phase of tens of seconds in s
    (not "70k ms"), the tiny trial model's in ms; the hover says the same unit."""
    from widgets.charts.timeline import TimelineChart
    from workbench.estimate import estimate
    from workbench.scenario import load_scenario

    c = TimelineChart()
    c.update(estimate(load_scenario(str(ROOT / "examples/brief-8xh200-70b.yaml"),
                                    ["parallel.pp=4", "parallel.dp=2", "parallel.zero=1"])),
             microbatches=16)
    assert c.widget.layout.xaxis.title.text.endswith("(s)")
    assert all(t.hovertemplate.endswith(" s<extra></extra>") for t in c.widget.data)
    assert max(max(t.base) + max(t.x) for t in c.widget.data if len(t.x)) < 1000
    c.update(estimate(load_scenario(str(ROOT / "examples/tiny-trial-4d.yaml"))), microbatches=16)
    assert c.widget.layout.xaxis.title.text.endswith("(ms)")
    assert all(t.hovertemplate.endswith(" ms<extra></extra>") for t in c.widget.data)

"""The memory pass's, the rows' and the rule mask's shortcuts give what the plain formulation
gives: the mask compacted to the rows still standing, ranks placed once per distinct
(pp, chunks per rank, rank), every communicator's NCCL bytes at once, the categories at the
peak phase, and the rows each layout evaluates."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.conftest import scenario_doc
from workbench.catalog.models import MODELS
from workbench.estimate.memory import device as dm
from workbench.estimate.cost_model import rows as grid_rows
from workbench.estimate.memory.peak import CATEGORIES, PHASES, at_peak
from workbench.estimate.cost_model.pipeline_ranks import rank_rows
from workbench.scenario import parse_scenario
from workbench.scenario.layouts import LayoutGrid
from workbench.scenario.rules import layout_mask, layout_masks, table
from workbench.scenario.types import Parallel

SCHEDULES = ("1f1b", "interleaved-1f1b", "zero-bubble", "dualpipev", "gpipe")


def _grid(world: int, sched: str) -> LayoutGrid:
    rows = [(world // (tp * pp * cp), tp, pp, cp, ep, zero, v, mb, sg)
            for tp, pp, cp, ep, zero, v, mb, sg in itertools.product(
                (1, 2, 8), (1, 2, 4), (1, 2), (1, 2, 8), (0, 1, 2, 3), (1, 2), (1, 2), (0, 2))
            if world % (tp * pp * cp) == 0]
    return LayoutGrid(*np.array(rows).T, pp_schedule=sched)


def _every_condition(base, grid) -> np.ndarray:
    """Each condition over every row, and-ed: the mask without shortcuts."""
    v = table.Layouts(grid, grid.micro_batch, base)
    ok = np.ones(len(grid), dtype=bool)
    for r in table.RULES:
        for c in r.conditions:
            ok &= np.broadcast_to(np.asarray(c.ok(v), dtype=bool), ok.shape)
    return ok


@pytest.mark.parametrize("model", ["tiny-dense", "tiny-moe"])
@pytest.mark.parametrize("sched", SCHEDULES)
def test_a_compacted_mask_is_every_condition_on_every_row(model, sched, monkeypatch):
    base = parse_scenario(scenario_doc(model=model, hardware={"nodes": 2},
                                       parallel={"dp": 16, "zero": 1},
                                       training={"seq_len": 256, "global_batch": 64}))
    grid = _grid(16, sched)
    want = _every_condition(base, grid)
    assert 0 < want.sum() < len(grid)          # the rules keep some rows and fail others
    for limit in (len(grid), 8):               # as it is, and compacted whenever half fail
        monkeypatch.setattr(table, "COMPACT_ROWS", limit)
        assert np.array_equal(layout_mask(base, grid), want)
        bases = {off: parse_scenario(scenario_doc(
            model=model, hardware={"nodes": 2}, parallel={"dp": 16, "zero": 1},
            training={"seq_len": 256, "global_batch": 64, "offload": off}))
            for off in ("none", "cpu")}
        masks = layout_masks(bases, grid, "training.offload")
        for off, b in bases.items():
            assert np.array_equal(masks[off], _every_condition(b, grid))


@pytest.mark.parametrize("model", ["llama3-8b", "deepseek-v3", "tiny-moe"])
@pytest.mark.parametrize("sched", SCHEDULES)
def test_ranks_placed_once_per_distinct_rank_are_those_placed_row_by_row(model, sched,
                                                                         monkeypatch):
    m = MODELS[model]
    pps = [p for p in (1, 2, 3, 4, 8, 16) if m.layers >= 2 * p]
    rows = np.array([(1, 1, p, 1, 1, 0, v, 1, 0) for p in pps for v in (1, 2)]).T
    grid = LayoutGrid(*rows, pp_schedule=sched)
    keep = ("layers", "dense", "sends", "head_rank")
    for every in (False, True):
        monkeypatch.setattr(grid_rows, "DISTINCT_PLACEMENT_WORK", 10**9)
        by_row = grid_rows.Rows(m, 64, grid, every)
        monkeypatch.setattr(grid_rows, "DISTINCT_PLACEMENT_WORK", 0)
        distinct = grid_rows.Rows(m, 64, grid, every)
        for f in keep:
            assert np.array_equal(getattr(by_row, f), getattr(distinct, f)), f
            assert getattr(by_row, f).dtype == np.int64


@pytest.mark.parametrize("model", ["llama3-8b", "deepseek-v3"])
@pytest.mark.parametrize("sched", SCHEDULES)
def test_rank_rows_are_sorted_distinct_and_hold_the_first_and_last_rank(model, sched):
    m = MODELS[model]
    rows = np.array([(1, 1, p, 1, 1, 0, v, 1, 0) for p in (1, 2, 3, 4, 7, 8, 16, 30)
                     for v in (1, 2)]).T
    grid = LayoutGrid(*rows, pp_schedule=sched)
    layout, rank = rank_rows(m, grid, False)
    assert np.all(np.diff(layout) >= 0)
    for i in range(len(grid)):
        mine = rank[layout == i]
        assert np.all(np.diff(mine) > 0)                  # ascending, each once
        assert mine[0] == 0 and mine[-1] == grid.pp[i] - 1


def test_device_overhead_is_each_layouts_communicators_one_by_one():
    s = parse_scenario(scenario_doc(model="tiny-moe", hardware={"nodes": 4},
                                    parallel={"dp": 32}))
    grid = _grid(32, "1f1b")
    got = dm.device_overhead(s.hardware, grid)
    fixed = sum(dm.device_terms(s.hardware.gpu.arch, []).values())
    for i in range(0, len(grid), 7):
        par = Parallel(dp=int(grid.dp[i]), tp=int(grid.tp[i]), pp=int(grid.pp[i]),
                       cp=int(grid.cp[i]), ep=int(grid.ep[i]), zero=int(grid.zero[i]),
                       shard_group=int(grid.shard_group[i]) or None)
        one = sum(dm.communicator_bytes(s.hardware.gpu.arch, int(n), bool(c))
                  for n, c in dm.communicators(par, s.hardware.gpus_per_node))
        assert got[i] == fixed + one
        assert dm.device_overhead(s.hardware, par) == fixed + one


def test_at_peak_takes_each_category_from_the_peak_phase():
    rng = np.random.default_rng(0)
    n = 50
    shared = rng.random(n)                  # a category held alike in every phase
    parts = {p: {c: shared if c == "params" else rng.random(n) for c in CATEGORIES}
             for p in PHASES}
    parts["loss"]["activations"] = parts["forward"]["activations"]
    parts["optimizer"]["activations"] = 0.0
    at = rng.integers(0, len(PHASES), n)
    got = at_peak(parts, at)
    for c in CATEGORIES:
        want = [np.broadcast_to(parts[PHASES[a]][c], n)[j] for j, a in enumerate(at)]
        assert got[c].shape == (n,)
        assert got[c].tolist() == want

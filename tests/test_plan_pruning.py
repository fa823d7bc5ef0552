"""Property: the pruned search (the memory pass on every row, the time pass only where
``plan.pruning`` says a reader needs the step) gives what the unpruned search (the time pass on
every row) gives — the ranked table row for row, in the same order, the same figures to 1e-9;
the counts; the least-memory layout; the fastest layout that needs more memory; the layouts
short of host memory — over random scenarios (models, GPUs, node counts, engines, fine-tuning
methods, memory limits) drawn by hypothesis."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.conftest import ROOT
from workbench.errors import ScenarioError
from workbench.plan.constraints import REAL_ENGINES, Constraints
from workbench.plan.result import PlanResult
from workbench.plan.search import search_rows
from workbench.scenario import load_scenario
from workbench.scenario.types import SCHEDULES, Parallel

MODELS = ("llama3.2-1b", "llama3-8b", "mistral-7b", "llama3-70b", "mixtral-8x7b", "tiny-moe",
          "gpt2-small")
GPUS = ("h100-sxm", "h200-nvl", "a100-sxm-40gb", "rtx-4090", "mi300x", "l40s", "b200")
EXAMPLES = ("brief-8xh200-70b.yaml", "llama3-8b-8xh100.yaml", "mixtral-8x7b-ep.yaml")


def _same(a, b, where: str) -> None:
    """Equal dicts of columns or plain values: numbers to 1e-9, NaN where the other is NaN."""
    if a is None or b is None:
        assert a is None and b is None, where
        return
    assert a.keys() == b.keys(), where
    for k in a:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        if x.dtype.kind == "f" or y.dtype.kind == "f":
            np.testing.assert_allclose(x.astype(float), y.astype(float), rtol=1e-9, atol=0,
                                       err_msg=f"{where}.{k}")
        else:
            assert np.array_equal(x, y), f"{where}.{k}"


def _results(s, c: Constraints) -> tuple[PlanResult, PlanResult]:
    return tuple(PlanResult.build(s, c, search_rows(s, c, prune=prune))
                 for prune in (True, False))


def _assert_same(s, c: Constraints) -> PlanResult:
    pruned, full = _results(s, c)
    _same(pruned.ranked, full.ranked, "ranked")
    assert pruned.counts == full.counts
    _same(pruned.smallest, full.smallest, "smallest")
    _same(pruned.fastest_over, full.fastest_over, "fastest_over")
    assert pruned.gpu_fit_host_short == full.gpu_fit_host_short
    return full


@st.composite
def scenarios(draw):
    sets = [f"model.preset={draw(st.sampled_from(MODELS))}",
            f"hardware.gpu={draw(st.sampled_from(GPUS))}",
            f"hardware.nodes={draw(st.sampled_from((1, 2, 4)))}",
            f"training.engine={draw(st.sampled_from(('generic', *REAL_ENGINES)))}",
            f"training.method={draw(st.sampled_from(('full', 'lora', 'qlora')))}",
            f"training.seq_len={draw(st.sampled_from((2048, 4096, 8192)))}",
            f"training.global_batch={draw(st.sampled_from((16, 64, 256)))}"]
    if draw(st.booleans()):
        sets.append("training.recompute=none")
    try:
        s = load_scenario(str(ROOT / "examples" / draw(st.sampled_from(EXAMPLES))), sets,
                          layout_required=False)
    except ScenarioError:
        assume(False)
    s = dataclasses.replace(s, parallel=Parallel())       # as ``plan`` starts
    return s, Constraints(max_memory_fraction=draw(st.sampled_from((1.0, 0.6, 0.25))))


@pytest.mark.slow
@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(scenarios())
def test_the_pruned_search_ranks_what_the_unpruned_one_does(case):
    s, c = case
    try:
        _assert_same(s, c)
    except ScenarioError:       # a setting no engine variant builds: nothing to compare
        assume(False)


def test_the_pruned_405b_search_on_16384_h200_equals_the_unpruned_one():
    s = load_scenario(str(ROOT / "examples/llama3-405b-h200-cluster.yaml"),
                      ["hardware.nodes=2048", "parallel.dp=128", "training.global_batch=2048"])
    full = _assert_same(dataclasses.replace(s, parallel=Parallel()), Constraints())
    assert len(full.ranked["rank"]) > 1000 and full.fastest_over is not None


def test_the_far_fallback_and_no_fit_paths_are_exact(monkeypatch):
    s = load_scenario(str(ROOT / "examples/brief-8xh200-70b.yaml"), layout_required=False)
    s = dataclasses.replace(s, parallel=Parallel())
    # nothing fits: the least-memory layout is the only one timed beyond the fits
    _assert_same(s, Constraints(max_memory_fraction=0.2))
    # an empty window: fastest_over always comes from beyond it, timed in order of memory
    # until one is faster than the best that fits
    from workbench.plan import pruning, result
    monkeypatch.setattr(result, "OVER_WINDOW", 0.0)
    monkeypatch.setattr(pruning, "OVER_WINDOW", 0.0)
    timed = []
    monkeypatch.setattr(pruning, "_time", lambda cols, groups, rows: (
        timed.append(len(rows)), _TIME(cols, groups, rows))[1])
    for fraction in (1.0, 0.5):
        timed.clear()
        full = _assert_same(s, Constraints(max_memory_fraction=fraction))
        assert full.fastest_over is not None
        assert len(timed) > 1      # the fallback ran


_TIME = __import__("workbench.plan.pruning", fromlist=["_time"])._time


def _assert_columns_are_the_memory_pass(s, c: Constraints, schedule: str, sp: bool) -> int:
    """Every (recompute, offload) setting's memory figures as the search reads them from its
    pass's columns (``pruning.PassRows``: the terms no offload changes once per recompute)
    equal the memory pass of ``evaluate_layouts`` on the layouts the rules admit, and one
    mask per pass (``layout_masks``) equals ``layout_mask`` per offload. Returns the layouts
    compared."""
    from workbench.estimate.cost_model.compose import evaluate_layouts
    from workbench.estimate.memory.device import device_overhead
    from workbench.estimate.cost_model.rows import Rows
    from workbench.plan.pruning import PassRows
    from workbench.plan.search import with_setting, switch_variants
    from workbench.plan.space import candidate_rows
    from workbench.scenario.layouts import LayoutGrid
    from workbench.scenario.rules import layout_mask, layout_masks
    from workbench.scenario.types import OFFLOAD, RECOMPUTE
    from workbench.engines import engine_of

    v = switch_variants(s, c)[0]
    r = candidate_rows(v, v.hardware.world, schedule, c.fixed)
    if not sp:
        r = r[:, r[1] > 1]
    g = LayoutGrid(*r, pp_schedule=schedule, sequence_parallel=sp,
                   expert_tp=v.parallel.expert_tp)
    recomputes = [x for x in RECOMPUTE if x in engine_of(v.training).recompute]
    bases = {off: with_setting(v, sp, recomputes[0], off) for off in OFFLOAD}
    masks = layout_masks(bases, g, "training.offload")
    for off, base in bases.items():
        assert np.array_equal(masks[off], layout_mask(base, g)), off
    valid = np.logical_or.reduce(list(masks.values()))
    if not valid.any():
        return 0
    g = g.take(valid)
    pas = PassRows(Rows(v.model, v.training.global_batch, g, False),
                   np.broadcast_to(device_overhead(v.hardware, g), len(g)))
    compared = 0
    for rc in recomputes:
        pas.reach({off: with_setting(v, sp, rc, off) for off in OFFLOAD}, np.ones(len(g), bool), {})
        for off in OFFLOAD:
            ok = masks[off][valid]
            if not ok.any():
                continue
            want = evaluate_layouts(with_setting(v, sp, rc, off), g.take(ok))
            got = pas.figures(rc, off, ok)
            for k in ("memory_per_gpu", "device_per_gpu", "host_fits", "fits"):
                _same({k: got[k]}, {k: want[k]}, f"{rc}/{off}")
            compared += int(ok.sum())
    return compared


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(scenarios(), st.sampled_from(SCHEDULES), st.booleans())
def test_every_settings_memory_column_is_the_memory_pass(case, schedule, sp):
    s, c = case
    try:
        _assert_columns_are_the_memory_pass(s, c, schedule, sp)
    except ScenarioError:
        assume(False)


def test_the_405b_memory_columns_are_the_memory_pass():
    s = load_scenario(str(ROOT / "examples/llama3-405b-h200-cluster.yaml"),
                      ["hardware.nodes=2048", "parallel.dp=128", "training.global_batch=2048"])
    s = dataclasses.replace(s, parallel=Parallel())
    assert _assert_columns_are_the_memory_pass(s, Constraints(), "interleaved-1f1b", True) > 1000

"""The vectorised layout grid gives the single estimate's numbers, and the validator's verdicts."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.conftest import scenario_doc
from workbench.errors import ScenarioError
from workbench.estimate import estimate
from workbench.estimate.cost_model.compose import evaluate, evaluate_layouts
from workbench.scenario.layouts import LayoutGrid
from workbench.scenario.rules import layout_mask
from workbench.scenario import parse_scenario

FIELDS = ("dp", "tp", "pp", "cp", "ep", "zero", "virtual_stages", "micro_batch")
SCHEDULES = ("1f1b", "interleaved-1f1b", "zero-bubble", "dualpipev", "gpipe")


def _rows(world: int) -> np.ndarray:
    rows = [(world // (tp * pp * cp), tp, pp, cp, ep, zero, v, mb)
            for tp, pp, cp, ep, zero, v, mb in itertools.product(
                (1, 2, 8), (1, 2, 4), (1, 2), (1, 2, 8), (0, 1, 3), (1, 2), (1, 2))
            if world % (tp * pp * cp) == 0]
    return np.array(rows).T


def _scalar(doc: dict, row, sched: str):
    d = dict(zip(FIELDS, map(int, row)))
    mb = d.pop("micro_batch")
    return {**doc, "parallel": {**d, "pp_schedule": sched},
            "training": {**doc["training"], "micro_batch": mb}}


@pytest.mark.parametrize("model,seq", [("tiny-dense", 256), ("tiny-moe", 256),
                                       ("llama3-8b", 4096)])
@pytest.mark.parametrize("sched", SCHEDULES)
def test_grid_matches_single_estimates_and_the_validator(model, seq, sched):
    doc = scenario_doc(model=model, hardware={"nodes": 2}, parallel={"dp": 16},
                       training={"seq_len": seq, "global_batch": 64})
    base = parse_scenario(doc)
    rows = _rows(16)
    mask = layout_mask(base, LayoutGrid(*rows, pp_schedule=sched))
    for i, row in enumerate(rows.T):
        try:
            parse_scenario(_scalar(doc, row, sched))
            ok = True
        except ScenarioError:
            ok = False
        assert ok == mask[i], dict(zip(FIELDS, row))
    picked = rows[:, mask][:, ::4]                       # every 4th valid layout
    out = evaluate_layouts(base, LayoutGrid(*picked, pp_schedule=sched))
    for j, row in enumerate(picked.T):
        est = estimate(parse_scenario(_scalar(doc, row, sched)))
        assert out["step"][j] == pytest.approx(est.time.step, rel=1e-9)
        assert out["memory_per_gpu"][j] == pytest.approx(est.memory.per_gpu.total, rel=1e-9)
        assert out["tokens_per_s"][j] == pytest.approx(est.run.tokens_per_s, rel=1e-9)
        assert bool(out["fits"][j]) == est.memory.gpu_fits   # the grid's fits: GPU memory
        assert bool(out["host_fits"][j]) == (est.memory.host_fits and est.memory.nvme_fits)


@pytest.mark.parametrize("sched", SCHEDULES)
@pytest.mark.parametrize("model,layers,dense_layers", [
    ("tiny-moe", 26, 1), ("tiny-moe", 29, 3), ("tiny-moe", 37, 8), ("tiny-dense", 31, None)])
def test_the_ranks_a_search_evaluates_give_every_ranks_worst(sched, model, layers, dense_layers):
    """A search evaluates a few pipeline ranks per layout (``pipeline_ranks.rank_slots``); the
    worst of them is the worst of every rank, for uneven splits and MoE models whose leading
    dense layers span several ranks (where a middle rank can be the worst)."""
    m = {"preset": model, "layers": layers}
    if dense_layers is not None:
        m["moe"] = {"experts": 8, "top_k": 2, "dense_layers": dense_layers}
    doc = scenario_doc(model=m, hardware={"gpus_per_node": 8, "nodes": 6}, parallel={"dp": 48},
                       training={"seq_len": 256, "global_batch": 192})
    base = parse_scenario(doc)
    rows = np.array([(48 // (tp * pp), tp, pp, 1, ep, zero, v, mb, sg)
                     for tp, pp, ep, zero, v, mb, sg in itertools.product(
                         (1, 2), (1, 2, 3, 4, 6, 8, 12), (1, 2), (0, 1, 3), (1, 2, 3), (1, 2),
                         (0, 2)) if 48 % (tp * pp) == 0]).T
    g = LayoutGrid(*rows, pp_schedule=sched)
    g = g.take(layout_mask(base, g))
    few, every = evaluate(base, g), evaluate(base, g, every_rank=True)
    assert len(few.rank_index) < len(every.rank_index)
    for key in ("step", "memory_per_gpu", "bubble", "tokens_per_s", "host_per_node"):
        np.testing.assert_allclose(few.layout[key], every.layout[key], rtol=1e-12)

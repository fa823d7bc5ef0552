"""The vectorised layout grid gives the single estimate's numbers, and the validator's verdicts."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.conftest import scenario_doc
from workbench.errors import ScenarioError
from workbench.estimate import estimate
from workbench.estimate.grid import LayoutGrid, evaluate_layouts, valid_layouts
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
    mask = valid_layouts(base, LayoutGrid(*rows, pp_schedule=sched))
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
        assert bool(out["fits"][j]) == est.memory.fits
        assert bool(out["host_fits"][j]) == (est.memory.host_fits and est.memory.nvme_fits)

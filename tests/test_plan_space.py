"""The planner's search space holds what experts run (issue 44): every published layout is a
candidate the rules pass, torchtitan gets TP, virtual stages go past 8, expert TP is searched;
and the default memory headroom is the verdict's."""
from __future__ import annotations

import dataclasses
import importlib.util
import sys

import numpy as np
import pytest

from tests.conftest import ROOT
from workbench.engines import engine_of
from workbench.engines.accuracy import memory_band
from workbench.estimate.memory.fit import surely_fits
from workbench.headroom import DEFAULT_MEMORY_FRACTION, band_fraction
from workbench.plan import Constraints, plan
from workbench.plan.space import ROW_FIELDS, candidate_rows, divisors, expert_tp_values
from workbench.plan.summary import limit_sentence
from workbench.scenario import load_scenario
from workbench.scenario.types import Parallel

sys.path.insert(0, str(ROOT / "benchmarks"))      # published_space.py reads accuracy.py
_spec = importlib.util.spec_from_file_location("published_space",
                                               ROOT / "benchmarks" / "published_space.py")
published_space = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(published_space)


def test_every_published_layout_is_in_the_space_or_refused_with_a_reason():
    """Each of the 391 published runs: a candidate of its schedule under a searched setting,
    passing the rule mask, on its own scenario (only the screen and the mask run)."""
    recs = published_space.records()
    places = [published_space.place(rec) for rec in recs]
    outside = [(rec["id"], why) for rec, (where, why) in zip(recs, places) if where == "outside"]
    assert outside == []
    refused = [why for where, why in places if where == "refused"]
    assert all(refused)                  # a refusal carries the validator's line
    assert len(recs) == 391 and sum(where == "in" for where, _ in places) == 391 - len(refused)


def _405b():
    """Llama 3.1 405B on 512 H200 (the example)."""
    return load_scenario(ROOT / "examples/llama3-405b-h200-cluster.yaml")


def test_torchtitan_candidates_have_tp():
    """torchtitan runs TP only with SP (rule engine_sp): TP is screened with SP on too."""
    s = _405b()
    s = dataclasses.replace(s, training=dataclasses.replace(s.training, engine="torchtitan"),
                            parallel=Parallel())
    rows = candidate_rows(s, s.hardware.world, "1f1b", {})
    assert sorted(set(rows[1].tolist())) == [1, 2, 4, 8]      # TP divides the 8 kv heads
    r = plan(s, Constraints(fixed={"pp_schedule": "1f1b"}))
    assert (r.ranked["tp"] > 1).any()
    assert r.ranked["sequence_parallel"][r.ranked["tp"] > 1].astype(bool).all()


def test_virtual_stages_go_past_eight_where_layers_split_evenly():
    """126 layers: pp 4 holds 32 layers a rank (rounded up), so v 16 is a candidate (32 would
    leave a virtual stage empty: 4 x 32 > 126)
    beside 2-8; pp 2 (63 a rank) adds 9, 21 and 63; no v leaves a virtual stage empty (v 1
    stays a candidate the rules refuse for interleaved schedules)."""
    s = dataclasses.replace(_405b(), parallel=Parallel())
    rows = candidate_rows(s, s.hardware.world, "interleaved-1f1b", {})
    pp, v = rows[2], rows[6]
    assert sorted(set(v[pp == 4].tolist())) == [1, 2, 3, 4, 5, 6, 7, 8, 16]
    assert sorted(set(v[pp == 2].tolist())) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 21, 63]
    assert (pp * v <= s.model.layers).all()


def test_expert_tp_values_follow_the_engine():
    s = load_scenario(ROOT / "examples/mixtral-8x7b-ep.yaml")
    mega = engine_of(dataclasses.replace(s.training, engine="megatron"))
    titan = engine_of(dataclasses.replace(s.training, engine="torchtitan"))
    # 16 GPUs, expert FFN 14,336: every divisor of both up to 32
    assert expert_tp_values(s, mega) == [None, 1, 2, 4, 8, 16]
    assert expert_tp_values(s, titan) == [None, 1]         # torchtitan: expert TP 1 or tp
    assert expert_tp_values(s, engine_of(s.training)) == [None]   # generic offers none
    dense = load_scenario(ROOT / "examples/llama3-8b-8xh100.yaml")
    assert expert_tp_values(dense, mega) == [None]


def test_expert_tp_passes_list_each_layout_once_and_reach_folded_ep():
    """A pass with expert TP k lists only EP > 1 layouts whose TP is a multiple above k; an
    EP wider than dp x cp (MoE parallel folding) is found and exported with its expert TP."""
    s = load_scenario(ROOT / "examples/mixtral-8x7b-ep.yaml", ["training.engine=megatron"])
    s = dataclasses.replace(s, parallel=Parallel(expert_tp=2))
    rows = candidate_rows(s, s.hardware.world, "1f1b", {})
    assert len(rows[0]) and (rows[4] > 1).all() and (rows[1] % 2 == 0).all()
    assert (rows[1] > 2).all()
    r = plan(load_scenario(ROOT / "examples/mixtral-8x7b-ep.yaml", ["training.engine=megatron"]),
             Constraints(fixed={"pp_schedule": "1f1b", "recompute": "full"}))
    etp = np.array([-1 if e is None else e for e in r.ranked["expert_tp"]])
    folded = (etp > 0) & (r.ranked["ep"] > r.ranked["dp"] * r.ranked["cp"])
    assert folded.any()
    rank = int(np.flatnonzero(folded)[0]) + 1
    assert r.scenario_of(rank).parallel.expert_tp == int(etp[rank - 1])
    keys = list(zip(*(r.ranked[k].tolist() for k in ("dp", "tp", "pp", "cp", "ep", "zero",
                                                         "micro_batch", "sequence_parallel",
                                                         "recompute", "offload")), etp))
    assert len(keys) == len(set(keys))


def test_default_headroom_comes_from_the_memory_band_and_is_shown():
    """The planner ranks a layout where half the published runs like it needed no more than
    the GPU holds (the band's median), says so, and marks each ranked layout "yes" (fits in nine
    of ten runs like it) or "tight"; a chosen fraction replaces the band's."""
    assert Constraints().max_memory_fraction is None
    assert Constraints.parse([]).max_memory_fraction is None
    s = load_scenario(ROOT / "examples/llama3-8b-8xh100.yaml")
    band = memory_band(s.training.engine, False, s.training.method)
    assert band is not None and band_fraction(band) == min(1.0, 1 + band["q50"])
    assert band_fraction(None) == DEFAULT_MEMORY_FRACTION
    r = plan(s)
    assert r.fraction == band_fraction(band) and r.limit == pytest.approx(r.fraction * r.capacity)
    assert (r.ranked["device_per_gpu"] <= r.limit).all()
    sure = surely_fits(r.ranked["device_per_gpu"], r.capacity, band)
    assert list(r.ranked["fit"]) == ["yes" if x else "tight" for x in sure]
    assert "tight" in set(r.ranked["fit"]) and "yes" in set(r.ranked["fit"])
    says = limit_sentence(r)
    assert says.startswith(f"Memory limit: {r.fraction:.1%}".replace(".0%", " %").replace("%", " %")
                           .replace("  %", " %")) or says.startswith("Memory limit: ")
    assert "the memory band's median" in says and "of the ranked layouts are tight" in says
    d = r.to_dict(top=1)
    assert d["memory_limit"]["fraction"] == r.fraction and d["memory_limit"]["from"] == "band"
    assert d["layouts"][0]["fit"] in ("pass", "tight")
    chosen = plan(s, Constraints(max_memory_fraction=0.75))
    assert "(chosen with --max-memory-fraction)" in limit_sentence(chosen)
    assert chosen.counts["fit"] < r.counts["fit"] and chosen.fraction == 0.75


def test_divisors_are_every_divisor_found_up_to_the_square_root():
    for n in [*range(1, 400), 2304, 16_384, 10 ** 6, 999_983]:
        assert divisors(n) == [d for d in range(1, n + 1) if n % d == 0], n
    assert divisors(10 ** 9, 16) == [1, 2, 4, 5, 8, 10, 16]


def test_a_global_batch_of_a_billion_sequences_is_searched():
    """Issue 55's held-out hostile run: micro-batches were listed by trying every number up to
    the global batch (10^9 sequences: minutes); the planner now ranks that scenario's layouts."""
    s = load_scenario(ROOT / "examples/llama3-8b-8xh100.yaml", ["training.global_batch=1000000000"])
    rows = candidate_rows(s, 8, "1f1b", {})
    mbs = set(rows[list(ROW_FIELDS).index("micro_batch")].tolist())
    assert mbs == {1, 2, 4, 5, 8, 10, 16}
    assert plan(s).counts["fit"] > 0

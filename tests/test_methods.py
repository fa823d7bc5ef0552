"""``workbench.plan.methods.compare_methods``: the planner's best layout per fine-tuning method
(the Plan tab's "what would fit instead", the claims check), every figure the planner's and
the estimator's."""
from __future__ import annotations

import time

import pytest

from tests.conftest import ROOT
from workbench.estimate import estimate
from workbench.plan import plan
from workbench.plan.methods import allowed_methods, compare_methods, method_document
from workbench.scenario import load_scenario, parse_scenario

BRIEF = ROOT / "examples/brief-8xh200-70b.yaml"


def test_the_brief_70b_per_method_is_the_planners_best_layout_estimated():
    s = load_scenario(BRIEF)
    t0 = time.perf_counter()
    out = compare_methods(s)
    seconds = time.perf_counter() - t0
    assert [f.method for f in out] == ["full", "lora", "qlora"]
    assert [f.label for f in out] == ["full fine-tuning", "LoRA", "QLoRA"]
    for f in out:
        assert f.tokens == s.training.tokens
        if not f.fits:
            assert f.reason and f.scenario is None
            continue
        assert f.scenario.training.method == f.method
        assert (f.scenario.training.lora is not None) == (f.method != "full")
        # the planner's rank 1 for that method, and its single estimate
        best = plan(parse_scenario(method_document(s, f.method)[0], layout_required=False))
        assert f.step_s == pytest.approx(best.row(1)["step"], rel=1e-6)
        est = estimate(f.scenario)
        assert f.device_per_gpu == est.memory.per_gpu.device <= est.memory.capacity
        assert f.tokens_per_s == est.run.tokens_per_s
        assert f.time_to_train_s == pytest.approx(s.training.tokens / f.tokens_per_s, rel=1e-6)
        assert f.layout and "ZeRO" in f.layout
    # three planner searches of the brief's box: about 0.6 s here (2 cores), generous bound
    assert seconds < 15, seconds


def test_only_the_methods_the_engine_trains_with_and_the_users_adapters_kept():
    s = load_scenario(BRIEF, ["training.engine=torchtitan"])
    assert allowed_methods(s) == ["full"]               # torchtitan pre-trains / fine-tunes
    assert [f.method for f in compare_methods(s)] == ["full"]
    tune = load_scenario(BRIEF, ["training.engine=torchtune", "training.method=lora",
                                 "training.lora.rank=64", "training.recompute=full"])
    assert allowed_methods(tune) == ["full", "lora", "qlora"]
    doc, note = method_document(tune, "qlora")
    assert doc["training"]["lora"]["rank"] == 64 and note == ""
    assert method_document(tune, "full")[0]["training"]["lora"] is None
    # QLoRA computes in a 16/32-bit dtype: an fp8 scenario is compared in bf16, and says so
    fp8 = load_scenario(BRIEF, ["training.precision=fp8"])
    doc, note = method_document(fp8, "qlora")
    assert doc["training"]["precision"] == "bf16" and "bf16" in note
    assert parse_scenario(doc, layout_required=False).training.method == "qlora"


def test_nothing_fits_says_why_for_each_method():
    # 405B on one 24 GB card: even QLoRA's 4-bit base is ~200 GB
    s = load_scenario(BRIEF, ["hardware.gpu=rtx-4090", "hardware.gpus_per_node=1",
                              "parallel.dp=1", "training.global_batch=8",
                              "model.preset=llama3-405b"])
    out = compare_methods(s)
    assert [f.method for f in out] == ["full", "lora", "qlora"]
    for f in out:
        assert not f.fits and f.reason and f.time_to_train_s == 0


def test_a_progress_callback_that_says_stop_cancels():
    from workbench.plan.search import Cancelled

    seen = []

    def progress(fraction, what):
        seen.append((fraction, what))
        return len(seen) < 3

    with pytest.raises(Cancelled):
        compare_methods(load_scenario(BRIEF), progress=progress)
    assert seen[0][1].startswith("full: ") and all(0 <= f <= 1 for f, _ in seen)

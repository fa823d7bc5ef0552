"""``training.backend`` and ``training.liger`` (design.md contract 1, 2026-12-07): what
Accelerate shards an engine-hf run with, and Liger's kernels; both engine hf's only, and FSDP
(either version) with no ZeRO-1 stage."""
from __future__ import annotations

import pytest

from workbench.errors import ScenarioError
from workbench.scenario import dump_scenario, parse_scenario
from workbench.scenario.io import load_text


def _doc(training: dict, zero: int = 3) -> dict:
    return {"hardware": {"gpu": "h100-sxm", "gpus_per_node": 8}, "model": "llama3-8b",
            "parallel": {"dp": 8, "zero": zero}, "training": training}


def _refusal(doc: dict) -> str:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc)
    return err.value.one_line()


def test_defaults_keep_every_scenario_as_it_was():
    s = parse_scenario(_doc({}))
    assert s.training.backend is None and s.training.liger is False
    assert s.document["training"]["backend"] is None and s.document["training"]["liger"] is False


@pytest.mark.parametrize("backend, zero", [("fsdp2", 3), ("fsdp2", 2), ("fsdp1", 0),
                                           ("deepspeed", 0), ("deepspeed", 1),
                                           ("deepspeed", 2), ("deepspeed", 3)])
def test_engine_hf_takes_a_backend_and_liger(backend, zero):
    s = parse_scenario(_doc({"engine": "hf", "backend": backend.upper(), "liger": True}, zero))
    assert (s.training.backend, s.training.liger, s.parallel.zero) == (backend, True, zero)
    again = parse_scenario(load_text(dump_scenario(s)))       # the document reads back
    assert again.training == s.training


def test_another_engine_takes_neither():
    with pytest.raises(ScenarioError) as err:
        parse_scenario(_doc({"engine": "torchtitan", "backend": "fsdp2", "liger": True}))
    assert [str(p) for p in err.value.problems] == [
        "training.backend: only engine hf runs on an Accelerate back end; training.engine is "
        "torchtitan: remove training.backend or set training.engine hf (got 'fsdp2')",
        "training.liger: only engine hf runs Liger kernels (Transformers' use_liger_kernel); "
        "training.engine is torchtitan: remove training.liger or set training.engine hf "
        "(got True)"]


@pytest.mark.parametrize("backend", ["fsdp2", "fsdp1"])
def test_fsdp_has_no_zero_1(backend):
    line = _refusal(_doc({"engine": "hf", "backend": backend}, zero=1))
    assert line == (
        "parallel.zero: Accelerate's FSDP shards parameters, gradients and optimizer states "
        "together (reshard_after_forward true: zero 3, false: zero 2) or runs DDP (zero 0); it "
        "has no stage that shards only optimizer states: use zero 2, or training.backend "
        "deepspeed for zero 1 (got 1)")


def test_the_planner_searches_no_zero_1_under_fsdp():
    from workbench.scenario.rules import allowed_values

    s = parse_scenario(_doc({"engine": "hf", "backend": "fsdp2"}))
    assert allowed_values(s, "zero", [0, 1, 2, 3]) == [0, 2, 3]
    s = parse_scenario(_doc({"engine": "hf", "backend": "deepspeed"}))
    assert allowed_values(s, "zero", [0, 1, 2, 3]) == [0, 1, 2, 3]


@pytest.mark.parametrize("training, expected", [
    ({"engine": "hf", "backend": "fsdp3"},
     "training.backend: must be one of fsdp2, fsdp1, deepspeed (got 'fsdp3')"),
    ({"engine": "hf", "backend": ["fsdp2"]},
     "training.backend: must be one of fsdp2, fsdp1, deepspeed (got ['fsdp2'])"),
    ({"engine": "hf", "liger": "yes"}, "training.liger: must be true or false (got 'yes')"),
])
def test_a_wrong_value_is_named(training, expected):
    assert _refusal(_doc(training)).endswith(expected)

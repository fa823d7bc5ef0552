"""The planner on a fine-tune: layouts that fit without NVMe for the brief's 70B LoRA, the
optimizers the user allows searched as a setting, and what the method saves in words."""
from __future__ import annotations

import pytest

from tests.conftest import ROOT
from workbench.errors import ScenarioError
from workbench.plan import Constraints, plan
from workbench.plan.explain import explain
from workbench.scenario import load_scenario


def brief(method: str = "lora", engine: str = "torchtune"):
    return load_scenario(str(ROOT / "examples/brief-8xh200-70b.yaml"),
                         [f"training.method={method}", f"training.engine={engine}"],
                         layout_required=False)


def test_a_70b_lora_fits_the_brief_box_without_nvme():
    r = plan(brief())
    assert len(r) > 0
    assert set(r.ranked["offload"].tolist()) <= {"none", "cpu"}
    assert r.ranked["offload"][0] == "none"
    assert set(r.ranked["engine"].tolist()) == {"torchtune"}


def test_the_optimizers_allowed_are_searched_where_the_engine_builds_them():
    r = plan(brief(), Constraints(optimizers=("adamw", "adamw8bit", "adafactor")))
    assert set(r.ranked["optimizer"].tolist()) == {"adamw", "adamw8bit", "adafactor"}
    assert r.counts["settings"] == 3
    row = r.layout(1)
    assert row["training"]["optimizer"] in ("adamw", "adamw8bit", "adafactor")
    assert r.scenario_of(1).training.optimizer == row["training"]["optimizer"]
    # torchtitan builds AdamW only: asking it for 8-bit AdamW alone leaves nothing to search
    with pytest.raises(ScenarioError, match="none of these is built by engine torchtitan"):
        plan(brief("full", "torchtitan"), Constraints(optimizers=("adamw8bit",)))
    with pytest.raises(ScenarioError, match="optimizers"):
        Constraints(optimizers=("lion",))


def test_the_planner_says_what_the_method_saved():
    # on a layout that keeps the weights on the GPU (with ZeRO-3 CPU offload both would hold
    # none there, and the saving is in activations and buffers alone)
    lines = explain(plan(brief("qlora"), Constraints(fixed={"offload": "none"})))
    saved = [line for line in lines if "saves" in line]
    assert len(saved) == 1
    assert saved[0].startswith("QLoRA saves ")
    assert "against full fine-tuning with AdamW" in saved[0]
    assert "gradients" in saved[0] and "optimizer" in saved[0] and "weights" in saved[0]
    assert not [line for line in explain(plan(brief("full"))) if "saves" in line]

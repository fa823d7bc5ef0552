"""training.state_dtypes: Megatron-Core's gradient buffer, master weights and Adam moments in
other dtypes than the mixed-precision table's fp32 — the bytes they keep, the gradient bytes
they reduce, what the validator refuses, and the flags Megatron-LM reads and writes for them
(engines/megatron.py cites each)."""
from __future__ import annotations

import pytest

from tests.conftest import scenario_doc
from workbench.errors import ScenarioError
from workbench.estimate import estimate
from workbench.estimate.memory.model_states import bytes_per_param
from workbench.export.megatron import megatron_args, to_megatron
from workbench.imports import megatron as megatron_import
from workbench.scenario import parse_scenario
from workbench.scenario.types import StateDtypes


def _megatron(state_dtypes=None, **training):
    tr = {"engine": "megatron", **training}
    if state_dtypes is not None:
        tr["state_dtypes"] = state_dtypes
    return parse_scenario(scenario_doc(training=tr))


@pytest.mark.parametrize("sd,expected", [
    (StateDtypes(), (2, 4, 12)),                                     # the table's 18 B
    (StateDtypes(grads="bf16"), (2, 2, 12)),                         # --grad-reduce-in-bf16
    (StateDtypes("bf16", "remainder"), (2, 2, 2 + 8)),               # Megatron-Bridge bf16
    (StateDtypes("bf16", "fp32", "bf16"), (2, 2, 4 + 4)),            # DeepSeek-V3's recipe
    (StateDtypes("bf16", "none", "bf16"), (2, 2, 4)),                # NeMo 1 Apex, dtype bf16
])
def test_bytes_per_parameter(sd, expected):
    b = bytes_per_param("bf16", "adamw", 1, sd)
    assert (b.params, b.grads, b.optimizer) == expected
    assert bytes_per_param("bf16", "adamw", 1, sd) == bytes_per_param("bf16", "adamw", 3, sd)


def test_the_estimate_keeps_and_reduces_what_the_dtypes_say():
    base = estimate(_megatron())
    bf16 = estimate(_megatron({"grads": "bf16", "master": "remainder"}))
    assert bf16.memory.per_gpu.params == base.memory.per_gpu.params
    assert bf16.memory.per_gpu.grads == pytest.approx(base.memory.per_gpu.grads / 2, rel=1e-12)
    # zero 0 in the example: the whole optimizer, 12 B -> 2 + 8 B per parameter
    assert bf16.memory.per_gpu.optimizer == pytest.approx(
        base.memory.per_gpu.optimizer * 10 / 12, rel=1e-12)
    # the gradients are reduced in bf16: half the data-parallel bytes
    (op, vol), = base.time.volume["dp"].items()
    assert bf16.time.volume["dp"][op]["bytes"] == pytest.approx(vol["bytes"] / 2, rel=1e-12)
    assert bf16.time.step < base.time.step


@pytest.mark.parametrize("training,field,words", [
    ({"engine": "torchtitan", "state_dtypes": {"grads": "bf16"}}, "training.state_dtypes",
     "engine torchtitan does not offer it"),
    ({"engine": "megatron", "precision": "fp32", "state_dtypes": {"grads": "bf16"}},
     "training.state_dtypes", "got precision fp32"),
    ({"engine": "megatron", "optimizer": "sgd", "state_dtypes": {"moments": "bf16"}},
     "training.state_dtypes", "Adam only"),
    ({"engine": "megatron", "precision": "fp8", "fp8_recipe": "tensorwise",
      "state_dtypes": {"master": "remainder"}}, "training.state_dtypes.master",
     "keeps an fp32 master of its own"),
    ({"engine": "megatron", "state_dtypes": {"moments": "fp8"}}, "training.state_dtypes.moments",
     "fp32, bf16, fp16"),
    ({"engine": "megatron", "state_dtypes": {"main_grads": "bf16"}},
     "training.state_dtypes.main_grads", "allowed keys: grads, master, moments"),
])
def test_refused_with_the_field_and_what_is_allowed(training, field, words):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(scenario_doc(training=training))
    line = err.value.one_line()
    assert line.startswith(field) and words in line


def test_megatron_flags_written_and_read_back():
    s = _megatron({"grads": "bf16", "master": "remainder", "moments": "bf16"})
    args = megatron_args(s)
    i = args.index("--grad-reduce-in-bf16")
    assert args[i:i + 6] == ["--grad-reduce-in-bf16", "--use-precision-aware-optimizer",
                             "--exp-avg-dtype", "bf16", "--exp-avg-sq-dtype", "bf16"]
    back = megatron_import.read("train.sh", "torchrun pretrain_gpt.py "
                                + " ".join(args)).document
    assert back["training"]["state_dtypes"] == {"grads": "bf16", "master": "remainder",
                                                "moments": "bf16"}
    # NeMo 1's Apex optimizer has no Megatron-LM flag: said, not written
    apex = _megatron({"grads": "bf16", "master": "none", "moments": "bf16"})
    assert any("Apex" in w for w in to_megatron(apex).warnings)


def test_megatron_import_refuses_what_megatron_core_asserts():
    r = megatron_import.read("train.sh", "torchrun pretrain_gpt.py --bf16 --exp-avg-dtype bf16")
    assert any(p.path.endswith("--exp-avg-dtype") and "precision-aware" in p.message
               for p in r.problems)
    r = megatron_import.read("train.sh", "torchrun pretrain_gpt.py --bf16 "
                             "--use-precision-aware-optimizer --exp-avg-dtype fp8 "
                             "--exp-avg-sq-dtype fp8")
    assert any("FP8 moments are not costed" in p.message for p in r.problems)


def test_another_engines_export_says_what_it_does_not_carry():
    """Exported for an engine without these switches, the Megatron-only settings are named in
    the warnings (and the file's comments), not dropped in silence."""
    from workbench.export.deepspeed import to_deepspeed
    s = parse_scenario(scenario_doc(
        model={"preset": "mixtral-8x7b"}, parallel={"dp": 8, "ep": 8, "zero": 1},
        training={"engine": "megatron", "state_dtypes": {"grads": "bf16"},
                  "recompute_modules": ["moe_act"]}))
    warnings = to_deepspeed(s).warnings
    assert ("training.state_dtypes = grads bf16, master fp32, moments fp32: DeepSpeed has no "
            "such switch; not exported") in warnings
    assert "training.recompute_modules = moe_act: DeepSpeed has no such switch; not exported" \
        in warnings

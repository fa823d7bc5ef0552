"""training.recompute_modules: Megatron-Core's module recompute under recompute selective —
what each module frees of a layer's saved tensors, what it runs again, what the validator
refuses, and the flag Megatron-LM reads and writes (engines/megatron.py cites each)."""
from __future__ import annotations

import pytest

from tests.conftest import scenario_doc
from workbench.errors import ScenarioError
from workbench.estimate import estimate
from workbench.estimate.memory.activations import (
    activation_shape, full_recompute_working_set, layer_bytes, layer_terms, module_recomputed,
)
from workbench.export.megatron import megatron_args
from workbench.imports import megatron as megatron_import
from workbench.scenario import parse_scenario


def _moe(mods=None, preset="mixtral-8x7b", **parallel):
    tr = {"engine": "megatron", "recompute": "selective"}
    if mods is not None:
        tr["recompute_modules"] = mods
    par = {"dp": 8, "ep": 8, "zero": 1, **parallel}
    return parse_scenario(scenario_doc(model={"preset": preset}, parallel=par, training=tr))


def _freed(s, moe_layer=True):
    x = activation_shape(s.training, s.parallel)
    return module_recomputed(s.model, x, moe_layer), layer_terms(s.model, x, moe_layer), x


@pytest.mark.parametrize("mods,freed", [
    (["core_attn"], set()),                                   # the workbench's selective
    (["moe_act"], {"mlp.expert_fc2_input"}),                  # the activation's output
    (["layernorm"], {"mlp.router_input"}),                    # the MoE layer's own norm
    (["moe"], {"mlp.router_probs", "mlp.expert_input", "mlp.expert_act",
               "mlp.expert_fc2_input", "mlp.expert_probs"}),   # all but the layer's input
])
def test_each_module_frees_what_megatron_discards(mods, freed):
    s = _moe(mods)
    got, terms, x = _freed(s)
    assert set(got) == freed
    assert layer_bytes(s.model, x, True) == pytest.approx(
        sum(terms.values()) - sum(got.values()), rel=1e-12)
    # what was freed is rebuilt one layer at a time in the backward
    assert full_recompute_working_set(s.model, x, True) == pytest.approx(sum(got.values()))


def test_mla_up_projection_and_dense_mlp_on_deepseek():
    s = _moe(["mla_up_proj", "mlp", "layernorm"], preset="deepseek-v3", tp=1)
    dense, _, _ = _freed(s, moe_layer=False)
    assert {"attn.q", "attn.k", "attn.v", "attn.qkv_input", "mlp.act", "mlp.fc2_input"} \
        <= set(dense)
    assert "mlp.fc1_input" not in dense        # the checkpointed MLP keeps its input
    moe, _, _ = _freed(s, moe_layer=True)
    assert "mlp.expert_act" not in moe         # "mlp" is the dense layers' MLP only


def test_recomputing_costs_time_and_the_moe_layer_dispatches_again():
    base, act, whole = (estimate(_moe(m)) for m in (None, ["moe_act"], ["moe"]))
    assert base.time.recompute == 0
    assert 0 < act.time.recompute < whole.time.recompute
    assert act.memory.per_gpu.activations < base.memory.per_gpu.activations
    assert whole.memory.per_gpu.activations < act.memory.per_gpu.activations
    a2a = {e.time.volume["ep"]["all_to_all"]["count"] for e in (base, act)}
    assert a2a == {1536.0}                     # dispatch + combine, forward and backward
    assert whole.time.volume["ep"]["all_to_all"]["count"] == 1536.0 * 3 / 2


@pytest.mark.parametrize("training,words", [
    ({"recompute_modules": ["moe_act"]}, "moe_act needs an MoE model"),
    ({"recompute_modules": ["mla_up_proj"]}, "mla_up_proj needs multi-latent attention"),
    ({"recompute": "full", "recompute_modules": ["mlp"]}, "under recompute selective only"),
    ({"recompute_modules": ["attn"]}, "allowed: core_attn, moe_act"),
])
def test_refused_with_the_field_and_the_reason(training, words):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(scenario_doc(training={"engine": "megatron", **training}))
    line = err.value.one_line()
    assert line.startswith("training.recompute_modules") and words in line
    with pytest.raises(ScenarioError, match="engine torchtitan does not offer it"):
        parse_scenario(scenario_doc(training={"engine": "torchtitan",
                                              "recompute_modules": ["mlp"]}))


def test_megatron_flag_written_and_read_back():
    s = _moe(["moe_act", "layernorm"])
    args = megatron_args(s)
    i = args.index("--recompute-modules")
    assert args[i - 2:i + 3] == ["--recompute-granularity", "selective", "--recompute-modules",
                                 "moe_act", "layernorm"]
    back = megatron_import.read("t.sh", "torchrun pretrain_gpt.py " + " ".join(args)).document
    assert back["training"]["recompute_modules"] == ["moe_act", "layernorm"]

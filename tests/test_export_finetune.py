"""The fine-tuning exports (``--to torchtune``, ``--to peft``) checked against their readers.

- PEFT: the ``adapter_config`` is loaded by peft's own ``LoraConfig(**...)`` and
  ``LoraConfig.from_pretrained`` (an adapter_config.json in a temporary folder); a PEFT model
  built from it on a tiny Transformers Llama / GPT-2 of a workbench trial model's shape has the
  trainable parameter count LoRA's arithmetic gives; the QLoRA block loads into transformers'
  ``BitsAndBytesConfig``; the Trainer block's keys are ``TrainingArguments`` fields.
- torchtune: the YAML is read with OmegaConf (what ``tune run`` parses configs with), every
  ``_component_`` is a public name of its module at pytorch/torchtune v0.6.1 (names stored with
  the commit in tests/data/torchtune_v0.6.1_components.json: torchtune 0.6.1 does not import
  with the torchao installed here) or, outside torchtune, resolves in the installed package;
  every top-level key is one the recipe reads; values match the scenario.
- Refusals name the field, through the CLI in one line.
"""
from __future__ import annotations

import importlib
import json

import pytest
import yaml

from tests.conftest import ROOT
from workbench.cli import main
from workbench.errors import ScenarioError
from workbench.export import ExportError, export
from workbench.scenario import parse_scenario
from workbench.scenario.rules import engine_problems

COMPONENTS = json.loads((ROOT / "tests/data/torchtune_v0.6.1_components.json").read_text())


def doc(model="llama3-8b", nodes=1, gpus=8, parallel=None, **training) -> dict:
    return {"hardware": {"gpu": "h100-sxm", "gpus_per_node": gpus, "nodes": nodes},
            "model": {"preset": model},
            "parallel": parallel or {"dp": gpus * nodes, "zero": 3},
            "training": {"seq_len": 4096, "micro_batch": 2, "global_batch": 64,
                         "recompute": "full", **training}}


def refused(d: dict, target: str) -> list[str]:
    with pytest.raises(ExportError) as err:
        export(parse_scenario(d), target)
    return [f"{p.path}: {p.message}" for p in err.value.problems]


# ---------------------------------------------------------------- PEFT
peft = pytest.importorskip("peft")


def peft_export(d: dict) -> dict:
    return json.loads(export(parse_scenario(d), "peft"))


def test_peft_lora_config_loads_with_peft_and_matches_the_scenario(tmp_path):
    d = doc(engine="hf", method="lora", lora={
        "rank": 8, "alpha": 16, "targets": ["q", "v", "o", "gate", "up", "down"],
        "trainable": ["embeddings", "head"]})
    out = peft_export(d)
    assert "quantization_config" not in out and "_comment" not in out
    cfg = peft.LoraConfig(**out["adapter_config"])
    assert (cfg.r, cfg.lora_alpha, cfg.lora_dropout, cfg.bias) == (8, 16, 0.0, "none")
    assert cfg.task_type == "CAUSAL_LM" and cfg.peft_type == peft.PeftType.LORA
    assert set(cfg.target_modules) == {"q_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                       "down_proj"}
    assert set(cfg.modules_to_save) == {"embed_tokens", "lm_head"}
    assert cfg.base_model_name_or_path == "meta-llama/Llama-3.1-8B"
    (tmp_path / "adapter_config.json").write_text(json.dumps(out["adapter_config"]))
    loaded = peft.LoraConfig.from_pretrained(str(tmp_path))
    assert loaded.to_dict() == cfg.to_dict()
    args = out["training_arguments"]
    assert args["per_device_train_batch_size"] == 2
    assert args["gradient_accumulation_steps"] == 64 // (2 * 8)
    assert args["gradient_checkpointing"] is True and args["bf16"] is True


def test_peft_training_arguments_are_trainer_fields():
    import dataclasses

    from transformers import TrainingArguments
    from transformers.training_args import OptimizerNames
    fields = {f.name for f in dataclasses.fields(TrainingArguments)}
    for opt in ("adamw", "sgd", "adamw8bit", "paged_adamw8bit", "adamw4bit", "adafactor"):
        args = peft_export(doc(engine="hf", method="lora", optimizer=opt))["training_arguments"]
        assert set(args) <= fields
        assert OptimizerNames(args["optim"])


@pytest.mark.parametrize("quant,double", [("nf4", True), ("nf4", False), ("int8", True)])
def test_peft_qlora_adds_a_bitsandbytes_config(quant, double):
    import torch
    from transformers import BitsAndBytesConfig
    out = peft_export(doc(engine="hf", method="qlora",
                          lora={"quant": quant, "double_quant": double}))
    peft.LoraConfig(**out["adapter_config"])
    bnb = BitsAndBytesConfig(**out["quantization_config"])
    if quant == "nf4":
        assert bnb.load_in_4bit and not bnb.load_in_8bit
        assert bnb.bnb_4bit_quant_type == "nf4"
        assert bnb.bnb_4bit_use_double_quant is double
        assert bnb.bnb_4bit_compute_dtype == torch.bfloat16
    else:
        assert bnb.load_in_8bit and not bnb.load_in_4bit


def _lora_count(pairs: list[tuple[int, int]], rank: int, layers: int) -> int:
    """LoRA's arithmetic: A is r x in, B is out x r, on each adapted projection of each layer."""
    return layers * sum(rank * (i + o) for i, o in pairs)


def test_a_peft_model_on_a_tiny_llama_trains_what_the_scenario_says():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    d = doc(model="tiny-dense", engine="hf", method="lora",
            lora={"rank": 4, "alpha": 8, "targets": "all-linear",
                  "trainable": ["embeddings", "norms", "head"]})
    s = parse_scenario(d)
    m = s.model
    torch.manual_seed(0)
    base = LlamaForCausalLM(LlamaConfig(
        hidden_size=m.hidden, intermediate_size=m.ffn_hidden, num_hidden_layers=m.layers,
        num_attention_heads=m.heads, num_key_value_heads=m.kv_heads, vocab_size=m.vocab,
        tie_word_embeddings=False))
    model = peft.get_peft_model(base, peft.LoraConfig(**peft_export(d)["adapter_config"]))
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    h, kv, f = m.hidden, m.kv_heads * (m.hidden // m.heads), m.ffn_hidden
    adapters = _lora_count([(h, h), (h, kv), (h, kv), (h, h), (h, f), (h, f), (f, h)], 4,
                           m.layers)
    full = 2 * m.vocab * h + (2 * m.layers + 1) * h   # embeddings, head, RMSNorm weights
    assert trainable == adapters + full


def test_a_peft_model_on_a_tiny_gpt2_uses_gpt2_module_names():
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    d = doc(model="tiny-gpt", engine="hf", method="lora",
            lora={"rank": 4, "alpha": 8, "targets": ["q", "k", "v", "o", "up", "down"]})
    s = parse_scenario(d)
    m = s.model
    out = peft_export(d)["adapter_config"]
    assert out["target_modules"] == ["c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"]
    assert out["fan_in_fan_out"] is True
    torch.manual_seed(0)
    base = GPT2LMHeadModel(GPT2Config(n_layer=m.layers, n_embd=m.hidden, n_head=m.heads,
                                      n_inner=m.ffn_hidden, vocab_size=m.vocab,
                                      n_positions=m.max_seq_len))
    model = peft.get_peft_model(base, peft.LoraConfig(**out))
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    h, f = m.hidden, m.ffn_hidden
    assert trainable == _lora_count([(h, 3 * h), (h, h), (h, f), (f, h)], 4, m.layers)


@pytest.mark.parametrize("method", ["pretrain", "full"])
def test_peft_refuses_a_run_without_adapters(method):
    assert refused(doc(engine="hf", method=method), "peft") == [
        f"training.method: PEFT exports adapters: training.method is {method}; use lora or "
        "qlora"]


def test_peft_refuses_moe_models_and_a_part_of_gpt2s_qkv():
    moe = doc(model="mixtral-8x7b", engine="hf", method="lora",
              parallel={"dp": 8, "zero": 3}, global_batch=64)
    assert [p.split(":")[0] for p in refused(moe, "peft")] == ["model.moe"]
    gpt = doc(model="tiny-gpt", engine="hf", method="lora", lora={"targets": ["q", "v"]})
    msgs = refused(gpt, "peft")
    assert msgs[0].startswith("training.lora.targets: a GPT-2-style model projects q, k and v")


def test_peft_asks_the_hf_record_through_the_rule_table():
    # a generic scenario with pipeline parallelism: the hf record has none
    d = doc(method="lora", parallel={"dp": 4, "pp": 2, "zero": 3})
    s = parse_scenario(d)
    want = [f"{p.path}: {p.message}" for p in engine_problems(s, "hf")]
    assert want and refused(d, "peft") == want


# ---------------------------------------------------------------- torchtune
def tt_export(d: dict) -> tuple[str, dict]:
    text = export(parse_scenario(d), "torchtune")
    return text, yaml.safe_load(text)


def components(node) -> list[str]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "_component_"] + [
            c for k, v in node.items() if k != "_component_" for c in components(v)]
    return []


def assert_component_exists(path: str) -> None:
    module, _, name = path.rpartition(".")
    if module.startswith("torchtune"):
        assert name in COMPONENTS["modules"][module], path
        return
    try:
        mod = importlib.import_module(module)
    except ImportError:
        pytest.skip(f"{module} is not installed")
    assert hasattr(mod, name), path


def launch_line(text: str) -> list[str]:
    lines = text.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith("# launch"))
    return lines[i + 1].lstrip("# ").split()


CASES = {
    "lora-8gpu": doc(engine="torchtune", method="lora", lora={
        "rank": 8, "alpha": 16, "targets": ["q", "v", "o", "gate", "up", "down"]}),
    "qlora-1gpu": doc(gpus=1, engine="torchtune", method="qlora", global_batch=16,
                      optimizer="paged_adamw8bit", activation_offload=True),
    "full-tp-2nodes": doc(model="llama3-70b", nodes=2, engine="torchtune", method="full",
                          parallel={"dp": 4, "tp": 4, "zero": 3, "sequence_parallel": True}),
    "full-obwd-1gpu": doc(model="llama3.2-1b", gpus=1, engine="torchtune", method="full",
                          global_batch=2, optimizer_in_backward=True, optimizer="adamw8bit"),
    "lora-mistral-offload": doc(model="mistral-7b", engine="torchtune", method="lora",
                                offload="cpu", optimizer="adamw4bit", compile=True,
                                lora={"targets": "attention"}),
    "qlora-405b-sgd": doc(model="llama3-405b", engine="torchtune", method="qlora",
                          optimizer="sgd", precision="fp32"),
    "full-adafactor": doc(engine="torchtune", method="full", optimizer="adafactor",
                          recompute="none"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_torchtune_config_parses_and_names_real_components(case):
    omegaconf = pytest.importorskip("omegaconf")
    text, cfg = tt_export(CASES[case])
    # OmegaConf (torchtune's config reader) resolves the ${output_dir} interpolations
    resolved = omegaconf.OmegaConf.to_container(omegaconf.OmegaConf.create(str(text)),
                                                resolve=True)
    assert resolved["metric_logger"]["log_dir"] == cfg["output_dir"] + "/logs"
    assert resolved["checkpointer"]["output_dir"] == cfg["output_dir"]
    words = launch_line(text)
    recipe = next(w for w in words if w in COMPONENTS["recipe_keys"])
    assert words[:2] == ["tune", "run"] and words[-2:] == ["--config", "torchtune.yaml"]
    assert set(cfg) <= set(COMPONENTS["recipe_keys"][recipe]), \
        set(cfg) - set(COMPONENTS["recipe_keys"][recipe])
    for path in components(cfg):
        assert_component_exists(path)


def test_torchtune_lora_values_match_the_scenario():
    text, cfg = tt_export(CASES["lora-8gpu"])
    assert launch_line(text) == ["tune", "run", "--nproc_per_node", "8",
                                 "lora_finetune_distributed", "--config", "torchtune.yaml"]
    assert cfg["model"] == {"_component_": "torchtune.models.llama3_1.lora_llama3_1_8b",
                            "lora_attn_modules": ["q_proj", "v_proj", "output_proj"],
                            "apply_lora_to_mlp": True, "apply_lora_to_output": False,
                            "lora_rank": 8, "lora_alpha": 16.0, "lora_dropout": 0.0}
    assert cfg["batch_size"] == 2 and cfg["gradient_accumulation_steps"] == 64 // (2 * 8)
    assert cfg["tokenizer"]["max_seq_len"] == 4096 and cfg["dtype"] == "bf16"
    assert cfg["enable_activation_checkpointing"] is True
    assert cfg["enable_activation_offloading"] is False
    assert cfg["fsdp_cpu_offload"] is False and cfg["compile"] is False
    assert cfg["optimizer"]["_component_"] == "torch.optim.AdamW"
    assert cfg["optimizer"]["fused"] is True
    assert isinstance(cfg["optimizer"]["lr"], float)   # not a YAML 1.1 string such as 3e-4


def test_torchtune_qlora_single_device():
    text, cfg = tt_export(CASES["qlora-1gpu"])
    assert launch_line(text)[:3] == ["tune", "run", "lora_finetune_single_device"]
    assert cfg["model"]["_component_"] == "torchtune.models.llama3_1.qlora_llama3_1_8b"
    assert cfg["model"]["lora_attn_modules"] == ["q_proj", "k_proj", "v_proj", "output_proj"]
    assert cfg["optimizer"]["_component_"] == "bitsandbytes.optim.PagedAdamW8bit"
    assert cfg["gradient_accumulation_steps"] == 8
    assert cfg["enable_activation_offloading"] is True
    assert "fsdp_cpu_offload" not in cfg and "tensor_parallel_dim" not in cfg


def test_torchtune_full_with_tensor_parallelism_over_two_nodes():
    text, cfg = tt_export(CASES["full-tp-2nodes"])
    words = launch_line(text)
    assert words[:6] == ["tune", "run", "--nnodes", "2", "--nproc_per_node", "8"]
    assert '"$MASTER_ADDR:29500"' in words and "full_finetune_distributed" in words
    assert cfg["model"] == {"_component_": "torchtune.models.llama3_1.llama3_1_70b"}
    assert cfg["tensor_parallel_dim"] == 4
    assert cfg["tensor_parallel_plan"]["_component_"] == \
        "torchtune.models.llama3.base_llama_tp_plan"
    # "Tensor parallelism is currently incompatible with fused optimizer"
    assert cfg["optimizer"]["fused"] is False
    assert cfg["gradient_accumulation_steps"] == 64 // (2 * 4)
    assert cfg["optimizer_in_bwd"] is False


def test_torchtune_optimizer_in_backward_and_the_other_builders():
    _, cfg = tt_export(CASES["full-obwd-1gpu"])
    assert cfg["model"]["_component_"] == "torchtune.models.llama3_2.llama3_2_1b"
    assert cfg["optimizer_in_bwd"] is True and cfg["gradient_accumulation_steps"] == 1
    assert cfg["checkpointer"]["model_type"] == "LLAMA3_2"
    _, cfg = tt_export(CASES["lora-mistral-offload"])
    assert cfg["model"]["_component_"] == "torchtune.models.mistral.lora_mistral_7b"
    assert cfg["model"]["apply_lora_to_mlp"] is False
    assert cfg["fsdp_cpu_offload"] is True and cfg["compile"] is True
    assert cfg["tokenizer"]["_component_"] == "torchtune.models.mistral.mistral_tokenizer"
    assert cfg["optimizer"]["_component_"] == "torchao.optim.AdamW4bit"
    _, cfg = tt_export(CASES["qlora-405b-sgd"])
    assert cfg["model"]["_component_"] == "torchtune.models.llama3_1.qlora_llama3_1_405b"
    assert cfg["dtype"] == "fp32" and cfg["optimizer"]["_component_"] == "torch.optim.SGD"
    _, cfg = tt_export(CASES["full-adafactor"])
    assert cfg["optimizer"]["_component_"] == "torch.optim.Adafactor"
    assert cfg["enable_activation_checkpointing"] is False


def test_torchtune_refusals_name_the_field_as_the_validator_does():
    # part of the MLP: torchtune adapts w1, w2, w3 together
    part = doc(method="lora", lora={"targets": ["q", "v", "gate", "up"]})
    msgs = refused(part, "torchtune")
    assert msgs == ["training.lora.targets: torchtune adapts the whole MLP or none of it "
                    "(apply_lora_to_mlp: w1, w2, w3 together); name gate, up and down together "
                    "or none"]
    # the validator says the same, word for word, for a torchtune scenario
    with pytest.raises(ScenarioError) as err:
        parse_scenario({**part, "training": {**part["training"], "engine": "torchtune"}})
    assert [f"{p.path}: {p.message}" for p in err.value.problems] == msgs
    paths = lambda d: [m.split(":")[0] for m in refused(d, "torchtune")]   # noqa: E731
    assert paths(doc(method="qlora", lora={"quant": "int8"})) == ["training.lora.quant"]
    assert paths(doc(method="lora", lora={"trainable": ["head"]})) == ["training.lora.trainable"]
    assert paths(doc(method="full", parallel={"dp": 8, "zero": 0})) == ["parallel.zero"]
    assert paths(doc(method="full", recompute="selective")) == ["training.recompute"]
    assert paths(doc(method="full", activation_offload=True, recompute="none")) == [
        "training.activation_offload"]
    assert paths(doc()) == ["training.method"]   # pretraining
    assert paths(doc(model="gpt2-small", method="lora",
                     lora={"targets": ["q", "k", "v", "o"]})) == ["model.preset"]
    assert refused(doc(model="tiny-dense", method="full"), "torchtune")[0].startswith(
        "model.preset: torchtune v0.6.1 has no model builder for it; the torchtune export "
        "knows llama3-8b, llama3-70b, llama3-405b, llama3.2-1b, mistral-7b")


@pytest.mark.parametrize("target,sets,field", [
    ("torchtune", ["training.method=lora", "training.lora.targets=[q, gate]",
                   "training.recompute=full"], "training.lora.targets"),
    ("peft", ["training.method=full"], "training.method"),
])
def test_cli_refusal_is_one_line_naming_the_field(capsys, target, sets, field):
    args = ["export", str(ROOT / "examples/llama3-8b-8xh100.yaml"), "--to", target]
    for item in sets:
        args += ["--set", item]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"workbench: cannot export to {target}: {field}:")

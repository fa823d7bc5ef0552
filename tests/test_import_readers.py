"""The readers of `workbench import` (Accelerate YAML, TrainingArguments / SFTConfig, DeepSpeed
JSON, config.json) and the merge: exact values, the libraries' own key lists and defaults, and
one-line problems for unknown or contradictory keys."""
from __future__ import annotations

import dataclasses
import json
import textwrap

import pytest

from tests.conftest import upstream

from workbench.errors import ScenarioError
from workbench.imports import detect, import_configs, import_uploads, read_one, validate
from workbench.imports import accelerate as acc
from workbench.imports import hf_model
from workbench.imports.training_keys import TRAINING_ARGUMENTS


def imp(*files: tuple[str, str], fmt: str | None = None):
    return import_configs([(n, textwrap.dedent(t)) for n, t in files], fmt)


FSDP2 = ("acc.yaml", """\
    distributed_type: FSDP
    mixed_precision: bf16
    num_processes: 8
    fsdp_config:
      fsdp_version: 2
      fsdp_reshard_after_forward: true
    """)


# -- the libraries' own lists ------------------------------------------------------------------
def test_training_arguments_keys_are_the_installed_transformers_fields():
    from transformers import TrainingArguments

    fields = tuple(f.name for f in dataclasses.fields(TrainingArguments) if f.init)
    assert set(TRAINING_ARGUMENTS) == set(fields)


def test_accelerate_keys_are_the_launchers_options():
    from accelerate.commands.config.config_args import ClusterConfig
    from accelerate.commands.launch import launch_command_parser

    dests = {a.dest for a in launch_command_parser()._actions}
    for group, prefix in ((acc.FSDP_KEYS, "fsdp_"), (acc.DEEPSPEED_KEYS, ""),
                          (acc.PARALLELISM_KEYS, "parallelism_config_"),
                          (acc.DYNAMO_KEYS, "dynamo_")):
        assert set(group) <= dests, set(group) - dests
    assert {d for d in dests if d.startswith("fsdp_")} == set(acc.FSDP_KEYS)
    assert {d for d in dests if d.startswith("parallelism_config_")} == set(acc.PARALLELISM_KEYS)
    cluster = set(ClusterConfig.__dataclass_fields__)
    assert cluster | {"fp16", "dynamo_backend"} == set(acc.TOP_KEYS)


def test_tied_embedding_defaults_are_the_config_classes():
    from transformers import AutoConfig

    for model_type, tied in hf_model.GATED.items():
        assert AutoConfig.for_model(model_type).tie_word_embeddings is tied, model_type


# -- detection -----------------------------------------------------------------------------------
def test_each_format_is_detected():
    assert detect("a.yaml", "distributed_type: FSDP\n") == "accelerate"
    assert detect("ds.json", '{"zero_optimization": {"stage": 2}}') == "deepspeed"
    assert detect("config.json", '{"num_hidden_layers": 2, "hidden_size": 8}') == "hf_model"
    assert detect("args.yaml", "per_device_train_batch_size: 2\n") == "training_args"
    assert detect("notes.yaml", "seed: 3\n") is None


def test_format_override_reads_what_detection_cannot():
    lost = imp(("args.yaml", "seed: 3\n"))
    assert [str(p) for p in lost.problems] == [
        "args.yaml: is not a config workbench import reads (accelerate, deepspeed, hf_model, "
        "torchtitan, megatron, launch, torchtune, training_args); name its format with --format"]
    out = imp(("args.yaml", "seed: 3\n"), fmt="training_args")
    assert out.problems == [] and out.scenario["training"]["micro_batch"] == 8


# -- Accelerate ----------------------------------------------------------------------------------
def test_fsdp2_with_offload_and_checkpointing():
    out = imp(("acc.yaml", """\
        distributed_type: FSDP
        mixed_precision: bf16
        num_machines: 2
        num_processes: 16
        dynamo_config: {dynamo_backend: INDUCTOR}
        fsdp_config:
          fsdp_version: 2
          fsdp_reshard_after_forward: false
          fsdp_offload_params: true
          fsdp_activation_checkpointing: true
        """))
    hw, par, tr = (out.scenario[k] for k in ("hardware", "parallel", "training"))
    # FSDP2 without resharding after forward holds ZeRO-2's memory
    assert (hw["gpus_per_node"], hw["nodes"], par["dp"], par["zero"]) == (8, 2, 16, 2)
    assert "reshard_after_forward" not in par
    assert (tr["backend"], tr["offload"], tr["recompute"], tr["compile"]) == \
        ("fsdp2", "cpu", "full", True)


def test_fsdp1_hybrid_shard_shards_within_a_node():
    out = imp(("acc.yaml", """\
        distributed_type: FSDP
        num_machines: 2
        num_processes: 16
        fsdp_config: {fsdp_sharding_strategy: HYBRID_SHARD}
        """))
    par = out.scenario["parallel"]
    assert (par["dp"], par["zero"], par["shard_group"]) == (16, 3, 8)
    assert out.scenario["training"]["backend"] == "fsdp1"
    # fsdp_version left out: Accelerate's default 1, listed as defaulted
    assert out.defaulted["training.backend"]["by"] == "library"


def test_unknown_and_wrong_accelerate_keys_are_one_line_each():
    out = imp(("acc.yaml", """\
        distributed_type: FSDP
        num_processes: 8
        learning_rate: 3
        fsdp_config: {fsdp_version: 2, fsdp_shard: 1, fsdp_sharding_strategy: FULL_SHARD}
        """))
    lines = [str(p) for p in out.problems]
    assert len(lines) == 3
    assert lines[0].startswith("acc.yaml:learning_rate: is not a key of an Accelerate config")
    assert lines[1].startswith("acc.yaml:fsdp_config.fsdp_shard: is not a key of fsdp_config")
    assert lines[2].startswith("acc.yaml:fsdp_config.fsdp_sharding_strategy: is FSDP1's")


def test_parallelism_config_must_fill_the_processes():
    out = imp(("acc.yaml", """\
        distributed_type: FSDP
        num_processes: 8
        fsdp_config: {fsdp_version: 2}
        parallelism_config:
          parallelism_config_dp_shard_size: 2
          parallelism_config_tp_size: 2
        """))
    assert [str(p) for p in out.problems] == [
        "acc.yaml:parallelism_config: expected dp_replicate x dp_shard x tp x cp = "
        "num_processes (8) (got 4)"]


# -- TrainingArguments / SFTConfig with DeepSpeed "auto" -----------------------------------------
DS_AUTO = ("ds.json", json.dumps({
    "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"},
    "zero_optimization": {"stage": 3},
    "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
    "train_batch_size": "auto"}))


def test_deepspeed_auto_takes_the_training_arguments():
    out = imp(("acc.yaml", "distributed_type: DEEPSPEED\nnum_processes: 8\n"
                           "deepspeed_config: {deepspeed_config_file: ds.json}\n"),
              DS_AUTO,
              ("args.yaml", """\
        per_device_train_batch_size: 4
        gradient_accumulation_steps: 2
        bf16: true
        max_steps: 100
        optim: paged_adamw_8bit
        """))
    assert out.problems == []
    tr, par = out.scenario["training"], out.scenario["parallel"]
    assert (tr["micro_batch"], tr["global_batch"], tr["precision"], tr["optimizer"]) == \
        (4, 64, "bf16", "paged_adamw8bit")
    assert par["zero"] == 3 and tr["backend"] == "deepspeed"
    assert tr["tokens"] == 100 * 64 * 4096     # max_steps x global batch x seq_len
    assert out.stated["training.micro_batch"] == "args.yaml"
    assert "training.micro_batch" not in out.defaulted


def test_deepspeed_auto_alone_takes_the_trainer_defaults():
    out = imp(DS_AUTO)
    tr = out.scenario["training"]
    assert (tr["micro_batch"], tr["global_batch"], tr["precision"]) == (8, 64, "fp32")
    assert out.defaulted["training.precision"]["why"].startswith("\"auto\": TrainingArguments")


def test_contradicting_files_name_both_and_the_key():
    out = imp(("ds.json", '{"fp16": {"enabled": true}, "zero_optimization": {"stage": 2}}'),
              ("args.yaml", "bf16: true\nper_device_train_batch_size: 2\n"))
    assert [str(p) for p in out.problems] == [
        "training.precision: ds.json says 'fp16', args.yaml says 'bf16'; expected one value "
        "(edit one of them)"]


def test_explicit_train_batch_size_must_match_the_identity():
    out = imp(("ds.json", json.dumps({"train_batch_size": 100,
                                      "train_micro_batch_size_per_gpu": 2,
                                      "gradient_accumulation_steps": 4})))
    assert [str(p) for p in out.problems] == [
        "training.global_batch: expected micro_batch x gradient accumulation x dp = 2 x 4 x 8 "
        "= 64 (DeepSpeed's batch identity) (got 100)"]


def test_sft_config_with_qlora_and_liger():
    out = imp(("sft.yaml", """\
        model_name_or_path: meta-llama/Llama-3.1-8B
        max_length: 2048
        packing: true
        use_liger_kernel: true
        use_peft: true
        load_in_4bit: true
        lora_r: 64
        lora_target_modules: [q_proj, k_proj, v_proj, o_proj]
        """))
    assert out.problems == []
    tr = out.scenario["training"]
    assert out.scenario["model"] == {"preset": "llama3-8b"}
    assert (tr["seq_len"], tr["liger"], tr["method"], tr["precision"]) == \
        (2048, True, "qlora", "bf16")
    assert tr["lora"] == {"rank": 64, "alpha": 32, "targets": ["q", "k", "v", "o"],
                          "quant": "nf4", "double_quant": False, "dropout": 0.05}
    assert tr["recompute"] == "full"          # TRL: gradient_checkpointing defaults to true
    assert out.defaulted["training.lora.alpha"]["by"] == "library"
    assert out.defaulted["training.lora.dropout"]["by"] == "library"   # TRL's 0.05


def test_checkpointing_every_n_layers_reads_as_layer_recompute():
    r = read_one("args.yaml", "activation_checkpointing: true\n"
                              "activation_checkpointing_kwargs: {every_n_layers: 3, "
                              "offload: true}\n")
    tr = r.document["training"]
    assert (tr["recompute"], tr["recompute_every"], tr["activation_offload"]) == \
        ("layer", 3, True)


def test_training_arguments_fsdp_string():
    out = imp(("args.json", json.dumps({"fsdp": "shard_grad_op auto_wrap",
                                        "per_device_train_batch_size": 1})))
    par, tr = out.scenario["parallel"], out.scenario["training"]
    # transformers 5.25: fsdp_config version defaults to 2; shard_grad_op -> no reshard
    assert (tr["backend"], par["zero"], par.get("reshard_after_forward")) == ("fsdp2", 2, None)


def test_unknown_training_argument_and_optimizer():
    out = imp(("args.yaml",
               "per_device_train_batch_size: 2\nbatch_size: 4\noptim: lion_8bit\n"))
    lines = [str(p) for p in out.problems]
    assert lines[0].startswith("args.yaml:batch_size: is not a key of TrainingArguments")
    assert lines[1].startswith("args.yaml:optim: expected one of adamw_torch, ")


# -- config.json and Hub ids ---------------------------------------------------------------------
MIXTRAL = {"model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096,
           "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
           "vocab_size": 32000, "hidden_act": "silu", "num_local_experts": 8,
           "num_experts_per_tok": 2, "rope_theta": 1e6, "sliding_window": None}


def test_config_json_mixtral_is_the_catalog_shape():
    from workbench.catalog import CATALOGS
    from workbench.scenario import parse_scenario

    out = imp(("config.json", json.dumps(MIXTRAL)), FSDP2)
    assert out.problems == []
    model = parse_scenario(out.scenario).model
    preset = CATALOGS["model"]["mixtral-8x7b"]
    for f in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "mlp",
              "tied_embeddings", "moe"):
        assert getattr(model, f) == getattr(preset, f), f
    assert any("sliding_window" in n for n in out.notes)


def test_config_json_qwen2_moe_shared_experts_and_default_tie():
    cfg = {"model_type": "qwen2_moe", "num_hidden_layers": 24, "hidden_size": 2048,
           "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 5632,
           "vocab_size": 151936, "num_experts": 60, "num_experts_per_tok": 4,
           "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632}
    out = imp(("config.json", json.dumps(cfg)))
    m = out.scenario["model"]
    assert m["moe"] == {"experts": 60, "top_k": 4, "expert_ffn_hidden": 1408,
                        "shared_experts": 4}
    assert m["tied_embeddings"] is False
    assert out.defaulted["model.tied_embeddings"]["by"] == "library"


def test_config_json_missing_key_is_one_line():
    cfg = dict(MIXTRAL)
    del cfg["vocab_size"]
    out = imp(("config.json", json.dumps(cfg)))
    assert [str(p) for p in out.problems] == [
        "config.json:vocab_size: is required to shape the model (a Llama-style config.json)"]


def test_hub_ids_known_and_unknown(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)          # the id is not a file here
    out = import_configs(["mistralai/Mistral-7B-v0.1"])
    assert out.scenario["model"] == {"preset": "mistral-7b"} and out.problems == []
    with_cfg = imp(("sft.yaml", "model_name_or_path: Qwen/Qwen3-8B\n"),
                   ("config.json", json.dumps(MIXTRAL)))
    assert with_cfg.problems == []        # the config.json shapes the unknown id
    assert with_cfg.scenario["model"]["layers"] == 32


# -- limits and hostile input --------------------------------------------------------------------
def test_hostile_texts_are_clean_refusals():
    for text in ("[" * 500, "distributed_type: FSDP\ndistributed_type: NO\n",
                 "distributed_type: FSDP\nnum_processes: " + "9" * 41 + "\n",
                 "- a\n- b\n", "distributed_type: !!python/object:os.system x\n",
                 '{"zero_optimization": ' * 40 + "1" + "}" * 40):
        try:
            out = imp(("x.yaml", text))
        except ScenarioError as exc:
            assert exc.problems
        else:
            assert out.problems


def test_uploads_read_like_files():
    name, text = FSDP2
    up = import_uploads([(name, textwrap.dedent(text).encode())])
    assert up.scenario == imp(FSDP2).scenario
    with pytest.raises(ScenarioError, match="not UTF-8"):
        import_uploads([("x.yaml", b"\xff\xfe")])
    with pytest.raises(ScenarioError, match="larger than"):
        import_uploads([("x.yaml", b" " * 1_000_001)])


def test_validation_errors_read_like_any_scenarios():
    out = imp(("acc.yaml", "distributed_type: MULTI_GPU\nnum_processes: 6\n"
                           "parallelism_config: {parallelism_config_tp_size: 4, "
                           "parallelism_config_dp_shard_size: 1}\n"))
    # 6 processes, TP 4 inside: the accelerate reader refuses the sum before the validator
    assert str(out.problems[0]).startswith("acc.yaml:parallelism_config: expected")
    assert validate({"hardware": {"gpu": "h100-sxm"}, "model": "llama3-8b",
                     "training": {"engine": "hf", "precision": "fp9"}})[0].path == \
        "training.precision"


def test_a_full_batch_identity_gives_the_data_parallel_world():
    out = imp(("ds.json", json.dumps({"train_batch_size": 96,
                                      "train_micro_batch_size_per_gpu": 2,
                                      "gradient_accumulation_steps": 4,
                                      "zero_optimization": {"stage": 1}})))
    assert out.problems == []
    assert (out.scenario["hardware"]["gpus_per_node"], out.scenario["parallel"]["dp"]) == (12, 12)
    assert out.scenario["training"]["engine"] == "deepspeed"     # no "auto": DeepSpeed itself
    assert out.stated["hardware.gpus_per_node"].startswith("derived: train_batch_size")


# -- hostile inputs the fuzz found (benchmarks/hostile_fuzz.py, tests/hostile_imports.py) -------
def _export(target: str) -> str:
    from pathlib import Path

    from workbench.export import Source, export
    from workbench.scenario import load_scenario

    root = Path(__file__).resolve().parent.parent
    return export(load_scenario(root / "examples" / "llama3-8b-8xh100.yaml"), target,
                  Source("s.yaml"))


def _data(name: str) -> str:
    return upstream(name).read_text()


def test_launch_counts_past_40_digits_or_not_decimal_are_problems_not_tracebacks():
    from workbench.imports import launch

    script = _export("torchrun")
    r = launch.read("run.sh", script.replace("dp=8", "dp=" + "9" * 5000, 1))
    assert [str(p) for p in r.problems] == [
        "run.sh:layout: dp: expected a count of at most 40 decimal digits (got "
        "'9999999999999999999999999999999999999...99999999999999999999999999999999999999')"]
    # "²" is a digit to str.isdigit but not to int(): not a count, so not read
    r = launch.read("run.sh", script.replace("--nproc-per-node=8", "--nproc-per-node=²"))
    assert r.problems == [] and r.document["hardware"]["gpus_per_node"] == 8


def test_a_launch_set_that_makes_a_section_a_value_is_one_line():
    out = import_configs([("run.sh", _export("torchrun").replace(
        " --steps", " --set 'parallel=' --steps"))])
    assert [str(p) for p in out.problems] == ["parallel: expected a table of keys"]


def test_megatron_doubling_variables_stay_unexpanded_and_many_uses_are_refused():
    from workbench.imports import megatron

    bomb = "A0=xxxxxxxxxxxxxxxx\n" + "".join(f'A{i}="$A{i - 1}$A{i - 1}"\n'
                                             for i in range(1, 61))
    r = megatron.read("m.sh", bomb + "pretrain_gpt.py --num-layers $A60\n")
    # A9 would be 8 KiB (past MAX_VALUE): it stays unset, and A10 on double "$A9" text
    assert [str(p) for p in r.problems] == [
        "m.sh:--num-layers: expected an integer (got '$A59$A59')"]
    with pytest.raises(ScenarioError) as err:
        megatron.read("m.sh", "A=" + "x" * 4000 + "\n" + "pretrain_gpt.py --num-layers $A\n" * 300)
    assert err.value.one_line() == "m.sh: its shell variables expand past 1,000,000 bytes"


def test_megatron_zero_degree_and_superscript_counts_are_not_divided_or_converted():
    from workbench.imports import megatron

    script = _data("megatron_train_llama3_8b_h100_fp8.sh")
    r = megatron.read("m.sh", script.replace("TP_SIZE=1", "TP_SIZE=0"))
    assert r.document["parallel"]["tp"] == 0 and "dp" not in r.document["parallel"]
    r = megatron.read("m.sh", script.replace("NUM_NODES=1", "NUM_NODES=²"))
    assert r.document["hardware"] == {"gpus_per_node": 8}


@pytest.mark.parametrize("text, line", [
    ("[training]\nsteps = " + "9" * 5000 + "\n",
     "t.toml: not TOML the workbench reads: an integer of more than 4,300 digits"),
    ("[training]\nsteps = " + "9" * 41 + "\n", "t.toml: training.steps: a number of more than 40 "
     "digits"),
])
def test_torchtitan_integers_past_the_scenario_bound_are_one_line(text, line):
    from workbench.imports import torchtitan

    with pytest.raises(ScenarioError) as err:
        torchtitan.read("t.toml", text)
    assert err.value.one_line() == line


@pytest.mark.parametrize("text, problems", [
    ("[[training]]\nsteps = 1\n", ["t.toml:training: expected a [table] (got [{'steps': 1}])"]),
    ("parallelism = 3\n[training]\nsteps = 1\n", ["t.toml:parallelism: expected a [table] (got 3)"]),
    ("[model]\nname = [1]\nflavor = '8B'\nconverters = 'float8'\n",
     ["t.toml:model.converters: expected a list (got 'float8')"]),
    ("[activation_checkpoint]\nmode = 'selective'\nselective_ac_option = '²'\n",
     ["t.toml:activation_checkpoint: expected mode none, full, or selective with "
      "selective_ac_option op or a positive integer (got 'selective/²')"]),
])
def test_torchtitan_tables_of_the_wrong_shape_are_problems(text, problems):
    from workbench.imports import torchtitan

    assert [str(p) for p in torchtitan.read("t.toml", text).problems] == problems


def test_torchtune_tables_of_the_wrong_shape_are_problems():
    import yaml

    from workbench.imports import torchtune

    cfg = yaml.safe_load(_data("torchtune_llama3_2_1B_lora_single_device.yaml"))
    cfg.update(tokenizer=["x"], optimizer="adamw")
    cfg["model"]["lora_attn_modules"] = [{"a": 1}, "q_proj"]
    assert [str(p) for p in torchtune.read("tt.yaml", yaml.safe_dump(cfg)).problems][:3] == [
        "tt.yaml:model.lora_attn_modules: expected q_proj, k_proj, v_proj, output_proj "
        "(got {'a': 1})",
        "tt.yaml:tokenizer: expected a table (got ['x'])",
        "tt.yaml:optimizer: expected a table (got 'adamw')"]


def test_conflicts_quote_file_names_escaped():
    out = imp(("\x1b[2Ja.json", '{"zero_optimization": {"stage": 2}}'),
              ("b.json", '{"zero_optimization": {"stage": 3}}'))
    assert [str(p) for p in out.problems] == [
        "parallel.zero: \\x1b[2Ja.json says 2, b.json says 3; expected one value (edit one of "
        "them)"]


def test_json_integers_past_40_digits_are_one_line_not_a_traceback():
    big = "1" + "0" * 4000     # micro x accumulation would pass what int() can print
    with pytest.raises(ScenarioError) as err:
        read_one("ds.json", '{"train_micro_batch_size_per_gpu": %s, '
                 '"gradient_accumulation_steps": %s}' % (big, big))
    assert err.value.one_line() == "ds.json: gradient_accumulation_steps: a number of more " \
                                   "than 40 digits"


def test_a_derived_number_past_40_digits_is_refused_so_the_output_reads_back():
    out = imp(FSDP2, ("args.yaml", "per_device_train_batch_size: 4\nmax_steps: 1" + "0" * 39
                      + "\nmax_length: 4096\n"))
    assert [str(p) for p in out.problems] == [
        "training.tokens: comes to a number of more than 40 digits, which no scenario file "
        "holds"]


def test_hsdp_with_context_parallelism_reads_the_shard_group_as_dp_shard_times_cp():
    # what --to accelerate writes for dp 4, cp 2, shard_group 4 (the round-trip property test's
    # find): FSDP shards over the flattened dp_shard x cp mesh
    out = imp(("acc.yaml", """\
        distributed_type: FSDP
        mixed_precision: bf16
        num_processes: 8
        fsdp_config: {fsdp_version: 2, fsdp_reshard_after_forward: false}
        parallelism_config:
          parallelism_config_dp_replicate_size: 2
          parallelism_config_dp_shard_size: 2
          parallelism_config_tp_size: 1
          parallelism_config_cp_size: 2
        """))
    assert out.problems == []
    par = out.scenario["parallel"]
    assert (par["dp"], par["cp"], par["shard_group"], par["zero"]) == (4, 2, 4, 2)


def test_megatron_recompute_modules_are_read_whole():
    """--recompute-modules takes a list (argparse nargs): every word up to the next flag, read
    into training.recompute_modules under selective granularity; without selective they do
    nothing in Megatron-Core (said in the notes), and an unknown module is refused with the
    allowed ones."""
    from workbench.imports import megatron
    r = megatron.read("t.sh", "torchrun pretrain_gpt.py --bf16 --recompute-granularity selective "
                              "--recompute-modules moe_act layernorm --micro-batch-size 2")
    assert r.document["training"]["recompute"] == "selective"
    assert r.document["training"]["recompute_modules"] == ["moe_act", "layernorm"]
    assert r.document["training"]["micro_batch"] == 2 and not r.problems
    r = megatron.read("t.sh", "torchrun pretrain_gpt.py --bf16 --recompute-modules core_attn")
    assert any("no effect without --recompute-granularity selective" in n for n in r.notes)
    r = megatron.read("t.sh", "torchrun pretrain_gpt.py --bf16 --recompute-modules attn")
    assert r.problems[0].path.endswith("--recompute-modules") and "core_attn" in \
        r.problems[0].message

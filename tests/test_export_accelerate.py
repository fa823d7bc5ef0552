"""``--to accelerate`` checked by the libraries that read it (accelerate 1.16, transformers 5.25,
peft 0.21, installed).

- The Accelerate config document goes through ``accelerate launch``'s own path without starting
  a process: ``load_config_from_file`` (rejects unknown top-level keys), the launch parser
  (every ``fsdp_config`` / ``deepspeed_config`` / ``parallelism_config`` key must be one of its
  arguments: ``_validate_launch_command`` copies them onto the parsed arguments unchecked),
  ``_validate_launch_command``, ``prepare_multi_gpu_env`` / ``prepare_deepspeed_cmd_env``, and
  then ``FullyShardedDataParallelPlugin``, ``DeepSpeedPlugin`` and ``ParallelismConfig`` built
  from the environment the launcher hands the training processes.
- The SFTConfig document is built by ``transformers.TrainingArguments(**fields)`` less TRL's own
  fields (TRL is not installed; its field names are read from the source, cited below). On this
  CPU-only machine TrainingArguments refuses ``bf16=True`` ("Your setup doesn't support
  bf16/gpu", training_args.py ``_validate_args``) unless ``use_cpu`` is set, which would change
  the device the arguments describe; instead the one GPU probe it asks,
  ``is_torch_bf16_gpu_available``, is answered True (a bf16 GPU host), everything else runs.
- The PEFT document loads with ``peft.LoraConfig(**adapter_config)``.
"""
from __future__ import annotations

import dataclasses
import os
from unittest import mock

import pytest
import yaml

from tests.conftest import ROOT
from workbench.cli import main
from workbench.errors import ScenarioError
from workbench.export import ExportError, export
from workbench.scenario import parse_scenario

accelerate = pytest.importorskip("accelerate")
transformers = pytest.importorskip("transformers")

from accelerate.commands.config.config_args import load_config_from_file  # noqa: E402
from accelerate.commands.launch import _validate_launch_command, launch_command_parser  # noqa: E402
from accelerate.parallelism_config import ParallelismConfig  # noqa: E402
from accelerate.utils import DeepSpeedPlugin, FullyShardedDataParallelPlugin  # noqa: E402
from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env  # noqa: E402

# TRL SFTConfig's own fields (huggingface/trl trl/trainer/sft_config.py @
# 016013e88acec9257c7476fdcdb12e5479938a5f): the ones SFTConfig adds to TrainingArguments
TRL_SFT_FIELDS = {"model_init_kwargs", "chat_template_path", "dataset_text_field",
                  "dataset_kwargs", "dataset_num_proc", "eos_token", "max_length",
                  "truncation_mode", "shuffle_dataset", "packing", "packing_strategy",
                  "padding_free", "pad_to_multiple_of", "eval_packing", "completion_only_loss",
                  "assistant_only_loss", "loss_type", "activation_offloading", "pad_token"}


def scenario(nodes=1, gpus=8, parallel=None, backend=None, model="llama3-8b", **training):
    return parse_scenario({
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": gpus, "nodes": nodes},
        "model": {"preset": model},
        "parallel": parallel or {"dp": gpus * nodes, "zero": 3},
        "training": {"engine": "hf", "seq_len": 4096, "micro_batch": 2, "global_batch": 64,
                     "recompute": "full", "backend": backend, **training}})


def documents(s) -> list[dict]:
    return list(yaml.safe_load_all(export(s, "accelerate")))


def launched(cfg: dict, tmp_path) -> tuple[object, dict]:
    """The Accelerate config through ``accelerate launch``'s own steps: the ClusterConfig and
    the environment the launched processes get."""
    path = tmp_path / "accelerate_config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    loaded = load_config_from_file(str(path))
    parser = launch_command_parser()
    dests = {a.dest for a in parser._actions}
    for section in ("fsdp_config", "deepspeed_config", "parallelism_config"):
        unknown = set(cfg.get(section, {})) - dests
        assert not unknown, f"{section}: not accelerate launch arguments: {unknown}"
    args = parser.parse_args(["--config_file", str(path), "train.py"])
    args, defaults, _ = _validate_launch_command(args)
    if args.use_deepspeed:
        args.deepspeed_fields_from_accelerate_config = ",".join(defaults.deepspeed_config)
        _, env = prepare_deepspeed_cmd_env(args)
    else:
        env = prepare_multi_gpu_env(args)
    return loaded, env


def plugins(env: dict):
    """The plugins a launched process builds from ``env``, as on a CUDA host: FSDP1's
    ``sync_module_states`` asks ``get_torch_accelerator_backend`` for the device and refuses
    cpu (accelerate/utils/dataclasses.py), so that one probe answers cuda."""
    cuda = mock.patch("accelerate.utils.dataclasses.get_torch_accelerator_backend",
                      return_value=("cuda", None))
    with mock.patch.dict(os.environ, env, clear=True), cuda:
        fsdp = FullyShardedDataParallelPlugin() if env.get("ACCELERATE_USE_FSDP") else None
        ds = DeepSpeedPlugin() if env.get("ACCELERATE_USE_DEEPSPEED") else None
        par = (ParallelismConfig() if env.get("ACCELERATE_USE_PARALLELISM_CONFIG") == "true"
               else None)
    return fsdp, ds, par


def test_fsdp2_default_loads_and_builds_the_plugin(tmp_path):
    s = scenario()
    acc, args = documents(s)
    loaded, env = launched(acc, tmp_path)
    assert (loaded.distributed_type.value, loaded.num_processes, loaded.mixed_precision) == (
        "FSDP", 8, "bf16")
    fsdp, ds, par = plugins(env)
    assert ds is None
    assert (fsdp.fsdp_version, fsdp.reshard_after_forward, fsdp.activation_checkpointing) == (
        2, True, True)
    assert fsdp.transformer_cls_names_to_wrap == ["LlamaDecoderLayer"]
    assert type(fsdp.cpu_offload).__name__ == "OffloadPolicy"   # FSDP2: no offload
    assert (par.dp_replicate_size, par.dp_shard_size, par.tp_size, par.cp_size) == (1, 8, 1, 1)
    assert par.total_size == loaded.num_processes
    # FSDP checkpoints the layers; the Trainer's own switch stays off (trainer.py refuses both)
    assert args["activation_checkpointing"] is False
    assert (args["per_device_train_batch_size"], args["gradient_accumulation_steps"]) == (2, 4)


def test_hsdp_with_tensor_parallelism_on_two_nodes(tmp_path):
    s = scenario(nodes=2, parallel={"dp": 8, "tp": 2, "zero": 3, "shard_group": 4,
                                    "sequence_parallel": False})
    acc, args = documents(s)[:2]
    loaded, env = launched(acc, tmp_path)
    assert (loaded.num_machines, loaded.num_processes) == (2, 16)
    fsdp, _, par = plugins(env)
    assert (par.dp_replicate_size, par.dp_shard_size, par.tp_size, par.cp_size) == (2, 4, 2, 1)
    assert par.total_size == 16
    assert args["gradient_accumulation_steps"] == 64 // (2 * 8)


def test_zero2_is_fsdp2_without_resharding_and_offload_is_fsdp_cpu_offload(tmp_path):
    s = scenario(parallel={"dp": 8, "zero": 2})
    (tmp_path / "z2").mkdir()
    fsdp, _, _ = plugins(launched(documents(s)[0], tmp_path / "z2")[1])
    assert fsdp.reshard_after_forward is False
    s = scenario(parallel={"dp": 8, "zero": 3}, offload="cpu")
    (tmp_path / "off").mkdir()
    fsdp, _, _ = plugins(launched(documents(s)[0], tmp_path / "off")[1])
    assert type(fsdp.cpu_offload).__name__ == "CPUOffloadPolicy"


def test_fsdp1_writes_the_sharding_strategy(tmp_path):
    from torch.distributed.fsdp import ShardingStrategy
    s = scenario(nodes=2, parallel={"dp": 16, "zero": 3, "shard_group": 8}, backend="fsdp1")
    acc = documents(s)[0]
    assert "parallelism_config" not in acc
    fsdp, _, par = plugins(launched(acc, tmp_path)[1])
    # what Accelerator.prepare hands FSDP1: sharding_strategy or reshard_after_forward
    assert fsdp.fsdp_version == 1
    assert (fsdp.sharding_strategy or fsdp.reshard_after_forward) == ShardingStrategy.HYBRID_SHARD
    assert par is None or par.total_size == 1


@pytest.mark.parametrize("zero,offload", [(1, "none"), (3, "cpu"), (3, "nvme")])
def test_deepspeed_plugin(tmp_path, zero, offload):
    s = scenario(parallel={"dp": 8, "zero": zero}, offload=offload, backend="deepspeed")
    acc, args = documents(s)[:2]
    loaded, env = launched(acc, tmp_path)
    assert loaded.distributed_type.value == "DEEPSPEED"
    _, ds, _ = plugins(env)
    assert ds.zero_stage == zero
    assert ds.deepspeed_config["gradient_accumulation_steps"] == args[
        "gradient_accumulation_steps"] == 4
    zo = ds.deepspeed_config["zero_optimization"]
    assert zo.get("offload_optimizer", {"device": "none"})["device"] == offload
    assert zo.get("offload_param", {"device": "none"})["device"] == (
        offload if zero == 3 else "none")
    # not FSDP: the Trainer checkpoints the layers
    assert args["activation_checkpointing"] is True
    out = export(s, "accelerate")
    assert any("nvme_path 'none'" in w for w in out.warnings) == (offload == "nvme")
    if offload == "nvme":   # the launcher drops the path (the note says so)
        assert zo["offload_optimizer"]["nvme_path"] == "none"


def test_ddp_and_single_gpu(tmp_path):
    acc = documents(scenario(parallel={"dp": 8, "zero": 0}))[0]
    loaded, env = launched(acc, tmp_path)
    assert loaded.distributed_type.value == "MULTI_GPU"
    assert "ACCELERATE_USE_FSDP" not in env
    one = documents(scenario(gpus=1, parallel={"dp": 1, "zero": 0}))[0]
    assert load_config_from_file_of(one, tmp_path).distributed_type.value == "NO"


def load_config_from_file_of(cfg: dict, tmp_path):
    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return load_config_from_file(str(path))


@pytest.fixture
def bf16_gpu_host(monkeypatch):
    """TrainingArguments as on a host with a bf16 GPU: the one probe it asks answers True."""
    import transformers.training_args as ta
    monkeypatch.setattr(ta, "is_torch_bf16_gpu_available", lambda: True)


@pytest.mark.parametrize("optimizer,optim", [
    ("adamw", "adamw_torch_fused"), ("sgd", "sgd"), ("adamw8bit", "adamw_bnb_8bit"),
    ("paged_adamw8bit", "paged_adamw_8bit"), ("adafactor", "adafactor")])
def test_training_arguments_are_built_by_transformers(bf16_gpu_host, tmp_path, optimizer, optim):
    s = scenario(parallel={"dp": 8, "zero": 1}, backend="deepspeed", optimizer=optimizer,
                 compile=True, activation_offload=True)
    fields = documents(s)[1]
    trl_only = {k for k in fields if k not in transformers.TrainingArguments.__dataclass_fields__}
    assert trl_only <= TRL_SFT_FIELDS and trl_only == {"max_length", "packing", "loss_type",
                                                       "activation_offloading"}
    kept = {k: v for k, v in fields.items() if k not in trl_only}
    args = transformers.TrainingArguments(output_dir=str(tmp_path), **kept)
    assert args.optim.value == optim
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (2, 4)
    assert (args.bf16, args.fp16, args.torch_compile, args.activation_checkpointing) == (
        True, False, True, True)
    assert args.max_steps == fields["max_steps"]
    assert (fields["max_length"], fields["activation_offloading"], fields["loss_type"]) == (
        4096, True, "nll")


def test_liger_switch(bf16_gpu_host, tmp_path):
    s = scenario()
    s = dataclasses.replace(s, training=dataclasses.replace(s.training, liger=True))
    fields = documents(s)[1]
    assert fields["use_liger_kernel"] is True and "loss_type" not in fields


def test_lora_document_loads_with_peft():
    peft = pytest.importorskip("peft")
    docs = documents(scenario(method="lora", lora={"rank": 8, "alpha": 16,
                                                   "targets": "attention"}))
    assert len(docs) == 3
    cfg = peft.LoraConfig(**docs[2]["adapter_config"])
    assert (cfg.r, cfg.lora_alpha, set(cfg.target_modules)) == (
        8, 16, {"q_proj", "k_proj", "v_proj", "o_proj"})
    assert "training_arguments" not in docs[2]


def refused(**kw) -> list[str]:
    """The fields a person is told about: the validator's, for a layout the scenario's own
    engine cannot run (for engine hf the same words as the export's, rules/table.py
    engine_problems), else the export's."""
    try:
        s = scenario(**kw)
    except ScenarioError as err:
        return [p.path for p in err.problems]
    with pytest.raises(ExportError) as err:
        export(s, "accelerate")
    return [p.path for p in err.value.problems]


def test_refusals_name_the_field():
    # the hf engine record runs no pipeline schedule; Accelerate has no pipeline dimension
    assert "parallel.pp" in refused(parallel={"dp": 4, "pp": 2, "zero": 1}, engine="generic")
    assert refused(parallel={"dp": 4, "tp": 2, "zero": 3}) == ["parallel.sequence_parallel"]
    assert refused(parallel={"dp": 4, "tp": 2, "zero": 3, "sequence_parallel": False},
                   backend="deepspeed") == ["parallel.tp"]
    assert refused(parallel={"dp": 8, "zero": 1}, backend="fsdp2") == ["parallel.zero"]
    assert refused(parallel={"dp": 8, "zero": 1}, backend="fsdp1") == ["parallel.zero"]
    assert refused(parallel={"dp": 8, "zero": 3}, offload="nvme",
                   backend="fsdp2") == ["training.offload"]
    assert refused(gpus=2, parallel={"dp": 1, "tp": 2, "zero": 3,
                                     "sequence_parallel": False}) == ["parallel.zero"]
    assert refused(nodes=2, parallel={"dp": 16, "zero": 3, "shard_group": 4},
                   backend="fsdp1") == ["parallel.shard_group"]
    assert "parallel.ep" in refused(model="mixtral-8x7b", parallel={"dp": 8, "ep": 8, "zero": 3},
                                    engine="generic")
    # the engine-switch rule: the Trainer checkpoints whole layers or nothing
    assert refused(recompute="selective", engine="generic") == ["training.recompute"]


def test_cli_refusal_is_one_line(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
        "model": {"preset": "llama3-8b"}, "parallel": {"dp": 4, "pp": 2, "zero": 1},
        "training": {"engine": "generic", "recompute": "full", "global_batch": 64}}))
    assert main(["export", str(path), "--to", "accelerate"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "parallel.zero" in err[0] and "2 more problems" in err[0]


def test_cli_prints_the_stream(tmp_path, capsys):
    assert main(["export", str(ROOT / "examples/llama3-8b-8xh100.yaml"), "--to", "accelerate",
                 "--set", "training.engine=hf", "--set", "training.recompute=full"]) == 0
    out = capsys.readouterr().out
    assert [d["distributed_type"] if "distributed_type" in d else "args"
            for d in yaml.safe_load_all(out)] == ["FSDP", "args"]

"""Accelerate's and TRL's own example configs import without an edit (issue #42 targets): each
one's exact scenario, what was defaulted, and that the scenario validates. The files are read
from the team's shared folder (``tests.conftest.upstream``; its SOURCES.md names repository,
path and commit), never copied into the project."""
from __future__ import annotations

import pytest

from tests.conftest import upstream
from workbench.imports import import_configs, validate


def _imp(*names: str):
    return import_configs([upstream(n) for n in names])


def _layout(doc: dict) -> tuple:
    hw, par, tr = doc["hardware"], doc["parallel"], doc["training"]
    return (hw["gpus_per_node"], hw["nodes"], par["dp"], par["zero"], par.get("shard_group"),
            par["tp"], par["cp"], par.get("reshard_after_forward"), tr["micro_batch"],
            tr["global_batch"], tr["precision"], tr["recompute"], tr.get("offload", "none"),
            tr["engine"], tr.get("backend"))


# (files, gpus/node, nodes, dp, zero, shard_group, tp, cp, reshard, micro, global, precision,
#  recompute, offload, engine, backend)
CASES = [
    (["accelerate-config_yaml_templates-fsdp.yaml"],
     (2, 1, 2, 3, None, 1, 1, None, 8, 16, "bf16", "none", "none", "hf", "fsdp1")),
    (["accelerate-config_yaml_templates-multi_gpu.yaml"],
     (2, 1, 2, 0, None, 1, 1, None, 8, 16, "bf16", "none", "none", "hf", None)),
    (["accelerate-config_yaml_templates-multi_node.yaml"],
     (4, 2, 8, 0, None, 1, 1, None, 8, 64, "fp32", "none", "none", "hf", None)),
    (["accelerate-torch_native_parallelism-configs-tp_hsdp.yaml"],
     (8, 1, 4, 3, 2, 2, 1, None, 8, 32, "bf16", "none", "none", "hf", "fsdp2")),
    (["accelerate-slurm-fsdp_config.yaml"],
     (8, 1, 8, 3, None, 1, 1, None, 8, 64, "fp32", "none", "none", "hf", "fsdp1")),
    (["accelerate-config_yaml_templates-deepspeed.yaml", "accelerate-zero_stage1_config.json"],
     (2, 1, 2, 1, None, 1, 1, None, 8, 16, "fp16", "none", "none", "hf", "deepspeed")),
    (["accelerate-zero_stage2_config.json"],
     (8, 1, 8, 2, None, 1, 1, None, 8, 64, "fp16", "none", "none", "hf", "deepspeed")),
    (["accelerate-zero_stage3_offload_config.json"],
     (8, 1, 8, 3, None, 1, 1, None, 8, 64, "fp16", "none", "cpu", "hf", "deepspeed")),
    (["accelerate-sp-alst.ds-config.json"],
     (8, 1, 8, 3, None, 1, 1, None, 8, 64, "bf16", "none", "none", "hf", "deepspeed")),
    (["trl-trl-accelerate_configs-fsdp2.yaml"],
     (8, 1, 8, 3, None, 1, 1, None, 8, 64, "bf16", "none", "none", "hf", "fsdp2")),
    (["trl-trl-accelerate_configs-fsdp1.yaml"],
     (8, 1, 8, 3, None, 1, 1, None, 8, 64, "bf16", "none", "none", "hf", "fsdp1")),
    (["trl-trl-accelerate_configs-zero3.yaml"],
     (8, 1, 8, 3, None, 1, 1, None, 8, 64, "bf16", "none", "none", "hf", "deepspeed")),
]


@pytest.mark.parametrize("files,want", CASES, ids=[c[0][0] for c in CASES])
def test_example_configs_import_without_edit(files, want):
    out = _imp(*files)
    assert out.problems == []
    assert _layout(out.scenario) == want
    assert validate(out.scenario) == []      # the scenario parser takes it as it is


def test_what_the_files_leave_out_is_listed_with_its_reason():
    out = _imp("accelerate-config_yaml_templates-deepspeed.yaml",
               "accelerate-zero_stage1_config.json")
    d = out.defaulted
    # "auto" micro batch: the Trainer's per_device_train_batch_size default, from the JSON
    assert d["training.micro_batch"]["value"] == 8 and d["training.micro_batch"]["by"] == \
        "library"
    assert d["training.micro_batch"]["source"].endswith("zero_stage1_config.json")
    assert "per_device_train_batch_size" in d["training.micro_batch"]["why"]
    # nobody names the GPU or the model: the workbench's defaults, said so
    assert d["hardware.gpu"] == {"value": "h100-sxm", "by": "workbench", "source": None,
                                 "why": d["hardware.gpu"]["why"]}
    assert d["model"]["value"] == {"preset": "llama3-8b"} and d["model"]["by"] == "workbench"
    # what the files state is attributed to them
    assert out.stated["parallel.zero"].endswith("zero_stage1_config.json")
    assert out.stated["training.precision"].endswith("zero_stage1_config.json")
    assert out.stated["hardware.gpus_per_node"].endswith("deepspeed.yaml")
    # the YAML's pointer to the JSON is not repeated once the JSON is given
    assert not any("pass it to workbench import too" in n for n in out.notes)


def test_context_parallel_example_reads_cp8():
    """Accelerate's CP example: FSDP2 with cp_size 8. The document holds cp 8 and full
    recompute (fsdp_activation_checkpointing); whether the hf engine record accepts CP is the
    validator's call (the engine record is another change)."""
    out = _imp("accelerate-torch_native_parallelism-configs-cp.yaml")
    assert _layout(out.scenario) == (8, 1, 1, 3, None, 1, 8, None, 8, 8, "bf16", "full",
                                     "none", "hf", "fsdp2")


def test_trl_example_names_a_catalog_model_by_its_hub_id(tmp_path):
    out = _imp("trl-examples-cli_configs-example_config.yaml")
    assert out.problems == []
    assert out.scenario["model"] == {"preset": "qwen2.5-0.5b"}
    assert any("Qwen/Qwen2.5-0.5B: the catalog's qwen2.5-0.5b" in n for n in out.notes)
    # TRL's own defaults where the file is silent
    assert out.scenario["training"]["precision"] == "bf16"
    assert out.scenario["training"]["recompute"] == "full"
    assert out.scenario["training"]["seq_len"] == 1024
    # a model the catalog lacks is asked for, never replaced by another
    text = upstream("trl-examples-cli_configs-example_config.yaml").read_text()
    other = tmp_path / "sft.yaml"
    other.write_text(text.replace("Qwen/Qwen2.5-0.5B", "Example-Org/NotAModel-7B"))
    out = import_configs([other])
    assert len(out.problems) == 1
    line = str(out.problems[0])
    assert "model_name_or_path" in line and "Example-Org/NotAModel-7B" in line
    assert "pass the model's config.json too" in line


def test_trls_example_pair_with_the_models_config_json():
    """TRL's CLI example config and its Accelerate FSDP2 config, unedited, with the
    config.json of the model they name (Qwen/Qwen2.5-0.5B; the Hub id alone asks for it)."""
    out = _imp("trl-trl-accelerate_configs-fsdp2.yaml",
               "trl-examples-cli_configs-example_config.yaml", "qwen2.5-0.5b-config.json")
    assert out.problems == []
    m, tr = out.scenario["model"], out.scenario["training"]
    assert (m["layers"], m["hidden"], m["heads"], m["kv_heads"], m["ffn_hidden"], m["vocab"],
            m["tied_embeddings"]) == (24, 896, 14, 2, 4864, 151936, True)
    assert (tr["engine"], tr["backend"], tr["micro_batch"], tr["global_batch"], tr["seq_len"],
            tr["recompute"], tr["precision"]) == ("hf", "fsdp2", 8, 64, 1024, "full", "bf16")
    assert out.defaulted["training.seq_len"]["by"] == "library"

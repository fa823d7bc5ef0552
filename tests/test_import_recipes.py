"""Recipes as people publish them (issue 52): keys that change neither memory nor step time are
listed as ignored, not refused; an SFT recipe is a full fine-tune of the checkpoint it names,
found in the catalog by its Hub id. The recipe below is written here, in the shape of
alignment-handbook's SFT recipes (huggingface/alignment-handbook @227deaa6
src/alignment/configs.py: ModelArguments, DataArguments) with keys transformers 4.x read."""
from __future__ import annotations

from workbench.imports import import_configs, validate
from workbench.imports.training_keys import IGNORED

RECIPE = """\
model_name_or_path: Qwen/Qwen2.5-7B
model_revision: main
torch_dtype: bfloat16
attn_implementation: flash_attention_2
chat_template: "{% for m in messages %}{{ m['content'] }}{% endfor %}"
dataset_mixture:
  datasets:
    - id: example/chat-data
      split: train
  seed: 42
preprocessing_num_workers: 12
bf16: true
gradient_accumulation_steps: 2
gradient_checkpointing: true
learning_rate: 2.0e-05
lr_scheduler_type: cosine
max_length: 2048
num_train_epochs: 1
output_dir: data/qwen-sft
overwrite_output_dir: true
per_device_train_batch_size: 8
warmup_ratio: 0.1
logging_dir: logs
"""


def test_a_published_sft_recipe_imports_with_its_inert_keys_listed(tmp_path):
    path = tmp_path / "config_sft.yaml"
    path.write_text(RECIPE)
    out = import_configs([path])
    assert out.problems == []
    tr = out.scenario["training"]
    assert out.scenario["model"] == {"preset": "qwen2.5-7b"}
    assert tr["method"] == "full" and "training.method" not in out.defaulted
    assert (tr["micro_batch"], tr["seq_len"], tr["recompute"]) == (8, 2048, "full")
    said = " ".join(out.notes)
    for key in ("chat_template", "dataset_mixture", "preprocessing_num_workers",
                "overwrite_output_dir", "warmup_ratio", "logging_dir"):
        assert key in IGNORED and key in said
    assert "ignored (no effect on memory or step time)" in said
    validate(out)


def test_keys_that_change_the_run_stay_refused(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text(RECIPE + "per_gpu_train_batch_size: 4\nfsdp_min_num_params: 1000\n")
    out = import_configs([path])
    refused = {p.path.split(":")[-1] for p in out.problems}
    assert refused == {"per_gpu_train_batch_size", "fsdp_min_num_params"}

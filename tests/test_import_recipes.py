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


def test_run_lengths_are_kept_where_the_batch_follows_from_the_gpus(tmp_path):
    """torchtitan's shard degree -1 leaves dp (and so the batch) to the GPUs: its steps become
    tokens once the merge knows them; its expert degree is read all the same. Megatron-LM's
    --train-iters and --train-samples set the tokens too. (Files written here.)"""
    toml = tmp_path / "job.toml"
    toml.write_text('[model]\nname = "qwen3"\nflavor = "30B-A3B"\n[parallelism]\n'
                    'data_parallel_shard_degree = -1\nexpert_parallel_degree = 8\n'
                    '[training]\nlocal_batch_size = 4\nseq_len = 4096\nsteps = 1000\n'
                    '[compile]\nenable = true\ncomponents = ["loss"]\n')
    out = import_configs([toml])
    assert out.problems == []
    par, tr = out.scenario["parallel"], out.scenario["training"]
    assert (par["dp"], par["zero"], par["ep"]) == (8, 3, 8)       # 8 GPUs by default
    assert tr["global_batch"] == 32 and tr["tokens"] == 1000 * 32 * 4096
    assert tr["compile"] is False          # components without "model": the model is eager
    assert out.scenario["model"] == {"preset": "qwen3-30b-a3b"}
    for flag, tokens in (("--train-iters 5000", 5000 * 128 * 8192),
                         ("--train-samples 640000", 640000 * 8192)):
        sh = tmp_path / "run.sh"
        sh.write_text("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size"
                      " 2 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
                      "--ffn-hidden-size 14336 --group-query-attention --num-query-groups 8 "
                      "--swiglu --normalization RMSNorm --untie-embeddings-and-output-weights "
                      "--disable-bias-linear --vocab-size 128256 --seq-length 8192 "
                      f"--micro-batch-size 1 --global-batch-size 128 {flag} --bf16\n")
        out = import_configs([sh])
        assert out.problems == [] and out.scenario["training"]["tokens"] == tokens, flag


def test_a_model_that_is_no_decoder_is_refused_by_name(tmp_path):
    """Issue 52: a BERT config.json became a Llama-style decoder with a gated MLP."""
    import json

    for cfg in ({"architectures": ["BertForMaskedLM"], "model_type": "bert"},
                {"model_type": "t5"},
                {"architectures": ["WhisperForConditionalGeneration"], "model_type": "x"}):
        path = tmp_path / "config.json"
        path.write_text(json.dumps({**cfg, "hidden_size": 768, "num_hidden_layers": 12,
                                    "num_attention_heads": 12, "intermediate_size": 3072,
                                    "vocab_size": 30522, "hidden_act": "gelu"}))
        out = import_configs([path])
        assert len(out.problems) == 1, out.problems
        assert "is not a decoder-only language model" in str(out.problems[0])
        assert "model" not in out.scenario or "layers" not in out.scenario["model"]


def test_an_import_keeps_the_box_on_the_page_where_no_file_states_other_hardware(tmp_path):
    """Issue 54: opening an SFT config replaced the person's 8 x H200 box with the workbench's
    default hardware."""
    from pathlib import Path

    from workbench.scenario import load_scenario

    box = load_scenario(Path(__file__).resolve().parent.parent / "examples"
                        / "brief-8xh200-70b.yaml").document["hardware"]
    path = tmp_path / "config_sft.yaml"
    path.write_text(RECIPE)
    out = import_configs([path], hardware=box)
    assert out.problems == [] and out.scenario["hardware"] == box
    assert {k for k, d in out.defaulted.items() if d["by"] == "page"} == {
        f"hardware.{k}" for k in box}
    # a file that states the GPU count wins over the page's
    acc = tmp_path / "accelerate.yaml"
    acc.write_text("distributed_type: MULTI_GPU\nnum_processes: 2\nnum_machines: 1\n"
                   "mixed_precision: bf16\n")
    out = import_configs([acc, path], hardware=box)
    assert out.scenario["hardware"]["gpus_per_node"] == 2
    assert out.scenario["hardware"]["host"] == box["host"]

"""A torchtune recipe config (YAML, torchtune v0.6.1) for a fine-tuning scenario, with the
``tune run`` command line that launches it as a comment.

Sources (pytorch/torchtune at tag v0.6.1 = commit a6290a5b40758f13bca61c386bc8756a49ef417e):
the recipe configs ``recipes/configs/llama3_1/8B_lora.yaml``, ``8B_lora_single_device.yaml``,
``8B_qlora_single_device.yaml``, ``8B_full.yaml``, ``8B_full_single_device.yaml``,
``70B_lora.yaml``, ``70B_full.yaml`` (``tensor_parallel_plan``), ``405B_qlora.yaml``,
``recipes/configs/llama3_2/1B_lora.yaml``, ``recipes/configs/mistral/7B_lora.yaml`` and
``7B_full.yaml`` (the layout of the file, the checkpoint files, tokenizers and model types); the
keys each recipe reads: ``recipes/full_finetune_single_device.py``,
``full_finetune_distributed.py`` (``tensor_parallel_dim``, ``fsdp_cpu_offload``,
``optimizer_in_bwd``; "Tensor parallelism is currently incompatible with fused optimizer"),
``lora_finetune_single_device.py``, ``lora_finetune_distributed.py``; the model builders'
``__all__`` in ``torchtune/models/{llama3,llama3_1,llama3_2,mistral}/__init__.py`` and their
LoRA arguments in ``_model_builders.py``; the multi-node launch in
``recipes/full_finetune_multinode.slurm``. The tests check every ``_component_`` against the
names read from that tag (tests/data/torchtune_v0.6.1_components.json).

Mapping: method full -> ``full_finetune_*``, lora and qlora -> ``lora_finetune_*`` (qlora: the
``qlora_*`` builder, ``quantize_base=True``); one GPU -> the single-device recipe, more (or FSDP
CPU offload) -> the distributed one. ``lora.targets`` q, k, v, o -> ``lora_attn_modules``
q_proj, k_proj, v_proj, output_proj; gate/up/down -> ``apply_lora_to_mlp`` (w1, w2, w3
together: a part of the MLP is refused through the rule table); ``apply_lora_to_output`` false
(the scenario has no adapter on the output projection). ``batch_size`` = micro_batch,
``gradient_accumulation_steps`` = global / (micro x dp), ``tokenizer.max_seq_len`` = seq_len,
``dtype``, ``enable_activation_checkpointing`` (recompute full),
``enable_activation_offloading``, ``optimizer`` (:data:`OPTIMIZERS`), ``optimizer_in_bwd``,
``compile``, ``fsdp_cpu_offload`` (offload cpu), ``tensor_parallel_dim`` with llama3's
``base_llama_tp_plan`` (full fine-tuning only), ``max_steps_per_epoch`` from training.tokens.

REFUSED (an :class:`ExportError` naming the field): what the torchtune engine record says
torchtune cannot run (workbench/engines/torchtune.py, asked through the rule table:
pretraining, pipeline and context parallelism, zero 1/2, DDP, fp16/fp8, NVMe offload, TP with
adapters, int8 QLoRA, part of the MLP, parts trained in full beside adapters, optimizer in
backward with adapters or accumulation, activation offload without recompute; and, through
the engine-switch rule, recompute policies other than none and full), and a model
torchtune v0.6.1 has no builder for (:data:`BUILDERS`: Llama 3.1 8B/70B/405B, Llama 3.2 1B,
Mistral 7B, unmodified presets only).
"""
from __future__ import annotations

import json

from workbench.errors import Problem
from workbench.export.common import (
    Exported, ExportError, Expand, Notes, Source, layout_summary, model_label, one_line,
    preset_key, refuse_what_engine_cannot_run, shell_word, spelling, switch_problems,
    train_steps,
)
from workbench.scenario.types import Scenario

TARGET = "torchtune"
ENGINE = "torchtune"
TAG = "v0.6.1"
CONFIG_FILE = "torchtune.yaml"   # the name the launch comment gives this file


# preset -> (builder module, size suffix, checkpoint dir, checkpoint_files, model_type,
#            tokenizer component, tokenizer path under the checkpoint dir, the v0.6.1 config read)
BUILDERS: dict[str, tuple] = {
    "llama3-8b": ("llama3_1", "llama3_1_8b", "/tmp/Meta-Llama-3.1-8B-Instruct/",
                  {"filename_format": "model-{}-of-{}.safetensors", "max_filename": "00004"},
                  "LLAMA3", "torchtune.models.llama3.llama3_tokenizer",
                  "original/tokenizer.model", "llama3_1/8B_lora.yaml"),
    "llama3-70b": ("llama3_1", "llama3_1_70b", "/tmp/Meta-Llama-3.1-70B-Instruct/",
                   {"filename_format": "model-{}-of-{}.safetensors", "max_filename": "00030"},
                   "LLAMA3", "torchtune.models.llama3.llama3_tokenizer",
                   "original/tokenizer.model", "llama3_1/70B_lora.yaml"),
    "llama3-405b": ("llama3_1", "llama3_1_405b", "/tmp/Meta-Llama-3.1-405B-Instruct/",
                    {"filename_format": "model-{}-of-{}.safetensors", "max_filename": "00191"},
                    "LLAMA3", "torchtune.models.llama3.llama3_tokenizer",
                    "original/mp8/tokenizer.model", "llama3_1/405B_qlora.yaml"),
    "llama3.2-1b": ("llama3_2", "llama3_2_1b", "/tmp/Llama-3.2-1B-Instruct/",
                    ["model.safetensors"], "LLAMA3_2",
                    "torchtune.models.llama3.llama3_tokenizer", "original/tokenizer.model",
                    "llama3_2/1B_lora.yaml"),
    "mistral-7b": ("mistral", "mistral_7b", "/tmp/Mistral-7B-v0.1/",
                   ["pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"],
                   "MISTRAL", "torchtune.models.mistral.mistral_tokenizer", "tokenizer.model",
                   "mistral/7B_lora.yaml"),
}

# training.optimizer -> the optimizer section (recipes instantiate ``cfg.optimizer`` with the
# model's trainable parameters). adamw as the v0.6.1 configs write it (fused; lr per method
# below); PagedAdamW8bit as llama3_1/8B_full_single_device.yaml; AdamW8bit from bitsandbytes
# as docs/source/tutorials/memory_optimizations.rst suggests; AdamW4bit: torchao's low-bit
# optimizers (torchao.optim, torchao >= 0.11; torchao.prototype.low_bit_optim before);
# Adafactor: torch.optim.Adafactor (torch >= 2.5).
OPTIMIZERS: dict[str, dict] = {
    "adamw": {"_component_": "torch.optim.AdamW", "fused": True, "weight_decay": 0.01},
    "sgd": {"_component_": "torch.optim.SGD", "momentum": 0.9},
    "adamw8bit": {"_component_": "bitsandbytes.optim.AdamW8bit", "weight_decay": 0.01},
    "paged_adamw8bit": {"_component_": "bitsandbytes.optim.PagedAdamW8bit",
                        "weight_decay": 0.01},
    "adamw4bit": {"_component_": "torchao.optim.AdamW4bit", "weight_decay": 0.01},
    "adafactor": {"_component_": "torch.optim.Adafactor"},
}
# placeholders the scenario does not fix: the v0.6.1 configs' learning rates
LR = {"full": 2e-5, "lora": 3e-4, "qlora": 3e-4}

# training.lora.targets -> torchtune's lora_attn_modules (LORA_ATTN_MODULES in
# torchtune/modules/peft/_utils.py: q_proj, k_proj, v_proj, output_proj)
ATTN = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "output_proj"}
MLP = ("gate", "up", "down")


def recipe(s: Scenario) -> str:
    """The recipe the config is for: ``{full,lora}_finetune_{single_device,distributed}``."""
    kind = "full" if s.training.method == "full" else "lora"
    world = s.hardware.gpus_per_node * s.hardware.nodes
    distributed = world > 1 or s.training.offload == "cpu"   # fsdp_cpu_offload: FSDP2
    return f"{kind}_finetune_{'distributed' if distributed else 'single_device'}"


def _builder(s: Scenario) -> tuple:
    key = preset_key(s)
    if key in BUILDERS:
        return BUILDERS[key]
    preset = s.document.get("model", {}).get("preset")
    got = preset if preset else s.model.name
    why = ("a modified preset is not the published model torchtune's builder builds"
           if preset and key is None else "torchtune v0.6.1 has no model builder for it")
    raise ExportError(TARGET, [Problem(
        "model.preset", one_line(got), f"{why}; the torchtune export knows "
        + ", ".join(BUILDERS) + " (torchtune.models.llama3_1 / llama3_2 / mistral)")])


def launch(s: Scenario) -> list[str]:
    """``tune run`` with torchrun's arguments (recipes/full_finetune_multinode.slurm: one
    ``tune run`` per node with a c10d rendezvous at the head node)."""
    hw = s.hardware
    args = ["tune", "run"]
    name = recipe(s)
    if name.endswith("distributed"):
        if hw.nodes > 1:
            args += ["--nnodes", str(hw.nodes)]
        args += ["--nproc_per_node", str(hw.gpus_per_node)]
        if hw.nodes > 1:
            args += ["--rdzv_id", "101", "--rdzv_backend", "c10d",
                     "--rdzv_endpoint", Expand("$MASTER_ADDR:29500")]
    return args + [name, "--config", CONFIG_FILE]


def torchtune_config(s: Scenario) -> tuple[dict, dict[str, str], list[str]]:
    """The config as a dict, comments for some of its keys, and the notes (what does not carry
    over); raises ExportError listing every field torchtune cannot express."""
    tr, par = s.training, s.parallel
    problems = []
    try:
        refuse_what_engine_cannot_run(s, ENGINE, TARGET)
    except ExportError as err:
        problems += err.problems
    problems += switch_problems(s, ENGINE)
    try:
        module, size, ckpt_dir, ckpt_files, model_type, tok, tok_path, _ = _builder(s)
    except ExportError as err:
        problems += err.problems
    if problems:
        raise ExportError(TARGET, problems)
    notes = Notes(s, ENGINE, TARGET)
    comments: dict[str, str] = {}
    name = recipe(s)
    full = tr.method == "full"

    cfg: dict = {"output_dir": f"/tmp/torchtune/{size}/{name}"}
    model: dict = {}
    if full:
        model["_component_"] = f"torchtune.models.{module}.{size}"
    else:
        lora = tr.lora
        prefix = "qlora" if tr.method == "qlora" else "lora"
        model["_component_"] = f"torchtune.models.{module}.{prefix}_{size}"
        model["lora_attn_modules"] = [ATTN[t] for t in ("q", "k", "v", "o") if t in lora.targets]
        model["apply_lora_to_mlp"] = any(t in lora.targets for t in MLP)
        model["apply_lora_to_output"] = False
        model["lora_rank"] = lora.rank
        model["lora_alpha"] = float(lora.alpha)
        model["lora_dropout"] = float(lora.dropout)
        if tr.method == "qlora" and not lora.double_quant:
            notes.add("training.lora.double_quant", False, "torchtune's NF4 (torchao "
                      "NF4Tensor) always quantises the block scales too; the base is a little "
                      "smaller than estimated")
    cfg["model"] = model
    cfg["tokenizer"] = {"_component_": tok, "path": ckpt_dir + tok_path,
                        "max_seq_len": tr.seq_len}
    cfg["checkpointer"] = {"_component_": "torchtune.training.FullModelHFCheckpointer",
                           "checkpoint_dir": ckpt_dir, "checkpoint_files": ckpt_files,
                           "recipe_checkpoint": None, "output_dir": "${output_dir}",
                           "model_type": model_type}
    cfg["resume_from_checkpoint"] = False
    if not full:
        cfg["save_adapter_weights_only"] = False
    cfg["dataset"] = {"_component_": "torchtune.datasets.alpaca_cleaned_dataset",
                      "packed": False}
    comments["dataset"] = "placeholder: your dataset (the scenario fixes none)"
    cfg["seed"] = None
    cfg["shuffle"] = True
    cfg["batch_size"] = tr.micro_batch
    comments["batch_size"] = "training.micro_batch, per GPU"

    opt = dict(OPTIMIZERS[tr.optimizer])
    opt["lr"] = LR[tr.method]
    if par.tp > 1 and opt.get("fused"):
        # full_finetune_distributed.py: "Tensor parallelism is currently incompatible with
        # fused optimizer."
        opt["fused"] = False
    cfg["optimizer"] = opt
    comments["optimizer"] = f"training.optimizer {tr.optimizer}; lr is a placeholder"
    cfg["lr_scheduler"] = {
        "_component_": "torchtune.training.lr_schedulers.get_cosine_schedule_with_warmup",
        "num_warmup_steps": 100}
    cfg["loss"] = {"_component_": "torchtune.modules.loss.CEWithChunkedOutputLoss"}
    cfg["epochs"] = 1
    cfg["max_steps_per_epoch"] = train_steps(s)
    comments["max_steps_per_epoch"] = "training.tokens / (global_batch x seq_len)"
    cfg["gradient_accumulation_steps"] = s.microbatches
    comments["gradient_accumulation_steps"] = (f"global_batch {tr.global_batch} / (micro_batch "
                                               f"{tr.micro_batch} x dp {par.dp})")
    cfg["clip_grad_norm"] = None
    cfg[spelling(ENGINE, "compile")] = tr.compile
    if full:
        cfg[spelling(ENGINE, "optimizer_in_backward")] = tr.optimizer_in_backward
    if name.endswith("distributed"):
        cfg[spelling(ENGINE, "offload")] = tr.offload == "cpu"
        if full:
            cfg[spelling(ENGINE, "tp")] = par.tp
            comments[spelling(ENGINE, "tp")] = f"data parallel (FSDP2) over the other {par.dp}"
            cfg["tensor_parallel_plan"] = {
                "_component_": "torchtune.models.llama3.base_llama_tp_plan"}
    cfg["metric_logger"] = {"_component_": "torchtune.training.metric_logging.DiskLogger",
                            "log_dir": "${output_dir}/logs"}
    cfg["log_every_n_steps"] = 1
    cfg["log_peak_memory_stats"] = True
    cfg["device"] = "cuda"
    cfg["dtype"] = "fp32" if tr.precision == "fp32" else "bf16"
    cfg[spelling(ENGINE, "recompute")] = tr.recompute == "full"
    cfg[spelling(ENGINE, "activation_offload")] = tr.activation_offload
    return cfg, comments, notes.items


def _scalar(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        # positional, so YAML 1.1 readers (PyYAML, OmegaConf) read a float, not "2e-05"
        text = f"{value:.10f}".rstrip("0")
        return text + "0" if text.endswith(".") else text
    return json.dumps(value)   # a JSON string is a YAML double-quoted scalar


def _render(cfg: dict, comments: dict[str, str], header: list[str]) -> str:
    out = [f"# {h}" if h else "#" for h in header]
    for key, value in cfg.items():
        note = f"  # {comments[key]}" if key in comments else ""
        if isinstance(value, dict):
            out.append("")
            out.append(f"{key}:{note}")
            for k, v in value.items():
                if isinstance(v, dict):
                    out.append(f"  {k}:")
                    out += [f"    {kk}: {_scalar(vv)}" for kk, vv in v.items()]
                elif isinstance(v, list):
                    out.append(f"  {k}: [{', '.join(_scalar(x) for x in v)}]")
                else:
                    out.append(f"  {k}: {_scalar(v)}")
        else:
            out.append(f"{key}: {_scalar(value)}{note}")
    return "\n".join(out) + "\n"


def to_torchtune(s: Scenario, source: Source = Source()) -> Exported:
    """The torchtune recipe config YAML (``source`` is unused: the config holds the run), with
    the ``tune run`` line and ``.warnings`` (also comments) for what does not carry over."""
    cfg, comments, notes = torchtune_config(s)
    run = " ".join(shell_word(a) for a in launch(s))
    header = [f"torchtune recipe config (YAML, torchtune {TAG}) for {model_label(s)}: "
              f"{s.training.method}",
              f"layout: {layout_summary(s)}",
              f"launch (this file saved as {CONFIG_FILE}"
              + (", once on every node" if s.hardware.nodes > 1 else "") + "):",
              f"  {run}",
              *(f"NOTE: {n}" for n in notes)]
    return Exported(_render(cfg, comments, header), notes)

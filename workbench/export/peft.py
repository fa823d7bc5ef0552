"""PEFT's ``LoraConfig`` (the ``adapter_config.json`` form) for a LoRA / QLoRA scenario on the
Hugging Face stack, and for QLoRA the ``BitsAndBytesConfig`` that loads the frozen base, as one
JSON object:

- ``"adapter_config"``: the keyword arguments of ``peft.LoraConfig`` (``LoraConfig(**...)``;
  written to ``adapter_config.json`` it loads with ``LoraConfig.from_pretrained``):
  ``peft_type`` LORA, ``task_type`` CAUSAL_LM, ``r``, ``lora_alpha``, ``lora_dropout``
  (``training.lora.dropout``), ``target_modules``, ``modules_to_save``, ``bias`` "none",
  ``fan_in_fan_out``, ``ensure_weight_tying``, ``base_model_name_or_path``;
- ``"quantization_config"`` (qlora only): the keyword arguments of transformers'
  ``BitsAndBytesConfig`` (``from_pretrained(..., quantization_config=BitsAndBytesConfig(**...))``):
  nf4 -> ``load_in_4bit``, ``bnb_4bit_quant_type`` nf4, ``bnb_4bit_use_double_quant``
  (training.lora.double_quant), ``bnb_4bit_compute_dtype`` (training.precision); int8 ->
  ``load_in_8bit``;
- ``"training_arguments"``: the Trainer's side of the run as transformers ``TrainingArguments``
  fields (``per_device_train_batch_size`` = micro_batch, ``gradient_accumulation_steps`` =
  global / (micro x dp), ``gradient_checkpointing`` = recompute full, ``optim`` (:data:`OPTIM`),
  ``bf16`` / ``fp16``, ``torch_compile``);
- ``"_comment"`` (when there is any): what does not carry over (a scenario estimated for
  another engine, TRL's activation offloading), also the :class:`Exported` result's warnings.

Module names: Transformers' Llama modeling (``models/llama/modeling_llama.py``: ``self_attn.
{q,k,v,o}_proj``, ``mlp.{gate,up,down}_proj``, ``embed_tokens``, ``lm_head``,
``input_layernorm``, ``post_attention_layernorm``, ``norm``; Mistral's are the same) for SwiGLU
models; GPT-2's (``models/gpt2/modeling_gpt2.py``: ``attn.c_attn`` = q, k and v in one Conv1D,
``attn.c_proj``, ``mlp.c_fc``, ``mlp.c_proj``, ``wte``, ``wpe``, ``ln_1``, ``ln_2``, ``ln_f``;
Conv1D stores its weight transposed, hence ``fan_in_fan_out``) for GELU models. PEFT matches a
``target_modules`` entry against the end of a module's name after a dot
(``peft/tuners/tuners_utils.py`` ``check_target_module_exists``) and a ``modules_to_save``
entry against the end of its name (``peft/utils/other.py`` ``_set_trainable``), so
``attn.c_proj`` and ``mlp.c_proj`` tell GPT-2's two ``c_proj`` apart. Fields checked with
peft 0.21.2 (``peft/tuners/lora/config.py``) and transformers 5 (``BitsAndBytesConfig``).

REFUSED (an :class:`ExportError` naming the field): training.method pretrain or full (PEFT
exports adapters), what the hf engine record says the stack cannot run (asked through the rule
table, recompute policies through the engine-switch rule), MoE models (their experts are fused parameters in Transformers 5, not per-expert
Linear modules ``target_modules`` can name), multi-head latent attention, and on GPT-2-style
models a part of q, k, v (one ``c_attn``).
"""
from __future__ import annotations

import json

from workbench.errors import Problem
from workbench.export.common import (
    Exported, ExportError, Notes, Source, preset_key, refuse_what_engine_cannot_run,
    switch_problems,
)
from workbench.scenario.types import Scenario

TARGET = "PEFT"
ENGINE = "hf"

# scenario projection -> Transformers module name
LLAMA = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj",
         "gate": "gate_proj", "up": "up_proj", "down": "down_proj"}
LLAMA_TRAINABLE = {"embeddings": ["embed_tokens"], "head": ["lm_head"],
                   "norms": ["input_layernorm", "post_attention_layernorm", "norm"]}
GPT2 = {"o": "attn.c_proj", "up": "mlp.c_fc", "down": "mlp.c_proj"}   # q, k, v: c_attn
GPT2_TRAINABLE = {"embeddings": ["wte", "wpe"], "head": ["lm_head"],
                  "norms": ["ln_1", "ln_2", "ln_f"]}

# unmodified presets -> the Hugging Face repository (the config.json each catalog entry cites)
HF_REPOS = {"llama3-8b": "meta-llama/Llama-3.1-8B", "llama3-70b": "meta-llama/Llama-3.1-70B",
            "llama3-405b": "meta-llama/Llama-3.1-405B", "llama3.2-1b": "meta-llama/Llama-3.2-1B",
            "mistral-7b": "mistralai/Mistral-7B-v0.1", "gpt2-small": "openai-community/gpt2"}

# training.optimizer -> TrainingArguments.optim (transformers OptimizerNames)
OPTIM = {"adamw": "adamw_torch_fused", "sgd": "sgd", "adamw8bit": "adamw_bnb_8bit",
         "paged_adamw8bit": "paged_adamw_8bit", "adamw4bit": "adamw_torch_4bit",
         "adafactor": "adafactor"}
COMPUTE_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def _modules(s: Scenario) -> tuple[list[str], list[str], bool, list[Problem]]:
    """target_modules, modules_to_save, fan_in_fan_out and the problems of the model."""
    m, lora = s.model, s.training.lora
    problems = []
    if m.moe is not None:
        problems.append(Problem("model.moe", f"{m.moe.experts} experts", (
            "the PEFT export covers dense models: a MoE model's experts are fused parameters "
            "in Transformers 5 (target_parameters), not Linear modules target_modules names")))
    if m.kv_lora_rank:
        problems.append(Problem("model.kv_lora_rank", m.kv_lora_rank, (
            "the PEFT export covers Llama- and GPT-2-style attention, not multi-head latent "
            "attention")))
    if m.mlp != "gelu":
        targets = [LLAMA[t] for t in LLAMA if t in lora.targets]
        save = [n for part in ("embeddings", "norms", "head") if part in lora.trainable
                for n in LLAMA_TRAINABLE[part]]
        return targets, save, False, problems
    qkv = [t for t in ("q", "k", "v") if t in lora.targets]
    if len(qkv) not in (0, 3):
        problems.append(Problem("training.lora.targets", list(lora.targets), (
            "a GPT-2-style model projects q, k and v in one module (attn.c_attn); name all "
            "three or none")))
    targets = (["c_attn"] if len(qkv) == 3 else []) + [GPT2[t] for t in GPT2
                                                        if t in lora.targets]
    save = [n for part in ("embeddings", "norms", "head") if part in lora.trainable
            for n in GPT2_TRAINABLE[part]]
    return targets, save, True, problems


def peft_config(s: Scenario) -> tuple[dict, list[str]]:
    """``{"adapter_config": ..., "quantization_config": ...}`` and the notes; raises
    ExportError listing every field the export cannot express."""
    tr = s.training
    problems: list[Problem] = []
    if not tr.adapters:
        raise ExportError(TARGET, [Problem("training.method", tr.method, (
            f"PEFT exports adapters: training.method is {tr.method}; use lora or qlora"))])
    try:
        refuse_what_engine_cannot_run(s, ENGINE, TARGET)
    except ExportError as err:
        problems += err.problems
    problems += switch_problems(s, ENGINE)
    targets, save, fan_in_fan_out, model_problems = _modules(s)
    problems += model_problems
    if problems:
        raise ExportError(TARGET, problems)

    lora = tr.lora
    adapter: dict = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": HF_REPOS.get(preset_key(s) or ""),
        "r": lora.rank,
        "lora_alpha": lora.alpha,
        "lora_dropout": lora.dropout,
        "target_modules": targets,
        "modules_to_save": save or None,
        "bias": "none",
        "fan_in_fan_out": fan_in_fan_out,
    }
    if s.model.tied_embeddings and {"embeddings", "head"} & set(lora.trainable):
        # the trained copy of a tied table stays tied to its twin
        adapter["ensure_weight_tying"] = True
    out: dict = {"adapter_config": adapter}
    if tr.method == "qlora":
        if lora.quant == "nf4":
            out["quantization_config"] = {
                "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
                "bnb_4bit_use_double_quant": lora.double_quant,
                "bnb_4bit_compute_dtype": COMPUTE_DTYPE.get(tr.precision, "bfloat16")}
        else:
            out["quantization_config"] = {"load_in_8bit": True}

    # the Trainer's side of the run (transformers TrainingArguments field names)
    args: dict = {"per_device_train_batch_size": tr.micro_batch,
                  "gradient_accumulation_steps": s.microbatches,
                  "gradient_checkpointing": tr.recompute == "full",
                  "optim": OPTIM[tr.optimizer],
                  "bf16": tr.precision == "bf16", "fp16": tr.precision == "fp16",
                  "torch_compile": tr.compile}
    out["training_arguments"] = args
    n = Notes(s, ENGINE, TARGET)
    if tr.activation_offload:
        n.add("training.activation_offload", True, "not a TrainingArguments field: TRL's "
              "SFTConfig(activation_offloading=True)")
    return out, n.items


def to_peft(s: Scenario, source: Source = Source()) -> Exported:
    """The JSON text (``source`` is unused), notes under ``"_comment"`` and as ``.warnings``."""
    out, notes = peft_config(s)
    if notes:
        out = {"_comment": notes, **out}
    return Exported(json.dumps(out, indent=2) + "\n", notes)

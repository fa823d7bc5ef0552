"""Transformers ``TrainingArguments`` or TRL ``SFTConfig`` (with TRL's ``ModelConfig`` keys, as
SFT recipes carry them), given as YAML or JSON, read into a scenario.

Defaults (each one the reader fills is listed as defaulted):
- transformers 5.25 ``training_args.py``: per_device_train_batch_size 8,
  gradient_accumulation_steps 1, bf16 and fp16 false, activation_checkpointing false (the old
  name gradient_checkpointing is its alias), optim adamw_torch_fused (torch >= 2.8),
  torch_compile false, use_liger_kernel false, max_steps -1; ``_process_fsdp_args``:
  fsdp_config version 2, reshard_after_forward true (FSDP2) / full_shard (FSDP1);
- TRL (github.com/huggingface/trl @ f2cd577) ``trl/trainer/base_config.py``: bf16 true unless
  fp16, gradient_checkpointing true; ``sft_config.py``: max_length 1024, packing false,
  activation_offloading false; ``model_config.py``: use_peft false, lora_r 16, lora_alpha 32,
  load_in_4bit / load_in_8bit false, bnb_4bit_quant_type nf4, use_bnb_nested_quant false.
A file with any TRL-only key is read as an SFTConfig (TRL's defaults), else as
TrainingArguments.
"""
from __future__ import annotations

import re
from typing import Any

from workbench.imports import deepspeed as ds_reader
from workbench.imports.accelerate import ASK_FOR_DEEPSPEED
from workbench.imports.common import Collector, read_table
from workbench.imports.hf_model import model_for_id
from workbench.imports.training_keys import IGNORED, TRAINING_ARGUMENTS, TRL_ONLY
from workbench.imports.types import Reading

FORMAT = "training_args"
KNOWN = frozenset(TRAINING_ARGUMENTS + TRL_ONLY + IGNORED)

# transformers OptimizerNames -> training.optimizer (the inverse of workbench/export/peft.py OPTIM)
OPTIM = {"adamw_torch": "adamw", "adamw_torch_fused": "adamw", "sgd": "sgd",
         "adamw_bnb_8bit": "adamw8bit", "adamw_8bit": "adamw8bit",
         "paged_adamw_8bit": "paged_adamw8bit", "adamw_torch_4bit": "adamw4bit",
         "adafactor": "adafactor"}
# transformers trainer_utils.py FSDPOption (sharding strategies) -> ZeRO stage
FSDP_STRATEGY = {"full_shard": 3, "shard_grad_op": 2, "no_shard": 0, "hybrid_shard": 3,
                 "hybrid_shard_zero2": 2}
# peft LoRA target module names (Llama-style) -> training.lora.targets
PROJ = {"q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o", "gate_proj": "gate",
        "up_proj": "up", "down_proj": "down"}
SAVED = {"embed_tokens": "embeddings", "lm_head": "head"}

_LOOKS = re.compile(r'(?:^|[{,])\s*"?(per_device_train_batch_size|output_dir|'
                    r'gradient_checkpointing|activation_checkpointing|model_name_or_path|'
                    r'learning_rate|num_train_epochs|max_length|max_seq_length|use_liger_kernel|'
                    r'optim|lora_r|use_peft|fsdp|deepspeed|bf16|fp16|torch_compile)"?\s*:',
                    re.MULTILINE)


def looks_like(name: str, text: str) -> bool:
    """The file sets a TrainingArguments / SFTConfig / ModelConfig argument at its top level."""
    return bool(_LOOKS.search(text))


def read(name: str, text: str) -> Reading:
    """The arguments read into a Reading (batch, precision, recompute, optimizer, switches,
    sequence length, FSDP / DeepSpeed back end, LoRA, model id)."""
    args, c = read_table(name, text, FORMAT, KNOWN, "TrainingArguments (transformers 5.25), "
                         "SFTConfig or ModelConfig (TRL)")
    trl = any(k in TRL_ONLY for k in args)
    lib = "TRL SFTConfig" if trl else "TrainingArguments"
    c.note(f"read as {lib}" + (" (it has TRL keys)" if trl else ""))
    ignored = [k for k in args if k in IGNORED]
    if ignored:
        c.note("ignored (no effect on memory or step time): " + ", ".join(ignored))
    if trl and args.get("loss_type", "chunked_nll") == "chunked_nll" and not args.get(
            "use_liger_kernel"):
        # TRL sft_config.py: loss_type defaults to "chunked_nll" (256-token checkpointed
        # chunks of the head and loss); the hf record counts the Trainer's loss
        # (docs/hf-stack.md "Not modelled yet")
        c.note("loss_type chunked_nll (TRL's default) never holds the whole logits; the "
               "estimate counts the Trainer's fp32 logits and their gradient, an over-estimate "
               "of about 12 bytes per token per vocabulary entry; set loss_type: nll to match")
    c.state("training.engine", "hf")
    _int(c, args, "per_device_train_batch_size", "training.micro_batch", 8, lib)
    _int(c, args, "gradient_accumulation_steps", "training.grad_accum", 1, lib)
    if args.get("max_steps") not in (None, -1):
        steps = c.integer("max_steps", args["max_steps"])
        if steps is not None:
            c.state("training.steps", steps)
    _precision(c, args, trl, lib)
    _recompute(c, args, trl, lib)
    _optim(c, args)
    _flags(c, args, trl)
    _fsdp(c, args)
    _deepspeed(c, args)
    _lora(c, args)
    if args.get("model_name_or_path"):
        model_for_id(c, "model_name_or_path", args["model_name_or_path"])
    return c.reading


def _int(c: Collector, args: dict, key: str, path: str, default: int, lib: str) -> None:
    if key in args:
        v = c.integer(key, args[key])
        if v is not None:
            c.state(path, v)
    else:
        c.default(path, default, f"{lib}: {key} defaults to {default}")


def _precision(c: Collector, args: dict, trl: bool, lib: str) -> None:
    bf16 = c.boolean("bf16", args["bf16"]) if args.get("bf16") is not None else None
    fp16 = c.boolean("fp16", args.get("fp16", False))
    if bf16 and fp16:
        c.problem("bf16", True, "expected only one of bf16 and fp16 to be true")
    elif bf16 or fp16:
        c.state("training.precision", "bf16" if bf16 else "fp16")
    elif bf16 is None and trl and not fp16:
        c.default("training.precision", "bf16", "TRL: bf16 defaults to true unless fp16 "
                  "(trl/trainer/base_config.py)")
    elif "bf16" in args or "fp16" in args:
        c.state("training.precision", "fp32")
    else:
        c.default("training.precision", "fp32", f"{lib}: bf16 and fp16 default to false")


def _recompute(c: Collector, args: dict, trl: bool, lib: str) -> None:
    # training_args.py __post_init__: activation_checkpointing, else its old alias
    key = "activation_checkpointing" if args.get("activation_checkpointing") is not None \
        else "gradient_checkpointing"
    kw_key = key + "_kwargs"
    if args.get(key) is None:
        on = trl     # TRL base_config.py: gradient_checkpointing defaults to true
        c.default("training.recompute", "full" if on else "none",
                  f"{lib}: gradient_checkpointing defaults to {str(on).lower()}")
    else:
        on = c.boolean(key, args[key])
        if on is None:
            return
        if on:
            c.state("training.recompute", "full")
        else:   # off here, yet FSDP's own activation_checkpointing (an Accelerate config's
            # fsdp_activation_checkpointing) may still checkpoint every layer: not a contradiction
            c.default("training.recompute", "none", f"{key} false: no checkpointing unless "
                      "the FSDP config's activation_checkpointing turns it on")
    kw = args.get(kw_key) or {}
    if not isinstance(kw, dict):
        c.problem(kw_key, kw, "expected a table such as {every_n_layers: 2}")
        return
    if on and kw.get("every_n_layers") not in (None, 1):
        n = c.integer(f"{kw_key}.every_n_layers", kw["every_n_layers"])
        if n is not None:   # only every n-th decoder layer is checkpointed
            c.state("training.recompute", "layer")
            c.state("training.recompute_every", n)
    if on and kw.get("offload") is not None and c.boolean(f"{kw_key}.offload", kw["offload"]):
        c.state("training.activation_offload", True)
    if on and args.get("fsdp"):
        c.note(f"{key} with FSDP: Transformers warns of a redundant all-gather in backward; "
               "fsdp_config activation_checkpointing avoids it (training_args.py "
               "_process_fsdp_args)")


def _optim(c: Collector, args: dict) -> None:
    if "optim" not in args:
        c.default("training.optimizer", "adamw", "TrainingArguments: optim defaults to "
                  "adamw_torch_fused")
        return
    v = c.choice("optim", args["optim"], OPTIM)
    if v is not None:
        c.state("training.optimizer", v)


def _flags(c: Collector, args: dict, trl: bool) -> None:
    compiled = args.get("torch_compile") or args.get("torch_compile_backend") or \
        args.get("torch_compile_mode")    # a backend or mode turns torch_compile on
    if compiled is not None and "torch_compile" in args:
        compiled = c.boolean("torch_compile", args["torch_compile"]) or bool(
            args.get("torch_compile_backend") or args.get("torch_compile_mode"))
    if "torch_compile" in args or compiled:
        c.state("training.compile", bool(compiled))
    if "use_liger_kernel" in args:
        v = c.boolean("use_liger_kernel", args["use_liger_kernel"])
        if v is not None:
            c.state("training.liger", v)
    if args.get("activation_offloading") is not None:
        v = c.boolean("activation_offloading", args["activation_offloading"])
        if v is not None:
            c.state("training.activation_offload", v)
    key = "max_length" if "max_length" in args else "max_seq_length"
    if key in args and args[key] is not None:
        v = c.integer(key, args[key])
        if v is not None:
            c.state("training.seq_len", v)
        if key == "max_seq_length":
            c.note("max_seq_length: TRL's name before max_length (TRL #2947)")
    elif trl:
        c.default("training.seq_len", 1024, "TRL SFTConfig: max_length defaults to 1024")
    if trl:
        packing = args.get("packing", False)
        c.note("packing: sequences are packed to max_length, so seq_len is every sequence's "
               "length" if packing else "no packing: seq_len is the longest sequence; shorter "
               "ones are padded to the longest in their batch")


def _fsdp(c: Collector, args: dict) -> None:
    fsdp = args.get("fsdp")
    if not fsdp:
        return
    cfg = args.get("fsdp_config") or {}
    if isinstance(cfg, str):
        c.note(f"fsdp_config {cfg}: a file path; its keys are not read (pass them inline)")
        cfg = {}
    if not isinstance(cfg, dict):
        c.problem("fsdp_config", cfg, "expected a table")
        return
    cfg = {(k[5:] if str(k).startswith("fsdp_") else k): v for k, v in cfg.items()}
    version = c.choice("fsdp_config.version", cfg.get("version", 2), {"1": 1, "2": 2})
    if version is None:
        return
    c.state("training.backend", f"fsdp{version}")
    items = fsdp.split() if isinstance(fsdp, str) else list(fsdp) if isinstance(fsdp, list) \
        else []
    zero = 3
    for item in items:
        item = str(item).lower()
        if item in FSDP_STRATEGY:
            zero = FSDP_STRATEGY[item]
            if version == 2 and zero not in (2, 3):
                c.problem("fsdp", item, "is FSDP1's; with fsdp_config version 2 use full_shard "
                                        "or shard_grad_op")
            if item.startswith("hybrid"):
                c.note(f"fsdp {item}: shards within a node; set parallel.shard_group to the "
                       "GPUs per node")
        elif item == "offload":
            c.state("training.offload", "cpu")
        elif item != "auto_wrap":
            c.problem("fsdp", item, "expected full_shard, shard_grad_op, no_shard, "
                      "hybrid_shard, hybrid_shard_zero2, offload or auto_wrap")
    raf = cfg.get("reshard_after_forward")
    if version == 2:
        # FSDP2 reshard_after_forward false is ZeRO-2's memory (as in the Accelerate reader);
        # _apply_legacy_fsdp_to_config turns shard_grad_op into it
        v = c.boolean("fsdp_config.reshard_after_forward", raf) if raf is not None else None
        c.state("parallel.zero", 2 if v is False or (v is None and zero == 2) else 3)
    else:
        if raf is not None:
            zero = c.choice("fsdp_config.reshard_after_forward", raf, FSDP_STRATEGY)
        if zero is not None:
            c.state("parallel.zero", zero)
    if cfg.get("cpu_offload") and c.boolean("fsdp_config.cpu_offload", cfg["cpu_offload"]):
        c.state("training.offload", "cpu")
    if cfg.get("activation_checkpointing") and c.boolean(
            "fsdp_config.activation_checkpointing", cfg["activation_checkpointing"]):
        c.state("training.recompute", "full")


def _deepspeed(c: Collector, args: dict) -> None:
    ds: Any = args.get("deepspeed")
    if not ds:
        return
    c.state("training.backend", "deepspeed")
    if isinstance(ds, str):
        c.note(f"deepspeed {ds}: the ZeRO stage, offload and batch come from that DeepSpeed "
               f"JSON; {ASK_FOR_DEEPSPEED}")
        return
    if not isinstance(ds, dict):
        c.problem("deepspeed", ds, "expected a path to a DeepSpeed JSON or its table")
        return
    import json

    inner = ds_reader.read(f"{c.name}:deepspeed", json.dumps(ds))
    r = c.reading
    for path, why in inner.defaulted.items():
        if path not in ("training.engine",):
            r.defaulted.setdefault(path, why)
    _merge_into(r.document, inner.document, r.defaulted, inner.defaulted)
    r.problems += inner.problems
    r.notes += inner.notes


def _merge_into(doc: dict, inner: dict, defaulted: dict, inner_defaulted: dict,
                prefix: str = "") -> None:
    """The inline DeepSpeed table's values where the arguments said nothing (the Trainer
    fills the table's "auto" from the arguments)."""
    for k, v in inner.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict) and path != "model":
            _merge_into(doc.setdefault(k, {}), v, defaulted, inner_defaulted, path + ".")
        elif path == "training.engine":
            continue
        elif k not in doc or (path in defaulted and path not in inner_defaulted):
            doc[k] = v
            if path not in inner_defaulted:
                defaulted.pop(path, None)


def _lora(c: Collector, args: dict) -> None:
    four = c.boolean("load_in_4bit", args.get("load_in_4bit", False))
    eight = c.boolean("load_in_8bit", args.get("load_in_8bit", False))
    peft = c.boolean("use_peft", args.get("use_peft", False))
    if not (peft or four or eight):
        if any(k.startswith("lora_") for k in args):
            c.note("lora_* keys without use_peft: true are not used (TRL ModelConfig)")
        # no adapters: the Trainer trains every weight of the model it loads, a full
        # fine-tune of a published checkpoint (an SFT recipe is no pre-training)
        if args.get("model_name_or_path"):
            c.state("training.method", "full")
        else:
            c.default("training.method", "full", "Trainer / SFTTrainer: every weight of the "
                      "model it is given trains; a fine-tune of a loaded checkpoint (set "
                      "training.method pretrain for a model trained from scratch)")
        return
    if four and eight:
        c.problem("load_in_4bit", True, "expected only one of load_in_4bit and load_in_8bit "
                                        "(TRL ModelConfig refuses both)")
        return
    method = "qlora" if (four or eight) else "lora"
    c.state("training.method", method)
    lora: dict = {}
    for key, field, dflt in (("lora_r", "rank", 16), ("lora_alpha", "alpha", 32)):
        if key in args:
            v = c.integer(key, args[key])
            if v is not None:
                lora[field] = v
        else:
            lora[field] = dflt
            c.reading.defaulted[f"training.lora.{field}"] = f"TRL ModelConfig: {key} " \
                                                            f"defaults to {dflt}"
    # TRL ModelConfig lora_dropout defaults to 0.05
    # (huggingface/trl@040e32d68f430e201a6333b07758295df4157e14 trl/trainer/model_config.py)
    if "lora_dropout" in args:
        v = c.number("lora_dropout", args["lora_dropout"])
        if v is not None:
            lora["dropout"] = v
    else:
        lora["dropout"] = 0.05
        c.reading.defaulted["training.lora.dropout"] = "TRL ModelConfig: lora_dropout " \
                                                       "defaults to 0.05"
    targets = args.get("lora_target_modules")
    if targets is not None:
        t = _targets(c, targets)
        if t is not None:
            lora["targets"] = t
    else:   # peft 0.21 utils/constants.py TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING
        lora["targets"] = ["q", "v"]     # llama, mistral, mixtral, gemma, qwen2, qwen3
        c.reading.defaulted["training.lora.targets"] = (
            "PEFT: lora_target_modules unset takes the model type's default, q_proj and v_proj "
            "for Llama-style models")
    saved = args.get("lora_modules_to_save") or []
    if saved:
        names = [SAVED.get(str(s)) for s in (saved if isinstance(saved, list) else [saved])]
        if None in names:
            c.problem("lora_modules_to_save", saved, "expected embed_tokens and/or lm_head")
        else:
            lora["trainable"] = names
    if method == "qlora":
        lora["quant"] = "nf4" if four else "int8"
        if four and str(args.get("bnb_4bit_quant_type", "nf4")).lower() != "nf4":
            c.problem("bnb_4bit_quant_type", args["bnb_4bit_quant_type"],
                      "expected nf4 (the workbench models NF4 and int8 bases)")
        if four:
            nested = c.boolean("use_bnb_nested_quant", args.get("use_bnb_nested_quant", False))
            lora["double_quant"] = bool(nested)
            if "use_bnb_nested_quant" not in args:
                c.reading.defaulted["training.lora.double_quant"] = (
                    "TRL ModelConfig: use_bnb_nested_quant defaults to false")
    c.state("training.lora", lora)


def _targets(c: Collector, targets: Any) -> Any:
    if isinstance(targets, str):
        if targets.strip().lower() == "all-linear":
            return "all-linear"
        targets = [targets]
    if not isinstance(targets, list):
        c.problem("lora_target_modules", targets, "expected all-linear or a list of projections")
        return None
    out = [PROJ.get(str(t)) for t in targets]
    if None in out:
        c.problem("lora_target_modules", targets, "expected all-linear or names from "
                  + ", ".join(PROJ))
        return None
    return out

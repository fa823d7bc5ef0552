"""A torchtune recipe config (YAML) read into scenario keys: the files ``workbench export --to
torchtune`` writes and torchtune's own ``recipes/configs`` (e.g. llama3_1/8B_lora_single_device).

Keys and what the recipes do with them: pytorch/torchtune v0.6.1 (commit
a6290a5b40758f13bca61c386bc8756a49ef417e) ``recipes/{full,lora}_finetune_{single_device,
distributed}.py``; the model builders' names ``torchtune/models/*/_model_builders.py``; the
inverse of :mod:`workbench.export.torchtune` (its BUILDERS, OPTIMIZERS, ATTN tables are read
from there, once). The launch, when the file states it (our export's header, the upstream
configs' usage comment ``tune run --nproc_per_node N RECIPE --config ...``), gives the GPUs and
the recipe: a distributed recipe shards with FSDP2 (zero 3), a single-device one runs on one
GPU.

Key families: model, tokenizer.max_seq_len, batch and accumulation, optimizer component,
dtype, recompute/offload switches, compile, FSDP CPU offload, tensor parallelism and run
length are read; :data:`NO_EFFECT` keys (paths, data set, logging, checkpointing, seeds,
learning-rate schedule) are listed as ignored; any other key is a problem line.
"""
from __future__ import annotations

import re

from workbench.errors import Problem
from workbench.export.torchtune import ATTN, BUILDERS, MLP, OPTIMIZERS
from workbench.imports.common import decimal_count
from workbench.imports.torchtitan import put
from workbench.imports.types import Reading
from workbench.documents.text import load_text

FORMAT = "torchtune"
NO_EFFECT = {"output_dir", "checkpointer", "resume_from_checkpoint", "save_adapter_weights_only",
             "dataset", "seed", "shuffle", "lr_scheduler", "metric_logger", "log_every_n_steps",
             "log_peak_memory_stats", "log_level", "device", "profiler", "clip_grad_norm",
             "tensor_parallel_plan", "custom_sharded_layers", "low_cpu_ram",
             "run_val_every_n_steps", "dataset_val", "batch_size_val", "cudnn_deterministic_mode"}
READ = {"model", "tokenizer", "batch_size", "gradient_accumulation_steps", "optimizer",
        "optimizer_in_bwd", "dtype", "enable_activation_checkpointing",
        "enable_activation_offloading", "compile", "fsdp_cpu_offload", "tensor_parallel_dim",
        "epochs", "max_steps_per_epoch", "loss"}
# builder size (e.g. llama3_1_8b) -> preset: the exporter's builders, and torchtune's builders
# of the published checkpoints in the catalog (pytorch/torchtune v0.6.1 torchtune/models/*/
# __init__.py; qwen3 and llama4 at main @bd2a0fc7); base and instruct builders share a shape
PRESETS = {spec[1]: key for key, spec in BUILDERS.items()}
PRESETS.update({
    "llama3_2_3b": "llama3.2-3b", "llama3_3_70b": "llama3.3-70b",
    "qwen2_5_0_5b": "qwen2.5-0.5b", "qwen2_5_3b": "qwen2.5-3b",
    **{f"qwen2_5_{size}_{kind}": f"qwen2.5-{size.replace('_', '.')}"
       for size in ("1_5b", "7b", "14b", "32b", "72b") for kind in ("base", "instruct")},
    **{f"qwen3_{size}_{kind}": f"qwen3-{size.replace('_', '.')}"
       for size in ("0_6b", "1_7b", "4b", "8b", "14b") for kind in ("base", "instruct")},
    "qwen3_32b": "qwen3-32b",
    "gemma2_2b": "gemma2-2b", "gemma2_9b": "gemma2-9b", "gemma2_27b": "gemma2-27b",
    "phi3_mini": "phi-3-mini", "phi4_14b": "phi-4",
    "llama4_scout_17b_16e": "llama4-scout-17b-16e",
})
# optimizer component -> training.optimizer
OPTIMIZER = {spec["_component_"]: key for key, spec in OPTIMIZERS.items()}
OPTIMIZER["torch.optim.AdamW"] = "adamw"
_LAUNCH = re.compile(r"tune run(?P<args>[^\n]*?)\s(?P<recipe>(?:full|lora)_finetune_"
                     r"(?:single_device|distributed))")


def looks_like(name: str, text: str) -> bool:
    """A YAML naming torchtune components."""
    return "torchtune." in text and "_component_" in text


def read(name: str, text: str) -> Reading:
    """The recipe config read into a :class:`Reading`."""
    cfg = load_text(text, name)
    r = Reading(source=name, format=FORMAT)
    if not isinstance(cfg, dict):
        r.problems.append(Problem(f"{name}", None, "expected a YAML table of recipe keys"))
        return r
    put(r.document, "training.engine", "torchtune")
    ignored = sorted(k for k in cfg if k in NO_EFFECT)
    if ignored:
        r.notes.append("ignored (no effect on memory or step time): " + ", ".join(ignored))
    for key in cfg:
        if key not in READ and key not in NO_EFFECT:
            r.problems.append(Problem(f"{name}:{key}", cfg[key], "not a torchtune recipe key "
                                      "the workbench reads"))
    _model(r, cfg.get("model"))
    _launch(r, text)
    _training(r, cfg)
    return r


def _model(r: Reading, model: object) -> None:
    comp = model.get("_component_", "") if isinstance(model, dict) else ""
    m = re.fullmatch(r"torchtune\.models\.\w+\.(?:(q?lora)_)?(\w+)", str(comp))
    if not m:
        r.problems.append(Problem(f"{r.source}:model._component_", comp or None,
                                  "expected a torchtune.models builder"))
        return
    kind, size = m.group(1), m.group(2)
    put(r.document, "training.method", kind or "full")
    if size in PRESETS:
        put(r.document, "model.preset", PRESETS[size])
    else:   # never another model in its place: its shape is asked for
        r.problems.append(Problem(f"{r.source}:model._component_", comp,
                                  "is not in the workbench's model catalog: pass the model's "
                                  "config.json beside this file (workbench import config.json "
                                  f"{r.source})"))
    if not kind:
        return
    attn = model.get("lora_attn_modules", [])
    if not isinstance(attn, list):
        r.problems.append(Problem(f"{r.source}:model.lora_attn_modules", attn, "expected a list"))
        attn = []
    inverse = {v: k for k, v in ATTN.items()}
    targets = [inverse[a] for a in attn if isinstance(a, str) and a in inverse]
    for a in attn:
        if not isinstance(a, str) or a not in inverse:
            r.problems.append(Problem(f"{r.source}:model.lora_attn_modules", a,
                                      "expected " + ", ".join(inverse)))
    if model.get("apply_lora_to_mlp"):
        targets += list(MLP)
    lora = {"targets": targets}
    if "lora_rank" in model:
        lora["rank"] = model["lora_rank"]
    if "lora_alpha" in model:
        lora["alpha"] = model["lora_alpha"]
    if "lora_dropout" in model:   # torchtune's builders default to 0.0
        lora["dropout"] = model["lora_dropout"]
    if kind == "qlora":
        lora["quant"] = "nf4"   # torchtune's QLoRA base is torchao NF4
    put(r.document, "training.lora", lora)
    if model.get("apply_lora_to_output"):
        r.problems.append(Problem(f"{r.source}:model.apply_lora_to_output", True,
                                  "the workbench has no adapter on the output projection"))


def _launch(r: Reading, text: str) -> None:
    """GPUs and the recipe from a ``tune run`` line in the file's comments."""
    m = _LAUNCH.search(text)
    if not m:
        r.notes.append("no tune run line: the GPUs come from the hardware given beside")
        return
    args = m.group("args").split()
    def arg(flag: str) -> int | None:
        for i, w in enumerate(args[:-1]):
            if w == flag and decimal_count(args[i + 1]) is not None:
                return decimal_count(args[i + 1])
        return None
    per_node, nodes = arg("--nproc_per_node"), arg("--nnodes") or 1
    distributed = m.group("recipe").endswith("distributed")
    if not distributed:
        per_node = 1
    if per_node:
        put(r.document, "hardware.gpus_per_node", per_node)
        put(r.document, "hardware.nodes", nodes)
    # distributed recipes shard with FSDP2 over every GPU (zero 3); single device: one GPU
    put(r.document, "parallel.zero", 3 if distributed else 0)
    r.document["_world"] = (per_node or 0) * nodes


def _table(r: Reading, cfg: dict, key: str) -> dict:
    """The recipe's ``key`` table ({} when absent or null; a problem when it is not a table)."""
    value = cfg.get(key)
    if value is not None and not isinstance(value, dict):
        r.problems.append(Problem(f"{r.source}:{key}", value, "expected a table"))
    return value if isinstance(value, dict) else {}


def _training(r: Reading, cfg: dict) -> None:
    world = r.document.pop("_world", 0)
    tp = cfg.get("tensor_parallel_dim", 1)
    if isinstance(tp, int) and tp > 1:
        put(r.document, "parallel.tp", tp)
    if world and isinstance(tp, int) and tp >= 1 and world % tp == 0:
        put(r.document, "parallel.dp", world // tp)
    micro = cfg.get("batch_size")
    ga = cfg.get("gradient_accumulation_steps", 1)
    if "gradient_accumulation_steps" not in cfg:
        r.defaulted["training.global_batch"] = "torchtune recipes default to no accumulation"
    if isinstance(micro, int):
        put(r.document, "training.micro_batch", micro)
        dp = r.document.get("parallel", {}).get("dp")
        if dp and isinstance(ga, int):
            put(r.document, "training.global_batch", micro * ga * dp)
    seq = _table(r, cfg, "tokenizer").get("max_seq_len")
    if isinstance(seq, int):
        put(r.document, "training.seq_len", seq)
    else:
        r.notes.append("tokenizer.max_seq_len is null: sequences keep their length; give "
                       "training.seq_len")
    dtype = cfg.get("dtype", "bf16")
    if dtype in ("bf16", "fp32"):
        put(r.document, "training.precision", dtype)
    else:
        r.problems.append(Problem(f"{r.source}:dtype", dtype, "expected bf16 or fp32"))
    put(r.document, "training.recompute",
        "full" if cfg.get("enable_activation_checkpointing") else "none")
    for key, path in (("enable_activation_offloading", "training.activation_offload"),
                      ("compile", "training.compile"),
                      ("optimizer_in_bwd", "training.optimizer_in_backward")):
        if key in cfg:
            put(r.document, path, bool(cfg[key]))
    if cfg.get("fsdp_cpu_offload"):
        put(r.document, "training.offload", "cpu")
    comp = _table(r, cfg, "optimizer").get("_component_")
    if isinstance(comp, str) and comp in OPTIMIZER:
        put(r.document, "training.optimizer", OPTIMIZER[comp])
    else:
        r.problems.append(Problem(f"{r.source}:optimizer._component_", comp,
                                  "expected one of " + ", ".join(OPTIMIZER)))
    loss = (cfg.get("loss") or {}).get("_component_") if isinstance(cfg.get("loss"), dict) else None
    if loss:
        # CEWithChunkedOutputLoss upcasts the logits chunk by chunk (torchtune/modules/loss)
        r.notes.append(f"loss {loss}: the engine torchtune record's loss model applies")
    steps, epochs = cfg.get("max_steps_per_epoch"), cfg.get("epochs", 1)
    gb, seqlen = r.document.get("training", {}).get("global_batch"), seq
    if all(isinstance(v, int) and v > 0 for v in (steps, epochs, gb, seqlen)):
        put(r.document, "training.tokens", float(steps * epochs * gb * seqlen))

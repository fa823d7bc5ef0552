"""A DeepSpeed config JSON read into a scenario, its ``"auto"`` values resolved as the Hugging
Face Trainer resolves them.

Sources:
- keys and DeepSpeed's own defaults: deepspeed 0.19.8 ``runtime/config.py``
  (``DeepSpeedConfig._initialize_params``, the batch identity ``train_batch_size =
  train_micro_batch_size_per_gpu x gradient_accumulation_steps x data-parallel world``),
  ``runtime/zero/config.py`` (``stage`` defaults to 0), ``runtime/zero/offload_config.py``
  (offload ``device`` none | cpu | nvme); https://www.deepspeed.ai/docs/config-json/ ;
- ``"auto"``: transformers 5.25 ``integrations/deepspeed.py``
  ``HfTrainerDeepSpeedConfig.trainer_config_process``: ``train_micro_batch_size_per_gpu`` <-
  ``per_device_train_batch_size``, ``gradient_accumulation_steps`` <- the same argument,
  ``train_batch_size`` <- world x micro x accumulation, ``fp16.enabled`` / ``bf16.enabled`` <-
  ``fp16`` / ``bf16``; the TrainingArguments defaults (``training_args.py``:
  per_device_train_batch_size 8, gradient_accumulation_steps 1, bf16 and fp16 false) stand in
  where no TrainingArguments file is given, each listed as defaulted.

A JSON with ``"auto"`` values is only complete inside the Trainer, so it imports as
``engine: hf`` with ``backend: deepspeed``; one without is DeepSpeed driving the model itself
(``engine: deepspeed``, as the workbench's own DeepSpeed export), unless another file says hf.
"""
from __future__ import annotations

import re
from typing import Any

from workbench.imports.common import Collector, read_table
from workbench.imports.types import Reading

FORMAT = "deepspeed"
_WHAT = "a DeepSpeed config (https://www.deepspeed.ai/docs/config-json/)"

# deepspeed 0.19.8 runtime/config.py (and the sections it hands to its sub-configs), with the
# keys of https://www.deepspeed.ai/docs/config-json/ ; "_comment" is the workbench export's
TOP_KEYS = (
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
    "optimizer", "scheduler", "communication_data_type", "seq_parallel_communication_data_type",
    "prescale_gradients", "gradient_predivide_factor", "sparse_gradients", "fp16", "bf16",
    "amp", "torch_autocast", "gradient_clipping", "zero_optimization",
    "zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer", "activation_checkpointing",
    "aio", "steps_per_print", "wall_clock_breakdown", "dump_state", "flops_profiler",
    "comms_logger", "tensorboard", "wandb", "csv_monitor", "comet", "elasticity", "autotuning",
    "data_efficiency", "curriculum_learning", "compression_training", "checkpoint",
    "data_types", "memory_breakdown", "sparse_attention", "pipeline", "eigenvalue",
    "progressive_layer_drop", "quantize_training", "nebula", "compile", "disable_allgather",
    "dataloader_drop_last", "use_data_before_expert_parallelism", "graph_harvesting", "timers",
    "weight_quantization", "hybrid_engine", "tensor_parallel", "gradient_allreduce_op",
    "legacy_fusion", "disable_python_gc", "_comment")
# runtime/zero/offload_config.py OffloadDeviceEnum
OFFLOAD = {"none": "none", "cpu": "cpu", "nvme": "nvme"}
# runtime/config.py optimizer names the workbench models: Adam/AdamW (FusedAdam, or
# DeepSpeedCPUAdam with offload) and SGD (torch.optim by name, engine.py
# _configure_basic_optimizer)
OPTIMIZERS = {"adam": "adamw", "adamw": "adamw", "sgd": "sgd"}

# transformers 5.25 training_args.py defaults the Trainer fills "auto" with
TA_MICRO = 8
TA_ACCUM = 1

_LOOKS = re.compile(r'(?<![A-Za-z0-9_])"?(zero_optimization|train_micro_batch_size_per_gpu|'
                    r'train_batch_size)"?\s*:')


def looks_like(name: str, text: str) -> bool:
    """A DeepSpeed config has a ZeRO section or DeepSpeed's batch keys."""
    return bool(_LOOKS.search(text))


def _is_auto(v: Any) -> bool:
    return isinstance(v, str) and v.strip().lower() == "auto"


def _any_auto(v: Any) -> bool:
    if isinstance(v, dict):
        return any(_any_auto(x) for x in v.values())
    if isinstance(v, list):
        return any(_any_auto(x) for x in v)
    return _is_auto(v)


def read(name: str, text: str) -> Reading:
    """The JSON read into a Reading: ZeRO stage, offload, batch, precision, optimizer."""
    cfg, c = read_table(name, text, FORMAT, TOP_KEYS, _WHAT)
    auto = _any_auto(cfg)
    if auto:
        c.state("training.engine", "hf")
        c.state("training.backend", "deepspeed")
        c.note("\"auto\" values: filled as the Hugging Face Trainer fills them "
               "(transformers integrations/deepspeed.py trainer_config_process)")
    else:
        c.default("training.engine", "deepspeed", "a DeepSpeed JSON without \"auto\" values: "
                  "DeepSpeed itself runs the model (engine deepspeed) unless another file says "
                  "Hugging Face")
    _batch(c, cfg)
    _precision(c, cfg)
    _zero(c, cfg.get("zero_optimization", {}))
    _optimizer(c, cfg.get("optimizer"))
    if isinstance(cfg.get("activation_checkpointing"), dict):
        c.note("activation_checkpointing configures deepspeed.checkpointing; which layers "
               "are recomputed is set where the model calls checkpoint()")
    return c.reading


def _batch(c: Collector, cfg: dict) -> None:
    # "auto": what the Trainer passes (trainer_config_process), its defaults when no
    # TrainingArguments file says otherwise
    for key, path, default, ta_name in (
            ("train_micro_batch_size_per_gpu", "training.micro_batch", TA_MICRO,
             "per_device_train_batch_size"),
            ("gradient_accumulation_steps", "training.grad_accum", TA_ACCUM,
             "gradient_accumulation_steps")):
        given = cfg.get(key)
        if _is_auto(given):
            c.default(path, default, f"\"auto\": TrainingArguments.{ta_name}, default {default}")
        elif given is not None:
            v = c.integer(key, given)
            if v is not None:
                c.state(path, v)
    total = cfg.get("train_batch_size")
    if total is not None and not _is_auto(total):
        v = c.integer("train_batch_size", total)
        if v is not None:
            c.state("training.global_batch", v)


def _precision(c: Collector, cfg: dict) -> None:
    on = {}
    for kind in ("fp16", "bf16"):
        sec = cfg.get(kind)
        if sec is None:
            continue
        if not isinstance(sec, dict):
            c.problem(kind, sec, "expected a table such as {\"enabled\": true}")
            continue
        # runtime/config.py: a section without "enabled" is off
        enabled = sec.get("enabled", False)
        on[kind] = "auto" if _is_auto(enabled) else c.boolean(f"{kind}.enabled", enabled)
    stated = [k for k, v in on.items() if v is True]
    if len(stated) > 1:
        c.problem("bf16.enabled", True, "expected only one of fp16 and bf16 enabled")
    elif stated:
        c.state("training.precision", stated[0])
    elif "auto" in on.values():
        c.default("training.precision", "fp32", "\"auto\": TrainingArguments bf16 and fp16, "
                  "both default false")
    else:
        c.default("training.precision", "fp32", "DeepSpeed: fp16 and bf16 are off unless "
                  "enabled (runtime/config.py)")


def _zero(c: Collector, z: Any) -> None:
    if not isinstance(z, dict):
        c.problem("zero_optimization", z, "expected a table")
        return
    if "stage" in z:
        stage = c.choice("zero_optimization.stage", z["stage"],
                         {str(s): s for s in (0, 1, 2, 3)})
        if stage is not None:
            c.state("parallel.zero", stage)
    else:
        c.default("parallel.zero", 0, "DeepSpeed: zero_optimization.stage defaults to 0 "
                  "(runtime/zero/config.py)")
    if "overlap_comm" in z:   # else DeepSpeed's default (stage == 3), the engine record's
        overlap = c.boolean("zero_optimization.overlap_comm", z["overlap_comm"])
        if overlap is not None:
            c.state("parallel.overlap_grad_reduce", overlap)
    devices = {}
    for part in ("offload_optimizer", "offload_param"):
        sec = z.get(part)
        if sec is None:
            continue
        if not isinstance(sec, dict):
            c.problem(f"zero_optimization.{part}", sec, "expected a table such as "
                      "{\"device\": \"cpu\"}")
            continue
        dev = c.choice(f"zero_optimization.{part}.device", sec.get("device", "none"), OFFLOAD)
        if dev is not None:
            devices[part] = dev
    opt = devices.get("offload_optimizer")
    par = devices.get("offload_param", "none")
    if opt is not None:
        c.state("training.offload", opt)
    elif "offload_optimizer" not in z:
        c.default("training.offload", "none", "DeepSpeed: no offload_optimizer section, no "
                  "offload")
    if par != "none" and par != opt:
        c.problem("zero_optimization.offload_param.device", par,
                  f"expected the offload_optimizer device ({opt or 'none'}): the workbench has "
                  "one offload target")


def _optimizer(c: Collector, opt: Any) -> None:
    if opt is None:
        return    # the training script (or the Trainer's optim) builds it
    if not isinstance(opt, dict):
        c.problem("optimizer", opt, "expected a table with a type")
        return
    kind = c.choice("optimizer.type", opt.get("type"), OPTIMIZERS)
    if kind is not None:
        c.state("training.optimizer", kind)

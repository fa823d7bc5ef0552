"""A DeepSpeed config (JSON) with the scenario's data parallelism, ZeRO stage, offload,
precision, optimizer and activation checkpointing.

Keys and their models: microsoft/DeepSpeed ``deepspeed/runtime/config.py`` (DeepSpeedConfig,
the batch identity in ``_batch_assertion``), ``deepspeed/runtime/zero/config.py``
(DeepSpeedZeroConfig), ``deepspeed/runtime/zero/offload_config.py``,
``deepspeed/runtime/activation_checkpointing/config.py``; docs:
https://www.deepspeed.ai/docs/config-json/ . The tests load every export with DeepSpeed's own
``DeepSpeedConfig`` (deepspeed 0.19.x).

DeepSpeed's batch identity: ``train_batch_size = train_micro_batch_size_per_gpu x
gradient_accumulation_steps x data-parallel world size``; here the data-parallel world is the
scenario's dp, so the three keys are global_batch, micro_batch and global / (micro x dp).

REFUSED (an :class:`ExportError` naming the field): tp, pp, cp or ep > 1. A DeepSpeed config
alone cannot lay out Megatron-style TP + sequence parallelism, the workbench's pipeline
schedules, ring-attention CP or its EP: DeepSpeed's pipeline engine and MoE layers are set in
model code (PipelineModule, deepspeed.moe ep_size), AutoTP has no sequence parallelism, and
Ulysses is not ring attention. Export those layouts with ``--to megatron`` or
``--to torchtitan``. Also refused: HSDP shard groups (MiCS, DeepSpeed's hierarchical sharding,
was removed: config.py rejects ``mics_shard_size``) and fp8 (DeepSpeed has no FP8 training
switch; FP8 comes from Transformer Engine layers in the model).

Engine switches (contract 1 additions): the config has no setting for any of them. fp8_recipe,
async_tp and expert_tp come with layouts refused above; ``training.compile`` is
``model_engine.compile()`` in the training script (deepspeed/runtime/engine.py
DeepSpeedEngine.compile; the JSON ``compile`` section's ``deepcompile`` is DeepCompile, a
different feature), and ``training.recompute: op`` (torchtitan's per-op SAC) is, like the
other policies, chosen where the model calls checkpoint(). What does not carry over (those, and
a scenario estimated for another engine) is listed under the top-level key ``"_comment"``,
which DeepSpeed ignores (the JSON has no comments), and returned as the :class:`Exported`
result's warnings.
"""
from __future__ import annotations

import json

from workbench.export.common import Exported, Notes, Refusals, Source
from workbench.scenario.types import Scenario

TARGET = "DeepSpeed"
ENGINE = "deepspeed"   # the workbench.engines record whose switches this config carries
NVME_PATH = "/local_nvme"   # DeepSpeed's documented example path: point it at the NVMe mount


def deepspeed_config(s: Scenario) -> dict:
    """The DeepSpeed config dict; raises ExportError listing every field it cannot express."""
    par, tr = s.parallel, s.training
    no = Refusals(TARGET)
    for dim, why in (("tp", "the config has no Megatron-style tensor parallelism (AutoTP "
                      "replaces layers in model code, without sequence parallelism); use "
                      "--to megatron/torchtitan"),
                     ("pp", "DeepSpeed's pipeline engine is built in model code "
                      "(PipelineModule) and runs its own schedule; use --to megatron/torchtitan"),
                     ("cp", "DeepSpeed's sequence parallelism is Ulysses all-to-all, not "
                      "ring attention; use --to megatron/torchtitan"),
                     ("ep", "DeepSpeed sets expert parallelism in model code (deepspeed.moe "
                      "ep_size), not in the config; use --to megatron/torchtitan")):
        if getattr(par, dim) > 1:
            no.add(f"parallel.{dim}", getattr(par, dim), why)
    if par.shard_group:
        no.add("parallel.shard_group", par.shard_group, "hierarchical sharding (MiCS) was "
               "removed from DeepSpeed; ZeRO shards over the whole data-parallel group")
    if tr.precision == "fp8":
        no.add("training.precision", "fp8", "the config has no FP8 training switch (FP8 comes "
               "from Transformer Engine layers in the model); use bf16 or --to megatron")
    if par.reshard_after_forward is False and par.zero == 3:
        no.add("parallel.reshard_after_forward", False, "ZeRO-3 always releases gathered "
               "parameters after use (stage3_max_live_parameters bounds what stays)")
    no.raise_any()

    cfg: dict = {
        "train_batch_size": tr.global_batch,
        "train_micro_batch_size_per_gpu": tr.micro_batch,
        "gradient_accumulation_steps": s.microbatches,
        "gradient_clipping": 1.0,
        "steps_per_print": 10,
    }
    if tr.precision == "bf16":
        cfg["bf16"] = {"enabled": True}
    elif tr.precision == "fp16":
        cfg["fp16"] = {"enabled": True, "loss_scale": 0}   # 0 = dynamic loss scaling

    zero: dict = {"stage": par.zero}
    if par.zero >= 1:
        # overlap the gradient reduce(-scatter) with backward, as the estimator assumes
        zero.update({"overlap_comm": True, "contiguous_gradients": True})
    if tr.offload != "none":
        # The estimator's offload (model_states.py): optimizer states (and the ZeRO-2/3 gradient
        # shard) to host or NVMe; ZeRO-3 parameters too. ZeRO-Offload / ZeRO-Infinity.
        device = {"device": tr.offload, "pin_memory": True}
        if tr.offload == "nvme":
            device["nvme_path"] = NVME_PATH
        zero["offload_optimizer"] = dict(device)
        if par.zero == 3:
            zero["offload_param"] = dict(device)
    cfg["zero_optimization"] = zero

    if tr.optimizer == "adamw":
        cfg["optimizer"] = {"type": "AdamW", "params": {
            "lr": 3e-4, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}}
    else:
        # not a DeepSpeed optimizer: the engine falls back to torch.optim.SGD by name
        # (engine.py _configure_basic_optimizer), which ZeRO calls "untested"
        cfg["optimizer"] = {"type": "SGD", "params": {"lr": 1e-2, "momentum": 0.9}}
        if par.zero >= 1:
            cfg["zero_allow_untested_optimizer"] = True
    if tr.recompute != "none":
        # Configures deepspeed.checkpointing; which modules are recomputed (full layers or only
        # attention, the workbench's "selective") is decided where the model calls checkpoint().
        cfg["activation_checkpointing"] = {"partition_activations": False,
                                           "contiguous_memory_optimization": False,
                                           "cpu_checkpointing": False}
    return cfg


def _notes(s: Scenario) -> list[str]:
    par, tr = s.parallel, s.training
    n = Notes(s, ENGINE, TARGET)
    if tr.compile:
        n.add("training.compile", True, "no config switch: call model_engine.compile() after "
              "deepspeed.initialize (DeepSpeedEngine.compile)")
    if tr.recompute == "layer":
        n.add("training.recompute", "layer", f"checkpoint one block in every {tr.recompute_every} "
              "where the model calls checkpoint(); the config only sets up "
              "deepspeed.checkpointing")
    if tr.recompute == "op":
        n.add("training.recompute", "op", "torchtitan's per-op SAC: pass a selective "
              "checkpoint policy where the model calls checkpoint(); the config only sets up "
              "deepspeed.checkpointing")
    if par.async_tp:
        n.add("parallel.async_tp", True, "no tensor parallelism in a DeepSpeed config; not "
              "exported")
    if par.expert_tp is not None:
        n.add("parallel.expert_tp", par.expert_tp, "no expert parallelism in a DeepSpeed "
              "config; not exported")
    return n.items


def to_deepspeed(s: Scenario, source: Source = Source()) -> Exported:
    """The DeepSpeed config as JSON text (HF Trainer and others read it with a JSON parser, so
    notes go under ``"_comment"``), with ``.warnings`` for what does not carry over."""
    cfg, notes = deepspeed_config(s), _notes(s)
    if notes:
        cfg = {"_comment": notes, **cfg}
    return Exported(json.dumps(cfg, indent=2) + "\n", notes)

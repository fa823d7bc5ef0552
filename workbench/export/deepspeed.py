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

The deepspeed engine is DeepSpeed as Megatron-DeepSpeed drives it (workbench/engines/
deepspeed.py): tensor and pipeline parallelism, sequence parallelism, MoE expert parallelism and
FP8 are set in Megatron-DeepSpeed's launch and model code (``--tensor-model-parallel-size``,
``--pipeline-model-parallel-size``, ``deepspeed.moe`` ``ep_size``, ``--fp8-hybrid``), not in the
config, so they are listed under ``"_comment"`` with the flag to set; DeepSpeed's batch identity
then counts the data-parallel world as world / (tp x pp), the scenario's dp.

REFUSED (an :class:`ExportError` naming the field): what the deepspeed engine record says
DeepSpeed cannot run (each limit cited there), asked through the rule table as the validator and
the planner ask it: ring-attention context parallelism (DeepSpeed's is Ulysses), HSDP shard
groups (MiCS was removed: config.py rejects ``mics_shard_size``), ZeRO-2/3 with pipeline
parallelism, pipeline schedules other than 1F1B, and ZeRO-3 keeping parameters gathered.

Engine switches (contract 1 additions): the config has no setting for any of them;
``training.compile`` is ``model_engine.compile()`` in the training script (deepspeed/runtime/engine.py
DeepSpeedEngine.compile; the JSON ``compile`` section's ``deepcompile`` is DeepCompile, a
different feature), and ``training.recompute: op`` (torchtitan's per-op SAC) is, like the
other policies, chosen where the model calls checkpoint(). What does not carry over (those, and
a scenario estimated for another engine) is listed under the top-level key ``"_comment"``,
which DeepSpeed ignores (the JSON has no comments), and returned as the :class:`Exported`
result's warnings.
"""
from __future__ import annotations

import json

from workbench.estimate.time.step_time import dp_overlap
from workbench.export.common import Exported, Notes, Source, refuse_what_engine_cannot_run
from workbench.scenario.types import Scenario

TARGET = "DeepSpeed"
ENGINE = "deepspeed"   # the workbench.engines record whose switches this config carries
NVME_PATH = "/local_nvme"   # DeepSpeed's documented example path: point it at the NVMe mount


def deepspeed_config(s: Scenario) -> dict:
    """The DeepSpeed config dict; raises ExportError listing every field it cannot express."""
    par, tr = s.parallel, s.training
    refuse_what_engine_cannot_run(s, ENGINE, TARGET)

    cfg: dict = {
        "train_batch_size": tr.global_batch,
        "train_micro_batch_size_per_gpu": tr.micro_batch,
        "gradient_accumulation_steps": s.microbatches,
        "gradient_clipping": 1.0,
        "steps_per_print": 10,
    }
    if tr.precision in ("bf16", "fp8"):   # fp8: TE's FP8 GEMMs inside bf16 training
        cfg["bf16"] = {"enabled": True}
    elif tr.precision == "fp16":
        cfg["fp16"] = {"enabled": True, "loss_scale": 0}   # 0 = dynamic loss scaling

    zero: dict = {"stage": par.zero}
    if par.zero >= 1:
        # the gradient reduce(-scatter) overlapped with backward or not, as estimated
        # (step_time.dp_overlap: parallel.overlap_grad_reduce, else DeepSpeed's stage == 3)
        zero.update({"overlap_comm": bool(dp_overlap(s, par.zero)[0]),
                     "contiguous_gradients": True})
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
    # The deepspeed engine is DeepSpeed driven by Megatron-DeepSpeed (workbench/engines/
    # deepspeed.py): tensor and pipeline parallelism, MoE expert parallelism and FP8 are set in
    # that launch and its model code, not in the config (the data-parallel world DeepSpeed's
    # batch identity uses is then world / (tp x pp), the scenario's dp).
    for dim, flag in (("tp", "--tensor-model-parallel-size"),
                      ("pp", "--pipeline-model-parallel-size")):
        if getattr(par, dim) > 1:
            n.add(f"parallel.{dim}", getattr(par, dim), f"set in Megatron-DeepSpeed's launch: "
                  f"{flag} {getattr(par, dim)} (megatron/arguments.py); the config has no key")
    if par.sp:
        n.add("parallel.sequence_parallel", True, "set in Megatron-DeepSpeed's launch: "
              "--sequence-parallel")
    if par.pp > 1:
        n.add("parallel.pp_schedule", par.pp_schedule, "DeepSpeed's PipelineEngine runs its "
              "TrainSchedule (1F1B) for the PipelineModule the model code builds")
    if par.ep > 1:
        n.add("parallel.ep", par.ep, "set in the model code: deepspeed.moe.layer.MoE(ep_size="
              f"{par.ep}) (Megatron-DeepSpeed --expert-model-parallel-size); the config has "
              "no key")
    if tr.precision == "fp8":
        n.add("training.precision", "fp8", "FP8 comes from Transformer Engine layers in the "
              "model (Megatron-DeepSpeed --fp8-hybrid --transformer-impl transformer_engine); "
              "the config trains them in bf16")
    if par.async_tp or par.tp_comm_overlap:
        key = "parallel.async_tp" if par.async_tp else "parallel.tp_comm_overlap"
        n.add(key, True, "no tensor-parallel communication overlap in DeepSpeed; not "
              "exported")
    if par.expert_tp is not None:
        n.add("parallel.expert_tp", par.expert_tp, "no expert tensor parallelism in "
              "DeepSpeed; not exported")
    return n.items


def to_deepspeed(s: Scenario, source: Source = Source()) -> Exported:
    """The DeepSpeed config as JSON text (HF Trainer and others read it with a JSON parser, so
    notes go under ``"_comment"``), with ``.warnings`` for what does not carry over."""
    cfg, notes = deepspeed_config(s), _notes(s)
    if notes:
        cfg = {"_comment": notes, **cfg}
    return Exported(json.dumps(cfg, indent=2) + "\n", notes)

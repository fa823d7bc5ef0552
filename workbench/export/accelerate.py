"""The Hugging Face stack's configs for a scenario: the Accelerate config (``accelerate launch
--config_file``), the ``TrainingArguments`` / TRL ``SFTConfig`` fields, and for LoRA / QLoRA
PEFT's ``LoraConfig`` (and ``BitsAndBytesConfig``), as one YAML stream of two or three documents.

Sources (read in the installed wheels, accelerate 1.16, transformers 5.25, peft 0.21):
- the config file: ``accelerate/commands/config/config_args.py`` ``ClusterConfig`` (its
  top-level keys; ``load_config_from_file`` rejects any other) and the keys ``accelerate config``
  writes (``commands/config/cluster.py``); ``accelerate launch`` turns ``fsdp_config``,
  ``deepspeed_config`` and ``parallelism_config`` entries into its ``--fsdp_*``,
  ``--zero_stage``... and ``--parallelism_config_*`` arguments (``commands/launch.py``
  ``_validate_launch_command``) and those into the environment the plugins read
  (``utils/launch.py`` ``prepare_multi_gpu_env``, ``prepare_deepspeed_cmd_env``). The tests run
  that path and build ``FullyShardedDataParallelPlugin``, ``DeepSpeedPlugin`` and
  ``ParallelismConfig`` from the result.
- ``parallelism_config`` (Accelerate >= 1.10): ``accelerate/parallelism_config.py`` — the mesh is
  dp_replicate x dp_shard x cp x tp, FSDP shards over dp_shard x cp; "composing DDP + TP is
  currently not supported"; it is launched only with FSDP2 (launch.py: "You cannot use
  `--use_parallelism_config` without `--use_fsdp` and `--fsdp_version=2`").
- ``TrainingArguments`` fields: ``transformers/training_args.py``; TRL's ``SFTConfig`` adds
  ``max_length``, ``packing``, ``loss_type`` and ``activation_offloading`` (huggingface/trl
  ``trl/trainer/sft_config.py`` @ 016013e88acec9257c7476fdcdb12e5479938a5f); the LoRA document
  is :func:`workbench.export.peft.peft_config`'s.

Mapping: ``training.backend`` (fsdp2 | fsdp1 | deepspeed; null: the hf engine record's default,
FSDP2 — ``workbench.engines.hf.resolved_backend`` — and DDP at zero 0) -> ``distributed_type``;
ZeRO-2/3 -> FSDP2 ``fsdp_reshard_after_forward`` false/true, FSDP1 ``SHARD_GRAD_OP`` /
``FULL_SHARD`` (``HYBRID_SHARD*`` for a node-sized shard group), DeepSpeed ``zero_stage``;
dp / shard_group / tp / cp -> ``parallelism_config`` (FSDP2); recompute full -> FSDP's
``fsdp_activation_checkpointing`` (one all-gather: the Trainer checkpointing the model under FSDP
re-gathers each layer's parameters in backward), otherwise ``gradient_checkpointing``.

REFUSED (an :class:`ExportError` naming the field): what the hf engine record says the stack
cannot run (the rule table, recompute policies and switches through the engine-switch rule,
as :mod:`.peft` asks), and what Accelerate's config cannot express: pipeline and expert
parallelism (no such ParallelismConfig dimension), sequence parallelism over TP, TP / CP
outside FSDP2, FSDP2 without sharding, ZeRO-1 on FSDP, NVMe offload on FSDP, HSDP groups the
backend cannot form.
"""
from __future__ import annotations

import yaml

from workbench.engines.hf import resolved_backend
from workbench.errors import Problem
from workbench.export.common import (
    Exported, ExportError, Notes, Source, layout_summary, model_label, preset_key,
    refuse_what_engine_cannot_run, spelling, switch_problems, train_steps,
)
from workbench.export.peft import OPTIM, peft_config
from workbench.export.torchrun import MASTER_PORT
from workbench.scenario.types import Scenario

TARGET = "Accelerate"
ENGINE = "hf"
BACKENDS = ("fsdp2", "fsdp1", "deepspeed")
CONFIG_FILE = "accelerate_config.yaml"
ARGS_FILE = "sft_config.yaml"
PEFT_FILE = "peft_config.yaml"
NVME_PATH = "/local_nvme"   # DeepSpeed's documented example path (as workbench/export/deepspeed.py)

# Decoder-layer classes FSDP wraps one unit each (transformers models/*/modeling_*.py); other
# models leave the key out and Accelerate wraps the model's ``_no_split_modules``
# (accelerate/utils/dataclasses.py FullyShardedDataParallelPlugin.set_auto_wrap_policy).
LAYER_CLASS = {"llama3-8b": "LlamaDecoderLayer", "llama3-70b": "LlamaDecoderLayer",
               "llama3-405b": "LlamaDecoderLayer", "llama3.2-1b": "LlamaDecoderLayer",
               "mistral-7b": "MistralDecoderLayer", "gpt2-small": "GPT2Block"}
# accelerate config ``mixed_precision`` (utils/dataclasses.py PrecisionType)
MIXED = {"bf16": "bf16", "fp16": "fp16", "fp32": "no"}
# TRL SFTConfig fields (trl/trainer/sft_config.py @ the commit above), not TrainingArguments'
SFT_FIELDS = ("max_length", "packing", "loss_type", "activation_offloading")


def backend(s: Scenario) -> str | None:
    """The Accelerate back end (None: DDP): ``training.backend``, else the one the estimate
    models (the hf record's default, FSDP2), and DDP when nothing is sharded."""
    if s.training.backend:
        return s.training.backend
    return None if s.parallel.zero == 0 else resolved_backend(None)


def _mesh(s: Scenario) -> tuple[int, int]:
    """(dp_replicate, dp_shard) of Accelerate's mesh: FSDP shards over dp_shard x cp
    (parallelism_config.py dp_shard_cp), so an HSDP shard group is dp_shard x cp ranks."""
    par = s.parallel
    if par.zero == 0:
        return par.dp, 1
    if par.shard_group:
        return par.dp * par.cp // par.shard_group, par.shard_group // par.cp
    return 1, par.dp


def _format_problems(s: Scenario, be: str | None) -> list[Problem]:
    """What the Accelerate config cannot express for back end ``be``."""
    par, tr, hw = s.parallel, s.training, s.hardware
    out: list[Problem] = []
    if be is not None and be not in BACKENDS:
        out.append(Problem("training.backend", be, "Accelerate runs " + ", ".join(BACKENDS)))
        return out
    if par.pp > 1:
        out.append(Problem("parallel.pp", par.pp, "Accelerate's parallelism_config has no "
                           "pipeline dimension (dp_replicate, dp_shard, tp, cp, sp: "
                           "accelerate/parallelism_config.py); use pp 1"))
    if par.ep > 1:
        out.append(Problem("parallel.ep", par.ep, "Accelerate's parallelism_config has no "
                           "expert dimension; use ep 1"))
    if par.sp:
        out.append(Problem("parallel.sequence_parallel", True, "Transformers' tensor "
                           "parallelism shards no activations along the sequence "
                           "(DistributedConfig.enable_sequence_parallel: 'Not wired up yet', "
                           "transformers 5.25); set it false"))
    if be != "fsdp2":
        for dim in ("tp", "cp"):
            if getattr(par, dim) > 1:
                out.append(Problem(f"parallel.{dim}", getattr(par, dim), (
                    "Accelerate's parallelism_config runs with FSDP2 only (launch.py: "
                    "--use_parallelism_config needs --use_fsdp --fsdp_version 2); use "
                    f"training.backend fsdp2 and zero 2 or 3 (backend here: {be or 'DDP'})")))
    if be == "fsdp2":
        if par.zero < 2:
            out.append(Problem("parallel.zero", par.zero, "FSDP2 shards parameters, gradients "
                               "and optimizer states (zero 3, or zero 2 without resharding "
                               "after forward); use zero 2 or 3, or training.backend deepspeed"))
        elif par.shard_group and par.shard_group % par.cp:
            out.append(Problem("parallel.shard_group", par.shard_group, (
                f"Accelerate's FSDP group is dp_shard x cp: a multiple of cp = {par.cp}")))
        elif par.tp > 1 and _mesh(s)[1] * par.cp == 1:
            out.append(Problem("parallel.tp", par.tp, "FSDP2 with tensor parallelism needs a "
                               "dp_shard or cp dimension to shard over (parallelism_config.py "
                               "_validate_accelerator); use dp > 1 or cp > 1"))
    if be == "fsdp1":
        if par.zero == 1:
            out.append(Problem("parallel.zero", 1, "FSDP has no ZeRO-1 (sharding strategies "
                               "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD*); use "
                               "training.backend deepspeed"))
        elif par.shard_group and par.shard_group != hw.gpus_per_node:
            out.append(Problem("parallel.shard_group", par.shard_group, (
                f"FSDP1's HYBRID_SHARD shards within a node: the shard group is "
                f"hardware.gpus_per_node = {hw.gpus_per_node}; use training.backend fsdp2")))
    if be in ("fsdp1", "fsdp2") and tr.offload == "nvme":
        out.append(Problem("training.offload", "nvme", "FSDP offloads to host memory only "
                           "(fsdp_offload_params); use cpu, or training.backend deepspeed"))
    if be == "deepspeed" and par.shard_group:
        out.append(Problem("parallel.shard_group", par.shard_group, "Accelerate's DeepSpeed "
                           "plugin has no hierarchical sharding key; leave it null or use "
                           "training.backend fsdp2"))
    if be is None and par.zero == 0 and tr.offload != "none":
        out.append(Problem("training.offload", tr.offload, "DDP keeps every state on the GPU; "
                           "offload needs zero >= 1"))
    return out


def _fsdp(s: Scenario, be: str) -> dict:
    par, tr = s.parallel, s.training
    cfg: dict = {"fsdp_version": 2 if be == "fsdp2" else 1}
    if be == "fsdp2":
        # ZeRO-3 reshards after forward, ZeRO-2 keeps the gathered parameters (FSDP2
        # reshard_after_forward=False is SHARD_GRAD_OP); parallel.reshard_after_forward false
        # keeps them at zero 3 too
        cfg["fsdp_reshard_after_forward"] = par.zero == 3 and par.reshard_after_forward is not False
    else:
        # FSDP1: the sharding strategy's name (cluster.py asks FSDP_SHARDING_STRATEGY)
        name = {0: "NO_SHARD", 2: "SHARD_GRAD_OP", 3: "FULL_SHARD"}[par.zero]
        if par.shard_group and par.zero >= 2:
            name = "HYBRID_SHARD" if par.zero == 3 else "HYBRID_SHARD_ZERO2"
        cfg["fsdp_reshard_after_forward"] = name
        # ... and the same under its older key: accelerate launch always exports
        # FSDP_SHARDING_STRATEGY (default FULL_SHARD, utils/launch.py), the plugin reads it
        # first, and Accelerator.prepare passes ``sharding_strategy or reshard_after_forward``
        # (accelerator.py), so the older key alone decides FSDP1's strategy
        cfg["fsdp_sharding_strategy"] = name
    cfg["fsdp_offload_params"] = tr.offload == "cpu"
    cfg["fsdp_auto_wrap_policy"] = "TRANSFORMER_BASED_WRAP"
    layer = LAYER_CLASS.get(preset_key(s) or "")
    if layer:
        cfg["fsdp_transformer_layer_cls_to_wrap"] = layer
    cfg["fsdp_state_dict_type"] = "SHARDED_STATE_DICT"
    cfg["fsdp_cpu_ram_efficient_loading"] = True
    cfg["fsdp_sync_module_states"] = True   # required with cpu_ram_efficient_loading (launch.py)
    if be == "fsdp1":
        cfg["fsdp_backward_prefetch"] = "BACKWARD_PRE"
        cfg["fsdp_use_orig_params"] = True   # frozen and trainable parameters mixed (LoRA)
    cfg["fsdp_activation_checkpointing"] = tr.recompute == "full"
    return cfg


def _deepspeed(s: Scenario) -> dict:
    par, tr = s.parallel, s.training
    cfg: dict = {"zero_stage": par.zero,
                 "gradient_accumulation_steps": s.microbatches,
                 "gradient_clipping": 1.0,
                 # the estimator's offload: optimizer states (ZeRO-Offload), ZeRO-3 parameters
                 # too (ZeRO-Infinity), as workbench/export/deepspeed.py writes them
                 "offload_optimizer_device": tr.offload,
                 "offload_param_device": tr.offload if par.zero == 3 else "none"}
    if tr.offload == "nvme":
        cfg["offload_optimizer_nvme_path"] = NVME_PATH
        if par.zero == 3:
            cfg["offload_param_nvme_path"] = NVME_PATH
    if par.zero == 3:
        cfg["zero3_init_flag"] = True
        cfg["zero3_save_16bit_model"] = True
    return cfg


def accelerate_config(s: Scenario) -> dict:
    """The Accelerate config (what ``ClusterConfig.from_yaml_file`` reads); call after
    :func:`refusals` found nothing."""
    par, tr, hw = s.parallel, s.training, s.hardware
    be = backend(s)
    if be == "deepspeed":
        kind = "DEEPSPEED"
    elif be in ("fsdp1", "fsdp2"):
        kind = "FSDP"
    else:
        kind = "MULTI_GPU" if hw.world > 1 else "NO"
    cfg: dict = {"compute_environment": "LOCAL_MACHINE", "distributed_type": kind,
                 "mixed_precision": MIXED[tr.precision],
                 # num_processes is the total over machines (utils/launch.py
                 # prepare_multi_gpu_env: nproc_per_node = num_processes // num_machines)
                 "num_machines": hw.nodes, "num_processes": hw.world, "machine_rank": 0,
                 "main_process_port": MASTER_PORT, "rdzv_backend": "static",
                 "same_network": True, "gpu_ids": "all", "use_cpu": False, "debug": False,
                 "downcast_bf16": "no"}
    if kind == "FSDP":
        cfg["fsdp_config"] = _fsdp(s, be)
    if kind == "DEEPSPEED":
        cfg["deepspeed_config"] = _deepspeed(s)
    if be == "fsdp2" and hw.world > 1:
        replicate, shard = _mesh(s)
        # the keys accelerate config writes (cluster.py prefix "parallelism_config_")
        cfg["parallelism_config"] = {
            "parallelism_config_dp_replicate_size": replicate,
            "parallelism_config_dp_shard_size": shard,
            "parallelism_config_tp_size": par.tp,
            "parallelism_config_cp_size": par.cp}
        if par.cp > 1:
            # ring attention (the estimator's CP) passes K/V shards around: allgather
            # (cluster.py offers allgather | alltoall)
            cfg["parallelism_config"]["parallelism_config_cp_comm_strategy"] = "allgather"
    return cfg


def training_arguments(s: Scenario) -> dict:
    """``TrainingArguments`` fields plus TRL's :data:`SFT_FIELDS` (``SFTConfig(**...)``)."""
    tr = s.training
    fsdp = backend(s) in ("fsdp1", "fsdp2")
    recompute = spelling(ENGINE, "recompute")
    args: dict = {"per_device_train_batch_size": tr.micro_batch,
                  "gradient_accumulation_steps": s.microbatches,
                  "max_steps": train_steps(s),
                  "bf16": tr.precision == "bf16", "fp16": tr.precision == "fp16",
                  # under FSDP every-layer checkpointing is FSDP's (fsdp_activation_checkpointing);
                  # the Trainer refuses both at once (trainer.py: "can't both be set to True");
                  # every n-th layer only the Trainer's kwargs can say (training_args.py
                  # activation_checkpointing_kwargs every_n_layers, counted from layer 0)
                  recompute: (tr.recompute == "full" and not fsdp) or tr.recompute == "layer",
                  "optim": OPTIM[tr.optimizer],
                  spelling(ENGINE, "compile"): tr.compile,
                  "use_liger_kernel": tr.liger,
                  # TRL SFTConfig: sequences of max_length tokens, packed so every one is full
                  "max_length": tr.seq_len, "packing": True,
                  spelling(ENGINE, "activation_offload"): tr.activation_offload}
    if tr.recompute == "layer":
        args[recompute + "_kwargs"] = {"every_n_layers": tr.recompute_every}
    if not tr.liger:
        # SFTConfig's default loss_type chunked_nll never materialises the full logits; the
        # estimate's is Transformers' ForCausalLMLoss over them (engine hf loss "upcast")
        args["loss_type"] = "nll"
    return args


def refusals(s: Scenario) -> list[Problem]:
    """Every field the export cannot express: the hf engine record's limits and switches,
    then Accelerate's own, one problem per field."""
    problems = list(_engine_problems(s)) + _format_problems(s, backend(s))
    seen: set[str] = set()
    out = []
    for p in problems:
        if p.path not in seen:
            seen.add(p.path)
            out.append(p)
    return out


def _engine_problems(s: Scenario) -> list[Problem]:
    try:
        refuse_what_engine_cannot_run(s, ENGINE, TARGET)
    except ExportError as err:
        return list(err.problems) + switch_problems(s, ENGINE)
    return switch_problems(s, ENGINE)


def _document(title: str, doc: dict) -> str:
    return f"--- # {title}\n" + yaml.safe_dump(doc, sort_keys=False, width=10_000)


def to_accelerate(s: Scenario, source: Source = Source()) -> Exported:
    """The YAML stream (``source`` is unused: the files hold the run), with ``.warnings``
    for what does not carry over (also header comments)."""
    problems = refusals(s)
    if problems:
        raise ExportError(TARGET, problems)
    lora: dict | None = None
    notes = Notes(s, ENGINE, TARGET).items
    if s.training.adapters:
        try:
            lora, peft_notes = peft_config(s)
        except ExportError as err:
            raise ExportError(TARGET, err.problems) from None
        notes += [n for n in peft_notes if n not in notes]
        lora.pop("training_arguments", None)   # the fuller set is the SFTConfig document
    be = backend(s)
    if be == "deepspeed" and s.training.offload == "nvme":
        notes.append(f"training.offload = nvme: accelerate launch (1.16) passes no "
                     f"offload_*_nvme_path to DeepSpeedPlugin (utils/launch.py "
                     f"prepare_deepspeed_cmd_env), so DeepSpeed gets nvme_path 'none': set "
                     f"{NVME_PATH} in the script's DeepSpeedPlugin or a deepspeed_config_file")
    hw = s.hardware
    run = f"accelerate launch --config_file {CONFIG_FILE}"
    if hw.nodes > 1:
        run += ' --main_process_ip "$MASTER_ADDR" --machine_rank "$NODE_RANK"'
    files = f"{CONFIG_FILE}, {ARGS_FILE}" + (f", {PEFT_FILE}" if lora else "")
    header = [f"Accelerate + TrainingArguments / TRL SFTConfig for {model_label(s)}: "
              f"{s.training.method}",
              f"layout: {layout_summary(s)}; Accelerate back end: {be or 'DDP'}",
              f"Documents below, in order: {files} (split at the '---' lines).",
              f"launch{' on every node' if hw.nodes > 1 else ''}: {run} YOUR_TRAIN.py",
              f"{ARGS_FILE}: SFTConfig(**fields); {', '.join(SFT_FIELDS)} are TRL's, the "
              "rest TrainingArguments'",
              *(f"NOTE: {n}" for n in notes)]
    text = "\n".join(f"# {h}" for h in header) + "\n"
    text += _document(f"{CONFIG_FILE}: accelerate launch --config_file", accelerate_config(s))
    text += _document(f"{ARGS_FILE}: TrainingArguments / SFTConfig fields",
                      training_arguments(s))
    if lora:
        text += _document(f"{PEFT_FILE}: peft.LoraConfig(**adapter_config)"
                          + (", BitsAndBytesConfig(**quantization_config)"
                             if "quantization_config" in lora else ""), lora)
    return Exported(text, notes)

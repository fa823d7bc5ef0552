"""An Accelerate config YAML (as ``accelerate config`` writes it) read into a scenario.

Sources, accelerate 1.16 (site-packages/accelerate):
- the keys a config file may have: ``commands/config/config_args.py`` ``ClusterConfig`` (with
  ``BaseConfig``; ``process_config`` still takes the old ``fp16`` and ``dynamo_backend``);
- the keys of its nested tables: the launcher's options, because ``commands/launch.py``
  ``_validate_launch_command`` copies ``fsdp_config.x`` to ``args.fsdp_x`` (prefix added when
  missing; ``fp8_`` and ``dynamo_`` likewise) and ``deepspeed_config`` / ``parallelism_config``
  keys to ``args.<key>``;
- the defaults: ``FullyShardedDataParallelPlugin.__post_init__`` (fsdp_version 1,
  FULL_SHARD / reshard_after_forward true on FSDP2, no CPU offload), ``DeepSpeedPlugin``
  (zero_stage 2, offload none), ``ParallelismConfig`` (every size 1; CP and SP exclusive),
  ``_validate_launch_command`` (mixed_precision "no", num_processes required with a config,
  num_machines 1).
"""
from __future__ import annotations

import re
from workbench.imports.common import Collector, read_table
from workbench.imports.types import Reading

FORMAT = "accelerate"
_WHAT = "an Accelerate config (accelerate 1.16 commands/config/config_args.py ClusterConfig)"

# commands/config/config_args.py: BaseConfig + ClusterConfig fields, and process_config's old keys
TOP_KEYS = (
    "compute_environment", "distributed_type", "mixed_precision", "use_cpu", "debug",
    "num_processes", "machine_rank", "num_machines", "gpu_ids", "main_process_ip",
    "main_process_port", "rdzv_backend", "same_network", "main_training_function",
    "enable_cpu_affinity", "fp8_config", "deepspeed_config", "fsdp_config", "parallelism_config",
    "megatron_lm_config", "mpirun_config", "downcast_bf16", "tpu_name", "tpu_zone",
    "tpu_use_cluster", "tpu_use_sudo", "command_file", "commands", "tpu_vm", "tpu_env",
    "dynamo_config", "fp16", "dynamo_backend")
# commands/launch.py launch_command_parser: the FSDP, DeepSpeed, parallelism, FP8 and dynamo options
FSDP_KEYS = (
    "fsdp_version", "fsdp_offload_params", "fsdp_min_num_params", "fsdp_sharding_strategy",
    "fsdp_reshard_after_forward", "fsdp_auto_wrap_policy", "fsdp_transformer_layer_cls_to_wrap",
    "fsdp_backward_prefetch", "fsdp_state_dict_type", "fsdp_forward_prefetch",
    "fsdp_use_orig_params", "fsdp_cpu_ram_efficient_loading", "fsdp_sync_module_states",
    "fsdp_activation_checkpointing", "fsdp_activation_checkpointing_offload")
DEEPSPEED_KEYS = (
    "deepspeed_config_file", "zero_stage", "offload_optimizer_device", "offload_param_device",
    "offload_optimizer_nvme_path", "offload_param_nvme_path", "gradient_accumulation_steps",
    "gradient_clipping", "zero3_init_flag", "zero3_save_16bit_model", "deepspeed_hostfile",
    "deepspeed_exclusion_filter", "deepspeed_inclusion_filter", "deepspeed_multinode_launcher",
    "deepspeed_moe_layer_cls_names")
PARALLELISM_KEYS = tuple("parallelism_config_" + k for k in (
    "dp_replicate_size", "dp_shard_size", "tp_size", "cp_size", "cp_backend",
    "cp_comm_strategy", "sp_size", "sp_backend", "sp_seq_length", "sp_seq_length_is_variable",
    "sp_attn_implementation"))
FP8_KEYS = tuple("fp8_" + k for k in (
    "backend", "use_autocast_during_eval", "margin", "interval", "format", "amax_history_len",
    "amax_compute_algo", "override_linear_precision", "enable_fsdp_float8_all_gather",
    "pad_inner_dim", "opt_level"))
DYNAMO_KEYS = ("dynamo_backend", "dynamo_mode", "dynamo_use_fullgraph", "dynamo_use_dynamic",
               "dynamo_use_regional_compilation")

# utils/dataclasses.py DistributedType; the data-parallel ones run DDP (zero 0)
_DDP = ("no", "multi_cpu", "multi_gpu", "multi_npu", "multi_mlu", "multi_sdaa", "multi_musa",
        "multi_xpu", "multi_hpu", "multi_neuron")
DISTRIBUTED = {**{k: "ddp" for k in _DDP}, "fsdp": "fsdp", "deepspeed": "deepspeed",
               "xla": None, "megatron_lm": None}
# utils/dataclasses.py PrecisionType -> training.precision
PRECISION = {"no": "fp32", "fp16": "fp16", "bf16": "bf16", "fp8": "fp8"}
# utils/constants.py FSDP_SHARDING_STRATEGY -> (zero stage, HSDP: shard within a node)
SHARDING = {"full_shard": (3, False), "shard_grad_op": (2, False), "no_shard": (0, False),
            "hybrid_shard": (3, True), "hybrid_shard_zero2": (2, True)}
OFFLOAD = {"none": "none", "cpu": "cpu", "nvme": "nvme"}

# a note the merge drops when a DeepSpeed JSON is among the files
ASK_FOR_DEEPSPEED = "pass it to workbench import too"

_LOOKS = re.compile(r'(?:^|[{,])\s*"?(distributed_type|compute_environment)"?\s*:',
                    re.MULTILINE)


def looks_like(name: str, text: str) -> bool:
    """An Accelerate config names its ``distributed_type`` (or compute environment)."""
    return bool(_LOOKS.search(text))


def read(name: str, text: str) -> Reading:
    """The config read into a Reading: layout, precision, sharding back end and switches."""
    cfg, c = read_table(name, text, FORMAT, TOP_KEYS, _WHAT)
    kind = None
    if "distributed_type" not in cfg:
        # config_args.py process_config: "A `distributed_type` must be specified"
        c.problem("distributed_type", None, "is required: one of " + ", ".join(
            k.upper() for k in DISTRIBUTED))
    else:
        kind = c.choice("distributed_type", cfg["distributed_type"], DISTRIBUTED)
        if kind is None and str(cfg["distributed_type"]).strip().lower() in DISTRIBUTED:
            c.problem("distributed_type", cfg["distributed_type"],
                      "TPUs (XLA) and Accelerate's Megatron-LM plugin are not modelled; "
                      "expected MULTI_GPU, FSDP or DEEPSPEED")
    c.state("training.engine", "hf")
    _world(c, cfg, kind)
    _precision(c, cfg)
    _compile(c, cfg)
    if kind == "ddp":
        c.state("parallel.zero", 0)
    elif kind == "fsdp":
        _fsdp(c, _table(c, cfg, "fsdp_config", FSDP_KEYS, "fsdp_"), cfg)
    elif kind == "deepspeed":
        _deepspeed(c, _table(c, cfg, "deepspeed_config", DEEPSPEED_KEYS, ""))
    _parallelism(c, _table(c, cfg, "parallelism_config", PARALLELISM_KEYS, ""), kind)
    _table(c, cfg, "fp8_config", FP8_KEYS, "fp8_")
    for other in ("megatron_lm_config", "mpirun_config"):
        if cfg.get(other):
            c.note(f"{other}: not read (the Megatron-LM plugin and MPI launch are not modelled)")
    return c.reading


def _table(c: Collector, cfg: dict, key: str, known: tuple[str, ...], prefix: str) -> dict:
    """A nested table with the launcher's prefix added as ``_validate_launch_command`` adds
    it; keys the launcher has no option for are problems."""
    raw = cfg.get(key) or {}
    if not isinstance(raw, dict):
        c.problem(key, raw, "expected a table")
        return {}
    out = {}
    for k, v in raw.items():
        full = k if str(k).startswith(prefix) else prefix + str(k)
        if full not in known:
            c.unknown(f"{key}.{k}", v, f"{key} (accelerate 1.16 commands/launch.py options: "
                                       + ", ".join(known) + ")")
        else:
            out[full] = v
    return out


def _world(c: Collector, cfg: dict, kind: str | None) -> None:
    machines = c.integer("num_machines", cfg.get("num_machines", 1))
    if "num_machines" not in cfg:
        c.default("hardware.nodes", 1, "Accelerate: num_machines defaults to 1 "
                                       "(config_args.py ClusterConfig)")
    elif machines is not None:
        c.state("hardware.nodes", machines)
    procs = cfg.get("num_processes", -1 if kind != "ddp" or
                    str(cfg.get("distributed_type")).lower() != "no" else 1)
    if procs == -1:   # ClusterConfig.num_processes = -1: given on the accelerate launch line
        c.note("num_processes is not in the file (accelerate launch --num_processes gives "
               "it); the GPU count is the workbench's default")
        return
    n = c.integer("num_processes", procs)
    if n is None or machines is None:
        return
    if n % machines:
        c.problem("num_processes", n, f"expected a multiple of num_machines ({machines}): "
                                      "Accelerate counts processes over all machines")
        return
    if "num_processes" not in cfg:
        c.default("hardware.gpus_per_node", 1, "Accelerate: distributed_type NO runs one "
                                               "process (config_args.py process_config)")
    else:
        c.state("hardware.gpus_per_node", n // machines)


def _precision(c: Collector, cfg: dict) -> None:
    mp = cfg.get("mixed_precision")
    if mp is None and "fp16" in cfg and c.boolean("fp16", cfg["fp16"]):
        mp = "fp16"      # process_config: the old fp16: true means mixed_precision fp16
    if mp is None:
        c.default("training.precision", "fp32", "Accelerate: mixed_precision defaults to "
                                                "\"no\" (commands/launch.py)")
        return
    p = c.choice("mixed_precision", mp, PRECISION)
    if p is not None:
        c.state("training.precision", p)


def _compile(c: Collector, cfg: dict) -> None:
    dyn = cfg.get("dynamo_config") or {}
    backend = cfg.get("dynamo_backend", dyn.get("dynamo_backend") if isinstance(dyn, dict)
                      else None)
    if isinstance(dyn, dict):
        for k, v in dyn.items():
            full = k if str(k).startswith("dynamo_") else "dynamo_" + str(k)
            if full not in DYNAMO_KEYS:
                c.unknown(f"dynamo_config.{k}", v, "dynamo_config (accelerate 1.16 "
                          "commands/launch.py options: " + ", ".join(DYNAMO_KEYS) + ")")
    if backend is not None:   # DynamoBackend "NO" leaves the model eager
        c.state("training.compile", str(backend).strip().lower() != "no")


def _fsdp(c: Collector, f: dict, cfg: dict) -> None:
    version = c.choice("fsdp_config.fsdp_version", f.get("fsdp_version", 1),
                       {"1": 1, "2": 2})
    if version is None:
        return
    c.state("training.backend", f"fsdp{version}")
    if "fsdp_version" not in f:
        c.default("training.backend", "fsdp1", "Accelerate: fsdp_version defaults to 1 "
                  "(utils/dataclasses.py FullyShardedDataParallelPlugin)")
    if version == 2:
        if "fsdp_sharding_strategy" in f:
            c.problem("fsdp_config.fsdp_sharding_strategy", f["fsdp_sharding_strategy"],
                      "is FSDP1's; with fsdp_version 2 set fsdp_reshard_after_forward: "
                      "true|false")
        # FSDP2 has no sharding strategy: reshard_after_forward false keeps the gathered
        # parameters from forward to backward, ZeRO-2's memory (Accelerate turns FSDP1's
        # SHARD_GRAD_OP into reshard_after_forward=False: utils/dataclasses.py
        # FullyShardedDataParallelPlugin.__post_init__), so the scenario says zero 2
        raf = c.boolean("fsdp_config.fsdp_reshard_after_forward",
                        f.get("fsdp_reshard_after_forward", True))
        if raf is not None:
            if "fsdp_reshard_after_forward" in f:
                c.state("parallel.zero", 3 if raf else 2)
            else:
                c.default("parallel.zero", 3, "Accelerate: FSDP2 fsdp_reshard_after_forward "
                          "defaults to true (full shard)")
    else:
        # FSDP1: sharding_strategy, else reshard_after_forward names the strategy
        key = "fsdp_sharding_strategy" if "fsdp_sharding_strategy" in f else \
            "fsdp_reshard_after_forward"
        given = f.get(key)
        strategy = c.choice(f"fsdp_config.{key}", given if given is not None else "FULL_SHARD",
                            SHARDING)
        if strategy is not None:
            zero, hybrid = strategy
            if given is None:
                c.default("parallel.zero", 3, "Accelerate: FSDP1 sharding_strategy defaults "
                                              "to FULL_SHARD")
            else:
                c.state("parallel.zero", zero)
            if hybrid:   # HYBRID_SHARD: shard within a node, replicate across nodes
                per_node = c.reading.document.get("hardware", {}).get("gpus_per_node")
                if per_node is not None:
                    c.state("parallel.shard_group", per_node)
                    c.note(f"{given}: FSDP1 shards within each node ({per_node} GPUs) and "
                           "replicates across nodes")
    off = c.boolean("fsdp_config.fsdp_offload_params", f.get("fsdp_offload_params", False))
    if off is not None:
        if "fsdp_offload_params" in f:
            c.state("training.offload", "cpu" if off else "none")
        else:
            c.default("training.offload", "none", "Accelerate: fsdp_offload_params defaults "
                                                  "to false")
        if off:
            c.note("fsdp_offload_params: parameters, gradients and the optimizer step on the "
                   "CPU (FSDP CPUOffload); the workbench counts it as optimizer offload to cpu")
    ac = c.boolean("fsdp_config.fsdp_activation_checkpointing",
                   f.get("fsdp_activation_checkpointing", False))
    if ac:       # FSDP's own checkpoint wrapper around every wrapped (decoder) layer
        c.state("training.recompute", "full")
    if f.get("fsdp_activation_checkpointing_offload") and c.boolean(
            "fsdp_config.fsdp_activation_checkpointing_offload",
            f["fsdp_activation_checkpointing_offload"]):
        c.state("training.activation_offload", True)


def _deepspeed(c: Collector, d: dict) -> None:
    c.state("training.backend", "deepspeed")
    if d.get("deepspeed_config_file") not in (None, "", "none"):
        # utils/dataclasses.py DeepSpeedPlugin: with a config file the plugin's own keys
        # (zero_stage, offload, accumulation) come from that file instead
        c.note(f"deepspeed_config_file {d['deepspeed_config_file']}: the ZeRO stage, offload "
               f"and batch come from that DeepSpeed JSON; {ASK_FOR_DEEPSPEED}")
        return
    stage = c.choice("deepspeed_config.zero_stage", d.get("zero_stage", 2),
                     {str(s): s for s in (0, 1, 2, 3)})
    if stage is not None:
        if "zero_stage" in d:
            c.state("parallel.zero", stage)
        else:
            c.default("parallel.zero", 2, "Accelerate: DeepSpeedPlugin zero_stage defaults to 2")
    opt = c.choice("deepspeed_config.offload_optimizer_device",
                   d.get("offload_optimizer_device", "none"), OFFLOAD)
    par = c.choice("deepspeed_config.offload_param_device",
                   d.get("offload_param_device", "none"), OFFLOAD)
    if opt is not None:
        if "offload_optimizer_device" in d:
            c.state("training.offload", opt)
        else:
            c.default("training.offload", "none", "Accelerate: DeepSpeedPlugin "
                                                  "offload_optimizer_device defaults to none")
    if par not in (None, "none") and par != opt:
        c.problem("deepspeed_config.offload_param_device", par,
                  f"expected the same device as offload_optimizer_device ({opt}): the "
                  "workbench has one offload target")
    if "gradient_accumulation_steps" in d:
        n = c.integer("deepspeed_config.gradient_accumulation_steps",
                      d["gradient_accumulation_steps"])
        if n is not None:
            c.state("training.grad_accum", n)


def _parallelism(c: Collector, p: dict, kind: str | None) -> None:
    if not p:
        return
    size = {}
    for k in ("dp_replicate_size", "dp_shard_size", "tp_size", "cp_size", "sp_size"):
        v = c.integer(f"parallelism_config.parallelism_config_{k}",
                      p.get("parallelism_config_" + k, 1))
        size[k] = 1 if v is None else v
    # parallelism_config.py ParallelismConfig.__post_init__ and _validate_accelerator
    if size["cp_size"] > 1 and size["sp_size"] > 1:
        c.problem("parallelism_config.parallelism_config_sp_size", size["sp_size"],
                  "expected 1 with cp_size > 1: Accelerate's CP and SP are mutually exclusive")
    if size["sp_size"] > 1:
        c.problem("parallelism_config.parallelism_config_sp_size", size["sp_size"],
                  "DeepSpeed Ulysses sequence parallelism (ALST) is not modelled; expected 1")
    if size["cp_size"] > 1 and kind != "fsdp":
        c.problem("parallelism_config.parallelism_config_cp_size", size["cp_size"],
                  "expected 1: Accelerate's context parallelism runs with FSDP2 only")
    dp = size["dp_replicate_size"] * size["dp_shard_size"]
    c.state("parallel.tp", size["tp_size"])
    c.state("parallel.cp", size["cp_size"])
    if dp * size["tp_size"] * size["cp_size"] > 1:
        c.state("parallel.dp", dp)
    if size["dp_replicate_size"] > 1 and size["dp_shard_size"] > 1:
        # HSDP: FSDP shards over dp_shard x cp (parallelism_config.py dp_shard_cp), and the
        # scenario's shard_group counts dp x cp ranks (docs/scenario.md)
        c.state("parallel.shard_group", size["dp_shard_size"] * size["cp_size"])
    per_node = c.reading.document.get("hardware", {}).get("gpus_per_node")
    nodes = c.reading.document.get("hardware", {}).get("nodes", 1)
    total = dp * size["tp_size"] * size["cp_size"]
    if per_node is not None and total > 1 and total != per_node * nodes:
        # _validate_accelerator: total_size must equal num_processes
        c.problem("parallelism_config", total, f"expected dp_replicate x dp_shard x tp x cp "
                  f"= num_processes ({per_node * nodes})")


"""A torchtitan job config (TOML) read into scenario keys: the files
``workbench export --to torchtitan`` writes and torchtitan's own ``train_configs``.

Field names and defaults: pytorch/torchtitan ``torchtitan/config/job_config.py`` (v0.2.x, the
releases that read TOML; ``Parallelism``, ``Training``, ``ActivationCheckpoint``, ``Compile``);
the mesh: ``torchtitan/distributed/parallel_dims.py`` (dp_replicate x dp_shard x cp x tp x pp;
FSDP over dp_shard x cp); the schedule names: torch's ``get_schedule_class`` (the
``torchtitan`` name of each workbench schedule, ``workbench/scenario/schedules.py``). The
inverse of :mod:`workbench.export.torchtitan`.

Key families (decided per table): ``parallelism``, ``training``, ``activation_checkpoint``,
``compile``, ``model``, ``optimizer`` (name), ``float8`` / ``quantize.linear.*`` set memory and
time and are read; every other key of those tables is a problem line, except the ones listed
in :data:`NO_EFFECT` (learning rates, data sets, paths). Whole tables that hold only logging,
checkpoint files, profiling, data loading, fault tolerance or validation do not change memory
or step time and are listed as ignored in the notes (:data:`IGNORED_TABLES`).
"""
from __future__ import annotations

import tomllib

from workbench.catalog import CATALOGS
from workbench.errors import Problem
from workbench.imports.types import Reading
from workbench.documents.text import MAX_BYTES, DocumentError
from workbench.imports.common import check_digits, decimal_count
from workbench.scenario.schedules import SCHEDULE_NAMES, schedule

FORMAT = "torchtitan"

# Tables whose keys change neither memory nor step time (job_config.py sections for logging,
# checkpoint files, profiling, metrics, the learning-rate schedule, validation and recovery).
IGNORED_TABLES = ("job", "profiling", "metrics", "checkpoint", "lr_scheduler", "validation",
                  "fault_tolerance", "comm", "experimental", "memory_estimation", "debug")
# Keys of the read tables with no effect on memory or time.
NO_EFFECT = {
    "model": {"tokenizer_path", "hf_assets_path", "print_after_conversion"},
    "training": {"dataset", "dataset_path", "max_norm", "warmup_steps", "seed", "deterministic",
                 "gc_freq", "gc_debug", "mixed_precision_reduce", "enable_cpu_offload_optimizer"},
    "optimizer": {"lr", "eps", "beta1", "beta2", "weight_decay", "implementation",
                  "early_step_in_backward", "min_lr_factor"},
    "parallelism": {"pipeline_parallel_split_points", "pipeline_parallel_layers_per_stage",
                    "pipeline_parallel_first_stage_less_layers",
                    "pipeline_parallel_last_stage_less_layers", "disable_loss_parallel",
                    "enable_compiled_autograd", "fsdp_reshard_after_forward_policy",
                    "context_parallel_rotate_method", "expert_parallel_comm_backend"},
    "compile": {"components", "backend"},
    "activation_checkpoint": {"per_op_sac_force_recompute_mm_shapes_by_fqns",
                              "preserve_rng_state", "early_stop", "debug"},
    "float8": {"enable_fsdp_float8_all_gather", "precompute_float8_dynamic_scale_for_fsdp",
               "filter_fqns", "emulate", "recipe_name"},
}
# torchtitan 0.2.x defaults the reader fills (job_config.py): mode "selective" with
# selective_ac_option "2" (every 2nd block whole), mixed_precision_param "bfloat16",
# pipeline_parallel_schedule "1F1B", compile off
AC_DEFAULT = ("selective", "2")

# torchtitan schedule name -> workbench schedule
SCHEDULE = {schedule(n).torchtitan: n for n in SCHEDULE_NAMES}
# registered flavors -> workbench preset (the inverse of workbench.export.torchtitan.FLAVORS)
PRESETS = {("llama3", "8B"): "llama3-8b", ("llama3", "70B"): "llama3-70b",
           ("llama3", "405B"): "llama3-405b", ("deepseek_v3", "671B"): "deepseek-v3"}
# and the flavors of the published checkpoints in the catalog (pytorch/torchtitan @b5bcd76c
# torchtitan/models/{llama3,qwen3,gpt_oss,deepseek_v3}/__init__.py: llama3 "1B"/"3B" are Llama
# 3.2's tied shapes, deepseek_v3 "16B" is DeepSeek-V2-Lite's)
PRESETS.update({("llama3", "1B"): "llama3.2-1b", ("llama3", "3B"): "llama3.2-3b",
                **{("qwen3", f): f"qwen3-{f.lower()}" for f in ("0.6B", "1.7B", "4B", "8B",
                                                                "14B", "32B", "30B-A3B",
                                                                "235B-A22B")},
                ("gpt_oss", "20b"): "gpt-oss-20b", ("gpt_oss", "120b"): "gpt-oss-120b",
                ("deepseek_v3", "16B"): "deepseek-v2-lite"})
FP8_TABLES = {"quantize.linear.float8": "tensorwise", "float8": "tensorwise",
              "quantize.linear.mx": "mxfp8"}


def put(doc: dict, path: str, value: object) -> None:
    """Set dotted ``path`` in the nested ``doc`` (shared by the readers of this branch)."""
    *parents, last = path.split(".")
    for key in parents:
        doc = doc.setdefault(key, {})
    doc[last] = value


def looks_like(name: str, text: str) -> bool:
    """A ``.toml`` file, or text with torchtitan's ``[parallelism]`` / ``[training]`` tables."""
    return name.endswith(".toml") or ("[parallelism]" in text and "[training]" in text)


def _table(cfg: dict, dotted: str) -> dict | None:
    node = cfg
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def _int(r: Reading, table: str, key: str, value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        r.problems.append(Problem(f"{r.source}:{table}.{key}", value, "expected an integer"))
        return None
    return value


def read(name: str, text: str) -> Reading:
    """The TOML read into a :class:`Reading` (DocumentError for text TOML cannot parse)."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise DocumentError(name, f"more than {MAX_BYTES} bytes")
    try:
        cfg = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as err:
        raise DocumentError(name, f"not TOML: {str(err).splitlines()[0][:200]}",
                            syntax=True) from None
    except ValueError:   # an integer past int()'s 4,300 digits (tomllib/_re.py match_to_number)
        raise DocumentError(name, "not TOML the workbench reads: an integer of more than 4,300 "
                            "digits", syntax=True) from None
    check_digits(cfg, name)
    r = Reading(source=name, format=FORMAT)
    put(r.document, "training.engine", "torchtitan")     # a torchtitan job config
    known = {"parallelism", "training", "activation_checkpoint", "compile", "model",
             "optimizer", "float8", "quantize"}
    for table in cfg:
        if table in IGNORED_TABLES:
            r.notes.append(f"[{table}] ignored: no effect on memory or step time")
        elif table not in known:
            r.problems.append(Problem(f"{name}:{table}", None, "not a torchtitan job-config "
                                      "table the workbench reads (parallelism, training, "
                                      "activation_checkpoint, compile, model, optimizer, "
                                      "float8, quantize)"))
    # a known table given as a value or an array of tables ([[training]]): a problem, read
    # as empty, so each section below meets a table
    for table in known:
        if table in cfg and not isinstance(cfg[table], dict):
            r.problems.append(Problem(f"{name}:{table}", cfg[table], "expected a [table]"))
            cfg[table] = {}
    par = _parallel(r, cfg.get("parallelism", {}))
    _training(r, cfg.get("training", {}), par)
    _recompute(r, cfg.get("activation_checkpoint"))
    _model(r, cfg.get("model", {}), cfg)
    _optimizer(r, cfg.get("optimizer", {}))
    comp = cfg.get("compile", {})
    _unknown(r, "compile", comp, {"enable"})
    if "enable" in comp:
        # compile.components (default ["model", "loss"], torchtitan config/configs.py): the
        # model runs compiled only when "model" is among them
        parts = comp.get("components", ["model", "loss"])
        model = not isinstance(parts, list) or "model" in parts
        put(r.document, "training.compile", bool(comp["enable"]) and model)
        if comp["enable"] and not model:
            r.notes.append(f"compile.components {parts}: the model runs uncompiled (a compiled "
                           "loss alone is not modelled: its logits are counted as eager)")
    return r


def _unknown(r: Reading, table: str, values: dict, read_keys: set[str]) -> None:
    for key in values:
        if key not in read_keys and key not in NO_EFFECT.get(table, ()):
            r.problems.append(Problem(f"{r.source}:{table}.{key}", values[key],
                                      f"not a [{table}] key the workbench reads"))


def _parallel(r: Reading, p: dict) -> dict:
    """Degrees from [parallelism]; returns what was read (dp may be unknown: -1)."""
    keys = {"data_parallel_replicate_degree", "data_parallel_shard_degree",
            "fsdp_reshard_after_forward", "tensor_parallel_degree",
            "enable_async_tensor_parallel", "pipeline_parallel_degree",
            "pipeline_parallel_schedule", "pipeline_parallel_microbatch_size",
            "module_fqns_per_model_part", "context_parallel_degree", "expert_parallel_degree",
            "expert_tensor_parallel_degree"}
    _unknown(r, "parallelism", p, keys)
    deg = {}
    for key, default in (("data_parallel_replicate_degree", 1),
                         ("data_parallel_shard_degree", -1), ("tensor_parallel_degree", 1),
                         ("pipeline_parallel_degree", 1), ("context_parallel_degree", 1),
                         ("expert_parallel_degree", 1)):
        deg[key] = _int(r, "parallelism", key, p[key]) if key in p else default
    replicate, shard = deg["data_parallel_replicate_degree"], deg["data_parallel_shard_degree"]
    tp, pp, cp = (deg["tensor_parallel_degree"], deg["pipeline_parallel_degree"],
                  deg["context_parallel_degree"])
    for key, value in (("tp", tp), ("pp", pp), ("cp", cp)):
        if value is not None:
            put(r.document, f"parallel.{key}", value)
    if tp and tp > 1:
        # torchtitan 0.2.x always shards norms along the sequence with TP (parallelize.py)
        put(r.document, "parallel.sequence_parallel", True)
    if "enable_async_tensor_parallel" in p:
        put(r.document, "parallel.async_tp", bool(p["enable_async_tensor_parallel"]))
    policy = p.get("fsdp_reshard_after_forward")
    fsdp = (shard is not None and (shard > 1 or shard == -1)) or (cp or 1) > 1 \
        or policy is not None
    if replicate is None or shard is None:
        return {}
    dp = None       # -1: FSDP over what the other degrees leave; the rest of the table is read
    if shard == -1:
        r.notes.append("parallelism.data_parallel_shard_degree = -1: FSDP over the GPUs the "
                       "other degrees leave (parallel_dims.py); parallel.dp follows from the "
                       "hardware")
        if replicate > 1:
            r.problems.append(Problem(f"{r.source}:parallelism.data_parallel_shard_degree", -1,
                                      "an HSDP replicate degree needs an explicit shard degree"))
    else:
        dp = replicate * shard
        put(r.document, "parallel.dp", dp)
    if not fsdp:
        put(r.document, "parallel.zero", 0)   # DDP (replicate) or nothing to shard
    else:
        if policy == "never":
            # TT docs/fsdp.md: reshard_after_forward never = SHARD_GRAD_OP, ZeRO-2
            put(r.document, "parallel.zero", 2)
        else:
            put(r.document, "parallel.zero", 3)
            if policy in ("always",):
                put(r.document, "parallel.reshard_after_forward", True)
            elif policy not in (None, "default"):
                r.problems.append(Problem(f"{r.source}:parallelism.fsdp_reshard_after_forward",
                                          policy, "expected default, always or never"))
        if replicate > 1 and dp is not None:
            put(r.document, "parallel.shard_group", shard * (cp or 1))
    if pp and pp > 1:
        name = p.get("pipeline_parallel_schedule", "1F1B")
        if "pipeline_parallel_schedule" not in p:
            r.defaulted["parallel.pp_schedule"] = ("torchtitan's pipeline_parallel_schedule "
                                                   "defaults to 1F1B")
        sched = SCHEDULE.get(name) if isinstance(name, str) else None
        if sched is None:
            r.problems.append(Problem(f"{r.source}:parallelism.pipeline_parallel_schedule", name,
                                      "expected one of " + ", ".join(SCHEDULE)))
        else:
            put(r.document, "parallel.pp_schedule", sched)
            parts = p.get("module_fqns_per_model_part")
            # stages per rank: v for interleaved schedules; DualPipeV holds 2 chunks with v 1
            v = len(parts) // pp if isinstance(parts, list) and parts else 1
            put(r.document, "parallel.virtual_stages", 1 if sched == "dualpipev" else max(1, v))
    ep = deg["expert_parallel_degree"]
    if ep is not None and ep > 1:
        put(r.document, "parallel.ep", ep)
        etp = p.get("expert_tensor_parallel_degree")
        if isinstance(etp, int) and etp != tp:
            put(r.document, "parallel.expert_tp", etp)
    out = {"dp": dp}
    if pp and pp > 1:
        # pipeline_parallel_microbatch_size defaults to 1 (job_config.py)
        out["micro"] = p.get("pipeline_parallel_microbatch_size", 1)
    return out


def _training(r: Reading, t: dict, par: dict) -> None:
    keys = {"local_batch_size", "batch_size", "global_batch_size", "seq_len", "steps",
            "mixed_precision_param", "enable_cpu_offload", "compile"}
    _unknown(r, "training", t, keys)
    pp = r.document.get("parallel", {}).get("pp", 1)
    local = t.get("local_batch_size", t.get("batch_size"))   # batch_size: before 0.2
    if local is None:
        local = 8
        r.defaulted["training.micro_batch"] = "torchtitan's local_batch_size defaults to 8"
    # with pp > 1 the local batch splits into pipeline microbatches (pipeline_parallel.py)
    put(r.document, "training.micro_batch", par.get("micro", local) if pp > 1 else local)
    dp = par.get("dp")
    gb = t.get("global_batch_size", -1)
    if isinstance(gb, int) and gb > 0:
        put(r.document, "training.global_batch", gb)
    elif dp and isinstance(local, int) and not isinstance(local, bool):
        # train.py: global_batch_size -1 = local_batch_size x the data-parallel degree (a
        # local batch that is not a number is the validator's to name, never multiplied)
        put(r.document, "training.global_batch", local * dp)
        r.defaulted["training.global_batch"] = ("torchtitan's global_batch_size defaults to "
                                                "local_batch_size x dp (no accumulation)")
    if "seq_len" in t:
        put(r.document, "training.seq_len", t["seq_len"])
    prec = t.get("mixed_precision_param", "bfloat16")
    if "mixed_precision_param" not in t:
        r.defaulted["training.precision"] = ("torchtitan's mixed_precision_param defaults to "
                                             "bfloat16")
    if prec not in ("bfloat16", "float32"):
        r.problems.append(Problem(f"{r.source}:training.mixed_precision_param", prec,
                                  "expected bfloat16 or float32"))
    else:
        put(r.document, "training.precision", "bf16" if prec == "bfloat16" else "fp32")
    if t.get("enable_cpu_offload"):
        put(r.document, "training.offload", "cpu")
    if "compile" in t:   # before 0.2: [training] compile
        put(r.document, "training.compile", bool(t["compile"]))
    steps, gbs, seq = (t.get("steps"), r.document.get("training", {}).get("global_batch"),
                       t.get("seq_len"))
    if all(isinstance(v, int) and v > 0 for v in (steps, gbs, seq)):
        # (each at most 40 digits, check_digits: the product is within the float range)
        put(r.document, "training.tokens", float(steps * gbs * seq))
    elif isinstance(steps, int) and steps > 0 and gbs is None and dp is None:
        # shard degree -1: dp, and with it the batch and the tokens, follow from the GPUs the
        # hardware gives (the merge's helpers: tokens = steps x global batch x seq_len, the
        # global batch = micro-batch x accumulation x dp, the local batch split into pipeline
        # microbatches as the accumulation)
        put(r.document, "training.steps", steps)
        micro = r.document["training"]["micro_batch"]
        accum = local // micro if pp > 1 and isinstance(local, int) and isinstance(
            micro, int) and micro > 0 and local % micro == 0 else 1
        put(r.document, "training.grad_accum", accum)


def _recompute(r: Reading, ac: dict | None) -> None:
    if ac is None:
        ac = {}
        r.defaulted["training.recompute"] = ("torchtitan's activation_checkpoint.mode defaults "
                                             "to selective, selective_ac_option 2 (every 2nd "
                                             "block)")
    _unknown(r, "activation_checkpoint", ac, {"mode", "selective_ac_option"})
    mode = ac.get("mode", AC_DEFAULT[0])
    option = str(ac.get("selective_ac_option", AC_DEFAULT[1]))
    if mode in ("none", "full"):
        put(r.document, "training.recompute", mode)
    elif mode == "selective" and option == "op":
        put(r.document, "training.recompute", "op")
    elif mode == "selective" and (decimal_count(option) or 0) > 0:
        put(r.document, "training.recompute", "layer")
        put(r.document, "training.recompute_every", decimal_count(option))
    else:
        r.problems.append(Problem(f"{r.source}:activation_checkpoint", f"{mode}/{option}",
                                  "expected mode none, full, or selective with "
                                  "selective_ac_option op or a positive integer"))


def _model(r: Reading, m: dict, cfg: dict) -> None:
    _unknown(r, "model", m, {"name", "flavor", "converters"})
    key = (m.get("name"), m.get("flavor"))
    named = all(isinstance(k, (str, type(None))) for k in key)
    preset = PRESETS.get(key) if named else None
    if preset is None and named and str(m.get("flavor", "")).lower() in CATALOGS["model"]:
        # a flavor named after a catalog key: what the workbench's export asks to register
        # for a shape torchtitan has no flavor of (workbench/export/torchtitan.py)
        preset = str(m.get("flavor")).lower()
    if preset:
        put(r.document, "model.preset", preset)
    elif "flavor" in m and named:     # never another model in its place: its shape is asked for
        r.problems.append(Problem(f"{r.source}:model.flavor", f"{m.get('name')} "
                                  f"{m.get('flavor')}", "is not in the workbench's model "
                                  "catalog: pass the model's config.json beside this file "
                                  f"(workbench import config.json {r.source})"))
    given = m.get("converters", [])
    if not isinstance(given, list):
        r.problems.append(Problem(f"{r.source}:model.converters", given, "expected a list"))
        given = []
    conv = [c for c in given if isinstance(c, str)]
    recipe, gather = None, False
    for c in conv:
        if c in ("float8", "quantize.linear.float8"):
            table = _table(cfg, "quantize.linear.float8") or _table(cfg, "float8") or {}
            name = table.get("recipe_name")
            recipe = "tensorwise" if name is None else name
            if table.get("enable_fsdp_float8_all_gather") is True:
                gather = True     # training.fp8_param_gather
        elif c in ("mx", "quantize.linear.mx"):
            recipe = "mxfp8"
        else:
            r.problems.append(Problem(f"{r.source}:model.converters", c, "expected float8 / "
                                      "quantize.linear.float8 or quantize.linear.mx"))
    if recipe:
        put(r.document, "training.precision", "fp8")
        if recipe not in ("tensorwise", "rowwise", "mxfp8"):
            r.problems.append(Problem(f"{r.source}:quantize.linear.float8.recipe_name", recipe,
                                      "expected tensorwise (unset), rowwise or mxfp8"))
        else:
            put(r.document, "training.fp8_recipe", recipe)
            if gather:
                put(r.document, "training.fp8_param_gather", True)


def _optimizer(r: Reading, o: dict) -> None:
    _unknown(r, "optimizer", o, {"name"})
    name = o.get("name", "AdamW")
    if name in ("AdamW", "Adam"):
        put(r.document, "training.optimizer", "adamw")
    else:
        r.problems.append(Problem(f"{r.source}:optimizer.name", name, "expected AdamW or Adam "
                                  "(torchtitan's build_optimizers)"))

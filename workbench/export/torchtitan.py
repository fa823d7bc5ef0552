"""A torchtitan job config (TOML) with the scenario's layout.

Target: torchtitan 0.2.x, the releases that read TOML job configs (``--job.config_file``);
torchtitan 0.3.0 replaced TOML with Python config registries, but its ``[parallelism]`` and
``[training]`` field names are the same and can be passed as ``--parallelism.<field>`` flags.
Field names and choices: pytorch/torchtitan ``torchtitan/config/job_config.py`` (0.2.2 wheel,
stored with its hash in tests/data/torchtitan_0.2.2_job_config.json, which the tests check
every exported key against). Mesh rules: ``torchtitan/distributed/parallel_dims.py``; what is
applied: ``torchtitan/models/llama3/infra/parallelize.py``; pipeline stages:
``torchtitan/distributed/pipeline_parallel.py``.

What torchtitan cannot express is REFUSED (an :class:`ExportError` naming the field), never
dropped. The limits are the torchtitan engine record's (workbench/engines/torchtitan.py, each
cited there), asked through the rule table as the validator and the planner ask it: ZeRO-1 (FSDP2 always shards gradients; ZeRO-2 is written as
``fsdp_reshard_after_forward = "never"``, TT docs/fsdp.md), DDP combined with TP/PP/CP
(torchtitan applies FSDP whenever CP is on and raises "DDP has not supported > 1D parallelism"),
TP without sequence parallelism (0.2.x always shards the sequence with TP), fp16 (only
bfloat16/float32 mixed precision), NVMe offload, SGD (only Adam/AdamW), HSDP shard groups that
do not hold whole CP groups, EP degrees that do not divide FSDP x CP, and MXFP8 off Blackwell or
with TP under torch.compile. What torchtitan
expresses only approximately is kept with a TOML comment saying so: selective recompute
(torchtitan's is op-level, not Korthikanti's attention-only recompute), the attention kernel
(SDPA picks it) and model shapes that are not a registered torchtitan flavor.

Engine switches (contract 1 additions), keys from the torchtitan engine record's ``flags``
(workbench/engines/torchtitan.py) and checked against pytorch/torchtitan v0.2.2 =
commit 73a0e6979dd10b6b1904098eb3c8f62c18ab87ce ``torchtitan/config/job_config.py`` (the file
whose hash the tests' schema stores): ``training.compile`` -> ``[compile] enable``,
``components = ["model", "loss"]``; ``parallel.async_tp`` ->
``parallelism.enable_async_tensor_parallel`` (torchtitan/distributed/tensor_parallel.py
maybe_enable_async_tp raises without compile, so async TP turns compile on, with a note);
``training.fp8_recipe`` -> :data:`FP8`; ``training.recompute: op`` -> ``mode = "selective"``,
``selective_ac_option = "op"``; ``parallel.expert_tp`` -> ``expert_tensor_parallel_degree``
(1 or tp only: parallel_dims.py asserts "ETP=TP or ETP=1"). What does not carry over (a
scenario estimated for another engine, Megatron's delayed scaling) is a header comment and a
warning in the :class:`Exported` result.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from workbench.estimate.model.params import chunk_layers
from workbench.export.common import (
    Exported, Notes, Source, fp8_recipe, layout_summary, model_label, preset_key,
    refuse_what_engine_cannot_run, spelling, train_steps,
)
from workbench.scenario.schedules import schedule
from workbench.scenario.types import Scenario

TARGET = "torchtitan"
ENGINE = "torchtitan"   # the workbench.engines record whose switches this format carries

# training.fp8_recipe -> (model.converters entry = its config table, recipe_name or None).
# torchtitan v0.2.2 (commit above): components/quantization/float8.py registers
# "quantize.linear.float8"; with recipe_name unset it builds tensorwise scaling (and asserts
# that recipe_name is not combined with enable_fsdp_float8_all_gather), recipe_name choices
# tensorwise | rowwise | rowwise_with_gw_hp (job_config.py Float8Linear); mx.py registers
# "quantize.linear.mx", recipe "mxfp8_cublas" (docs/mxfp8.md; SM100+ only).
FP8 = {"tensorwise": ("quantize.linear.float8", None),
       "rowwise": ("quantize.linear.float8", "rowwise"),
       "mxfp8": ("quantize.linear.mx", "mxfp8_cublas")}


# Presets that are registered torchtitan flavors (torchtitan/models/<name>/__init__.py).
FLAVORS = {"llama3-8b": ("llama3", "8B"), "llama3-70b": ("llama3", "70B"),
           "llama3-405b": ("llama3", "405B"), "deepseek-v3": ("deepseek_v3", "671B")}


@dataclass
class Section:
    """One TOML table: its entries and the comments that go with them."""

    name: str
    entries: list[tuple[str, object, str]] = field(default_factory=list)

    def set(self, key: str, value: object, comment: str = "") -> None:
        self.entries.append((key, value, comment))


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)   # a JSON string is a valid TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def _put(sec: Section, key: str, value: object, comment: str = "") -> None:
    """Set a dotted job-config key (``parallelism.enable_async_tensor_parallel``) in its table."""
    table, _, name = key.rpartition(".")
    assert table == sec.name, f"{key} does not belong in [{sec.name}]"
    sec.set(name, value, comment)


def _render(sections: list[Section], header: list[str]) -> str:
    out = [f"# {h}" if h else "#" for h in header]
    for sec in sections:
        out += ["", f"[{sec.name}]"]
        for key, value, comment in sec.entries:
            line = f"{key} = {_toml(value)}"
            out.append(line + (f"  # {comment}" if comment else ""))
    return "\n".join(out) + "\n"


def _fqns_per_stage(s: Scenario) -> list[list[str]]:
    """Module names of each pipeline stage (torchtitan's module_fqns_per_model_part), split
    exactly as the estimator splits them (workbench.estimate.model.params.chunk_layers): embedding
    on the first stage, final norm and output on the last."""
    stages = s.parallel.pp * s.parallel.chunks_per_rank
    parts = [[f"layers.{i}" for i in run] for run in chunk_layers(s.model.layers, stages)]
    parts[0].insert(0, "tok_embeddings")
    parts[-1] += ["norm", "output"]
    return parts


def torchtitan_sections(s: Scenario) -> tuple[list[Section], list[str], list[str]]:
    """The job config's tables, the header comments and the warnings (what does not carry
    over, also in the header); raises ExportError listing every field torchtitan cannot
    express."""
    par, tr, m = s.parallel, s.training, s.model
    refuse_what_engine_cannot_run(s, ENGINE, TARGET)
    notes: list[str] = []
    warn = Notes(s, ENGINE, TARGET)

    # --- data parallelism: job_config.py Parallelism.data_parallel_{replicate,shard}_degree;
    # parallel_dims.py: dp_replicate * dp_shard * cp * tp * pp == world, FSDP over dp_shard x cp.
    # HSDP: scenario.py's dense_shard = shard_group ranks of dp x cp; torchtitan's FSDP group is
    # dp_shard x cp, so dp_shard = shard_group / cp (the record's hsdp_whole_cp) and the rest
    # replicates.
    replicate, shard = 1, par.dp
    if par.zero == 0:
        replicate, shard = par.dp, 1
    elif par.shard_group:
        shard = par.shard_group // par.cp
        replicate = par.dp * par.cp // par.shard_group
    recipe = fp8_recipe(s) or ("tensorwise" if tr.precision == "fp8" else None)
    if recipe not in (None, *FP8):
        warn.add("training.fp8_recipe", recipe, f"torchtitan has no {recipe} scaling "
                 "(job_config.py Float8Linear: tensorwise, rowwise; MX); exported tensorwise")
        recipe = "tensorwise"
    # Megatron's TE comm overlap carries over as torchtitan's own TP overlap, async TP
    tp_overlap = (par.async_tp or par.tp_comm_overlap) and par.tp > 1
    compiled = tr.compile or tp_overlap
    etp = par.etp if par.ep > 1 else 1   # torchtitan: etp has no effect with ep = 1
    if par.async_tp and par.tp == 1:
        warn.add("parallel.async_tp", True, "no tensor parallelism to overlap (tp = 1); "
                 "enable_async_tensor_parallel stays false")
    if tp_overlap and not tr.compile:
        warn.add("parallel.async_tp" if par.async_tp else "parallel.tp_comm_overlap", True, "torchtitan's async TP needs torch.compile "
                 "(tensor_parallel.py maybe_enable_async_tp raises without it), so compile.enable "
                 "= true although the estimate has training.compile = false")
    if par.expert_tp is not None and par.ep == 1:
        warn.add("parallel.expert_tp", par.expert_tp, "no effect without expert parallelism "
                 "(ep = 1; torchtitan ignores expert TP then)")

    job = Section("job")
    job.set("description", f"{model_label(s)}: {layout_summary(s)}")

    model = Section("model")
    flavor = FLAVORS.get(preset_key(s) or "")
    if flavor:
        model.set("name", flavor[0])
        model.set("flavor", flavor[1])
    else:
        # Shapes come only from registered flavors; say what must be registered.
        name = "deepseek_v3" if m.moe else "llama3"
        key = preset_key(s) or "workbench-custom"
        model.set("name", name, "closest torchtitan model family")
        model.set("flavor", key, f"NOT a torchtitan flavor: register it in torchtitan/models/"
                  f"{name}/__init__.py with the shape below")
        notes.append(f"Model shape to register as flavor '{key}': layers {m.layers}, hidden "
                     f"{m.hidden}, heads {m.heads}, kv_heads {m.kv_heads}, ffn {m.ffn_hidden}, "
                     f"vocab {m.vocab}" + (f", {m.moe.experts} experts top-{m.moe.top_k} of "
                                           f"ffn {m.moe.expert_ffn_hidden}" if m.moe else ""))
    if recipe:
        # torchao float8 / MX linears (the converter names FP8 cites)
        model.set("converters", [FP8[recipe][0]], "FP8 matmuls (torchao)")

    training = Section("training")
    if par.pp > 1:
        # pipeline: one local batch per step, split into pipeline microbatches
        # (pipeline_parallel.py: n_microbatches = local_batch_size / microbatch_size)
        training.set("local_batch_size", tr.micro_batch * s.microbatches,
                     f"{s.microbatches} pipeline microbatches of {tr.micro_batch}")
    else:
        # gradient accumulation: global / (local * dp) steps (train.py)
        training.set("local_batch_size", tr.micro_batch,
                     f"{s.microbatches} gradient-accumulation steps")
    training.set("global_batch_size", tr.global_batch)
    training.set("seq_len", tr.seq_len)
    training.set("steps", train_steps(s), "training.tokens / (global_batch x seq_len)")
    # FSDP2 MixedPrecisionPolicy: compute dtype of params, fp32 reductions
    training.set("mixed_precision_param", "float32" if tr.precision == "fp32" else "bfloat16")
    training.set("mixed_precision_reduce", "float32")
    if tr.offload == "cpu":
        training.set("enable_cpu_offload", True,
                     "FSDP2 CPUOffloadPolicy: params, grads and optimizer states in host memory")

    pl = Section("parallelism")
    pl.set("data_parallel_replicate_degree", replicate,
           "HSDP replicas" if par.shard_group and par.zero >= 2 else
           ("DDP" if par.zero == 0 else ""))
    pl.set("data_parallel_shard_degree", shard, "FSDP2 shards over this x context_parallel_degree"
           if par.zero >= 2 else "")
    if par.zero >= 2:
        # ZeRO-2 = FSDP2 without resharding after forward (TT docs/fsdp.md: SHARD_GRAD_OP ->
        # reshard_after_forward=False, "ZeRO-2")
        policy = "never" if par.zero == 2 else {None: "default", True: "always",
                                                False: "never"}[par.reshard_after_forward]
        pl.set("fsdp_reshard_after_forward", policy,
               "default: reshard unless pipeline parallel (as the estimator assumes)"
               if policy == "default" else "")
    pl.set("tensor_parallel_degree", par.tp, "with sequence parallelism" if par.tp > 1 else "")
    _put(pl, spelling(ENGINE, "async_tp"), tp_overlap,
         "TP collectives overlapped with their matmuls (needs compile)" if tp_overlap else "")
    pl.set("pipeline_parallel_degree", par.pp)
    if par.pp > 1:
        # the string torchtitan passes to get_schedule_class()
        # (torch/distributed/pipelining/schedules.py schedule_map)
        pl.set("pipeline_parallel_schedule", schedule(par.pp_schedule).torchtitan)
        pl.set("pipeline_parallel_microbatch_size", tr.micro_batch)
        # explicit stage contents: the estimator's split, not torchtitan's weighted default
        pl.set("module_fqns_per_model_part", _fqns_per_stage(s),
               f"{par.pp * par.chunks_per_rank} stages, {par.chunks_per_rank} per rank")
    pl.set("context_parallel_degree", par.cp)
    if m.moe is not None:
        pl.set("expert_parallel_degree", par.ep)
        # the workbench splits experts over TP as well (validate.py: expert_ffn_hidden % tp),
        # which is torchtitan's etp = tp
        # (parallel.expert_tp 1 = folding: EP takes its ranks from dp_shard x cp x tp)
        _put(pl, spelling(ENGINE, "expert_tp"), etp)

    ac = Section("activation_checkpoint")
    # job_config.py ActivationCheckpoint: mode none|selective|full|memory_budget,
    # selective_ac_option 'op' (per-op SAC) or an int (every n-th layer)
    ac.set("mode", "selective" if tr.recompute in ("op", "layer") else tr.recompute)
    if tr.recompute == "selective":
        # torchtitan has no attention-only recompute; per-op SAC is its closest selective mode
        ac.set("selective_ac_option", "op", "op-level SAC: recomputes about half the matmuls, "
               "not only attention as the estimator's selective (Korthikanti et al.) does")
    elif tr.recompute == "op":
        ac.set("selective_ac_option", "op", "per-op selective checkpointing (training.recompute "
               "op)")
    elif tr.recompute == "layer":
        ac.set("selective_ac_option", str(tr.recompute_every),
               f"one block in every {tr.recompute_every} checkpointed whole (training.recompute "
               "layer)")

    opt = Section("optimizer")
    opt.set("name", "AdamW")

    sections = [job, model, training, pl, ac, opt]
    if compiled:
        comp = Section("compile")
        _put(comp, spelling(ENGINE, "compile"), True)
        # job_config.py Compile's default: each TransformerBlock (parallelize.py apply_compile)
        # and the loss
        comp.set("components", ["model", "loss"])
        sections.append(comp)
    if recipe:
        table, name = FP8[recipe]
        f8 = Section(table)
        if name:
            f8.set("recipe_name", name, "MXFP8 linears (Blackwell, SM100+)"
                   if recipe == "mxfp8" else "")
        elif par.zero >= 2 and tr.fp8_param_gather:
            # training.fp8_param_gather. tensorwise = recipe_name unset; float8 all-gather is
            # for tensorwise scaling with FSDP (job_config.py Float8Linear) and asserts against
            # a recipe_name (float8.py)
            f8.set(spelling(ENGINE, "fp8_param_gather").rsplit(".", 1)[1], True,
                   "tensorwise scaling (no recipe_name)")
            f8.set("precompute_float8_dynamic_scale_for_fsdp", True)
        f8.set("filter_fqns", ["output"], "keep the output projection in bf16"
               + ("" if name or par.zero >= 2 else "; tensorwise scaling (no recipe_name)"))
        sections.append(f8)

    if tr.attention == "eager":
        notes.append("attention: torchtitan uses SDPA/flex attention, not eager attention")
    header = [f"torchtitan job config (TOML, torchtitan 0.2.x: --job.config_file) for "
              f"{model_label(s)}", f"layout: {layout_summary(s)}", *notes,
              *(f"NOTE: {w}" for w in warn.items)]
    return sections, header, warn.items


def torchtitan_config(s: Scenario) -> dict[str, dict]:
    """The job config as a nested dict (what ``tomllib.loads(to_torchtitan(s))`` returns)."""
    sections, _, _ = torchtitan_sections(s)
    out: dict[str, dict] = {}
    for sec in sections:
        node = out
        for part in sec.name.split("."):
            node = node.setdefault(part, {})
        node.update({k: v for k, v, _ in sec.entries})
    return out


def to_torchtitan(s: Scenario, source: Source = Source()) -> Exported:
    """The torchtitan job config TOML (``source`` is unused: the TOML holds the layout), with
    ``.warnings`` for what does not carry over (also header comments)."""
    sections, header, warnings = torchtitan_sections(s)
    return Exported(_render(sections, header), warnings)

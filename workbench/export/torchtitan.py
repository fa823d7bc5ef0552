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
dropped: ZeRO-1/2 (torchtitan shards with FSDP2 only, i.e. ZeRO-3), DDP combined with TP/PP/CP
(torchtitan applies FSDP whenever CP is on and raises "DDP has not supported > 1D parallelism"),
TP without sequence parallelism (0.2.x always shards the sequence with TP), fp16 (only
bfloat16/float32 mixed precision), NVMe offload, SGD (only Adam/AdamW), HSDP shard groups that
do not hold whole CP groups, and EP degrees that do not divide FSDP x CP. What torchtitan
expresses only approximately is kept with a TOML comment saying so: selective recompute
(torchtitan's is op-level, not Korthikanti's attention-only recompute), the attention kernel
(SDPA picks it) and model shapes that are not a registered torchtitan flavor.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from workbench.estimate.params import chunk_layers
from workbench.export.common import (
    Refusals, Source, layout_summary, model_label, preset_key, train_steps,
)
from workbench.scenario.schedules import schedule
from workbench.scenario.types import Scenario

TARGET = "torchtitan"


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
    exactly as the estimator splits them (workbench.estimate.params.chunk_layers): embedding
    on the first stage, final norm and output on the last."""
    stages = s.parallel.pp * s.parallel.chunks_per_rank
    parts = [[f"layers.{i}" for i in run] for run in chunk_layers(s.model.layers, stages)]
    parts[0].insert(0, "tok_embeddings")
    parts[-1] += ["norm", "output"]
    return parts


def torchtitan_sections(s: Scenario) -> tuple[list[Section], list[str]]:
    """The job config's tables and the header comments; raises ExportError listing every
    field torchtitan cannot express."""
    par, tr, m = s.parallel, s.training, s.model
    no = Refusals(TARGET)
    notes: list[str] = []

    # --- data parallelism: job_config.py Parallelism.data_parallel_{replicate,shard}_degree;
    # parallel_dims.py: dp_replicate * dp_shard * cp * tp * pp == world, FSDP over dp_shard x cp.
    replicate, shard = 1, par.dp
    if par.zero in (1, 2):
        no.add("parallel.zero", par.zero, "torchtitan shards with FSDP2 only (ZeRO-3); it has "
               "no ZeRO-1/2. Use zero 3 (or zero 0 for pure DDP), or --to megatron/deepspeed")
    elif par.zero == 0:
        if par.tp > 1 or par.pp > 1 or par.cp > 1 or par.ep > 1:
            no.add("parallel.zero", 0, "torchtitan applies DDP only to pure data parallelism "
                   "(it uses FSDP whenever CP is on and raises 'DDP has not supported > 1D "
                   "parallelism' otherwise); use zero 3")
        replicate, shard = par.dp, 1
    elif par.shard_group:
        # HSDP: scenario.py's dense_shard = shard_group ranks of dp x cp; torchtitan's FSDP
        # group is dp_shard x cp, so dp_shard = shard_group / cp and the rest replicates.
        if par.shard_group % par.cp:
            no.add("parallel.shard_group", par.shard_group, f"torchtitan's FSDP group is "
                   f"dp_shard x cp, so the shard group must hold whole CP groups (a multiple "
                   f"of cp = {par.cp})")
        else:
            shard = par.shard_group // par.cp
            replicate = par.dp * par.cp // par.shard_group
    if par.ep > 1 and (shard * par.cp) % par.ep:
        # parallel_dims.py (etp = tp): efsdp = dp_shard * cp / ep must be a whole number
        no.add("parallel.ep", par.ep, f"torchtitan takes EP ranks from dp_shard x cp = "
               f"{shard * par.cp} (the FSDP group, not the HSDP replicas)")
    if par.tp > 1 and not par.sequence_parallel:
        no.add("parallel.sequence_parallel", False, "torchtitan 0.2.x always applies sequence "
               "parallelism with TP (0.3.0 has parallelism.enable_sequence_parallel)")
    if tr.precision == "fp16":
        no.add("training.precision", "fp16", "torchtitan's mixed precision is bfloat16 or "
               "float32 only (training.mixed_precision_param)")
    if tr.offload == "nvme":
        no.add("training.offload", "nvme", "torchtitan offloads to CPU memory only "
               "(training.enable_cpu_offload, FSDP2 CPUOffloadPolicy)")
    if tr.optimizer != "adamw":
        no.add("training.optimizer", tr.optimizer, "torchtitan builds Adam or AdamW only "
               "(components/optimizer.py)")
    no.raise_any()

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
    if tr.precision == "fp8":
        # torchao float8 linears (components/quantization/float8.py registers this converter)
        model.set("converters", ["quantize.linear.float8"], "FP8 matmuls (torchao)")

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
           "HSDP replicas" if par.shard_group and par.zero == 3 else
           ("DDP" if par.zero == 0 else ""))
    pl.set("data_parallel_shard_degree", shard, "FSDP2 shards over this x context_parallel_degree"
           if par.zero == 3 else "")
    if par.zero == 3:
        policy = {None: "default", True: "always", False: "never"}[par.reshard_after_forward]
        pl.set("fsdp_reshard_after_forward", policy,
               "default: reshard unless pipeline parallel (as the estimator assumes)"
               if policy == "default" else "")
    pl.set("tensor_parallel_degree", par.tp, "with sequence parallelism" if par.tp > 1 else "")
    pl.set("enable_async_tensor_parallel", False)
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
        pl.set("expert_tensor_parallel_degree", par.tp if par.ep > 1 else 1)

    ac = Section("activation_checkpoint")
    ac.set("mode", tr.recompute)
    if tr.recompute == "selective":
        ac.set("selective_ac_option", "op", "op-level SAC: recomputes about half the matmuls, "
               "not only attention as the estimator's selective (Korthikanti et al.) does")

    opt = Section("optimizer")
    opt.set("name", "AdamW")

    sections = [job, model, training, pl, ac, opt]
    if tr.precision == "fp8":
        f8 = Section("quantize.linear.float8")
        f8.set("recipe_name", "tensorwise")
        if par.zero == 3:
            # float8 all-gather is for tensorwise scaling with FSDP (job_config.py Float8Linear)
            f8.set("enable_fsdp_float8_all_gather", True)
            f8.set("precompute_float8_dynamic_scale_for_fsdp", True)
        f8.set("filter_fqns", ["output"], "keep the output projection in bf16")
        sections.append(f8)

    if tr.attention == "eager":
        notes.append("attention: torchtitan uses SDPA/flex attention, not eager attention")
    header = [f"torchtitan job config (TOML, torchtitan 0.2.x: --job.config_file) for "
              f"{model_label(s)}", f"layout: {layout_summary(s)}", *notes]
    return sections, header


def torchtitan_config(s: Scenario) -> dict[str, dict]:
    """The job config as a nested dict (what ``tomllib.loads(to_torchtitan(s))`` returns)."""
    sections, _ = torchtitan_sections(s)
    out: dict[str, dict] = {}
    for sec in sections:
        node = out
        for part in sec.name.split("."):
            node = node.setdefault(part, {})
        node.update({k: v for k, v, _ in sec.entries})
    return out


def to_torchtitan(s: Scenario, source: Source = Source()) -> str:
    """The torchtitan job config TOML (``source`` is unused: the TOML holds the layout)."""
    sections, header = torchtitan_sections(s)
    return _render(sections, header)

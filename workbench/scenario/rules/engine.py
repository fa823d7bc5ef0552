"""What the training.engine runs: its switches and the limits its record states
(workbench/engines/), each cited there.

The layout conditions here read ``v.eng``: the scenario's training.engine for the validator and
the planner, the target's engine for an export (``table.engine_problems``). ``why(v, key)`` is
the engine's own words for a limit.
"""
from __future__ import annotations

import numpy as np

from workbench.engines import ENGINES, engine_of
from workbench.errors import Problem
from workbench.scenario.rules.table import E, P, Condition, Layouts, layout_rule, rule, why
from workbench.scenario.types import FP4_PRECISIONS, PRECISIONS, Scenario, zero_in


@rule("engine_switches", "a switch (training.compile, training.fp8_recipe, "
      "training.fp8_param_gather, training.fp8_attention, training.state_dtypes, "
      "training.recompute_modules, "
      "parallel.async_tp, "
      "parallel.tp_comm_overlap, parallel.expert_tp) and a training.recompute policy must be "
      "one the training.engine offers (docs/engines.md); fp8_recipe and the fp8 switches need "
      "precision fp8 (fp8_param_gather: a recipe the engine gathers in FP8); recompute_every "
      "at most the layers; recompute_modules: under recompute selective, each a part the "
      "model has (moe_act, moe: MoE; shared_experts: shared experts; mla_up_proj: MLA); "
      "state_dtypes: bf16 training, a master or moments other than fp32 "
      "with adamw only, master remainder with bf16 or fp8 delayed scaling; tp_comm_overlap "
      "needs tp > 1; parallel.overlap_grad_reduce / "
      "overlap_param_gather other than what the engine does only where it has the switch "
      "(Megatron-LM both, DeepSpeed overlap_comm)",
      "training.engine", "training.compile", "training.fp8_recipe", "training.recompute",
      "training.fp8_param_gather", "training.fp8_attention", "training.state_dtypes",
      "training.recompute_modules",
      "training.recompute_every", "parallel.async_tp", "parallel.tp_comm_overlap",
      "parallel.overlap_grad_reduce", "parallel.overlap_param_gather", "parallel.expert_tp",
      layout=False)
def engine_switches(s: Scenario):
    tr, par = s.training, s.parallel
    eng = engine_of(tr)
    offers = ", ".join(eng.switches) or "none"
    used = {"compile": ("training.compile", tr.compile, tr.compile),
            "fp8_recipe": ("training.fp8_recipe", tr.fp8_recipe, tr.fp8_recipe is not None),
            "async_tp": ("parallel.async_tp", par.async_tp, par.async_tp),
            "tp_comm_overlap": ("parallel.tp_comm_overlap", par.tp_comm_overlap,
                                par.tp_comm_overlap),
            "expert_tp": ("parallel.expert_tp", par.expert_tp, par.expert_tp is not None),
            "fp8_param_gather": ("training.fp8_param_gather", tr.fp8_param_gather,
                                 tr.fp8_param_gather),
            "fp8_attention": ("training.fp8_attention", tr.fp8_attention, tr.fp8_attention),
            "recompute_modules": ("training.recompute_modules",
                                  tr.recompute_modules and list(tr.recompute_modules),
                                  tr.recompute_modules is not None),
            "state_dtypes": ("training.state_dtypes",
                             tr.state_dtypes and dict(vars(tr.state_dtypes)),
                             tr.state_dtypes is not None)}
    for switch, (path, value, on) in used.items():
        if on and not eng.offers(switch):
            yield Problem(path, value, f"engine {eng.name} does not offer it (its switches: "
                                       f"{offers}); pick another training.engine")
    if par.tp_comm_overlap and eng.offers("tp_comm_overlap") and par.tp == 1:
        yield Problem("parallel.tp_comm_overlap", True, "overlaps tensor-parallel "
                      "communication: needs parallel.tp > 1 (got tp 1); set it false")
    defaults = eng.dp_overlap_at(par.zero)
    for i, (key, words) in enumerate((("overlap_grad_reduce", "gradient reduction is"),
                                      ("overlap_param_gather", "parameter all-gathers are"))):
        value = getattr(par, key)
        if value is not None and value != defaults[i] and not eng.offers(key):
            yield Problem(f"parallel.{key}", value,
                          f"engine {eng.name} has no switch for it: at zero {par.zero} its "
                          f"{words} {'' if defaults[i] else 'not '}overlapped; set it null "
                          f"or {str(defaults[i]).lower()}")
    if tr.recompute not in eng.recompute:
        yield Problem("training.recompute", tr.recompute,
                      f"engine {eng.name} offers {', '.join(eng.recompute)}"
                      + (" (op is torchtitan's per-op selective checkpointing)"
                         if tr.recompute == "op" else "")
                      + (" (layer: one block in training.recompute_every checkpointed whole)"
                         if tr.recompute == "layer" else ""))
    if tr.recompute == "layer" and tr.recompute_every > s.model.layers:
        yield Problem("training.recompute_every", tr.recompute_every,
                      f"checkpoints every k-th block: at most the model's {s.model.layers} "
                      "layers")
    for key in ("fp8_param_gather", "fp8_attention"):
        if getattr(tr, key) and eng.offers(key) and tr.precision != "fp8":
            yield Problem(f"training.{key}", True,
                          f"needs training.precision fp8 (got {tr.precision})")
    recipe = tr.fp8_recipe or eng.fp8_default
    yield from _state_dtypes(tr, eng, recipe)
    yield from _recompute_modules(s, eng)
    if (tr.fp8_param_gather and eng.offers("fp8_param_gather") and tr.precision == "fp8"
            and eng.fp8_param_gather_recipes and recipe not in eng.fp8_param_gather_recipes):
        yield Problem("training.fp8_param_gather", True,
                      f"engine {eng.name} gathers FP8 parameters with fp8_recipe "
                      f"{', '.join(eng.fp8_param_gather_recipes)} only (got {recipe})")
    if tr.fp8_recipe is not None and eng.offers("fp8_recipe"):
        if tr.precision != "fp8":
            yield Problem("training.fp8_recipe", tr.fp8_recipe,
                          f"needs training.precision fp8 (got {tr.precision})")
        elif tr.fp8_recipe not in eng.fp8_recipes:
            yield Problem("training.fp8_recipe", tr.fp8_recipe,
                          f"engine {eng.name} offers {', '.join(eng.fp8_recipes)}")


def _recompute_modules(s: Scenario, eng):
    """training.recompute_modules where the engine offers it: under recompute selective (the
    only granularity that applies them), each module one the model has (engines/megatron.py)."""
    mods, m = s.training.recompute_modules, s.model
    if mods is None or not eng.offers("recompute_modules"):
        return
    if s.training.recompute != "selective":
        yield Problem("training.recompute_modules", list(mods),
                      f"Megatron-Core recomputes modules under recompute selective only (got "
                      f"recompute {s.training.recompute}); set recompute selective or remove it")
        return
    needs = {"moe_act": (m.moe is not None, "an MoE model"),
             "moe": (m.moe is not None, "an MoE model"),
             "shared_experts": (m.moe is not None and m.moe.shared_experts > 0,
                                "an MoE model with shared experts"),
             "mla_up_proj": (bool(m.mla), "multi-latent attention (model.kv_lora_rank)")}
    for name in mods:
        ok, what = needs.get(name, (True, ""))
        if not ok:
            yield Problem("training.recompute_modules", list(mods),
                          f"{name} needs {what}; this model has none: remove {name}")


def _state_dtypes(tr, eng, recipe):
    """training.state_dtypes where the engine offers it: 16-bit training; anything but fp32
    master and moments is the precision-aware optimizer's, Adam's only; its remainders ride on
    the bf16 weights only where no FP8 recipe but delayed scaling keeps an fp32 master of its
    own (engines/megatron.py)."""
    sd = tr.state_dtypes
    if sd is None or not eng.offers("state_dtypes"):
        return
    if tr.precision in ("fp32", "fp16"):
        yield Problem("training.state_dtypes", dict(vars(sd)),
                      f"applies to bf16 training and the low-precision GEMMs inside it (bf16, "
                      f"fp8, nvfp4); got precision {tr.precision}")
    elif (sd.master, sd.moments) != ("fp32", "fp32") and tr.optimizer != "adamw":
        yield Problem("training.state_dtypes", dict(vars(sd)),
                      f"a master or moments other than fp32 is the precision-aware optimizer's, "
                      f"which runs Adam only (got optimizer {tr.optimizer}); set them fp32")
    elif sd.master == "remainder" and tr.precision != "bf16" and not (
            tr.precision == "fp8" and recipe == "delayed"):
        yield Problem("training.state_dtypes.master", sd.master,
                      "16-bit remainders ride on bf16 weights, with precision bf16 or fp8 "
                      "under fp8_recipe delayed; precision " + tr.precision
                      + (f" with fp8_recipe {recipe}" if tr.precision == "fp8" else "")
                      + " keeps an fp32 master of its own: set master fp32")


layout_rule(
    "engine_zero", "parallel.zero is a stage the training.engine offers (torchtitan: zero 0, "
    "DDP, only with data parallelism alone)",
    Condition(P + "zero", (P + "zero", E),
              lambda v: zero_in(v.par.zero, v.eng.zero),
              lambda v: why(v, "zero", f"offers zero {', '.join(map(str, v.eng.zero))}")),
    Condition(P + "zero", (P + "zero", P + "tp", P + "pp", P + "cp", P + "ep", E),
              lambda v: np.logical_not(
                  v.eng.zero0_pure_dp_only & (v.par.zero == 0)
                  & ((v.par.tp > 1) | (v.par.pp > 1) | (v.par.cp > 1) | (v.par.ep > 1))),
              lambda v: why(v, "zero0_pure_dp_only", "runs DDP (zero 0) only when data "
                            "parallelism is the only dimension; use zero 3")),
    Condition(P + "zero", (P + "zero", P + "dp", E),
              lambda v: np.logical_not(v.eng.zero0_without_dp & (v.par.zero == 0)
                                       & (v.par.dp > 1)),
              lambda v: why(v, "zero0_without_dp", "has no DDP: with dp > 1 it shards "
                            "(zero 3)")))

layout_rule(
    "engine_pipeline", "with pp > 1, parallel.pp_schedule is one the training.engine runs and "
    "parallel.zero a stage it combines with pipelining (DeepSpeed and Megatron-LM: zero <= 1)",
    Condition(P + "pp_schedule", (P + "pp_schedule", P + "pp", E),
              lambda v: (v.par.pp == 1) | (v.eng.pp_schedules is None
                                           or v.par.pp_schedule in v.eng.pp_schedules),
              lambda v: why(v, "pp_schedules", "runs pipeline schedules "
                            + ", ".join(v.eng.pp_schedules or ()))),
    Condition(P + "zero", (P + "zero", P + "pp", E),
              lambda v: (v.par.pp == 1) | zero_in(v.par.zero, v.eng.zero_with_pp),
              lambda v: why(v, "zero_with_pp", "combines zero "
                            + ", ".join(map(str, v.eng.zero_with_pp))
                            + " with pipeline parallelism")))

layout_rule(
    "engine_sp", "parallel.sequence_parallel false with tp > 1 only where the training.engine "
    "runs tensor parallelism without sequence parallelism (torchtitan 0.2.x always uses it; "
    "Megatron-LM needs it with TP and EP together)",
    Condition(P + "sequence_parallel", (P + "sequence_parallel", P + "tp", E),
              lambda v: np.logical_not(
                  (not v.eng.tp_without_sp) & (v.par.tp > 1)
                  & np.logical_not(v.par.sequence_parallel)),
              lambda v: why(v, "tp_without_sp", "always shards along the sequence with TP; "
                            "set parallel.sequence_parallel true")),
    Condition(P + "sequence_parallel", (P + "sequence_parallel", P + "tp", P + "ep", E),
              lambda v: np.logical_not(
                  v.eng.sp_with_tp_and_ep & (v.par.tp > 1) & (v.par.ep > 1)
                  & np.logical_not(v.par.sequence_parallel)),
              lambda v: why(v, "sp_with_tp_and_ep", "needs sequence parallelism with TP and EP "
                            "together; set parallel.sequence_parallel true")))

layout_rule(
    "async_tp_sp", "parallel.async_tp with tp > 1 needs parallel.sequence_parallel where the "
    "training.engine runs async TP only with it; parallel.tp_comm_overlap (Megatron-LM's "
    "--tp-comm-overlap) always does",
    Condition(P + "async_tp", (P + "async_tp", P + "sequence_parallel", P + "tp", E),
              lambda v: np.logical_not(
                  v.s.parallel.async_tp & v.eng.async_tp_needs_sp
                  & (v.par.tp > 1) & np.logical_not(v.par.sequence_parallel)),
              lambda v: why(v, "async_tp_needs_sp", "overlaps TP communication only with "
                            "parallel.sequence_parallel true")),
    Condition(P + "tp_comm_overlap", (P + "tp_comm_overlap", P + "sequence_parallel", P + "tp",
                                      E),
              lambda v: np.logical_not(
                  v.s.parallel.tp_comm_overlap & (v.par.tp > 1)
                  & np.logical_not(v.par.sequence_parallel)),
              lambda v: why(v, "tp_comm_overlap_needs_sp", "overlaps TP communication only "
                            "with parallel.sequence_parallel true"), value=lambda v: True))

layout_rule(
    "engine_cp", "parallel.cp > 1 only where the training.engine runs ring-attention context "
    "parallelism (not DeepSpeed: Ulysses)",
    Condition(P + "cp", (P + "cp", E), lambda v: (v.par.cp == 1) | v.eng.cp,
              lambda v: why(v, "cp", "has no ring-attention context parallelism")))


def _shard_ranks(v: Layouts):
    """torchtitan's FSDP group: dp_shard = the HSDP shard group / cp, else dp (1 for DDP)."""
    sg = v.shard_group
    return np.where(v.par.zero == 0, 1, np.where(sg > 0, sg // v.par.cp, v.par.dp))


layout_rule(
    "engine_hsdp", "parallel.shard_group (HSDP) only at a ZeRO stage the training.engine shards "
    "hierarchically, holding whole CP groups where the engine's FSDP group is dp_shard x cp",
    Condition(P + "shard_group", (P + "shard_group", P + "zero", E),
              lambda v: (v.shard_group == 0) | zero_in(v.par.zero, v.eng.hsdp_zero),
              lambda v: why(v, "hsdp_zero", "shards hierarchically at zero "
                            + (", ".join(map(str, v.eng.hsdp_zero)) or "no stage"))),
    Condition(P + "shard_group", (P + "shard_group", P + "cp", E),
              lambda v: (v.shard_group == 0) | (not v.eng.hsdp_whole_cp)
              | (v.shard_group % v.par.cp == 0),
              lambda v: why(v, "hsdp_whole_cp", "the FSDP group is dp_shard x cp")
              + f"; the shard group must be a multiple of cp = {v.par.cp}"))

layout_rule(
    "engine_experts", "expert parallelism as the training.engine runs it: expert_tp 1 or tp "
    "(torchtitan), EP within the FSDP group, fp16 where the engine allows it",
    Condition(P + "expert_tp", (P + "expert_tp", P + "ep", P + "tp", E),
              lambda v: ((v.par.ep == 1) | (not v.eng.expert_tp_tp_or_1)
                         | (v.par.etp == 1) | (v.par.etp == v.par.tp)),
              lambda v: why(v, "expert_tp_tp_or_1", "runs expert TP 1 or tp only")
              + f" (tp = {v.par.tp})"),
    Condition(P + "ep", (P + "ep", P + "dp", P + "cp", P + "tp", P + "shard_group", P + "zero",
                         P + "expert_tp", E),
              lambda v: ((v.par.ep == 1) | (not v.eng.ep_within_shard_group)
                         | ((_shard_ranks(v) * v.par.cp * v.par.tp)
                            % (np.where(v.par.ep > 1, v.par.etp, 1) * v.par.ep) == 0)),
              lambda v: why(v, "ep_within_shard_group", "takes EP ranks from the FSDP group")
              + f" (dp_shard x cp x tp = {_shard_ranks(v) * v.par.cp * v.par.tp}, over "
                f"expert TP = {v.par.etp})"),
    Condition("training.precision", ("training.precision", P + "ep", E),
              lambda v: (v.par.ep == 1) | v.eng.fp16_with_ep | (v.tr.precision != "fp16"),
              lambda v: why(v, "fp16_with_ep", "has no expert parallelism with fp16; use bf16")))

layout_rule(
    "engine_memory", "ZeRO-3 with reshard_after_forward false and offload (target and ZeRO "
    "stage) only where the training.engine does them",
    Condition(P + "reshard_after_forward", (P + "reshard_after_forward", P + "zero", E),
              lambda v: (v.s.parallel.reshard_after_forward is not False)
              | (v.par.zero != 3) | v.eng.keeps_gathered_params,
              lambda v: why(v, "keeps_gathered_params", "always releases gathered parameters "
                            "after forward"), value=lambda v: False),
    Condition("training.offload", ("training.offload", E),
              lambda v: (v.tr.offload == "none") or v.tr.offload in v.eng.offload,
              lambda v: why(v, "offload", "offloads to " + " or ".join(v.eng.offload)
                            + " only")),
    Condition("training.offload", ("training.offload", P + "zero", E),
              lambda v: ((v.tr.offload == "none") or v.tr.offload not in v.eng.offload
                         or zero_in(v.par.zero, v.eng.offload[v.tr.offload])),
              lambda v: why(v, "offload_zero", f"offloads at zero "
                            + ", ".join(map(str, v.eng.offload.get(v.tr.offload, ()))))))


# What an engine record without an ``optimizers`` limit builds: torch.optim's AdamW and SGD.
CLASSIC_OPTIMIZERS = ("adamw", "sgd")


def _recipe(v: Layouts):
    """The FP8 recipe that runs: training.fp8_recipe, else the engine's default (fp8 only)."""
    if v.tr.precision != "fp8":
        return None
    return v.tr.fp8_recipe or v.eng.fp8_default


layout_rule(
    "engine_numerics", "training.precision and training.optimizer are ones the training.engine "
    "builds (nvfp4: an engine with an FP4 recipe, megatron or generic); the FP8 recipe runs "
    "on the GPU's architecture (hardware.gpu.arch; MXFP8: Blackwell) and, where "
    "the engine limits it, not with TP under torch.compile",
    Condition("training.precision", ("training.precision", E),
              lambda v: v.eng.precisions is None or v.tr.precision in v.eng.precisions,
              lambda v: why(v, "precisions", "trains in " + ", ".join(v.eng.precisions or ()))),
    Condition("training.precision", ("training.precision", E),
              # (an engine whose precisions leave it out already said so above)
              lambda v: (v.tr.precision not in FP4_PRECISIONS
                         or v.tr.precision in v.eng.fp4_recipes
                         or v.tr.precision not in (v.eng.precisions or PRECISIONS)),
              lambda v: (f"engine {v.eng.name} has no {v.tr.precision} recipe (FP4 training: "
                         + ", ".join(n for n, e in ENGINES.items() if v.tr.precision in
                                     e.fp4_recipes)
                         + "); use one of " + ", ".join(
                             p for p in (v.eng.precisions or PRECISIONS)
                             if p not in FP4_PRECISIONS))),
    Condition("training.optimizer", ("training.optimizer", E),
              lambda v: v.tr.optimizer in (v.eng.optimizers or CLASSIC_OPTIMIZERS),
              lambda v: why(v, "optimizers", "builds " + ", ".join(
                  v.eng.optimizers or CLASSIC_OPTIMIZERS))),
    Condition("training.fp8_recipe", ("training.fp8_recipe", "hardware.gpu", E),
              lambda v: (_recipe(v) not in v.eng.fp8_recipes
                         or not v.eng.fp8_recipes[_recipe(v)].archs
                         or v.hw.gpu.arch in v.eng.fp8_recipes[_recipe(v)].archs),
              lambda v: (f"{_recipe(v)} runs on "
                         + " or ".join(v.eng.fp8_recipes[_recipe(v)].archs)
                         + f" GPUs only (engine {v.eng.name}); {v.hw.gpu.name} is "
                         f"{v.hw.gpu.arch or 'of unknown architecture'} (hardware.gpu.arch); "
                         "pick another training.fp8_recipe"),
              value=_recipe),
    Condition("training.fp8_recipe", ("training.fp8_recipe", "training.compile", P + "tp",
                                      P + "async_tp", P + "tp_comm_overlap", E),
              lambda v: (_recipe(v) not in v.eng.fp8_recipes
                         or v.eng.fp8_recipes[_recipe(v)].compiled_tp
                         | (v.par.tp == 1)
                         | np.logical_not(v.tr.compile | (
                             (v.s.parallel.async_tp | v.s.parallel.tp_comm_overlap)
                             & v.eng.offers("async_tp")))),
              lambda v: why(v, "compiled_tp", f"runs {_recipe(v)} with TP only without "
                            "torch.compile"), value=_recipe))


# -- the Hugging Face stack's back end (training.backend, training.liger): what Accelerate runs
# the sharding with, and the Liger kernels the Trainer swaps in. The rest of what engine hf runs
# is its record's (workbench/engines/hf.py).
ACCELERATE_ENGINES = ("hf",)    # engines launched through Accelerate (design.md contract 1)


@rule("accelerate_backend", "training.backend and training.liger only with training.engine hf "
      "(Accelerate's back ends; Transformers' use_liger_kernel)",
      "training.backend", "training.liger", "training.engine", layout=False)
def _accelerate_backend(s: Scenario):
    tr = s.training
    if tr.engine in ACCELERATE_ENGINES:
        return
    if tr.backend is not None:
        yield Problem("training.backend", tr.backend,
                      f"only engine hf runs on an Accelerate back end; training.engine is "
                      f"{tr.engine}: remove training.backend or set training.engine hf")
    if tr.liger:
        yield Problem("training.liger", True,
                      f"only engine hf runs Liger kernels (Transformers' use_liger_kernel); "
                      f"training.engine is {tr.engine}: remove training.liger or set "
                      "training.engine hf")


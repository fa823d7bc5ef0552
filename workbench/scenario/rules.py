"""The scenario's cross-field rules, each written once: the fields it reads, the rule in words
(for docs/scenario.md), whether it is a rule of the parallel layout, and its check.

A *layout* rule constrains the parallel degrees or the options the planner searches with them
(micro-batch, recompute, offload). ``workbench plan`` searches layouts, so a scenario given to it
is refused only by the other rules; the layout rules judge the starting layout it was given.

Layout rules are lists of ``Condition``s: a field to blame, the fields it reads, a predicate and
a message. The predicate reads a ``Layouts`` view, whose degrees are numbers (one scenario: the
validator's messages) or numpy arrays (a grid of layouts: the planner's mask, ``layout_mask``;
the parallel panel's choices, ``allowed_values``), so each rule exists once for all of them.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from workbench.engines import ENGINES
from workbench.errors import Problem
from workbench.scenario.layouts import LayoutGrid
from workbench.scenario.schedules import schedule
from workbench.scenario.types import Scenario

Check = Callable[[Scenario], Iterator[Problem]]
DEGREES = ("dp", "tp", "pp", "cp", "ep", "shard_group")   # the layout's integer degrees


@dataclass(frozen=True)
class Layouts:
    """What a layout condition reads: the degrees (``par``: a ``Parallel`` or a ``LayoutGrid``),
    the micro-batch, and the scenario's model, training and hardware."""

    par: object
    micro_batch: object
    s: Scenario
    engine: object = None     # an ``Engine`` record; None: the scenario's training.engine

    @classmethod
    def of(cls, s: Scenario) -> "Layouts":
        return cls(s.parallel, s.training.micro_batch, s)

    @property
    def m(self):
        return self.s.model

    @property
    def tr(self):
        return self.s.training

    @property
    def hw(self):
        return self.s.hardware

    @property
    def shard_group(self):
        """HSDP shard group, 0 for none (a grid's column already says 0)."""
        sg = self.par.shard_group
        return sg if np.ndim(sg) else (sg or 0)

    @property
    def eng(self):
        """The engine whose limits apply: ``engine`` when given (an export to that engine's
        format), else the scenario's training.engine."""
        return self.engine or ENGINES[self.tr.engine]

    @property
    def microbatches(self):
        return self.tr.global_batch // np.maximum(self.micro_batch * self.par.dp, 1)


@dataclass(frozen=True)
class Condition:
    """One check of a layout rule: ``ok(view)`` is True (or an array of them) where it holds;
    otherwise the validator reports ``field`` with ``value(view)`` and ``message(view)``."""

    field: str
    reads: tuple[str, ...]
    ok: Callable[[Layouts], object]
    message: Callable[[Layouts], str]
    value: Callable[[Layouts], object] | None = None

    def problem(self, v: Layouts) -> Problem:
        if self.value is not None:
            value = self.value(v)
        else:
            section, _, name = self.field.partition(".")
            value = getattr({"parallel": v.par, "training": v.tr, "model": v.m}[section], name)
        return Problem(self.field, value, self.message(v))


@dataclass(frozen=True)
class Rule:
    """One rule that spans fields."""

    name: str
    text: str                 # the rule in words
    fields: tuple[str, ...]   # the fields it reads
    layout: bool              # a rule of the parallel layout (the planner's search space)
    check: Check
    conditions: tuple[Condition, ...] = ()


RULES: list[Rule] = []


def min_microbatches(schedule_name: str, pp: int) -> int:
    """Microbatches per step a pipeline schedule needs (``Schedule.min_microbatches``)."""
    return int(schedule(schedule_name).min_microbatches(pp))


def rule(name: str, text: str, *fields: str, layout: bool = True) -> Callable[[Check], Check]:
    """Register ``check`` as a rule (the rules of model, hardware and training)."""
    def register(check: Check) -> Check:
        RULES.append(Rule(name, text, fields, layout, check))
        return check
    return register


def layout_rule(name: str, text: str, *conditions: Condition) -> None:
    """Register a layout rule made of ``conditions``."""
    fields = tuple(dict.fromkeys(f for c in conditions for f in c.reads))

    def check(s: Scenario) -> Iterator[Problem]:
        v = Layouts.of(s)
        for c in conditions:
            if not bool(c.ok(v)):
                yield c.problem(v)
    RULES.append(Rule(name, text, fields, True, check, conditions))


def check_rules(s: Scenario, layout: bool | None = None) -> list[Problem]:
    """Every problem the rules find (``layout``: only layout rules, only the others, or all)."""
    return [p for r in RULES if layout is None or r.layout == layout for p in r.check(s)]


def layout_mask(base: Scenario, grid) -> np.ndarray:
    """Which rows of a ``LayoutGrid`` pass every layout rule, for ``base``'s model, hardware and
    training (recompute and offload as the base has them)."""
    v = Layouts(grid, grid.micro_batch, base)
    ok = np.ones(len(grid), dtype=bool)
    for r in RULES:
        for c in r.conditions:
            ok &= np.asarray(c.ok(v), dtype=bool)
    return ok


def allowed_values(s: Scenario, field: str, values, moving=()) -> list:
    """The ``values`` of degree ``field`` ("tp", "pp", ...) that pass every condition reading
    it, with ``s``'s other settings (the parallel panel's choices; the planner's bounds).
    Conditions that also read a field in ``moving`` (one that changes with this one, as dp
    fills the GPUs when tp, pp or cp change) are left to the validator."""
    values = list(values)
    if not values:
        return []
    grid = LayoutGrid.of(s).take(np.zeros(len(values), dtype=int))
    setattr(grid, field, np.asarray(values, dtype=np.int64))
    v = Layouts(grid, grid.micro_batch, s)
    others = {f"parallel.{d}" for d in moving if d != field}
    ok = np.ones(len(values), dtype=bool)
    for r in RULES:
        for c in r.conditions:
            if f"parallel.{field}" in c.reads and not others & set(c.reads):
                ok &= np.broadcast_to(np.asarray(c.ok(v), dtype=bool), ok.shape)
    return [x for x, good in zip(values, ok) if good]


def engine_allows(s: Scenario, path: str, values) -> list:
    """The ``values`` of setting ``path`` ("parallel.pp_schedule", "training.fp8_recipe", ...)
    that the training.engine's limits allow with ``s``'s other settings (the panels' choices:
    what the engine runs, not what else would need changing with it)."""
    section, _, name = path.partition(".")
    out = []
    for x in values:
        t = dataclasses.replace(s, **{section: dataclasses.replace(getattr(s, section),
                                                                   **{name: x})})
        v = Layouts.of(t)
        if all(bool(np.all(c.ok(v))) for r in RULES for c in r.conditions
               if path in c.reads and E in c.reads):
            out.append(x)
    return out


# -- model and hardware --------------------------------------------------------------------
@rule("gqa", "model.kv_heads divides model.heads (grouped-query attention groups)",
      "model.kv_heads", "model.heads", layout=False)
def _gqa(s: Scenario):
    m = s.model
    if m.heads % m.kv_heads:
        yield Problem("model.kv_heads", m.kv_heads, f"must divide model.heads = {m.heads} (GQA groups)")


@rule("head_dim", "model.heads divides model.hidden unless model.head_dim is given",
      "model.heads", "model.hidden", "model.head_dim", layout=False)
def _head_dim(s: Scenario):
    m = s.model
    if not m.head_dim and m.hidden % m.heads:
        yield Problem("model.heads", m.heads, f"must divide model.hidden = {m.hidden} "
                                              "(or set model.head_dim)")


@rule("moe_shape", "model.moe.top_k <= model.moe.experts and model.moe.dense_layers <= "
      "model.layers", "model.moe.top_k", "model.moe.experts", "model.moe.dense_layers",
      layout=False)
def _moe_shape(s: Scenario):
    m = s.model
    if m.moe is None:
        return
    if m.moe.top_k > m.moe.experts:
        yield Problem("model.moe.top_k", m.moe.top_k,
                      f"must be <= model.moe.experts = {m.moe.experts}")
    if m.moe.dense_layers > m.layers:
        yield Problem("model.moe.dense_layers", m.moe.dense_layers,
                      f"must be <= model.layers = {m.layers}")


@rule("fp8", "training.precision fp8 needs a GPU with FP8 tensor cores (fp8_tflops > 0)",
      "training.precision", "hardware.gpu", layout=False)
def _fp8(s: Scenario):
    if s.training.precision == "fp8" and s.hardware.gpu.fp8_tflops <= 0:
        yield Problem("training.precision", "fp8", f"{s.hardware.gpu.name} has no FP8 tensor "
                                                   "cores (hardware.gpu.fp8_tflops 0); use bf16 "
                                                   "or fp16")


@rule("nics", "hardware.inter_node.nics_per_node >= 1 when nodes > 1",
      "hardware.inter_node.nics_per_node", "hardware.nodes", layout=False)
def _nics(s: Scenario):
    hw = s.hardware
    if hw.nodes > 1 and hw.inter_node.nics_per_node < 1:
        yield Problem("hardware.inter_node.nics_per_node", 0, "must be >= 1 when nodes > 1")


# -- the engine and its switches --------------------------------------------------------
@rule("engine_switches", "a switch (training.compile, training.fp8_recipe, parallel.async_tp, "
      "parallel.expert_tp) and a training.recompute policy must be one the training.engine "
      "offers (docs/engines.md); fp8_recipe needs precision fp8; recompute_every at most the "
      "layers",
      "training.engine", "training.compile", "training.fp8_recipe", "training.recompute",
      "training.recompute_every",
      "parallel.async_tp", "parallel.expert_tp", layout=False)
def _engine_switches(s: Scenario):
    tr, par = s.training, s.parallel
    eng = ENGINES[tr.engine]
    offers = ", ".join(eng.switches) or "none"
    used = {"compile": ("training.compile", tr.compile, tr.compile),
            "fp8_recipe": ("training.fp8_recipe", tr.fp8_recipe, tr.fp8_recipe is not None),
            "async_tp": ("parallel.async_tp", par.async_tp, par.async_tp),
            "expert_tp": ("parallel.expert_tp", par.expert_tp, par.expert_tp is not None)}
    for switch, (path, value, on) in used.items():
        if on and not eng.offers(switch):
            yield Problem(path, value, f"engine {eng.name} does not offer it (its switches: "
                                       f"{offers}); pick another training.engine")
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
    if tr.fp8_recipe is not None and eng.offers("fp8_recipe"):
        if tr.precision != "fp8":
            yield Problem("training.fp8_recipe", tr.fp8_recipe,
                          f"needs training.precision fp8 (got {tr.precision})")
        elif tr.fp8_recipe not in eng.fp8_recipes:
            yield Problem("training.fp8_recipe", tr.fp8_recipe,
                          f"engine {eng.name} offers {', '.join(eng.fp8_recipes)}")


# -- the parallel layout -------------------------------------------------------------------
P = "parallel."


def _degrees(v: Layouts) -> dict:
    par = v.par
    return {"dp": par.dp, "tp": par.tp, "pp": par.pp, "cp": par.cp}


layout_rule(
    "world", "dp x tp x pp x cp equals the GPUs, hardware.gpus_per_node x hardware.nodes",
    Condition("parallel", (P + "dp", P + "tp", P + "pp", P + "cp", "hardware.gpus_per_node",
                           "hardware.nodes"),
              lambda v: v.par.dp * v.par.tp * v.par.pp * v.par.cp == v.hw.world,
              lambda v: (f"dp*tp*pp*cp = {v.par.dp}*{v.par.tp}*{v.par.pp}*{v.par.cp} = "
                         f"{v.par.world} must equal hardware.gpus_per_node*nodes = "
                         f"{v.hw.gpus_per_node}*{v.hw.nodes} = {v.hw.world}"),
              value=_degrees))

layout_rule(
    "tp_width", "parallel.tp divides model.heads, model.kv_heads, model.ffn_hidden and "
    "model.moe.expert_ffn_hidden (each TP rank holds whole heads and an equal FFN slice)",
    Condition(P + "tp", (P + "tp", "model.heads"), lambda v: v.m.heads % v.par.tp == 0,
              lambda v: f"must divide model.heads = {v.m.heads}"),
    Condition(P + "tp", (P + "tp", "model.kv_heads"), lambda v: v.m.kv_heads % v.par.tp == 0,
              lambda v: f"must divide model.kv_heads = {v.m.kv_heads} (each TP rank needs "
                        "whole key/value heads)"),
    Condition(P + "tp", (P + "tp", "model.ffn_hidden"),
              lambda v: v.m.ffn_hidden % v.par.tp == 0,
              lambda v: f"must divide model.ffn_hidden = {v.m.ffn_hidden}"),
    Condition(P + "tp", (P + "tp", "model.moe.expert_ffn_hidden", P + "expert_tp"),
              lambda v: (v.m.moe is None or v.par.expert_tp is not None
                         or v.m.moe.expert_ffn_hidden % v.par.tp == 0),
              lambda v: f"must divide model.moe.expert_ffn_hidden = {v.m.moe.expert_ffn_hidden}"))

layout_rule(
    "zero2_pp", "ZeRO-2 does not combine with pipeline parallelism over dp x cp > 1",
    Condition(P + "zero", (P + "zero", P + "pp", P + "dp", P + "cp"),
              lambda v: np.logical_not((v.par.zero == 2) & (v.par.pp > 1) & (v.par.dp * v.par.cp > 1)),
              lambda v: ("ZeRO-2 does not combine with pipeline parallelism in any engine "
                         "(DeepSpeed's PipelineEngine refuses ZeRO-2/3; Megatron-LM's distributed "
                         "optimizer is ZeRO-1); use zero 1, or zero 3 (FSDP2) with "
                         "reshard_after_forward false")))


# -- what the engine runs: limits its record states (workbench/engines/), each cited there.
# These conditions read ``v.eng``: the scenario's training.engine for the validator and the
# planner, the target's engine for an export (``engine_problems``). ``why(v, key)`` is the
# engine's own words for a limit.
E = "training.engine"


def why(v: Layouts, key: str, default: str) -> str:
    """The engine record's words for limit ``key``, else ``engine NAME`` and ``default``."""
    return v.eng.why.get(key) or f"engine {v.eng.name} {default}"


def engine_problems(s: Scenario, engine: str) -> list[Problem]:
    """What engine ``engine`` cannot run of ``s``: the conditions of the rule table that read
    training.engine, judged with that engine's record. An export to the engine's format asks
    this; for a scenario of that engine the validator reports the same problems, word for
    word."""
    v = Layouts(s.parallel, s.training.micro_batch, s, ENGINES[engine])
    return [c.problem(v) for r in RULES for c in r.conditions
            if E in c.reads and not bool(c.ok(v))]


layout_rule(
    "engine_zero", "parallel.zero is a stage the training.engine offers (torchtitan: zero 0, "
    "DDP, only with data parallelism alone)",
    Condition(P + "zero", (P + "zero", E),
              lambda v: np.isin(v.par.zero, v.eng.zero),
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
              lambda v: (v.par.pp == 1) | np.isin(v.par.zero, v.eng.zero_with_pp),
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
    "training.engine runs async TP only with it (Megatron-LM's --tp-comm-overlap)",
    Condition(P + "async_tp", (P + "async_tp", P + "sequence_parallel", P + "tp", E),
              lambda v: np.logical_not(
                  v.s.parallel.async_tp & v.eng.async_tp_needs_sp
                  & (v.par.tp > 1) & np.logical_not(v.par.sequence_parallel)),
              lambda v: why(v, "async_tp_needs_sp", "overlaps TP communication only with "
                            "parallel.sequence_parallel true")))

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
              lambda v: (v.shard_group == 0) | np.isin(v.par.zero, v.eng.hsdp_zero),
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
                         or np.isin(v.par.zero, v.eng.offload[v.tr.offload])),
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
    "builds; the FP8 recipe runs on the GPU's architecture (hardware.gpu.arch; MXFP8: "
    "Blackwell) and, where the engine limits it, not with TP under torch.compile",
    Condition("training.precision", ("training.precision", E),
              lambda v: v.eng.precisions is None or v.tr.precision in v.eng.precisions,
              lambda v: why(v, "precisions", "trains in " + ", ".join(v.eng.precisions or ()))),
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
                                      P + "async_tp", E),
              lambda v: (_recipe(v) not in v.eng.fp8_recipes
                         or v.eng.fp8_recipes[_recipe(v)].compiled_tp
                         | (v.par.tp == 1)
                         | np.logical_not(v.tr.compile | (v.s.parallel.async_tp
                                                          & v.eng.offers("async_tp")))),
              lambda v: why(v, "compiled_tp", f"runs {_recipe(v)} with TP only without "
                            "torch.compile"), value=_recipe))

_VS = (P + "virtual_stages", P + "pp_schedule", P + "pp")
layout_rule(
    "virtual_stages", "parallel.virtual_stages >= 2 with interleaved-1f1b and zero-bubble "
    "(pp > 1), and 1 with every other schedule or without pipelining",
    Condition(P + "virtual_stages", _VS,
              lambda v: np.logical_not((v.par.pp > 1) & schedule(v.par.pp_schedule).interleaved
                          & (v.par.virtual_stages < 2)),
              lambda v: (f"{v.par.pp_schedule} needs virtual_stages >= 2 (model chunks per "
                         "pipeline rank, as PyTorch's interleaved schedules require); or use "
                         "1f1b / dualpipev")),
    Condition(P + "virtual_stages", _VS,
              lambda v: (v.par.virtual_stages == 1) | schedule(v.par.pp_schedule).interleaved,
              lambda v: (f"must be 1 for pp_schedule {v.par.pp_schedule}; virtual stages need "
                         "interleaved-1f1b or zero-bubble")),
    Condition(P + "virtual_stages", _VS,
              lambda v: (v.par.virtual_stages == 1) | (v.par.pp > 1),
              lambda v: "needs pp > 1"))

layout_rule(
    "stages_hold_layers", "model.layers >= pp x model chunks per rank (every pipeline stage "
    "holds a layer)",
    Condition("model.layers", ("model.layers", *_VS),
              lambda v: v.m.layers >= v.par.pp * v.par.chunks_per_rank,
              lambda v: (f"must be at least pp * chunks per rank = {v.par.pp} * "
                         f"{v.par.chunks_per_rank} = {v.par.pp * v.par.chunks_per_rank} so "
                         "every pipeline stage holds a layer")))

layout_rule(
    "ep", "parallel.ep > 1 needs an MoE model; ep divides dp x cp and model.moe.experts",
    Condition(P + "ep", (P + "ep", "model.moe"), lambda v: (v.par.ep == 1) | (v.m.moe is not None),
              lambda v: "expert parallelism needs an MoE model (model.moe)"),
    Condition(P + "ep", (P + "ep", P + "dp", P + "cp", P + "expert_tp"),
              lambda v: ((v.par.dp * v.par.cp) % v.par.ep == 0 if v.par.expert_tp is None
                         else (v.par.dp * v.par.cp * v.par.tp) % (v.par.expert_tp * v.par.ep)
                         == 0),
              lambda v: (f"must divide dp*cp = {v.par.dp * v.par.cp} (EP takes its ranks from "
                         "the data/context-parallel ranks; set parallel.expert_tp for MoE "
                         "parallel folding)" if v.par.expert_tp is None else
                         f"times expert_tp = {v.par.expert_tp} must divide dp*cp*tp = "
                         f"{v.par.dp * v.par.cp * v.par.tp} (MoE parallel folding)")),
    Condition(P + "expert_tp", (P + "expert_tp", "model.moe.expert_ffn_hidden"),
              lambda v: (v.par.expert_tp is None or v.m.moe is None
                         or v.m.moe.expert_ffn_hidden % v.par.expert_tp == 0),
              lambda v: (f"must divide model.moe.expert_ffn_hidden = "
                         f"{v.m.moe.expert_ffn_hidden}")),
    Condition(P + "ep", (P + "ep", "model.moe.experts"),
              lambda v: v.m.moe is None or v.m.moe.experts % v.par.ep == 0,
              lambda v: f"must divide model.moe.experts = {v.m.moe.experts}"))

layout_rule(
    "shard_group", "parallel.shard_group (HSDP) needs zero >= 1 and divides dp x cp",
    Condition(P + "shard_group", (P + "shard_group", P + "zero"),
              lambda v: (v.shard_group == 0) | (v.par.zero > 0),
              lambda v: "needs zero >= 1 (it is the group ZeRO/FSDP shards over; HSDP = zero 3)"),
    Condition(P + "shard_group", (P + "shard_group", P + "dp", P + "cp"),
              lambda v: (v.par.dp * v.par.cp) % np.maximum(v.shard_group, 1) == 0,
              lambda v: f"must divide dp*cp = {v.par.dp * v.par.cp}"))

_GB = ("training.global_batch", "training.micro_batch", P + "dp", P + "pp", P + "pp_schedule")
layout_rule(
    "global_batch", "training.global_batch is a multiple of micro_batch x dp, and gives each "
    "pipeline at least pp microbatches (1F1B-style schedules) or 2 x pp (DualPipeV)",
    Condition("training.global_batch", _GB,
              lambda v: v.tr.global_batch % (v.micro_batch * v.par.dp) == 0,
              lambda v: (f"must be a multiple of micro_batch*dp = {v.micro_batch}*{v.par.dp} = "
                         f"{v.micro_batch * v.par.dp}")),
    Condition("training.global_batch", _GB,
              lambda v: ((v.tr.global_batch % (v.micro_batch * v.par.dp) != 0) | (v.par.pp == 1)
                         | (v.microbatches >= schedule(v.par.pp_schedule).min_microbatches(
                             v.par.pp))),
              lambda v: (f"gives {v.microbatches} microbatches per pipeline "
                         f"(global_batch/(micro_batch*dp)); {v.par.pp_schedule} with "
                         f"pp={v.par.pp} needs at least "
                         f"{min_microbatches(v.par.pp_schedule, v.par.pp)}")))

layout_rule(
    "seq_split", "training.seq_len is divisible by tp with sequence parallelism and by 2 x cp "
    "with context parallelism (load-balanced ring attention chunks)",
    Condition("training.seq_len", ("training.seq_len", P + "tp", P + "sequence_parallel"),
              lambda v: (np.logical_not(v.par.sequence_parallel & (v.par.tp > 1))
                         | (v.tr.seq_len % v.par.tp == 0)),
              lambda v: f"must be divisible by tp = {v.par.tp} with sequence_parallel"),
    Condition("training.seq_len", ("training.seq_len", P + "cp"),
              lambda v: (v.par.cp == 1) | (v.tr.seq_len % (2 * v.par.cp) == 0),
              lambda v: (f"must be divisible by 2*cp = {2 * v.par.cp} (load-balanced ring "
                         "attention chunks)")))

layout_rule(
    "offload", "training.offload needs zero >= 1, and nvme needs hardware.storage.drives >= 1",
    Condition("training.offload", ("training.offload", P + "zero"),
              lambda v: (v.tr.offload == "none") | (v.par.zero >= 1),
              lambda v: ("needs zero >= 1 (ZeRO-Offload / FSDP2 CPUOffloadPolicy offload "
                         "sharded states)")),
    Condition("training.offload", ("training.offload", "hardware.storage.drives"),
              lambda v: (v.tr.offload != "nvme") | (v.hw.storage.drives > 0),
              lambda v: "needs hardware.storage.drives >= 1", value=lambda v: "nvme"))


layout_rule(
    "fine_tuning", "training.method is one the training.engine trains with; LoRA/QLoRA target "
    "projections the model has; QLoRA dequantises to a 16- or 32-bit compute dtype; "
    "optimizer_in_backward and activation_offload only where the engine offers them, the "
    "former without gradient accumulation, the latter (torchtune) with recompute; the "
    "engine's QLoRA storages, whole-MLP adapters and parts trained in full beside them",
    Condition("training.method", ("training.method", E),
              lambda v: v.tr.method in v.eng.methods,
              lambda v: why(v, "methods", "trains with method " + ", ".join(v.eng.methods))),
    Condition("training.lora.targets", ("training.lora.targets", "model.mlp"),
              lambda v: (v.tr.lora is None or v.m.mlp == "swiglu"
                         or "gate" not in v.tr.lora.targets),
              lambda v: ("a GELU MLP has no gate projection (up and down only); name up, down "
                         "or the group mlp"),
              value=lambda v: list(v.tr.lora.targets) if v.tr.lora else None),
    Condition("training.precision", ("training.precision", "training.method"),
              lambda v: (v.tr.method != "qlora") or v.tr.precision in ("bf16", "fp16", "fp32"),
              lambda v: ("QLoRA dequantises its 4/8-bit base to the compute dtype for each "
                         "GEMM: use bf16, fp16 or fp32")),
    Condition("parallel.tp", (P + "tp", "training.method", E),
              lambda v: (v.par.tp == 1) | (not v.tr.adapters) | ("adapter_tp" not in v.eng.why),
              lambda v: v.eng.why.get("adapter_tp", "")),
    Condition("training.optimizer_in_backward", ("training.optimizer_in_backward",
                                                 "training.method", E),
              lambda v: (not v.tr.optimizer_in_backward)
              or (v.eng.optimizer_in_backward and v.tr.method == "full")
              or (v.eng.name == "generic"),
              lambda v: why(v, "optimizer_in_backward", "has no optimizer step inside "
                            "backward"), value=lambda v: True),
    Condition("training.optimizer_in_backward", ("training.optimizer_in_backward",
                                                 "training.global_batch",
                                                 "training.micro_batch", P + "dp"),
              lambda v: (not v.tr.optimizer_in_backward) | (v.microbatches <= 1),
              lambda v: (f"steps each parameter as its gradient arrives, so it cannot "
                         f"accumulate {v.microbatches} microbatches: set global_batch = "
                         f"micro_batch x dp"),
              value=lambda v: True),
    Condition("training.activation_offload", ("training.activation_offload", E),
              lambda v: (not v.tr.activation_offload) or v.eng.activation_offload
              or v.eng.name == "generic",
              lambda v: why(v, "activation_offload", "does not offload activations"),
              value=lambda v: True),
    Condition("training.activation_offload", ("training.activation_offload",
                                              "training.recompute", E),
              lambda v: (not v.tr.activation_offload) or v.tr.recompute != "none"
              or not v.eng.activation_offload_needs_recompute,
              lambda v: why(v, "activation_offload_needs_recompute", "offloads only the "
                            "activations of checkpointed blocks; set training.recompute full"),
              value=lambda v: True),
    Condition("training.lora.quant", ("training.lora.quant", "training.method", E),
              lambda v: (v.tr.method != "qlora") or v.tr.lora is None
              or v.eng.lora_quant is None or v.tr.lora.quant in v.eng.lora_quant,
              lambda v: why(v, "lora_quant", "stores a QLoRA base as "
                            + ", ".join(v.eng.lora_quant or ())),
              value=lambda v: v.tr.lora.quant if v.tr.lora else None),
    Condition("training.lora.targets", ("training.lora.targets", "training.method", E),
              lambda v: (not v.tr.adapters) or v.tr.lora is None or not v.eng.lora_mlp_whole
              or len({"gate", "up", "down"} & set(v.tr.lora.targets)) in (0, 3)
              or (v.m.mlp != "swiglu"
                  and len({"up", "down"} & set(v.tr.lora.targets)) in (0, 2)),
              lambda v: why(v, "lora_mlp_whole", "adapts the whole MLP or none of it; "
                            "name all of its projections or none"),
              value=lambda v: list(v.tr.lora.targets) if v.tr.lora else None),
    Condition("training.lora.trainable", ("training.lora.trainable", "training.method", E),
              lambda v: (not v.tr.adapters) or v.tr.lora is None or v.eng.lora_trainable is None
              or set(v.tr.lora.trainable) <= set(v.eng.lora_trainable),
              lambda v: why(v, "lora_trainable", "trains only the adapters"
                            if not v.eng.lora_trainable else "trains in full only "
                            + ", ".join(v.eng.lora_trainable)),
              value=lambda v: list(v.tr.lora.trainable) if v.tr.lora else None))


# -- what the workbench's own trial runtime runs (workbench/trial): asked by its preparation
# (``trial_problems``) for the sub-layout it launches, not by the validator: a layout the
# trials cannot run may still be estimated, planned and exported.
TRIAL_LIMITS: tuple[Condition, ...] = (
    Condition(P + "zero", (P + "zero", P + "dp", P + "cp", P + "tp", P + "pp"),
              lambda v: (v.par.dp * v.par.cp == 1) | (v.par.zero >= 3)
              | ((v.par.tp == 1) & (v.par.pp == 1)),
              lambda v: ("trials combine data or context parallelism with tensor or pipeline "
                         "parallelism through FSDP2 only (zero: 3), as torchtitan does: "
                         "PyTorch's DDP and ZeroRedundancyOptimizer accept neither DTensor "
                         "parameters nor several microbatches in flight")),
    Condition(P + "tp", (P + "tp", "model.moe"),
              lambda v: (v.m.moe is None) | (v.par.tp == 1),
              lambda v: ("trials of MoE models run without tensor parallelism: the trial's TP "
                         "plan does not shard the MoE layers (router, experts), where the "
                         "estimator splits each expert's FFN over TP; use tp 1 (with ep) for "
                         "the trial")),
    Condition(P + "expert_tp", (P + "expert_tp", P + "tp"),
              lambda v: (v.par.expert_tp is None) or v.par.expert_tp == v.par.tp,
              lambda v: ("trials take EP ranks from dp x cp only (torchtitan's EP mesh); MoE "
                         "parallel folding is estimated but not run; leave expert_tp out for "
                         "the trial")),
    # fine-tuning trials (trial/adapters.py): a frozen base with PEFT adapters, or an optimizer
    # whose state the trial predicts tensor by tensor (estimate/optimizer_states.py)
    Condition("training.method", ("training.method", "training.optimizer", P + "tp", P + "pp",
                                  "model.moe"),
              lambda v: (not _tensor_states(v)) or ((v.par.tp == 1) & (v.par.pp == 1)
                                                    & (v.m.moe is None)),
              lambda v: ("trials of LoRA/QLoRA and of the 8-bit, 4-bit and Adafactor "
                         "optimizers run dense models with data and context parallelism only "
                         "(PEFT wraps the projections the TP plan shards; their states are "
                         "predicted whole or dim-0 sharded): use tp 1 and pp 1 for the trial, "
                         "or method full with adamw or sgd"),
              value=lambda v: f"{v.tr.method} with {v.tr.optimizer}"),
    Condition("training.method", ("training.method", P + "zero"),
              lambda v: (v.tr.method != "qlora") | (v.par.zero < 2),
              lambda v: ("QLoRA's packed base (bitsandbytes Params4bit / Int8Params) is not "
                         "sharded by FSDP2 in the trial: trial qlora with zero 0 or 1 (DDP), or "
                         "method lora under FSDP2")),
    Condition("training.optimizer", ("training.optimizer", P + "zero"),
              lambda v: (v.tr.optimizer not in ("adamw8bit", "paged_adamw8bit", "adafactor"))
              | (v.par.zero < 2),
              lambda v: ("steps FSDP2's DTensor parameters with no sharding rule "
                         "(bitsandbytes' optimizer_update kernels have no DTensor strategy; "
                         "torch's Adafactor squares a Partial gradient in place): trial it with "
                         "zero 0 or 1, or trial adamw4bit (torchao) under FSDP2")),
)


def _tensor_states(v: Layouts) -> bool:
    """A fine-tuning trial predicted tensor by tensor (trial_prediction.by_tensor)."""
    return v.tr.method in ("lora", "qlora") or v.tr.optimizer not in ("adamw", "sgd")


def trial_problems(s: Scenario) -> list[Problem]:
    """What the workbench's trial runtime cannot run of ``s``'s layout (``TRIAL_LIMITS``)."""
    v = Layouts.of(s)
    return [c.problem(v) for c in TRIAL_LIMITS if not bool(c.ok(v))]

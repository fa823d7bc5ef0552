"""The rule table: the scenario's cross-field rules, each written once: the fields it reads,
the rule in words (for docs/scenario.md), whether it is a rule of the parallel layout, and its
check. The rules themselves live beside this module, one module per seam (model, hardware,
layout, engine, training); each registers its rules here by being imported, and
``scenario/rules/__init__.py`` imports them all, in the table's order.

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
from functools import cached_property

import numpy as np

from workbench.engines import engine_of
from workbench.errors import Problem
from workbench.scenario.layouts import LayoutGrid
from workbench.scenario.schedules import schedule
from workbench.scenario.types import Scenario

Check = Callable[[Scenario], Iterator[Problem]]
P = "parallel."            # field paths of the parallel section start so
E = "training.engine"     # a condition that reads it is an engine limit (``engine_problems``)
DEGREES = ("dp", "tp", "pp", "cp", "ep", "shard_group")   # the layout's integer degrees


@dataclass(frozen=True)
class Layouts:
    """What a layout condition reads: the degrees (``par``: a ``Parallel`` or a ``LayoutGrid``),
    the micro-batch, and the scenario's model, training and hardware. The derived values
    (engine record, microbatches, shard group) are computed once per view: a mask asks for
    them in dozens of conditions."""

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

    @cached_property
    def shard_group(self):
        """HSDP shard group, 0 for none (a grid's column already says 0)."""
        sg = self.par.shard_group
        return sg if np.ndim(sg) else (sg or 0)

    @cached_property
    def eng(self):
        """The engine whose limits apply: ``engine`` when given (an export to that engine's
        format), else the scenario's training.engine (the hf record of its back end)."""
        return self.engine or engine_of(self.tr)

    @cached_property
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


# A grid of more rows than this is judged on the rows still standing once a condition has
# failed at least half of them: every condition is element-wise over the rows, so the mask is
# the same, and the later conditions read a fraction of the rows (the planner's candidate grids
# lose most rows to a few of the layout rules).
COMPACT_ROWS = 4096


_CONDITIONS: dict = {}     # (rules registered, varying, reading) -> ``_layout_conditions``


def _layout_conditions(varying: str | None = None, reading: bool = False) -> list[Condition]:
    """Every layout rule's conditions in table order (``varying``: only those that read the
    field, ``reading``, or only those that do not); listed once per set of rules registered."""
    key = (len(RULES), varying, reading)
    if key not in _CONDITIONS:
        _CONDITIONS[key] = [c for r in RULES for c in r.conditions
                            if varying is None or (varying in c.reads) == reading]
    return _CONDITIONS[key]


def _judge(conditions: list[Condition], base: Scenario, grid, ok: np.ndarray) -> np.ndarray:
    """``ok`` (a mask over ``grid``'s rows, changed in place) where every one of
    ``conditions`` holds too, each condition decided over every row still standing. A large
    grid is compacted to those rows (``COMPACT_ROWS``) once at most half of them stand."""
    v = Layouts(grid, grid.micro_batch, base)
    rows = None          # the compacted grid's rows in ``grid`` (None: not compacted)
    held = ok

    def compact():
        nonlocal rows, held, v
        if len(held) <= COMPACT_ROWS:
            return
        k = np.count_nonzero(held)
        if 0 < k and 2 * k <= len(held):
            keep = np.flatnonzero(held)
            rows = keep if rows is None else rows[keep]
            sub = v.par.take(keep)
            v = Layouts(sub, sub.micro_batch, base)
            held = np.ones(k, dtype=bool)

    compact()
    for c in conditions:
        r = c.ok(v)
        if type(r) is bool or type(r) is np.bool_:    # the same for every row
            if not r:
                held[:] = False
            continue
        np.logical_and(held, r, out=held)
        compact()
    if rows is not None:
        ok[:] = False
        ok[rows] = held
    return ok


def layout_mask(base: Scenario, grid) -> np.ndarray:
    """Which rows of a ``LayoutGrid`` pass every layout rule, for ``base``'s model, hardware and
    training (recompute and offload as the base has them)."""
    return _judge(_layout_conditions(), base, grid, np.ones(len(grid), dtype=bool))


def layout_masks(bases: dict, grid, varying: str) -> dict:
    """``layout_mask`` of ``grid`` under each of ``bases`` (scenarios that differ only in the
    field ``varying``, e.g. "training.offload"): the conditions that do not read it (a
    condition's ``reads`` names every field its check reads) evaluated once for all, the
    others once per scenario over the rows the first left standing."""
    first = next(iter(bases.values()))
    common = _judge(_layout_conditions(varying, False), first, grid,
                    np.ones(len(grid), dtype=bool))
    moving = _layout_conditions(varying, True)
    return {key: _judge(moving, base, grid, common.copy()) for key, base in bases.items()}


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



def why(v: Layouts, key: str, default: str) -> str:
    """The engine record's words for limit ``key``, else ``engine NAME`` and ``default``."""
    return v.eng.why.get(key) or f"engine {v.eng.name} {default}"


def engine_problems(s: Scenario, engine: str) -> list[Problem]:
    """What engine ``engine`` cannot run of ``s``: the conditions of the rule table that read
    training.engine, judged with that engine's record. An export to the engine's format asks
    this; for a scenario of that engine the validator reports the same problems, word for
    word."""
    eng = engine_of(dataclasses.replace(s.training, engine=engine))
    v = Layouts(s.parallel, s.training.micro_batch, s, eng)
    return [c.problem(v) for r in RULES for c in r.conditions
            if E in c.reads and not bool(c.ok(v))]


"""Which evaluated (layout, setting) rows of a search need the time pass, exactly, and the
memory every setting of a (schedule, SP) pass reads (``PassRows``).

The search computes the memory of every valid layout under every setting it tries first — as
columns of the pass: the terms no offload changes once per recompute, each (recompute,
offload) setting's figures from them (``estimate.cost_model.memory_pass.setting_memory``, the memory
pass's own code) — and runs the time pass (``estimate.cost_model.time_pass``) only where a reader of the
search can see the step:

- the rows that fit (the ranked table, the GPU-count front);
- for ``PlanResult.fastest_over`` (the fastest row that does not fit and is faster than the
  best that does, first among those within ``OVER_WINDOW`` times the limit): the rows within
  the window whose step floor (``time_pass.step_floor``, a lower bound) is below the best
  step seen so far — a row whose floor is not can never be faster than the best;
- afterwards (``complete``): the least-memory row (``PlanResult.smallest``; and, where nothing
  fits, the least peak-allocated one the scaling curves show), and, only where no row in the
  window is faster than the best, the rows beyond it whose step floor is below the best, in
  order of memory, until one is.

Rows left without a step carry NaN, which no reader compares below a step. The property tests
(tests/test_plan_pruning.py) hold the pruned search's result to the unpruned one's and every
setting's memory column to the memory pass.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.estimate.cost_model.compose import (
    bound_rows, eager_activations, evaluate_layouts, layout_step_floor, time_layouts,
)
from workbench.estimate.cost_model.rows import Rows, take_rows
from workbench.estimate.cost_model.memory_pass import setting_memory, shared_terms, time_inputs
from workbench.plan.result import OVER_WINDOW
from workbench.scenario.layouts import ROW_FIELDS, LayoutGrid
from workbench.scenario.types import Scenario

TIMED = ("step", "tokens_per_s", "mfu", "bubble")
# Rounding: the floor and the step add the same seconds in another order
FLOOR_SLACK = 1e-9


@dataclass
class Group:
    """One memory-pass call's rows in the search's columns, from ``start`` to the next
    group's, all under the scenario ``base`` (one setting) on ``schedule`` with sequence
    parallelism ``sp``; ``cache`` its block table."""

    base: Scenario
    schedule: str
    sp: bool
    expert_tp: int | None
    cache: dict
    start: int


class PassRows:
    """One (schedule, SP) pass of the search over its valid layouts (those some offload's rule
    mask admits): the rows every setting shares, the device overhead per layout, and per
    recompute, once the search reaches it, the rows bound to its block data and, per
    offload, every layout's memory figures (``memory_pass.setting_memory``: the terms no
    offload changes computed once per recompute): the settings as columns over the same
    rows, so a setting's call reads its memory instead of running a memory pass."""

    def __init__(self, rows: Rows, overhead: np.ndarray) -> None:
        self.rows, self.overhead = rows, overhead
        self.reached: dict = {}     # recompute -> (its layouts, their bound rows, shared terms)
        self.memory: dict = {}      # (recompute, offload) -> layout figures of those layouts
        self.floors: dict = {}      # recompute -> step floor of those layouts
        self.far: dict = {}         # (recompute, offload) -> params_far of their rows

    def reach(self, bases: dict, reach: np.ndarray, cache: dict) -> None:
        """Bind the layouts ``reach`` (a mask) to the block data of the recompute of ``bases``
        (one scenario per offload, all with that recompute; ``cache`` its block table) and
        compute each offload's memory figures of them."""
        first = next(iter(bases.values()))
        rows = bound_rows(first, self.rows.take(reach), cache, eager_activations(first))
        shared = shared_terms(first, rows)
        figures = setting_memory(first, rows, shared, list(bases), self.overhead[reach])
        for off, (figs, far) in figures.items():
            self.memory[first.training.recompute, off] = figs
            self.far[first.training.recompute, off] = far
        self.reached[first.training.recompute] = (reach, rows, shared)

    def figures(self, recompute: str, offload: str, keep: np.ndarray) -> dict:
        """The memory figures of the layouts ``keep`` (a mask within those reached)."""
        k = keep[self.reached[recompute][0]]
        return {key: v[k] for key, v in self.memory[recompute, offload].items()}

    def step_floor(self, base: Scenario, keep: np.ndarray) -> np.ndarray:
        """``time_pass.step_floor`` of the layouts ``keep`` (a mask within those reached)
        under ``base``'s recompute: it reads the block data, the hardware and the global
        batch, no offload, so it is computed once per recompute for every layout reached."""
        recompute = base.training.recompute
        reach, rows, _ = self.reached[recompute]
        if recompute not in self.floors:
            self.floors[recompute] = layout_step_floor(base, rows)
        return self.floors[recompute][keep[reach]]

    def times(self, base: Scenario, keep: np.ndarray) -> dict:
        """The time pass's layout figures of the layouts ``keep`` (a mask within those
        reached) under ``base``'s setting, from the pass's terms at their rows
        (``memory_pass.time_inputs``)."""
        reach, rows, shared = self.reached[base.training.recompute]
        mine = keep[reach]
        row = mine[rows.layout_of]
        rows = rows.take(mine)
        far = self.far[base.training.recompute, base.training.offload]
        pdense, pexpert, fts, offloaded, far = take_rows(
            (shared.pdense, shared.pexpert, shared.fts, shared.activations[1], far), row,
            len(row))
        return time_layouts(base, rows, time_inputs(pdense, pexpert, fts, offloaded, far,
                                                    rows.n))


class Best:
    """The shortest step among the fitting rows timed so far (inf before the first)."""

    def __init__(self) -> None:
        self.step = np.inf

    def update(self, step: np.ndarray) -> None:
        if len(step):
            self.step = min(self.step, float(np.min(step)))


def window_rows(device: np.ndarray, fits: np.ndarray, limit: float, floor: np.ndarray,
                best: Best) -> np.ndarray:
    """The rows that do not fit but need their step: within the window, with a floor (each
    row's step floor) below the best step so far."""
    near = ~fits & (device <= OVER_WINDOW * limit)
    if near.any() and np.isfinite(best.step):
        near[near] = floor[near] * (1 - FLOOR_SLACK) < best.step
    return near


def complete(cols: dict, groups: list[Group], limit: float, floor: np.ndarray) -> None:
    """Time the rows a reader needs that the search left without a step (see the module's
    docstring), in place. ``floor``: each row's step floor (``PassRows.step_floor``)."""
    n = len(cols["step"])
    if not n:
        return
    fits = (cols["device_per_gpu"] <= limit) & cols["host_fits"].astype(bool)
    dev = cols["device_per_gpu"]
    want = [int(np.argmin(dev))]
    if not fits.any():
        want.append(int(np.argmin(cols["memory_per_gpu"])))
    _time(cols, groups, np.array(want))
    if not fits.any():
        return
    best = float(np.min(cols["step"][fits]))
    over = ~fits & (dev <= OVER_WINDOW * limit) & (cols["step"] < best)
    if over.any():
        return
    # beyond the window: the least memory first, until a row is faster than the best; a row
    # whose step floor is not below the best never is
    far = np.flatnonzero(~fits & (dev > OVER_WINDOW * limit)
                         & (floor * (1 - FLOOR_SLACK) < best))
    far = far[np.lexsort((far, dev[far]))]
    # the first few, then the rest at once (each part costs a cost-model call per setting)
    for part in (far[:256], far[256:]):
        _time(cols, groups, part)                 # it times only the rows without a step
        if (cols["step"][part] < best).any():
            return


def _by_group(cols: dict, groups: list[Group], rows: np.ndarray):
    """(group, (its rows among ``rows``, their layout grid)) for each group ``rows`` meet."""
    starts = np.array([g.start for g in groups])
    owner = np.searchsorted(starts, rows, side="right") - 1
    for k in np.unique(owner).tolist():
        g, idx = groups[k], rows[owner == k]
        yield g, (idx, LayoutGrid(*(cols[f][idx] for f in ROW_FIELDS), pp_schedule=g.schedule,
                                  sequence_parallel=g.sp, expert_tp=g.expert_tp))


def _time(cols: dict, groups: list[Group], rows: np.ndarray) -> None:
    """Fill the timed columns of ``rows`` (indices) that lack them, per group."""
    rows = rows[np.isnan(cols["step"][rows])]
    if not len(rows):
        return
    for g, (idx, grid) in _by_group(cols, groups, rows):
        out = evaluate_layouts(g.base, grid, g.cache)
        for key in TIMED:
            cols[key][idx] = out[key]

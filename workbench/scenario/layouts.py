"""Parallel layouts as arrays: one row per layout of one scenario's model, hardware and training
(dp, tp, pp, cp, ep, ZeRO stage, virtual stages, micro-batch, HSDP shard group), for one pipeline
schedule. A single estimate is a grid of one row (``LayoutGrid.of``); the planner, the scaling
curves and the parallel panel pass many. The rule table (``scenario.rules.layout_mask``) and
the cost model (``estimate.cost_model.compose.evaluate``) read it as they read a ``Parallel``.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np

from workbench.scenario.schedules import Schedule, schedule
from workbench.scenario.types import Scenario

ROW_FIELDS = ("dp", "tp", "pp", "cp", "ep", "zero", "virtual_stages", "micro_batch",
              "shard_group")


@dataclass
class LayoutGrid:
    """One row per layout; the names and properties mirror ``scenario.types.Parallel`` (and
    ``training.micro_batch``) so the cost formulas read either. ``shard_group`` 0 is none.
    A grid is never changed after it is made (``take`` makes a new one), so the derived
    columns are computed once."""

    dp: np.ndarray
    tp: np.ndarray
    pp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    zero: np.ndarray
    virtual_stages: np.ndarray
    micro_batch: np.ndarray
    shard_group: np.ndarray | None = None
    pp_schedule: str = "1f1b"
    sequence_parallel: bool = True
    reshard_after_forward: bool | None = None
    expert_tp: int | None = None

    def __post_init__(self) -> None:
        if self.shard_group is None:
            self.shard_group = np.zeros(len(np.asarray(self.dp)), dtype=np.int64)
        for f in ROW_FIELDS:
            setattr(self, f, np.asarray(getattr(self, f), dtype=np.int64))

    @classmethod
    def of(cls, s: Scenario) -> "LayoutGrid":
        """The scenario's own layout as a grid of one row."""
        par = s.parallel
        row = [[getattr(par, f) or 0] for f in ROW_FIELDS if f != "micro_batch"]
        row.insert(ROW_FIELDS.index("micro_batch"), [s.training.micro_batch])
        return cls(*row, pp_schedule=par.pp_schedule, sequence_parallel=par.sequence_parallel,
                   reshard_after_forward=par.reshard_after_forward, expert_tp=par.expert_tp)

    def take(self, index: np.ndarray) -> "LayoutGrid":
        """The rows ``index`` (a mask or indices, repeats allowed)."""
        kw = {f.name: getattr(self, f.name) for f in fields(self)}
        return LayoutGrid(**{**kw, **{f: kw[f][index] for f in ROW_FIELDS}})

    def __len__(self) -> int:
        return len(self.dp)

    @cached_property
    def schedule(self) -> Schedule:
        return schedule(self.pp_schedule)

    @cached_property
    def world(self) -> np.ndarray:
        return self.dp * self.tp * self.pp * self.cp

    @cached_property
    def sp(self) -> np.ndarray:
        return self.sequence_parallel & (self.tp > 1)

    @cached_property
    def reshards(self) -> np.ndarray:
        if self.reshard_after_forward is None:
            return self.pp == 1
        return np.full(len(self), self.reshard_after_forward)

    @cached_property
    def dense_shard(self) -> np.ndarray:
        return np.where(self.shard_group > 0, self.shard_group, self.dp * self.cp)

    @cached_property
    def etp(self) -> np.ndarray:
        return np.full(len(self), self.expert_tp) if self.expert_tp else self.tp

    @cached_property
    def expert_data_parallel(self) -> np.ndarray:
        return self.dp * self.cp * self.tp // (self.etp * self.ep)

    @cached_property
    def expert_shard(self) -> np.ndarray:
        edp = self.expert_data_parallel
        return np.where(self.shard_group > 0, np.gcd(self.shard_group, edp), edp)

    @cached_property
    def chunks_per_rank(self) -> np.ndarray:
        return np.asarray(self.schedule.chunks_per_rank(self.pp, self.virtual_stages))

    @property
    def v_shape(self) -> bool:
        return self.schedule.v_shape

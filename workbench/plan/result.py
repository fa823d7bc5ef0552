"""A finished search: the ranked table, the Pareto fronts, the JSON of contract 4, and the
scenario of any row (validated, so the planner never hands out a layout the validator rejects)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from workbench.errors import Problem, ScenarioError
from workbench.estimate.memory.fit import surely_fits
from workbench.plan.constraints import Constraints
from workbench.plan.space import ROW_FIELDS, candidate_rows
from workbench.plan.summary import describe_layout, limit_sentence, plan_sentence
from workbench.scenario.types import Scenario

GIB = 2 ** 30
PARALLEL_KEYS = ("dp", "tp", "pp", "cp", "ep", "zero", "sequence_parallel", "pp_schedule",
                 "virtual_stages", "async_tp", "tp_comm_overlap", "expert_tp")
# ``fastest_over`` looks first at the layouts needing at most this many times the GPU limit
OVER_WINDOW = 2
TRAINING_KEYS = ("micro_batch", "recompute", "offload", "engine", "compile", "fp8_recipe",
                 "optimizer")


@dataclass
class PlanResult:
    scenario: Scenario
    constraints: Constraints
    ranked: dict                      # column arrays of the layouts that fit, best first
    counts: dict                      # candidates, valid, fit (layouts), evaluated, rows (ranked)
    limit: float                      # bytes per GPU a layout may use
    fraction: float = 1.0             # the share of the GPU that is (the band's or the user's)
    capacity: float = 0.0             # bytes per GPU
    band: dict | None = None          # the memory band the default share and "tight" read
    smallest: dict | None = None      # least-memory evaluated layout (for infeasibility)
    gpu_fit_host_short: int = 0       # layouts within GPU memory but not host DDR / NVMe
    by_gpu_count: list = field(default_factory=list)
    seconds: float = 0.0
    start: dict | None = None         # the scenario's own layout among these (search.starting_point)
    # the fastest evaluated layout that does not fit and is faster than the best that does
    # (of those within twice the GPU limit; else the one that needs least): what more memory
    # would buy (``plan.summary.plan_sentence``)
    fastest_over: dict | None = None
    _frame: object = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def build(cls, s: Scenario, c: Constraints, found: dict) -> "PlanResult":
        # numpy only: the CLI's plan never imports pandas (``table`` builds a DataFrame on use)
        cols = dict(found["columns"])
        n = len(cols["step"])
        smallest = None
        if n:        # sequence parallelism means nothing without TP: show it off
            cols["sequence_parallel"] = (cols["sequence_parallel"].astype(bool)
                                         & (cols["tp"] > 1))
            i = int(np.argmin(cols["device_per_gpu"]))
            smallest = {k: _plain(v[i]) for k, v in cols.items()}
            # the fitting layouts by step, then memory; lexsort is stable (equal rows keep
            # the search's order)
            keep = np.flatnonzero(cols["fits"])
            keep = keep[np.lexsort((cols["memory_per_gpu"][keep], cols["step"][keep]))]
            ok = {"rank": np.arange(1, len(keep) + 1), **{k: v[keep] for k, v in cols.items()}}
        else:
            ok = {"rank": np.arange(0), **cols}
        if len(ok["rank"]):
            ok["memory_gib"] = ok["memory_per_gpu"] / GIB
            ok["device_gib"] = ok["device_per_gpu"] / GIB
            ok["headroom_gib"] = (found["limit"] - ok["device_per_gpu"]) / GIB
            ok["pareto_memory"] = _front(ok["memory_per_gpu"], ok["tokens_per_s"])
            # fits surely, or tight: within the memory band of the GPU (estimate.memory.fit)
            ok["fit"] = np.where(surely_fits(ok["device_per_gpu"], found["capacity"],
                                             found["band"]), "yes", "tight").astype(object)
        counts = dict(found["counts"], rows=int(len(ok["rank"])))
        short = int(((cols["device_per_gpu"] <= found["limit"])
                     & ~cols["host_fits"].astype(bool)).sum()) if n else 0
        over = None
        if n and len(ok["rank"]):
            miss = np.flatnonzero(~cols["fits"].astype(bool) & (cols["step"] < ok["step"][0]))
            if len(miss):
                dev = cols["device_per_gpu"][miss]
                near = miss[dev <= OVER_WINDOW * found["limit"]]
                pick = (near[np.argmin(cols["step"][near])] if len(near)
                        else miss[np.argmin(dev)])
                over = {k: _plain(v[pick]) for k, v in cols.items()}
        return cls(scenario=s, constraints=c, ranked=ok, counts=counts, limit=found["limit"],
                   fraction=found["fraction"], capacity=found["capacity"], band=found["band"],
                   smallest=smallest, gpu_fit_host_short=short, fastest_over=over)

    @property
    def table(self):
        """The ranked layouts as a pandas DataFrame (built on first use, for notebooks and
        the dashboard)."""
        if self._frame is None:
            import pandas as pd

            self._frame = pd.DataFrame(self.ranked)
        return self._frame

    def __len__(self) -> int:
        """The number of layouts that fit (ranked)."""
        return len(self.ranked["rank"])

    def row(self, rank: int = 1) -> dict:
        """The columns of the layout ranked ``rank`` (1 = best), as plain Python values."""
        return {k: _plain(v[rank - 1]) for k, v in self.ranked.items()}

    @property
    def feasible(self) -> bool:
        return len(self) > 0

    @property
    def best_tokens_per_s(self) -> float:
        return float(self.ranked["tokens_per_s"][0]) if self.feasible else float("nan")

    def infeasible_reason(self) -> Problem:
        """Which constraint left no layout: a fixed field, the validation rules, or memory."""
        s, c = self.scenario, self.constraints
        if self.counts["valid"] == 0:
            blockers = [k for k in c.fixed
                        if _valid_count(s, {kk: v for kk, v in c.fixed.items() if kk != k}) > 0]
            if blockers:
                names = ", ".join(f"{k}={c.fixed[k]}" for k in blockers)
                return Problem("constraints.fixed", names,
                               f"no layout of {s.hardware.world} GPUs passes the scenario rules "
                               f"with {names}; without it there are valid layouts")
            return Problem("scenario", f"{s.model.name} on {s.hardware.world} GPUs",
                           "no parallel layout passes the rules: " + _sample_rule(s, c))
        if self.gpu_fit_host_short:
            return Problem("hardware.host", f"{s.hardware.host.memory_gb:g} GiB DDR, "
                           f"{s.hardware.storage.drives} drive(s)",
                           f"{self.gpu_fit_host_short:,} layouts fit the GPUs only by offloading "
                           "more than the node's host memory or NVMe holds; add host memory or "
                           "drives, or GPUs")
        sm = self.smallest
        need = sm["device_per_gpu"] / GIB
        cap = self.capacity / GIB
        what = describe_layout(sm)
        if need <= cap:
            return Problem("max_memory_fraction", self.fraction,
                           f"the least memory any layout needs is {need:.1f} GiB per GPU "
                           f"({what}), above {self.fraction:.3g} of {cap:.1f} GiB; "
                           "raise the fraction (--max-memory-fraction)")
        return Problem("hardware", f"{s.hardware.world} x {s.hardware.gpu.name}",
                       f"no layout fits: the least memory any needs is {need:.1f} GiB per GPU "
                       f"({what}) against {cap:.1f} GiB; add GPUs, shorten the sequence or "
                       "reduce the global batch")

    def layout(self, rank: int = 1) -> dict:
        """The parallel and training fields of the layout ranked ``rank`` (1 = best)."""
        row = self.row(rank)
        par = {k: row[k] for k in PARALLEL_KEYS}
        par["shard_group"] = int(row["shard_group"]) or None
        par["expert_tp"] = None if row.get("expert_tp") is None else int(row["expert_tp"])
        tr = {k: row[k] for k in TRAINING_KEYS}
        return {"parallel": par, "training": tr}

    def scenario_of(self, rank: int = 1) -> Scenario:
        """The full, validated scenario of the layout ranked ``rank``."""
        from workbench.scenario import parse_scenario

        doc = self.scenario.to_dict()
        lay = self.layout(rank)
        par = dict(doc.get("parallel", {}))
        par.update(lay["parallel"])
        for key in ("shard_group", "expert_tp"):      # None: left out (none / the dense TP)
            if par[key] is None:
                par.pop(key)
        tr = dict(doc.get("training", {}))
        tr.update(lay["training"])
        doc["parallel"], doc["training"] = par, tr
        return parse_scenario(doc)

    def to_dict(self, top: int | None = None) -> dict:
        """Contract 4: ``layouts[]`` with a full ``parallel`` block, the training options the
        search chose, ``time.step``, ``throughput.tokens_per_s``, ``memory.per_gpu.total`` and
        ``fits``; plus the search counts, the Pareto fronts and the answer in one sentence
        (``summary``, ``plan.summary.plan_sentence``)."""
        n = len(self) if top is None else min(top, len(self))
        layouts = []
        for i in range(1, n + 1):
            row = self.row(i)
            full = self.scenario_of(i)
            lay = {k: v for k, v in vars(full.parallel).items()}
            layouts.append({
                "rank": i, "parallel": lay, "training": self.layout(i)["training"],
                "time": {"step": float(row["step"]), "bubble": float(row["bubble"])},
                "throughput": {"tokens_per_s": float(row["tokens_per_s"]),
                               "mfu": float(row["mfu"])},
                "memory": {"per_gpu": {"total": float(row["memory_per_gpu"]),
                                       "device": float(row["device_per_gpu"])},
                           "headroom": float(self.limit - row["device_per_gpu"])},
                "fits": bool(row["fits"]), "fit": "pass" if row["fit"] == "yes" else "tight",
                "pareto_memory": bool(row["pareto_memory"]),
            })

        front = np.flatnonzero(self.ranked["pareto_memory"]) if self.feasible else []
        r = self.ranked
        return {"gpus": self.scenario.hardware.world, "model": self.scenario.model.name,
                "summary": plan_sentence(self),
                "counts": self.counts, "seconds": self.seconds,
                "memory_limit": {"fraction": self.fraction,
                                 "from": ("band" if self.constraints.max_memory_fraction is None
                                          else "chosen"),
                                 "band": self.band,
                                 "per_gpu": float(self.limit),
                                 "gpu_memory": float(self.capacity),
                                 "says": limit_sentence(self)},
                "layouts": layouts,
                "pareto_memory": [{"rank": int(r["rank"][i]), "memory_per_gpu": float(
                    r["memory_per_gpu"][i]), "tokens_per_s": float(r["tokens_per_s"][i])}
                    for i in front],
                "pareto_gpus": self.by_gpu_count, "start": self.start}


def _front(memory: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Layouts no other beats on both axes: less memory and more tokens/s."""
    order = np.lexsort((-tokens, memory))
    keep = np.zeros(len(memory), bool)
    best = -np.inf
    for i in order:
        if tokens[i] > best:
            keep[i] = True
            best = tokens[i]
    return keep


def _plain(v):
    return v.item() if hasattr(v, "item") else v


def _valid_count(s: Scenario, fixed: dict) -> int:
    """Valid layouts (rules only, default training options) with these fixed fields."""
    from workbench.scenario.layouts import LayoutGrid
    from workbench.scenario.rules import layout_mask
    from workbench.scenario.types import SCHEDULES

    total = 0
    schedules = [fixed["pp_schedule"]] if "pp_schedule" in fixed else SCHEDULES
    for sched in schedules:
        rows = candidate_rows(s, s.hardware.world, sched, fixed)
        if rows.shape[1]:
            total += int(layout_mask(s, LayoutGrid(*rows, pp_schedule=sched)).sum())
    return total


def _sample_rule(s: Scenario, c: Constraints) -> str:
    """The validator's messages for one candidate layout (the rules every layout broke)."""
    from workbench.scenario import parse_scenario
    from workbench.scenario.types import SCHEDULES

    for sched in SCHEDULES:
        rows = candidate_rows(s, s.hardware.world, sched, c.fixed)
        if rows.shape[1]:
            row = dict(zip(ROW_FIELDS, rows[:, 0].tolist()))
            doc = s.to_dict()
            doc["parallel"] = {**doc.get("parallel", {}), "pp_schedule": sched,
                               **{k: v for k, v in row.items() if k != "micro_batch"}}
            if not row["shard_group"]:
                doc["parallel"].pop("shard_group")
            doc["training"] = {**doc.get("training", {}), "micro_batch": row["micro_batch"]}
            try:
                parse_scenario(doc)
            except ScenarioError as exc:
                return exc.one_line()
            return "no candidate passes the rule table"
    return f"no degrees multiply to {s.hardware.world} GPUs within the model's limits"

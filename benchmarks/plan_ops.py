"""How many numpy operations the planner's cost model runs: the layout search for Llama 3.1
405B on 16,384 H200 (``docs/step-time-model.md``'s command), counted by an ndarray subclass
that tallies every ufunc call (reductions and ``reduceat`` included), every numpy function it
reaches (``np.where``, ``np.choose``, ``np.unique``, ...), every gather (indexing with an
array) and every ``np.asarray``; with the elements each operation wrote. Counts are exact and
do not depend on the machine's load, unlike times.

    .venv/bin/python benchmarks/plan_ops.py [--root OTHER_CHECKOUT]

``--root`` counts another checkout (e.g. the commit before) with this script. Per evaluation:
per cost-model call of the search (before the memory/time split, ``evaluate_layouts``; after
it, ``search._pruned``: a memory pass and the time pass on what can fit); per row: per
(layout, pipeline rank) row the memory pass evaluates.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

TALLY: Counter = Counter()


class Counted(np.ndarray):
    """An ndarray that tallies the numpy operations it takes part in (``TALLY``)."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        TALLY["ufunc"] += 1
        plain = [x.view(np.ndarray) if isinstance(x, Counted) else x for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(x.view(np.ndarray) if isinstance(x, Counted) else x
                                  for x in kwargs["out"])
        out = getattr(ufunc, method)(*plain, **kwargs)
        return _wrap(out)

    def __array_function__(self, func, types, args, kwargs):
        TALLY["function"] += 1
        TALLY[f"function:{func.__name__}"] += 1
        out = super().__array_function__(func, tuple(t for t in types if t is not Counted)
                                         + (np.ndarray,), args, kwargs)
        return _wrap(out)

    def __getitem__(self, index):
        out = super().__getitem__(index)
        if isinstance(index, np.ndarray) or (isinstance(index, tuple) and any(
                isinstance(i, np.ndarray) for i in index)):
            TALLY["gather"] += 1
            _elements(out)
        return out


def _elements(out) -> None:
    if isinstance(out, np.ndarray):
        TALLY["elements"] += out.size


def _wrap(out):
    if isinstance(out, tuple):
        return tuple(_wrap(o) for o in out)
    if isinstance(out, np.ndarray):
        _elements(out)
        return out.view(Counted) if type(out) is np.ndarray else out
    return out


def _count_asarray():
    """``np.asarray`` / ``np.array`` keep the subclass (and ``asarray`` calls are tallied), so
    a column that passes through them is still counted."""
    asarray, array = np.asarray, np.array

    def counted_asarray(a, *args, **kwargs):
        if isinstance(a, Counted):
            TALLY["asarray"] += 1
            return np.asanyarray(a, *args, **kwargs)
        return asarray(a, *args, **kwargs)

    def counted_array(a, *args, **kwargs):
        if isinstance(a, Counted):
            kwargs.setdefault("subok", True)
        return array(a, *args, **kwargs)
    np.asarray, np.array = counted_asarray, counted_array


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=str(Path(__file__).resolve().parent.parent),
                    help="the checkout to count (default: this one)")
    args = ap.parse_args()
    sys.path.insert(0, args.root)
    from workbench.plan import search as search_mod
    from workbench.plan.constraints import Constraints
    from workbench.scenario import load_scenario
    from workbench.scenario.types import Parallel

    s = load_scenario(Path(args.root) / "examples/llama3-405b-h200-cluster.yaml",
                      ["hardware.nodes=2048", "parallel.dp=128", "training.global_batch=2048"])
    s = dataclasses.replace(s, parallel=Parallel())       # as ``plan`` starts
    split = hasattr(search_mod, "_pruned")
    name = "_pruned" if split else "evaluate_layouts"
    inner = getattr(search_mod, name)
    calls: list[Counter] = []

    def counted_call(*a, **kw):
        before = Counter(TALLY)
        out = inner(*a, **kw)
        calls.append(Counter(TALLY) - before)
        return out
    setattr(search_mod, name, counted_call)
    rows_fn = search_mod.candidate_rows
    search_mod.candidate_rows = lambda *a, **kw: rows_fn(*a, **kw).view(Counted)
    # rows: the (layout, pipeline rank) rows the memory pass (or the one pass) evaluates
    n_rows: list[int] = []
    from workbench.estimate.cost_model import compose as cost_model
    pass_level = Counter()
    if split:
        memory = cost_model.memory

        def counted_memory(base, rows, *a, **kw):
            n_rows.append(rows.n)
            return memory(base, rows, *a, **kw)
        cost_model.memory = counted_memory
        from workbench.plan import pruning
        if hasattr(pruning, "PassRows"):
            # the settings as columns: each (schedule, SP) pass computes every setting's
            # memory once per recompute; counted with the calls (per call: over the calls)
            reach = pruning.PassRows.reach

            def counted_reach(self, bases, keep, cache):
                before = Counter(TALLY)
                reach(self, bases, keep, cache)
                pass_level.update(Counter(TALLY) - before)
                n_rows.append(self.reached[next(iter(bases.values())).training.recompute][1].n
                              * len(bases))
            pruning.PassRows.reach = counted_reach
    else:
        rank_rows = cost_model.rank_rows if hasattr(cost_model, "rank_rows") else None

        def counted_rank_rows(*a, **kw):
            out = rank_rows(*a, **kw)
            n_rows.append(len(out[0]))
            return out
        cost_model.rank_rows = counted_rank_rows
    _count_asarray()
    t0 = time.perf_counter()
    found = search_mod.search_rows(s, Constraints())
    seconds = time.perf_counter() - t0
    total = sum(calls, Counter()) + pass_level
    ops = total["ufunc"] + total["function"] + total["gather"] + total["asarray"]
    evaluated = found["counts"]["evaluated"]
    rows = sum(n_rows)
    print(f"checkout: {args.root}  ({'memory/time split' if split else 'one pass'})")
    print(f"cost-model calls: {len(calls)}, evaluated layouts: {evaluated:,}, "
          f"(layout, rank) rows through the memory pass: {rows:,}  [search {seconds:.2f} s with counting on]")
    print(f"numpy operations: {ops:,} = {ops / len(calls):,.0f} per call "
          f"(ufuncs {total['ufunc'] / len(calls):,.0f}, functions "
          f"{total['function'] / len(calls):,.0f}, gathers {total['gather'] / len(calls):,.0f}, "
          f"asarray {total['asarray'] / len(calls):,.0f})")
    print(f"elements written: {total['elements']:,} = {total['elements'] / evaluated:,.0f} per "
          f"evaluated layout, {total['elements'] / max(rows, 1):,.0f} per row")
    top = sorted(((k.split(":", 1)[1], v) for k, v in total.items()
                  if k.startswith("function:")), key=lambda kv: -kv[1])[:6]
    print("most called numpy functions per call: " + ", ".join(
        f"{k} {v / len(calls):.0f}" for k, v in top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

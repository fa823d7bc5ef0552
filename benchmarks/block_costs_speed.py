"""How long the planner spends in block costs: the full layout search for Llama 3.1 405B on
16,384 H200 (2,048 nodes of 8), with the cost model's per-shape block data
(``cost_model.block_table.block_data``: block costs, one layer's activations and parameters) and the
block-cost formulas themselves timed by wrappers.

    .venv/bin/python benchmarks/block_costs_speed.py [--repeat 5]

Then the same for ``benchmarks/estimate_speed.py``'s grid (every (tp, pp, cp, ZeRO, virtual
stages, micro-batch) of 405B on 16,384 H200 for five schedules, 7,740 valid layouts over 80
shapes), each of ``--repeat`` passes with a fresh block table: evaluated layouts per second and
the milliseconds in block data and block costs (the median pass; one pass of that script is a
single sample on a shared machine).

Works on any commit since block data moved into ``cost_model._block_data`` (the module that
holds the block data: ``estimate.cost_model.block_table`` now, ``estimate.cost_model`` before;
it wraps ``block_cost_arrays`` where that module has it, else the per-shape ``block_costs``),
so the same script measures before and after. Each search runs with a fresh planner (a cold block
table); figures are per search: milliseconds, calls and shapes.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class Timer:
    """Wraps a function: total seconds and calls (nested calls of the same wrapper counted
    once)."""

    def __init__(self, fn) -> None:
        self.fn, self.seconds, self.calls, self.depth, self.shapes = fn, 0.0, 0, 0, 0

    def __call__(self, *args, **kwargs):
        # ``block_data(base, shapes, ...)`` after, ``_block_data(base, tp, cp, ...)`` before
        self.shapes += len(args[1]) if len(args) > 1 and isinstance(args[1], list) else 1
        self.depth += 1
        t = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.depth -= 1
            if self.depth == 0:
                self.seconds += time.perf_counter() - t
                self.calls += 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="searches timed (default 5)")
    args = ap.parse_args()
    try:
        from workbench.estimate.cost_model import block_table as cost_model
        name = "block_data"
    except ImportError:       # before the estimator's rooms: one cost_model module
        from workbench.estimate import cost_model
        name = "_block_data"
    from workbench.plan import plan
    from workbench.scenario import load_scenario

    s = load_scenario(ROOT / "examples/llama3-405b-h200-cluster.yaml",
                      ["hardware.nodes=2048", "parallel.dp=128", "training.global_batch=2048"])
    data = Timer(getattr(cost_model, name))
    setattr(cost_model, name, data)
    formula = "block_cost_arrays" if hasattr(cost_model, "block_cost_arrays") else "block_costs"
    costs = Timer(getattr(cost_model, formula))
    setattr(cost_model, formula, costs)
    plan(s)                                   # warm-up: imports and first calls
    rows = []
    for _ in range(args.repeat):
        for timer in (data, costs):
            timer.seconds, timer.calls, timer.shapes = 0.0, 0, 0
        t = time.perf_counter()
        r = plan(s)
        whole = time.perf_counter() - t
        rows.append((whole, data.seconds, data.calls, data.shapes, costs.seconds, costs.calls))
    print(f"405B on 16,384 H200: {r.counts['evaluated']:,} evaluated layouts per search; "
          f"block costs by {formula}")
    print(f"{'search s':>9} {'block data ms':>14} {'calls':>6} {'shapes':>7} "
          f"{'block costs ms':>15} {'calls':>6}")
    for whole, d, dc, ds, c, cc in rows:
        print(f"{whole:9.3f} {d * 1e3:14.1f} {dc:6d} {ds:7d} {c * 1e3:15.1f} {cc:6d}")
    med = [statistics.median(col) for col in zip(*rows)]
    print(f"median: search {med[0]:.3f} s, block data {med[1] * 1e3:.1f} ms, "
          f"block costs {med[4] * 1e3:.1f} ms ({med[3]:.0f} shapes)")
    grid(args.repeat, data, costs)
    return 0


def grid(repeat: int, data: Timer, costs: Timer) -> None:
    """``estimate_speed.grid_405b``'s layouts, masked once, evaluated ``repeat`` times."""
    from estimate_speed import grid_405b   # a sibling script, as published_space's accuracy

    from workbench.estimate.cost_model.compose import evaluate_layouts
    from workbench.scenario.layouts import LayoutGrid
    from workbench.scenario.rules import layout_mask

    base, by_schedule = grid_405b()
    grids = []
    for sched, rows in by_schedule.items():
        mask = layout_mask(base, LayoutGrid(*rows, pp_schedule=sched))
        grids.append(LayoutGrid(*rows[:, mask], pp_schedule=sched))
    n = sum(len(g) for g in grids)
    out = []
    for _ in range(repeat + 1):
        for timer in (data, costs):
            timer.seconds, timer.calls, timer.shapes = 0.0, 0, 0
        cache: dict = {}
        t = time.perf_counter()
        for g in grids:
            evaluate_layouts(base, g, cache)
        out.append((time.perf_counter() - t, data.seconds, data.shapes, costs.seconds))
    out = out[1:]                                 # the first pass warms up
    print(f"\nestimate_speed's grid: {n:,} evaluated layouts, {out[0][2]} shapes")
    for whole, d, _, c in out:
        print(f"{whole * 1e3:9.1f} ms {n / whole:10,.0f} layouts/s  block data {d * 1e3:6.1f} ms"
              f"  block costs {c * 1e3:6.1f} ms")
    whole, d, _, c = (statistics.median(col) for col in zip(*out))
    print(f"median: {n / whole:,.0f} evaluated layouts/s, block data {d * 1e3:.1f} ms, "
          f"block costs {c * 1e3:.1f} ms")


if __name__ == "__main__":
    raise SystemExit(main())

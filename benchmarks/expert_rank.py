"""Where the planner ranks the layouts experts tuned. For every run of
benchmarks/data/published_runs.yaml from a vendor's tuned recipe tables (NVIDIA NeMo and
Megatron-Bridge performance summaries, NVIDIA dgxc-benchmarking recipes, torchtitan's published
benchmarks), the planner searches the run's own scenario (its model, GPUs, engine, precision,
global batch and sequence; the default constraints, 90 % headroom) and says:

- the rank of the run's layout among the ranked rows (``PlanResult.start``; "too big" where its
  nvidia-smi figure is above the planner's limit, "refused" where the validator refuses it);
- how much faster the planner believes its #1 is than the run's layout (both estimated);
- whether the measured step is already at or below the #1's predicted step (then the
  planner's advantage is within its error);
- the #1's and the run's GPU memory as nvidia-smi counts it, as a share of the GPU.

Issue 44 measured on 40 runs (some outside benchmarks/data): median rank 107, #1 in 3 of 36,
the #1 believed 15 % faster (median), measured at or below the #1's prediction in 12 of 39,
the #1 at 92 % of GPU memory against the experts' 78 %.

    .venv/bin/python benchmarks/expert_rank.py [--ids PREFIX ...]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import yaml  # noqa: E402

from accuracy import DATA, compare, source_of, to_scenario  # noqa: E402
from workbench.errors import ScenarioError  # noqa: E402
from workbench.plan import plan  # noqa: E402
from workbench.scenario import parse_scenario  # noqa: E402

# The sources whose layouts a vendor tuned for its hardware (accuracy.source_of: the id's
# first word). MosaicML's table sweeps micro-batches and the papers' tables sweep layouts on
# purpose, so their rows are not one expert's choice each.
TUNED = ("nemo", "mbridge", "dgxc", "torchtitan")


def one(rec: dict) -> dict:
    """The planner against one run: rank, believed advantage, memory shares."""
    row = {"id": rec["id"]}
    try:
        s = parse_scenario(to_scenario(rec))
    except ScenarioError as exc:
        return {**row, "refused": exc.one_line()}
    measured = compare(rec, s)
    try:
        r = plan(s)
    except ScenarioError as exc:
        return {**row, "nothing": exc.one_line()}
    st = r.start
    cap = r.capacity
    best_step = float(r.ranked["step"][0])
    row.update(rank=st["rank"], fits=st["fits"], rows=len(r),
               advantage=st["step"] / best_step - 1,
               measured_below=("error" in measured
                               and measured["step"] / (1 + measured["error"]) <= best_step),
               best_share=float(r.ranked["device_per_gpu"][0]) / cap,
               run_share=st["device_per_gpu"] / cap)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ids", nargs="*", default=(), help="only runs whose id starts so")
    args = ap.parse_args()
    runs = [rec for rec in yaml.safe_load(DATA.read_text())
            if source_of(rec) in TUNED and (not args.ids or rec["id"].startswith(tuple(args.ids)))]
    t0 = time.perf_counter()
    out = [one(rec) for rec in runs]
    print(f"{'run':58} {'rank':>8} {'of':>7} {'#1 faster':>9} {'meas<=#1':>8} "
          f"{'#1 mem':>6} {'run mem':>7}")
    for o in out:
        if "refused" in o or "nothing" in o:
            why = ("refused: " + o["refused"]) if "refused" in o else ("no plan: " + o["nothing"])
            print(f"{o['id'][:58]:58} {why[:70]}")
            continue
        rank = o["rank"] if o["rank"] is not None else "too big"
        print(f"{o['id'][:58]:58} {rank!s:>8} {o['rows']:7,} {o['advantage']:9.1%} "
              f"{'yes' if o['measured_below'] else 'no':>8} {o['best_share']:6.0%} "
              f"{o['run_share']:7.0%}")
    done = [o for o in out if "rank" in o]
    ranked = [o for o in done if o["rank"] is not None]
    print(f"\n{len(runs)} tuned runs ({', '.join(TUNED)}), {len(done)} planned, "
          f"{len(ranked)} with the run's layout within the planner's limit "
          f"({time.perf_counter() - t0:.0f} s)")
    if ranked:
        top = [o["rank"] / o["rows"] for o in ranked]
        print(f"  rank of the run's layout: median {statistics.median(o['rank'] for o in ranked):g}"
              f" (median top {statistics.median(top):.1%} of the ranked rows); "
              f"#1 in {sum(o['rank'] == 1 for o in ranked)} of {len(ranked)}")
    if done:
        adv = [o["advantage"] for o in done]
        print(f"  the planner's #1 believed faster than the run's layout: median "
              f"{statistics.median(adv):.1%}, worst {max(adv):.1%}")
        print(f"  measured step at or below the #1's predicted step: "
              f"{sum(o['measured_below'] for o in done)} of {len(done)}")
        print(f"  GPU memory (nvidia-smi) as a share of the GPU: the #1 median "
              f"{statistics.median(o['best_share'] for o in done):.0%}, the runs' "
              f"{statistics.median(o['run_share'] for o in done):.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

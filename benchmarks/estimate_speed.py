"""How fast the estimator is: one estimate (the widgets call it on every edit; goal < 10 ms
p95), a grid of layouts through the same cost model (the planner's path; goal >= 200,000
evaluated layouts/s for Llama 3.1 405B on 16,384 H200), and, in the same run, the workbench
against llm-analysis 0.2.2 on the same layouts (goal >= 50x llm-analysis per layout).

    .venv/bin/python benchmarks/estimate_speed.py [--peers /tmp/peers/bin/python]

llm-analysis runs in its own virtual environment (it needs torch; the workbench's must not get
it), as benchmarks/plan_vs_llm_analysis.py describes:
    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install torch==2.13.0 llm-analysis==0.2.2
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import itertools  # noqa: E402

import numpy as np  # noqa: E402

from workbench.estimate import estimate  # noqa: E402
from workbench.estimate.cost_model.compose import evaluate_layouts  # noqa: E402
from workbench.scenario.layouts import LayoutGrid  # noqa: E402
from workbench.scenario.rules import layout_mask  # noqa: E402
from workbench.scenario import load_scenario, parse_scenario, read_document  # noqa: E402


def timed(fn, repeat: int = 200) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peers", metavar="PYTHON", default="/tmp/peers/bin/python",
                    help="a Python with llm-analysis 0.2.2 (skipped when it is missing)")
    args = ap.parse_args()
    print(f"{'example':32} {'validate ms':>12} {'estimate ms':>12} {'p95 total ms':>13}")
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        doc = read_document(path)
        s = load_scenario(path)
        v = timed(lambda: parse_scenario(doc))
        e = timed(lambda: estimate(s))
        both = sorted(a + b for a, b in zip(v, e))
        print(f"{path.stem:32} {statistics.median(v) * 1e3:12.3f} {statistics.median(e) * 1e3:12.3f}"
              f" {both[int(0.95 * len(both))] * 1e3:13.3f}")
    grid_speed()
    versus_llm_analysis(Path(args.peers))
    return 0


def grid_405b():
    """Every (tp, pp, cp, ZeRO, virtual stages, micro-batch) for Llama 3.1 405B on 2,048 nodes
    of 8 H200 (16,384 GPUs), per schedule; dp fills the rest: the base scenario and
    {schedule: rows} (``LayoutGrid``'s columns, one layout per column, unmasked). Also the
    grid of ``benchmarks/block_costs_speed.py``."""
    base = load_scenario(ROOT / "examples/llama3-405b-h200-cluster.yaml",
                         ["hardware.nodes=2048", "parallel.dp=128", "parallel.pp=16",
                          "training.global_batch=2048"])
    world = base.hardware.world
    grids = {}
    for sched in ("1f1b", "interleaved-1f1b", "zero-bubble", "dualpipev", "gpipe"):
        grids[sched] = np.array([
            (world // (tp * pp * cp), tp, pp, cp, 1, zero, v, mb, 0)
            for tp, pp, cp, zero, v, mb in itertools.product(
                (1, 2, 4, 8), (1, 2, 3, 4, 6, 7, 8, 9, 14, 16, 18, 21, 32, 42, 63, 64, 126),
                (1, 2, 4, 8, 16), (0, 1, 2, 3), (1, 2, 3, 4, 6, 7, 9), (1, 2, 4, 8))
            if world % (tp * pp * cp) == 0]).T
    return base, grids


def grid_speed() -> None:
    """``grid_405b``'s layouts, each schedule masked and evaluated per pass."""
    base, grids = grid_405b()
    print(f"\ngrid: {base.model.name} on {base.hardware.world:,} GPUs")
    print(f"{'schedule':18} {'layouts':>9} {'valid':>7} {'seconds':>9} {'screened/s':>12} "
          f"{'evaluated/s':>12}")

    def one_pass() -> dict:
        """Every schedule once, a fresh block cache shared by the schedules as the planner
        shares it: {schedule: (layouts, valid, seconds)}."""
        cache: dict = {}
        out = {}
        for sched, rows in grids.items():
            t0 = time.perf_counter()
            g = LayoutGrid(*rows, pp_schedule=sched)
            mask = layout_mask(base, g)
            res = evaluate_layouts(base, g.take(mask), cache)
            out[sched] = (rows.shape[1], int(mask.sum()), time.perf_counter() - t0)
            assert np.isfinite(res["step"]).all()
        return out

    # the median of 7 passes per schedule: one pass moves ~20 % with the machine's load
    passes = [one_pass() for _ in range(7)]
    total_n = total_t = total_v = 0.0
    for sched in grids:
        n, v, _ = passes[0][sched]
        dt = statistics.median(p[sched][2] for p in passes)
        total_n, total_t, total_v = total_n + n, total_t + dt, total_v + v
        print(f"{sched:18} {n:9,} {v:7,} {dt:9.3f} {n / dt:12,.0f} {v / dt:12,.0f}")
    print(f"{'all':18} {int(total_n):9,} {int(total_v):7,} {total_t:9.3f} "
          f"{total_n / total_t:12,.0f} {total_v / total_t:12,.0f}")
    print("screened: layouts checked against the validation rules; evaluated: valid layouts "
          "estimated (step time, memory, fit, throughput), both per second of the whole call")




def versus_llm_analysis(peers: Path) -> None:
    """Both tools on the same layouts of Llama 3.1 405B on 512 H200 (the planner's common
    sub-space with llm-analysis: tp x pp x dp, ZeRO 0-3, SP on/off, micro-batch, recompute;
    1F1B, no CP/EP/HSDP/offload): llm-analysis's ``training()`` per layout, the workbench's cost
    model over a grid per (SP, recompute), screened by its rules. Rates per layout each tool
    evaluated, in one run."""
    import dataclasses
    import json
    import subprocess

    from workbench.scenario.types import Parallel

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import plan_vs_llm_analysis as peer

    if not peers.exists():
        print(f"\nllm-analysis: {peers} not found; see the docstring to create it")
        return
    case = peer.CASES[2]
    info = peer.case_shape(case)
    out = subprocess.run([str(peers), str(ROOT / "benchmarks/plan_vs_llm_analysis.py"),
                          "--la-speed"], input=json.dumps(info), capture_output=True, text=True,
                         cwd=ROOT, check=True)
    la = json.loads(out.stdout)
    base = load_scenario(ROOT / case["scenario"], case["overrides"])
    gb = base.training.global_batch
    rows = np.array([(dp, tp, pp, 1, 1, zero, 1, mb, 0)
                     for tp, pp, dp, mb in info["candidates"] if gb % (dp * mb) == 0
                     for zero in (0, 1, 2, 3)]).T
    def workbench_side() -> tuple[int, int]:
        n = asked = 0
        for sp in (True, False):
            r = rows if sp else rows[:, rows[1] > 1]
            g = LayoutGrid(*r, pp_schedule="1f1b", sequence_parallel=sp)
            sub = None
            for rc in ("none", "selective", "full"):
                s = dataclasses.replace(base, parallel=Parallel(sequence_parallel=sp),
                                        training=dataclasses.replace(base.training, recompute=rc))
                asked += r.shape[1]
                if sub is None:     # one mask per SP, as the planner screens: the rules read
                    sub = g.take(layout_mask(s, g))   # no recompute (plan/search.py)
                evaluate_layouts(s, sub)            # a fresh cache: nothing carried over
                n += len(sub)
        return n, asked

    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        n, asked = workbench_side()
        times.append(time.perf_counter() - t0)
    wb_s = statistics.median(times)                 # median of 5 cold passes
    la_rate, wb_rate = la["layouts"] / la["seconds"], n / wb_s
    print(f"\nsame layouts, {base.model.name} on {base.hardware.world} GPUs, one run:")
    print(f"  llm-analysis 0.2.2 training(): {la['layouts']:7,} layouts in {la['seconds']:7.3f} s"
          f" = {la_rate:12,.0f} layouts/s")
    print(f"  workbench cost model:          {n:7,} layouts in {wb_s:7.3f} s"
          f" = {wb_rate:12,.0f} layouts/s (the valid ones of {asked:,} screened)")
    print(f"  ratio: {wb_rate / la_rate:,.0f}x per evaluated layout (goal >= 50x); "
          f"{asked / wb_s / la_rate:,.0f}x per layout asked (the workbench answers an invalid "
          "one with the rule it breaks)")


if __name__ == "__main__":
    sys.exit(main())

"""How fast the estimator is: one estimate (the widgets call it on every edit; goal < 10 ms)
and a vectorised grid of layouts (the planner's path; goal >= 100,000 layouts/s).

    .venv/bin/python benchmarks/estimate_speed.py
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
from workbench.estimate.grid import LayoutGrid, evaluate_layouts, valid_layouts  # noqa: E402
from workbench.scenario import load_scenario, parse_scenario, read_document  # noqa: E402


def timed(fn, repeat: int = 200) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main() -> int:
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
    return 0


def grid_speed() -> None:
    """Every (tp, pp, cp, ZeRO, virtual stages, micro-batch) for Llama 3.1 405B on 2,048 nodes
    of 8 H200 (16,384 GPUs), per schedule; dp fills the rest."""
    base = load_scenario(ROOT / "examples/llama3-405b-h200-cluster.yaml",
                         ["hardware.nodes=2048", "parallel.dp=128", "parallel.pp=16",
                          "training.global_batch=2048"])
    world = base.hardware.world
    print(f"\ngrid: {base.model.name} on {world:,} GPUs")
    print(f"{'schedule':18} {'layouts':>9} {'valid':>7} {'seconds':>9} {'screened/s':>12} "
          f"{'evaluated/s':>12}")
    total_n = total_t = total_v = 0.0
    cache: dict = {}     # block costs per (tp, cp, ep, micro-batch), shared as the planner does
    for sched in ("1f1b", "interleaved-1f1b", "zero-bubble", "dualpipev", "gpipe"):
        rows = [(world // (tp * pp * cp), tp, pp, cp, 1, zero, v, mb)
                for tp, pp, cp, zero, v, mb in itertools.product(
                    (1, 2, 4, 8), (1, 2, 3, 4, 6, 7, 8, 9, 14, 16, 18, 21, 32, 42, 63, 64, 126),
                    (1, 2, 4, 8, 16), (0, 1, 2, 3), (1, 2, 3, 4, 6, 7, 9), (1, 2, 4, 8))
                if world % (tp * pp * cp) == 0]
        g = LayoutGrid(*np.array(rows).T, pp_schedule=sched)
        t0 = time.perf_counter()
        mask = valid_layouts(base, g)
        sub = LayoutGrid(*(np.array(rows).T[:, mask]), pp_schedule=sched)
        out = evaluate_layouts(base, sub, cache)
        dt = time.perf_counter() - t0
        total_n += len(rows)
        total_t += dt
        total_v += int(mask.sum())
        print(f"{sched:18} {len(rows):9,} {int(mask.sum()):7,} {dt:9.3f} {len(rows) / dt:12,.0f} "
              f"{mask.sum() / dt:12,.0f}")
        assert np.isfinite(out["step"]).all()
    print(f"{'all':18} {int(total_n):9,} {int(total_v):7,} {total_t:9.3f} "
          f"{total_n / total_t:12,.0f} {total_v / total_t:12,.0f}")
    print("screened: layouts checked against the validation rules; evaluated: valid layouts "
          "estimated (step time, memory, fit, throughput), both per second of the whole call")


if __name__ == "__main__":
    sys.exit(main())

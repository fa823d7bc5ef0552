"""How fast the planner searches: the full layout search for Llama 3.1 405B on 16,384 H200
(2,048 nodes of 8; goal < 2 s), and the examples' machines, the brief's 70B on 8 H200 among them
(the dashboard's planner search; goal < 0.5 s).

    .venv/bin/python benchmarks/plan_speed.py

"cold" is the first search in the process (the estimator's first calls
included); "warm" the median of the next three.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    t0 = time.perf_counter()
    from workbench.plan import plan  # noqa: E402
    from workbench.scenario import load_scenario  # noqa: E402
    imports = time.perf_counter() - t0
    cases = [
        ("Llama 3.1 405B, 16,384 x H200", "examples/llama3-405b-h200-cluster.yaml",
         ["hardware.nodes=2048", "parallel.dp=128", "training.global_batch=2048"]),
        ("Llama 3.1 405B, 512 x H200", "examples/llama3-405b-h200-cluster.yaml", []),
        ("Mixtral 8x7B", "examples/mixtral-8x7b-ep.yaml", []),
        ("Llama 3.1 8B, 8 x H100", "examples/llama3-8b-8xh100.yaml", []),
        ("the brief: Llama 3.1 70B, 8 x H200", "examples/brief-8xh200-70b.yaml", []),
    ]
    print(f"imports (workbench.plan, numpy): {imports:.2f} s")
    print(f"{'case':34} {'candidates':>11} {'valid':>8} {'evaluated':>10} {'fit':>8} "
          f"{'cold s':>7} {'warm s':>7}")
    worst = 0.0
    for name, path, sets in cases:
        s = load_scenario(ROOT / path, sets)
        t = time.perf_counter()
        r = plan(s)
        cold = time.perf_counter() - t
        warm = []
        for _ in range(3):
            t = time.perf_counter()
            plan(s)
            warm.append(time.perf_counter() - t)
        n = r.counts
        print(f"{name:34} {n['candidates']:11,} {n['valid']:8,} {n['evaluated']:10,} "
              f"{n['fit']:8,} {cold:7.2f} {statistics.median(warm):7.2f}")
        if "16,384" in name:
            worst = cold
    print(f"\n405B on 16,384 GPUs, cold: {worst:.2f} s (goal < 2 s: "
          f"{'met' if worst < 2 else 'missed'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

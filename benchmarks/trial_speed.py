"""Trial start-up, 16-process 4-D completion, and what measuring costs.

    .venv/bin/python benchmarks/trial_speed.py

Goals (issue 4): a 4-rank gloo trial reports its first step in < 5 s on this 2-core machine;
16-rank 4-D trials (pp = dp = cp = tp = 2) complete; measurement costs < 5 % of step time.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.spec import parse_scenario  # noqa: E402
from workbench.trial import prepare  # noqa: E402
from workbench.trial.launcher import stream  # noqa: E402


def scenario(**parallel):
    world = 1
    for k in ("dp", "tp", "pp", "cp"):
        world *= parallel.get(k, 1)
    return parse_scenario({"hardware": {"gpu": "h100-sxm", "gpus_per_node": world},
                           "model": "tiny-dense", "parallel": parallel,
                           "training": {"seq_len": 256, "global_batch": 16}})


def first_step(par: dict) -> tuple[float, float]:
    """(seconds from the call to the first step event, whole trial)."""
    t0 = time.perf_counter()
    first = None
    for ev in stream(prepare(scenario(**par)), steps=3):
        if ev["type"] == "step" and first is None:
            first = time.perf_counter() - t0
        if ev["type"] == "end":
            assert ev["error"] is None, ev["error"]
    return first, time.perf_counter() - t0


def step_times(par: dict, measure: bool, steps: int = 12) -> float:
    times = [ev["time"] for ev in stream(prepare(scenario(**par)), steps=steps, measure=measure)
             if ev["type"] == "step" and ev["step"] >= 2]
    return statistics.median(times)


def main() -> int:
    first_step({"dp": 2})          # warm the page cache and the parent's imports
    for par in ({"dp": 4}, {"dp": 2, "tp": 2, "zero": 3}, {"pp": 4}):
        first, whole = first_step(par)
        print(f"4 ranks {par}: first step after {first:.2f} s, 3 steps in {whole:.2f} s")
    first, whole = first_step({"dp": 2, "cp": 2, "tp": 2, "pp": 2, "zero": 3})
    print(f"16 ranks pp=dp=cp=tp=2: first step after {first:.2f} s, 3 steps in {whole:.2f} s")
    for par in ({"dp": 4}, {"dp": 2, "pp": 2, "zero": 3}):
        # alternate runs without and with measurement; this 2-core box's noise is +-20 %
        ratios = []
        for _ in range(5):
            off = step_times(par, measure=False)
            on = step_times(par, measure=True)
            ratios.append(on / off)
        print(f"measurement cost {par}: median of 5 paired runs {statistics.median(ratios) - 1:+.1%}"
              f" (range {min(ratios) - 1:+.1%} .. {max(ratios) - 1:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

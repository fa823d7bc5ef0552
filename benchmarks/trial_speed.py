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

from workbench.scenario import parse_scenario  # noqa: E402
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


def step_times(par: dict, measure: bool, steps: int = 12) -> list[float]:
    """Rank 0's step times of one trial (every step)."""
    return [ev["time"] for ev in stream(prepare(scenario(**par)), steps=steps, measure=measure)
            if ev["type"] == "step" and ev["rank"] == 0]


def main() -> int:
    first_step({"dp": 2})          # warm the page cache and the parent's imports
    for par in ({"dp": 4}, {"dp": 2, "tp": 2, "zero": 3}, {"pp": 4}):
        first, whole = first_step(par)
        print(f"4 ranks {par}: first step after {first:.2f} s, 3 steps in {whole:.2f} s")
    first, whole = first_step({"dp": 2, "cp": 2, "tp": 2, "pp": 2, "zero": 3})
    print(f"16 ranks pp=dp=cp=tp=2: first step after {first:.2f} s, 3 steps in {whole:.2f} s")
    for par in ({"dp": 4}, {"dp": 2, "pp": 2, "zero": 3}):
        # (a) alternate runs without and with measurement (this 2-core box's noise is +-20 %);
        # (b) within each measured run, the one step that carries the saved-tensor hooks (and,
        # for PP/CP, the profiler) against the median of the same run's later steps
        paired, counted = [], []
        for _ in range(5):
            off_run = step_times(par, measure=False)
            off = statistics.median(off_run[2:])
            on_run = step_times(par, measure=True)
            on = statistics.median(on_run[2:])
            paired.append(on / off)
            # step 1 has one-time costs of its own (DDP rebuilds its buckets): compare it with
            # step 1 of the unmeasured run
            counted.append((on_run[1] / on) / (off_run[1] / off))
        trial = [1 + (c - 1) / 12 for c in counted]      # spread over a 12-step trial
        print(f"measurement cost {par}: paired runs, median {statistics.median(paired) - 1:+.1%} "
              f"(range {min(paired) - 1:+.1%} .. {max(paired) - 1:+.1%}); the measured step "
              f"{statistics.median(counted) - 1:+.1%} (against the same step unmeasured), "
              f"{statistics.median(trial) - 1:+.1%} of a 12-step trial")
    return 0


if __name__ == "__main__":
    sys.exit(main())

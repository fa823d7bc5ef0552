"""How much the same trial's step time moves between runs on this machine: the noise floor the
step-time comparison works against. Runs each named trial of the standard matrix ``--runs``
times (8 steps each, the report's statistic: median of the steady, unmeasured steps' slowest
rank) and prints every run's figure and the spread around their median.

    .venv/bin/python benchmarks/step_time_noise.py [--runs 6] [--only "DDP;TP + SP"]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    from workbench.proof import MATRIX
    from workbench.proof.compare import steady_step_time
    from workbench.trial import run_trial

    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--only", default="DDP;ZeRO-3 (FSDP2);TP + SP;PP 1F1B;EP x FSDP2")
    args = ap.parse_args()
    labels = args.only.split(";")
    print(f"{'trial':24} {'median':>9} {'spread':>16}  runs (ms)")
    for case in (c for c in MATRIX if c.label in labels):
        runs = [steady_step_time(run_trial(case.scenario(), steps=8))[0] * 1e3
                for _ in range(args.runs)]
        mid = statistics.median(runs)
        print(f"{case.label:24} {mid:>7.1f} ms {min(runs) / mid - 1:>+7.0%} "
              f"{max(runs) / mid - 1:>+7.0%}  {' '.join(f'{r:.1f}' for r in runs)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

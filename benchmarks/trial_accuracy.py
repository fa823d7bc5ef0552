"""Trials against the estimate, layout by layout: the range of saved-activation errors over the
ranks, and whether parameter/gradient/optimizer bytes and every rank's traffic equal the prediction
(the layouts of tests/test_trials.py's MEASURED_LAYOUTS; the test asserts the same).

    .venv/bin/python benchmarks/trial_accuracy.py
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    from tests.test_trials import MEASURED_LAYOUTS, _scenario
    from workbench.proof.compare import compare_ranks
    from workbench.trial import run_trial

    print(f"{'model':10} {'layout':64} {'activations':>17} {'states':>7} {'traffic':>8}")
    for model, par in MEASURED_LAYOUTS:
        rows = compare_ranks(run_trial(_scenario(model, **par), steps=3).ranks())
        ratios = [r.error for r in rows if r.component == "activations"]
        states = all(r.ok for r in rows if r.component in ("params", "grads", "optimizer"))
        traffic = all(r.ok for r in rows if r.component.startswith("comm "))
        print(f"{model:10} {str(par):64} {min(ratios):+7.1%}..{max(ratios):+6.1%} "
              f"{'exact' if states else 'DIFF':>7} {'exact' if traffic else 'DIFF':>8}",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

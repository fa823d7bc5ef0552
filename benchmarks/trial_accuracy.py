"""Trials against the estimate, layout by layout: the range of saved-activation errors over the
ranks, and whether parameter/gradient/optimizer bytes and rank 0's traffic equal the prediction
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
    from workbench.trial import run_trial

    print(f"{'model':10} {'layout':64} {'activations':>17} {'states':>7} {'traffic':>8}")
    for model, par in MEASURED_LAYOUTS:
        r = run_trial(_scenario(model, **par), steps=3)
        ranks = r.ranks()
        ratios = [x["measured"]["activations"] / x["predicted"]["activations"] - 1
                  for x in ranks]
        states = all(x["measured"][k] == x["predicted"][k] for x in ranks
                     for k in ("params", "grads", "optimizer"))
        got, want = ranks[0]["comm"]["measured"], ranks[0]["comm"]["predicted"]
        same = set(got) == set(want) and all(
            got[d].get(op, {}).get("count") == v["count"]
            and (d == "ep" or abs(got[d][op]["bytes"] - v["bytes"]) < 1e-6)
            for d, ops in want.items() for op, v in ops.items())
        print(f"{model:10} {str(par):64} {min(ratios):+7.1%}..{max(ratios):+6.1%} "
              f"{'exact' if states else 'DIFF':>7} {'exact' if same else 'DIFF':>8}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How late live trial events reach the charts (goal < 0.5 s): the dashboard's trial panel runs
a 4-process trial in a child process and records, for every step event, the time from the
step's end in its rank to the moment the charts were updated with it.

    .venv/bin/python benchmarks/live_trial_lag.py
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    import yaml

    from widgets.charts.trial import TrialCharts
    from widgets.panels.trial import TrialPanel
    from widgets.state import ScenarioState

    state = ScenarioState(yaml.safe_load((ROOT / "examples/llama3-8b-8xh100.yaml").read_text()))
    panel = TrialPanel(state, TrialCharts())
    lags = []
    for _ in range(3):
        panel.world.value = 4
        panel.steps.value = 5
        panel.run()
        panel.wait(180)
        lags += panel.lags
    lags.sort()
    p95 = lags[int(0.95 * (len(lags) - 1))]
    print(f"{len(lags)} step events: lag p50 {statistics.median(lags) * 1e3:.0f} ms, "
          f"p95 {p95 * 1e3:.0f} ms, max {lags[-1] * 1e3:.0f} ms (goal < 500 ms: "
          f"{'met' if p95 < 0.5 else 'missed'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

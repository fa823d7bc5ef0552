"""How fast the dashboard reacts: from a panel change to every chart redrawn, in the kernel
(goal: < 50 ms p95). The trial and planner run in the background and are not part of it.

    .venv/bin/python benchmarks/widget_speed.py

Each edit goes through the real path: panel widget -> ScenarioState (validate + estimate) ->
the memory, step-time, pipeline-timeline and GPU-mesh charts, each serialised to the plotly
JSON its page receives (widgets/charts/plot.py). What the browser then takes to draw it is
measured by benchmarks/dashboard_first_chart.py.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _measure(app, edits, repeat: int = 20) -> list[float]:
    times = []
    for _ in range(repeat):
        for widget, value in edits:
            t = time.perf_counter()
            widget.value = value
            times.append(time.perf_counter() - t)
    return times


def _report(name: str, times: list[float]) -> float:
    times = sorted(times)
    p95 = times[int(0.95 * (len(times) - 1))]
    print(f"{name:58} n={len(times):4}  p50 {statistics.median(times) * 1e3:7.1f} ms  "
          f"p95 {p95 * 1e3:7.1f} ms")
    return p95


def main() -> int:
    from widgets.app import App

    t = time.perf_counter()
    app = App("llama3-8b-8xh100")
    print(f"App() built in {time.perf_counter() - t:.2f} s")
    par, hw, tr = (app.panels[k] for k in ("Parallelism", "Hardware", "Training"))
    edits = [(par.tp, 2), (par.tp, 1), (hw.nodes, 2), (hw.nodes, 1), (tr.seq_len, 4096),
             (tr.seq_len, 8192), (par.pp, 2), (par.pp, 1)]
    worst = _report("edit -> memory, step time, timeline, mesh (8B, 8 GPUs)",
                    _measure(app, edits))
    big = App("llama3-405b-h200-cluster")
    par = big.panels["Parallelism"]
    edits = [(par.tp, 4), (par.tp, 8), (par.pp, 8), (par.pp, 16)]
    worst405 = _report("405B on 512 GPUs, all four charts (timeline capped)", _measure(
        big, edits, repeat=5))
    print(f"\nworst p95, 8 GPUs: {worst * 1e3:.1f} ms (goal < 50 ms: "
          f"{'met' if worst < 0.05 else 'missed'}); 405B on 512 GPUs: {worst405 * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

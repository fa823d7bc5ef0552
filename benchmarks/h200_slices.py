"""The team's H200 slice trials (benchmarks/data/h200-2026-12-04, 2026-12-04: one H200, the
example's layout cut to one GPU and to the layers that fit, FSDP2, torch 2.11) re-estimated
with today's model: step time and peak allocated memory against what each trial measured, and
the estimate the trial itself recorded that day (its ``comparison`` rows) beside them.

The slice is rebuilt as the trial built it, on engine torchtitan (``slice_of``): the example scenario through
``trial.sub_layout(.., 1)`` and ``trial.slice.slice_scenario`` on the H200, with the recorded
layer count, then estimated as the trial runs it (``trial.prediction.as_run``). The measured
step is the median of the steady steps (the first, warm-up, left out).

    .venv/bin/python benchmarks/h200_slices.py
"""
from __future__ import annotations

import dataclasses
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.estimate.single import estimate_memory, estimate_step_time  # noqa: E402
from workbench.trial.prediction import as_run  # noqa: E402
from workbench.scenario import load_scenario  # noqa: E402
from workbench.trial import sub_layout  # noqa: E402
from workbench.trial.slice import slice_scenario  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "h200-2026-12-04"
SLICES = (("trial-llama3-8b-8xh100.json", "examples/llama3-8b-8xh100.yaml"),
          ("trial-brief-8xh200-70b.json", "examples/brief-8xh200-70b.yaml"),
          ("trial-mixtral-8x7b-ep.json", "examples/mixtral-8x7b-ep.yaml"))
GIB = 2 ** 30


def slice_of(example: str, layers: int):
    """The slice scenario a trial of ``example`` ran with ``layers`` layers on one H200, on the
    engine record closest to what the trial runs (eager PyTorch modules under FSDP2, an upcast
    loss, grouped experts: torchtitan's, uncompiled, as issue 43 re-estimated them)."""
    s = sub_layout(load_scenario(ROOT / example), 1)
    sl = slice_scenario(s, "NVIDIA H200", 150e9).scenario
    # (slice_scenario already sets recompute "none": a trial keeps every activation)
    sl = dataclasses.replace(sl, training=dataclasses.replace(sl.training, engine="torchtitan"))
    m = sl.model
    moe = None if m.moe is None else dataclasses.replace(
        m.moe, dense_layers=min(m.moe.dense_layers, max(0, layers - 1)))
    return as_run(dataclasses.replace(sl, model=dataclasses.replace(m, layers=layers, moe=moe)))


def recorded(res: dict, component: str) -> float | None:
    """The estimate the trial recorded for ``component`` on the day it ran."""
    return next((c["estimated"] for c in res["comparison"] if c["component"] == component),
                None)


def main() -> int:
    print(f"{'slice':34} {'step ms: measured':>18} {'then':>8} {'now':>8} {'err now':>8}   "
          f"{'allocated GiB: measured':>23} {'then':>7} {'now':>7} {'err now':>8}  peak phase")
    for name, example in SLICES:
        res = json.loads((DATA / name).read_text())
        run = slice_of(example, res["model"]["layers"])
        step = estimate_step_time(run).step
        mem = estimate_memory(run).per_gpu
        steps = res["ranks"][0]["step_time_s"][1:]
        measured_step = statistics.median(steps)
        measured_alloc = res["ranks"][0]["measured"]["allocated"]
        then_step, then_alloc = recorded(res, "step"), recorded(res, "memory allocated")
        print(f"{name:34} {measured_step * 1e3:18.1f} {then_step * 1e3:8.1f} {step * 1e3:8.1f} "
              f"{measured_step / step - 1:+8.1%}   {measured_alloc / GIB:23.1f} "
              f"{then_alloc / GIB:7.1f} {mem.total / GIB:7.1f} "
              f"{measured_alloc / mem.total - 1:+8.1%}  {mem.peak_phase}")
    print("error = measured / estimated - 1; 'then' = the estimate the trial recorded on "
          "2026-12-04")
    return 0


if __name__ == "__main__":
    sys.exit(main())

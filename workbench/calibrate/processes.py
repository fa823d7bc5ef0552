"""Run a calibration probe in several processes with the process runner and collect what they
report."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

from workbench.process_runner import run_ranks


def run_processes(target: Callable, rank_args: Callable[[int], Sequence[tuple]], what: str,
                  stall_s: float = 60.0) -> list[dict]:
    """Fork one process per entry of ``rank_args(port)`` running ``target(*entry, queue)``
    (``workbench.process_runner.run_ranks``: a rank that fails, dies or stalls for ``stall_s``
    stops them all, every one is reaped on every outcome) and return the events they reported
    (not heartbeats). Raises RuntimeError naming ``what`` and the rank when one fails."""
    events = []
    with contextlib.closing(run_ranks(target, rank_args, method="fork",
                                      stall_s=stall_s)) as stream:
        for ev in stream:
            if ev["type"] != "result":
                events.append(ev)
            elif ev["error"]:
                raise RuntimeError(f"{what}: {ev['error']}")
    return events

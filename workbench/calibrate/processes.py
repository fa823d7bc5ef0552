"""Run a calibration probe in several processes with the process runner and collect what they
report."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

from workbench.process_runner import run_ranks


def run_processes(target: Callable, rank_args: Callable[[int], Sequence[tuple]], what: str,
                  stall_s: float = 60.0, method: str = "fork",
                  on_event: Callable[[dict], None] | None = None) -> list[dict]:
    """Start one process per entry of ``rank_args(port)`` running ``target(*entry, queue)``
    (``workbench.process_runner.run_ranks``: a rank that fails, dies or stalls for ``stall_s``
    stops them all, every one is reaped on every outcome) and return the events they reported
    (not heartbeats), each also passed to ``on_event`` as it arrives. ``method``: ``fork``
    (CPU probes: a ready process in milliseconds) or ``spawn`` (anything that uses CUDA: a
    forked child cannot, once its parent initialised CUDA; ``target`` and the entries must
    then pickle). Raises RuntimeError naming ``what`` and the rank when one fails."""
    events = []
    with contextlib.closing(run_ranks(target, rank_args, method=method,
                                      stall_s=stall_s)) as stream:
        for ev in stream:
            if ev["type"] != "result":
                events.append(ev)
                if on_event is not None:
                    on_event(ev)
            elif ev["error"]:
                raise RuntimeError(f"{what}: {ev['error']}")
    return events

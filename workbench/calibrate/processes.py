"""Run a calibration probe in several forked processes under the trials' supervisor."""
from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Sequence


def run_processes(target: Callable, args: Sequence[tuple], what: str,
                  stall_s: float = 60.0) -> list[dict]:
    """Fork one process per ``args`` entry running ``target(*entry, queue)`` under the trial
    launcher's supervisor (a rank that fails, dies or stalls for ``stall_s`` stops them all),
    reap every one on every outcome, and return the events they reported (not heartbeats).
    Raises RuntimeError naming ``what`` and the rank when one fails."""
    import torch  # noqa: F401  (fork after importing torch: children do not pay for it)
    import torch.distributed  # noqa: F401

    from workbench.trial.launcher import _reap, _supervise

    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = []
    events = []
    try:
        for entry in args:
            p = ctx.Process(target=target, args=(*entry, q), daemon=True)
            p.start()
            procs.append(p)
        for ev in _supervise(q, procs, len(procs), stall_s):
            if ev["type"] == "result":
                if ev["error"]:
                    raise RuntimeError(f"{what}: {ev['error']}")
            else:
                events.append(ev)
    finally:
        _reap(procs)
        q.close()
        q.join_thread()
    return events

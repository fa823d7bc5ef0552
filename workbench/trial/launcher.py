"""Start the trial's processes, supervise them, stream their events, and always clean up.

CPU: ``fork`` after importing torch and its distributed packages in the parent (a ready process
group in ~0.2 s at 8 ranks; docs/platform.md). CUDA: ``spawn`` (fork is unsafe with
CUDA). A rank that raises or dies makes its peers fail within a fraction of a second; a rank
that hangs is caught by the progress watchdog (no phase change for ``stall_s``). Every outcome —
success, error, hang, the caller closing the stream or an interrupted kernel — ends with every
child reaped.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import queue as queue_mod
import signal
import socket
import threading
import time
from collections.abc import Iterator

from workbench.trial.worker import WorkerArgs, run

MAX_PROCESSES = 16


_PORT_LOCK = threading.Lock()
_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A free loopback port never handed out before by this process (two trials started at
    once from one kernel must not race for the same rendezvous port)."""
    with _PORT_LOCK:
        while True:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in _HANDED_OUT:
                _HANDED_OUT.add(port)
                return port


def choose_backend(requested: str, world: int) -> str:
    """nccl when CUDA has a GPU per rank, gloo otherwise (stated in the result)."""
    if requested != "auto":
        return requested
    try:
        import torch

        if torch.cuda.is_available() and torch.cuda.device_count() >= world:
            return "nccl"
    except ImportError:
        pass
    return "gloo"


def _preimport() -> None:
    """Import what every rank needs before forking, so children do not pay for it."""
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401
    import torch.distributed.fsdp  # noqa: F401
    import torch.distributed.pipelining  # noqa: F401
    import torch.distributed.tensor.parallel  # noqa: F401
    from torch.distributed.optim import ZeroRedundancyOptimizer  # noqa: F401
    from torch.nn.parallel import DistributedDataParallel  # noqa: F401


def stream(scenario, steps: int = 3, backend: str = "auto", timeout_s: float = 30.0,
           stall_s: float = 20.0, inject: str | None = None, inject_rank: int = -1,
           inject_step: int = -1, measure: bool = True) -> Iterator[dict]:
    """Run the trial scenario (already scaled down) in ``world`` processes and yield events:
    ``start``, ``step`` (per rank and step) and ``end`` (with ``error``: None, or one line naming
    the rank). If another program takes the rendezvous port before rank 0 binds it, the ranks
    are started again on a new port (twice at most) before any step has been reported."""
    world = scenario.parallel.world
    backend = choose_backend(backend, world)
    method = "spawn" if backend == "nccl" else "fork"
    if method == "fork":
        _preimport()
    ctx = mp.get_context(method)
    t_start = time.time()
    yield {"type": "start", "backend": backend, "world_size": world, "start_method": method,
           "time": t_start}
    for attempt in range(3):
        q = ctx.Queue()
        port = free_port()
        procs = []
        stepped = False
        error = None
        try:
            for rank in range(world):
                args = WorkerArgs(rank=rank, world=world, port=port, scenario=scenario,
                                  steps=steps, backend=backend, timeout_s=timeout_s,
                                  inject=inject, inject_rank=inject_rank,
                                  inject_step=inject_step, measure=measure)
                p = ctx.Process(target=run, args=(args, q), daemon=True)
                p.start()
                procs.append(p)
            for ev in _supervise(q, procs, world, stall_s):
                if ev["type"] == "step":
                    stepped = True
                    yield ev
                else:
                    error = ev["error"]
        finally:
            _reap(procs)
            q.close()
            q.join_thread()
        if not (error and "EADDRINUSE" in error and not stepped and attempt < 2):
            break
    yield {"type": "end", "error": error, "time": time.time(), "wall_s": time.time() - t_start}


def _supervise(q, procs, world: int, stall_s: float) -> Iterator[dict]:
    """Yield step events until every rank is done, then one ``result`` event with the error
    (None on success): a rank's own failure, a rank that died, or a rank that hung."""
    phases = {r: ("starting", time.time()) for r in range(world)}
    done: set[int] = set()
    error = None
    while len(done) < world and error is None:
        try:
            ev = q.get(timeout=0.2)
        except queue_mod.Empty:
            ev = None
        now = time.time()
        if ev is not None:
            r = ev.get("rank")
            if ev["type"] == "heartbeat":
                if ev["phase"] != phases[r][0]:
                    phases[r] = (ev["phase"], now)
            elif ev["type"] == "done":
                done.add(r)
            elif ev["type"] == "error":
                error = _root_cause(ev, q, procs, phases)
            else:
                phases[r] = (f"step {ev.get('step')} done", now)
                yield ev
            continue
        for r, p in enumerate(procs):
            if p.exitcode is not None and p.exitcode != 0 and r not in done:
                try:   # a rank that raised has reported why: prefer its message
                    late = q.get(timeout=0.5)
                    if late.get("type") == "error":
                        error = _root_cause(late, q, procs, phases)
                        break
                except queue_mod.Empty:
                    pass
                how = (f"was killed by signal {-p.exitcode}" if p.exitcode < 0
                       else f"exited with code {p.exitcode}")
                error = f"rank {r} {how} while {phases[r][0]}"
                break
        if error is None:
            stalled = [r for r in range(world) if r not in done and now - phases[r][1] > stall_s]
            if stalled:
                culprit = min(stalled, key=lambda r: ("injected" not in phases[r][0],
                                                      phases[r][1]))
                error = (f"rank {culprit} stopped making progress for {stall_s:.0f} s while "
                         f"{phases[culprit][0]} (hung; all ranks stopped)")
    yield {"type": "result", "error": error}


# Errors a rank reports because *another* rank went away (gloo's wording).
SECONDARY = ("Connection closed by peer", "Connection reset by peer", "timed out", "Timed out",
             "Socket Timeout", "Broken pipe")


def _root_cause(first: dict, q, procs, phases, grace_s: float = 1.0) -> str:
    """The failure to report when ranks start failing: a rank that died (killed or exited
    without a report) or one whose own error is not a lost connection, else the first error."""
    errors = [first]
    deadline = time.time() + grace_s
    while time.time() < deadline:
        try:
            ev = q.get(timeout=0.1)
        except queue_mod.Empty:
            continue
        if ev.get("type") == "error":
            errors.append(ev)
    reported = {e["rank"] for e in errors}
    for r, p in enumerate(procs):
        if p.exitcode is not None and p.exitcode < 0 and r not in reported:
            return f"rank {r} was killed by signal {-p.exitcode} while {phases[r][0]}"
    primary = [e for e in errors if not any(s in e["error"] for s in SECONDARY)]
    e = (primary or errors)[0]
    return f"rank {e['rank']} failed while {e['phase']}: {e['error']}"


def _reap(procs) -> None:
    """Terminate, then kill, every child still alive, and join them all (no zombies)."""
    for p in procs:
        if p.is_alive():
            try:
                os.kill(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.time() + 3
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.time()))
        if p.is_alive():
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.join(timeout=5)

"""Start the trial's processes, supervise them, stream their events, and always clean up.

CPU: ``fork`` after importing torch and its distributed packages in the parent (a ready process
group in ~0.2 s at 8 ranks; ../shared/notes/platform.md). CUDA: ``spawn`` (fork is unsafe with
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
import time
from collections.abc import Iterator

from workbench.trial.worker import WorkerArgs, run

MAX_PROCESSES = 16


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
           inject_step: int = -1) -> Iterator[dict]:
    """Run the trial scenario (already scaled down) in ``world`` processes and yield events:
    ``start``, ``step`` (per rank and step), ``error`` and ``end``."""
    world = scenario.parallel.world
    backend = choose_backend(backend, world)
    method = "spawn" if backend == "nccl" else "fork"
    if method == "fork":
        _preimport()
    ctx = mp.get_context(method)
    q = ctx.Queue()
    port = free_port()
    procs = []
    t_start = time.time()
    yield {"type": "start", "backend": backend, "world_size": world, "start_method": method,
           "time": t_start}
    try:
        for rank in range(world):
            args = WorkerArgs(rank=rank, world=world, port=port, scenario=scenario, steps=steps,
                              backend=backend, timeout_s=timeout_s, inject=inject,
                              inject_rank=inject_rank, inject_step=inject_step)
            p = ctx.Process(target=run, args=(args, q), daemon=True)
            p.start()
            procs.append(p)
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
                    continue
                if ev["type"] == "done":
                    done.add(r)
                    continue
                if ev["type"] == "error":
                    error = f"rank {r} failed while {ev['phase']}: {ev['error']}"
                    break
                phases[r] = (f"step {ev.get('step')} done", now)
                yield ev
                continue
            for r, p in enumerate(procs):
                if p.exitcode is not None and p.exitcode != 0 and r not in done:
                    try:   # a rank that raised has reported why: prefer its message
                        late = q.get(timeout=0.5)
                        if late.get("type") == "error":
                            error = (f"rank {late['rank']} failed while {late['phase']}: "
                                     f"{late['error']}")
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
        if error is not None:
            yield {"type": "error", "message": error, "time": time.time()}
        yield {"type": "end", "error": error, "time": time.time(), "wall_s": time.time() - t_start}
    finally:
        _reap(procs)
        q.close()
        q.join_thread()


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

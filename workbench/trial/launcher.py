"""Start the trial's ranks with the process runner (``workbench/process_runner.py``: fork on
CPU, spawn for nccl, supervision, reaping, port retry) and stream their events."""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator

from workbench.process_runner import run_ranks, start_method

from workbench.rank_devices import choose_backend, rank_environment
from workbench.trial.worker import WorkerArgs, run

MAX_PROCESSES = 16


def _preimport() -> None:
    """Import what every rank needs before forking, so children do not pay for it (each DDP
    wrap would otherwise pay ~2.5 s of lazy imports; docs/platform.md)."""
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401
    import torch.distributed.fsdp  # noqa: F401
    import torch.distributed.pipelining  # noqa: F401
    import torch.distributed.tensor.parallel  # noqa: F401
    from torch.distributed.optim import ZeroRedundancyOptimizer  # noqa: F401
    from torch.nn.parallel import DistributedDataParallel  # noqa: F401


# How long a rank may go without progress before the trial calls it hung, with a core of its
# own. Ranks that share cores get it scaled by how many share one (``stall_window``).
STALL_S = 20.0


def stall_window(world: int, cores: int | None = None) -> float:
    """``STALL_S`` times the ranks per usable core (at least 1): 16 ranks on 2 cores each run
    an eighth of the time, so a step that shows progress every few seconds on its own core
    shows it every tens of seconds there (a 16-rank trial on a loaded 2-core machine was
    called hung after 20 s and passed on rerun)."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else (os.cpu_count() or 1)
    return STALL_S * max(1.0, world / max(1, cores))


def stream(scenario, steps: int = 3, backend: str = "auto", timeout_s: float = 30.0,
           stall_s: float | None = None, inject: str | None = None, inject_rank: int = -1,
           inject_step: int = -1, measure: bool = True) -> Iterator[dict]:
    """Run the trial scenario (already prepared: scaled down or sliced, ``prepare_trial``) in
    ``world`` processes and yield events:
    ``start``, ``step`` (per rank and step) and ``end`` (with ``error``: None, or one line naming
    the rank). A rank with no progress for ``stall_s`` (default ``stall_window``) is hung.
    Closing the stream early reaps every rank."""
    world = scenario.parallel.world
    if stall_s is None:
        stall_s = stall_window(world)
    backend = choose_backend(backend, world)
    method = start_method(backend)
    if method == "fork":
        _preimport()
    t_start = time.time()
    yield {"type": "start", "backend": backend, "world_size": world, "start_method": method,
           "time": t_start}

    def rank_args(port: int) -> list[tuple]:
        return [(WorkerArgs(rank=rank, world=world, port=port, scenario=scenario, steps=steps,
                            backend=backend, timeout_s=timeout_s, inject=inject,
                            inject_rank=inject_rank, inject_step=inject_step,
                            measure=measure),) for rank in range(world)]

    error = None
    # nccl ranks number GPUs in NVML's (PCI) order: the GPU measured is the GPU used
    with contextlib.closing(run_ranks(run, rank_args, method=method, stall_s=stall_s,
                                      env=rank_environment(backend))) as events:
        for ev in events:
            if ev["type"] == "result":
                error = ev["error"]
            else:
                yield ev
    yield {"type": "end", "error": error, "time": time.time(), "wall_s": time.time() - t_start}

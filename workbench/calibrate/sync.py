"""What one collective costs *inside a training loop* on this machine, per world size.

``workbench bench`` times collectives back to back, the ranks in lockstep, as nccl-tests does.
In a step, a collective follows compute, and every rank waits for the last to arrive; with
more ranks than cores a rank that is descheduled holds the others for a scheduler slice. This
probe runs ``world`` ranks that each repeat a compute burst from the reference trial model
(workbench/trial/shrink.py's tiny-dense shape, one microbatch; ``BURSTS``), in alternating
blocks without and with a small all-reduce (1 KiB) after each burst; the difference of the
medians, per iteration, is the collective's in-loop latency. The estimator uses it for every
collective in a step on a calibrated profile (``profile.MachineProfile.collective``).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from datetime import timedelta

from workbench.calibrate.processes import run_processes
from workbench.process_runner import Phase, supervised_rank


# Compute between two collectives: one MLP (TP's spacing), one layer (FSDP2 units, pipeline
# stages), four layers (a data-parallel reduction after a backward).
BURSTS = {"mlp": 0, "layer": 1, "4 layers": 4}
ROUNDS = 4


@dataclass(frozen=True)
class SyncArgs:
    rank: int
    world: int
    port: int
    iters: int
    timeout_s: float = 60.0


def _rank(args: SyncArgs, queue) -> None:
    supervised_rank(args.rank, queue, lambda phase: _loop(args, queue, phase))


def _loop(args: SyncArgs, queue, phase: Phase) -> None:
    import torch
    import torch.distributed as dist

    from workbench.catalog import CATALOGS
    from workbench.trial.model import Transformer, init_weights
    from workbench.trial.shrink import TRIAL_SEQ, trial_model

    torch.set_num_threads(1)
    phase.value = "joining the process group"
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}",
                            rank=args.rank, world_size=args.world,
                            timeout=timedelta(seconds=args.timeout_s))
    try:
        model = Transformer(trial_model(CATALOGS["model"]["tiny-dense"], 1, 1, 1))
        init_weights(model, 0)
        layer = model.layers["0"]
        x = torch.randn(2, TRIAL_SEQ, model.shape.hidden, requires_grad=True,
                        generator=torch.Generator().manual_seed(args.rank))
        small = torch.zeros(256)

        def run(burst) -> tuple[list[float], list[float]]:
            """Blocks without and with the collective, alternating (ROUNDS of each), so a
            drift of the machine's speed moves both medians alike; within a block the
            iterations follow each other as a step's do."""
            alone, synced = [], []
            per_block = max(1, args.iters // ROUNDS)
            for r in range(ROUNDS):
                for with_collective, out in ((False, alone), (True, synced)):
                    for k in range(per_block + 1):
                        phase.value = (f"{'with' if with_collective else 'without'} "
                                       f"collective: round {r}, {k}")
                        t0 = time.perf_counter()
                        burst()
                        if with_collective:
                            dist.all_reduce(small)
                        if k:              # the first of a block follows the other kind
                            out.append(time.perf_counter() - t0)
            return alone, synced

        for name, repeat in BURSTS.items():
            def burst(repeat=repeat):
                if repeat == 0:    # one MLP: the compute between two TP collectives
                    layer.feed_forward(x).sum().backward()
                for _ in range(repeat):
                    layer(x).sum().backward()

            dist.barrier()
            alone, synced = run(burst)
            queue.put({"type": "sync", "rank": args.rank, "burst": name, "alone": alone,
                       "synced": synced})
        dist.barrier()
    finally:
        dist.destroy_process_group()


def in_loop_latency(world_sizes=(2, 4, 8, 16), iters: int = 60,
                    stall_s: float = 60.0) -> dict[int, list[tuple[float, float]]]:
    """{world: [(burst seconds, seconds a collective adds after it), ...]}: per burst, the
    slowest rank's median difference and the median burst. Processes are supervised and
    reaped as trials are."""
    out = {}
    for world in world_sizes:
        def rank_args(port: int, world: int = world) -> list[tuple]:
            return [(SyncArgs(rank, world, port, iters),) for rank in range(world)]

        reports: dict = {}
        for ev in run_processes(_rank, rank_args, f"in-loop latency at {world} ranks", stall_s):
            reports.setdefault(ev["burst"], {})[ev["rank"]] = ev
        out[world] = [(statistics.median(statistics.median(r["alone"]) for r in by.values()),
                       max(0.0, max(statistics.median(r["synced"]) - statistics.median(r["alone"])
                                    for r in by.values())))
                      for by in reports.values()]
    return out

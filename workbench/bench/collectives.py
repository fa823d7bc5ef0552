"""What every benchmark rank runs: join the process group, then for each collective and size
warm up, time back-to-back iterations one by one, and report the times to the supervisor.

Each iteration is timed on its own (``time.perf_counter`` around the blocking call on CPU;
CUDA events around the launch on GPU, read after one synchronisation) so the supervisor can
take a median per rank (result.py says why). A warm-up iteration's time, maximised over ranks
with one tiny all-reduce, fixes how many more warm-up and timed iterations follow (about
``budget_s`` of timed work, within [min_iters, iters]): every rank must run the same number or
they would deadlock.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from workbench.bench.definitions import buffer_elements, human_bytes
from workbench.process_runner import Phase, inject_fault, report_phase, supervised_rank
from workbench.rank_devices import rank_device


@dataclass(frozen=True)
class RankArgs:
    """Everything one rank needs (picklable: ``spawn`` sends it to the child)."""

    rank: int
    world: int
    port: int
    backend: str                     # gloo | nccl
    collectives: tuple[str, ...]
    sizes: tuple[int, ...]           # requested bytes, ascending
    warmup: int                      # at most this many warm-up iterations (>= 1)
    iters: int                       # at most this many timed iterations
    min_iters: int                   # at least this many timed iterations
    budget_s: float                  # aim for about this much timed work per (collective, size)
    timeout_s: float                 # process-group timeout: a lost peer fails within it
    inject: str | None = None        # tests only: raise | kill | hang on rank inject_rank
    inject_rank: int = -1


def run_rank(args: RankArgs, queue) -> None:
    """Entry point of one rank (forked or spawned). Reports ``cell`` events, then ``done``; on
    any exception an ``error`` event with one line, then exits non-zero (the process runner's
    protocol)."""
    supervised_rank(args.rank, queue, lambda phase: _bench(args, queue, phase))


def _bench(args: RankArgs, queue, phase: Phase) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)       # up to 8 ranks share this box's cores
    cuda = args.backend == "nccl"
    device = rank_device(args.backend, args.rank)
    phase.value = "joining the process group"
    dist.init_process_group(args.backend, init_method=f"tcp://127.0.0.1:{args.port}",
                            rank=args.rank, world_size=args.world,
                            timeout=timedelta(seconds=args.timeout_s),
                            **({"device_id": device} if cuda else {}))
    try:
        for name in args.collectives:
            for i, nbytes in enumerate(args.sizes):
                count = buffer_elements(name, nbytes, args.world)
                label = f"{name} {human_bytes(count * 4)}"
                phase.value = f"{label}: allocating"
                # zeros, not empty: the pages are touched before timing, and repeated in-place
                # sums stay finite (an all-reduce of ones would grow as n^k)
                send = torch.zeros(count, dtype=torch.float32, device=device)
                recv = torch.zeros(count, dtype=torch.float32, device=device)
                op = make_op(name, send, recv, args.rank, args.world)
                if i == 0:         # the smallest size proves the call does what it says
                    phase.value = f"{label}: checking the result"
                    check(name, op, send, recv, args.rank, args.world)
                    send.zero_()
                _maybe_inject(args, phase, label, queue)
                times = time_op(op, args, phase, label, device)
                queue.put({"type": "cell", "rank": args.rank, "step": label,
                           "collective": name, "bytes": count * 4, "times": times})
                del op, send, recv
        phase.value = "finishing"
        dist.barrier()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def make_op(name: str, send, recv, rank: int, world: int) -> Callable[[], None]:
    """One blocking call of ``name`` on the full buffers ``send`` / ``recv`` of S bytes
    (definitions.py: the all-gather gathers S/n from each rank into S, the reduce-scatter
    reduces S into S/n per rank, the all-to-all sends S/n to each peer)."""
    import torch.distributed as dist

    chunk = send.numel() // world
    if name == "all_reduce":
        return lambda: dist.all_reduce(send)
    if name == "all_gather":
        shard = send[:chunk]
        # torch 2.13 renamed all_gather_into_tensor (now a deprecated wrapper) to
        # all_gather_single; same for reduce_scatter_tensor. Older torch has only the old names.
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return lambda: gather(recv, shard)
    if name == "reduce_scatter":
        out = recv[:chunk]
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return lambda: scatter(out, send)
    if name == "all_to_all":
        return lambda: dist.all_to_all_single(recv, send)
    if name == "broadcast":
        return lambda: dist.broadcast(send, src=0)
    if name == "send_recv":      # ring exchange, as nccl-tests' sendrecv
        nxt, prev = (rank + 1) % world, (rank - 1) % world

        def exchange() -> None:
            ops = [dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prev)]
            for work in dist.batch_isend_irecv(ops):
                work.wait()
        return exchange
    raise KeyError(name)


def check(name: str, op: Callable[[], None], send, recv, rank: int, world: int) -> None:
    """Run ``op`` once on known data and raise if the result is not what ``name`` means."""
    import torch

    chunk = send.numel() // world
    if name == "all_to_all":     # the chunk for peer j carries (rank, j)
        send.copy_((rank * world + torch.arange(world, device=send.device,
                                                dtype=send.dtype)).repeat_interleave(chunk))
    else:
        send.fill_(rank + 1)
    op()
    total = world * (world + 1) / 2
    ranks = torch.arange(world, device=send.device, dtype=send.dtype)
    expected = {
        "all_reduce": lambda: (send, torch.full_like(send, total)),
        "all_gather": lambda: (recv, (ranks + 1).repeat_interleave(chunk)),
        "reduce_scatter": lambda: (recv[:chunk], torch.full_like(recv[:chunk], total)),
        "all_to_all": lambda: (recv, (ranks * world + rank).repeat_interleave(chunk)),
        "broadcast": lambda: (send, torch.ones_like(send)),
        "send_recv": lambda: (recv, torch.full_like(recv, (rank - 1) % world + 1)),
    }[name]
    got, want = expected()
    if not torch.equal(got, want):
        raise RuntimeError(f"{name} returned wrong data on rank {rank}")
    recv.zero_()


def time_op(op: Callable[[], None], args: RankArgs, phase: Phase, label: str,
            device) -> list[float]:
    """Warm up, then time each of the agreed number of iterations; seconds per iteration."""
    import torch
    import torch.distributed as dist

    cuda = device.type == "cuda"

    def slowest_time(k: int) -> float:
        """Time warm-up iteration ``k``; every rank gets the slowest rank's time."""
        phase.value = f"{label}: warm-up {k}"
        t = torch.tensor(_timed(op, 1, cuda), dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return max(float(t.item()), 1e-9)

    # Every rank must run the same number of iterations, so the counts come from times all
    # ranks agree on. A first call can be 10-100x slower than the next (buffers, connection
    # state): unless it alone used up the budget, a second one sizes the loop.
    per_op, used = slowest_time(1), 1
    if args.warmup > 1 and per_op < args.budget_s:
        per_op, used = slowest_time(2), 2
    more_warmup = max(0, min(args.warmup - used, int(args.budget_s / 4 / per_op)))
    timed = max(args.min_iters, min(args.iters, math.ceil(args.budget_s / per_op)))
    for k in range(more_warmup):
        phase.value = f"{label}: warm-up {used + k + 1}"
        op()
    dist.barrier()               # start the timed loop together, as nccl-tests does
    phase.value = f"{label}: {timed} timed iterations"
    return _timed(op, timed, cuda, phase, label)


def _timed(op: Callable[[], None], n: int, cuda: bool, phase: Phase | None = None,
           label: str = "") -> list[float]:
    import torch

    if cuda:                     # launches are asynchronous: time on the stream
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
        marks[0].record()
        for k in range(n):
            op()
            marks[k + 1].record()
        torch.cuda.synchronize()
        return [marks[k].elapsed_time(marks[k + 1]) / 1e3 for k in range(n)]
    out = []
    for k in range(n):
        if phase is not None:    # changes every iteration: the watchdog sees progress
            phase.value = f"{label}: timed iteration {k + 1}/{n}"
        t0 = time.perf_counter()
        op()
        out.append(time.perf_counter() - t0)
    return out


def _maybe_inject(args: RankArgs, phase: Phase, label: str, queue) -> None:
    """Tests only: fail this rank on its first timed collective."""
    if args.inject is None or args.rank != args.inject_rank:
        return
    phase.value = f"{label}: injected {args.inject}"
    # now, not at the next heartbeat: its peers' phases (blocked in the collective) change
    # about now too, and the watchdog blames the rank that stalled first
    report_phase(queue, args.rank, phase)
    inject_fault(args.inject, f"rank {args.rank}")

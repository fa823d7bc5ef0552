"""Check a benchmark request, then run its ranks with the process runner
(``workbench/process_runner.py``): ``fork`` after importing torch on CPU, ``spawn`` with CUDA,
a short process-group timeout, the supervisor (a rank that raises or dies becomes one line
naming it, a rank whose phase stops changing for ``stall_s`` is a hang) and the reaper (every
child terminated, killed if need be, and joined, on every outcome).
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from workbench.bench.definitions import (
    COLLECTIVES, DTYPE, ELEMENT_BYTES, KiB, MiB, TORCH_CALLS, human_bytes, parse_size,
    size_ladder,
)
from workbench.bench.result import STATISTIC, make_row, to_frame
from workbench.errors import Problem, ScenarioError
from workbench.process_runner import run_ranks, start_method
from workbench.rank_devices import available_memory, check_backend
from workbench.units import memory_text

# The estimator's intra-node model covers up to 8 GPUs per node; 8 ranks run here (2 cores).
MAX_WORLD = 8
DEFAULT_WORLD_SIZES = (2, 4, 8)

# nccl-tests' defaults are 5 warm-up and 20 timed iterations; here they are upper bounds and
# each (collective, size) aims at ``budget_s`` of timed work with at least ``min_iters``
# iterations: at 8 ranks on this 2-core box one 256 MiB collective takes 0.8-3.5 s, and 25
# of each would make the default sweep last most of an hour. Where one iteration is that long
# the scheduler's noise is small next to it, and the median of 3 still drops one outlier.
DEFAULTS = {"min_bytes": KiB, "max_bytes": 256 * MiB, "step_factor": 4, "warmup": 5,
            "iters": 20, "min_iters": 3, "budget_s": 0.25}
QUICK = {"world_sizes": (2,), "min_bytes": KiB, "max_bytes": MiB, "step_factor": 32,
         "warmup": 1, "iters": 3, "min_iters": 3, "budget_s": 0.0}

# Resident memory of one rank: torch imported (~0.25 GB RSS here) plus its two buffers of the
# largest size and room for the backend's staging copy of one of them (measured with psutil:
# 1.05 GB peak RSS per rank at 8 ranks and 256 MiB; this formula gives 1.15 GB).
RANK_BASE_BYTES = 0.35e9
BUFFERS_PER_RANK = 3


class BenchFailed(RuntimeError):
    """A rank failed, died or hung; the message is one line naming the rank."""


@dataclass(frozen=True)
class BenchConfig:
    """A validated request (``make_config``)."""

    world_sizes: tuple[int, ...]
    backend: str                    # gloo | nccl (resolved from auto)
    collectives: tuple[str, ...]
    sizes: tuple[int, ...]          # requested bytes
    warmup: int
    iters: int
    min_iters: int
    budget_s: float
    timeout_s: float = 60.0
    stall_s: float = 60.0


def _world_sizes(value) -> tuple[int, ...]:
    if value is None:
        return DEFAULT_WORLD_SIZES
    if isinstance(value, int):
        return (value,)
    if isinstance(value, str):
        try:
            return tuple(int(v) for v in value.split(","))
        except ValueError:
            raise ScenarioError([Problem("--world-size", value,
                                         "expected N or a list like 2,4,8")]) from None
    return tuple(int(v) for v in value)


# The largest message: a tensor's element count is a signed 64-bit integer in PyTorch (c10
# TensorImpl numel_ is int64_t), and memory arithmetic past it leaves the float range.
MAX_MESSAGE_BYTES = 2 ** 63 - 1


def _size(option: str, value) -> int:
    try:
        n = parse_size(value)
    except ValueError:
        raise ScenarioError([Problem(option, value, "expected bytes, or a size like 64K, "
                                                    "1M, 256MiB (binary units)")]) from None
    if n > MAX_MESSAGE_BYTES:
        raise ScenarioError([Problem(option, value, f"at most {MAX_MESSAGE_BYTES:,} bytes "
                                                    "(2**63 - 1: a tensor's size in PyTorch is "
                                                    "a 64-bit integer)")])
    return n


def make_config(world_size=None, *, backend: str = "auto",
                collectives: Sequence[str] | str | None = None, min_bytes=None,
                max_bytes=None, step_factor: int | None = None, warmup: int | None = None,
                iters: int | None = None, quick: bool = False, timeout_s: float = 60.0,
                stall_s: float = 60.0, _available: float | None = None) -> BenchConfig:
    """Validate a request and fill in defaults (``quick``: the QUICK preset). Raises
    ScenarioError whose problems name the command-line option at fault."""
    preset = {**DEFAULTS, **(QUICK if quick else {})}
    worlds = _world_sizes(world_size) if world_size is not None else (
        preset.get("world_sizes") or DEFAULT_WORLD_SIZES)
    names = (collectives.split(",") if isinstance(collectives, str)
             else tuple(collectives or COLLECTIVES))
    lo = _size("--min-bytes", preset["min_bytes"] if min_bytes is None else min_bytes)
    hi = _size("--max-bytes", preset["max_bytes"] if max_bytes is None else max_bytes)
    factor = preset["step_factor"] if step_factor is None else step_factor
    warmup = preset["warmup"] if warmup is None else warmup
    iters = preset["iters"] if iters is None else iters
    problems = []
    if not worlds:
        raise ScenarioError([Problem("--world-size", "", "name at least one world size")])
    if backend not in ("auto", "gloo", "nccl"):
        problems.append(Problem("--backend", backend, "choose auto, gloo or nccl"))
    for w in worlds:
        if w < 2:
            problems.append(Problem("--world-size", w, "a collective needs at least 2 ranks"))
        elif w > MAX_WORLD:
            problems.append(Problem("--world-size", w, f"this benchmark runs at most "
                                                      f"{MAX_WORLD} ranks on one machine"))
    for name in names:
        if name not in COLLECTIVES:
            problems.append(Problem("--collectives", name,
                                    "unknown collective; choose from " + ", ".join(COLLECTIVES)))
    if not names:
        problems.append(Problem("--collectives", "", "name at least one collective"))
    if lo < ELEMENT_BYTES * max(worlds):
        problems.append(Problem("--min-bytes", lo, f"must be at least {ELEMENT_BYTES} bytes "
                                                   f"(one float32) per rank: "
                                                   f"{ELEMENT_BYTES * max(worlds)} at "
                                                   f"{max(worlds)} ranks"))
    if lo > hi:
        problems.append(Problem("--min-bytes", lo, f"must not exceed --max-bytes ({hi})"))
    if factor < 2:
        problems.append(Problem("--step-factor", factor, "must be >= 2"))
    if warmup < 1:
        problems.append(Problem("--warmup", warmup, "must be >= 1"))
    if iters < 1:
        problems.append(Problem("--iters", iters, "must be >= 1"))
    if problems:
        raise ScenarioError(problems)
    worlds = tuple(sorted(set(worlds)))
    resolved = check_backend(backend, max(worlds))
    need = max(worlds) * (RANK_BASE_BYTES + BUFFERS_PER_RANK * hi)
    have = _available if _available is not None else available_memory()
    if have is not None and need > have:
        raise ScenarioError([Problem("--max-bytes", hi, f"{max(worlds)} ranks with "
                                     f"{human_bytes(hi)} buffers need about {memory_text(need)}; "
                                     f"this machine has {memory_text(have)} available (lower "
                                     "--max-bytes or --world-size)")])
    return BenchConfig(world_sizes=worlds, backend=resolved,
                       collectives=tuple(dict.fromkeys(names)),
                       sizes=tuple(size_ladder(lo, hi, factor)), warmup=warmup, iters=iters,
                       min_iters=min(preset["min_iters"], iters), budget_s=preset["budget_s"],
                       timeout_s=timeout_s, stall_s=stall_s)


def stream(cfg: BenchConfig, inject: dict | None = None) -> Iterator[dict]:
    """Run every world size of ``cfg`` and yield events: ``start`` (per world size: backend,
    start method), ``row`` (a contract row plus ``iterations``, as soon as every rank has
    reported it) and ``end`` (``wall_s``). A failure raises BenchFailed after every rank of
    that world size has been reaped."""
    t0 = time.time()
    method = start_method(cfg.backend)
    for world in cfg.world_sizes:
        yield {"type": "start", "backend": cfg.backend, "world_size": world,
               "start_method": method}
        yield from _run_world(cfg, world, method, inject or {})
    yield {"type": "end", "wall_s": time.time() - t0}


def _run_world(cfg: BenchConfig, world: int, method: str, inject: dict) -> Iterator[dict]:
    from workbench.bench.collectives import RankArgs, run_rank

    def rank_args(port: int) -> list[tuple]:
        return [(RankArgs(rank=rank, world=world, port=port, backend=cfg.backend,
                          collectives=cfg.collectives, sizes=cfg.sizes, warmup=cfg.warmup,
                          iters=cfg.iters, min_iters=cfg.min_iters, budget_s=cfg.budget_s,
                          timeout_s=cfg.timeout_s, **inject),) for rank in range(world)]

    pending: dict[tuple[str, int], dict[int, list[float]]] = {}
    error = None
    with contextlib.closing(run_ranks(run_rank, rank_args, method=method,
                                      stall_s=cfg.stall_s)) as events:
        for ev in events:
            if ev["type"] == "result":
                error = ev["error"]
                continue
            cell = pending.setdefault((ev["collective"], ev["bytes"]), {})
            cell[ev["rank"]] = ev["times"]
            if len(cell) == world:
                row = make_row(ev["collective"], ev["bytes"], world, cell)
                yield {"type": "row", **row, "iterations": len(ev["times"])}
    if error:
        raise BenchFailed(f"{world} ranks: {error}")


def run_bench(world_size=None, *, backend: str = "auto",
              collectives: Sequence[str] | str | None = None, min_bytes=None, max_bytes=None,
              step_factor: int | None = None, warmup: int | None = None,
              iters: int | None = None, quick: bool = False,
              on_event: Callable[[dict], None] | None = None, timeout_s: float = 60.0,
              stall_s: float = 60.0, _inject: dict | None = None):
    """Time every collective at every size and world size; return a pandas DataFrame with one
    row per (collective, size, world size) and exactly the columns ``collective, bytes,
    world_size, time_s, algbw_gb_per_s, busbw_gb_per_s`` (nccl-tests' definitions:
    definitions.py; time statistic: result.py). ``world_size``: N, a list, ``"2,4"`` or None
    (2, 4 and 8; the quick preset: 2). Sizes in bytes or ``"64K"``-style strings.
    ``DataFrame.attrs`` records the backend, dtype, statistic, iteration counts and wall time;
    ``on_event`` sees every ``start``/``row``/``end`` event while it runs.

    Raises ScenarioError for a request this machine cannot run (naming the option) and
    BenchFailed when a rank fails (one line naming the rank); no process outlives the call.
    """
    cfg = make_config(world_size, backend=backend, collectives=collectives,
                      min_bytes=min_bytes, max_bytes=max_bytes, step_factor=step_factor,
                      warmup=warmup, iters=iters, quick=quick, timeout_s=timeout_s,
                      stall_s=stall_s)
    rows: list[dict] = []
    wall = 0.0
    for ev in stream(cfg, _inject):
        if on_event is not None:
            on_event(ev)
        if ev["type"] == "row":
            rows.append(ev)
        elif ev["type"] == "end":
            wall = ev["wall_s"]
    return to_frame(rows, backend=cfg.backend, dtype=DTYPE, statistic=STATISTIC,
                    send_recv="ring exchange: each rank sends to rank+1 and receives from "
                              "rank-1 at once (nccl-tests' sendrecv)",
                    torch_calls=dict(TORCH_CALLS), warmup_max=cfg.warmup, iters_max=cfg.iters,
                    iters_min=cfg.min_iters, budget_s=cfg.budget_s,
                    iterations=[r["iterations"] for r in rows], wall_s=wall)

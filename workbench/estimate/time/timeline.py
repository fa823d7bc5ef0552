"""Per-rank pipeline timeline: forward (F), backward (B, or input-gradient I and weight-gradient
W for zero-bubble schedules) blocks of every microbatch on every pipeline rank.

One event-driven list scheduler serves all five schedules; what distinguishes them is data:
- where each model chunk lives (``params.rank_chunks``: looped for interleaved, V for DualPipeV),
- how many microbatch-chunks a rank may hold before it must run a backward — the same in-flight
  counts the memory model uses (``Schedule.inflight``),
- priorities: forward and backward alternate once both are ready (the 1F1B steady state);
  forward first (GPipe); weight-gradient blocks only when nothing else is ready (zero-bubble,
  DualPipeV: Qi et al. 2023's filling rule).
A block starts when its rank is free and its inputs have arrived (plus one point-to-point
transfer when they come from another rank). For uniform stages the makespan equals the closed
forms in ``step_time`` (tests/test_step_time.py checks it).
"""
from __future__ import annotations

from dataclasses import dataclass

from workbench.estimate.model.params import rank_chunks
from workbench.scenario.schedules import schedule
from workbench.scenario.types import Parallel


@dataclass(frozen=True)
class Block:
    rank: int
    kind: str          # "F", "B", "I" or "W"
    microbatch: int
    chunk: int         # model chunk (virtual stage) index, 0 = first
    start: float
    end: float


def simulate(par: Parallel, microbatches: int, f: list[float], b: list[float],
             w: list[float] | None = None, p2p: float = 0.0) -> list[Block]:
    """Schedule ``microbatches`` through the pipeline. ``f[r]``, ``b[r]`` are rank r's forward
    and full-backward times per microbatch (all its chunks together); ``w[r]`` the weight part
    of ``b[r]``, split out for zero-bubble and DualPipeV."""
    p, m = par.pp, microbatches
    chunks = rank_chunks(par)
    v = len(chunks[0])
    n_stages = p * v
    owner = {c: r for r, cs in enumerate(chunks) for c in cs}
    sched = schedule(par.pp_schedule)
    split = sched.split_backward and w is not None
    cap = [sched.inflight(p, m, par.chunks_per_rank, r) for r in range(p)]
    fwd_first = sched.forward_first

    def dur(kind: str, stage: int) -> float:
        r = owner[stage]
        if kind == "F":
            return f[r] / v
        if kind == "B":
            return b[r] / v
        if kind == "W":
            return w[r] / v
        return (b[r] - w[r]) / v    # I

    done: dict[tuple, float] = {}          # (kind, stage, mb) -> end time
    free = [0.0] * p
    held = [0] * p                          # microbatch-chunks whose backward is pending
    f_order = [_order(cs, m, p, reverse=False) for cs in chunks]
    b_order = [_order(cs, m, p, reverse=True) for cs in chunks]
    nf, nb = [0] * p, [0] * p
    last = ["B"] * p                        # 1F1B steady state alternates F and B
    pending_w: list[list[tuple]] = [[] for _ in range(p)]
    blocks: list[Block] = []
    bk = "I" if split else "B"
    total = n_stages * m * (3 if split else 2)

    def arrival(kind: str, stage: int, mb: int) -> float | None:
        """When the inputs of (kind, stage, mb) are available on its rank, or None."""
        if kind == "F":
            if stage == 0:
                return 0.0
            t = done.get(("F", stage - 1, mb))
            return None if t is None else t + (p2p if owner[stage - 1] != owner[stage] else 0)
        if ("F", stage, mb) not in done:
            return None
        if stage == n_stages - 1:
            return done[("F", stage, mb)]
        t = done.get((bk, stage + 1, mb))
        if t is None:
            return None
        return max(t + (p2p if owner[stage + 1] != owner[stage] else 0), done[("F", stage, mb)])

    def candidates(r: int) -> list[tuple]:
        """What rank r could run next, with when it could start."""
        cands = []
        if nb[r] < len(b_order[r]):
            stage, mb = b_order[r][nb[r]]
            t = arrival(bk, stage, mb)
            if t is not None:
                turn = 0 if last[r] == "F" else 1
                cands.append((max(t, free[r]), 1 if fwd_first else turn, bk, stage, mb))
        if nf[r] < len(f_order[r]) and (fwd_first or held[r] < cap[r]):
            stage, mb = f_order[r][nf[r]]
            t = arrival("F", stage, mb)
            if t is not None:
                turn = 0 if last[r] != "F" else 1
                cands.append((max(t, free[r]), 0 if fwd_first else turn, "F", stage, mb))
        if pending_w[r] and (not cands or min(c[0] for c in cands) > free[r]):
            # Zero-bubble filling: a weight-gradient block runs in what would be idle time.
            stage, mb = pending_w[r][0]
            cands.append((free[r], 2, "W", stage, mb))
        return cands

    # A rank's candidates change only when it runs a block or a neighbouring stage finishes
    # one: they are kept between iterations and recomputed for those ranks alone.
    cached: list[list[tuple] | None] = [None] * p
    while len(blocks) < total:
        best = None
        for r in range(p):
            if cached[r] is None:
                cached[r] = candidates(r)
            for c in cached[r]:
                key = (c[0], c[1], r)
                if best is None or key < best[0]:
                    best = (key, r, c)
        if best is None:
            raise RuntimeError("pipeline schedule deadlocked")  # a bug, never a user error
        _, r, (start, _, kind, stage, mb) = best
        end = start + dur(kind, stage)
        free[r] = end
        done[(kind, stage, mb)] = end
        blocks.append(Block(r, kind, mb, stage, start, end))
        if kind == "F":
            nf[r] += 1
            held[r] += 1
            last[r] = "F"
        elif kind in ("B", "I"):
            last[r] = "B"
            nb[r] += 1
            held[r] -= 1
            if split:
                pending_w[r].append((stage, mb))
        else:
            pending_w[r].pop(0)
        cached[r] = None
        for neighbour in (stage - 1, stage + 1):
            if 0 <= neighbour < n_stages:
                cached[owner[neighbour]] = None
    return blocks


def _order(stages: tuple[int, ...], m: int, group: int, reverse: bool) -> list[tuple[int, int]]:
    """A rank's (stage, microbatch) order: microbatches in groups of ``pp``, each group through
    the rank's chunks in turn (Megatron-LM's interleaved order; backward visits chunks deepest
    first). With one chunk per rank this is plain microbatch order."""
    chunks = sorted(stages, reverse=reverse)
    out = []
    for g0 in range(0, m, group):
        mbs = range(g0, min(m, g0 + group))
        for stage in chunks:
            out.extend((stage, mb) for mb in mbs)
    return out


def makespan(blocks: list[Block]) -> float:
    return max(bl.end for bl in blocks) if blocks else 0.0

"""Run ranks as local processes: the one process runner of trials, the collective benchmark and
the calibration probes (the devices they run on: ``rank_devices``).

``fork`` after importing torch in the parent on CPU (a ready process group in ~0.2 s at 8 ranks;
docs/platform.md), ``spawn`` for nccl (fork is unsafe with CUDA). Each rank runs its body under
``supervised_rank``: a heartbeat naming its phase, then ``done``, or one ``error`` line and a
non-zero exit. The parent's supervisor turns a rank that raises, dies or hangs (no phase change
for ``stall_s``) into one line naming it; every outcome — success, error, hang, the caller
closing the stream or an interrupt — ends with every child reaped. A rendezvous port that
another program takes before rank 0 binds it is retried on a new one. A parent killed outright
(SIGKILL: no ``finally`` runs) takes its ranks with it: each rank asks Linux for SIGKILL when
its parent dies (``die_with_parent``), and ranks stay in their parent's process group, so a
signal to that group reaches them too.

This module imports torch only when it starts ranks.
"""
from __future__ import annotations

import contextlib
import ctypes
import multiprocessing as mp
import os
import queue as queue_mod
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
HEARTBEAT_S = 0.5
PORT_ATTEMPTS = 3

# Errors a rank reports because *another* rank went away (gloo's wording).
SECONDARY = ("Connection closed by peer", "Connection reset by peer", "timed out", "Timed out",
             "Socket Timeout", "Broken pipe")

_PORT_LOCK = threading.Lock()
_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A free loopback port never handed out before by this process (two runs started at once
    from one kernel must not race for the same rendezvous port)."""
    with _PORT_LOCK:
        while True:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in _HANDED_OUT:
                _HANDED_OUT.add(port)
                return port


@contextlib.contextmanager
def environment(env: dict[str, str] | None) -> Iterator[None]:
    """``os.environ`` with ``env`` set while the body runs (a started process keeps it: fork
    copies the environment, spawn passes it), restored after."""
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def start_method(backend: str) -> str:
    """``spawn`` for nccl (CUDA in a forked child is unsafe), ``fork`` otherwise (~0.2 s to a
    ready process group at 8 ranks against ~15 s for spawn)."""
    return "spawn" if backend == "nccl" else "fork"


# --- inside a rank ---------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1     # <linux/prctl.h>


def die_with_parent(parent_pid: int) -> None:
    """Have Linux SIGKILL this process when its parent ``parent_pid`` dies (prctl
    PR_SET_PDEATHSIG). Without it a rank whose launcher was SIGKILLed is reparented and, if it
    hangs in a collective, lives forever. If the parent died before the call, the signal would
    never come: this process kills itself instead. The signal follows the parent *thread* that
    started this process, so start ranks from a thread that outlives them (``run_ranks``' caller
    does: it reaps them before it returns). Elsewhere than Linux, nothing."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)      # the C library the interpreter runs on
        libc.prctl(ctypes.c_int(_PR_SET_PDEATHSIG), ctypes.c_ulong(signal.SIGKILL),
                   ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
    except (OSError, AttributeError):     # no prctl to call: an orphan is all we can be
        return
    if os.getppid() != parent_pid:        # reparented already: the signal will not come
        os.kill(os.getpid(), signal.SIGKILL)


def _rank_main(target: Callable, parent_pid: int, *args) -> None:
    """A rank process's entry point: tie its life to its parent's, then run ``target``."""
    die_with_parent(parent_pid)
    target(*args)


class Phase:
    """What this rank is doing now, as the heartbeat reports it."""

    def __init__(self) -> None:
        self.value = "starting"


def supervised_rank(rank: int, queue, body: Callable[[Phase], None]) -> None:
    """Run one rank's ``body`` under the supervisor's protocol: a heartbeat with the current
    phase every HEARTBEAT_S, ``done`` at the end, or an ``error`` event with one line and a
    non-zero exit. ``queue`` needs ``put``, ``close`` and ``join_thread``."""
    phase = Phase()
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            queue.put({"type": "heartbeat", "rank": rank, "phase": phase.value,
                       "time": time.time()})

    threading.Thread(target=beat, daemon=True).start()
    try:
        body(phase)
    except BaseException as exc:   # report, then exit non-zero: the supervisor decides
        queue.put({"type": "error", "rank": rank, "phase": phase.value,
                   "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300],
                   "traceback": traceback.format_exc()[-2000:]})
        stop.set()
        queue.close()
        queue.join_thread()      # the report must leave before the process does
        os._exit(1)
    stop.set()
    queue.put({"type": "done", "rank": rank})
    queue.close()
    queue.join_thread()


def report_phase(queue, rank: int, phase: Phase) -> None:
    """Send the phase now rather than at the next heartbeat (the watchdog blames the rank that
    stalled first; a rank about to fail must not look like its blocked peers)."""
    queue.put({"type": "heartbeat", "rank": rank, "phase": phase.value, "time": time.time()})


def inject_fault(kind: str, where: str) -> None:
    """Fault injection for teaching and tests: die (SIGKILL), raise, or hang forever."""
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "raise":
        raise RuntimeError(f"injected failure on {where}")
    if kind == "hang":
        while True:
            time.sleep(1)


# --- the parent --------------------------------------------------------------------------------

def run_ranks(target: Callable, rank_args: Callable[[int], Sequence[tuple]], *,
              method: str = "fork", stall_s: float = 60.0,
              env: dict[str, str] | None = None) -> Iterator[dict]:
    """Start one process per entry of ``rank_args(port)`` running ``target(*entry, queue)``
    (``port``: a fresh rendezvous port on 127.0.0.1), supervise them and yield every event
    they report except heartbeats and ``done``, then one ``{"type": "result", "error": ...}``
    (None on success, else one line naming the rank) once every child has been reaped. If a
    rank reports EADDRINUSE before any event was yielded, the ranks are started again on a new
    port (PORT_ATTEMPTS in all). ``method``: ``fork`` or ``spawn`` (``start_method``);
    ``env``: variables the ranks start with (``rank_environment``), not kept by this process."""
    if method == "fork":
        import torch  # noqa: F401  (fork after importing torch: children do not pay for it)
        import torch.distributed  # noqa: F401
    ctx = mp.get_context(method)
    for attempt in range(PORT_ATTEMPTS):
        error, reported = yield from _attempt(ctx, target, rank_args(free_port()), stall_s,
                                              env)
        if not (error and "EADDRINUSE" in error and not reported
                and attempt < PORT_ATTEMPTS - 1):
            break
    yield {"type": "result", "error": error}


def _attempt(ctx, target: Callable, args: Sequence[tuple],
             stall_s: float, env: dict[str, str] | None = None) -> Iterator[dict]:
    """One start of the ranks; returns (error, whether any event was yielded)."""
    q = ctx.Queue()
    procs: list = []
    error, reported = None, False
    try:
        for entry in args:
            # no new session or group for a rank: a signal to ours must reach it
            p = ctx.Process(target=_rank_main, args=(target, os.getpid(), *entry, q),
                            daemon=True)
            with environment(env):
                p.start()
            procs.append(p)
        for ev in _supervise(q, procs, stall_s):
            if ev["type"] == "result":
                error = ev["error"]
            else:
                reported = True
                yield ev
    finally:
        _reap(procs)
        q.close()
        q.join_thread()
    return error, reported


def _supervise(q, procs, stall_s: float) -> Iterator[dict]:
    """Yield the ranks' events until every rank is done, then one ``result`` event with the
    error (None on success): a rank's own failure, a rank that died, or a rank that hung."""
    world = len(procs)
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
                # Blame among every rank still running, not only those past the limit: the
                # rank that hung may have reported its phase a heartbeat after its peers
                # blocked on it, and so cross the limit last.
                running = [r for r in range(world) if r not in done]
                culprit = min(running, key=lambda r: ("injected" not in phases[r][0],
                                                      phases[r][1]))
                error = (f"rank {culprit} stopped making progress for {stall_s:.0f} s while "
                         f"{phases[culprit][0]} (hung; all ranks stopped)")
    yield {"type": "result", "error": error}


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

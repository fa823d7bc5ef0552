"""Run a trial from a program that has threads (a Jupyter kernel, a Voila page): in a fresh
``python -m workbench trial --stream`` process, reading its events line by line.

Forking the ranks straight from a kernel is unsafe (the kernel's threads may hold locks at the
fork; docs/platform.md), and spawning them costs 4-15 s. A single-threaded child
process forks them instead; it costs one interpreter start. Cancelling kills the child's whole
process session, so no rank is ever left behind; a child killed any other way takes its ranks
with it (``process_runner.die_with_parent``).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator

from workbench.scenario import dump_scenario
from workbench.scenario.types import Scenario
from workbench.trial.slots import HELD_ENV, TrialSlots


class TrialProcess:
    """One trial in a child process. ``events()`` yields the contract-3 events (``start``,
    ``step``, ``end``) and finally ``{"type": "result", "result": {...}}``, or an ``end`` event
    with the error when the child fails before reporting; with ``metrics_port`` first a
    ``{"type": "metrics", "url": ...}`` event naming the child's Prometheus endpoint.
    ``slot_held``: the caller holds this trial's slot in the queue (``run_in_background``
    does), so the child must not wait for one; False: the child queues for itself."""

    def __init__(self, scenario: Scenario, world_size: int | None = None, steps: int = 3,
                 backend: str = "auto", inject: str | None = None, inject_rank: int = 0,
                 inject_step: int = 1, metrics_port: int | None = None,
                 slot_held: bool = True) -> None:
        self._file = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
        self._file.write(dump_scenario(scenario))
        self._file.close()
        cmd = [sys.executable, "-m", "workbench", "trial", self._file.name, "--stream",
               "--steps", str(steps), "--backend", backend]
        if world_size:
            cmd += ["--world-size", str(world_size)]
        if inject:
            cmd += ["--inject", inject, "--rank", str(inject_rank), "--step", str(inject_step)]
        if metrics_port is not None:     # the child serves Prometheus metrics while it runs
            cmd += ["--metrics-port", str(metrics_port)]
        env = {k: v for k, v in os.environ.items() if k != HELD_ENV}
        if slot_held:     # queueing again would wait for our own slot: for ever with one slot
            env[HELD_ENV] = "1"
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True, env=env)
        self.cancelled = False

    def events(self) -> Iterator[dict]:
        ended = False
        try:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                ev = json.loads(line)
                ended = ended or ev["type"] == "end"
                yield ev
            code = self.proc.wait()
            if not ended:
                err = (self.proc.stderr.read() if self.proc.stderr else "").strip()
                last = err.splitlines()[-1] if err else f"exit code {code}"
                yield {"type": "end", "wall_s": 0.0,
                       "error": "cancelled" if self.cancelled else last}
        finally:
            self.close()

    def cancel(self) -> None:
        """Stop the trial: SIGINT to the child's session (the launcher reaps its ranks), then
        SIGKILL to whatever is left after two seconds."""
        self.cancelled = True
        self._signal(signal.SIGINT)
        try:
            self.proc.wait(2.0)
        except subprocess.TimeoutExpired:
            pass
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self) -> None:
        if self.proc.poll() is None:
            self._signal(signal.SIGKILL)
            self.proc.wait()
        self._signal(signal.SIGKILL)     # ranks that outlived their parent, if any
        try:
            os.unlink(self._file.name)
        except OSError:
            pass


def run_in_background(start: Callable[[], TrialProcess], on_event: Callable[[dict], None],
                      slots: TrialSlots | None = None,
                      keep_waiting: Callable[[], bool] = lambda: True,
                      on_wait: Callable[[int, int], None] | None = None) -> threading.Thread:
    """From a daemon thread: wait for one of ``slots`` (the machine-wide trial queue;
    ``on_wait(ahead, running)`` while queued), then ``start()`` the trial and pump its events
    into ``on_event`` (widget updates from a thread reach the browser; docs/platform.md). When
    ``keep_waiting()`` turns false in the queue, ``on_event`` gets an ``end`` event with the
    error "cancelled while queued"."""
    def pump() -> None:
        slot = slots.acquire(keep_waiting, on_wait) if slots is not None else None
        if slots is not None and slot is None:
            on_event({"type": "end", "wall_s": 0.0, "error": "cancelled while queued"})
            return
        try:
            for ev in start().events():
                on_event(ev)
        finally:
            if slot is not None:
                slot.release()

    t = threading.Thread(target=pump, daemon=True, name="trial-events")
    t.start()
    return t

"""A machine-wide queue for trials: at most ``n`` run at once, across every process of this user
(each dashboard page has its own kernel), the others wait in arrival order.

A class of students on one machine otherwise starts 4 x N ranks on a few cores at once; each
trial then takes several times longer, and some hit the hang detector. Slots and places in the
queue are files held with ``flock``: the kernel releases a lock when its process dies, so a
closed page or a killed kernel never keeps a slot, and a stale place in the queue (its file no
longer locked) is skipped and removed.
"""
from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

POLL_S = 0.25


def default_slots() -> int:
    """``WORKBENCH_TRIAL_SLOTS`` if set, else one trial per two cores (a trial's ranks share
    the cores: the smallest trial has two ranks), at least one."""
    env = os.environ.get("WORKBENCH_TRIAL_SLOTS")
    if env:
        n = int(env)
        if n < 1:
            raise ValueError(f"WORKBENCH_TRIAL_SLOTS must be at least 1, got {env!r}")
        return n
    return max(1, (os.cpu_count() or 2) // 2)


def default_directory() -> Path:
    return Path(tempfile.gettempdir()) / f"workbench-trial-slots-{os.getuid()}"


class Slot:
    """A held slot; ``release()`` (or leaving the ``with`` block) frees it."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)          # closing drops the flock
            self._fd = None

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class TrialSlots:
    """``acquire`` waits for one of ``n`` slots in first-come order."""

    def __init__(self, n: int | None = None, directory: Path | None = None) -> None:
        self.n = n if n is not None else default_slots()
        self.dir = directory or default_directory()
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)

    def running(self) -> int:
        """Slots held now (by any process)."""
        held = 0
        for i in range(self.n):
            fd = self._try(self.dir / f"slot-{i}.lock")
            if fd is None:
                held += 1
            else:
                os.close(fd)
        return held

    def acquire(self, keep_waiting: Callable[[], bool] = lambda: True,
                on_wait: Callable[[int, int], None] | None = None) -> Slot | None:
        """A slot, once every earlier arrival has one. While waiting, ``on_wait(ahead,
        running)`` is told of changes (``ahead``: arrivals before this one still waiting);
        returns None when ``keep_waiting()`` turns false."""
        name = f"{time.time_ns():020d}-{os.getpid()}-{id(self)}"
        # locked before it appears under its queue name, so nobody takes it for a dead one
        draft = self.dir / f"draft-{name}"
        place_fd = os.open(draft, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(place_fd, fcntl.LOCK_EX)
        place = self.dir / f"wait-{name}"
        os.rename(draft, place)
        last = None
        try:
            while keep_waiting():
                ahead = self._ahead(place.name)
                if ahead == 0:
                    for i in range(self.n):
                        fd = self._try(self.dir / f"slot-{i}.lock")
                        if fd is not None:
                            return Slot(fd)
                state = (ahead, self.running())
                if on_wait is not None and state != last:
                    on_wait(*state)
                last = state
                time.sleep(POLL_S)
            return None
        finally:
            os.close(place_fd)
            place.unlink(missing_ok=True)

    def _ahead(self, mine: str) -> int:
        """Live places in the queue before ``mine`` (dead ones are removed)."""
        n = 0
        for p in sorted(self.dir.glob("wait-*")):
            if p.name >= mine:
                break
            try:
                fd = self._try(p)
            except FileNotFoundError:   # it left the queue meanwhile
                continue
            if fd is None:
                n += 1                  # its owner is alive and waiting
            else:                       # its owner died: not a place any more
                os.close(fd)
                p.unlink(missing_ok=True)
        return n

    @staticmethod
    def _try(path: Path) -> int | None:
        """An fd holding ``path``'s lock, or None when another holder has it (a slot file is
        created if missing; a missing place raises FileNotFoundError)."""
        flags = os.O_RDWR | (os.O_CREAT if path.name.startswith("slot-") else 0)
        fd = os.open(path, flags, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            os.close(fd)
            return None

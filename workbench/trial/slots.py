"""A machine-wide queue for trials: at most ``n`` run at once, across every process of this user
(each dashboard page has its own kernel, each ``workbench trial`` its own process), the others
wait in arrival order.

A class of students on one machine otherwise starts 4 x N ranks on a few cores at once; each
trial then takes several times longer, and some hit the hang detector. Slots and places in the
queue are files held with ``flock``: the kernel releases a lock when its process dies, so a
closed page or a killed kernel never keeps a slot, and a stale place in the queue (its file no
longer locked) is skipped and removed.

GPU (nccl) trials are admitted by the GPUs free, not the cores: each GPU this process can see
is one lock file (``gpu-<i>.lock``), and a trial of ``world`` ranks holds ``world`` of them at
once (two nccl trials on a one-GPU machine would each plan 80 % of its memory; the second would
run out of it). CPU and GPU trials wait in the same first-come queue.

The files live in a directory only this user can use (``workbench.private_folder``): one that another
local user could create or write first would let them hold every slot and stall every trial.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from workbench.private_folder import PrivateFolderError, private_directory, unsafe

POLL_S = 0.25
# The queue's directory, for tests or a shared machine's own choice (else default_directory).
DIR_ENV = "WORKBENCH_TRIAL_SLOTS_DIR"
# Set by the dashboard for the ``workbench trial --stream`` process it starts once it holds a
# slot for it: that process must not queue again (with one slot it would wait for its parent).
HELD_ENV = "WORKBENCH_TRIAL_SLOT_HELD"


def default_slots() -> int:
    """``WORKBENCH_TRIAL_SLOTS`` if set, else one trial per two cores (a trial's ranks share
    the cores: the smallest trial has two ranks), at least one."""
    env = os.environ.get("WORKBENCH_TRIAL_SLOTS")
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n < 1:
            raise ValueError(f"WORKBENCH_TRIAL_SLOTS must be at least 1, got {env!r}")
        return n
    return max(1, (os.cpu_count() or 2) // 2)


def default_directory() -> Path:
    """``WORKBENCH_TRIAL_SLOTS_DIR`` if set; else under ``XDG_RUNTIME_DIR`` when that is ours
    and private (a per-user directory nobody else can pre-create), else under the temporary
    directory with the uid in the name."""
    env = os.environ.get(DIR_ENV)
    if env:
        return Path(env)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        try:
            if unsafe(os.lstat(runtime)) is None:
                return Path(runtime) / "workbench-trial-slots"
        except OSError:
            pass
    return Path(tempfile.gettempdir()) / f"workbench-trial-slots-{os.getuid()}"


class Slot:
    """A held slot (or, for a GPU trial, its GPUs); ``release()`` (or leaving the ``with``
    block) frees it."""

    def __init__(self, fd: int | list[int]) -> None:
        self._fds: list[int] = list(fd) if isinstance(fd, list) else [fd]

    def release(self) -> None:
        for fd in self._fds:
            os.close(fd)                # closing drops the flock
        self._fds = []

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class TrialSlots:
    """``acquire`` waits for one of ``n`` slots in first-come order; with ``gpus`` (a GPU
    trial) for ``need`` of the machine's ``gpus`` GPUs at once instead."""

    def __init__(self, n: int | None = None, directory: Path | None = None, *,
                 gpus: int | None = None, need: int = 1) -> None:
        self.gpu = gpus is not None
        if self.gpu:
            self.n = max(1, gpus)
            self.need = max(1, min(need, self.n))
        else:
            self.n = n if n is not None else default_slots()
            self.need = 1
        self.prefix = "gpu-" if self.gpu else "slot-"
        self.dir = private_directory(directory or default_directory(), "trial queue directory",
                                     DIR_ENV)

    def _file(self, i: int) -> Path:
        return self.dir / f"{self.prefix}{i}.lock"

    def running(self) -> int:
        """Slots (GPUs, for a GPU queue) held now (by any process)."""
        held = 0
        for i in range(self.n):
            fd = self._try(self._file(i))
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
        place_fd = os.open(draft, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_NOFOLLOW, 0o600)
        fcntl.flock(place_fd, fcntl.LOCK_EX)
        place = self.dir / f"wait-{name}"
        os.rename(draft, place)
        last = None
        try:
            while keep_waiting():
                ahead = self._ahead(place.name)
                if ahead == 0:
                    got: list[int] = []
                    for i in range(self.n):
                        fd = self._try(self._file(i))
                        if fd is not None:
                            got.append(fd)
                            if len(got) == self.need:
                                return Slot(got)
                    for fd in got:          # not enough free: hold none while waiting
                        os.close(fd)
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
        flags = os.O_RDWR | os.O_NOFOLLOW | (os.O_CREAT if path.name.startswith(("slot-", "gpu-"))
                                           else 0)
        fd = os.open(path, flags, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            os.close(fd)
            return None


def slots_for(backend: str, world: int = 1, directory: Path | None = None) -> TrialSlots:
    """The queue a trial of ``world`` ranks on ``backend`` waits in: one of the CPU slots for
    gloo, ``world`` of the GPUs this process can see (``rank_devices.cuda_gpus``, NVML only)
    for nccl."""
    if backend == "nccl":
        from workbench.rank_devices import cuda_gpus

        return TrialSlots(directory=directory, gpus=cuda_gpus(), need=world)
    return TrialSlots(directory=directory)


def describe(slots: TrialSlots) -> str:
    """What the queue admits, in words (for the waiting lines)."""
    if slots.gpu:
        return f"{slots.need} of this machine's {slots.n} GPUs"
    return f"WORKBENCH_TRIAL_SLOTS={slots.n}"


@contextlib.contextmanager
def hold_for_cli(backend: str = "gloo", world: int = 1) -> Iterator[None]:
    """Hold a trial slot around a ``workbench trial`` run: wait in the queue first, telling
    stderr in one line each time the place in it changes. Takes nothing when the process that
    started this one already holds the slot (``WORKBENCH_TRIAL_SLOT_HELD=1``: the dashboard's
    ``TrialProcess``). Ctrl-C while waiting leaves the queue and raises KeyboardInterrupt; an
    unsafe queue directory or a bad ``WORKBENCH_TRIAL_SLOTS`` exits with one line."""
    if os.environ.get(HELD_ENV) == "1":
        yield
        return
    try:
        slots = slots_for(backend, world)
    except (PrivateFolderError, ValueError) as exc:
        raise SystemExit(f"workbench: {exc}") from None

    def on_wait(ahead: int, running: int) -> None:
        busy = f"{running} GPUs busy" if slots.gpu else f"{running} running"
        print(f"waiting for a trial slot: {ahead} ahead, {busy} ({describe(slots)})",
              file=sys.stderr, flush=True)

    slot = slots.acquire(on_wait=on_wait)
    assert slot is not None       # acquire waits for ever unless keep_waiting says otherwise
    with slot:
        yield

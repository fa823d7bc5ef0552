"""The machine-wide trial queue (workbench/trial/slots.py): first come first served, a dead
process never keeps a slot or a place, and waiting can be abandoned; its directory is private
to this user; the command line waits in it too, and the dashboard's child does not wait twice."""
from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import psutil
import pytest

from tests.conftest import ROOT
from workbench.trial import slots as slots_mod
from workbench.private_folder import PrivateFolderError
from workbench.trial.slots import (DIR_ENV, HELD_ENV, TrialSlots,
                                   default_directory, default_slots, hold_for_cli)

HOLD = """
import sys, time
from pathlib import Path
from workbench.trial.slots import TrialSlots
slot = TrialSlots(1, Path(sys.argv[1])).acquire()
print("holding", flush=True)
time.sleep(600)
"""


def _hold_in_a_process(directory) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(directory)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "holding"
    return proc


def test_trials_get_slots_in_arrival_order_and_see_their_place(tmp_path):
    gate = TrialSlots(1, tmp_path).acquire()          # the machine is busy
    order, seen, started = [], {}, []

    def trial(i: int) -> None:
        slots = TrialSlots(1, tmp_path)
        slot = slots.acquire(on_wait=lambda ahead, running: seen.setdefault(i, set()).add(
            (ahead, running)))
        order.append(i)
        slot.release()

    for i in range(3):
        t = threading.Thread(target=trial, args=(i,))
        t.start()
        started.append(t)
        # each waiter is in the queue before the next arrives
        while i not in seen:
            threading.Event().wait(0.02)
    assert seen[2] >= {(2, 1)}       # two before it, the gate running
    gate.release()
    for t in started:
        t.join(30)
    assert order == [0, 1, 2]
    assert [p.name for p in tmp_path.iterdir()] == ["slot-0.lock"]   # no place left behind


def test_a_killed_holder_frees_its_slot(tmp_path):
    proc = _hold_in_a_process(tmp_path)
    slots = TrialSlots(1, tmp_path)
    assert slots.running() == 1
    proc.kill()
    proc.wait()
    slot = slots.acquire(keep_waiting=lambda: True)
    assert slot is not None and slots.running() == 1
    slot.release()
    assert slots.running() == 0


def test_a_dead_waiter_loses_its_place_and_a_cancelled_one_leaves(tmp_path):
    holder = _hold_in_a_process(tmp_path)
    # a waiter that dies while queued (SIGKILL: no clean-up of its own)
    waiter = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    while not list(tmp_path.glob("wait-*")):
        threading.Event().wait(0.05)
    os.kill(waiter.pid, signal.SIGKILL)
    waiter.wait()
    stop = threading.Event()
    places = []
    threading.Timer(1.0, stop.set).start()
    got = TrialSlots(1, tmp_path).acquire(keep_waiting=lambda: not stop.is_set(),
                                          on_wait=lambda ahead, running: places.append(ahead))
    assert got is None                          # gave up: the holder still runs
    assert places and places[-1] == 0           # the dead waiter did not count as ahead
    assert not list(tmp_path.glob("wait-*"))    # its place and ours are gone
    holder.kill()
    holder.wait()


def test_slot_count_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("WORKBENCH_TRIAL_SLOTS", "3")
    assert default_slots() == 3
    monkeypatch.setenv("WORKBENCH_TRIAL_SLOTS", "0")
    with pytest.raises(ValueError, match="WORKBENCH_TRIAL_SLOTS must be at least 1"):
        default_slots()
    monkeypatch.setenv("WORKBENCH_TRIAL_SLOTS", "many")
    with pytest.raises(ValueError, match="WORKBENCH_TRIAL_SLOTS must be at least 1"):
        default_slots()


# --- the queue's directory is this user's alone ----------------------------------------------

def test_the_queue_directory_is_created_private(tmp_path):
    TrialSlots(1, tmp_path / "new" / "queue")
    assert (tmp_path / "new" / "queue").stat().st_mode & 0o777 == 0o700


def test_a_queue_directory_others_can_use_is_refused(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(match=re.escape(
            f"{shared} has mode 0777; it must not be readable or writable by others")):
        TrialSlots(1, shared)
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(mine)        # private target, but whoever made the link chose it
    with pytest.raises(match=re.escape(f"{link} is a symlink")):
        TrialSlots(1, link)
    owner = mine.stat().st_uid
    monkeypatch.setattr(slots_mod.os, "getuid", lambda: owner + 1)   # as another user sees it
    with pytest.raises(match=re.escape(
            f"{mine} is owned by uid {owner}, not you (uid {owner + 1})")):
        TrialSlots(1, mine)


def test_the_queue_directory_prefers_a_private_runtime_directory(tmp_path, monkeypatch):
    monkeypatch.delenv(DIR_ENV, raising=False)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert default_directory() == runtime / "workbench-trial-slots"
    runtime.chmod(0o755)         # not private: the temporary directory instead
    assert default_directory().parent == slots_mod.Path(tempfile.gettempdir())
    monkeypatch.setenv(DIR_ENV, str(tmp_path / "chosen"))
    assert default_directory() == tmp_path / "chosen"


# --- the command line queues; the dashboard's child does not queue twice -----------------------

TWO_RANKS = [sys.executable, "-m", "workbench", "trial", str(ROOT / "examples/tiny-trial-4d.yaml"),
             "--set", "hardware.nodes=1", "--set", "hardware.gpus_per_node=2",
             "--set", "parallel.tp=1", "--set", "parallel.pp=1", "--set", "parallel.cp=1",
             "--set", "parallel.zero=0", "--steps", "1"]
WAITING = "waiting for a trial slot: 0 ahead, 1 running (WORKBENCH_TRIAL_SLOTS=1)"
STARTED_S = 120      # an interpreter start and the scenario's checks, on a loaded 2-core box


def _cli_behind_a_held_slot(directory, stdout) -> tuple[subprocess.Popen, list[str]]:
    """A ``workbench trial`` of two ranks started while the only slot in ``directory`` is
    held, once it says on stderr that it waits; and the stderr lines read so far (a thread
    appends the later ones)."""
    env = {**os.environ, DIR_ENV: str(directory), "WORKBENCH_TRIAL_SLOTS": "1"}
    env.pop(HELD_ENV, None)
    proc = subprocess.Popen(TWO_RANKS + ["--json"], cwd=ROOT, env=env, stdout=stdout,
                            stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    seen: list[str] = []

    def pump() -> None:
        for line in proc.stderr:
            seen.append(line.rstrip("\n"))
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + STARTED_S
    while True:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            line = None
        if line is None:
            proc.kill()
            proc.wait()
            pytest.fail("the CLI did not wait for the held slot (is slots.hold_for_cli in "
                        f"cli._trial?); its stderr: {seen[-10:]}")
        if line.startswith("waiting for a trial slot"):
            return proc, seen


@pytest.mark.slow       # a real trial of two processes
def test_the_cli_waits_for_a_slot_then_runs(tmp_path):
    holder = TrialSlots(1, tmp_path / "q").acquire()     # another trial runs
    with open(tmp_path / "out.json", "w") as out:
        proc, seen = _cli_behind_a_held_slot(tmp_path / "q", out)
    try:
        assert seen[-1] == WAITING
        assert not psutil.Process(proc.pid).children()   # no rank started while waiting
        holder.release()
        assert proc.wait(300) == 0, seen[-10:]
    finally:
        holder.release()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert json.loads((tmp_path / "out.json").read_text())["error"] is None
    assert all(line.startswith("waiting for a trial slot") for line in seen), seen


def test_ctrl_c_while_the_cli_waits_leaves_the_queue(tmp_path):
    holder = TrialSlots(1, tmp_path / "q").acquire()
    proc, seen = _cli_behind_a_held_slot(tmp_path / "q", subprocess.DEVNULL)
    try:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 130
        assert not any("Traceback" in line for line in seen), seen
        assert not list((tmp_path / "q").glob("wait-*"))      # its place is gone
        assert TrialSlots(1, tmp_path / "q").running() == 1   # the holder's slot is untouched
    finally:
        holder.release()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_process_whose_parent_holds_the_slot_does_not_wait(tmp_path, monkeypatch):
    """The dashboard holds the slot and runs ``workbench trial --stream``: with one slot, a
    child that queued too would wait for its own parent for ever."""
    from workbench.scenario import parse_scenario
    from workbench.trial import in_subprocess
    from tests.conftest import BASE

    started = {}

    class FakePopen:
        def __init__(self, cmd, **kw) -> None:
            started.update(kw)

    monkeypatch.setattr(in_subprocess.subprocess, "Popen", FakePopen)
    monkeypatch.setenv(HELD_ENV, "stale")           # from whoever started the kernel: replaced
    trial = in_subprocess.TrialProcess(parse_scenario(BASE))
    os.unlink(trial._file.name)
    assert started["env"][HELD_ENV] == "1"
    os.unlink(in_subprocess.TrialProcess(parse_scenario(BASE), slot_held=False)._file.name)
    assert HELD_ENV not in started["env"]

    monkeypatch.setenv(DIR_ENV, str(tmp_path))
    monkeypatch.setenv("WORKBENCH_TRIAL_SLOTS", "1")
    monkeypatch.setenv(HELD_ENV, "1")
    holder = TrialSlots(1, tmp_path).acquire()
    inside = threading.Event()

    def child() -> None:
        with hold_for_cli():
            inside.set()

    threading.Thread(target=child, daemon=True).start()
    try:
        assert inside.wait(30), "waited for the slot its parent holds"
    finally:
        holder.release()

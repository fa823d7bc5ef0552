"""The machine-wide trial queue (workbench/trial/slots.py): first come first served, a dead
process never keeps a slot or a place, and waiting can be abandoned."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from tests.conftest import ROOT
from workbench.trial.slots import TrialSlots, default_slots

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

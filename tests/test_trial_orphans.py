"""A trial launcher killed outright (SIGKILL: none of its own clean-up runs) takes its ranks with
it, even ranks hung in a collective: none is left behind, reparented, for ever."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from tests.conftest import ROOT
from workbench.trial.slots import DIR_ENV, HELD_ENV

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the parent-death signal is Linux's (prctl)")

# Two DDP ranks of the tiny model: the smallest trial the CLI runs.
TWO_RANKS = [sys.executable, "-m", "workbench", "trial", str(ROOT / "examples/tiny-trial-4d.yaml"),
             "--set", "hardware.nodes=1", "--set", "hardware.gpus_per_node=2",
             "--set", "parallel.tp=1", "--set", "parallel.pp=1", "--set", "parallel.cp=1",
             "--set", "parallel.zero=0"]
STARTED_S = 240     # interpreter, torch and the first step of two ranks, on a loaded 2-core box
GONE_S = 30         # the kernel's SIGKILL at the launcher's death, then the exit


def _lines(stream) -> queue.Queue:
    """The stream's lines as they come (None at its end), read by a thread."""
    q: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in stream:
            q.put(line)
        q.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return q


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those still running; a zombie has died (nobody may reap an orphan in a container)."""
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def _describe(p: psutil.Process) -> str:
    try:
        return f"pid {p.pid} (parent {p.ppid()}): {' '.join(p.cmdline())[:120]}"
    except psutil.Error:
        return f"pid {p.pid}"


def test_a_rank_whose_parent_is_already_gone_ends_itself():
    """The parent died before the rank asked for the signal (it would never come): the rank,
    told another parent than its own, kills itself; told its own, it carries on."""
    code = ("import os, sys; from workbench.process_runner import die_with_parent; "
            "die_with_parent(os.getppid() if sys.argv[1] == 'mine' else -1); print('alive')")
    orphan = subprocess.run([sys.executable, "-c", code, "gone"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert orphan.returncode == -signal.SIGKILL and orphan.stdout == ""
    child = subprocess.run([sys.executable, "-c", code, "mine"], cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
    assert child.returncode == 0 and child.stdout == "alive\n", child.stderr


@pytest.mark.slow       # a real trial of two processes
def test_hung_ranks_die_with_a_killed_launcher(tmp_path):
    env = {**os.environ, DIR_ENV: str(tmp_path / "slots")}   # not the machine's queue
    env.pop(HELD_ENV, None)
    with open(tmp_path / "stderr", "w") as err:
        launcher = subprocess.Popen(TWO_RANKS + ["--steps", "3", "--inject", "hang", "--rank",
                                                 "0", "--step", "1", "--stream"],
                                    cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=err,
                                    text=True)
    ranks: list[psutil.Process] = []
    try:
        # the first step has ended: both ranks run, and rank 0 is about to hang in step 1
        lines, deadline = _lines(launcher.stdout), time.monotonic() + STARTED_S
        while True:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line is not None, (tmp_path / "stderr").read_text()[-2000:]
            if line.startswith("{") and json.loads(line)["type"] == "step":
                break
        ranks = psutil.Process(launcher.pid).children(recursive=True)
        assert len(ranks) >= 2, [_describe(p) for p in ranks]
        group = os.getpgid(launcher.pid)
        # in the launcher's process group: a signal to the group reaches them too
        assert [os.getpgid(p.pid) for p in ranks] == [group] * len(ranks)

        launcher.send_signal(signal.SIGKILL)
        assert launcher.wait(GONE_S) == -signal.SIGKILL
        end = time.monotonic() + GONE_S
        while _alive(ranks) and time.monotonic() < end:
            psutil.wait_procs(_alive(ranks), timeout=0.5)
        survivors = _alive(ranks)
        assert not survivors, ("ranks outlived their launcher: "
                               + "; ".join(_describe(p) for p in survivors))
    finally:
        for p in [*_alive(ranks), *([psutil.Process(launcher.pid)]
                                    if launcher.poll() is None else [])]:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        launcher.wait(GONE_S)

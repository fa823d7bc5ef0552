"""A real Prometheus server scrapes a running trial's ``--metrics-port``: every rank's step time
and the plan's series arrive, and nothing is left running afterwards.

Debian's ``prometheus`` package provides the server (``./dev.sh test`` installs it when it is
missing, as it does Chromium)."""
from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import psutil
import pytest

from tests.conftest import ROOT

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _query(base: str, expr: str) -> list[dict]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)["data"]["result"]


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_prometheus_scrapes_every_rank_of_a_trial_and_the_plan(tmp_path):
    if not shutil.which(PROMETHEUS):
        pytest.skip("Debian's prometheus package is not installed (./dev.sh test installs it)")
    trial = subprocess.Popen(
        [sys.executable, "-m", "workbench", "trial", str(ROOT / "examples/llama3-8b-8xh100.yaml"),
         "--world-size", "4", "--steps", "20", "--metrics-port", "0", "--metrics-linger", "60"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    server = None
    try:
        line = trial.stderr.readline()
        match = re.match(r"metrics: http://(127\.0\.0\.1:\d+)/metrics", line)
        assert match, line
        port = _free_port()
        (tmp_path / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n"
            "scrape_configs:\n  - job_name: workbench-trial\n"
            f"    static_configs:\n      - targets: ['{match.group(1)}']\n")
        server = subprocess.Popen(
            [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        ranks: set[str] = set()
        memory: list = []
        # a bounded wait for what the test reads: every rank's step time, and a peak memory
        # series (step 0 reports none: its activations are not known until step 1's)
        for _ in range(120):
            try:
                ranks = {r["metric"]["rank"] for r in _query(base, "workbench_step_seconds")}
                memory = _query(base, 'workbench_memory_bytes{kind="peak"}')
            except OSError:
                ranks, memory = set(), []
            if len(ranks) == 4 and memory:
                break
            time.sleep(0.5)
        assert ranks == {"0", "1", "2", "3"}, f"ranks scraped after 60 s: {sorted(ranks)}"
        assert memory, "no workbench_memory_bytes{kind=\"peak\"} series scraped after 60 s"
        planned = {r["metric"]["kind"] for r in _query(base, "workbench_planned_memory_bytes")}
        assert {"params", "grads", "optimizer", "activations", "total"} <= planned
        assert _query(base, "workbench_planned_comm_bytes_per_step")
        assert {r["metric"]["rank"] for r in memory} <= ranks
    finally:
        for proc in (server, trial):
            if proc is not None:
                _stop(proc)
    pids = [p for p in (server, trial) if p is not None]
    alive = [p.pid for p in pids if psutil.pid_exists(p.pid)
             and psutil.Process(p.pid).status() != psutil.STATUS_ZOMBIE]
    assert not alive
    me = psutil.Process()
    assert not [c for c in me.children(recursive=True) if c.is_running()
                and c.status() != psutil.STATUS_ZOMBIE]

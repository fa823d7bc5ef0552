"""Serve the Voila dashboard on 127.0.0.1 (the README's first command ends here).

Voila's safe defaults are kept: loopback only, sources stripped, tracebacks hidden, no code
execution from the page. Kernels are preheated (the first visitor does not wait for a kernel
start) and idle ones are culled, so abandoned tabs do not pile up processes.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from workbench.process_runner import free_port

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "notebooks" / "dashboard.ipynb"
# Seconds before Voila starts the next preheated kernel once a page took one (its default: 1 s).
# Starting it runs the whole notebook; on a 2-core machine that took the CPU from the browser
# drawing the page that was just served (benchmarks/dashboard_first_chart.py). A page arriving
# meanwhile does not wait for it: workbench/voila_server.py starts the refill at once then.
POOL_FILL_DELAY_S = 15


def voila_command(port: int, notebook: Path = DASHBOARD, cull_idle_s: int = 900,
                  cull_interval_s: int = 60) -> list[str]:
    """The Voila command line used by ``workbench dashboard`` and by the tests: kernels idle
    for ``cull_idle_s`` (a closed page's too) are shut down, checked every
    ``cull_interval_s``."""
    return [
        sys.executable, "-m", "workbench.voila_server", str(notebook),
        "--no-browser", f"--port={port}", "--Voila.ip=127.0.0.1", "--Voila.port_retries=0",
        "--preheat_kernel=True", "--pool_size=1", "--show_tracebacks=False",
        f"--VoilaKernelManager.fill_delay={POOL_FILL_DELAY_S}",
        f"--MappingKernelManager.cull_idle_timeout={cull_idle_s}",
        f"--MappingKernelManager.cull_interval={cull_interval_s}",
        "--MappingKernelManager.cull_connected=False",
    ]


def isolated_env(tmp: Path) -> dict[str, str]:
    """This process's environment with Jupyter's and Chromium's config, data and cache dirs
    under ``tmp`` (tests and benchmarks keep out of ~; docs/platform.md)."""
    env = dict(os.environ)
    for var, sub in [("JUPYTER_CONFIG_DIR", "jcfg"), ("JUPYTER_DATA_DIR", "jdata"),
                     ("JUPYTER_RUNTIME_DIR", "jrun"), ("IPYTHONDIR", "ipy"),
                     ("XDG_CONFIG_HOME", "xcfg"), ("XDG_CACHE_HOME", "xcache"),
                     # saved scenarios (workbench.scenario.store)
                     ("WORKBENCH_SCENARIOS_DIR", "scenarios")]:
        env[var] = str(tmp / sub)
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    return env


def wait_until_serving(url: str, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    """Return once the Voila server at ``url`` answers; RuntimeError if it exits or does not
    answer within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            urllib.request.urlopen(f"{url}/voila/static/voila.js", timeout=2)
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Voila did not start at {url}") from None
            time.sleep(0.3)


def serve_dashboard(port: int = 0) -> int:
    """Run Voila in the foreground until interrupted; returns its exit code."""
    port = port or free_port()
    print(f"Dashboard: http://127.0.0.1:{port}/  (Ctrl+C stops it)", flush=True)
    proc = subprocess.Popen(voila_command(port), cwd=ROOT)

    def stop(signum, frame):  # forward to Voila so it shuts its kernels down
        proc.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()

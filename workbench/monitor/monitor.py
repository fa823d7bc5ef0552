"""``workbench monitor``: serve a scenario's plan and this machine's GPU telemetry for Prometheus.

The plan gauges (``MetricSet.set_plan`` of the scenario's estimate) are set once; NVML telemetry
is sampled every ``interval`` seconds, or said to be off once on stderr ("GPU telemetry off:
NVML library not found" on a machine without the NVIDIA driver). The step series come from the
training loop itself (``workbench.monitor.reporter.StepReporter``); Prometheus scrapes both.

SIGINT and SIGTERM end the loop: the endpoint is closed, NVML shut down, the previous signal
handlers restored, and the exit status is 0 (an orchestrator's SIGTERM is a normal stop).
"""
from __future__ import annotations

import signal
import sys
import threading
import time
from typing import TextIO

from workbench.errors import Problem, ScenarioError

# Not 9400: that is dcgm-exporter's default, and a GPU node often runs it already.
DEFAULT_PORT = 9464
DEFAULT_INTERVAL_S = 5.0


def check_options(port: int, interval: float, duration: float | None,
                  host: str = "127.0.0.1") -> None:
    """Raise a ``ScenarioError`` naming the option when a value cannot be used. The host is only
    checked for being given here (an empty one would bind every interface); whether it resolves
    to an address of this machine is found when the endpoint opens."""
    from workbench.monitor.exporter import host_problem   # here: it imports prometheus_client

    problems = []
    if (problem := host_problem(host, "--host")) is not None:
        problems.append(problem)
    if not 0 <= port <= 65535:
        problems.append(Problem("--port", port, "must be 0..65535 (0 = a free port)"))
    if not interval > 0:
        problems.append(Problem("--interval", interval, "must be > 0 seconds"))
    if duration is not None and not duration >= 0:
        problems.append(Problem("--duration", duration, "must be >= 0 seconds"))
    if problems:
        raise ScenarioError(problems)


def run_monitor(scenario, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                interval: float = DEFAULT_INTERVAL_S, duration: float | None = None,
                err: TextIO | None = None) -> int:
    """Serve ``scenario``'s plan and GPU telemetry until SIGINT/SIGTERM or ``duration`` seconds.

    Returns the exit status: 0 on a normal stop, 2 when the endpoint cannot be opened (one line
    on ``err``). Invalid options raise ``ScenarioError`` (the CLI prints it in one line)."""
    # imported here: the CLI parser reads this module's defaults, prometheus_client is for runs
    from workbench.estimate import estimate
    from workbench.monitor.exporter import Endpoint
    from workbench.monitor.metrics import MetricSet
    from workbench.monitor.nvml import open_telemetry

    err = err or sys.stderr
    check_options(port, interval, duration, host)
    metrics = MetricSet()
    metrics.set_plan(estimate(scenario))
    try:      # the endpoint before NVML: a port in use is then the only line printed
        endpoint = Endpoint(metrics, host, port, option="--port")
    except ScenarioError as exc:
        print(f"workbench: cannot serve metrics: {exc.one_line()}", file=err, flush=True)
        return 2
    telemetry = None
    stop = threading.Event()
    previous: dict = {}
    try:
        telemetry, reason = open_telemetry(warn=lambda line: print(line, file=err, flush=True))
        if telemetry is None:
            print(f"GPU telemetry off: {reason}", file=err, flush=True)   # once, not per sample
        # signal handlers can only be set from the main thread; elsewhere (a caller's worker
        # thread) the caller stops the monitor with ``duration``
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, lambda *_: stop.set())
        print(f"metrics: {endpoint.url}", file=err, flush=True)
        deadline = None if duration is None else time.monotonic() + duration
        while not stop.is_set():
            if telemetry is not None:
                telemetry.sample(metrics)
            wait = interval
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    break
            stop.wait(wait)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        endpoint.close()
        if telemetry is not None:
            telemetry.close()
    return 0

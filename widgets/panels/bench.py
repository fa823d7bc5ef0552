"""Collective benchmark: runs ``workbench bench`` in a child process (ranks are never forked
from the kernel) and draws busbw against message size; cancellable."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import ipywidgets as w
import plotly.graph_objects as go

from widgets.charts.plot import Plot
from widgets.panels.base import dropdown, error_html, run_controls


class BenchChart:
    """busbw (GB/s, nccl-tests' definition) against message size, one line per collective and
    world size: ``workbench.bench.plot.figure`` drawn into a ``Plot``."""

    def __init__(self) -> None:
        self.widget = Plot(layout=go.Layout(
            height=420, title="Collective benchmark",
            xaxis={"title": "message size (bytes)", "type": "log"},
            yaxis={"title": "busbw (GB/s, 1e9 bytes/s)"}),
            message="Run the benchmark to see bus bandwidth against message size for each "
                    "collective")

    def update(self, df) -> None:
        from workbench.bench.plot import figure

        fig = figure(df)
        with self.widget.batch_update():
            # one trace per line may differ from the last run: replace them all
            self.widget.data = []
            self.widget.add_traces(list(fig.data))
            self.widget.layout.title = fig.layout.title
            self.widget.show_message("")


class BenchPanel:
    """World size, quick or full sweep, Run / Cancel, and the chart."""

    def __init__(self) -> None:
        self.world = dropdown("Processes", [2, 4, 8])
        self.sweep = dropdown("Sweep", [("quick (seconds)", "quick"),
                                        ("1 KiB - 16 MiB", "medium")])
        self.run_button, self.cancel_button, self.progress = run_controls(
            "Run benchmark", "play", "Running")
        self.status = w.HTML()
        self.chart = BenchChart()
        self.frame = None
        self._proc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self.run_button.on_click(lambda _b: self.run())
        self.cancel_button.on_click(lambda _b: self.cancel())
        self.box = w.VBox([w.HTML("<b>Collective benchmark</b> (nccl-tests definitions)"),
                           self.world, self.sweep, w.HBox([self.run_button,
                                                           self.cancel_button]),
                           self.progress, self.status, self.chart.widget])

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "workbench", "bench", "--json",
               "--world-size", str(self.world.value)]
        if self.sweep.value == "quick":
            return cmd + ["--quick"]
        return cmd + ["--max-bytes", "16M", "--step-factor", "4"]

    def run(self, wait: bool = False) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self.run_button.disabled, self.cancel_button.disabled = True, False
        self.progress.bar_style = "info"
        self.progress.value = 0.5
        self.status.value = "running ..."
        self._proc = subprocess.Popen(self.command(), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True,
                                      start_new_session=True)

        def work() -> None:
            import pandas as pd

            try:
                out, err = self._proc.communicate()
                if self._proc.returncode != 0:
                    last = (err.strip().splitlines() or ["cancelled"])[-1]
                    self.status.value = error_html(f"benchmark stopped: {last}")
                    return
                self.frame = pd.DataFrame(json.loads(out))
                self.chart.update(self.frame)
                self.status.value = f"{len(self.frame)} rows"
            except Exception as exc:   # never a traceback on the page
                self.status.value = error_html(f"internal error ({type(exc).__name__}): {exc}")
            finally:
                self.progress.value = 1.0
                self.run_button.disabled, self.cancel_button.disabled = False, True

        self._thread = threading.Thread(target=work, daemon=True, name="bench")
        self._thread.start()
        if wait:
            self._thread.join()

    def cancel(self) -> None:
        """Stop the benchmark and every rank it started (its whole process session)."""
        if self._proc is not None and self._proc.poll() is None:
            for sig in (signal.SIGINT, signal.SIGKILL):
                try:
                    os.killpg(self._proc.pid, sig)
                except (ProcessLookupError, PermissionError):
                    break
                try:
                    self._proc.wait(2.0)
                    break
                except subprocess.TimeoutExpired:
                    continue

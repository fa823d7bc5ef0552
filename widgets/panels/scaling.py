"""Scaling curves on request: what to scale over, Draw / Cancel, progress and the chart. A curve
is a full planner search per point (``workbench.plan.scaling``), so it runs in a thread and says
when the scenario has changed since it was drawn."""
from __future__ import annotations

import threading

import ipywidgets as w

from widgets.charts.scaling import ScalingChart
from widgets.panels.base import error_html
from widgets.state import ScenarioState


class ScalingPanel:
    """``over`` (the GPU count or one degree), ``draw_button`` / ``cancel_button``,
    ``progress``, ``status`` and the ``chart``; ``box`` is what the page shows."""

    def __init__(self, state: ScenarioState) -> None:
        self.state = state
        self.over = w.Dropdown(options=["gpus", "dp", "tp", "pp", "cp", "ep"],
                               description="Scale over", layout=w.Layout(width="220px"))
        self.draw_button = w.Button(description="Draw scaling curve", icon="line-chart")
        self.draw_button.on_click(lambda _b: self.draw())
        self.cancel_button = w.Button(description="Cancel", icon="stop", disabled=True)
        self.progress = w.FloatProgress(value=0, min=0, max=1, layout=w.Layout(width="200px"))
        self.status = w.HTML()
        self.chart = ScalingChart()
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None
        self.cancel_button.on_click(lambda _b: self._cancel.set())
        self.box = w.VBox([w.HBox([self.over, self.draw_button, self.cancel_button,
                                   self.progress]), self.status, self.chart.widget])

    def mark_stale(self) -> None:
        """Say on the chart that the scenario changed since the curve was drawn."""
        drawn, s = self.chart.drawn_for, self.state
        if drawn is not None and s.valid and s.scenario != drawn:
            self.chart.stale(f"drawn for {drawn.model.name} on {drawn.hardware.world} x "
                             f"{drawn.hardware.gpu.name}; the scenario changed since")

    def draw(self, wait: bool = False) -> None:
        """Scaling curves search many layouts (a full planner search per GPU count): drawn on
        request, in a thread, with a progress bar and a Cancel button."""
        from workbench.plan.search import Cancelled

        scenario = self.state.scenario
        if scenario is None or (self._thread and self._thread.is_alive()):
            return
        chart = self.chart
        self._cancel.clear()
        self.draw_button.disabled, self.cancel_button.disabled = True, False

        def progress(fraction: float, what: str):
            self.progress.value = fraction
            return not self._cancel.is_set()

        def work() -> None:
            try:
                chart.update(scenario, over=self.over.value, progress=progress)
                self.status.value = ""
            except Cancelled:
                self.status.value = "cancelled"
            except Exception as exc:   # never a traceback on the page
                self.status.value = error_html(str(exc))
            finally:
                self.progress.value = 1.0
                self.draw_button.disabled, self.cancel_button.disabled = False, True

        self._thread = threading.Thread(target=work, daemon=True, name="scaling")
        self._thread.start()
        if wait:
            self._thread.join()

    def wait(self, timeout: float = 60.0) -> None:
        """Wait for the curve being drawn (tests, notebooks)."""
        if self._thread is not None:
            self._thread.join(timeout)

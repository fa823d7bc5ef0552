"""A plotly chart as a small widget of our own: the figure travels as plotly JSON in the
widget's state, and plotly.js once per page.

Why not plotly's ``FigureWidget``: it keeps only the figure it was built with in its synced
state and sends every later change as a one-off message. A Voila page connects after the
notebook ran, so it got the empty figures the app was built with: blank charts at first sight,
and after an edit only the properties that changed (the category ``x`` of a bar never does),
so every category axis fell back to numbers. It also ships plotly.js (~5 MB) in each widget's
state. Measured in Chromium: docs/platform.md and ``benchmarks/dashboard_first_chart.py``.

A chart keeps a ``plotly.graph_objects.Figure`` (``data``, ``layout``) that chart code edits
inside ``batch_update()``; at its end the whole figure is pushed (one state update), and the
page redraws it with ``Plotly.react`` and then sets the element's ``data-revision`` to the
pushed ``revision`` (what the browser test and benchmarks/dashboard_first_chart.py wait for).
``show_message`` replaces the chart by a sentence saying what to do (an empty state);
``on_click`` receives clicked point indexes.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anywidget
import plotly
import plotly.graph_objects as go
import plotly.io as pio
import traitlets

_HERE = Path(__file__).resolve().parent
_PLOTLY_JS = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
# A chart in a row takes the width the row leaves (never squeezed to nothing by a long line
# next to it), in a column only its own height; the empty-state sentence sits where the chart
# will be, centred and greyed.
_CSS = """
.wb-plot { flex: 0 0 auto; width: 100%; }
.widget-hbox > .wb-plot { flex: 1 1 0; min-width: 420px; }
.wb-plot-message { align-items: center; justify-content: center; color: #57606a;
  font-size: 15px; border: 1px dashed #d0d7de; border-radius: 6px; margin: 4px 0;
  text-align: center; padding: 0 24px; }
"""


class PlotlyLibrary(anywidget.AnyWidget):
    """plotly.js (the copy the plotly package ships), sent to the page once for all charts."""

    _esm = "export default {};"
    source = traitlets.Unicode().tag(sync=True)


_library: PlotlyLibrary | None = None
_library_lock = threading.Lock()


def plotly_library() -> PlotlyLibrary:
    """The kernel's one ``PlotlyLibrary`` (created on first use)."""
    global _library
    with _library_lock:
        if _library is None:
            _library = PlotlyLibrary(source=_PLOTLY_JS.read_text(encoding="utf-8"))
        return _library


class Plot(anywidget.AnyWidget):
    """One chart: ``data`` and ``layout`` as in plotly, ``message`` for an empty state."""

    _esm = _HERE / "plot.js"
    _css = _CSS
    library = anywidget.WidgetTrait().tag(sync=True)   # host.getModel on the page
    figure = traitlets.Unicode("{}").tag(sync=True)
    message = traitlets.Unicode("").tag(sync=True)
    revision = traitlets.Int(0).tag(sync=True)

    def __init__(self, data=None, layout=None, message: str = "") -> None:
        super().__init__(library=plotly_library())
        self._figure = go.Figure(data=data, layout=layout)
        self._lock = threading.RLock()   # updates come from the kernel and from worker threads
        self._depth = 0
        self._message = message
        self._note = ""
        self._click: list[Callable[[int, int], None]] = []
        self._render: list[Callable[[], None]] = []
        self.on_msg(self._on_page_message)
        self.push()

    @property
    def data(self) -> tuple:
        return self._figure.data

    @data.setter
    def data(self, traces) -> None:
        self._figure.data = traces

    @property
    def layout(self) -> go.Layout:
        return self._figure.layout

    def add_traces(self, traces) -> None:
        self._figure.add_traces(traces)

    def show_message(self, text: str) -> None:
        """Show ``text`` instead of the chart ("" shows the chart again); inside
        ``batch_update`` it goes to the page with the figure."""
        with self._lock:
            self._message = text
            if self._depth == 0:
                self.push()

    @property
    def note(self) -> str:
        return self._note

    def set_note(self, text: str, push: bool = True) -> None:
        """A line shown above the chart's own title ("" removes it): e.g. that the chart shows
        the last valid scenario while an edit is refused. The figure itself is not changed."""
        with self._lock:
            if text == self._note:
                return
            self._note = text
            if push and self._depth == 0:
                self.push()

    def figure_json(self) -> str:
        """The figure as the page gets it (with the note above the title)."""
        fig = self._figure
        if self._note:
            fig = go.Figure(fig)
            title = fig.layout.title.text or ""
            fig.layout.title.text = (f"<span style='color:#cf222e'>{self._note}</span>"
                                     + (f"<br>{title}" if title else ""))
            fig.layout.margin.t = (fig.layout.margin.t or 80) + 30
            # from the top down (plotly centres a title in the margin: a line more ran into
            # the plot)
            height = fig.layout.height or 450
            fig.layout.title.update(yref="container", y=1 - 24 / height, yanchor="top")
        return pio.to_json(fig, validate=False)

    @contextmanager
    def batch_update(self) -> Iterator[None]:
        """Edit ``data``/``layout`` inside; the page gets the result once, at the end."""
        with self._lock:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self.push()

    def push(self) -> None:
        """Send the figure and message to the page (one state update)."""
        with self._lock:
            text = self.figure_json()
            with self.hold_sync():
                self.figure = text
                self.message = self._message
                self.revision += 1

    def on_click(self, callback: Callable[[int, int], None]) -> None:
        """``callback(trace_index, point_index)`` for each point a person clicks."""
        self._click.append(callback)

    def on_render(self, callback: Callable[[], None]) -> None:
        """``callback()`` each time a page draws this chart for the first time (a page
        connected)."""
        self._render.append(callback)

    def _on_page_message(self, _widget, content: dict, _buffers) -> None:
        if content.get("event") == "render":
            for callback in self._render:
                callback()
        if content.get("event") == "click":
            for point in content.get("points", []):
                for callback in self._click:
                    callback(int(point["trace"]), int(point["index"]))

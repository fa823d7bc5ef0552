"""Per-GPU memory by component for every pipeline rank, against the GPU's capacity."""
from __future__ import annotations

import plotly.graph_objects as go

from widgets.charts.plot import Plot
from workbench.estimate import Estimate
from workbench.units import GiB as GIB, memory_text

COMPONENTS = (("params", "parameters"), ("grads", "gradients"), ("optimizer", "optimizer states"),
              ("activations", "activations"), ("buffers", "buffers"))
COLORS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#b279a2")
HOVER = "%{x}<br>%{fullData.name}: %{y:,.2f} GiB<extra></extra>"


class MemoryChart:
    """Stacked bars (GiB) per pipeline rank, a dashed capacity line, and a red marker over
    every rank that does not fit."""

    def __init__(self) -> None:
        self.widget = Plot(
            data=[go.Bar(name=label, marker_color=c, hovertemplate=HOVER)
                  for (_, label), c in zip(COMPONENTS, COLORS)]
            # the capacity is a dashed line across the plot (a layout shape: a line trace
            # through one category draws nothing) and, for the legend, a tick over each rank
            + [go.Scatter(name="capacity", mode="markers", hovertemplate=HOVER,
                          marker={"symbol": "line-ew-open", "size": 40, "color": "#333",
                                  "line": {"width": 2, "color": "#333"}}),
               go.Scatter(name="out of memory", mode="markers+text", text=[],
                          textposition="top center", hovertemplate=HOVER,
                          marker={"symbol": "x", "size": 14, "color": "#cf222e"})],
            layout=go.Layout(barmode="stack", height=340, margin={"t": 40, "b": 40},
                             title="Memory per GPU by pipeline rank",
                             xaxis={"title": "pipeline rank", "type": "category"},
                             yaxis={"title": "GiB (2^30 bytes)", "rangemode": "tozero"},
                             legend={"orientation": "h", "y": -0.25, "traceorder": "normal"}))

    def update(self, est: Estimate) -> None:
        stages = est.memory.per_stage
        ranks = [f"pp rank {g.rank}" for g in stages]
        cap = est.memory.capacity / GIB
        totals = [g.memory.total / GIB for g in stages]
        over = [(r, t) for r, t in zip(ranks, totals) if t > cap]
        with self.widget.batch_update():
            for trace, (key, _) in zip(self.widget.data, COMPONENTS):
                trace.x = ranks
                trace.y = [getattr(g.memory, key) / GIB for g in stages]
            line, oom = self.widget.data[-2], self.widget.data[-1]
            line.x, line.y = ranks, [cap] * len(ranks)
            oom.x = [r for r, _ in over]
            oom.y = [t for _, t in over]
            oom.text = ["out of memory"] * len(over)
            self.widget.layout.shapes = [dict(
                type="line", xref="paper", x0=0, x1=1, y0=cap, y1=cap,
                line={"dash": "dash", "color": "#333", "width": 1.5})]
            fits = "fits" if est.memory.fits else "does NOT fit"
            self.widget.layout.title = (f"Memory per GPU: {memory_text(est.memory.per_gpu.total)}"
                                        f" of {memory_text(est.memory.capacity)}, {fits}")

"""The planner's layouts that fit: step time against memory per GPU, the Pareto front (no other
layout is both faster and smaller) joined by a line, and the ranked top layouts numbered."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from widgets.charts.labels import layout_text
from widgets.charts.plot import Plot

EMPTY = ("Search layouts to see every layout that fits: step time against memory per GPU, "
         "with the fastest-for-its-memory front")
LABELLED = 5
# where the labels #1-#5 sit, in pixels from their points: fanned out so they never pile up
FAN = ((-40, -38), (40, -38), (-52, 8), (52, 8), (0, -62))
SPAN = 3.0   # the x axis shows layouts up to this many times the fastest step
MAX_POINTS = 5_000   # the fastest ones; a page with more points redraws slowly
HOVER = ("%{hovertext}<br>step %{x:.3g} s, %{y:,.1f} GiB per GPU, %{customdata:,.0f} "
         "tokens/s<extra></extra>")


class ParetoChart:
    """``update(result)`` draws a ``workbench.plan`` result; ``top`` rows are numbered."""

    def __init__(self, top: int = 15) -> None:
        self.top = top
        self.widget = Plot(
            data=[go.Scattergl(name="layouts that fit", mode="markers", hovertemplate=HOVER,
                               marker={"color": "#9ecae1", "size": 6}),
                  go.Scatter(name="Pareto front (fastest for its memory)",
                             mode="lines+markers", hovertemplate=HOVER,
                             line={"color": "#1a7f37", "shape": "hv"},
                             marker={"color": "#1a7f37", "size": 8}),
                  go.Scatter(name="top of the table (#1-#5 numbered)", mode="markers",
                             textposition="top center", hovertemplate=HOVER,
                             marker={"color": "#cf222e", "size": 9, "symbol": "circle-open",
                                     "line": {"width": 2}})],
            layout=go.Layout(height=380, margin={"t": 50, "b": 50}, title="Planner",
                             xaxis={"title": "step time (s)"},
                             yaxis={"title": "memory per GPU (GiB = 2^30 bytes)"},
                             legend={"orientation": "h", "y": -0.2}),
            message=EMPTY)

    def update(self, result) -> None:
        table = result.table
        shown = table.head(MAX_POINTS)
        front = table[table["pareto_memory"]].sort_values("step")
        ranked = table.head(self.top)
        with self.widget.batch_update():
            for trace, rows in zip(self.widget.data, (shown, front, ranked)):
                trace.x = rows["step"].to_numpy(dtype=float)
                trace.y = rows["memory_gib"].to_numpy(dtype=float)
                trace.customdata = rows["tokens_per_s"].to_numpy(dtype=float)
                trace.hovertext = np.array([layout_text(r) for _, r in rows.iterrows()])
            # the first few are numbered with arrows fanned out around their points: the top
            # layouts often lie on top of each other, and labels at the points piled up
            self.widget.data[2].text = None
            self.widget.layout.annotations = [
                go.layout.Annotation(x=float(row["step"]), y=float(row["memory_gib"]),
                                     text=f"#{int(row['rank'])}", showarrow=True, arrowhead=0,
                                     arrowwidth=1, arrowcolor="#cf222e", ax=ax, ay=ay,
                                     font={"color": "#cf222e", "size": 12},
                                     bgcolor="rgba(255,255,255,0.85)")
                for (_, row), (ax, ay) in zip(ranked.head(LABELLED).iterrows(), FAN)]
            more = (f" (the {MAX_POINTS:,} fastest drawn)" if len(table) > MAX_POINTS else "")
            # the useful cluster: a few very slow layouts (offload, small micro-batches) would
            # squeeze it into the left edge, so the axis stops at SPAN x the fastest step
            steps = shown["step"].to_numpy(dtype=float)
            cut = SPAN * steps.min() if len(steps) else 0.0
            off = int((steps > cut).sum())
            self.widget.layout.xaxis.range = ([0, cut * 1.03] if off else None)
            beyond = (f"<br>{off:,} slower than {SPAN:g}x the fastest are right of the axis "
                      "(zoom out to see them)" if off else "")
            self.widget.layout.title = (f"{len(table):,} layouts fit{more}; "
                                        f"{len(front)} on the Pareto front{beyond}")
            self.widget.show_message("" if len(table) else
                                     "No layout fits: see the reasons above the table")

"""The pipeline timeline of one step: a Gantt chart with one row per pipeline rank and a bar per
forward / backward / weight-gradient block, as ``Estimate.timeline()`` schedules them."""
from __future__ import annotations

import threading

import numpy as np
import plotly.graph_objects as go

from widgets.charts.plot import Plot

from workbench.estimate.result import Estimate

# Block kinds of ``estimate.time.timeline.Block``, drawn in this order (legend order too).
KINDS = {
    "F": ("forward", "#4C78A8"),
    "B": ("backward", "#F58518"),
    "I": ("backward, input gradient", "#E45756"),
    "W": ("backward, weight gradient", "#54A24B"),
}
MS = 1e3   # seconds -> milliseconds
SECONDS_FROM = 10.0   # a phase this long (s) is drawn in seconds, shorter ones in milliseconds


ROW_PX = 26   # height of one rank's row: room for a label of 8-12 px inside its bars
# A block is labelled when it spans at least this share of the drawn pipeline: 2.5 % of a plot
# area some 800 px wide is 20 px, room for a two-digit label with space around it.
LABEL_SHARE = 0.025


class TimelineChart:
    """Per-rank F/B/W blocks of the chosen pipeline schedule, x in milliseconds from the start of
    the step's pipeline phase. ``update`` redraws from an ``Estimate``; the chart only draws
    what ``Estimate.timeline()`` returns. After an update, ``blocks`` holds the drawn blocks."""

    def __init__(self, height: int = 320) -> None:
        self._lock = threading.Lock()   # updates may come from threads
        self._height = height
        self.blocks: list = []
        self.widget = Plot(
            data=[go.Bar(name=label, orientation="h", marker_color=color, x=[], y=[], base=[],
                         text=[], textposition="inside", insidetextanchor="middle",
                         textangle=0, meta=kind, showlegend=False,
                         hovertemplate=("%{fullData.name}<br>microbatch %{customdata[2]} (from "
                                        "0), chunk %{customdata[0]}<br>%{base:.3f} to "
                                        "%{customdata[1]:.3f} ms<extra></extra>"))
                  for kind, (label, color) in KINDS.items()],
            layout=go.Layout(
                barmode="overlay", bargap=0.25, height=height,
                margin=dict(l=70, r=190, t=70, b=60),
                uniformtext=dict(minsize=8, mode="hide"),   # no unreadable labels on thin bars
                xaxis=dict(title="time in the step's pipeline phase (ms)", zeroline=False),
                yaxis=dict(title="pipeline rank", tickmode="array", zeroline=False),
                # right of the plot: under it the legend sat on the axis title, above it it
                # runs into the two-line title
                legend=dict(orientation="v", x=1.02, xanchor="left", y=1, yanchor="top"),
                title=dict(text="pipeline timeline", font=dict(size=14)),
            ))

    def update(self, est: Estimate, microbatches: int | None = None) -> None:
        """Redraw from ``est.timeline(microbatches)``: ``microbatches`` caps how many are drawn
        (all when None). The title names the schedule and the bubble: the estimate's share of
        the step, and the idle share of the drawn pipeline (ranks x makespan)."""
        blocks = est.timeline(microbatches)
        par = est.scenario.parallel
        p = par.pp
        drawn = len({b.microbatch for b in blocks})
        makespan = max((b.end for b in blocks), default=0.0)
        busy = sum(b.end - b.start for b in blocks)
        idle = 1 - busy / (p * makespan) if makespan > 0 else 0.0
        t = est.time
        if p == 1:
            what = "no pipeline (pp = 1)"
        else:
            chunks = f", {par.chunks_per_rank} chunks per rank" if par.chunks_per_rank > 1 else ""
            what = f"{par.pp_schedule} schedule, pp = {p}{chunks}"
        of_m = (f"{drawn} of {est.scenario.microbatches} microbatches"
                if drawn < est.scenario.microbatches else f"{drawn} microbatches")
        # two lines: one would run past the chart's width for long schedules
        title = (f"{what}, {of_m}<br>bubble {t.bubble / t.step:.1%} of the step; "
                 f"idle {idle:.1%} of the drawn pipeline (bubble and unequal stages)")
        # numpy columns: plotly takes arrays without validating every element (4x faster)
        per_kind = {}
        for k in KINDS:
            bs = [b for b in blocks if b.kind == k]
            a = np.array([(b.rank, b.start, b.end, b.chunk, b.microbatch) for b in bs],
                         dtype=float).reshape(-1, 5)
            # a label only on a block wide enough to read it apart from its neighbours (the
            # hover names every block)
            wide = (a[:, 2] - a[:, 1]) >= LABEL_SHARE * makespan
            per_kind[k] = (a, [str(b.microbatch) if w else "" for b, w in zip(bs, wide)])
        # units for people: seconds for a long phase (no "70k ms"), milliseconds below
        scale, unit = (1.0, "s") if makespan >= SECONDS_FROM else (MS, "ms")
        with self._lock, self.widget.batch_update():
            self.widget.layout.xaxis.title.text = f"time in the step's pipeline phase ({unit})"
            for trace in self.widget.data:
                a, mbs = per_kind[trace.meta]
                trace.y = a[:, 0].astype(int)
                trace.base = a[:, 1] * scale
                trace.x = (a[:, 2] - a[:, 1]) * scale
                trace.text = mbs
                trace.customdata = np.stack([a[:, 3], a[:, 2] * scale, a[:, 4]], axis=1)
                trace.hovertemplate = trace.hovertemplate.replace(
                    " ms<extra>", f" {unit}<extra>").replace(" s<extra>", f" {unit}<extra>")
                trace.showlegend = bool(mbs)
            self.widget.layout.yaxis.tickvals = list(range(p))
            self.widget.layout.yaxis.ticktext = [f"rank {r}" for r in range(p)]
            self.widget.layout.yaxis.range = [p - 0.5, -0.5]    # rank 0 on top
            # a row per rank tall enough for its microbatch labels (many ranks: a taller chart)
            self.widget.layout.height = max(self._height, 165 + ROW_PX * p)
            self.widget.layout.title.text = title
            self.blocks = blocks

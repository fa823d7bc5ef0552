"""The device mesh as a grid of GPUs: one row of cells per node (nodes wrap into side-by-side
blocks on large clusters), coloured by pipeline stage; selecting a GPU — ``select(rank)`` or a
click in the browser — outlines the ranks sharing each of its TP, CP, DP, PP, EP and
expert-data-parallel groups (``workbench.scenario.mesh``)."""
from __future__ import annotations

import math
import threading

import numpy as np
import plotly.graph_objects as go

from widgets.charts.plot import Plot

from workbench.scenario.mesh import coords_of, groups_of, node_of, rank_coords
from workbench.scenario.types import Parallel, Scenario

# Group kind -> (legend label, outline colour, marker symbol, size relative to a cell). Sizes
# differ so a rank in two groups (e.g. DP and EP) shows both outlines.
STYLE = {
    "tp": ("TP group", "#D62728", "square-open", 1.30),
    "cp": ("CP group", "#9467BD", "diamond-open", 1.15),
    "dp": ("DP group", "#1F77B4", "circle-open", 1.00),
    "pp": ("PP group", "#2CA02C", "triangle-up-open", 0.85),
    "ep": ("EP group", "#FF7F0E", "hexagon-open", 0.70),
    "edp": ("expert-DP group", "#8C564B", "x-thin-open", 0.55),
}
STAGE_COLOURS = ("#C6DBEF", "#FDD0A2", "#C7E9C0", "#DADAEB", "#FCBBA1", "#D9D9D9",
                 "#F2F0A1", "#BFE6E3")
# STAGE_COLOURS as a stepped colour scale over the values 0..7 (cmin -0.5, cmax 7.5)
_STAGE_SCALE = [[(i + j) / len(STAGE_COLOURS), c] for i, c in enumerate(STAGE_COLOURS)
                for j in (0, 1)]
SHOW_NUMBERS = 256   # label cells with their rank up to this many GPUs


def grid_positions(world: int, gpus_per_node: int) -> tuple[list[int], list[int], int]:
    """Cell (x, y) of every rank, and the number of node blocks side by side: a node is a row
    of ``gpus_per_node`` cells; nodes wrap into roughly square blocks, one empty column apart."""
    nodes = -(-world // gpus_per_node)
    cols = max(1, round(math.sqrt(nodes / (gpus_per_node + 1))))
    xs, ys = [], []
    for r in range(world):
        n = node_of(r, gpus_per_node)
        xs.append((n % cols) * (gpus_per_node + 1) + r % gpus_per_node)
        ys.append(n // cols)
    return xs, ys, cols


class MeshChart:
    """A grid of the scenario's GPUs; ``select(rank)`` outlines that rank's process groups.

    After ``update``/``select``: ``selected`` is the rank, ``groups`` its ``groups_of`` dict.
    Trace 0 holds every GPU in rank order (clicks on it select); then one trace per group kind
    (``meta`` = the kind, ``customdata`` = member ranks), then the selected GPU."""

    def __init__(self, scenario: Scenario | None = None, height: int = 360) -> None:
        self._lock = threading.RLock()  # clicks and updates from threads share the figure
        self._height = height
        self.parallel: Parallel | None = None
        self.gpus_per_node = 1
        self.selected = 0
        self.groups: dict[str, list[int]] = {}
        self._xs: list[int] = []
        self._ys: list[int] = []
        traces = [go.Scatter(name="GPU (colour: pipeline stage)", mode="markers", x=[], y=[],
                             marker=dict(symbol="square", size=20, line=dict(width=0)),
                             hovertemplate="%{hovertext}<extra></extra>", showlegend=False)]
        for kind, (label, colour, symbol, _) in STYLE.items():
            traces.append(go.Scatter(
                name=label, meta=kind, mode="markers", x=[], y=[], hoverinfo="skip",
                marker=dict(symbol=symbol, color=colour, size=20,
                            line=dict(width=2.5, color=colour))))
        traces.append(go.Scatter(name="selected GPU", meta="selected", mode="markers", x=[],
                                 y=[], hoverinfo="skip",
                                 marker=dict(symbol="star", color="black", size=12)))
        self.widget = Plot(data=traces, layout=go.Layout(
            height=height, margin=dict(l=70, r=20, t=80, b=50), plot_bgcolor="white",
            xaxis=dict(title="GPU within its node", showgrid=False, zeroline=False),
            yaxis=dict(title="node", showgrid=False, zeroline=False),
            legend=dict(orientation="v", x=1.02, y=1),
            # left-aligned and in two lines: centred, it ran under the chart's toolbar
            title=dict(text="device mesh", font=dict(size=14), x=0.01, xanchor="left"),
            hovermode="closest", clickmode="event"))
        # hoverinfo="skip" keeps the outlines out of click picking: a click always lands on
        # trace 0, whose point index is the rank.
        self.widget.on_click(self._on_click)
        if scenario is not None:
            self.update(scenario)

    def _on_click(self, trace: int, index: int) -> None:
        if trace == 0:
            self.select(index)

    def update(self, scenario: Scenario) -> None:
        """Redraw the grid for ``scenario``'s layout and nodes; keeps the selected rank when it
        still exists (else rank 0) and outlines its groups."""
        par, gpn = scenario.parallel, scenario.hardware.gpus_per_node
        world = par.world
        coords = rank_coords(par)
        xs, ys, cols = grid_positions(world, gpn)
        rows = max(ys) + 1
        width = cols * (gpn + 1) - 1              # x positions, gaps included
        # About 640 px for the cells across; the figure grows with the rows (to 900 px).
        cell = max(6.0, min(40.0, 640 / (width + 1)))
        height = int(max(self._height, min(900, rows * cell + 130)))
        size = 0.8 * min(cell, (height - 130) / rows)
        numbers = world <= SHOW_NUMBERS
        hover = []
        for c, x, y in zip(coords, xs, ys):
            r = c["rank"]
            ep_index = (c["dp"] * par.cp + c["cp"]) // par.ep
            hover.append(f"rank {r}: node {node_of(r, gpn)}, GPU {r % gpn}<br>"
                         f"pp {c['pp']}, dp {c['dp']}, cp {c['cp']}, tp {c['tp']}"
                         + (f"<br>EP group {ep_index} of its dp x cp slice" if par.ep > 1
                            else ""))
        with self._lock, self.widget.batch_update():
            self.parallel, self.gpus_per_node = par, gpn
            self._xs, self._ys = xs, ys
            base = self.widget.data[0]
            # numpy arrays: plotly skips per-element validation (16,384 GPUs in ~0.1 s)
            base.x, base.y = np.asarray(xs), np.asarray(ys)
            base.hovertext = np.asarray(hover)
            base.customdata = np.arange(world)
            # the pipeline stage as a number on a stepped colour scale (not 16k colour strings)
            base.marker.color = np.array([c["pp"] % len(STAGE_COLOURS) for c in coords])
            base.marker.update(size=size, colorscale=_STAGE_SCALE, cmin=-0.5,
                               cmax=len(STAGE_COLOURS) - 0.5, showscale=False)
            base.mode = "markers+text" if numbers else "markers"
            base.text = np.arange(world).astype(str) if numbers else None
            base.textfont = dict(size=max(6, size * 0.4))
            for trace in self.widget.data[1:-1]:
                trace.marker.size = size * STYLE[trace.meta][3]
                # With ep = 1 the EP groups are single GPUs: start those two hidden.
                if trace.meta in ("ep", "edp"):
                    trace.visible = True if par.ep > 1 else "legendonly"
            self.widget.data[-1].marker.size = max(6, size * 0.5)
            lay = self.widget.layout
            lay.height = height
            lay.xaxis.range = [-1, width]
            lay.yaxis.range = [rows - 0.5, -0.5]     # node 0 on top
            if cols == 1:
                lay.xaxis.update(tickmode="array", tickvals=list(range(gpn)), showticklabels=True,
                                 ticktext=[str(g) for g in range(gpn)],
                                 title=f"GPU within its node (of {gpn})")
                lay.yaxis.update(tickmode="array", tickvals=list(range(rows)),
                                 ticktext=[f"node {n}" for n in range(rows)], title="node")
            else:
                lay.xaxis.update(
                    tickmode="auto", tickvals=None, ticktext=None, showticklabels=False,
                    title=f"GPU within its node: {cols} blocks of nodes side by side")
                lay.yaxis.update(tickmode="auto", tickvals=None, ticktext=None,
                                 title=f"node row ({cols} nodes per row)")
            self.select(self.selected if self.selected < world else 0)

    def select(self, rank: int) -> None:
        """Outline ``rank``'s groups (``groups_of``): one trace per kind, legend entries with
        the group sizes, the rank's coordinates in the title."""
        if self.parallel is None:
            raise RuntimeError("call update(scenario) before select")
        rank = int(rank)
        with self._lock:
            groups = groups_of(self.parallel, rank)
            par, gpn = self.parallel, self.gpus_per_node
            with self.widget.batch_update():
                for trace in self.widget.data[1:-1]:
                    members = groups[trace.meta]
                    trace.x = [self._xs[r] for r in members]
                    trace.y = [self._ys[r] for r in members]
                    trace.customdata = members
                    n = len(members)
                    trace.name = f"{STYLE[trace.meta][0]} ({n} GPU{'s' if n != 1 else ''})"
                star = self.widget.data[-1]
                star.x, star.y, star.customdata = [self._xs[rank]], [self._ys[rank]], [rank]
                c = coords_of(par, rank)
                self.widget.layout.title.text = (
                    f"rank {rank} (node {node_of(rank, gpn)}, GPU {rank % gpn}): pp {c['pp']}, "
                    f"dp {c['dp']}, cp {c['cp']}, tp {c['tp']}<br>layout pp {par.pp} x dp "
                    f"{par.dp} x cp {par.cp} x tp {par.tp}, ep {par.ep}")
            self.selected, self.groups = rank, groups


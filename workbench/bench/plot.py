"""busbw against message size: one line per collective and world size (plotly, no widgets)."""
from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go

from workbench.bench.definitions import COLLECTIVES, human_bytes

# One colour per collective, one dash per world size: a reader can follow either.
_COLOURS = dict(zip(COLLECTIVES, ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                  "#8c564b")))
_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot", "solid")


def figure(df, title: str | None = None) -> go.Figure:
    """A ``plotly.graph_objects.Figure`` of busbw (GB/s, 1e9 B/s) against the message size
    (bytes, nccl-tests' convention, log axis) from ``run_bench``'s DataFrame."""
    fig = go.Figure()
    worlds = sorted(df["world_size"].unique())
    for name in [c for c in COLLECTIVES if c in set(df["collective"])]:
        for i, world in enumerate(worlds):
            part = df[(df["collective"] == name) & (df["world_size"] == world)]
            if part.empty:
                continue
            part = part.sort_values("bytes")
            fig.add_trace(go.Scatter(
                x=part["bytes"], y=part["busbw_gb_per_s"], mode="lines+markers",
                name=f"{name}, {world} ranks", legendgroup=name,
                line={"color": _COLOURS.get(name), "dash": _DASHES[i % len(_DASHES)]},
                customdata=list(zip([human_bytes(b) for b in part["bytes"]],
                                    part["time_s"] * 1e6, part["algbw_gb_per_s"])),
                hovertemplate=(f"{name}, {world} ranks<br>%{{customdata[0]}} "
                               "(%{x} B)<br>time %{customdata[1]:.1f} µs<br>"
                               "algbw %{customdata[2]:.4f} GB/s<br>busbw %{y:.4f} GB/s"
                               "<extra></extra>")))
    ticks = sorted(df["bytes"].unique()) if len(df) else []
    backend = df.attrs.get("backend", "")
    fig.update_layout(
        title=title or ("Collective bus bandwidth ("
                        + (f"{backend}, " if backend else "") + "nccl-tests definitions)"),
        xaxis={"type": "log", "title": "message size (nccl-tests' S, binary units)",
               "tickvals": ticks, "ticktext": [human_bytes(b) for b in ticks]},
        yaxis={"title": "busbw (GB/s, 1 GB = 1e9 bytes)", "rangemode": "tozero"},
        legend={"title": "collective, world size"}, template="plotly_white")
    return fig


def write_html(df, path: str | Path, title: str | None = None) -> Path:
    """Write the figure to a self-contained HTML file (plotly.js inlined: opens offline)."""
    path = Path(path)
    figure(df, title).write_html(path, include_plotlyjs=True, full_html=True)
    return path

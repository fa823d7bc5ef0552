"""Scaling curves: tokens/s (top) and memory per GPU against the GPU capacity (bottom), against
the GPU count or one parallel degree, as ``workbench.plan.scaling.scaling_curve`` returns them."""
from __future__ import annotations

import textwrap
import threading
from typing import TYPE_CHECKING

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from widgets.charts.labels import layout_text
from widgets.charts.plot import Plot
from workbench.plan.search import Progress
from workbench.scenario.types import Scenario
from workbench.units import GiB

if TYPE_CHECKING:
    import pandas as pd

FIT, MEM, NO_FIT, HOST = "#4C78A8", "#72B7B2", "#E45756", "#F58518"
NOTE_LINES = 6   # dropped points listed under the plot (the rest counted)


EMPTY = ("Press \u201cDraw scaling curve\u201d to see tokens/s and memory per GPU "
         "against the GPU count or a parallel degree")


def _x_title(over: str, df: "pd.DataFrame") -> str:
    if over == "gpus":
        return "GPUs (best layout at each count; log scale)"
    if over == "dp":
        return "dp degree (GPUs = dp x tp x pp x cp; log scale)"
    if over == "ep":
        return "ep degree (EP drawn from dp x cp; GPUs unchanged; log scale)"
    gpus = int(df["gpus"].iloc[0]) if len(df) else 0
    return f"{over} degree (dp fills the {gpus} GPUs; log scale)"


def _note(text: str) -> str:
    """One line of the note under the plot, cut at a word to fit the chart's width."""
    return textwrap.shorten(text, 125, placeholder=" ...")


def _layout_text(row) -> str:
    text = f"{int(row['gpus'])} GPUs: " + layout_text(row)
    return text + (f"<br>{row['reason']}" if row["reason"] else "")


class ScalingChart:
    """Two stacked plots sharing the x axis. Top: tokens/s of the whole job (filled markers fit
    in memory, crosses do not: red above the GPU's capacity, orange diamonds within it but with
    offload beyond the node's host memory or drives). Bottom: worst-GPU memory in GiB (2^30
    bytes) and the GPU's capacity. Points the backend marks invalid are not drawn; ``dropped``
    lists them with the reason, and a note under the plot says why each drawn point does not
    fit. ``update`` asks the backend for the curve; ``draw`` draws one already computed. After
    either, ``data`` is the DataFrame drawn from and ``drawn_for`` the scenario (``stale`` marks
    the chart when the scenario changed since)."""

    def __init__(self, height: int = 480) -> None:
        self._lock = threading.Lock()
        self._height = height
        self.data = None
        self.dropped: list[tuple[int, str]] = []
        fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
        fig.add_trace(go.Scatter(name="tokens/s", mode="lines+markers", x=[], y=[],
                                 line=dict(color=FIT),
                                 hovertemplate="%{y:,.0f} tokens/s<br>%{hovertext}"
                                               "<extra></extra>"), row=1, col=1)
        fig.add_trace(go.Scatter(name="memory per GPU", mode="lines+markers", x=[], y=[],
                                 line=dict(color=MEM),
                                 hovertemplate="%{y:,.1f} GiB per GPU<br>%{hovertext}"
                                               "<extra></extra>"), row=2, col=1)
        fig.add_trace(go.Scatter(name="GPU capacity", mode="lines", x=[], y=[],
                                 line=dict(color="black", dash="dash"),
                                 hovertemplate="capacity %{y:,.1f} GiB<extra></extra>"),
                      row=2, col=1)
        # legend entries for the marker kinds (no points of their own)
        for name, symbol, color in (("above GPU capacity", "x", NO_FIT),
                                    ("offload beyond host memory", "diamond", HOST)):
            fig.add_trace(go.Scatter(name=name, mode="markers", x=[None], y=[None],
                                     marker=dict(symbol=symbol, color=color, size=9),
                                     hoverinfo="skip", visible=False), row=2, col=1)
        fig.update_layout(height=height, margin=dict(l=80, r=20, t=120, b=70),
                          legend=dict(orientation="h", y=1.02, yanchor="bottom", x=0),
                          # left-aligned: centred, a long title ran under the toolbar
                          title=dict(text="scaling", font=dict(size=14), x=0.01,
                                     xanchor="left"), hovermode="closest")
        fig.update_yaxes(title_text="tokens/s<br>(whole job)", rangemode="tozero", row=1, col=1)
        fig.update_yaxes(title_text="memory per GPU<br>(GiB = 2^30 bytes)", rangemode="tozero",
                         row=2, col=1)
        fig.update_xaxes(type="log", row=1, col=1)
        fig.update_xaxes(type="log", row=2, col=1)
        self.widget = Plot(fig, message=EMPTY)
        self.drawn_for: Scenario | None = None
        self._title = ""

    def stale(self, why: str) -> None:
        """Mark a drawn chart as out of date (the scenario changed since it was drawn)."""
        with self._lock:
            if self.data is not None:
                self.widget.layout.title.text = (f"OUT OF DATE ({why}): press \u201cDraw "
                                                 f"scaling curve\u201d again<br>{self._title}")

    def update(self, scenario: Scenario, over: str = "gpus", values: list[int] | None = None,
               progress: Progress | None = None) -> None:
        """Compute ``scaling_curve(scenario, over, values, progress=progress)`` (the backend;
        a ``gpus`` sweep takes seconds, so call it from a thread with a progress bar) and draw
        it."""
        from workbench.plan.scaling import scaling_curve

        self.draw(scaling_curve(scenario, over, values, progress=progress), over)
        self.drawn_for = scenario

    def draw(self, df: "pd.DataFrame", over: str) -> None:
        """Draw a ``scaling_curve`` result: its valid rows only, x = ``value``."""
        ok = df[df["valid"]]
        xs = ok["value"].astype(int).tolist()
        fits = ok["fits"].astype(bool).tolist()
        hover = [_layout_text(r) for _, r in ok.iterrows()]
        self.dropped = [(int(r["value"]), str(r["reason"])) for _, r in df[~df["valid"]].iterrows()]
        cap = float(df["capacity"].iloc[0]) / GiB if len(df) else 0.0
        # within the GPU's capacity but not fitting: the offload exceeds the host's memory
        host = [(not f) and m <= c for f, m, c in zip(fits, ok["memory_per_gpu"], ok["capacity"])]
        n_fit, n_host = sum(fits), sum(host)
        what = "GPU count" if over == "gpus" else f"{over} degree"
        title = (f"scaling with the {what}:<br>{n_fit} of {len(ok)} points fit in memory"
                 + (f";<br>{n_host} fit the GPUs only with offload beyond the host's memory"
                    if n_host else ""))
        short = [(int(v), str(r)) for v, r, h in zip(ok["value"], ok["reason"], host) if h]
        lines = [_note(f"{over} {v} does not fit: {why}") for v, why in short[:NOTE_LINES]]
        lines += [_note(f"{over} {v} not drawn: {why}") for v, why in self.dropped[:NOTE_LINES]]
        if len(short) + len(self.dropped) > len(lines):
            lines.append(f"and {len(short) + len(self.dropped) - len(lines)} more")
        note = "<br>".join(lines)
        with self._lock, self.widget.batch_update():
            tok, mem, capl, above, beyond = self.widget.data
            self.widget.show_message("" if xs else "No point of this curve is a valid layout: "
                                     + "; ".join(lines))
            tok.x, tok.y, tok.hovertext = xs, ok["tokens_per_s"].tolist(), hover
            symbols = ["circle" if f else "diamond" if h else "x" for f, h in zip(fits, host)]
            tok.marker = dict(symbol=symbols, size=9, color=[
                FIT if f else HOST if h else NO_FIT for f, h in zip(fits, host)])
            mem.x, mem.y, mem.hovertext = xs, (ok["memory_per_gpu"] / GiB).tolist(), hover
            mem.marker = dict(symbol=symbols, size=9, color=[
                MEM if f else HOST if h else NO_FIT for f, h in zip(fits, host)])
            above.visible = any(not f and not h for f, h in zip(fits, host))
            beyond.visible = n_host > 0
            capl.x = [min(xs), max(xs)] if xs else []
            capl.y = [cap, cap] if xs else []
            lay = self.widget.layout
            lay.xaxis2.title.text = _x_title(over, df)
            for ax in (lay.xaxis, lay.xaxis2):
                ax.update(tickmode="array", tickvals=xs, ticktext=[str(x) for x in xs])
            lay.title.text = self._title = title
            # the note sits under the x title, in a bottom margin grown to hold it
            lay.margin.b = 70 + 15 * len(lines)
            lay.height = self._height + 15 * len(lines)
            lay.annotations = ([dict(text=note, showarrow=False, xref="paper", yref="paper",
                                     x=0, y=0, yshift=-55, xanchor="left", yanchor="top",
                                     align="left", font=dict(size=11, color=NO_FIT))]
                               if note else [])
            self.data = df

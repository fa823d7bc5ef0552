"""Live trial charts: step time and loss per rank, memory per rank (measured next to the
prediction), communication bytes per parallel dimension; then the estimate-vs-measured table."""
from __future__ import annotations

import html
import threading

from plotly.subplots import make_subplots

from widgets.charts.plot import Plot
from workbench.trial.launcher import MAX_PROCESSES   # no torch import

KIB = 1024
STATE_KEYS = ("params", "grads", "optimizer", "activations")
EMPTY = ("Run a trial to see step time and loss per rank as the steps finish, then memory and "
         "communication measured next to the estimate")


class TrialCharts:
    """Fed with trial events (``on_event``); safe to call from the pump thread (one lock)."""

    MAX_RANKS = MAX_PROCESSES     # one step-time trace per possible rank

    def __init__(self) -> None:
        # every trace exists from the start and is only emptied and hidden between trials
        fig = make_subplots(rows=2, cols=2, subplot_titles=(
            "step time per rank (ms)", "loss", "memory per rank (KiB): measured | predicted",
            "communication per step, rank 0 (KiB)"))
        for r in range(self.MAX_RANKS):
            fig.add_scatter(x=[], y=[], mode="lines+markers", name=f"rank {r}", visible=False,
                            hovertemplate=f"rank {r}, step %{{x}}: %{{y:,.1f}} ms<extra></extra>",
                            row=1, col=1)
        fig.add_scatter(x=[], y=[], mode="lines+markers", name="loss", row=1, col=2,
                        hovertemplate="step %{x}: loss %{y:.4f}<extra></extra>")
        for what, col in (("memory", 1), ("comm", 2)):
            for k in ("measured", "predicted"):
                # each bar says its value (KiB) above it
                fig.add_bar(x=[], y=[], name=f"{what} {k}", row=2, col=col,
                            texttemplate="%{y:,.0f}", textposition="outside",
                            textfont={"size": 9}, textangle=-90, cliponaxis=False,
                            hovertemplate=f"%{{x}} {k}: %{{y:,.1f}} KiB<extra></extra>")
        fig.update_xaxes(title_text="step", dtick=1, row=1)   # steps are whole numbers
        fig.update_xaxes(type="category", row=2, tickangle=-35, automargin=True)
        fig.update_yaxes(title_text="KiB", row=2, automargin=True)
        fig.update_layout(height=620, margin={"t": 50, "b": 60}, barmode="group",
                          legend={"orientation": "h", "y": -0.12})
        self.widget = Plot(fig, message=EMPTY)
        self.table = ""          # HTML comparison, once the result is in
        self._lock = threading.Lock()
        self._rank_trace: dict[int, int] = {}
        self.events = 0

    def reset(self, world_size: int) -> None:
        with self._lock, self.widget.batch_update():
            self.widget.show_message(f"Waiting for the first step of {world_size} processes")
            for i, trace in enumerate(self.widget.data):
                trace.x, trace.y = [], []
                if i < self.MAX_RANKS:
                    trace.visible = i < world_size
            self._rank_trace = {r: r for r in range(min(world_size, self.MAX_RANKS))}
            self.table = ""
            self.events = 0

    def on_event(self, ev: dict) -> None:
        with self._lock, self.widget.batch_update():
            self.events += 1
            if ev["type"] == "step":
                self.widget.show_message("")
                i = self._rank_trace.get(ev["rank"])
                if i is None:
                    return
                tr = self.widget.data[i]
                tr.x, tr.y = (*tr.x, ev["step"]), (*tr.y, ev["time"] * 1e3)
                if ev.get("loss") is not None:
                    loss = self.widget.data[self.MAX_RANKS]
                    if ev["step"] not in loss.x:
                        loss.x, loss.y = (*loss.x, ev["step"]), (*loss.y, ev["loss"])
            elif ev["type"] == "result":
                self.widget.show_message("")
                self._show_result(ev["result"])
            elif ev["type"] == "end" and ev.get("error") and self.widget.message:
                self.widget.show_message("The trial stopped before its first step: "
                                         + str(ev["error"]))

    def _show_result(self, res: dict) -> None:
        n = self.MAX_RANKS
        ranks = res["ranks"]
        x = [f"r{r['rank']} {k}" for r in ranks for k in STATE_KEYS]
        measured = [(r["measured"].get(k) or 0) / KIB for r in ranks for k in STATE_KEYS]
        predicted = [(r["predicted"].get(k) or 0) / KIB for r in ranks for k in STATE_KEYS]
        comm = ranks[0]["comm"] if ranks else {"measured": {}, "predicted": {}}
        keys = sorted({(d, op) for side in ("measured", "predicted")
                       for d, ops in comm[side].items() for op in ops})
        cx = [f"{d} {op}" for d, op in keys]
        cm = [comm["measured"].get(d, {}).get(op, {}).get("bytes", 0) / KIB for d, op in keys]
        cpred = [comm["predicted"].get(d, {}).get(op, {}).get("bytes", 0) / KIB for d, op in keys]
        # a stopped trial's measurements are of the steps that ran: named partial
        partial = " (partial: the trial stopped)" if res.get("error") else ""
        names = (f"memory measured{partial}", "memory predicted", f"comm measured{partial}",
                 "comm predicted")
        for j, (xs, ys) in enumerate(((x, measured), (x, predicted), (cx, cm), (cx, cpred))):
            bar = self.widget.data[n + 1 + j]
            bar.x, bar.y, bar.name = xs, ys, names[j]
        self.table = comparison_html(res)


def comparison_html(res: dict) -> str:
    """Estimate against measurement per rank and component, with the relative error: the
    backend's comparison rows (``workbench.proof.compare``), as a table."""
    from workbench.proof.compare import compare_ranks
    from workbench.proof.render import cells

    err = res.get("error")

    def shown(row) -> list[str]:
        c = list(cells(row))
        # a stopped trial is not a full run: its figures are shown, not judged
        return c[:-2] + ["", "partial, not compared"] if err else c

    rows = ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in shown(r)) + "</tr>"
            for r in compare_ranks(res["ranks"])]
    head = (f"<div class='wb-error' style='color:#cf222e'>trial failed: {html.escape(err)}. "
            "Its measurements are partial (the steps that ran before it stopped) and are not "
            "compared with the estimate.</div>" if err else "")
    return (head + _slice_html(res) + "<table class='wb-compare'><tr><th>rank</th><th>what</th>"
            "<th>predicted</th><th>measured</th><th>error</th><th>check</th></tr>"
            + "".join(rows) + "</table>")


def _slice_html(res: dict) -> str:
    """A GPU slice's time and memory against the estimate of the same slice on the same GPU
    (``workbench.proof.slice_compare``), and what the trial does not cover; empty otherwise."""
    from workbench.proof.slice_compare import cells, from_dict

    if not res.get("comparison"):
        return ""
    where = html.escape(f"{res.get('device_name', res.get('device', ''))} "
                        f"({res.get('precision_ran', '')})")
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells(from_dict(d)))
                   + "</tr>" for d in res["comparison"])
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in res.get("notes", []))
    return (f"<div class='wb-slice'><b>On {where}: this slice against its estimate</b>"
            "<table class='wb-compare wb-slice-rows'><tr><th>what</th><th>estimated</th>"
            f"<th>measured</th><th>error</th></tr>{rows}</table>"
            + (f"<ul>{notes}</ul>" if notes else "") + "</div>")

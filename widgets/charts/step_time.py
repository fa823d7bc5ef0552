"""Where one training step's time goes: a waterfall of the estimator's step-time terms."""
from __future__ import annotations

from workbench.units import duration_text

import plotly.graph_objects as go

from widgets.charts.labels import band_words
from widgets.charts.plot import Plot
from workbench.estimate import Estimate

DIMS = ("dp", "tp", "pp", "cp", "ep")


def step_terms(est: Estimate) -> list[tuple[str, float]]:
    """(label, seconds) in the order the waterfall shows them; they add up to the step."""
    t = est.time
    terms = [("compute", t.compute), ("recompute", t.recompute), ("pipeline bubble", t.bubble)]
    terms += [(f"exposed {d.upper()} comm", t.comm_exposed.get(d, 0.0)) for d in DIMS]
    terms += [("optimizer", t.optimizer), ("offload", t.offload)]
    return terms


class StepTimeChart:
    """Waterfall (seconds): compute, recompute, bubble, exposed communication per dimension,
    optimizer and offload, ending at the step time; the title states tokens/s and MFU, and
    under it how far such estimates typically are from measured runs (the error band)."""

    def __init__(self) -> None:
        self.widget = Plot(
            data=[go.Waterfall(orientation="v", connector={"line": {"color": "#999"}},
                               hovertemplate="%{x}: %{y:.3g} s<extra></extra>",
                               cliponaxis=False)],     # a small step's label above the plot
            # room under the axis for the slanted labels ("exposed DP comm" was cut)
            layout=go.Layout(height=380, margin={"t": 70, "b": 110, "l": 90},
                             title="Step time",
                             xaxis={"type": "category", "tickangle": -30, "automargin": True},
                             yaxis={"title": "seconds per step"},
                             showlegend=False))

    def update(self, est: Estimate) -> None:
        terms = step_terms(est)
        other = est.time.step - sum(v for _, v in terms)   # rounding / not attributed
        labels = [k for k, _ in terms] + ["step"]
        values = [v for _, v in terms] + [est.time.step]
        with self.widget.batch_update():
            wf = self.widget.data[0]
            wf.x = labels
            wf.y = values
            wf.measure = ["relative"] * len(terms) + ["total"]
            wf.text = [duration_text(v) for v in values]
            r = est.run
            self.widget.layout.title = (f"Step {duration_text(est.time.step)} · {r.tokens_per_s:,.0f} "
                                        f"tokens/s · MFU {r.mfu:.0%}"
                                        + (f" · {other:+.2g} s unattributed"
                                           if abs(other) > 1e-6 * est.time.step else "")
                                        + f"<br><sub>{band_words(est)}</sub>")

"""Per-GPU memory by component for every pipeline rank, against the GPU's capacity: the
stacked bars are what is alive at the peak allocated (``total``, the largest phase of the step:
``GPUMemory.alive_at_peak``; plus, hatched on top of the optimizer states,
bitsandbytes' paged optimizer states, which live outside the allocator), the weights split into
frozen and trainable for LoRA/QLoRA (``params_frozen``), a marker over each bar the allocator's peak
reserved and one the device's figure (reserved + CUDA context + NCCL + workspaces: what
nvidia-smi shows, and what the fit is judged on)."""
from __future__ import annotations

import plotly.graph_objects as go

from widgets.charts.plot import Plot
from workbench.estimate import Estimate
from workbench.units import GiB as GIB, memory_text

# the stacked bars, bottom to top: (label, colour, the bytes of one GPUMemory). The weights are
# one bar ("parameters") unless part of them is frozen (LoRA/QLoRA: ``params_frozen``), then
# two ("weights (frozen)", "weights (trainable)"); "optimizer (paged)" (bitsandbytes' paged
# optimizers: device memory outside the caching allocator) only where the estimate has some.
# A bar with nothing to draw gets no data, so the legend names only what is drawn.
COMPONENTS = (
    ("parameters", "#4c78a8", lambda g, split: 0.0 if split else g.alive_at_peak("params")),
    ("weights (frozen)", "#9ecae9", lambda g, split: g.params_frozen),
    ("weights (trainable)", "#4c78a8", lambda g, split: g.params_trainable if split else 0.0),
    ("gradients", "#f58518", lambda g, split: g.alive_at_peak("grads")),
    ("optimizer states", "#54a24b", lambda g, split: g.alive_at_peak("optimizer")),
    ("optimizer (paged)", "#a1d99b", lambda g, split: g.paged),
    ("activations", "#e45756", lambda g, split: g.alive_at_peak("activations")),
    ("buffers", "#b279a2", lambda g, split: g.alive_at_peak("buffers")),
)


def frozen_split(est: Estimate) -> bool:
    """Whether the weights are drawn as frozen and trainable parts (some GPU holds frozen
    weights: the estimate's ``params_frozen``)."""
    return any(g.memory.params_frozen > 0 for g in est.memory.per_stage)


# what the hover adds to a bar's figure
HOVER_NOTE = {"weights (frozen)": " (frozen: no gradients, no optimizer states)",
              "weights (trainable)": " (trained: with gradients and optimizer states)",
              "optimizer (paged)": " (outside PyTorch's allocator: in the device figure, "
                                   "not in allocated or reserved)"}
HOVER = "%{x}<br>%{fullData.name}: %{y:,.2f} GiB<extra></extra>"
# which figure a monitoring tool reports (the chart says it under the title)
TOOLS = ("nvidia-smi / DCGM report the device figure;<br>torch.cuda.max_memory_allocated the "
         "bars' total; torch.cuda.max_memory_reserved the reserved one")
# the moment of the step the bars show (``estimate.memory.peak.PHASES``), in words
PHASE_WORDS = {"forward": "the end of the forward", "loss": "the loss's backward",
               "backward": "the backward", "optimizer": "the optimizer step"}


class MemoryChart:
    """Stacked bars (GiB, peak allocated) per pipeline rank, markers for the reserved and the
    device figure, a dashed capacity line, and a red marker over every rank that does not fit
    (its device figure above the capacity)."""

    def __init__(self) -> None:
        self.widget = Plot(
            data=[go.Bar(name=label, marker_color=c,
                         hovertemplate=HOVER.replace("<extra>", HOVER_NOTE.get(label, "")
                                                     + "<extra>"),
                         # paged states sit outside the allocator: hatched
                         marker_pattern_shape="/" if label == "optimizer (paged)" else "")
                  for label, c, _ in COMPONENTS]
            # reserved: a bar-wide tick over each rank; device: a diamond (the fit's figure)
            + [go.Scatter(name="reserved (allocator)", mode="markers", hovertemplate=HOVER,
                          marker={"symbol": "line-ew-open", "size": 36, "color": "#6e40c9",
                                  "line": {"width": 3, "color": "#6e40c9"}}),
               go.Scatter(name="device (nvidia-smi)", mode="markers", hovertemplate=HOVER,
                          marker={"symbol": "diamond", "size": 11, "color": "#0a3069",
                                  "line": {"width": 1, "color": "white"}}),
               # the capacity is a dashed line across the plot (a layout shape: a line trace
               # through one category draws nothing) and, for the legend, a tick over each rank
               go.Scatter(name="capacity", mode="markers", hovertemplate=HOVER,
                          marker={"symbol": "line-ew-open", "size": 40, "color": "#333",
                                  "line": {"width": 2, "color": "#333"}}),
               # just above the device figure (not over its diamond); the hover says it
               go.Scatter(name="out of memory", mode="markers+text", text=[],
                          textposition="top center",
                          hovertemplate="%{x}<br>out of memory: %{customdata:,.2f} GiB on the "
                                        "device<extra></extra>",
                          marker={"symbol": "x", "size": 14, "color": "#cf222e"})],
            layout=go.Layout(barmode="stack", height=460, margin={"t": 108, "b": 110},
                             title="Memory per GPU by pipeline rank",
                             xaxis={"title": "pipeline rank", "type": "category"},
                             yaxis={"title": "GiB (2^30 bytes)", "rangemode": "tozero"},
                             # the legend at the chart's foot (below the axis title however the
                             # margins settle)
                             legend={"orientation": "h", "yref": "container", "y": 0.01,
                                     "yanchor": "bottom",
                                     "traceorder": "normal"}))

    def update(self, est: Estimate) -> None:
        stages = est.memory.per_stage
        ranks = [f"pp rank {g.rank}" for g in stages]
        cap = est.memory.capacity / GIB
        device = [g.memory.device / GIB for g in stages]
        over = [(r, d) for r, d in zip(ranks, device) if d > cap]
        with self.widget.batch_update():
            split = frozen_split(est)
            for trace, (label, _, part) in zip(self.widget.data, COMPONENTS):
                y = [part(g.memory, split) / GIB for g in stages]
                shown = any(v > 0 for v in y) or (label == "parameters" and not split)
                trace.x, trace.y = (ranks, y) if shown else ([], [])
                trace.showlegend = shown
            reserved, dev, line, oom = self.widget.data[-4:]
            reserved.x, reserved.y = ranks, [g.memory.reserved / GIB for g in stages]
            dev.x, dev.y = ranks, device
            line.x, line.y = ranks, [cap] * len(ranks)
            lift = 0.09 * max(device + [cap])
            oom.x = [r for r, _ in over]
            oom.y = [d + lift for _, d in over]
            oom.customdata = [d for _, d in over]
            # room above the tallest mark for the "out of memory" label (under the subtitle)
            self.widget.layout.yaxis.range = [0, (1.22 if over else 1.08) * max(device + [cap])]
            oom.text = ["out of memory"] * len(over)
            self.widget.layout.shapes = [dict(
                type="line", xref="paper", x0=0, x1=1, y0=cap, y1=cap,
                line={"dash": "dash", "color": "#333", "width": 1.5})]
            m = est.memory
            fits = m.fit_words
            self.widget.layout.title = (
                f"Memory per GPU: {memory_text(m.per_gpu.device)} on the device of "
                f"{memory_text(m.capacity)}, {fits}<br><sub>{memory_text(m.per_gpu.total)} "
                f"allocated"
                + (f" at its peak, {PHASE_WORDS[m.per_gpu.peak_phase]} (the bars: what lives "
                   "then)" if m.per_gpu.peak_phase else "")
                + f", {memory_text(m.per_gpu.reserved)} reserved"
                + (f", {memory_text(m.per_gpu.paged)} paged (hatched)" if m.per_gpu.paged > 0
                   else "") + f"; {TOOLS}</sub>")

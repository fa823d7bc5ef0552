"""A GPU slice trial against the estimate of the same slice on the same GPU, per component.

Rows (``SliceRow``: estimated, measured, relative error), all per step of the slowest rank
unless named otherwise:
- ``block forward`` / ``block backward``: one transformer block, one microbatch (CUDA events
  around every block, ``trial.measure.BlockTimer``; mean over blocks and steady steps) against
  the estimator's block cost (``estimate.time.block_costs.block_costs``, averaged over the slice's
  dense and MoE blocks);
- ``outside the blocks``: forward + backward less the blocks: embedding, final norm, head, loss
  and the communication left exposed;
- ``forward + backward``, ``optimizer``, ``step``: the step's parts (CUDA events);
- ``allocated``, ``reserved``, ``device``: the three memory figures (torch.cuda.max_memory_
  allocated / max_memory_reserved over the steady steps, NVML's used memory) against
  ``memory.per_gpu.total / reserved / device``.
The measurement is the median over steady steps: not the first (warm-up, allocator growth, lazy
optimizer state) and not the one that carried the saved-tensor hooks.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from workbench.trial.result import TrialResult, memory_steps, steady


@dataclass(frozen=True)
class SliceRow:
    """One estimated figure of the slice and its measurement."""

    component: str
    estimated: float
    measured: float | None
    unit: str              # "s" or "B"

    @property
    def error(self) -> float | None:
        """(measured - estimated) / estimated."""
        if self.measured is None or self.estimated == 0:
            return None
        return (self.measured - self.estimated) / self.estimated

    def as_dict(self) -> dict:
        """The row as the trial JSON's ``comparison`` holds it."""
        return {"component": self.component, "estimated": self.estimated,
                "measured": self.measured, "unit": self.unit, "error": self.error}


def _median_of_slowest(steps: list[dict], key: str) -> float | None:
    """Per step the largest value over the ranks, then the median over steps."""
    by_step: dict[int, float] = {}
    for e in steps:
        if e.get(key) is not None:
            by_step[e["step"]] = max(by_step.get(e["step"], 0.0), float(e[key]))
    return statistics.median(by_step.values()) if by_step else None


def _peak(steps: list[dict], key: str) -> float | None:
    values = [float(e[key]) for e in steps if e.get(key) is not None]
    return max(values) if values else None


def slice_rows(result: TrialResult) -> list[SliceRow]:
    """Every row of the comparison (module docstring)."""
    from workbench.estimate.model.params import is_moe_layer
    from workbench.estimate.single import estimate_memory, estimate_step_time
    from workbench.estimate.time.block_costs import block_costs
    from workbench.trial.prediction import as_run

    if result.error is not None:
        raise ValueError(f"the trial failed: {result.error}")
    run = as_run(result.scenario)
    m, mbs = run.model, run.microbatches
    st = estimate_step_time(run)
    mem = estimate_memory(run).per_gpu
    costs = block_costs(run)
    per_stage = max(1, m.layers // (run.parallel.pp * run.parallel.chunks_per_rank))
    kinds = ["moe" if is_moe_layer(m, i) else "dense" for i in range(m.layers)]
    block_f = statistics.fmean(costs[k].fwd for k in kinds)
    block_b = statistics.fmean(costs[k].bwd + costs[k].recompute for k in kinds)
    steps = steady(result.steps)
    fb_est = st.step - st.optimizer - st.offload
    fb = _median_of_slowest(steps, "forward_backward_s")
    bf = _median_of_slowest(steps, "block_forward_s")
    bb = _median_of_slowest(steps, "block_backward_s")
    blocks_in_step = per_stage * mbs * run.parallel.chunks_per_rank
    outside_est = fb_est - blocks_in_step * (block_f + block_b)
    outside = (fb - blocks_in_step * (bf + bb)) if None not in (fb, bf, bb) else None
    rows = [SliceRow("block forward (one block, one microbatch)", block_f, bf, "s"),
            SliceRow("block backward (one block, one microbatch)", block_b, bb, "s"),
            SliceRow("outside the blocks (embedding, head, loss, exposed comm)", outside_est,
                     outside, "s"),
            SliceRow("forward + backward", fb_est, fb, "s"),
            SliceRow("optimizer", st.optimizer, _median_of_slowest(steps, "optimizer_s"), "s"),
            SliceRow("step", st.step, _median_of_slowest(steps, "time"), "s")]
    for name, key, event in (("allocated", "total", "allocated"),
                             ("reserved", "reserved", "reserved"),
                             ("device (nvidia-smi)", "device", "device_memory")):
        rows.append(SliceRow(f"memory {name}", getattr(mem, key),
                             _peak(memory_steps(result.steps), event), "B"))
    return rows


def cells(r: SliceRow) -> tuple[str, str, str, str]:
    """One row as text: component, estimated, measured, error (times in ms, memory in GiB)."""
    scale, unit = (1e3, "ms") if r.unit == "s" else (1 / 2**30, "GiB")
    est = f"{r.estimated * scale:,.2f} {unit}"
    got = "-" if r.measured is None else f"{r.measured * scale:,.2f} {unit}"
    err = "-" if r.error is None else f"{r.error:+.1%}"
    return r.component, est, got, err


def from_dict(d: dict) -> SliceRow:
    """A row of the trial JSON's ``comparison``."""
    return SliceRow(d["component"], d["estimated"], d["measured"], d["unit"])


def render_rows(rows: list[SliceRow]) -> str:
    """The comparison as a text table (ms and GiB)."""
    lines = [f"{'component':58} {'estimated':>11} {'measured':>11} {'error':>8}"]
    for r in rows:
        name, est, got, err = cells(r)
        lines.append(f"{name:58} {est:>11} {got:>11} {err:>8}")
    return "\n".join(lines)

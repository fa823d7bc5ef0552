"""The cost model: memory, step time and traffic of every pipeline rank of every layout of a
``LayoutGrid``, in numpy. One composition serves the single estimate (a grid of one row, every
rank), the planner, the scaling curves and the dashboard.

The costs of a dense layer, an MoE layer, the head and the embedding depend only on (tp, cp, ep,
micro-batch): the block table (``block_table``; ``cache`` keeps it between calls on one
scenario). Everything that depends on the rest is computed per (layout, pipeline rank) row
(``rows.Rows``) by two passes: ``memory_pass`` (model states, activations, buffers, device
bytes; whether a layout fits) and ``time_pass`` (the step), which reads the memory pass's
parameter counts. ``evaluate`` runs both; the planner runs the memory pass over every layout
and the time pass only where the memory can fit (``plan.pruning.PassRows``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from workbench.engines import engine_of
from workbench.estimate.cost_model.block_table import block_entries
from workbench.estimate.cost_model.memory_pass import layout_memory, memory
from workbench.estimate.cost_model.rows import Rows
from workbench.estimate.cost_model.time_pass import Volume, per_step, step_floor, times
from workbench.estimate.time import kernels as eff
from workbench.scenario.layouts import LayoutGrid
from workbench.scenario.types import Scenario


@dataclass
class Evaluation:
    """What the cost model says. ``layout``: one entry per layout. ``rank``: one entry per
    evaluated (layout, pipeline rank) row, sorted by layout and rank: ``row_layout`` and
    ``rank_index`` say which; ``buffers`` the named buffers and ``volume`` the traffic per row
    (when asked for, or needed)."""

    layout: dict[str, np.ndarray]
    rank: dict[str, np.ndarray]
    row_layout: np.ndarray
    rank_index: np.ndarray
    buffers: dict[str, np.ndarray] = field(default_factory=dict)
    volume: Volume | None = None
    pytorch_eager: bool = False   # the activations counted are those eager PyTorch saves


def eager_activations(base: Scenario, pytorch_eager: bool = False) -> bool:
    """Whether the activations counted are those eager PyTorch saves: asked for (the trial
    model's), or an engine whose model runs eager modules unless ``training.compile`` fuses
    them."""
    eng = engine_of(base.training)
    return pytorch_eager or (eng.eager_activations and not base.training.compile)


def bound_rows(base: Scenario, rows: Rows, cache: dict | None, pytorch_eager: bool) -> Rows:
    """``rows`` with ``base``'s block data attached (the rows' layouts' keys)."""
    return rows.bind(*block_entries(base, rows.layouts, {} if cache is None else cache,
                                    pytorch_eager))


def evaluate(base: Scenario, g: LayoutGrid, *, every_rank: bool = False,
             cache: dict | None = None, volume: bool = False,
             pytorch_eager: bool = False, detail: bool = True) -> Evaluation:
    """Evaluate every layout of ``g`` (valid for ``base``'s model, hardware and training by the
    rule table) on the pipeline ranks ``pipeline_ranks.rank_rows`` picks (``every_rank``: all).
    ``volume``: also the traffic per rank (always computed where no communication overlaps,
    as on a calibrated CPU machine). ``cache`` keeps block costs per (tp, cp, ep, micro-batch,
    sequence parallelism, recompute) between calls on the same model, hardware and training.
    ``pytorch_eager``: count the activations eager PyTorch saves (the trial model's), as an
    engine whose model runs eager modules does unless ``training.compile`` fuses them.
    ``detail``: the report's breakdowns too (what is alive at the peak, the worst rank);
    a search reads the totals."""
    pytorch_eager = eager_activations(base, pytorch_eager)
    rows = bound_rows(base, Rows(base.model, base.training.global_batch, g, every_rank), cache,
                      pytorch_eager)
    mem, buffers = memory(base, rows, detail)
    t, layout, serial, vol = _time_pass(base, rows, mem, volume)
    rank = {"layers": rows.layers, "dense_layers": rows.dense, "has_embedding": rows.has_emb,
            "has_head": rows.has_head, **{k: v for k, v in mem.items() if k != "_finetune"},
            **{k: v for k, v in t.items() if not k.startswith("_") and k != "p2p_bytes"},
            **{f"serial_{dim}": v for dim, v in serial.items()}}
    return Evaluation(layout={**layout_memory(base, rows, mem, detail), **layout}, rank=rank,
                      row_layout=rows.layout_of, rank_index=rows.rank, buffers=buffers,
                      volume=vol, pytorch_eager=pytorch_eager)


def layout_step_floor(base: Scenario, rows: Rows) -> np.ndarray:
    """A lower bound of the step of each layout of ``rows`` (bound to ``base``'s block data):
    ``time_pass.step_floor``, which reads no memory figure."""
    hw = base.hardware
    return step_floor(base, rows, eff.on_hardware(hw), bool(eff.overlap(hw)))


def time_layouts(base: Scenario, rows: Rows, mem: dict) -> dict:
    """The time pass's layout figures (step, tokens_per_s, mfu, bubble, ...) of ``rows``
    (bound to ``base``'s block data) from what it reads of the memory pass
    (``memory_pass.time_inputs``): the planner's call for the rows it times."""
    return _time_pass(base, rows, mem, False)[1]


def _time_pass(base: Scenario, rows: Rows, mem: dict, volume: bool) -> tuple:
    """The time pass over ``rows``: (per-row times, layout figures, serial seconds per
    dimension, the traffic when asked for or needed)."""
    gpu = eff.on_hardware(base.hardware)
    overlaps = bool(eff.overlap(base.hardware))
    vol = Volume(rows.n) if volume or not overlaps else None
    t = times(base, rows, gpu, mem, vol)
    layout, serial = per_step(base, rows.layouts, rows, t, vol, overlaps)
    return t, layout, serial, vol


def evaluate_layouts(base: Scenario, g: LayoutGrid, cache: dict | None = None
                     ) -> dict[str, np.ndarray]:
    """The layout figures of ``evaluate`` (step, bubble, memory_per_gpu, fits, host_fits,
    tokens_per_s, mfu), one entry per layout: the planner's and the scaling curves' call
    (no breakdowns: they read the totals)."""
    return evaluate(base, g, cache=cache, detail=False).layout

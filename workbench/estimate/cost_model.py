"""The cost model: memory, step time and traffic of every pipeline rank of every layout of a
``LayoutGrid``, in numpy. One composition serves the single estimate (a grid of one row, every
rank), the planner, the scaling curves and the dashboard.

The costs of a dense layer, an MoE layer, the head and the embedding depend only on (tp, cp, ep,
micro-batch): the block costs come from ``block_costs.block_cost_arrays``, for every combination
a call has not met yet at once, and one layer's activations and parameters from ``activations``
and ``params`` per combination (the block table here; ``cache`` keeps it between calls on one
scenario). Everything that depends on the rest is computed per (layout, pipeline rank) row
(``grid_rows.Rows``) by two passes: ``memory_pass`` (model states, activations, buffers, device
bytes; whether a layout fits) and ``time_pass`` (the step), which reads the memory pass's
parameter counts. ``evaluate`` runs both; the planner runs the memory pass over every layout
and the time pass only where the memory can fit (``plan.pruning.PassRows``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from workbench.estimate import activations as act
from workbench.estimate import eager_ops
from workbench.estimate import efficiency as eff
from workbench.estimate import finetune as ft
from workbench.engines import engine_of
from workbench.estimate.grid_rows import Rows
from workbench.estimate.memory_pass import layout_memory, memory
from workbench.estimate.params import (
    _norm, embedding_params, head_params, is_moe_layer, layer_params,
)
from workbench.estimate.block_costs import block_cost_arrays
from workbench.estimate.time_pass import Volume, per_step, step_floor, times
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


def _block_data(base: Scenario, shapes: list[tuple], sp: bool, pytorch_eager: bool
                ) -> tuple[dict, list[dict]]:
    """Everything that depends only on (tp, cp, ep, micro-batch), for each of ``shapes``: the
    block costs of all of them at once (``block_cost_arrays``) and, per shape, one layer's saved
    activations and parameters, the embedding's and the head's. Returns ({(block, datum):
    array over the shapes}, one entry per shape: its activation shape "x" and each block's
    "vol" {(dim, collective): (bytes x count, count)} per microbatch, the collectives that
    run)."""
    m = base.model
    tp, cp, ep, mb = (np.array([sh[i] for sh in shapes], dtype=np.int64) for i in range(4))
    s = base if base.parallel.sequence_parallel == sp else dataclasses.replace(
        base, parallel=dataclasses.replace(base.parallel, sequence_parallel=sp))
    cols: dict = {}
    entries: list[dict] = [{} for _ in shapes]
    for kind, c in block_cost_arrays(s, tp, cp, ep, mb).items():
        cols.update({(kind, "fwd"): c.fwd, (kind, "bwd"): c.bwd, (kind, "wgrad"): c.wgrad,
                     (kind, "rc"): c.recompute,
                     **{(kind, f"comm_{dim}"): secs for dim, secs in c.comm.items()}})
        vol: dict = {}        # per microbatch: sum of bytes x count, count
        for dim, coll, nbytes, count in c.volume:
            b, n = vol.get((dim, coll), (0.0, 0.0))
            vol[dim, coll] = (b + nbytes * count, n + count)
        per: list[dict] = [{} for _ in shapes]     # each shape's: the collectives that run
        for key, (b, n) in vol.items():
            for one, bi, ni in zip(per, b.tolist(), n.tolist()):
                if ni > 0:
                    one[key] = (bi, ni)
        for entry, one in zip(entries, per):
            entry[kind] = {"vol": one}
    tr = base.training
    # what the activations take from the shape (s, b, t, sp) set on the scenario's own
    # (``activation_shape``; tests/test_block_arrays.py checks it against a call per shape)
    x0 = act.activation_shape(tr, s.parallel, pytorch_eager)
    params: dict = {}     # (tp, ep) -> (sequence parallel, ``_param_data``): cp, micro-batch free
    rows = []
    for i, (t, c, e, b) in enumerate(shapes):
        got = params.get((t, e))
        if got is None:
            par = dataclasses.replace(s.parallel, tp=t, ep=e, dp=max(e, 1), pp=1,
                                      virtual_stages=1, shard_group=None)
            got = params[t, e] = (par.sp, _param_data(
                base, par, None if m.moe is None else m.moe.experts // e))
        x = act.with_fields(x0, s=tr.seq_len // c, b=b, t=t, sp=got[0])
        entries[i]["x"] = x
        rows.append({**_shape_data(m, x), **got[1]})
    if rows:      # one conversion for every datum (the rows' keys come in one order)
        cols.update(zip(rows[0], np.array([list(r.values()) for r in rows],
                                          dtype=float).T.copy()))
    return cols, entries


def _shape_data(m, x: act.ActivationShape) -> dict:
    """One shape's saved activations: a layer's of each kind (and what a recomputed one
    rebuilds), the embedding's and the head's: {(block, datum) or (datum, None): bytes}."""
    out: dict = {}
    for kind in ("dense", "moe") if m.moe is not None else ("dense",):
        moe = kind == "moe"
        out[kind, "act"] = act.layer_bytes(m, x, moe)
        out[kind, "ws"] = act.full_recompute_working_set(m, x, moe)
    out["emb_act", None] = act.embedding_bytes(m, x)
    out["head_act", None] = act.head_bytes(m, x)
    return out


def _param_data(base: Scenario, par, local: int | None) -> dict:
    """One (tp, ep) shape's layer parameters of each kind, and the embedding's and the head's:
    {(block, datum) or (datum, None): number}."""
    m, tr = base.model, base.training
    out: dict = {}
    for kind in ("dense", "moe") if m.moe is not None else ("dense",):
        moe = kind == "moe"
        index = next((i for i in range(m.layers) if is_moe_layer(m, i) == moe), 0)
        lp = layer_params(m, index, par.tp, par.ep, par.etp)
        split = ft.layer_split(m, tr, moe, lp.dense, lp.expert, 2 * _norm(m), par.tp, par.etp,
                               local or 1)
        out.update({(kind, "pdense"): lp.dense + split.adapter_dense,
                    (kind, "pexpert"): lp.expert + split.adapter_expert,
                    (kind, "tdense"): split.trainable_dense,
                    (kind, "texpert"): split.trainable_expert,
                    (kind, "qdense"): split.quantized_dense,
                    (kind, "qexpert"): split.quantized_expert,
                    (kind, "tensors"): eager_ops.layer_tensors(m, moe, local)})
    emb = embedding_params(m, par.tp)
    head_same = head_params(m, par.tp, separate_stage=False)
    head_sep = head_params(m, par.tp, separate_stage=True)
    norm = _norm(m)
    train = ft.edge_trainable(tr, "head") or (
        m.tied_embeddings and ft.edge_trainable(tr, "embeddings"))
    norms = ft.edge_trainable(tr, "norms")

    def head_trained(total: float) -> float:
        """The head's trained part: its matrix with lora.trainable head (or a tied embedding
        that trains), its final norm with norms."""
        return (total - norm) * train + norm * norms

    for name, value in (("emb_params", emb), ("head_params_same", head_same),
                        ("head_params_sep", head_sep),
                        ("emb_trained", emb * ft.edge_trainable(tr, "embeddings")),
                        ("head_trained_same", head_trained(head_same)),
                        ("head_trained_sep", head_trained(head_sep))):
        out[name, None] = value
    return out


class _BlockTable:
    """The block data of every (tp, cp, ep, micro-batch, ...) key met so far on one scenario:
    each datum an array over the entries (a grid's column is one gather), and per entry its
    activation shape and traffic (``_block_data``)."""

    def __init__(self) -> None:
        self.index: dict = {}
        self.entries: list[dict] = []
        self._chunks: list[tuple[int, dict]] = []      # (first entry, {datum: array})
        self._arrays: dict = {}

    def lookup(self, base: Scenario, keys: list[tuple], sp: bool, pytorch_eager: bool
               ) -> list[int]:
        """The entry of each key (its first four: tp, cp, ep, micro-batch; the rest the
        switches, which every key of one call shares with ``base``, ``sp`` and
        ``pytorch_eager``), the missing ones computed together."""
        missing = list(dict.fromkeys(k for k in keys if k not in self.index))
        if missing:
            cols, entries = _block_data(base, [k[:4] for k in missing], sp, pytorch_eager)
            self._chunks.append((len(self.entries), cols))
            start = len(self.entries)
            self.index.update({k: start + i for i, k in enumerate(missing)})
            self.entries += entries
            self._arrays.clear()
        return [self.index[k] for k in keys]

    def column(self, kind: str, name: str | None) -> np.ndarray:
        """The datum ``name`` of block ``kind`` (or the entry's own ``kind`` without a name)
        per entry, 0 where the block does not exist."""
        have = self._arrays.get((kind, name))
        if have is None:
            have = np.zeros(len(self.entries))
            for start, cols in self._chunks:
                part = cols.get((kind, name))
                if part is not None:
                    have[start:start + len(part)] = part
            self._arrays[kind, name] = have
        return have



def block_entries(base: Scenario, g: LayoutGrid, cache: dict, pytorch_eager: bool) -> tuple:
    """The block data of every distinct (tp, cp, ep, micro-batch) of ``g`` under ``base``'s
    training and switches, the missing ones computed at once and added to the scenario's block
    table in ``cache``: (the table, each distinct key's data, each key's table entry, each
    layout's key) — ``Rows.bind``'s arguments."""
    tr = base.training
    code = ((g.tp * 1024 + g.cp) * 65536 + g.ep) * 1024 + g.micro_batch   # one int per key
    uniq, inverse = np.unique(code, return_inverse=True)
    table = cache.setdefault("_blocks", _BlockTable())
    switches = (g.sequence_parallel, tr.recompute, tr.recompute_every, pytorch_eager,
                tr.engine, tr.compile, tr.fp8_recipe, tr.precision, base.parallel.async_tp,
                base.parallel.tp_comm_overlap, base.parallel.expert_tp, tr.method, tr.lora,
                tr.fp8_attention)
    keys = []
    for c in uniq.tolist():
        rest, mb = divmod(c, 1024)
        rest, ep = divmod(rest, 65536)
        tp, cp = divmod(rest, 1024)
        keys.append((tp, cp, ep, mb, *switches))
    entries = table.lookup(base, keys, g.sequence_parallel, pytorch_eager)
    per = [table.entries[i] for i in entries]
    return table, per, np.asarray(entries, dtype=np.int64), inverse.reshape(-1)


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

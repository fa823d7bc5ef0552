"""The cost model: memory, step time and traffic of every pipeline rank of every layout of a
``LayoutGrid``, in numpy. One composition serves the single estimate (a grid of one row, every
rank), the planner, the scaling curves and the dashboard.

The costs of a dense layer, an MoE layer, the head and the embedding depend only on (tp, cp, ep,
micro-batch): the block costs come from ``block_costs.block_cost_arrays``, for every combination
a call has not met yet at once, and one layer's activations and parameters from ``activations``
and ``params`` per combination (``cache`` keeps them between calls on one scenario). Everything that
depends on the rest — which layers a pipeline rank holds, model states, microbatches in flight,
buffers, the pipeline bubble, data-parallel exposure, the optimizer, offload — is computed here
by the shared formula functions, which accept arrays: one row per (layout, pipeline rank).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from workbench.estimate import activations as act
from workbench.estimate import eager_ops
from workbench.estimate import efficiency as eff
from workbench.estimate import finetune as ft
from workbench.estimate import fp8_casts
from workbench.engines import engine_of
from workbench.estimate.buffers import (
    ALLOCATOR_FRACTION, buffer_terms, compute_dtype_bytes, loss_moments, reserved_bytes,
)
from workbench.estimate import peak as pk
from workbench.estimate.comm import collective_time, group_span
from workbench.estimate.device_memory import communicator_bytes, device_terms
from workbench.estimate.flops import model_flops_per_step
from workbench.estimate.pipeline_ranks import blocking_transfers, rank_rows
from workbench.scenario.layouts import LayoutGrid
from workbench.estimate.model_states import (
    bytes_per_param, model_states, optimizer_params, stage_dtype,
)
from workbench.estimate.params import (
    _norm, chunk_of, chunk_owner, chunk_size, chunk_start, embedding_params, head_params,
    is_moe_layer, layer_params,
)
from workbench.estimate.block_costs import block_cost_arrays
from workbench.estimate.step_time import (
    dp_exposed, dp_overlap, optimizer_and_offload, optimizer_bytes_moved,
    param_upload_time, pcie_bytes_per_s, serial_comm_time, sp_grad_reduction,
)
from workbench.scenario.types import Scenario
from workbench.units import TB, capacity_bytes, hbm_bytes

# ZeRO-Infinity's NVMe staging: DeepSpeed's default offload_param/offload_optimizer
# buffer_count 5 x buffer_size 1e8 elements, in the 2-byte compute dtype, pinned in host memory.
NVME_STAGING_BYTES_PER_GPU = 5 * 100_000_000 * 2


class Volume:
    """Bytes and counts per dimension and collective, per GPU per step, one entry per row."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.data: dict[str, dict[str, list[np.ndarray]]] = {}

    def add(self, dim: str, kind: str, nbytes, count) -> None:
        slot = self.data.setdefault(dim, {}).setdefault(
            kind, [np.zeros(self.rows), np.zeros(self.rows)])
        slot[0] = slot[0] + nbytes * count
        slot[1] = slot[1] + count

    def arrays(self) -> dict:
        """{dim: {kind: {"bytes", "count"}}} of arrays (``serial_comm_time``'s input)."""
        return {d: {k: {"bytes": v[0], "count": v[1]} for k, v in ops.items()}
                for d, ops in self.data.items()}

    def row(self, i: int) -> dict:
        """Row ``i``'s collectives that run (count > 0), as plain numbers."""
        out: dict = {}
        for d, ops in self.data.items():
            for k, (b, c) in ops.items():
                if c[i] > 0:
                    out.setdefault(d, {})[k] = {"bytes": float(b[i]), "count": float(c[i])}
        return out


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
    s = dataclasses.replace(base, parallel=dataclasses.replace(base.parallel,
                                                               sequence_parallel=sp))
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
        runs = {key: (n > 0).tolist() for key, (b, n) in vol.items()}
        per = {key: (b.tolist(), n.tolist()) for key, (b, n) in vol.items()}
        for i, entry in enumerate(entries):
            entry[kind] = {"vol": {key: (b[i], n[i]) for key, (b, n) in per.items()
                                   if runs[key][i]}}
    local = m.moe.experts // ep if m.moe is not None else None
    tr = base.training
    # what the activations take from the shape (s, b, t, sp) set on the scenario's own
    # (``activation_shape``; tests/test_block_arrays.py checks it against a call per shape)
    x0 = act.activation_shape(tr, s.parallel, pytorch_eager)
    rest: dict = {}
    for i, (t, c, e, b) in enumerate(shapes):
        par = dataclasses.replace(s.parallel, tp=t, cp=c, ep=e, dp=max(e, 1), pp=1,
                                  virtual_stages=1, shard_group=None)
        x = dataclasses.replace(x0, s=tr.seq_len // c, b=b, t=t, sp=par.sp)
        entries[i]["x"] = x
        for name, value in _shape_data(base, par, x,
                                       None if local is None else int(local[i])).items():
            rest.setdefault(name, []).append(value)
    cols.update({key: np.asarray(v, dtype=float) for key, v in rest.items()})
    return cols, entries


def _shape_data(base: Scenario, par, x, local: int | None) -> dict:
    """One shape's layer activations and parameters, and the embedding's and the head's:
    {(block, datum) or (datum, None): number}."""
    m, tr = base.model, base.training
    out: dict = {}
    for kind in ("dense", "moe") if m.moe is not None else ("dense",):
        moe = kind == "moe"
        index = next((i for i in range(m.layers) if is_moe_layer(m, i) == moe), 0)
        lp = layer_params(m, index, par.tp, par.ep, par.etp)
        split = ft.layer_split(m, tr, moe, lp.dense, lp.expert, 2 * _norm(m), par.tp, par.etp,
                               local or 1)
        out.update({(kind, "act"): act.layer_bytes(m, x, moe),
                    (kind, "ws"): act.full_recompute_working_set(m, x, moe),
                    (kind, "pdense"): lp.dense + split.adapter_dense,
                    (kind, "pexpert"): lp.expert + split.adapter_expert,
                    (kind, "tdense"): split.trainable_dense,
                    (kind, "texpert"): split.trainable_expert,
                    (kind, "qdense"): split.quantized_dense,
                    (kind, "qexpert"): split.quantized_expert,
                    (kind, "tensors"): eager_ops.layer_tensors(m, moe, local)})
    emb = embedding_params(m, par.tp)
    head_same = head_params(m, par.tp, separate_stage=False)
    head_sep = head_params(m, par.tp, separate_stage=True)

    def head_trained(total: float) -> float:
        """The head's trained part: its matrix with lora.trainable head (or a tied embedding
        that trains), its final norm with norms."""
        matrix = total - _norm(m)
        train = ft.edge_trainable(tr, "head") or (
            m.tied_embeddings and ft.edge_trainable(tr, "embeddings"))
        return matrix * train + _norm(m) * ft.edge_trainable(tr, "norms")

    for name, value in (("emb_act", act.embedding_bytes(m, x)), ("head_act", act.head_bytes(m, x)),
                        ("emb_params", emb), ("head_params_same", head_same),
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


class Rows:
    """One row per evaluated (layout, pipeline rank): the layouts repeated (``grid``), the rank,
    what the rank holds, the block data of its (tp, cp, ep, micro-batch) as columns, and the
    reductions from rows back to layouts."""

    def __init__(self, base: Scenario, g: LayoutGrid, every_rank: bool, cache: dict,
                 pytorch_eager: bool) -> None:
        m, tr = base.model, base.training
        code = ((g.tp * 1024 + g.cp) * 65536 + g.ep) * 1024 + g.micro_batch   # one int per key
        uniq, inverse = np.unique(code, return_inverse=True)
        self.table = table = cache.setdefault("_blocks", _BlockTable())
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
        self.per = [table.entries[i] for i in entries]
        self.layout_of, self.rank = rank_rows(m, g, every_rank)
        self.n = len(self.rank)
        self.starts = np.flatnonzero(np.r_[True, self.layout_of[1:] != self.layout_of[:-1]])
        self.key_index = inverse.reshape(-1)[self.layout_of]   # row -> its block data
        self.entry = np.asarray(entries, dtype=np.int64)[self.key_index]   # row -> table entry
        self._columns: dict = {}
        self.grid = G = g.take(self.layout_of)
        self.layers_total = m.layers
        self.dense_total = m.moe.dense_layers if m.moe is not None else m.layers
        self.layers, self.dense, self.sends, self.head_rank = _placement(
            m.layers, self.dense_total, G.pp, G.chunks_per_rank, self.rank, G.v_shape)
        self.moe = self.layers - self.dense
        self.has_emb = self.rank == 0
        self.has_head = self.head_rank == self.rank
        self.microbatches = tr.global_batch // (G.micro_batch * G.dp)

    def col(self, kind: str, name: str | None = None) -> np.ndarray:
        """A block datum per row (0 where the block does not exist)."""
        key = (kind, name)
        if key not in self._columns:
            self._columns[key] = self.table.column(kind, name)[self.entry]
        return self._columns[key]

    def blocks(self, name: str) -> np.ndarray:
        """The sum of a block datum over the blocks each row's rank holds."""
        return (self.dense * self.col("dense", name) + self.moe * self.col("moe", name)
                + self.has_head * self.col("head", name)
                + self.has_emb * self.col("embedding", name))

    def model_total(self, name: str, wrappers=(0.0, 0.0)) -> np.ndarray:
        """Per layout: a block datum over the whole model (every layer, the head and the
        embedding), plus the wrappers' cost per layer and for the rest."""
        first, moe = self.first, self.layers_total - self.dense_total
        each = self.entry[self.starts]           # each layout's block data (one per layout)
        block = self.table.column
        return ((self.layers_total - moe) * block("dense", name)[each]
                + moe * block("moe", name)[each] + block("head", name)[each]
                + block("embedding", name)[each]
                + self.layers_total * first(wrappers[0]) + first(wrappers[1]))

    def _per_layout(self, x) -> np.ndarray | None:
        """``x`` as one entry per layout when it is a scalar (None when it is per row)."""
        x = np.asarray(x)
        return np.full(len(self.starts), x) if x.ndim == 0 else None

    def worst(self, x) -> np.ndarray:
        """The largest value over each layout's rows."""
        same = self._per_layout(x)
        return same if same is not None else np.maximum.reduceat(x, self.starts)

    def argworst(self, x) -> np.ndarray:
        """The pipeline rank of each layout's largest value (the lowest on ties)."""
        hit = x == self.worst(x)[self.layout_of]
        return self.rank[np.minimum.reduceat(np.where(hit, np.arange(self.n), self.n),
                                             self.starts)]

    def first(self, x) -> np.ndarray:
        """Per layout: the value of its first row (for what every row of a layout shares)."""
        same = self._per_layout(x)
        return same if same is not None else np.asarray(x)[self.starts]


@dataclass
class _FineTuneStates:
    """What the method changes in one row's model states: the trained (dense, expert)
    parameters, ``model_states``' keyword arguments, ``buffer_terms``' and the largest
    gradient one tensor has."""

    trained: tuple
    kwargs: dict
    buffer_kwargs: dict
    largest_grad: object


def finetune_states(base: Scenario, rows: Rows, pdense, pexpert, head_params_r
                    ) -> _FineTuneStates:
    """The method's model-state conventions per row (``estimate/finetune.py``): which
    parameters train, the frozen ones' stored bytes, the state dtype of the engine (adapters:
    the engine's adapter dtype), Adafactor's typical matrix, and whether a paged optimizer's
    states are in managed memory (bitsandbytes pages a state of >= 1e5 elements:
    optim/optimizer.py ``get_state_buffer`` L383-389 @ 95f9af30)."""
    m, tr, col = base.model, base.training, rows.col
    nd, nm = rows.dense, rows.moe
    eng = engine_of(tr)
    cd = compute_dtype_bytes(tr.precision)
    head_trained = np.where(rows.head_rank != 0, col("head_trained_sep"),
                            col("head_trained_same"))
    tdense = (nd * col("dense", "tdense") + nm * col("moe", "tdense")
              + rows.has_emb * col("emb_trained") + rows.has_head * head_trained)
    texpert = nm * col("moe", "texpert")
    qd = nd * col("dense", "qdense") + nm * col("moe", "qdense")
    qe = nm * col("moe", "qexpert")
    qb = ft.quantized_bytes_per_param(tr, m) if tr.method == "qlora" else cd
    frozen = ((pdense - tdense - qd) * cd + qd * qb, (pexpert - texpert - qe) * cd + qe * qb)
    # the engine's state dtype (a tuple where it differs by ZeRO stage: model_states.stage_dtype)
    state_dtype = eng.state_dtype_by_zero or eng.state_dtype
    if tr.adapters and eng.adapter_dtype == "fp32":
        state_dtype = "fp32"
    typical = (tr.lora.rank, m.hidden) if tr.adapters else (m.hidden, m.hidden)
    kwargs = {"trained": (tdense, texpert), "frozen_bytes": frozen, "state_dtype": state_dtype,
              "factored": typical,
              "paged": tr.optimizer == "paged_adamw8bit" and typical[0] * typical[1] >= 1e5}
    held = np.maximum(pdense + pexpert, 1)
    # the FSDP buffers below are ZeRO-3's: the stage-3 state dtype
    sd3 = stage_dtype(state_dtype, 3)
    grad_b = bytes_per_param(tr.precision, tr.optimizer, 3, sd3).grads
    buffer_kwargs = {}
    if tr.method != "pretrain" or sd3 != "mixed":
        buffer_kwargs = {"gather_bytes": (frozen[0] + frozen[1] + (tdense + texpert) * cd)
                         / held,
                         "grad_share": (tdense + texpert) / held,
                         "grad_bytes": cd + 4 if sd3 == "mixed" else grad_b}
    embedding = np.where(rows.has_emb & (col("emb_trained") > 0), col("emb_params"), 0)
    head = np.where(rows.has_head & (head_trained > 0), head_params_r, 0)
    largest = np.maximum.reduce([embedding, head, ft.largest_linear(m, 1) / rows.grid.tp
                                 if not tr.adapters else np.zeros(rows.n)])
    if tr.adapters:   # an adapter's larger factor
        largest = np.maximum(largest, tr.lora.rank * m.hidden)
    return _FineTuneStates((tdense, texpert), kwargs, buffer_kwargs,
                           largest * (grad_b if sd3 != "mixed" else 4))


def _state_rates(tr, fts: _FineTuneStates, zero) -> tuple:
    """(gradient bytes reduced per parameter, HBM bytes the optimizer step moves per parameter,
    whether both are the mixed-precision table's defaults) for the state dtype of
    ``finetune_states``; per row of ``zero`` where the dtype differs by ZeRO stage."""
    sd = fts.kwargs["state_dtype"]

    def rates(dtype: str) -> tuple[float, float]:
        state = bytes_per_param(tr.precision, tr.optimizer, 0, dtype, fts.kwargs["factored"])
        return (4 if dtype == "mixed" else state.grads), optimizer_bytes_moved(state)
    if isinstance(sd, str):
        grad, moved = rates(sd)
        return grad, moved, tr.method == "pretrain" and sd == "mixed"
    per = [rates(d) for d in sd]
    z = np.clip(np.asarray(zero), 0, 3)
    return (np.choose(z, [g for g, _ in per]), np.choose(z, [mv for _, mv in per]), False)


def _memory(base: Scenario, rows: Rows) -> tuple[dict, dict]:
    """Per row: parameters held, model states, activations at the peak, named buffers, total,
    and what offload puts in host memory and on NVMe."""
    m, tr, G = base.model, base.training, rows.grid
    sched, col, nd, nm = G.schedule, rows.col, rows.dense, rows.moe
    p, cpr, mbs = G.pp, G.chunks_per_rank, rows.microbatches
    head_params_r = np.where(rows.head_rank != 0, col("head_params_sep"),
                             col("head_params_same"))
    pdense = (nd * col("dense", "pdense") + nm * col("moe", "pdense")
              + rows.has_emb * col("emb_params") + rows.has_head * head_params_r)
    pexpert = nm * col("moe", "pexpert")
    unit = np.maximum.reduce([
        np.where(nd > 0, col("dense", "pdense") + col("dense", "pexpert"), 0),
        np.where(nm > 0, col("moe", "pdense") + col("moe", "pexpert"), 0),
        rows.has_emb * col("emb_params"), rows.has_head * head_params_r])
    eng = engine_of(tr)
    fts = finetune_states(base, rows, pdense, pexpert, head_params_r)
    ms = model_states(pdense, pexpert, tr.precision, tr.optimizer, G.zero, G.dense_shard,
                      G.expert_shard, tr.offload, **fts.kwargs)
    inflight = sched.inflight(p, mbs, cpr, rows.rank)
    layer_act = nd * col("dense", "act") + nm * col("moe", "act")
    # one microbatch through every chunk of the rank, embedding and head included
    one_microbatch = layer_act + rows.has_emb * col("emb_act") + rows.has_head * col("head_act")
    activ = layer_act * inflight / cpr
    activ = activ + rows.has_emb * col("emb_act") * sched.inflight_first_chunk(p, mbs)
    activ = activ + rows.has_head * col("head_act") * sched.inflight_last_chunk(p, mbs)
    if tr.recompute in ("full", "op", "layer"):
        activ = activ + np.maximum(np.where(nd > 0, col("dense", "ws"), 0),
                                   np.where(nm > 0, col("moe", "ws"), 0))
    x = dataclasses.replace(rows.per[0]["x"], s=tr.seq_len // G.cp, b=G.micro_batch, t=G.tp,
                            sp=G.sp)
    host_activations = 0.0
    if tr.activation_offload:
        # torchtune's OffloadActivations (training/_activation_offloading.py @ v0.6.1) copies
        # each saved tensor to pinned host memory on a side stream and brings it back ahead of
        # its backward; the output head's stay on the GPU (NoOpManager), and a stash of recent
        # tensors until their copies finish: on the GPU, the head's and about two layers' sets
        # (the one being offloaded in forward, the one prefetched in backward).
        layer_one = np.maximum(np.where(nd > 0, col("dense", "act"), 0),
                               np.where(nm > 0, col("moe", "act"), 0))
        kept = np.minimum(activ, 2 * layer_one + rows.has_head * col("head_act"))
        host_activations = activ - kept
        activ = kept
    loss_kwargs = {"logits_kept": eng.logits_kept_in_backward,
                   "vocab_split": not eng.tp_gathers_logits,
                   "head_trains": ft.edge_trainable(tr, "head"),
                   "loss_style": {"compiled": bool(tr.compile and eng.loss_compiled),
                                  "vocab_parallel": eng.loss_vocab_parallel,
                                  "shift_copy": eng.loss_shift_copy}}
    gathered = dict(fts.buffer_kwargs)
    if tr.precision == "fp8" and tr.fp8_param_gather:   # the gathered linear weights in FP8
        gathered["gather_bytes"] = fp8_casts.fp8_gather_bytes(
            m, gathered.get("gather_bytes"), nd, nm, pdense + pexpert,
            compute_dtype_bytes(tr.precision), G)
    bufs = buffer_terms(m, G, x, tr.precision, pdense + pexpert, unit, rows.has_head, nm > 0,
                        eng.loss, **gathered, **loss_kwargs)
    if tr.method == "qlora":
        # bitsandbytes dequantises one linear's weight at a time into a compute-dtype tensor
        # (MatMul4Bit forward and backward: F.dequantize_4bit(B, state))
        bufs["dequantized_weight"] = np.asarray(ft.largest_linear(m, G.tp)
                                                * compute_dtype_bytes(tr.precision))
    if tr.optimizer_in_backward:
        # each parameter steps from its gradient hook and frees the gradient: one tensor's
        # gradient alive instead of all (torchtune optimizer_in_bwd)
        bufs["in_backward_gradient"] = np.asarray(fts.largest_grad)
    if eng.unsharded_grad_bytes:
        bufs["engine_grad_buffer"] = eng.unsharded_grad_bytes * (pdense + pexpert)
    if eng.dp_bucket_bytes:
        bufs["dp_buckets"] = np.where(G.dp * G.cp > 1, eng.dp_bucket_bytes, 0.0)
    if any(eng.lp_grad_bytes_by_zero):
        # the engine's 16-bit .grad of every trained parameter beside the table's gradients
        bufs["lp_grads"] = np.choose(np.clip(np.asarray(G.zero), 0, 3),
                                     eng.lp_grad_bytes_by_zero) * (fts.trained[0]
                                                                   + fts.trained[1])
    bufs = {k: np.broadcast_to(v, rows.n) for k, v in bufs.items()}
    grads = ms.grads * 0 if tr.optimizer_in_backward else ms.grads
    parts = _phases(base, rows, ms, grads, activ, bufs, x, loss_kwargs, fts.trained)
    if eng.allowance_in_total:
        bufs["allocator_allowance"] = ALLOCATOR_FRACTION * pk.peak_of(pk.phase_totals(parts))[0]
        for moment in parts.values():
            moment["buffers"] = moment["buffers"] + bufs["allocator_allowance"]
    phases = pk.phase_totals(parts)
    peak, at = pk.peak_of(phases)
    buffers = sum(bufs.values())
    out = {"inflight_microbatches": inflight / cpr, "dense_params": pdense,
           "expert_params": pexpert, "trained_dense": fts.trained[0],
           "trained_expert": fts.trained[1], "params": ms.params, "grads": grads,
           "optimizer": ms.optimizer, "activations": activ,
           "activations_one_microbatch": one_microbatch, "buffers": buffers,
           "total": peak, "peak_phase": at,
           **{f"phase_{name}": np.broadcast_to(v, rows.n) for name, v in phases.items()},
           **{f"at_peak_{c}": np.broadcast_to(v, rows.n)
              for c, v in pk.at_peak(parts, at).items()},
           "reserved": reserved_bytes(eng, peak, gathers=np.asarray(G.zero) == 3),
           "host": ms.host + host_activations
           + (NVME_STAGING_BYTES_PER_GPU if tr.offload == "nvme" else 0.0),
           "nvme": ms.nvme, "params_frozen": np.broadcast_to(ms.params_frozen, rows.n),
           "params_far": np.broadcast_to(ms.params_far, rows.n),
           "paged": np.broadcast_to(ms.paged, rows.n),
           "offloaded_activations": np.broadcast_to(host_activations, rows.n),
           "_finetune": fts}
    return out, bufs


def _phases(base: Scenario, rows: Rows, ms, grads, activ, bufs: dict, x,
            loss_kwargs: dict, trained_params: tuple) -> dict:
    """Per row: the bytes alive at each moment of the step by category (``peak.phase_parts``);
    ``trained_params``: the (dense, expert) parameters that train, whose gradients ``grads``
    holds (the head's share of them is made first in the backward)."""
    m, tr, G, col = base.model, base.training, rows.grid, rows.col
    eng = engine_of(tr)
    early = pk.grads_before_backward(eng, G.zero, rows.microbatches, G.pp)
    head_trained = np.where(rows.head_rank != 0, col("head_trained_sep"),
                            col("head_trained_same"))
    trained = np.asarray(trained_params[0] + trained_params[1], dtype=float)
    share = rows.has_head * head_trained / np.maximum(trained, 1)
    loss_forward = np.where(rows.has_head, loss_moments(
        m, x, G.tp, eng.loss, compute_dtype_bytes(tr.precision), **{
            k: v for k, v in loss_kwargs.items() if k != "loss_style"},
        **loss_kwargs["loss_style"])[0], 0.0)
    return pk.phase_parts(ms.params, grads, ms.optimizer, activ, bufs, early,
                           grads * share, rows.has_head * col("head_act"), loss_forward)


def communicators(par, gpus_per_node: int) -> list[tuple[object, object]]:
    """(ranks, crosses nodes) of each NCCL communicator one GPU of the layout belongs to (numbers
    or arrays; ranks 1 where the group does not exist): its data-parallel group over dp x cp
    (and, under HSDP, the shard and replica groups), TP, CP, EP, the expert-data-parallel group,
    and under pipelining one point-to-point communicator with each neighbour stage (PyTorch's
    ProcessGroupNCCL creates one per peer pair for send/recv)."""
    tp, cp, ep, pp = (np.asarray(v) for v in (par.tp, par.cp, par.ep, par.pp))
    dpcp = np.asarray(par.dp) * cp
    sg = np.asarray(par.shard_group if par.shard_group is not None else 0)
    sg = np.where(sg > 0, sg, dpcp)
    out = []
    # expert groups exist only under EP (without it the experts replicate with the dense weights)
    edp = np.where(ep > 1, np.asarray(par.expert_data_parallel), 1)
    for size, stride in ((sg, tp), (dpcp // np.maximum(sg, 1), tp * sg), (tp, 1), (cp, tp),
                         (ep, np.asarray(par.etp)), (edp, np.asarray(par.etp) * ep)):
        span = group_span(size, stride, gpus_per_node)
        out.append((size, np.asarray(span.nodes) > 1))
    world_stage = dpcp * tp
    crosses = world_stage >= gpus_per_node
    for _ in range(2):
        out.append((np.where(pp > 1, 2, 1), crosses))
    return out


def device_overhead(hw, par) -> np.ndarray | float:
    """What nvidia-smi shows beyond the allocator's reserved bytes for one GPU of each layout of
    ``par`` (``device_memory.device_terms``: CUDA context, NCCL communicator buffers, library
    workspaces). The NCCL term is a sum over communicators, so each communicator slot is
    evaluated once per distinct (ranks, crosses nodes)."""
    arch = hw.gpu.arch
    fixed = sum(device_terms(arch, []).values())       # context and workspaces
    total = 0.0
    for size, crosses in communicators(par, hw.gpus_per_node):
        code = np.asarray(size, dtype=np.int64) * 2 + np.asarray(crosses, dtype=np.int64)
        uniq, inverse = np.unique(code, return_inverse=True)
        each = np.array([communicator_bytes(arch, int(c) // 2, bool(c % 2)) for c in uniq])
        total = total + each[inverse.reshape(np.shape(code))]
    out = fixed + total
    return float(out) if np.ndim(out) == 0 else out


def _times(base: Scenario, rows: Rows, gpu, mem: dict, vol: Volume | None) -> dict:
    """Per row, per microbatch: forward, backward, weight-gradient and recompute seconds and
    exposed TP/CP/EP communication (the wrappers' cost on a calibrated machine included); per
    step: exposed data-parallel communication, the optimizer, offload, the sequence-parallel
    gradient reduction. Adds each collective to ``vol``."""
    hw, m, tr, G = base.hardware, base.model, base.training, rows.grid
    mbs = rows.microbatches
    wl_f, wl_b = eff.wrapper_time(gpu, G, "layer")
    wr_f, wr_b = eff.wrapper_time(gpu, G, "rest")
    edges = rows.has_head.astype(int) + rows.has_emb
    fwd = rows.blocks("fwd") + rows.layers * wl_f + edges * wr_f / 2
    bwd = rows.blocks("bwd") + rows.layers * wl_b + edges * wr_b / 2
    comm = {dim: rows.blocks(f"comm_{dim}") for dim in ("tp", "cp", "ep")}
    comm_sum = comm["tp"] + comm["cp"] + comm["ep"]
    rc = rows.blocks("rc")
    if vol is not None:
        for kind, n_blocks in (("dense", rows.dense), ("moe", rows.moe),
                               ("head", rows.has_head), ("embedding", rows.has_emb)):
            names = dict.fromkeys(key for d in rows.per
                                  for key in (d.get(kind) or {}).get("vol", {}))
            for dim, coll in names:
                nbytes, count = (np.asarray([(d.get(kind) or {}).get("vol", {}).get(
                    (dim, coll), (0.0, 0.0))[i] for d in rows.per])[rows.key_index]
                    for i in (0, 1))
                vol.add(dim, coll, nbytes / np.where(count > 0, count, 1),
                        n_blocks * count * mbs)
    e = compute_dtype_bytes(tr.precision)
    p2p_bytes = tr.seq_len * G.micro_batch / G.cp * m.hidden * e / np.where(G.sp, G.tp, 1)
    if vol is not None:
        vol.add("pp", "send_recv", p2p_bytes, np.where(G.pp > 1, rows.sends * mbs, 0))
    pdense, pexpert = mem["dense_params"], mem["expert_params"]
    trained = (mem["trained_dense"], mem["trained_expert"])
    fts = mem["_finetune"]
    grad_bytes, moved, default = _state_rates(tr, fts, G.zero)
    og, ogather = dp_overlap(base, G.zero)
    gather = None if default else fts.buffer_kwargs.get("gather_bytes")
    if tr.precision == "fp8" and tr.fp8_param_gather:   # the linear weights gathered in FP8
        gather = fp8_casts.fp8_gather_bytes(m, gather, rows.dense, rows.moe, pdense + pexpert,
                                            compute_dtype_bytes(tr.precision), G)
    exp_dp = dp_exposed(G, hw, tr.precision, mbs, pdense, pexpert, fwd, bwd, vol,
                        units=rows.layers + 1, expert_units=rows.moe, trained=trained,
                        overlap_grad=og, overlap_gather=ogather,
                        **({} if default else {"grad_bytes": grad_bytes}),
                        gather_bytes=gather, upload_s=param_upload_time(hw, tr, mem["params_far"]))
    classic = default and tr.optimizer in ("adamw", "sgd")
    opt, off = optimizer_and_offload(hw, tr, optimizer_params(
        *trained, G.zero, G.dense_shard, G.expert_shard),
        None if classic else moved, params_up=np.asarray(G.zero) < 3)
    opt = np.broadcast_to(opt, rows.n) + _optimizer_ops_time(
        gpu, m, G, rows.dense * rows.col("dense", "tensors")
        + rows.moe * rows.col("moe", "tensors"), rows.has_emb, rows.has_head, tr.optimizer)
    if tr.activation_offload:
        # the offloaded activations go to host memory in forward and come back in backward on
        # a side stream, under the compute of the microbatch (torchtune use_streams=True)
        copies = 2 * mem["offloaded_activations"] / pcie_bytes_per_s(hw)
        off = off + mbs * np.maximum(0.0, copies - (fwd + bwd))
    sp_bytes, sp_count, sp_secs = sp_grad_reduction(base, rows.layers, rows.has_head, G.zero,
                                                    G.tp, mbs, G.sp, G.dp * G.cp, G.pp)
    if vol is not None:
        vol.add("tp", "all_reduce", sp_bytes, sp_count)
    return {"fwd": fwd, "bwd": bwd, "wgrad": rows.blocks("wgrad"), "recompute": rc,
            **{f"comm_{dim}": v for dim, v in comm.items()},
            "f": fwd + comm_sum / 2, "b": bwd + rc + comm_sum / 2, "dp_exposed": exp_dp,
            "sp_grads": sp_secs, "optimizer_time": opt,
            "offload_time": np.broadcast_to(off, rows.n), "p2p_bytes": p2p_bytes,
            "_wrappers": ((wl_f, wr_f), (wl_b, wr_b))}


def _per_step(base: Scenario, g: LayoutGrid, rows: Rows, gpu, mem: dict, t: dict,
              vol: Volume | None, overlaps: bool) -> tuple[dict, dict]:
    """Per layout: the step (the pipeline's steady state and bubble, its sends, and the worst
    rank's exposed collectives, optimizer and offload), memory, fit, throughput and MFU; and,
    where nothing overlaps, each row's serial collective time per dimension."""
    hw, m, tr = base.hardware, base.model, base.training
    sched, pp, cpr = g.schedule, g.pp, np.asarray(g.chunks_per_rank)
    mbs = tr.global_batch // (g.micro_batch * g.dp)
    worst = rows.worst
    # means over all ranks for the bubble: every layer, the head and the embedding, over p
    (wl_f, wr_f), (wl_b, wr_b) = t["_wrappers"]
    f_mean = rows.model_total("fwd", (wl_f, wr_f)) / pp
    b_mean = (rows.model_total("bwd", (wl_b, wr_b)) + rows.model_total("rc")) / pp
    w_mean = rows.model_total("wgrad") / pp
    comm_half = sum(rows.model_total(f"comm_{d}") for d in ("tp", "cp", "ep")) / 2
    p2p = np.where(pp > 1, collective_time("send_recv", rows.first(t["p2p_bytes"]), group_span(
        pp, g.tp * g.cp * g.dp, hw.gpus_per_node), hw), 0.0)
    serial = {}
    # the step's terms that are not the pipeline's compute, each the worst rank's
    terms = {"optimizer": worst(t["optimizer_time"]), "offload": worst(t["offload_time"])}
    if overlaps:
        bubble = np.asarray(sched.bubble(pp, cpr, f_mean + comm_half / pp,
                                         b_mean + comm_half / pp, w_mean), dtype=float)
        # fill and drain; where the engine's sends block (DeepSpeed), every micro-batch's too
        blocking = blocking_transfers(pp) * mbs if engine_of(tr).pp_blocking_p2p else 0
        terms.update(pp_exposed=(2 * (pp - 1) + blocking) * p2p, sp_grads=worst(t["sp_grads"]),
                     dp_exposed=worst(t["dp_exposed"]))
        step = (mbs * worst(t["f"] + t["b"]) + bubble + terms["pp_exposed"]
                + terms["sp_grads"] + terms["dp_exposed"])
    else:
        # Ranks that occupy every core of a calibrated machine: no collective hides behind
        # compute, so the step is the pipeline's compute plus every collective of the step of
        # the pipeline rank whose collectives take longest.
        bubble = np.asarray(sched.bubble(pp, cpr, f_mean, b_mean, w_mean), dtype=float)
        serial = serial_comm_time(vol.arrays(), rows.grid, hw)
        step = (mbs * worst(t["fwd"] + t["bwd"] + t["recompute"]) + bubble
                + worst(sum(serial.values())))
    step = step + terms["optimizer"] + terms["offload"]
    memory = worst(mem["total"])
    gpn = hw.gpus_per_node
    host_node, nvme_node = gpn * worst(mem["host"]), gpn * worst(mem["nvme"])
    flops = model_flops_per_step(m, tr.seq_len, tr.global_batch, tr)
    layout = {"step": step, "bubble": bubble, "memory_per_gpu": memory,
              "host_fits": ((host_node <= capacity_bytes(hw.host.memory_gb))
                            & (nvme_node <= hw.storage.drives * hw.storage.drive.capacity_tb
                               * TB)),
              "fits": worst(mem["device"]) <= hbm_bytes(hw.gpu.memory_gb),
              "reserved_per_gpu": worst(mem["reserved"]),
              "device_per_gpu": worst(mem["device"]),
              "tokens_per_s": tr.seq_len * tr.global_batch / step,
              "mfu": flops / (step * g.world * eff.peak_flops(hw.gpu, tr.precision)),
              "host_per_node": host_node, "nvme_per_node": nvme_node, **terms,
              "worst_memory_rank": rows.argworst(mem["total"]),
              "worst_time_rank": rows.argworst(t["f"] + t["b"])}
    if serial:
        layout["worst_comm_rank"] = rows.argworst(sum(serial.values()))
    return layout, serial


def evaluate(base: Scenario, g: LayoutGrid, *, every_rank: bool = False,
             cache: dict | None = None, volume: bool = False,
             pytorch_eager: bool = False) -> Evaluation:
    """Evaluate every layout of ``g`` (valid for ``base``'s model, hardware and training by the
    rule table) on the pipeline ranks ``pipeline_ranks.rank_rows`` picks (``every_rank``: all).
    ``volume``: also the traffic per rank (always computed where no communication overlaps,
    as on a calibrated CPU machine). ``cache`` keeps block costs per (tp, cp, ep, micro-batch,
    sequence parallelism, recompute) between calls on the same model, hardware and training.
    ``pytorch_eager``: count the activations eager PyTorch saves (the trial model's), as an
    engine whose model runs eager modules does unless ``training.compile`` fuses them."""
    gpu = eff.on_hardware(base.hardware)
    overlaps = bool(eff.overlap(base.hardware))
    eng = engine_of(base.training)
    pytorch_eager = pytorch_eager or (eng.eager_activations and not base.training.compile)
    rows = Rows(base, g, every_rank, {} if cache is None else cache, pytorch_eager)
    vol = Volume(rows.n) if volume or not overlaps else None
    mem, bufs = _memory(base, rows)
    # nvidia-smi's view: the same context and communicators on every rank of a layout
    mem["device"] = mem["reserved"] + np.broadcast_to(device_overhead(base.hardware, g),
                                                      len(g))[rows.layout_of]
    t = _times(base, rows, gpu, mem, vol)
    layout, serial = _per_step(base, g, rows, gpu, mem, t, vol, overlaps)
    rank = {"layers": rows.layers, "dense_layers": rows.dense, "has_embedding": rows.has_emb,
            "has_head": rows.has_head, **{k: v for k, v in mem.items() if k != "_finetune"},
            **{k: v for k, v in t.items() if not k.startswith("_") and k != "p2p_bytes"},
            **{f"serial_{dim}": v for dim, v in serial.items()}}
    return Evaluation(layout=layout, rank=rank, row_layout=rows.layout_of,
                      rank_index=rows.rank, buffers=bufs, volume=vol,
                      pytorch_eager=pytorch_eager)


def _placement(layers: int, dense_layers: int, pp, cpr, rank, v_shape: bool) -> tuple:
    """Per row: the layers a pipeline rank holds, how many of them are the leading dense ones,
    the activations it sends per microbatch (forward to the next chunk, backward to the
    previous, when that chunk is on another rank), and the rank holding the head. Computed once
    per distinct (pp, chunks per rank, rank)."""
    code = (pp * 1024 + cpr) * 65536 + rank
    uniq, inverse = np.unique(code, return_inverse=True)
    rest, r = np.divmod(uniq, 65536)
    p, c_per = np.divmod(rest, 1024)
    chunks = p * c_per
    held = np.zeros(len(uniq), dtype=np.int64)
    dense = np.zeros(len(uniq), dtype=np.int64)
    sends = np.zeros(len(uniq), dtype=np.int64)
    for k in range(int(c_per.max())):
        on = k < c_per
        c = chunk_of(r, k, p, v_shape)
        size = chunk_size(layers, chunks, c)
        held += np.where(on, size, 0)
        dense += np.where(on, np.clip(dense_layers - chunk_start(layers, chunks, c), 0, size), 0)
        sends += on & (c + 1 < chunks) & (chunk_owner(c + 1, p, v_shape) != r)
        sends += on & (c > 0) & (chunk_owner(c - 1, p, v_shape) != r)
    head = chunk_owner(chunks - 1, p, v_shape)
    return held[inverse], dense[inverse], sends[inverse], head[inverse]


def _optimizer_ops_time(gpu, m, g: LayoutGrid, layer_tensors, has_emb, has_head,
                        optimizer: str):
    """The eager runtime's cost of a pipeline rank's optimizer step (calibrated profiles
    only): its optimizer's operations over the parameter tensors it updates."""
    if gpu.profile is None:
        return 0.0
    edge = {(e, h): eager_ops.edge_tensors(m, e, h) for e in (False, True) for h in (False, True)}
    tensors = layer_tensors + np.where(has_emb, np.where(has_head, edge[True, True],
                                                         edge[True, False]),
                                       np.where(has_head, edge[False, True], 0))
    zero1 = (g.zero == 1) & (g.dense_shard > 1)      # whole tensors split over the shard group
    tensors = np.where(zero1, -(-tensors // np.maximum(g.dense_shard, 1)), tensors)
    return (eff.runtime_ops(gpu, 0, 0, eager_ops.optimizer_ops(tensors, optimizer))
            + tensors * eff.wrapper_time(gpu, g, "tensor")[0])


def evaluate_layouts(base: Scenario, g: LayoutGrid, cache: dict | None = None
                     ) -> dict[str, np.ndarray]:
    """The layout figures of ``evaluate`` (step, bubble, memory_per_gpu, fits, host_fits,
    tokens_per_s, mfu), one entry per layout: the planner's and the scaling curves' call."""
    return evaluate(base, g, cache=cache).layout

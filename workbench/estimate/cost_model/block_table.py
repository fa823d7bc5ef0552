"""The block table: the costs of a dense layer, an MoE layer, the output head and the embedding,
which depend only on (tp, cp, ep, micro-batch) and the scenario's switches. The block costs
come from ``time.block_costs.block_cost_arrays`` for every combination a call has not met yet
at once, one layer's activations and parameters from ``memory.activations`` and
``model.params`` per combination; ``BlockTable`` keeps them between calls on one scenario (the
cost model's ``cache``) and ``rows.Rows.bind`` reads them as columns.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from workbench.estimate.memory import activations as act
from workbench.estimate.model import finetune as ft
from workbench.estimate.model.params import (
    embedding_params, head_params, is_moe_layer, layer_params, norm_params,
)
from workbench.estimate.time import eager_ops
from workbench.estimate.time.block_costs import block_cost_arrays
from workbench.scenario.layouts import LayoutGrid
from workbench.scenario.types import Scenario


def block_data(base: Scenario, shapes: list[tuple], sp: bool, pytorch_eager: bool
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
        x = act.with_fields(x0, s=tr.seq_len // c, b=b, t=t, et=s.parallel.expert_tp or t,
                            sp=got[0])
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
        split = ft.layer_split(m, tr, moe, lp.dense, lp.expert, 2 * norm_params(m), par.tp,
                               par.etp, local or 1)
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
    norm = norm_params(m)
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


class BlockTable:
    """The block data of every (tp, cp, ep, micro-batch, ...) key met so far on one scenario:
    each datum an array over the entries (a grid's column is one gather), and per entry its
    activation shape and traffic (``block_data``)."""

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
            cols, entries = block_data(base, [k[:4] for k in missing], sp, pytorch_eager)
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
    table = cache.setdefault("_blocks", BlockTable())
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

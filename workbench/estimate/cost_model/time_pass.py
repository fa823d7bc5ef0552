"""The cost model's time pass: per (layout, pipeline rank) row, forward, backward,
weight-gradient and recompute seconds per microbatch with the exposed TP/CP/EP communication
(``block_costs.block_costs`` per block, summed over the blocks a rank holds), the data-parallel
exposure, the optimizer and offload per step; and per layout, the step (the pipeline's steady
state and bubble, its sends, the worst rank's exposed collectives), throughput and MFU.

It reads the memory pass's parameter counts and state dtypes (``memory_pass.memory``), so it
runs after it; the planner runs it only on the rows whose memory can fit.
"""
from __future__ import annotations

import numpy as np

from workbench.estimate.time import eager_ops
from workbench.estimate.time import kernels as eff
from workbench.estimate.memory.buffers import compute_dtype_bytes
from workbench.estimate.time.collectives import collective_time
from workbench.estimate.model.flops import model_flops_per_step
from workbench.estimate.cost_model.rows import Rows
from workbench.estimate.cost_model.memory_pass import FineTuneStates
from workbench.estimate.memory.model_states import (
    bytes_per_param, fp8_gather_bytes, optimizer_params,
)
from workbench.estimate.cost_model.pipeline_ranks import blocking_transfers
from workbench.estimate.time.step_time import (
    dp_exposed, dp_overlap, optimizer_and_offload, optimizer_bytes_moved, param_upload_time,
    pcie_bytes_per_s, placed, serial_comm_time, sp_grad_reduction,
)
from workbench.engines import engine_of
from workbench.scenario.layouts import LayoutGrid
from workbench.scenario.types import Scenario


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



def state_rates(tr, fts: FineTuneStates, zero) -> tuple:
    """(gradient bytes reduced per parameter, HBM bytes the optimizer step moves per parameter,
    whether both are the mixed-precision table's defaults) for the state dtype of
    ``finetune_states``; per row of ``zero`` where the dtype differs by ZeRO stage."""
    sd = fts.kwargs["state_dtype"]

    def rates(dtype: str) -> tuple[float, float]:
        state = bytes_per_param(tr.precision, tr.optimizer, 0, dtype, fts.kwargs["factored"])
        return (4 if dtype == "mixed" else state.grads), optimizer_bytes_moved(state)
    if not isinstance(sd, (tuple, list)):   # one dtype (a name or ``StateDtypes``) per stage
        grad, moved = rates(sd)
        return grad, moved, tr.method == "pretrain" and sd == "mixed"
    per = [rates(d) for d in sd]
    z = np.clip(np.asarray(zero), 0, 3)
    return (np.choose(z, [g for g, _ in per]), np.choose(z, [mv for _, mv in per]), False)


# The block data the time pass reads. ``block_sums`` gathers them all for every row (and every
# layout) in one gather from a (block kind, datum, table entry) stack.
_DATA = ("fwd", "bwd", "rc", "wgrad", "comm_tp", "comm_cp", "comm_ep")
_KINDS = ("dense", "moe", "head", "embedding")


def block_sums(rows: Rows) -> tuple[dict, dict]:
    """(per row: each of ``_DATA`` summed over the blocks the row's rank holds, its layers,
    head and embedding; per layout: each over the whole model, every layer, the head and the
    embedding)."""
    col = rows.table.column
    table = np.array([[col(kind, name) for name in _DATA] for kind in _KINDS])
    entry = rows.entry
    # the terms that are exactly zero are left out (x + 0.0 * y is x): the MoE blocks of a
    # model without MoE layers; the head and the embedding where a row's rank lacks them,
    # added only at the rows that hold them (most ranks of a deep pipeline hold neither)
    per_row = rows.dense * table[0][:, entry]                # (datum, row)
    if np.any(rows.moe):
        per_row = per_row + rows.moe * table[1][:, entry]
    for edge, kind in ((rows.has_head, 2), (rows.has_emb, 3)):
        at = np.flatnonzero(edge)
        if len(at):
            per_row[:, at] += table[kind][:, entry[at]]
    each = entry[rows.starts]                # each layout's block data (one per layout)
    n_moe = rows.layers_total - rows.dense_total
    dense, moe, head, emb = table[:, :, each]
    per_layout = (rows.layers_total - n_moe) * dense
    if np.any(n_moe):
        per_layout = per_layout + n_moe * moe
    per_layout = per_layout + head + emb
    return dict(zip(_DATA, per_row)), dict(zip(_DATA, per_layout))


def _nothing(seconds) -> bool:
    """Whether ``seconds`` (wrapper seconds) are all the plain 0.0 of an uncalibrated GPU
    (``kernels.wrapper_time``): adding them changes no figure."""
    return all(isinstance(w, float) and w == 0.0 for w in seconds)


def compute(rows: Rows, gpu, sums: dict) -> tuple:
    """Per row, per microbatch: (forward, backward, recompute) compute seconds (the wrappers'
    cost on a calibrated machine included) and the wrappers' ((layer, rest) forward,
    (layer, rest) backward) seconds. ``sums``: ``block_sums``' per-row data."""
    G = rows.grid
    wl_f, wl_b = eff.wrapper_time(gpu, G, "layer")
    wr_f, wr_b = eff.wrapper_time(gpu, G, "rest")
    wrappers = ((wl_f, wr_f), (wl_b, wr_b))
    if _nothing(wrappers[0] + wrappers[1]):
        return sums["fwd"], sums["bwd"], sums["rc"], wrappers
    edges = rows.has_head.astype(int) + rows.has_emb
    fwd = sums["fwd"] + rows.layers * wl_f + edges * wr_f / 2
    bwd = sums["bwd"] + rows.layers * wl_b + edges * wr_b / 2
    return fwd, bwd, sums["rc"], wrappers


def step_floor(base: Scenario, rows: Rows, gpu, overlaps: bool) -> np.ndarray:
    """Per layout: a lower bound of ``per_step``'s step — the worst rank's microbatches and
    the bubble, as ``per_step`` computes them. The step's other terms are sums of non-negative
    seconds (collective times and ``max(0, ...)`` exposures, the optimizer, offload), so the
    step is at least this (up to rounding)."""
    sums, totals = block_sums(rows)
    fwd, bwd, rc, wrappers = compute(rows, gpu, sums)
    g, worst = rows.layouts, rows.worst
    if overlaps:
        comm = sums["comm_tp"] + sums["comm_cp"] + sums["comm_ep"]
        compute_s, comm_half = worst(fwd + bwd + rc + comm), _comm_half(totals)
    else:
        compute_s, comm_half = worst(fwd + bwd + rc), 0.0
    mbs = base.training.global_batch // (g.micro_batch * g.dp)
    return mbs * compute_s + _bubble(rows, g, totals, wrappers, comm_half)


def _comm_half(totals: dict) -> np.ndarray:
    """Per layout: half the exposed TP/CP/EP seconds of one microbatch over the whole model
    (the pipeline's forward and backward each carry half); ``totals``: ``block_sums``'."""
    return (totals["comm_tp"] + totals["comm_cp"] + totals["comm_ep"]) / 2


def _model_total(rows: Rows, total: np.ndarray, wrappers: tuple) -> np.ndarray:
    """``total`` (a ``block_sums`` per-layout datum) plus the wrappers' (layer, rest) seconds
    per layer and for the rest."""
    if _nothing(wrappers):
        return total
    return total + rows.layers_total * rows.first(wrappers[0]) + rows.first(wrappers[1])


def _bubble(rows: Rows, g: LayoutGrid, totals: dict, wrappers: tuple, comm_half
            ) -> np.ndarray:
    """Per layout: the schedule's bubble from the mean forward, backward (with recompute) and
    weight-gradient seconds per microbatch over the ranks, ``comm_half`` added to the forward
    and the backward."""
    pp = g.pp
    (wl_f, wr_f), (wl_b, wr_b) = wrappers
    # means over all ranks: every layer, the head and the embedding, over p
    f_mean = _model_total(rows, totals["fwd"], (wl_f, wr_f)) / pp
    b_mean = (_model_total(rows, totals["bwd"], (wl_b, wr_b)) + totals["rc"]) / pp
    w_mean = totals["wgrad"] / pp
    return np.asarray(g.schedule.bubble(pp, np.asarray(g.chunks_per_rank),
                                        f_mean + comm_half / pp, b_mean + comm_half / pp,
                                        w_mean), dtype=float)


def times(base: Scenario, rows: Rows, gpu, mem: dict, vol: Volume | None) -> dict:
    """Per row, per microbatch: forward, backward, weight-gradient and recompute seconds and
    exposed TP/CP/EP communication (the wrappers' cost on a calibrated machine included); per
    step: exposed data-parallel communication, the optimizer, offload, the sequence-parallel
    gradient reduction. Adds each collective to ``vol``."""
    hw, m, tr, G = base.hardware, base.model, base.training, rows.grid
    mbs = rows.microbatches
    sums, totals = block_sums(rows)
    fwd, bwd, rc, wrappers = compute(rows, gpu, sums)
    comm = {dim: sums[f"comm_{dim}"] for dim in ("tp", "cp", "ep")}
    comm_sum = comm["tp"] + comm["cp"] + comm["ep"]
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
    grad_bytes, moved, default = state_rates(tr, fts, G.zero)
    og, ogather = dp_overlap(base, G.zero)
    gather = None if default else fts.buffer_kwargs.get("gather_bytes")
    if tr.precision == "fp8" and tr.fp8_param_gather:   # the linear weights gathered in FP8
        gather = fp8_gather_bytes(m, gather, rows.dense, rows.moe, pdense + pexpert,
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
    opt = rows.full(np.asarray(opt, dtype=float))
    if gpu.profile is not None:      # a calibrated machine: its eager runtime's cost too
        opt = opt + _optimizer_ops_time(
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
    return {"fwd": fwd, "bwd": bwd, "wgrad": sums["wgrad"], "recompute": rc,
            **{f"comm_{dim}": v for dim, v in comm.items()},
            "f": fwd + comm_sum / 2, "b": bwd + rc + comm_sum / 2, "dp_exposed": exp_dp,
            "sp_grads": sp_secs, "optimizer_time": opt,
            "offload_time": np.broadcast_to(off, rows.n), "p2p_bytes": p2p_bytes,
            "_wrappers": wrappers, "_totals": totals, "_offload": off}


def per_step(base: Scenario, g: LayoutGrid, rows: Rows, t: dict, vol: Volume | None,
             overlaps: bool) -> tuple[dict, dict]:
    """Per layout: the step (the pipeline's steady state and bubble, its sends, and the worst
    rank's exposed collectives, optimizer and offload), throughput and MFU; and, where nothing
    overlaps, each row's serial collective time per dimension."""
    hw, m, tr = base.hardware, base.model, base.training
    pp, mbs = g.pp, tr.global_batch // (g.micro_batch * g.dp)
    worst, totals = rows.worst, t["_totals"]
    if pp.max() > 1:
        p2p = np.where(pp > 1, collective_time("send_recv", rows.first(t["p2p_bytes"]),
                                               placed(pp, g.tp * g.cp * g.dp,
                                                      hw.gpus_per_node), hw), 0.0)
    else:                           # no pipeline: nothing sent
        p2p = np.zeros(len(g))
    serial = {}
    # the step's terms that are not the pipeline's compute, each the worst rank's
    terms = {"optimizer": worst(t["optimizer_time"]), "offload": worst(t["_offload"])}
    f_b = t["f"] + t["b"]
    if overlaps:
        bubble = _bubble(rows, g, totals, t["_wrappers"], _comm_half(totals))
        # fill and drain; where the engine's sends block (DeepSpeed), every micro-batch's too
        blocking = blocking_transfers(pp) * mbs if engine_of(tr).pp_blocking_p2p else 0
        terms.update(pp_exposed=(2 * (pp - 1) + blocking) * p2p, sp_grads=worst(t["sp_grads"]),
                     dp_exposed=worst(t["dp_exposed"]))
        step = (mbs * worst(f_b) + bubble + terms["pp_exposed"]
                + terms["sp_grads"] + terms["dp_exposed"])
    else:
        # Ranks that occupy every core of a calibrated machine: no collective hides behind
        # compute, so the step is the pipeline's compute plus every collective of the step of
        # the pipeline rank whose collectives take longest.
        bubble = _bubble(rows, g, totals, t["_wrappers"], 0.0)
        serial = serial_comm_time(vol.arrays(), rows.grid, hw)
        step = (mbs * worst(t["fwd"] + t["bwd"] + t["recompute"]) + bubble
                + worst(sum(serial.values())))
    step = step + terms["optimizer"] + terms["offload"]
    flops = model_flops_per_step(m, tr.seq_len, tr.global_batch, tr)
    layout = {"step": step, "bubble": bubble,
              "tokens_per_s": tr.seq_len * tr.global_batch / step,
              "mfu": flops / (step * g.world * eff.peak_flops(hw.gpu, tr.precision)),
              **terms, "worst_time_rank": rows.argworst(f_b)}
    if serial:
        layout["worst_comm_rank"] = rows.argworst(sum(serial.values()))
    return layout, serial


def _optimizer_ops_time(gpu, m, g: LayoutGrid, layer_tensors, has_emb, has_head,
                        optimizer: str):
    """The eager runtime's cost of a pipeline rank's optimizer step (calibrated profiles
    only): its optimizer's operations over the parameter tensors it updates."""
    edge = {(e, h): eager_ops.edge_tensors(m, e, h) for e in (False, True) for h in (False, True)}
    tensors = layer_tensors + np.where(has_emb, np.where(has_head, edge[True, True],
                                                         edge[True, False]),
                                       np.where(has_head, edge[False, True], 0))
    zero1 = (g.zero == 1) & (g.dense_shard > 1)      # whole tensors split over the shard group
    tensors = np.where(zero1, -(-tensors // np.maximum(g.dense_shard, 1)), tensors)
    return (eff.runtime_ops(gpu, 0, 0, eager_ops.optimizer_ops(tensors, optimizer))
            + tensors * eff.wrapper_time(gpu, g, "tensor")[0])



"""Many parallel layouts of one scenario at once (numpy), for searching layouts (the planner)
and scaling curves; today benchmarks/estimate_speed.py and the tests call it.

The model, hardware and training settings stay fixed; a ``LayoutGrid`` holds one row per layout
(dp, tp, pp, cp, ep, ZeRO stage, virtual stages, micro-batch) for one pipeline schedule. The
costs of a dense layer, an MoE layer, the head and the embedding depend only on (tp, cp, ep,
micro-batch): they come from the same scalar code as a single estimate
(``step_time.block_costs``, ``activations``, ``params``), once per distinct combination. What
depends on the rest — layers per pipeline rank, model states, microbatches in flight, buffers,
the pipeline bubble, data-parallel exposure, the optimizer — is computed by the shared formula
functions, which accept arrays. Two ranks are evaluated per layout: the first (embedding, most
microbatches in flight, most layers) and the last (head; under DualPipeV the other heavy rank).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from workbench.estimate import activations as act
from workbench.estimate.buffers import ALLOCATOR_FRACTION, buffer_terms, compute_dtype_bytes
from workbench.estimate.efficiency import peak_flops
from workbench.estimate.flops import model_flops_per_step
from workbench.estimate.model_states import model_states, optimizer_params
from workbench.estimate.params import embedding_params, head_params, is_moe_layer, layer_params
from workbench.estimate.pipeline import inflight_chunks, inflight_first_chunk, inflight_last_chunk
from workbench.estimate.step_time import (
    block_costs, dp_exposed, optimizer_and_offload, pipeline_bubble, sp_grad_reduction,
)
from workbench.estimate.comm import collective_time, group_span
from workbench.scenario.types import Scenario
from workbench.estimate.memory import NVME_STAGING_BYTES_PER_GPU
from workbench.units import TB, capacity_bytes, hbm_bytes


@dataclass
class LayoutGrid:
    """One row per layout; the field names and properties mirror ``scenario.types.Parallel`` so
    the shared formulas read either."""

    dp: np.ndarray
    tp: np.ndarray
    pp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    zero: np.ndarray
    virtual_stages: np.ndarray
    micro_batch: np.ndarray
    pp_schedule: str = "1f1b"
    sequence_parallel: bool = True
    reshard_after_forward: bool | None = None
    shard_group: None = None

    def __post_init__(self) -> None:
        for f in ("dp", "tp", "pp", "cp", "ep", "zero", "virtual_stages", "micro_batch"):
            setattr(self, f, np.asarray(getattr(self, f), dtype=np.int64))

    def __len__(self) -> int:
        return len(self.dp)

    @property
    def sp(self):
        return self.sequence_parallel & (self.tp > 1)

    @property
    def reshards(self):
        if self.reshard_after_forward is None:
            return self.pp == 1
        return np.full(len(self), self.reshard_after_forward)

    @property
    def dense_shard(self):
        return self.dp * self.cp

    @property
    def expert_data_parallel(self):
        return self.dp * self.cp // self.ep

    @property
    def expert_shard(self):
        return self.expert_data_parallel

    @property
    def chunks_per_rank(self):
        if self.pp_schedule == "dualpipev":
            return np.where(self.pp == 1, 1, 2)
        return np.where(self.pp == 1, 1, self.virtual_stages)


def _per_key(base: Scenario, tp: int, cp: int, ep: int, mb: int, sp: bool) -> dict:
    """Everything that depends only on (tp, cp, ep, micro-batch), from the scalar code."""
    par = dataclasses.replace(base.parallel, tp=tp, cp=cp, ep=ep, sequence_parallel=sp,
                              dp=max(ep, 1), pp=1, virtual_stages=1)
    tr = dataclasses.replace(base.training, micro_batch=mb)
    s = dataclasses.replace(base, parallel=par, training=tr)
    m = base.model
    costs = block_costs(s)
    x = act.activation_shape(tr, par)
    out = {"x": x}
    for kind, moe in (("dense", False), ("moe", True)):
        if moe and m.moe is None:
            continue
        c = costs[kind]
        index = next((i for i in range(m.layers) if is_moe_layer(m, i) == moe), 0)
        lp = layer_params(m, index, tp, ep)
        out[kind] = {"fwd": c.fwd, "bwd": c.bwd, "wgrad": c.wgrad, "rc": c.recompute,
                     "comm": sum(v for _, v in c.comm),
                     "act": act.layer_bytes(m, x, moe),
                     "ws": act.full_recompute_working_set(m, x, moe),
                     "pdense": lp.dense, "pexpert": lp.expert}
    for kind in ("head", "embedding"):
        c = costs[kind]
        out[kind] = {"fwd": c.fwd, "bwd": c.bwd, "wgrad": c.wgrad, "rc": c.recompute,
                     "comm": sum(v for _, v in c.comm)}
    out["emb_act"] = act.embedding_bytes(m, x)
    out["head_act"] = act.head_bytes(m, x)
    out["emb_params"] = embedding_params(m, tp)
    out["head_params_same"] = head_params(m, tp, separate_stage=False)
    out["head_params_sep"] = head_params(m, tp, separate_stage=True)
    return out


def evaluate_layouts(base: Scenario, g: LayoutGrid, cache: dict | None = None
                     ) -> dict[str, np.ndarray]:
    """Step time, worst-GPU memory, fit and throughput for every layout of the grid (the layouts
    must be valid for the base scenario: ``scenario.validate`` rules). ``cache`` keeps the per-(tp,
    cp, ep, micro-batch) block costs between calls that differ only in schedule or offload (the
    planner's passes); it must not be shared between different models, hardware or training."""
    hw, m, tr = base.hardware, base.model, base.training
    n = len(g)
    keys = np.stack([g.tp, g.cp, g.ep, g.micro_batch], axis=1)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    cache = {} if cache is None else cache
    sp = base.parallel.sequence_parallel
    per = []
    for k in uniq:
        key = (*map(int, k), sp, tr.recompute)
        if key not in cache:
            cache[key] = _per_key(base, *map(int, k), sp=sp)
        per.append(cache[key])

    columns: dict = {}

    def col(path: tuple, default: float = 0.0) -> np.ndarray:
        if (path, default) in columns:
            return columns[path, default]
        vals = []
        for d in per:
            v = d
            for p in path:
                v = v.get(p) if isinstance(v, dict) else None
                if v is None:
                    break
            vals.append(default if v is None else v)
        columns[path, default] = np.asarray(vals, dtype=float)[inverse]
        return columns[path, default]

    p = g.pp
    cpr = g.chunks_per_rank
    chunks = p * cpr
    L = m.layers
    base_l, rem = L // chunks, L % chunks
    vshape = g.pp_schedule == "dualpipev"
    if vshape:
        c0 = (rem > 0).astype(int)
        cl = (rem > p - 1).astype(int) + (rem > p).astype(int)
    else:
        c0 = np.minimum(cpr, -(-rem // p))
        cl = np.clip(-(-(rem - (p - 1)) // p), 0, cpr)
    n0 = cpr * base_l + c0
    nl = cpr * base_l + cl
    single = p == 1
    if m.moe is None:                             # every layer dense
        dense0, densel = n0, nl
        d_layers = L
    else:   # MoE models keep their leading dense layers in chunk 0 (rank 0)
        d_layers = m.moe.dense_layers
        size0 = base_l + (rem > 0)                # layers in chunk 0
        dense0 = np.where(single, d_layers, np.minimum(d_layers, size0))
        densel = np.where(single, d_layers, 0)
    ranks = {
        "first": {"layers": n0, "dense": np.minimum(dense0, n0), "emb": np.ones(n, bool),
                  "head": single | vshape, "rank": np.zeros(n, int)},
        "last": {"layers": nl, "dense": np.minimum(densel, nl), "emb": single,
                 "head": single | (not vshape), "rank": p - 1},
    }
    mbs = tr.global_batch // (g.micro_batch * g.dp)
    head_params_r = np.where(single | vshape, col(("head_params_same",)),
                             col(("head_params_sep",)))
    e = compute_dtype_bytes(tr.precision)
    x_s = tr.seq_len // g.cp
    x = dataclasses.replace(per[0]["x"], s=x_s, b=g.micro_batch, t=g.tp, sp=g.sp)

    res = {}
    for name, r in ranks.items():
        nd = r["dense"]
        nm = r["layers"] - nd
        has_emb = np.asarray(r["emb"], bool) & np.ones(n, bool)
        has_head = np.asarray(r["head"], bool) & np.ones(n, bool)

        def blocks(field: str) -> np.ndarray:
            return (nd * col(("dense", field)) + nm * col(("moe", field))
                    + has_head * col(("head", field)) + has_emb * col(("embedding", field)))

        fwd, bwd, wgrad, rc, comm = (blocks(f) for f in ("fwd", "bwd", "wgrad", "rc", "comm"))
        pdense = (nd * col(("dense", "pdense")) + nm * col(("moe", "pdense"))
                  + has_emb * col(("emb_params",)) + has_head * head_params_r)
        pexpert = nm * col(("moe", "pexpert"))
        unit = np.maximum.reduce([
            np.where(nd > 0, col(("dense", "pdense")) + col(("dense", "pexpert")), 0),
            np.where(nm > 0, col(("moe", "pdense")) + col(("moe", "pexpert")), 0),
            has_emb * col(("emb_params",)), has_head * head_params_r])
        ms = model_states(pdense, pexpert, tr.precision, tr.optimizer, g.zero, g.dense_shard,
                          g.expert_shard, tr.offload)
        inflight = inflight_chunks(g, mbs, r["rank"])
        activ = (nd * col(("dense", "act")) + nm * col(("moe", "act"))) * inflight / cpr
        activ = activ + has_emb * col(("emb_act",)) * inflight_first_chunk(g, mbs)
        activ = activ + has_head * col(("head_act",)) * inflight_last_chunk(g, mbs)
        if tr.recompute == "full":
            activ = activ + np.maximum(np.where(nd > 0, col(("dense", "ws")), 0),
                                       np.where(nm > 0, col(("moe", "ws")), 0))
        bufs = buffer_terms(m, g, x, tr.precision, pdense + pexpert, unit, has_head, nm > 0)
        rest = ms.params + ms.grads + ms.optimizer + activ + sum(bufs.values())
        total = rest * (1 + ALLOCATOR_FRACTION)
        f = fwd + comm / 2
        b = bwd + rc + comm / 2
        exp_dp = dp_exposed(g, hw, tr.precision, mbs, pdense, pexpert, fwd, bwd,
                            units=r["layers"] + 1, expert_units=nm)
        opt, off = optimizer_and_offload(hw, tr, optimizer_params(
            pdense, pexpert, g.zero, g.dense_shard, g.expert_shard))
        res[name] = {"f": f, "b": b, "total": total, "dp": exp_dp, "opt": opt, "off": off,
                     "host": ms.host, "nvme": ms.nvme}

    # Means over all ranks for the bubble: every layer, the head and the embedding, over p.
    n_moe_total = L - d_layers if m.moe is not None else 0
    n_dense_total = L - n_moe_total

    def total_of(field: str) -> np.ndarray:
        return (n_dense_total * col(("dense", field)) + n_moe_total * col(("moe", field))
                + col(("head", field)) + col(("embedding", field)))

    f_mean = (total_of("fwd") + total_of("comm") / 2) / p
    b_mean = (total_of("bwd") + total_of("rc") + total_of("comm") / 2) / p
    w_mean = total_of("wgrad") / p
    steady = np.maximum(res["first"]["f"] + res["first"]["b"], res["last"]["f"] + res["last"]["b"])
    bubble = pipeline_bubble(g.pp_schedule, p, cpr, f_mean, b_mean, w_mean)
    nbytes = tr.seq_len * g.micro_batch / g.cp * m.hidden * e / np.where(g.sp, g.tp, 1)
    p2p = np.where(p > 1, collective_time("send_recv", nbytes, group_span(
        p, g.tp * g.cp * g.dp, hw.gpus_per_node), hw), 0.0)
    sp_grads = np.maximum(*(sp_grad_reduction(base, r["layers"], has, g.zero, g.tp, mbs, g.sp,
                                              g.dp * g.cp, g.pp)[2]
                            for r, has in ((ranks["first"], single | vshape),
                                           (ranks["last"], single | (not vshape)))))
    step = (mbs * steady + bubble + 2 * (p - 1) * p2p + sp_grads
            + np.maximum(res["first"]["dp"], res["last"]["dp"])
            + np.maximum(res["first"]["opt"], res["last"]["opt"])
            + np.maximum(res["first"]["off"], res["last"]["off"]))
    memory = np.maximum(res["first"]["total"], res["last"]["total"])
    tokens = tr.seq_len * tr.global_batch / step
    world = g.dp * g.tp * g.pp * g.cp
    flops = model_flops_per_step(m, tr.seq_len, tr.global_batch)
    # Offload: what a node's GPUs put in host DDR and on NVMe (memory.estimate_memory's rule)
    staging = NVME_STAGING_BYTES_PER_GPU if tr.offload == "nvme" else 0.0
    gpn = hw.gpus_per_node
    host_node = gpn * (np.maximum(res["first"]["host"], res["last"]["host"]) + staging)
    nvme_node = gpn * np.maximum(res["first"]["nvme"], res["last"]["nvme"])
    host_fits = ((host_node <= capacity_bytes(hw.host.memory_gb))
                 & (nvme_node <= hw.storage.drives * hw.storage.drive.capacity_tb * TB))
    return {"step": step, "bubble": bubble, "memory_per_gpu": memory, "host_fits": host_fits,
            "fits": memory <= hbm_bytes(hw.gpu.memory_gb), "tokens_per_s": tokens,
            "mfu": flops / (step * world * peak_flops(hw.gpu, tr.precision))}


def valid_layouts(base: Scenario, g: LayoutGrid) -> np.ndarray:
    """Which rows pass the layout rules (``scenario.rules``, layout=True) for the
    base scenario's model, hardware and training; tests hold the two in agreement."""
    m, tr, hw = base.model, base.training, base.hardware
    ok = g.dp * g.tp * g.pp * g.cp == hw.world
    ok &= (m.heads % g.tp == 0) & (m.kv_heads % g.tp == 0) & (m.ffn_hidden % g.tp == 0)
    ok &= m.layers >= g.pp * g.chunks_per_rank
    ok &= (g.dp * g.cp) % g.ep == 0
    ok &= ~((g.zero == 2) & (g.pp > 1) & (g.dp * g.cp > 1))
    if m.moe is None:
        ok &= g.ep == 1
    else:
        ok &= (m.moe.experts % g.ep == 0) & (m.moe.expert_ffn_hidden % g.tp == 0)
    per_step = g.micro_batch * g.dp
    ok &= tr.global_batch % per_step == 0
    mbs = tr.global_batch // np.maximum(per_step, 1)
    need = {"1f1b": g.pp, "interleaved-1f1b": g.pp, "zero-bubble": g.pp,
            "dualpipev": 2 * g.pp, "gpipe": 1}[g.pp_schedule]
    ok &= (g.pp == 1) | (mbs >= need)
    if g.pp_schedule in ("interleaved-1f1b", "zero-bubble"):
        ok &= (g.pp == 1) | (g.virtual_stages >= 2)
    else:
        ok &= g.virtual_stages == 1
    ok &= (g.virtual_stages == 1) | (g.pp > 1)
    ok &= ~g.sp | (tr.seq_len % g.tp == 0)
    ok &= (g.cp == 1) | (tr.seq_len % (2 * g.cp) == 0)
    if tr.offload != "none":
        ok &= g.zero >= 1
    return ok

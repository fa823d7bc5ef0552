"""Step time: the pipeline stages' times, exposed communication per parallel dimension, the
pipeline bubble, the optimizer step and offload traffic.

The blocks' own per-microbatch costs (forward, backward, recompute, exposed TP / EP / CP
communication) are ``block_costs``'. What overlaps (stated, as the engines
do it): DP gradient reduction overlaps the backward of the last microbatch where the engine
overlaps it (Megatron-LM ``overlap_grad_reduce``, DDP buckets, FSDP2 reduce-scatter per unit,
DeepSpeed ``overlap_comm``; ``dp_overlap``); ZeRO parameter all-gathers overlap the forward
where the engine prefetches them; PP sends are exposed only in the fill and drain.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from workbench.estimate.arrays import plain
from workbench.estimate.time import kernels as eff
from workbench.estimate.memory.buffers import compute_dtype_bytes
from workbench.estimate.time.collectives import collective_time
from workbench.estimate.placement import Span, group_span
from workbench.engines import engine_of
from workbench.estimate.model.params import sequence_parallel_replicated
from workbench.scenario.types import Scenario

DIMS = ("dp", "tp", "pp", "cp", "ep")


@dataclass
class StageTime:
    """One pipeline rank, per microbatch (seconds)."""

    rank: int
    fwd: float = 0.0          # forward compute
    bwd: float = 0.0          # backward compute (input + weight gradients)
    wgrad: float = 0.0        # the weight-gradient part of ``bwd``
    recompute: float = 0.0
    comm: dict = field(default_factory=lambda: {d: 0.0 for d in DIMS})   # exposed, per mb

    @property
    def f(self) -> float:
        """Forward block on the timeline: compute plus half the exposed communication (the
        collectives are split evenly between the passes, as TP and EP issue them)."""
        return self.fwd + sum(self.comm.values()) / 2

    @property
    def b(self) -> float:
        """Backward block on the timeline: compute, recompute and the other half."""
        return self.bwd + self.recompute + sum(self.comm.values()) / 2


@dataclass
class StepTime:
    step: float
    compute: float
    recompute: float
    bubble: float
    optimizer: float
    offload: float
    comm_exposed: dict
    stages: list[StageTime]
    volume: dict          # bytes and counts per dimension and collective, per GPU per step
    #                       (a GPU of pipeline rank 0)
    volume_per_stage: list[dict] = field(default_factory=list)   # one per pp rank


def placed(size, stride, gpus_per_node: int) -> Span:
    """``placement.group_span``, compacted (``_compact``)."""
    return _compact(group_span(size, stride, gpus_per_node))


def _compact(span: Span) -> Span:
    """``span`` with a placement field that every row shares (each group inside one node, or
    one member per node) as that one number: the same span element by element, so
    ``collective_time`` gives the same seconds, computing only the link tier every row uses."""
    per_node, nodes = span.per_node, span.nodes
    if np.ndim(nodes) and not (nodes != 1).any():
        nodes = 1
    if np.ndim(per_node) and not (per_node != 1).any():
        per_node = 1
    return Span(span.size, per_node, nodes)


# Rows from which ``_split_time`` times a collective on the rows that run it only: below it
# numpy's per-call cost of picking them out outweighs the rows saved (timed on
# benchmarks/estimate_speed.py's two grids: ~430 rows a call on the small one, slower with
# the subset; 1,200-8,800 rows a call on the 405B one, faster).
_SUBSET_ROWS = 1024


def _split_time(kind: str, nbytes, span: Span, hw, run, split):
    """Per row: ``split`` collectives of ``nbytes / split`` bytes each over ``span`` where
    ``run``, else 0 — on a large grid timed on the rows that run them only
    (``collective_time`` is element by element, so the seconds are the same)."""
    if np.size(run) < _SUBSET_ROWS or run.all():
        return np.where(run, split * collective_time(kind, nbytes / split, span, hw), 0.0)
    at = np.flatnonzero(run)

    def pick(x):
        return x[at] if np.ndim(x) else x
    sub = _compact(Span(pick(span.size), pick(span.per_node), pick(span.nodes)))
    out = np.zeros(run.shape)
    out[at] = pick(split) * collective_time(kind, pick(nbytes) / pick(split), sub, hw)
    return out


def group_sizes(par) -> dict[str, int]:
    """Ranks in one group of each dimension's collectives (pipeline sends pair two ranks)."""
    return {"dp": par.dp * par.cp, "tp": par.tp, "cp": par.cp, "ep": par.ep, "pp": 2}


def serial_comm_time(volume: dict, par, hw) -> dict:
    """Seconds per dimension when every collective of ``volume`` (per dim and collective:
    bytes and count per step; numbers or arrays, one entry per row of a grid ``par``) runs in
    turn, none overlapped. Broadcasts are issued together and waited for at once
    (ZeroRedundancyOptimizer's ``_sync_params``): one in-step latency, the rest back to back.
    Expert reductions over the expert-data-parallel group are timed at the dense group's size
    (an upper bound)."""
    sizes = group_sizes(par)
    gpn = hw.gpus_per_node
    out = {}
    for dim, ops in volume.items():
        span = group_span(sizes.get(dim, 2), 1, gpn)
        total = 0.0
        for kind, v in ops.items():
            count = np.asarray(v["count"], dtype=float)
            one = np.asarray(v["bytes"]) / np.where(count > 0, count, 1)
            each = collective_time(kind, one, span, hw)
            if kind == "broadcast":
                rest = collective_time(kind, one, span, hw, back_to_back=True)
                secs = each + (count - 1) * rest
            else:
                secs = count * each
            total = total + np.where(count > 0, secs, 0.0)
        out[dim] = plain(np.asarray(total, dtype=float))
    return out


def sp_grad_reduction(s: Scenario, layers, has_head, zero, tp, mbs, sp, dp_cp=1, pp=1) -> tuple:
    """(bytes, count, seconds) per step of the TP all-reduce of sequence-parallel weights'
    gradients on a pipeline rank (arrays allowed). Megatron-LM coalesces them into one fp32
    all-reduce per step (``_allreduce_layernorm_grads``); FSDP2 (ZeRO-2/3 over dp x cp > 1)
    redistributes each one's partial gradient to its layout before it reduce-scatters, in the
    compute dtype: every microbatch, or once per step under pipelining (no-sync until the last
    microbatch, as ``_dp_counts`` counts the reduce-scatters)."""
    elements, tensors = sequence_parallel_replicated(s.model, layers, has_head)
    fsdp = (np.asarray(zero) >= 2) & (np.asarray(dp_cp) > 1)
    nbytes = np.where(fsdp, elements / np.maximum(tensors, 1)
                      * compute_dtype_bytes(s.training.precision), elements * 4)
    per_step = np.where(np.asarray(pp) > 1, 1, mbs)
    count = np.where(sp & (tensors > 0), np.where(fsdp, tensors * per_step, 1), 0)
    if not np.any(count):          # no sequence-parallel rank: no reduction to time
        return nbytes, count, np.zeros(np.broadcast_shapes(count.shape, np.shape(nbytes),
                                                           np.shape(tp)))
    span = placed(tp, 1, s.hardware.gpus_per_node)
    secs = np.where(count > 0, count * collective_time("all_reduce", nbytes, span, s.hardware),
                    0.0)
    return nbytes, count, secs


def dp_overlap(s: Scenario, zero) -> tuple:
    """(gradient reduction overlapped with the backward, parameter all-gathers overlapped with
    the forward) for ``s`` at ZeRO stage ``zero`` (an int or an array): the scenario's
    ``parallel.overlap_grad_reduce`` / ``overlap_param_gather`` where set, else what its engine
    does at that stage (``Engine.dp_overlap_at``)."""
    grad, gather = engine_of(s.training).dp_overlap_at(zero)
    par = s.parallel
    return (grad if par.overlap_grad_reduce is None else par.overlap_grad_reduce,
            gather if par.overlap_param_gather is None else par.overlap_param_gather)


def dp_exposed(par, hw, precision: str, mbs, dense, expert, fwd, bwd,
               vol=None, units=1, expert_units=None, trained=None, grad_bytes=4,
               gather_bytes=None, overlap_grad=True, overlap_gather=True, upload_s=0.0):
    """Exposed data-parallel communication of one pipeline rank per step (arrays allowed).
    Dense parameters reduce over dp x cp (ZeRO shards over ``dense_shard``, HSDP replicas
    all-reduce the shards); expert parameters over their expert-data-parallel group
    (dp x cp / ep). Gradients hide behind the last microbatch's backward where
    ``overlap_grad`` (else they run after it, in full: Megatron-LM without
    --overlap-grad-reduce, DeepSpeed without overlap_comm), parameter gathers behind the forward
    where ``overlap_gather`` (ZeRO-3: behind each microbatch's forward and backward; else each
    in full: Megatron's distributed optimizer without --overlap-param-gather and DeepSpeed
    ZeRO-1/2 gather after the optimizer step); both arrays allowed (``dp_overlap``). Under ZeRO-3
    each of the stage's ``units`` FSDP units (a block each, plus the root) gathers and reduces
    its own parameters: ``units`` collectives of 1/units of the bytes each. Under EP the experts
    of each MoE layer are a unit of their own over the expert-data-parallel group (torchtitan's
    ``apply_fsdp``: ``fully_shard(block.moe.experts, mesh=edp_mesh)``): ``expert_units`` (the
    stage's MoE layers; default ``units``) collectives for the expert bytes. Fine-tuning:
    gradients exist for the ``trained`` (dense, expert) parameters only, reduced in
    ``grad_bytes`` each (DDP and FSDP2 reduce only parameters with gradients), while ZeRO-3
    gathers every parameter in its stored format (``gather_bytes`` per parameter).
    ``upload_s``: seconds to copy the stage's ZeRO-3 parameter shard from host memory or NVMe
    to the GPU once; with the parameters offloaded every all-gather round pays it first
    (FSDP2 ``CPUOffloadPolicy``: the sharded parameter is copied to the device in the
    all-gather's copy-in, torch 2.13 distributed/fsdp/_fully_shard/_fsdp_param.py
    ``FSDPParam.all_gather_inputs`` ``self._sharded_param_data.to(self.device)``; DeepSpeed
    ZeRO-3 ``offload_param`` fetches the partition before each gather)."""
    gpn = hw.gpus_per_node
    zero = np.asarray(par.zero)
    zmin, zmax = int(zero.min()), int(zero.max())
    # whether a row shards (ZeRO > 0) and runs ZeRO-3: one bool where every row agrees, so a
    # grid of one stage computes only its own branch below
    sharded = zmin > 0 if zmin > 0 or zmax == 0 else zero > 0
    stage3 = zmin == 3 if zmin == 3 or zmax < 3 else zero == 3
    grad_b = grad_bytes   # fp32 gradient reduction (Megatron-LM main grads; FSDP2 reduce_dtype)
    param_b = compute_dtype_bytes(precision) if gather_bytes is None else gather_bytes
    tdense, texpert = (dense, expert) if trained is None else trained
    counts = _dp_counts(par, mbs, zmax)
    ag = rs = ar = 0.0
    for nparams, ngrads, n, shard, stride, group_units in _dp_groups(
            par, dense, expert, tdense, texpert, units, expert_units):
        shard = _where(sharded, shard, n)
        rep = n // shard
        shard_span = placed(shard, stride, gpn)
        # DDP all-reduces the whole gradient over the group; under ZeRO the shard group
        # reduce-scatters it and, with HSDP replicas, the replicas all-reduce their shard.
        replicas = rep > 1
        if zmax > 0 and np.any(replicas & sharded):
            ar_span = placed(_where(sharded, rep, n), _where(sharded, stride * shard, stride), gpn)
            ar_bytes = _where(sharded, np.where(replicas, ngrads * grad_b / shard, 0),
                              ngrads * grad_b)
        else:
            # no replicas: ZeRO rows reduce nothing more (0 bytes, no collective below) and
            # DDP rows all-reduce over the whole group, which is their ``shard_span``
            ar_span, ar_bytes = shard_span, _where(sharded, 0, ngrads * grad_b)
        per_unit = _where(stage3, group_units, 1)
        several = n > 1
        for kind, nbytes, span in (("all_gather", nparams * param_b, shard_span),
                                   ("reduce_scatter", ngrads * grad_b, shard_span),
                                   ("all_reduce", ar_bytes, ar_span)):
            split = per_unit if kind != "all_reduce" else 1
            one = 0.0      # no row runs it: DDP rows gather and scatter nothing
            if kind == "all_reduce" or zmax > 0:
                run = (counts[kind] > 0) & several & (nbytes > 0)
                if np.any(run):
                    one = _split_time(kind, nbytes, span, hw, run, split)
            if vol is not None:
                vol.add("dp", kind, nbytes / split, np.where(one > 0, counts[kind] * split, 0))
            if kind == "all_gather":
                ag = ag + one
            elif kind == "reduce_scatter":
                rs = rs + one
            else:
                ar = ar + one
    og, ogather = _flag(overlap_grad), _flag(overlap_gather)
    ddp = zero12 = zero3 = 0.0
    if zmin == 0:
        ddp = _hide(og, ar, bwd)
    if zmax > 0 and zmin < 3:
        zero12 = _hide(og, rs + ar, bwd) + _hide(ogather, ag, fwd)
    if zmax == 3:
        gathers_bwd = np.where(par.reshards, mbs, 0)
        gathers_fwd = counts["all_gather"] - gathers_bwd
        # ZeRO-3 with the parameter shard offloaded: each unit's shard is copied in before its
        # all-gather, on the same prefetching stream (``upload_s``: the stage's whole shard once)
        ag3 = ag + upload_s
        zero3 = (_where(ogather, gathers_fwd * np.maximum(0.0, ag3 - fwd)
                        + gathers_bwd * np.maximum(0.0, ag3 - bwd / 2),
                        counts["all_gather"] * ag3)
                 + counts["reduce_scatter"] * _hide(og, rs, bwd / 2) + ar)
    if zmax == 0:
        out = ddp
    elif zmin > 0 and zmax < 3:
        out = zero12
    elif zmin == 3:
        out = zero3
    else:
        out = np.where(zero == 0, ddp, np.where(zero < 3, zero12, zero3))
    shape = np.broadcast_shapes(np.shape(out), zero.shape)
    if np.shape(out) != shape:        # a stage's terms that are one number for every row
        out = np.full(shape, out)
    return plain(np.asarray(out, dtype=float))


def _dp_groups(par, dense, expert, tdense, texpert, units, expert_units) -> list:
    """The data-parallel groups that reduce parameters, each (parameters, trained
    parameters, ranks, shard group, stride, FSDP units). Without EP the experts replicate over
    the same ranks as the dense weights: one reduction (DDP buckets and FSDP2 units hold
    both), so they join the dense group; under EP they reduce over their own
    expert-data-parallel group (a group with no parameters is left out: no cost)."""
    tp = np.asarray(par.tp)
    n_dense = np.asarray(par.dp) * par.cp
    if not (np.any(expert) or np.any(texpert)):        # a dense model: one group
        return [(dense, tdense, n_dense, par.dense_shard, tp, units)] if np.any(dense) else []
    ep = np.asarray(par.ep)
    joined = ep == 1
    expert_units = units if expert_units is None else np.maximum(expert_units, 1)
    groups = [(dense + np.where(joined, expert, 0), tdense + np.where(joined, texpert, 0),
               n_dense, par.dense_shard, tp, units),
              (np.where(joined, 0, expert), np.where(joined, 0, texpert),
               np.asarray(par.expert_data_parallel), par.expert_shard, tp * ep, expert_units)]
    return [g for g in groups if np.any(g[0])]


def _where(cond, yes, no):
    """``np.where``; where ``cond`` is one Python bool for every row, the branch itself."""
    if isinstance(cond, bool):
        return yes if cond else no
    return np.where(cond, yes, no)


def _flag(x):
    """An overlap switch: one bool, or a bool array per row."""
    x = np.asarray(x, dtype=bool)
    return bool(x) if x.ndim == 0 else x


def _hide(overlap, secs, under):
    """``secs`` less what hides under ``under`` seconds of compute where ``overlap``."""
    return _where(overlap, np.maximum(0.0, secs - under), secs)


def _dp_counts(par, mbs, zmax: int) -> dict:
    """Data-parallel collectives per step: DDP one all-reduce; ZeRO-1/2 one reduce-scatter and
    one all-gather (plus the HSDP-style replica all-reduce); ZeRO-3 (FSDP2) an all-gather per
    microbatch forward (once under pipelining without resharding) and per microbatch backward
    when resharding, a reduce-scatter per microbatch (once under pipelining: no-sync until the
    last microbatch). ``zmax``: the highest ZeRO stage of ``par`` (below 3, no stage-3 counts
    to compute)."""
    zero = np.asarray(par.zero)
    if zmax < 3:
        once = np.where(zero == 0, 0, 1)
        return {"all_gather": once, "reduce_scatter": once, "all_reduce": np.asarray(1)}
    pp = np.asarray(par.pp)
    fwd = np.where(np.asarray(par.reshards) | (pp == 1), mbs, 1)
    bwd = np.where(par.reshards, mbs, 0)
    return {"all_gather": np.where(zero == 0, 0, np.where(zero < 3, 1, fwd + bwd)),
            "reduce_scatter": np.where(zero == 0, 0, np.where(zero < 3, 1,
                                                              np.where(pp > 1, 1, mbs))),
            "all_reduce": np.asarray(1)}


def pcie_bytes_per_s(hw) -> float:
    """Host copies over the GPU's PCIe link per direction: 80 % of its x16 rate (15.75 GB/s
    per PCIe 3.0 x16, doubling each generation; the 80 % an assumption, not a measurement)."""
    return hw.gpu.pcie_lanes / 16 * 15.75e9 * 2 ** (hw.gpu.pcie_gen - 3) * 0.8


def param_upload_time(hw, tr, params_far):
    """Seconds to copy a GPU's offloaded ZeRO-3 parameter shard (``params_far`` bytes; arrays
    allowed) to it once: over its PCIe link, and from NVMe first (every GPU of the node reads
    its shard through the node's drives) when offload is nvme."""
    far = np.asarray(params_far, dtype=float)
    t = far / pcie_bytes_per_s(hw)
    if tr.offload == "nvme":
        drives = max(1, hw.storage.drives)
        t = t + far * hw.gpus_per_node / (drives * hw.storage.drive.read_gb_per_s * 1e9)
    return plain(t)


def optimizer_bytes_moved(state) -> float:
    """HBM bytes an optimizer step moves per parameter for ``state`` (a ``BytesPerParam``): it
    reads the gradient, reads and writes every state (master copy included), and writes the
    parameter; without a master copy it reads the parameter too. The mixed-precision table's
    AdamW gives the 30 B of ``optimizer_and_offload``."""
    master = state.params < 4 and state.optimizer >= 4 + 4   # a 16-bit weight beside fp32 ones
    return state.grads + 2 * state.optimizer + state.params * (1 if master else 2)


def optimizer_and_offload(hw, tr, local_params, moved_per_param: float | None = None,
                          params_up=True) -> tuple:
    """(optimizer step on the GPU, offload traffic) in seconds for one GPU updating
    ``local_params`` parameters (arrays allowed).
    On the GPU, Adam reads master, grad, m, v and writes master, m, v and the 16-bit copy:
    30 B/param (SGD: 22), at HBM speed. With ZeRO-Offload, 16-bit gradients go down and
    parameters up over the GPU's PCIe link (80 % of its x16 rate per direction, 15.75 GB/s per
    PCIe 3.0 x16 doubling each generation), the CPU streams the optimizer for every GPU of the node
    through DDR (70 % of channels x MT/s x 8 B), and ZeRO-Infinity reads and writes 12 B/param
    on the NVMe drives. The 80 % and 70 % are assumptions, not measurements.
    ``moved_per_param`` replaces the 30 / 22 B where the states differ (``optimizer_bytes_moved``).
    ``params_up`` False (per row): ZeRO-3 keeps the updated parameters in host memory and copies
    each shard in before its all-gathers instead (``param_upload_time``), not once here."""
    per = moved_per_param if moved_per_param is not None else (
        30 if tr.optimizer == "adamw" else 22)
    moved = per * np.asarray(local_params, dtype=float)
    if tr.offload == "none":
        return plain(eff.memory_time(moved, eff.on_hardware(hw), kernels=4,
                                     kind="optimizer")), 0.0
    t_pcie = (2 + 2 * np.asarray(params_up)) * np.asarray(local_params) / pcie_bytes_per_s(hw)
    t_cpu = hw.gpus_per_node * moved / (hw.host.memory_gb_per_s * 1e9 * 0.7)
    t_nvme = 0.0
    if tr.offload == "nvme":
        drives, d = max(1, hw.storage.drives), hw.storage.drive
        per_node = 12 * np.asarray(local_params) * hw.gpus_per_node
        t_nvme = per_node / (drives * d.read_gb_per_s * 1e9) + per_node / (
            drives * d.write_gb_per_s * 1e9)
    return 0.0, plain(t_pcie + t_cpu + t_nvme)

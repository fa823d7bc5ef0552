"""Per-GPU memory: model states + activations + buffers for every pipeline rank, the worst GPU,
and what offload puts in host DDR and on NVMe.

GPUs of one pipeline rank are alike (TP/DP/CP/EP ranks hold equal shares), so the memory model
evaluates one GPU per pipeline rank; the worst is the one ``memory.per_gpu`` reports. The first
rank holds the embedding and the most microbatches in flight; the last holds the head and loss
(with DualPipeV both sit on rank 0).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from workbench.estimate import activations as act
from workbench.estimate.buffers import allocator_allowance, buffer_terms
from workbench.estimate.model_states import model_states
from workbench.estimate.params import StageParams, is_moe_layer, stage_params
from workbench.estimate.pipeline import inflight_chunks, inflight_first_chunk, inflight_last_chunk
from workbench.scenario.types import Scenario
from workbench.units import GB, TB, capacity_bytes, hbm_bytes

# ZeRO-Infinity's NVMe staging: DeepSpeed's default offload_param/offload_optimizer
# buffer_count 5 x buffer_size 1e8 elements, in the 2-byte compute dtype, pinned in host memory.
NVME_STAGING_BYTES_PER_GPU = 5 * 100_000_000 * 2


@dataclass(frozen=True)
class GPUMemory:
    """Bytes on one GPU, by category (the contract's ``memory.per_gpu`` keys)."""

    params: float
    grads: float
    optimizer: float
    activations: float
    buffers: float

    @property
    def total(self) -> float:
        return self.params + self.grads + self.optimizer + self.activations + self.buffers

    def as_dict(self) -> dict[str, float]:
        return {"params": self.params, "grads": self.grads, "optimizer": self.optimizer,
                "activations": self.activations, "buffers": self.buffers, "total": self.total}


@dataclass(frozen=True)
class StageMemory:
    """One pipeline rank's GPU: its memory and what it holds."""

    rank: int
    layers: int
    has_embedding: bool
    has_head: bool
    inflight_microbatches: float   # chunk units divided by chunks per rank
    memory: GPUMemory
    host: float
    nvme: float
    buffers: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class MemoryEstimate:
    per_stage: list[StageMemory]
    worst: StageMemory
    capacity: float
    host_per_node: float
    nvme_per_node: float
    host_capacity_per_node: float
    nvme_capacity_per_node: float
    layer_terms: dict[str, float]       # one layer's saved tensors, no recompute (teaching view)
    warnings: list[str]

    @property
    def per_gpu(self) -> GPUMemory:
        return self.worst.memory

    @property
    def fits(self) -> bool:
        return self.per_gpu.total <= self.capacity

    @property
    def host_fits(self) -> bool:
        return self.host_per_node <= self.host_capacity_per_node

    @property
    def nvme_fits(self) -> bool:
        return self.nvme_per_node <= self.nvme_capacity_per_node


def _stage_activations(s: Scenario, stage: StageParams, x: act.ActivationShape) -> tuple[float, float]:
    """(activation bytes at the rank's peak, in-flight microbatches in whole-stage units)."""
    par, model, m = s.parallel, s.model, s.microbatches
    per_kind = {moe: act.layer_bytes(model, x, moe) for moe in {lp.is_moe
                                                                 for lp in stage.layer_params}}
    chunks = par.chunks_per_rank
    units = inflight_chunks(par, m, stage.rank)
    total = units * sum(per_kind[lp.is_moe] for lp in stage.layer_params) / chunks
    if stage.has_embedding:
        total += inflight_first_chunk(par, m) * act.embedding_bytes(model, x)
    if stage.has_head:
        total += inflight_last_chunk(par, m) * act.head_bytes(model, x)
    if x.recompute == "full" and stage.layer_params:
        total += max(act.full_recompute_working_set(model, x, lp.is_moe)
                     for lp in {lp.is_moe: lp for lp in stage.layer_params}.values())
    return total, units / chunks


def estimate_memory(s: Scenario, pytorch_eager: bool = False) -> MemoryEstimate:
    """Per-GPU memory of every pipeline rank, the worst GPU, and host/NVMe use per node."""
    par, tr, hw = s.parallel, s.training, s.hardware
    x = act.activation_shape(tr, par, pytorch_eager)
    stages = []
    for st in stage_params(s.model, par):
        ms = model_states(st.dense, st.expert, tr.precision, tr.optimizer, par.zero,
                          par.dense_shard, par.expert_shard, tr.offload)
        activ, inflight = _stage_activations(s, st, x)
        bufs = buffer_terms(s.model, par, x, tr.precision, st.dense + st.expert, st.largest_unit,
                            st.has_head, any(lp.is_moe for lp in st.layer_params))
        rest = ms.params + ms.grads + ms.optimizer + activ + sum(bufs.values())
        bufs["allocator_allowance"] = allocator_allowance(rest)
        mem = GPUMemory(ms.params, ms.grads, ms.optimizer, activ, sum(bufs.values()))
        host = ms.host + (NVME_STAGING_BYTES_PER_GPU if tr.offload == "nvme" else 0.0)
        stages.append(StageMemory(st.rank, len(st.layers), st.has_embedding, st.has_head,
                                  inflight, mem, host, ms.nvme, bufs))
    worst = max(stages, key=lambda g: g.memory.total)
    per_node = hw.gpus_per_node
    # A node may hold GPUs of any pipeline rank; the worst rank's offload bounds it from above.
    host_node = per_node * max(g.host for g in stages)
    nvme_node = per_node * max(g.nvme for g in stages)
    capacity = hbm_bytes(hw.gpu.memory_gb)
    est = MemoryEstimate(
        per_stage=stages, worst=worst, capacity=capacity,
        host_per_node=host_node, nvme_per_node=nvme_node,
        host_capacity_per_node=capacity_bytes(hw.host.memory_gb),
        nvme_capacity_per_node=hw.storage.drives * hw.storage.drive.capacity_tb * TB,
        layer_terms=act.layer_terms(s.model, x.__class__(**{**x.__dict__, "recompute": "none"}),
                                    is_moe_layer(s.model, s.model.layers - 1)),
        warnings=[])
    est.warnings.extend(_warnings(s, est))
    return est


def _warnings(s: Scenario, est: MemoryEstimate) -> list[str]:
    out = []
    g = est.per_gpu
    if not est.fits:
        out.append(f"does not fit: the worst GPU (pipeline rank {est.worst.rank}) needs "
                   f"{g.total / GB:,.1f} GB of {est.capacity / GB:,.1f} GB "
                   f"({s.hardware.gpu.memory_gb:g} GiB)")
    if s.training.offload != "none" and not est.host_fits:
        out.append(f"host memory: offload needs {est.host_per_node / GB:,.0f} GB per node, "
                   f"hardware.host.memory_gb is {est.host_capacity_per_node / GB:,.0f} GB")
    if s.training.offload == "nvme" and not est.nvme_fits:
        out.append(f"NVMe: offload needs {est.nvme_per_node / 1e12:,.2f} TB per node, the drives "
                   f"hold {est.nvme_capacity_per_node / 1e12:,.2f} TB")
    if s.model.layers % (s.parallel.pp * s.parallel.chunks_per_rank):
        out.append(f"model.layers = {s.model.layers} does not split evenly over "
                   f"{s.parallel.pp * s.parallel.chunks_per_rank} pipeline chunks; the first "
                   "chunks get one layer more")
    if s.model.max_seq_len and s.training.seq_len > s.model.max_seq_len:
        out.append(f"training.seq_len = {s.training.seq_len} exceeds the model's context "
                   f"length {s.model.max_seq_len}")
    return out

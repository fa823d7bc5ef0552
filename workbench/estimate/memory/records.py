"""Per-GPU memory as the estimate reports it: model states + activations + buffers for every
pipeline rank, the worst GPU, and what offload puts in host DDR and on NVMe (the figures come
from ``cost_model.compose.evaluate``; ``single.memory_of`` fills these records).

GPUs of one pipeline rank are alike (TP/DP/CP/EP ranks hold equal shares), so the memory model
evaluates one GPU per pipeline rank; the worst is the one ``memory.per_gpu`` reports. The first
rank holds the embedding and the most microbatches in flight; the last holds the head and loss
(with DualPipeV both sit on rank 0).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from workbench.estimate.memory.fit import fit_status
from workbench.scenario.types import Scenario
from workbench.units import memory_text


# What each memory figure is, and which tool reports it (the CLI, the JSON and the charts say
# it in these words).
MEMORY_KINDS = {
    "total": "peak allocated (torch.cuda.max_memory_allocated; Megatron-LM logs this one): "
             "the largest of the step's phases, not the sum of the categories",
    "reserved": "the caching allocator's peak reserved on a GPU with room to spare "
                "(torch.cuda.max_memory_reserved; torchtitan's logged memory)",
    "device": "what nvidia-smi and DCGM show: reserved + CUDA context + NCCL buffers + "
              "library workspaces",
    "device_least": "what nvidia-smi would show at the GPU's limit: the allocator frees its "
                    "cache before it fails; fit is judged on device and device_least with the "
                    "memory band (pass, tight, fail)",
}


@dataclass(frozen=True)
class GPUMemory:
    """Bytes on one GPU, by category (the contract's ``memory.per_gpu`` keys). ``total`` is
    the allocator's peak allocated; ``reserved`` its peak reserved; ``device`` what nvidia-smi
    shows (reserved + CUDA context + NCCL buffers + library workspaces), which ``fits``
    judges. The categories say what each holds; they are not all alive at once: ``phases``
    gives the bytes alive at each moment of the step (``estimate.memory.peak``: forward, loss,
    backward, optimizer) and ``total`` is the largest (the sum of the categories where no
    phases are given)."""

    params: float
    grads: float
    optimizer: float
    activations: float
    buffers: float
    reserved: float = 0.0
    device: float = 0.0
    # Fine-tuning: the frozen weights' share of ``params`` (LoRA/QLoRA base in its stored
    # format); the rest of ``params`` trains.
    params_frozen: float = 0.0
    # Optimizer states in CUDA managed memory (bitsandbytes' paged optimizers): outside the
    # caching allocator, so not in ``total`` or ``reserved``; in ``device`` while resident.
    paged: float = 0.0
    # What nvidia-smi would show at the limit of the GPU: ``device`` less the cache the
    # allocator frees before it fails (``estimate.memory.allocator.least_bytes``).
    device_least: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    # What is alive at the peak phase, by category (``estimate.memory.peak.at_peak``; their sum is
    # ``total``); empty where no phases are given.
    at_peak: dict[str, float] = field(default_factory=dict)

    def alive_at_peak(self, category: str) -> float:
        """Bytes of ``category`` (params, grads, optimizer, activations, buffers) alive at the
        peak: the whole category where the estimate has no phases."""
        return self.at_peak.get(category, getattr(self, category))

    @property
    def total(self) -> float:
        if self.phases:
            return max(self.phases.values())
        return self.params + self.grads + self.optimizer + self.activations + self.buffers

    @property
    def peak_phase(self) -> str | None:
        """The phase of the step at the peak (the earlier one on ties), None without phases."""
        if not self.phases:
            return None
        return max(self.phases, key=self.phases.get)      # max keeps the first of equals

    @property
    def params_trainable(self) -> float:
        return self.params - self.params_frozen

    def as_dict(self) -> dict[str, float]:
        return {"params": self.params, "grads": self.grads, "optimizer": self.optimizer,
                "activations": self.activations, "buffers": self.buffers, "total": self.total,
                "reserved": self.reserved, "device": self.device,
                "device_least": self.device_least,
                "params_frozen": self.params_frozen, "paged": self.paged}


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
    dense_params: float = 0.0      # parameters this GPU holds: replicated over data parallel
    expert_params: float = 0.0     # and routed experts


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
    # the memory band of runs like this one (``workbench.engines.accuracy.memory_band``;
    # None before it is measured): what ``gpu_fit`` reads
    band: dict | None = None

    @property
    def per_gpu(self) -> GPUMemory:
        return self.worst.memory

    @property
    def gpu_fit(self) -> str:
        """The worst GPU: "pass", "tight" or "fail" (``estimate.memory.fit``)."""
        g = self.per_gpu
        return fit_status(g.device, g.device_least, self.capacity, self.band)

    @property
    def gpu_fits(self) -> bool:
        """Whether the worst GPU can fit (``gpu_fit`` pass or tight)."""
        return self.gpu_fit != "fail"

    @property
    def fits(self) -> bool:
        """Whether the layout can run, as the planner judges it: the GPUs (``gpu_fits``), and
        what offload puts in host DDR and on NVMe per node (``host_fits``, ``nvme_fits``)."""
        return self.gpu_fits and self.host_fits and self.nvme_fits

    @property
    def fit_words(self) -> str:
        """The fit in words, the GPU's question first: "fits", "tight: may not fit", "does NOT
        fit", or "fits the GPU, but the host cannot hold the offload" (what the charts, tables
        and verdict line say)."""
        if not self.gpu_fits:
            return "does NOT fit"
        if not self.fits:
            return "fits the GPU, but the host cannot hold the offload"
        return "tight: may not fit" if self.gpu_fit == "tight" else "fits"

    @property
    def host_fits(self) -> bool:
        return self.host_per_node <= self.host_capacity_per_node

    @property
    def nvme_fits(self) -> bool:
        return self.nvme_per_node <= self.nvme_capacity_per_node


def memory_warnings(s: Scenario, est: MemoryEstimate) -> list[str]:
    out = []
    g = est.per_gpu
    if not est.gpu_fits:
        out.append(f"does not fit: the worst GPU (pipeline rank {est.worst.rank}) needs "
                   f"{memory_text(g.device)} as nvidia-smi counts it ({memory_text(g.total)} "
                   f"allocated) of {memory_text(est.capacity)} (a "
                   f"\"{s.hardware.gpu.memory_gb:g} GB\" GPU)")
    if s.training.offload != "none" and not est.host_fits:
        out.append(f"host memory: offload needs {memory_text(est.host_per_node)} per node, "
                   f"hardware.host.memory_gb gives {memory_text(est.host_capacity_per_node, 0)}")
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

"""The validated scenario: what the estimator, planner, trials and exporters read.

Built only by :func:`workbench.spec.validate.parse_scenario`, which checks every field
(contract 1 of ../shared/design.md). Catalog references are resolved to records here; the
document form (``Scenario.document``) keeps the user's catalog keys for a faithful round trip.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from workbench.catalog.types import CPU, GPU, Drive, HostMemory, Link, ModelShape

PRECISIONS = ("fp32", "fp16", "bf16", "fp8")
RECOMPUTE = ("none", "selective", "full")
OPTIMIZERS = ("adamw", "sgd")
OFFLOAD = ("none", "cpu", "nvme")
SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b", "zero-bubble", "dualpipev")
ZERO_STAGES = (0, 1, 2, 3)
MLP_KINDS = ("swiglu", "gelu")
NORM_KINDS = ("rmsnorm", "layernorm")
ATTENTION_KERNELS = ("flash2", "flash3", "cudnn", "eager")


@dataclass(frozen=True)
class InterNode:
    link: Link
    nics_per_node: int


@dataclass(frozen=True)
class Host:
    cpu: CPU
    memory: HostMemory
    memory_gb: float
    channels: int
    sockets: int = 1

    @property
    def memory_gb_per_s(self) -> float:
        """Peak DDR bandwidth per node: channels x sockets x MT/s x 8 bytes."""
        return self.memory.gb_per_s_per_channel * self.channels * self.sockets


@dataclass(frozen=True)
class Storage:
    drive: Drive
    drives: int


@dataclass(frozen=True)
class Hardware:
    gpu: GPU
    gpus_per_node: int
    nodes: int
    intra_node: Link
    inter_node: InterNode
    host: Host
    storage: Storage

    @property
    def world(self) -> int:
        return self.gpus_per_node * self.nodes


@dataclass(frozen=True)
class Parallel:
    dp: int = 1
    zero: int = 0
    shard_group: int | None = None
    tp: int = 1
    sequence_parallel: bool = True
    pp: int = 1
    pp_schedule: str = "1f1b"
    virtual_stages: int = 1
    cp: int = 1
    ep: int = 1
    reshard_after_forward: bool | None = None   # None: torchtitan's default, True unless pp > 1

    @property
    def world(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    @property
    def reshards(self) -> bool:
        """FSDP2 frees unsharded parameters after forward. torchtitan's default: yes, except
        with pipeline parallelism (each microbatch would all-gather again)."""
        if self.reshard_after_forward is None:
            return self.pp == 1
        return self.reshard_after_forward

    @property
    def sp(self) -> bool:
        """Sequence parallelism is only meaningful with tensor parallelism."""
        return self.sequence_parallel and self.tp > 1

    @property
    def dense_shard(self) -> int:
        """Ranks a ZeRO stage shards dense parameters over: dp x cp (CP ranks hold the same
        weights, as in torchtitan's dp_shard_cp mesh and Megatron's DP x CP optimizer group),
        or the HSDP shard group."""
        return self.shard_group or self.dp * self.cp

    @property
    def expert_data_parallel(self) -> int:
        """Replicas of each expert: EP takes its ranks from dp x cp (contract 1)."""
        return self.dp * self.cp // self.ep

    @property
    def expert_shard(self) -> int:
        """Ranks a ZeRO stage shards expert parameters over (expert-data-parallel group,
        limited to the HSDP shard group when one is set)."""
        from math import gcd
        edp = self.expert_data_parallel
        return gcd(self.shard_group, edp) if self.shard_group else edp

    @property
    def chunks_per_rank(self) -> int:
        """Model chunks each pipeline rank holds: v for interleaved schedules, 2 for DualPipeV."""
        if self.pp == 1:
            return 1
        if self.pp_schedule == "dualpipev":
            return 2
        return self.virtual_stages


@dataclass(frozen=True)
class Training:
    seq_len: int = 4096
    micro_batch: int = 1
    global_batch: int = 256
    precision: str = "bf16"
    recompute: str = "selective"
    optimizer: str = "adamw"
    offload: str = "none"
    tokens: float = 1e12
    attention: str = "flash2"                 # attention kernel: flash2 | flash3 | cudnn | eager
    price_per_gpu_hour: float | None = None   # optional, currency units per GPU-hour
    price_per_kwh: float | None = None        # optional, currency units per kWh

    @property
    def flash(self) -> bool:
        """A fused attention kernel (FlashAttention / cuDNN): no s x s scores are stored."""
        return self.attention != "eager"


@dataclass(frozen=True)
class Scenario:
    hardware: Hardware
    model: ModelShape
    parallel: Parallel
    training: Training
    document: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def microbatches(self) -> int:
        """Microbatches per optimizer step per data-parallel rank (gradient-accumulation steps
        times pipeline microbatches are the same number here)."""
        return self.training.global_batch // (self.training.micro_batch * self.parallel.dp)

    def to_dict(self) -> dict:
        """The document form: every field, defaults filled in, catalog keys as written."""
        import copy
        return copy.deepcopy(self.document)

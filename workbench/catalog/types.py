"""Record types of the hardware and model catalogs.

Every record carries ``source``: where its numbers come from (datasheet, paper, config file).
Units (docs/scenario.md): GB = 1e9 bytes, GB/s = 1e9 bytes/s, links per direction,
TFLOP/s dense (without 2:4 sparsity).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GPU:
    """An accelerator. Peak figures are dense (no structured sparsity)."""

    name: str
    memory_gb: float          # HBM capacity as the datasheet states it, GB (1e9 bytes)
    hbm_gb_per_s: float       # peak memory bandwidth, GB/s
    bf16_tflops: float        # dense BF16 tensor-core peak (fp16 is the same on every part listed)
    fp8_tflops: float         # dense FP8 tensor-core peak; 0 where the part has no FP8 tensor cores
    power_w: float            # maximum board power (TDP / TGP), W
    fp32_tflops: float = 0.0  # non-tensor FP32 peak (used for fp32 trials); 0 = unknown
    tf32_tflops: float = 0.0  # dense TF32 tensor-core peak; 0 = unknown
    fp4_tflops: float = 0.0   # dense FP4 (NVFP4) tensor-core peak; 0 where the part has none
    pcie_gen: int = 5         # host interface generation
    pcie_lanes: int = 16      # host interface width
    form_factor: str = "sxm"  # sxm | pcie | consumer
    source: str = "inline"
    arch: str = ""            # ampere | ada | hopper | blackwell | cdna3 (kernel efficiencies)
    # The board power limit the GPU runs under when a user caps it (``nvidia-smi -pl``; the
    # scenario's ``hardware.gpu_power_limit_w``), W; 0 = its own ``power_w``. Sets the clock a
    # GEMM holds (workbench/estimate/time/sustained.py).
    power_limit_w: float = 0.0
    # A measured machine profile (workbench.calibrate.MachineProfile): when set, the estimator
    # times GEMMs, memory traffic, eager ops and collectives from it instead of the datasheet.
    profile: object = field(default=None, compare=False, hash=False, repr=False)

    @property
    def running_power_w(self) -> float:
        """The board power the GPU draws at full load: its power limit where the user set one
        (the driver holds the board at or under it), else the datasheet's maximum."""
        return self.power_limit_w or self.power_w


@dataclass(frozen=True)
class Link:
    """A GPU-to-GPU or node-to-node link, per GPU (intra) or per NIC (inter), per direction."""

    name: str
    gb_per_s: float           # unidirectional bandwidth, GB/s (1e9 bytes/s)
    latency_us: float         # one-hop latency used by the alpha-beta cost model, microseconds
    rdma: bool = True         # GPUDirect RDMA (RoCE v2 / InfiniBand verbs) or NVLink/P2P
    pcie_lanes: int = 0       # host PCIe lanes one adapter of this link needs (NICs); 0 for on-board links
    power_w: float = 0.0      # power of one adapter (NICs), W; 0 for on-board links
    source: str = "inline"


@dataclass(frozen=True)
class CPU:
    """A host processor (one socket)."""

    name: str
    cores: int
    threads: int
    base_ghz: float
    pcie_lanes: int           # PCIe lanes usable for add-in devices (GPUs, NICs, drives)
    pcie_gen: int
    memory_channels: int      # DDR channels per socket
    max_memory_gb: float      # maximum supported memory per socket, GB
    memory_type: str          # "ddr4" | "ddr5"
    tdp_w: float
    socket: str
    source: str = "inline"
    pcie_lanes_2p: int = 0    # usable lanes of a two-socket system (0 = 2 x pcie_lanes)

    def usable_pcie_lanes(self, sockets: int) -> int:
        """PCIe lanes left for devices in a system of ``sockets`` CPUs."""
        if sockets >= 2 and self.pcie_lanes_2p:
            return self.pcie_lanes_2p * sockets // 2
        return self.pcie_lanes * sockets


@dataclass(frozen=True)
class HostMemory:
    """A DRAM speed grade. Bandwidth per channel = MT/s x 8 bytes (64-bit channel)."""

    name: str
    mt_per_s: int
    kind: str                 # "ddr4" | "ddr5"
    source: str = "inline"

    @property
    def gb_per_s_per_channel(self) -> float:
        """Peak bandwidth of one 64-bit channel, GB/s (JEDEC: transfers/s x 8 bytes)."""
        return self.mt_per_s * 8 / 1000


@dataclass(frozen=True)
class Drive:
    """An NVMe drive."""

    name: str
    capacity_tb: float        # TB (1e12 bytes)
    read_gb_per_s: float      # sequential read, GB/s
    write_gb_per_s: float     # sequential write, GB/s
    pcie_gen: int
    pcie_lanes: int = 4
    power_w: float = 8.0      # active power, W
    source: str = "inline"


@dataclass(frozen=True)
class MoE:
    """Mixture-of-experts block replacing the dense MLP in ``moe_layers`` of the layers."""

    experts: int              # routed experts per MoE layer
    top_k: int                # routed experts each token visits (default 2, Megatron-Core's)
    expert_ffn_hidden: int    # hidden size of one expert's MLP (default: model.ffn_hidden, as
    #                           Megatron-Core's moe_ffn_hidden_size)
    shared_experts: int = 0   # always-on experts of size expert_ffn_hidden
    dense_layers: int = 0     # leading layers that keep a dense MLP (DeepSeek-V3: 3)
    capacity_factor: float = 0.0  # 0 = dropless (tokens per expert follow top_k exactly on average)


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer, the shape family every preset belongs to."""

    name: str                 # a label for reports
    layers: int               # transformer layers
    hidden: int               # model width
    heads: int                # attention (query) heads
    kv_heads: int             # key/value heads, GQA (default: heads)
    ffn_hidden: int           # MLP hidden size
    vocab: int                # vocabulary size
    mlp: str = "swiglu"       # MLP kind: SwiGLU (three matrices) or GELU (two)
    tied_embeddings: bool = False    # the output head shares the embedding's weights
    moe: MoE | None = None    # a mixture-of-experts block in place of the dense MLP
    head_dim: int = 0         # 0 = hidden // heads
    norm: str = "rmsnorm"     # normalisation: RMSNorm, or LayerNorm (which has a bias)
    bias: bool = False        # linear layers carry biases (GPT-3 style)
    dropout: bool = False     # dropout after attention and MLP (Korthikanti et al. count its masks)
    max_seq_len: int = 0      # context length the model was trained for; 0 = unknown
    source: str = "inline"
    extra: dict = field(default_factory=dict, compare=False, hash=False)
    # Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434 Sec. 2.1; DeepSeek-V3). When
    # kv_lora_rank > 0 these replace head_dim/kv_heads for attention: queries go through a
    # q_lora_rank bottleneck (0 = a plain hidden -> heads*(nope+rope) projection), keys and
    # values through one shared kv_lora_rank latent plus a qk_rope_head_dim RoPE key shared by
    # all heads; each head's query/key has qk_nope_head_dim + qk_rope_head_dim dims, its value
    # v_head_dim.
    q_lora_rank: int = 0      # query compression rank; 0 = no query compression
    kv_lora_rank: int = 0     # key/value compression rank; 0 = not MLA
    qk_rope_head_dim: int = 0  # decoupled RoPE dims per query/key head (the key's are shared)
    qk_nope_head_dim: int = 0  # per-head query/key dims without RoPE
    v_head_dim: int = 0       # per-head value dims

    @property
    def mla(self) -> bool:
        """Attention is multi-head latent attention."""
        return self.kv_lora_rank > 0

    @property
    def qk_head_dim(self) -> int:
        """Per-head query/key width: nope + rope under MLA, else dim_per_head."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.mla else self.dim_per_head

    @property
    def value_head_dim(self) -> int:
        """Per-head value width (the attention output per head)."""
        return self.v_head_dim if self.mla else self.dim_per_head

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.dim_per_head

    @property
    def dim_per_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

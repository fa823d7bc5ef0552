"""The validated scenario: what the estimator, planner, trials and exporters read.

Built only by :func:`workbench.scenario.validate.parse_scenario`, which checks every field
(docs/scenario.md lists them). Catalog references are resolved to records here; the
document form (``Scenario.document``) keeps the user's catalog keys for a faithful round trip.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from workbench.catalog.types import ModelShape
from workbench.engines.types import OPTIMIZERS as ENGINE_OPTIMIZERS
# the hardware section's records, importable from here as the scenario's
from workbench.hardware.types import Hardware, Host, InterNode, Storage  # noqa: F401
from workbench.scenario.schedules import SCHEDULE_NAMES, schedule

# nvfp4: Transformer Engine's NVFP4BlockScaling (E2M1 values, an E4M3 scale per 16 elements and
# an FP32 scale per tensor), Megatron-Core's --fp4-format e2m1 --fp4-recipe nvfp4 (megatron-core
# 0.16 megatron/core/transformer/transformer_config.py:510-518). No "mxfp4": no engine trains
# with MXFP4 GEMMs — TE 2.x's recipes with MXFP4 in their name (MXFP4QATMXFP8BlockScaling,
# MXFP4QATFloat8BlockScaling) only project the weights onto the MXFP4 grid and run the GEMMs in
# FP8 (NVIDIA/TransformerEngine@000b637e transformer_engine/common/recipe/__init__.py), and
# Megatron's --fp4-recipe offers nvfp4 and custom only (transformer_config.py:516).
PRECISIONS = ("fp32", "fp16", "bf16", "fp8", "nvfp4")
FP4_PRECISIONS = ("nvfp4",)   # the GEMMs run on FP4 tensor cores (hardware.gpu.fp4_tflops)
# training.recompute_modules (engine megatron, recompute selective): Megatron-Core's
# recompute_modules (megatron/core/transformer/transformer_config.py: "core_attn" the core
# attention, "moe_act" the routed experts' activation, "layernorm" the norms not fused into a
# linear, "mla_up_proj" MLA's up-projections and RoPE, "mlp" a dense layer's MLP, "moe" the
# whole MoE layer, "shared_experts" its shared experts); default ["core_attn"].
RECOMPUTE_MODULES = ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe",
                     "shared_experts")
RECOMPUTE = ("none", "selective", "op", "layer", "full")   # least recomputed first; op:
# torchtitan per-op; layer: every ``recompute_every``-th block fully (torchtitan layer SAC)
#                                                  selective activation checkpointing
OPTIMIZERS = ENGINE_OPTIMIZERS   # engines/types.py says what each is
# pretrain and full fine-tuning train every weight (same mechanisms, their own token counts);
# lora / qlora freeze the base and train low-rank adapters (Hu et al. 2021; Dettmers et al. 2023)
METHODS = ("pretrain", "full", "lora", "qlora")
LORA_PROJECTIONS = ("q", "k", "v", "o", "gate", "up", "down")
LORA_TARGET_GROUPS = {"attention": ("q", "k", "v", "o"), "mlp": ("gate", "up", "down"),
                      "all-linear": LORA_PROJECTIONS}
LORA_QUANT = ("nf4", "int8")          # QLoRA's frozen base: bitsandbytes NF4 or LLM.int8
LORA_TRAINABLE = ("embeddings", "norms", "head")   # parts trained in full beside the adapters
OFFLOAD = ("none", "cpu", "nvme")
SCHEDULES = SCHEDULE_NAMES   # one record each: scenario/schedules.py
ZERO_STAGES = (0, 1, 2, 3)


def zero_in(zero, stages) -> object:
    """Whether the ZeRO stage ``zero`` (a number or an array of them) is one of ``stages``:
    ``np.isin`` element for element (a Python bool for a number), by a table lookup where every
    stage is one of ``ZERO_STAGES`` (np.isin sorts on every call; the planner's mask and memory
    pass run this per pass)."""
    if np.ndim(zero) == 0:
        return zero in stages
    z = np.asarray(zero)
    if z.size and z.dtype.kind in "iu" and 0 <= z.min() and z.max() <= max(ZERO_STAGES):
        table = np.zeros(max(ZERO_STAGES) + 1, dtype=bool)
        table[[t for t in stages if 0 <= t <= max(ZERO_STAGES)]] = True
        return table[z]
    return np.isin(z, stages)

MLP_KINDS = ("swiglu", "gelu")
NORM_KINDS = ("rmsnorm", "layernorm")
ATTENTION_KERNELS = ("flash2", "flash3", "cudnn", "eager")
# What Accelerate shards an engine-hf run with (design.md contract 1, 2026-12-07): FSDP2,
# FSDP1 or DeepSpeed (accelerate 1.16 utils/dataclasses.py FullyShardedDataParallelPlugin
# fsdp_version 1 | 2, DeepSpeedPlugin)
BACKENDS = ("fsdp2", "fsdp1", "deepspeed")


@dataclass(frozen=True)
class Parallel:
    dp: int = 1               # data-parallel degree; dp x tp x pp x cp = the GPUs
    zero: int = 0             # 0 = DDP, 1/2 = ZeRO-1/2, 3 = ZeRO-3 (FSDP2 full shard)
    shard_group: int | None = None   # HSDP: shard within groups of this many dp x cp ranks,
    #                                  replicate across them (null: shard over all of dp x cp)
    tp: int = 1               # tensor-parallel degree (Megatron-style column/row sharding)
    sequence_parallel: bool = True   # shard norms and dropout along the sequence over TP
    pp: int = 1               # pipeline-parallel degree
    pp_schedule: str = "1f1b"        # pipeline schedule
    virtual_stages: int = 1   # model chunks per pipeline rank (interleaved-1f1b, zero-bubble)
    cp: int = 1               # context-parallel degree (ring attention over the sequence)
    ep: int = 1               # expert-parallel degree, taken from the dp x cp ranks
    reshard_after_forward: bool | None = None   # FSDP2: free gathered parameters after forward
    #                                             (null: torchtitan's default, true unless pp > 1)
    async_tp: bool = False    # TP collectives overlapped with the matmuls that need them
    #                           (torchtitan async TP, PyTorch symmetric memory)
    tp_comm_overlap: bool = False   # Megatron-LM --tp-comm-overlap (TE userbuffers)
    overlap_grad_reduce: bool | None = None    # DP gradient reduction under the backward
    #                           (Megatron --overlap-grad-reduce, DeepSpeed overlap_comm; null:
    #                           what the engine does by default)
    overlap_param_gather: bool | None = None   # ZeRO parameter all-gathers under the forward
    #                           (Megatron --overlap-param-gather; null: the engine's default)
    expert_tp: int | None = None   # MoE parallel folding (Megatron-Core): the experts' own TP
    #                                degree; EP then takes its ranks from dp x cp x tp / expert_tp

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
    def etp(self) -> int:
        """Tensor-parallel degree of the routed experts: ``expert_tp``, else ``tp``."""
        return self.expert_tp or self.tp

    @property
    def expert_data_parallel(self) -> int:
        """Replicas of each expert: EP takes its ranks from dp x cp (contract 1), or with MoE
        parallel folding from dp x cp x tp / expert_tp (Megatron-Core's expert mesh
        ETP x EP x EDP = TP x CP x DP)."""
        return self.dp * self.cp * self.tp // (self.etp * self.ep)

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
        return int(schedule(self.pp_schedule).chunks_per_rank(self.pp, self.virtual_stages))


@dataclass(frozen=True)
class Lora:
    """Low-rank adapters (``training.lora``): W x + (alpha / rank) B A x on each target
    projection, the base W frozen (Hu et al. 2021, arXiv:2106.09685). Defaults as the
    scenario contract names them (docs/scenario.md)."""

    rank: int = 16            # r: A is r x in, B is out x r
    alpha: float = 32         # scaling alpha / r (no memory or time of its own)
    targets: tuple[str, ...] = LORA_PROJECTIONS   # projections adapted (all-linear)
    quant: str = "nf4"        # qlora: the frozen base's storage (nf4 | int8)
    double_quant: bool = True  # qlora nf4: quantise the block constants too (QLoRA Sec. 3)
    trainable: tuple[str, ...] = ()   # parts trained in full beside the adapters
    dropout: float = 0.0      # lora_dropout on each adapter's input (PEFT LoraConfig's default 0;
    #                           above 0 each adapted projection keeps its dropped input and mask)


# training.state_dtypes (Megatron-Core's mixed-precision and precision-aware-optimizer
# settings, engines/megatron.py): the main-gradient buffer, the master weights and Adam's two
# moments. grads: fp32 (Megatron-LM's bf16 default, --accumulate-allreduce-grads-in-fp32) or
# bf16 (--grad-reduce-in-bf16); master: fp32, remainder (the precision-aware optimizer's 16-bit
# remainders beside the bf16 weights, store_param_remainders), bf16 (a 16-bit copy: NeMo's
# Apex distributed Adam with FP8 weights), fp16 (--main-params-dtype fp16) or none (Apex
# distributed Adam with dtype bf16 steps the bf16 weights themselves); moments: fp32, bf16 or
# fp16 (--exp-avg-dtype / --exp-avg-sq-dtype).
STATE_GRADS = ("fp32", "bf16")
STATE_MASTER = ("fp32", "remainder", "bf16", "fp16", "none")
STATE_MOMENTS = ("fp32", "bf16", "fp16")
# bytes per parameter of each value
STATE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "remainder": 2, "none": 0}


@dataclass(frozen=True)
class StateDtypes:
    """Where the gradients and the optimizer's states of 16-bit training are kept in another
    dtype than the mixed-precision table's fp32 (``training.state_dtypes``; the defaults are
    that table's)."""

    grads: str = "fp32"     # the main-gradient buffer: fp32 (Megatron-LM's bf16 default) or bf16
    #                         (--grad-reduce-in-bf16; reduced in bf16 too)
    master: str = "fp32"    # master weights: fp32, remainder (16-bit remainders beside the bf16
    #                         weights: --use-precision-aware-optimizer), bf16 / none (NeMo 1's
    #                         Apex distributed Adam, dtype bf16), fp16 (--main-params-dtype fp16)
    moments: str = "fp32"   # Adam's two moments (--exp-avg-dtype / --exp-avg-sq-dtype)

    @property
    def bytes(self) -> tuple[int, int, int]:
        """(gradient, master weight, one moment) bytes per parameter."""
        return STATE_BYTES[self.grads], STATE_BYTES[self.master], STATE_BYTES[self.moments]


@dataclass(frozen=True)
class Training:
    seq_len: int = 4096       # tokens per sequence
    micro_batch: int = 1      # sequences per micro-batch per data-parallel rank
    global_batch: int = 256   # sequences per optimizer step
    precision: str = "bf16"   # compute precision (mixed precision with fp32 master weights)
    recompute: str = "selective"     # activation recomputation (Korthikanti et al. 2022)
    recompute_every: int = 2  # recompute "layer": every k-th block is checkpointed whole
    recompute_modules: tuple[str, ...] | None = None   # recompute "selective" under engine
    #                           megatron: the modules recomputed (null: core_attn, Korthikanti's)
    optimizer: str = "adamw"  # adamw, sgd (torch.optim); adamw8bit, paged_adamw8bit
    #                           (bitsandbytes); adamw4bit (torchao); adafactor (factored)
    offload: str = "none"     # optimizer states to host DDR (cpu) or NVMe (ZeRO-Offload/Infinity)
    tokens: float = 1e12      # tokens to train on, for time to train and energy (also as
    #                           people write counts: 100M, 1.5B, 2T)
    attention: str = "flash2"                 # attention kernel (default: the engine's)
    engine: str = "generic"   # the software that runs the layout (workbench/engines/)
    compile: bool = False     # torch.compile of the model (engines that offer it)
    fp8_recipe: str | None = None   # FP8 scaling recipe (null: the engine's default)
    fp8_param_gather: bool = False  # FSDP / distributed-optimizer all-gather of the linear
    #                                 weights in FP8 (torchao enable_fsdp_float8_all_gather,
    #                                 Megatron --fp8-param-gather)
    fp8_attention: bool = False     # attention kernel in FP8 (Transformer Engine FP8
    #                                 DotProductAttention, Megatron --fp8-dot-product-attention)
    price_per_gpu_hour: float | None = None   # optional, currency units per GPU-hour
    price_per_kwh: float | None = None        # optional, currency units per kWh
    deadline: float | None = None   # optional, hours the run must finish in (also 24h, 2 days,
    #                                 90 min, 1.5 weeks): the verdict's time part fails when it
    #                                 takes longer, saying what would meet it
    budget: float | None = None     # optional, currency units the run may cost (with a price;
    #                                 also 1.2M): the cost part fails when it costs more
    method: str = "pretrain"  # pretrain, full (fine-tuning: every weight trains), lora, qlora
    #                           (frozen base, low-rank adapters: training.lora)
    lora: Lora | None = None  # the adapters, with method lora / qlora (defaults filled in)
    optimizer_in_backward: bool = False   # each parameter's step inside backward (torchtune)
    activation_offload: bool = False      # saved activations to host memory (torchtune, TRL)
    backend: str | None = None   # engine hf: fsdp2 | fsdp1 | deepspeed, what Accelerate shards
    #                              with (null: fsdp2, Transformers 5's default; DDP at zero 0)
    liger: bool = False       # with engine hf: Liger kernels (fused linear cross entropy, RMSNorm,
    #                           SwiGLU, RoPE; TrainingArguments.use_liger_kernel)
    state_dtypes: StateDtypes | None = None   # gradients and optimizer states in other dtypes
    #                           than fp32 (engine megatron; null: the mixed-precision table)

    @property
    def adapters(self) -> bool:
        """The base is frozen and low-rank adapters train (LoRA, QLoRA)."""
        return self.method in ("lora", "qlora")

    @property
    def flash(self) -> bool:
        """A fused attention kernel (FlashAttention / cuDNN): no s x s scores are stored."""
        return self.attention != "eager"


# The inputs a failing verdict names when the document left them to their defaults: they change
# memory or step time the most and are the ones a person's own run is likely to set otherwise.
KEY_INPUTS = {"training.micro_batch": "micro-batch", "training.global_batch": "global batch",
              "training.seq_len": "sequence length", "training.recompute": "recompute",
              "training.precision": "precision", "training.optimizer": "optimizer",
              "training.offload": "offload", "parallel.zero": "ZeRO stage"}


@dataclass(frozen=True)
class Scenario:
    hardware: Hardware
    model: ModelShape
    parallel: Parallel
    training: Training
    document: dict = field(default_factory=dict, compare=False, hash=False)
    # Defaults the validator filled in that change a figure, in words (the estimate lists them).
    assumptions: tuple[str, ...] = field(default=(), compare=False, hash=False)
    # parse_scenario(layout_required=False): what is wrong with the given (starting) layout,
    # and whether a parallel block was given at all.
    layout_problems: tuple = field(default=(), compare=False, hash=False)
    layout_given: bool = field(default=True, compare=False, hash=False)
    # The inputs that shape memory and time which the document left to their defaults
    # (``KEY_INPUTS``' paths): a failing verdict names them, so a "No" a default caused reads so.
    defaulted: tuple[str, ...] = field(default=(), compare=False, hash=False)

    @property
    def microbatches(self) -> int:
        """Microbatches per optimizer step per data-parallel rank (gradient-accumulation steps
        times pipeline microbatches are the same number here)."""
        return self.training.global_batch // (self.training.micro_batch * self.parallel.dp)

    def to_dict(self) -> dict:
        """The document form: every field, defaults filled in, catalog keys as written."""
        import copy
        return copy.deepcopy(self.document)

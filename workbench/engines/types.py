"""What an engine is to the estimator: the switches it offers and the conventions it follows.

One ``Engine`` record per engine (one module each in ``workbench/engines/``). Every convention
field cites the engine's source (file and commit) or docs next to the value, in the module
that fills it. ``generic`` is the idealised stack the estimator modelled before engines
existed: its record reproduces those estimates exactly.
"""
from __future__ import annotations

from dataclasses import dataclass, field

SWITCHES = ("compile", "fp8_recipe", "async_tp", "tp_comm_overlap", "expert_tp",
            "overlap_grad_reduce", "overlap_param_gather", "fp8_param_gather", "fp8_attention",
            "state_dtypes", "recompute_modules")
# Every optimizer a scenario can name (``training.optimizer``; here, below the scenario, so the
# engine records can list them too): adamw / sgd (torch.optim); adamw8bit, paged_adamw8bit
# (bitsandbytes); adamw4bit (torchao); adafactor (factored second moment, Shazeer & Stern 2018).
OPTIMIZERS = ("adamw", "sgd", "adamw8bit", "paged_adamw8bit", "adamw4bit", "adafactor")
FP8_RECIPES = ("tensorwise", "rowwise", "delayed", "mxfp8")


@dataclass(frozen=True)
class CastBytes:
    """HBM bytes per element that casting one 16-bit GEMM operand to its low-precision form
    moves (every kernel's reads and writes: the amax reduction, the cast, any transpose), by
    the operand's role in a linear's three GEMMs and the pass that runs the kernels, as
    torchao's roofline counts them (``get_tensor_memory_traffic_ovhd_s``: the input and
    grad-output casts write both layouts the forward and backward GEMMs read, once per pass;
    the weight's kernels are split between the passes).
    ``*_fused``: the same cast where it fuses into the kernel that produces the tensor
    (``fuse_with_prev``: the producer writes the low-precision copy instead of re-reading it)."""

    input: float               # forward: the linear's input
    weight_fwd: float          # forward: the weight's cast(s) for the output GEMM
    weight_bwd: float          # backward: the weight's cast(s) for the input-gradient GEMM
    grad_output: float         # backward: the output gradient
    input_fused: float
    grad_output_fused: float


@dataclass(frozen=True)
class Fp8Recipe:
    """How one FP8 recipe runs: the GEMM rate relative to the tensorwise FP8 GEMM rate the
    kernel table measures, and the bytes its casts move (``CastBytes``; rowwise and MX scales
    are per row / per 32-block)."""

    gemm_rate: float            # x the measured tensorwise FP8 GEMM throughput
    casts: CastBytes
    source: str
    # GPU architectures (``hardware.gpu.arch``) whose tensor cores run the recipe; empty: every
    # GPU with FP8 tensor cores (the rule ``fp8`` already asks for those).
    archs: tuple[str, ...] = ()
    # The recipe runs with tensor parallelism under torch.compile (False: the engine refuses
    # that combination).
    compiled_tp: bool = True
    # Under tensor parallelism with sequence parallelism the input of a column-parallel linear
    # is cast on the rank's sequence shard before the all-gather, and the output gradient of a
    # row-parallel one before the backward all-gather (torchao's Float8ColwiseParallel /
    # PrepareFloat8ModuleInput / Float8RowwiseParallel); False: cast after the gather.
    casts_before_gather: bool = False


# The single-read FP8 cast (TE = NVIDIA/TransformerEngine@d0067d0da6cb01811b8072a7d304f0e00344ce2b,
# docs/features/low_precision_training/performance_considerations/performance_considerations.rst
# "Quantization fusions" 1; fp8_current_scaling.rst: "other recipes typically require only a
# single memory read"): the scale is known before the cast (delayed scaling's amax history, MX's
# per-32-block scales), so one kernel reads the 16-bit tensor (2 B) and writes the rowwise and
# the columnwise FP8 copies (1 + 1 B): 4 B per element for the input, the weight (once per
# forward, with its transpose, nothing left for the backward) and the output gradient; 0 where
# the cast fuses into the kernel that produces the tensor (the norm / activation).
SINGLE_READ_CAST = CastBytes(4, 4, 0, 4, 0, 0)

# Transformer Engine's NVFP4BlockScaling as it runs every linear of the blocks (TE =
# NVIDIA/TransformerEngine@000b637ede9c221d01067e5cdf4f0953da3ab7cd): the forward (fprop),
# input-gradient (dgrad) and weight-gradient (wgrad) GEMMs all read NVFP4 operands — the recipe
# quantizes the input, the weight and the output gradient (transformer_engine/common/recipe/
# __init__.py NVFP4BlockScaling ``fp4_quant_fwd_inp`` / ``fp4_quant_fwd_weight`` /
# ``fp4_quant_bwd_grad``) and keeps attention out of it ("Not applying quantization to
# attention for now": ``fp8_dpa = False``). GEMM rate 1.0: the FP4 ceiling
# (``estimate.time.sustained.BURST_ONLY``) is itself an NVFP4 block-scaled GEMM measurement.
# Casts, bytes per element (``CastBytes``): the per-tensor FP32 scale needs the tensor's amax
# before any block is scaled (docs/features/low_precision_training/nvfp4/nvfp4.rst:
# "s_global = (fp8_max * fp4_max) / global_amax"), so every cast reads the 16-bit tensor twice
# (amax 2 B — TE's hadamard_transform_amax takes the plain and the Hadamard-transformed amax in
# the same read — then the cast 2 B), as FP8 current scaling does, and writes the rowwise and
# the columnwise copies, each 0.5 B of E2M1 plus one E4M3 scale per 16 elements (1/16 B):
# 2 + 2 + 2 x 0.5625 = 5.125 B. The columnwise copies of the input and the output gradient
# (what wgrad reads) go through the 16x16 random Hadamard transform inside that kernel, the
# output gradient with stochastic rounding; the weight takes one 16x16-block (2D) scaling whose
# transpose is the columnwise copy, so nothing is left for the backward. Fused or not: the
# amax needs the whole tensor first (as for FP8 current scaling).
NVFP4_TE = Fp8Recipe(1.0, CastBytes(5.125, 5.125, 0, 5.125, 5.125, 5.125),
                     "NVIDIA/TransformerEngine@000b637e transformer_engine/common/recipe/"
                     "__init__.py NVFP4BlockScaling; docs/features/low_precision_training/"
                     "nvfp4/nvfp4.rst; arXiv:2509.25149")   # on FP4 tensor cores: rule fp4
# What an NVFP4 element costs in HBM: 4 bits of E2M1 and an E4M3 block scale per 16 elements
# (nvfp4.rst "Data Format"): a saved quantized GEMM input, one copy of a quantized weight.
NVFP4_BYTES = 0.5 + 1 / 16
# Bytes per element of a quantized tensor by training precision (FP8 1 B, NVFP4 NVFP4_BYTES):
# a low-precision GEMM input (estimate.time.kernels), a saved quantized GEMM input
# (estimate.memory.activations), one copy of a quantized weight (estimate.memory.buffers).
QUANTIZED_BYTES = {"fp8": 1, "nvfp4": NVFP4_BYTES}


@dataclass(frozen=True)
class Engine:
    """One training engine's offer and conventions (see the module docstring of each)."""

    name: str                   # the ``training.engine`` value
    label: str                  # what a person calls it
    about: str                  # one sentence: what it is, which products run it
    switches: tuple[str, ...]   # the SWITCHES this engine offers
    recompute: tuple[str, ...]  # training.recompute values offered (scenario.types.RECOMPUTE)
    zero: tuple[int, ...]       # parallel.zero stages offered
    recompute_default: str = "selective"   # training.recompute when the scenario leaves it out
    fp8_recipes: dict[str, Fp8Recipe] = field(default_factory=dict)   # recipe -> how it runs
    fp8_default: str | None = None      # the recipe used when training.fp8_recipe is null
    # FP4 precisions (``training.precision``, scenario.types.FP4_PRECISIONS) the engine trains
    # with -> how the recipe runs (its GEMM rate against the FP4 ceiling, its casts); empty:
    # the engine has no FP4 recipe (the rule engine_numerics refuses the precision).
    fp4_recipes: dict[str, Fp8Recipe] = field(default_factory=dict)
    # Which FP8 casts fuse into the kernel producing the tensor: "none"; "compile" (every input
    # and output-gradient cast, under training.compile: Inductor fuses the amax and cast with
    # the producer, torchao's roofline ``enable_fusion_modeling``); "te" (Transformer Engine's
    # LayerNormLinear / LayerNormMLP: the norm writes the quantized output, the activation
    # writes the FC2 input quantized, its backward the FC1 output gradient).
    fp8_cast_fusion: str = "none"
    # q/k/v and gate/up are separate linears, each casting its own copy of the shared input
    # (torchtitan's wq/wk/wv, w1/w3) rather than one fused linear (Megatron's linear_qkv, fc1).
    fp8_separate_projections: bool = False
    # FP8 recipes whose linear weights the data-parallel all-gather can carry in FP8
    # (training.fp8_param_gather); empty: every recipe the engine offers.
    fp8_param_gather_recipes: tuple[str, ...] = ()
    attention: str = "flash2"   # the attention kernel the engine calls by default
    # Memory-bound elementwise work (norms, activation functions, RoPE, residual adds): fused
    # kernels read and write each tensor once; an eager PyTorch module runs one kernel per
    # operation. ``elementwise_traffic`` is the engine's HBM traffic for that work relative to
    # fused kernels when not compiled; torch.compile (where offered) brings it to 1.
    elementwise_traffic: float = 1.0
    # How the routed experts' GEMMs run: "grouped" (one grouped GEMM per projection over every
    # local expert: Megatron-Core ``--moe-grouped-gemm``, torchtitan ``torch._grouped_mm``) or
    # "loop" (a Python loop of per-expert matmuls, as eager MoE code runs them).
    expert_gemms: str = "grouped"
    # How an MoE layer's tokens reach its experts under tensor parallelism (step_time's
    # ``block_costs``): "sequence_shard" (Megatron-Core's ``MoEAlltoAllTokenDispatcher``: each
    # rank routes and permutes its own sequence-parallel shard, all-to-alls it over EP, then
    # all-gathers it inside the expert-TP group, and the reverse on combine) or "tp_gathered"
    # (torchtitan: the MoE input is all-gathered over TP and every TP rank routes every token;
    # with expert TP = tp each sends that whole sequence over EP, with expert TP 1 the tokens
    # are split over the TP ranks before the all-to-all).
    moe_dispatch: str = "tp_gathered"
    # The model code runs eager PyTorch modules (no fused kernels of its own): without
    # ``training.compile`` autograd saves what eager PyTorch saves (the SwiGLU's silu input and
    # output, the norms' fp32 copies...; ``estimate.memory.activations`` ``pytorch_eager``); compiled,
    # Inductor's partitioner recomputes those cheap elementwise results instead of saving them.
    eager_activations: bool = False
    # The SwiGLU runs as one kernel that saves only its two inputs (gate and up outputs), even
    # where the rest of the model runs eager modules (Liger's ``LigerSiLUMulFunction``).
    fused_swiglu: bool = False
    # The router's weights multiply the routed experts' activation, not their output: the fused
    # weighted SwiGLU saves its input and the weights, and no expert output is kept for the
    # weighting (Megatron-Core's TEGroupedMLP).
    probs_in_activation: bool = False
    # The loss over the vocabulary: "upcast" (``F.cross_entropy(logits.float(), y)``: the 16-bit
    # logits are copied to fp32 and log-softmaxed in eager kernels), "fused" (one kernel reads
    # the logits and writes their fp32 gradient in the forward: Megatron-Core/TE fused
    # cross-entropy), "xentropy" (flash-attn's / apex's softmax-xentropy kernel: it saves the
    # 16-bit logits and a log-sum-exp per token, and its backward writes the gradient in the
    # logits' dtype), "chunked" (torchtune's chunked upcast) or "fused_linear" (the output
    # head and the loss in one function over chunks of tokens, never holding the whole logits:
    # Liger's fused linear cross-entropy, ``estimate.memory.buffers.fused_linear_loss_bytes``).
    loss: str = "fused"
    # The compute-dtype logits are still alive while the loss runs its backward (the model's
    # output holds them). False where the trainer drops the output before backward: Hugging
    # Face's ``Trainer.compute_loss`` returns the loss alone, so the [batch, seq, vocab] logits
    # (and their fp32 copy, freed when ``ForCausalLMLoss`` returns) are gone by then.
    logits_kept_in_backward: bool = True
    # Under tensor parallelism the output head gathers the full vocabulary's logits onto every
    # TP rank before the loss (Transformers' ``_tp_plan = {"lm_head": "colwise_gather_output"}``),
    # instead of a vocabulary-parallel loss over V / tp columns.
    tp_gathers_logits: bool = False
    # Data-parallel gradient reduction overlapped with the backward (Megatron
    # --overlap-grad-reduce, DDP/FSDP hooks, DeepSpeed overlap_comm); parameter all-gathers
    # overlapped with the forward (Megatron --overlap-param-gather, FSDP prefetch).
    # (Where the engine offers the switch of the same name, ``parallel.overlap_grad_reduce`` /
    # ``parallel.overlap_param_gather`` set it; these are its defaults.)
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    # The (grad reduce, param gather) defaults at ZeRO-3 where they differ from the stages
    # below (DeepSpeed: overlap_comm defaults to stage == 3, and stage 3 prefetches
    # parameters); None: the same at every stage.
    overlap_at_zero3: tuple[bool, bool] | None = None
    # The pipeline's activation and gradient sends are blocking and serialised with the
    # compute on every micro-batch (DeepSpeed's PipelineEngine: ``p2p.send`` / ``p2p.recv``
    # with async_op False), instead of overlapping outside the fill and drain.
    pp_blocking_p2p: bool = False
    # async_tp only runs with sequence parallelism (Megatron's validate_args refuses
    # --tp-comm-overlap without --sequence-parallel).
    async_tp_needs_sp: bool = False
    # Tensor parallelism without sequence parallelism can be configured (torchtitan 0.2.x
    # always shards norms along the sequence with TP).
    tp_without_sp: bool = True
    # ZeRO-0 (DDP) only when data parallelism is the only dimension (torchtitan).
    zero0_pure_dp_only: bool = False
    # -- what the engine can run (the rule table, ``scenario.rules``, reads these limits; the
    # validator, the planner's mask and the exporter to the engine's format all ask it; each
    # value is cited in the engine's module, and ``why`` gives the engine's own words for it).
    # (None: no limit of the engine's own)
    pp_schedules: tuple[str, ...] | None = None   # pipeline schedules it runs
    zero_with_pp: tuple[int, ...] = (0, 1, 2, 3)   # ZeRO stages it combines with pp > 1
    hsdp_zero: tuple[int, ...] = (1, 2, 3)   # ZeRO stages it shards over an HSDP shard group
    hsdp_whole_cp: bool = False     # an HSDP shard group holds whole context-parallel groups
    cp: bool = True                 # ring-attention context parallelism
    sp_with_tp_and_ep: bool = False  # TP together with EP needs sequence parallelism
    keeps_gathered_params: bool = True   # ZeRO-3 with reshard_after_forward false
    # ZeRO-3's unit of gathering. None: one wrapped unit at a time (FSDP's blocks, two in flight).
    # A number: DeepSpeed's per-parameter fetching, whose live gathered elements stay within this
    # bound (stage3_max_live_parameters) plus the module being fetched and one prefetched
    # parameter (``memory.buffers.zero3_gathered``).
    zero3_live_parameters: float | None = None
    offload: dict[str, tuple[int, ...]] = field(default_factory=lambda: {
        "cpu": (1, 2, 3), "nvme": (1, 2, 3)})   # offload target -> ZeRO stages it offloads at
    fp16_with_ep: bool = True       # fp16 precision with expert parallelism
    precisions: tuple[str, ...] | None = None
    optimizers: tuple[str, ...] | None = None
    expert_tp_tp_or_1: bool = False   # expert TP is 1 or tp, nothing else
    ep_within_shard_group: bool = False   # EP ranks come from the HSDP shard group (x tp)
    # -- fine-tuning (training.method, estimate/model/finetune.py). Methods the engine trains with.
    methods: tuple[str, ...] = ("pretrain", "full")
    # What dtype the trainable weights, their gradients and optimizer states live in:
    # "mixed" (the mixed-precision table of estimate/memory/model_states.py: 16-bit weights, fp32
    # gradients and fp32 master weights in the optimizer), "param" (everything in the compute
    # dtype, no master copy: a model loaded in bf16 and trained as it is).
    state_dtype: str = "mixed"
    # Where the dtype differs by ZeRO stage, the ``state_dtype`` of stages 0, 1, 2, 3 (the
    # Hugging Face stack: DDP trains a bf16-loaded model as it is, "param"; Accelerate's FSDP
    # with mixed precision upcasts the trainable parameters to fp32, "mixed"); None: every
    # stage has ``state_dtype``.
    state_dtype_by_zero: tuple[str, str, str, str] | None = None
    # LoRA / QLoRA adapters: "param" (the model's dtype) or "fp32" (upcast on creation).
    adapter_dtype: str = "param"
    optimizer_in_backward: bool = False   # offers the optimizer step inside backward
    activation_offload: bool = False      # offers saved activations in host memory
    # Saved activations go to host memory only from checkpointed blocks (torchtune refuses
    # enable_activation_offloading without enable_activation_checkpointing).
    activation_offload_needs_recompute: bool = False
    # QLoRA base storages (training.lora.quant) it loads; None: nf4 and int8.
    lora_quant: tuple[str, ...] | None = None
    # LoRA on the MLP adapts all of its projections or none (torchtune's apply_lora_to_mlp).
    lora_mlp_whole: bool = False
    # Parts it trains in full beside the adapters (training.lora.trainable); None: any.
    lora_trainable: tuple[str, ...] | None = None
    # ZeRO-0 only without data parallelism (dp 1): no DDP, data parallelism is always FSDP.
    zero0_without_dp: bool = False
    # Recompute "layer" (one block in ``training.recompute_every`` checkpointed) counts from the
    # first block (Transformers' ``every_n_layers``: ``layer_index % every_n_layers == 0``, so
    # ceil(layers / k) blocks) instead of from the k-th (torchtitan: floor(layers / k)).
    recompute_from_first: bool = False
    why: dict[str, str] = field(default_factory=dict)   # limit -> the engine's words, cited
    # Gradient memory the engine keeps on top of what the ZeRO table already counts (bytes per
    # parameter held by the GPU, unsharded): nanotron's DDP bucket copy; 0 where the table's
    # gradients are what the engine holds (Megatron's full fp32 ``main_grad`` buffer is the
    # table's 4 B at ZeRO-0/1).
    unsharded_grad_bytes: float = 0.0
    # Data-parallel communication buckets (bytes, in flight at once) the engine allocates on
    # top of the gradients (DeepSpeed's reduce/all-gather buckets); 0 where the reduction works
    # in place in the gradient buffer.
    dp_bucket_bytes: float = 0.0
    # -- the peak's moment (``estimate.memory.peak``): ZeRO stages at which the gradients are made by
    # the backward and freed by ``zero_grad(set_to_none=True)`` between steps (FSDP's sharded
    # gradients), so a step of one microbatch has none before its backward; at the other stages
    # the gradient memory lives for the whole step (Megatron's contiguous grad buffer, DDP's
    # buckets, DeepSpeed's flat partitions).
    grads_in_backward: tuple[int, ...] = ()
    # The loss function runs under torch.compile with ``training.compile``: Inductor fuses the
    # fp32 upcast, the log-softmax and the NLL, saves the 16-bit logits and a per-token
    # log-sum-exp, and its backward writes the 16-bit gradient in one kernel.
    loss_compiled: bool = False
    # A vocabulary-parallel cross-entropy (Megatron's, nanotron's sharded one): the fp32 copy of
    # the logits becomes exp() and then the softmax in place, is saved for backward and turned
    # into the gradient in place; the 16-bit logits are not kept. ``loss_shift_copy``: its
    # forward subtracts the max into a second fp32 tensor (nanotron) instead of in place.
    loss_vocab_parallel: bool = False
    loss_shift_copy: bool = False
    # 16-bit ``.grad`` bytes per parameter the engine keeps beside the gradients of the
    # ZeRO table, per ZeRO stage 0-3 (DeepSpeed's BF16_Optimizer at stage 1).
    lp_grad_bytes_by_zero: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    # -- eager model code of one library's own (LitGPT's ``lit_gpt/`` modules; each cited in
    # ``workbench/engines/litgpt.py``):
    # The RMSNorm runs as eager ops in the compute dtype, and the backward of its
    # ``mean(x * x)`` keeps the squared input beside ``x`` (``estimate.memory.activations``).
    norm_keeps_square: bool = False
    # q, k and v come from one fused linear whose output SDPA keeps whole (v is a view of it)
    # beside the new roped q and k; LoRA on it runs one dropout on the shared input and keeps
    # the source of its ``zero_pad`` scatter (the adapted parts' outputs).
    fused_qkv: bool = False
    # The trainer casts the model's output to fp32 and holds it until the backward (Lightning
    # Fabric's precision plugins' ``convert_output``): the logits alive in the loss's backward
    # are fp32, whatever the compute dtype.
    output_fp32: bool = False
    # QLoRA's quantized linears keep their input for the backward (bitsandbytes 0.41's
    # ``MatMul4Bit`` stores ``ctx.tensors = (A, B)``; later releases keep ``(None, B)`` when
    # the weight is frozen), and quantize the output head too (every ``nn.Linear``); the
    # dequantized weight is held in ``qlora_dequant_bytes`` bytes per element (0: the compute
    # dtype; a dequantization into fp16 followed by a cast to bf16 holds both, 4).
    qlora_keeps_inputs: bool = False
    qlora_head: bool = False
    qlora_dequant_bytes: float = 0.0
    # ZeRO-3 is FSDP1 with flat parameters and ``use_orig_params=True`` (not FSDP2): a wrapped
    # unit whose flat parameter mixes frozen and trainable weights gets a gradient for all of
    # it, in the compute dtype (reduced in it), kept unsharded through gradient accumulation's
    # ``no_sync`` micro-steps; the root unit is not resharded after the forward
    # (``estimate.memory.buffers.flat_param_grads``).
    fsdp1_flat_params: bool = False
    # generic only: the estimate's total keeps the 5 % allocator allowance it always had
    # (estimate.memory.buffers.ALLOCATOR_FRACTION) instead of splitting allocated from reserved.
    allowance_in_total: bool = False
    # How the engine's own configuration spells each setting the exporters write: switch or
    # setting name -> the engine's flag / config key (e.g. "async_tp" ->
    # "--tp-comm-overlap"), each cited in the engine's module.
    flags: dict[str, str] = field(default_factory=dict)
    sources: tuple[str, ...] = ()       # the files and commits the conventions come from

    def offers(self, switch: str) -> bool:
        return switch in self.switches

    def dp_overlap_at(self, zero):
        """(gradient reduction overlapped, parameter all-gather overlapped) by default at ZeRO
        stage ``zero`` (an int or an array of them)."""
        if self.overlap_at_zero3 is None:
            return self.overlap_grad_reduce, self.overlap_param_gather
        import numpy as np
        z3 = np.asarray(zero) == 3
        grad, gather = (np.where(z3, a, b) for a, b in zip(
            self.overlap_at_zero3, (self.overlap_grad_reduce, self.overlap_param_gather)))
        return (bool(grad), bool(gather)) if np.ndim(zero) == 0 else (grad, gather)

    def state_dtype_at(self, zero: int) -> str:
        """The ``state_dtype`` at ZeRO stage ``zero`` (``state_dtype_by_zero`` where given)."""
        return self.state_dtype if self.state_dtype_by_zero is None else \
            self.state_dtype_by_zero[zero]

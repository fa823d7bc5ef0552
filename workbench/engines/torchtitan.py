"""``torchtitan``: PyTorch-native training — FSDP2 (``fully_shard``), DTensor tensor / context
parallelism, ``torch.distributed.pipelining``, torchao float8 / MX.

Conventions in words: TOML/CLI job config (release v0.2.2). torch.compile is optional and needed
for async TP and for fused float8 casts; without it the model runs eagerly, where RMSNorm is
PyTorch's fused ``nn.RMSNorm`` kernel but SwiGLU and the complex-number RoPE run one kernel per
op. Attention is SDPA with cuDNN given priority. FSDP2 prefetches implicitly (backward always
BACKWARD_PRE) and reduce-scatters in the backward. Per-op selective AC (``op``), layer-wise selective AC (``layer``:
``selective_ac_option = "k"``, every k-th block, ``training.recompute_every``) and full AC are
modelled.

Citations: TT = pytorch/torchtitan @ v0.2.2 = 73a0e6979dd10b6b1904098eb3c8f62c18ab87ce;
AO = pytorch/ao @ 36027d82d1ad9949597ea16002ff4940374b1b94;
TE = NVIDIA/TransformerEngine @ d0067d0da6cb01811b8072a7d304f0e00344ce2b.
FP8 cast bytes per element and role: ``engines.types.CastBytes``.
"""
from workbench.engines.types import CastBytes, Engine, Fp8Recipe

_TT = "pytorch/torchtitan@73a0e6979dd10b6b1904098eb3c8f62c18ab87ce"
_AO = "pytorch/ao@36027d82d1ad9949597ea16002ff4940374b1b94"
_TE = "NVIDIA/TransformerEngine@d0067d0da6cb01811b8072a7d304f0e00344ce2b"
# the roofline as read at pytorch/ao@0598012907d6f6e88734088a65f788c38d294a65
_ROOF = ("pytorch/ao@0598012907d6f6e88734088a65f788c38d294a65 torchao/testing/training/"
         "roofline_utils.py get_tensor_memory_traffic_ovhd_s")

ENGINE = Engine(
    name="torchtitan",
    label="torchtitan (FSDP2 + DTensor + pipelining)",
    about="PyTorch's reference LLM trainer: FSDP2, DTensor TP/CP, torch.distributed.pipelining, "
          "torchao float8/MXFP8.",
    # compile.enable, parallelism.enable_async_tensor_parallel (needs compile),
    # quantize.linear.float8.recipe_name, parallelism.expert_tensor_parallel_degree
    # (TT torchtitan/config/job_config.py classes Compile, Parallelism, Float8Linear).
    # quantize.linear.float8.enable_fsdp_float8_all_gather (fp8_param_gather: TT docs/float8.md
    # "cast Float8Linear.weight from high precision to float8 before FSDP all-gather").
    switches=("compile", "fp8_recipe", "async_tp", "expert_tp", "fp8_param_gather"),
    # activation_checkpoint.mode Literal["selective", "full", "memory_budget", "none"], default
    # "selective" with selective_ac_option "2"; "op" = per-op SAC (TT job_config.py
    # class ActivationCheckpoint). No Korthikanti (core-attention) selective mode.
    # Default "op": what torchtitan's Llama 3 8B train config sets (TT
    # torchtitan/models/llama3/train_configs/llama3_8b.toml: mode selective, selective_ac_option
    # "op"; the 70B/405B configs set mode "full"); job_config.py's own default, used without an
    # [activation_checkpoint] section, is selective "2" (layer, k = 2; job_config.py:652-655).
    # mode "memory_budget" (compile only) sets Inductor's activation budget, not a block
    # policy: not offered. selective_ac_option = an integer k checkpoints every k-th
    # block whole (TT torchtitan/distributed/activation_checkpoint.py _apply_layer_sac:
    # "if not ac_freq or _layer_sac_count % ac_freq == 0: return ptd_checkpoint_wrapper(...)").
    recompute_default="op",
    recompute=("none", "full", "op", "layer"),
    # 0: data_parallel_replicate_degree only (DDP); 2: fsdp_reshard_after_forward = "never"
    # (reshard_after_forward=False = ZeRO-2, TT docs/fsdp.md table); 3: fully_shard default.
    zero=(0, 2, 3),
    # torchtitan 0.2.x applies SequenceParallel to the norms whenever TP is on (no switch; 0.3.0
    # adds parallelism.enable_sequence_parallel): TT torchtitan/models/llama3/infra/
    # parallelize.py apply_tp, lines 181, 219, 233.
    tp_without_sp=False,
    # DDP (zero 0) only as the whole mesh: "if parallel_dims.world_size !=
    # dp_replicate_mesh.size(): raise RuntimeError('DDP has not supported > 1D parallelism')"
    # (TT torchtitan/models/llama3/infra/parallelize.py:148-151); with CP it applies FSDP.
    zero0_pure_dp_only=True,
    # HSDP: the FSDP group is dp_shard x cp (TT torchtitan/distributed/parallel_dims.py), so a
    # shard group holds whole CP groups.
    hsdp_zero=(2, 3),
    hsdp_whole_cp=True,
    # parallel_dims.py: "Currently we only support ETP=TP or ETP=1"; EP ranks come from
    # dp_shard x cp (x tp when ETP=1): efsdp = dp_shard * cp * tp / (etp * ep).
    expert_tp_tp_or_1=True,
    ep_within_shard_group=True,
    # training.mixed_precision_param: bfloat16 or float32 (TT job_config.py Training); Float8
    # through model.converters. No fp16.
    precisions=("fp32", "bf16", "fp8"),
    # training.enable_cpu_offload: FSDP2 CPUOffloadPolicy (TT job_config.py); no NVMe.
    offload={"cpu": (1, 2, 3)},
    # components/optimizer.py builds Adam or AdamW (TT torchtitan/components/optimizer.py).
    optimizers=("adamw",),
    why={
        "zero": "torchtitan shards with FSDP2, which always shards the gradients too (no "
                "ZeRO-1); it offers zero 0 (DDP), 2 (fsdp_reshard_after_forward never) and 3",
        "zero0_pure_dp_only": "torchtitan applies DDP only to pure data parallelism (it uses "
                              "FSDP whenever CP is on and raises 'DDP has not supported > 1D "
                              "parallelism' otherwise); use zero 3",
        "hsdp_whole_cp": "torchtitan's FSDP group is dp_shard x cp",
        "expert_tp_tp_or_1": "torchtitan's expert TP is 1 or tp (parallel_dims.py: "
                             "'Currently we only support ETP=TP or ETP=1')",
        "ep_within_shard_group": "torchtitan takes EP ranks from dp_shard x cp x tp / expert TP "
                                 "(parallel_dims.py; the FSDP group, not the HSDP replicas)",
        "tp_without_sp": "torchtitan 0.2.x always applies sequence parallelism with TP (0.3.0 "
                         "has parallelism.enable_sequence_parallel); set "
                         "parallel.sequence_parallel true",
        "precisions": "torchtitan's mixed precision is bfloat16 or float32 only "
                      "(training.mixed_precision_param), FP8 through model.converters",
        "offload": "torchtitan offloads to CPU memory only (training.enable_cpu_offload, FSDP2 "
                   "CPUOffloadPolicy)",
        "optimizers": "torchtitan builds Adam or AdamW only (components/optimizer.py)",
        "compiled_tp": "torchtitan asserts 'TP not yet supported with torch.compile for mxfp8' "
                       "(components/quantization/mx.py; async TP turns compile on)",
    },
    fp8_recipes={
        # Casts: torchao's roofline, bytes per element of every kernel (_ROOF; the amax reads
        # 2 B, a cast reads 2 B and writes 1 B per layout; "fused": fuse_with_prev drops the
        # first read). GEMM: cuBLAS tensorwise _scaled_mm, the reference -> 1.0.
        # tensorwise: input / grad_output: amax 2 + cast 2 + fp8 dim0 and dim1 1 + 1 = 6 (fused
        # 4); weight: amax 2 + fwd cast 3 | bwd cast 3. Under TP torchtitan applies torchao's
        # float8 TP classes to tensorwise only (TT torchtitan/models/llama3/infra/parallelize.py
        # "enable_float8_tensorwise_tp = enable_float8_linear and not float8_is_rowwise"), which
        # cast before the all-gather (AO torchao/float8/float8_tensor_parallel.py
        # PrepareFloat8ModuleInput: "the float8 cast happens before the all-gather").
        "tensorwise": Fp8Recipe(1.0, CastBytes(6, 5, 3, 6, 4, 4), _ROOF,
                                casts_before_gather=True),
        # GEMM: rowwise _scaled_mm (CUTLASS) on H100 — "Most shapes are within 90-100% of
        # tensor-wise efficiency, but there's a long tail going down to 50%"
        # (pytorch/pytorch#147971, https://github.com/pytorch/pytorch/issues/147971) -> 0.9.
        # Casts (roofline rowwise): input / grad_output kernel 1 reads 2 B, writes fp8 1 B + bf16
        # transpose 2 B, kernel 2 reads 2 B writes 1 B = 8 (fused 6); weight fwd 3, bwd
        # transpose 4 + cast 3 = 7. TP gathers in bf16, cast after the gather (parallelize.py).
        "rowwise": Fp8Recipe(0.9, CastBytes(8, 3, 7, 8, 6, 6),
                             "pytorch/pytorch#147971; " + _ROOF),
        # model.converters = ["quantize.linear.mx"], recipe mxfp8_cublas (Blackwell). GEMM: cuBLAS
        # MXFP8; TE's pre-quantized B300 table gives tensorwise 6.812 ms vs MXFP8 7.161 ms per layer
        # -> 0.95 (TE docs/examples/gemm_profiling/gemm_profiling.rst). Casts (roofline
        # mxfp8_cublas): dim0 cast 2 + 1, dim1 cast 2 + 1 = 6 (fused 4); weight 3 | 3.
        # Blackwell only, and not with TP under torch.compile: TT
        # torchtitan/components/quantization/mx.py asserts has_cuda_capability(10, 0) "MXFP8 is
        # only supported on SM100 or architectures" and "TP not yet supported with
        # torch.compile for mxfp8".
        "mxfp8": Fp8Recipe(0.95, CastBytes(6, 3, 3, 6, 4, 4),
                           f"{_TE} docs/examples/gemm_profiling/gemm_profiling.rst; "
                           + _ROOF + "; TT components/quantization/mx.py",
                           archs=("blackwell",), compiled_tp=False),
        # "rowwise_with_gw_hp" (also offered) is not in FP8_RECIPES; torchao has no delayed scaling.
    },
    # recipe_name None -> Float8LinearConfig() tensorwise ("Float8 tensorwise scaled training
    # active", TT torchtitan/components/quantization/float8.py).
    # MoE under TP: PrepareModuleInputOutput all-gathers the MoE input over TP (Shard(1) ->
    # Replicate) and reduce-scatters its output, the router gate runs replicated (NoParallel);
    # ExpertTensorParallel (expert TP = tp) dispatches the replicated tokens over EP, while with
    # expert TP 1 ReordererSequenceParallel splits the routed tokens over the TP ranks (TT
    # torchtitan/models/llama4/infra/parallelize.py apply_moe_ep_tp; torchtitan/distributed/
    # expert_parallel.py).
    moe_dispatch="tp_gathered",
    fp8_default="tensorwise",
    # torch.compile fuses the casts into their producers ("--training.compile (required for
    # competitive performance): use torch.compile to fuse the float8 scaling/casting kernels",
    # TT docs/float8.md); the Llama model has separate wq/wk/wv and w1/w3 linears (TT
    # torchtitan/models/llama3/model/model.py Attention, FeedForward).
    fp8_cast_fusion="compile",
    fp8_separate_projections=True,
    # FSDP float8 all-gather is tensorwise only: TT docs/float8.md passes
    # --float8.enable_fsdp_float8_all_gather with the tensorwise recipe, and rowwise gathers in
    # bf16 ("For rowwise recipes, we use regular TP and all-gather happens in high precision").
    fp8_param_gather_recipes=("tensorwise",),
    # ScaledDotProductAttentionWrapper: sdpa_kernel([CUDNN_ATTENTION, FLASH_ATTENTION, MATH],
    # set_priority=True) (TT torchtitan/models/attention.py:168-190); attn_type default "sdpa"
    # (TT torchtitan/models/llama3/model/args.py:45).
    attention="cudnn",
    # Derived from TT torchtitan/models/llama3/model/model.py, Llama-3-8B layer (h=4096,
    # f=14336=3.5h, k dim h/4), per token fwd+bwd, in 16-bit element accesses:
    #   fused reference: 2 RMSNorm (2 fwd + 3 bwd) x h x 2 = 10h; SwiGLU (3 fwd + 5 bwd) f = 28h;
    #   RoPE on q,k (2 + 2) x 1.25h = 5h; 2 residual adds (3 + 3) h x 2 = 12h  -> 55h.
    #   eager: nn.RMSNorm -> aten _fused_rms_norm (+ _fused_rms_norm_backward, PyTorch >= 2.9)
    #   = 10h; w2(F.silu(w1(x)) * w3(x)): fwd silu 2f + mul 3f, bwd 2 mul-grads 3f each + silu
    #   bwd 3f = 14f = 49h; apply_rotary_emb: x.float() 3 + complex mul 4 + type_as 3 = 10 per
    #   element fwd and 10 bwd = 20 x 1.25h = 25h; residual adds 12h -> 96h.
    #   96h / 55h = 1.75. torch.compile (compile.enable) brings it to 1.
    elementwise_traffic=1.75,
    # cross_entropy_loss: F.cross_entropy(pred.flatten(0, 1).float(), ...) (TT
    # torchtitan/components/loss.py): the logits are upcast to fp32.
    loss="upcast",
    # build_cross_entropy_loss: ``if job_config.training.compile: loss_fn = torch.compile(
    # loss_fn)`` (pytorch/torchtitan@f90c845c0ef9dbaf29d4d577e926c974e1630163
    # torchtitan/components/loss.py; later releases: compile.components containing "loss").
    # Left off here: the record's published runs (benchmarks/memory_accuracy.py, torchtitan
    # 2412 tables, seq 32k-262k with compile) measure the eager loss's memory (83.9 GiB
    # reserved against 88.9 eager / 42.5 compiled estimated): they predate the loss's compile.
    loss_compiled=False,
    # ZeRO-2/3 are FSDP2, whose sharded gradients the backward makes and the train loop's
    # optimizer.zero_grad() frees (set_to_none default): torch 2.13
    # torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py L754 (foreach_reduce sets
    # ``sharded_param.grad`` where it is None), torch/optim/optimizer.py L1024. ZeRO-0 is
    # replicate (DDP): its reducer's buckets live for the whole run.
    grads_in_backward=(2, 3),
    # Llama blocks of plain nn.Modules (TT torchtitan/models/llama3/model/model.py): eager
    # activations unless compile.enable.
    eager_activations=True,
    # FSDP2 "always follows backward_prefetch=BACKWARD_PRE" and reduce-scatters in backward;
    # forward all-gathers are issued ahead implicitly (TT docs/fsdp.md).
    overlap_grad_reduce=True,
    overlap_param_gather=True,
    # FSDP2 MixedPrecisionPolicy(param bf16, reduce fp32) (TT job_config.py Training
    # mixed_precision_param / mixed_precision_reduce): sharded fp32 grads, as the ZeRO-3 row -> 0.
    unsharded_grad_bytes=0.0,
    # FSDP2 all-gathers / reduce-scatters per fully_shard unit (counted in buffers) -> 0.
    dp_bucket_bytes=0.0,
    flags={
        "recompute": "activation_checkpoint.mode {none,full,selective}; op = mode selective + "
                     "activation_checkpoint.selective_ac_option \"op\"; layer = mode selective + "
                     "selective_ac_option \"k\" (training.recompute_every)",
        "fp8_recipe": "model.converters [\"quantize.linear.float8\"] + "
                      "quantize.linear.float8.recipe_name {tensorwise,rowwise,rowwise_with_gw_hp}; "
                      "mxfp8: model.converters [\"quantize.linear.mx\"] + "
                      "quantize.linear.mx.recipe_name mxfp8_cublas",
        "compile": "compile.enable",
        "fp8_param_gather": "quantize.linear.float8.enable_fsdp_float8_all_gather",
        "async_tp": "parallelism.enable_async_tensor_parallel",
        "expert_tp": "parallelism.expert_tensor_parallel_degree",
        "zero": "parallelism.data_parallel_shard_degree (3), "
                "parallelism.fsdp_reshard_after_forward never (2), "
                "parallelism.data_parallel_replicate_degree (0)",
        "tp": "parallelism.tensor_parallel_degree",
        "pp": "parallelism.pipeline_parallel_degree",
        "cp": "parallelism.context_parallel_degree",
        "ep": "parallelism.expert_parallel_degree",
        "pp_schedule": "parallelism.pipeline_parallel_schedule",
    },
    sources=(
        f"{_TT} torchtitan/config/job_config.py",
        f"{_TT} torchtitan/models/llama3/model/model.py",
        f"{_TT} torchtitan/models/attention.py",
        f"{_TT} torchtitan/components/quantization/float8.py",
        f"{_TT} torchtitan/components/metrics.py",
        f"{_TT} docs/fsdp.md",
        f"{_TT} docs/float8.md",
        f"{_AO} torchao/testing/training/roofline_utils.py",
        f"{_AO} docs/source/workflows/training.md",
        "pytorch/pytorch#147971 (rowwise vs tensorwise _scaled_mm on H100)",
        f"{_TE} docs/examples/gemm_profiling/gemm_profiling.rst",
    ),
)

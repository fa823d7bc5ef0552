"""``megatron``: Megatron-LM / Megatron-Core with Transformer Engine (TE), also as NeMo and
Megatron-Bridge run it.

Conventions in words: TE linear layers with FP8 (delayed scaling by default; tensorwise current
scaling and MXFP8 on request), TE userbuffers overlap of the tensor-parallel collectives with the
GEMMs (``--tp-comm-overlap``), a separate tensor-parallel size for experts. Norms, SwiGLU, RoPE and
bias-dropout-add run as fused kernels (TE / Megatron fusions, all on by default), attention is
TE's cuDNN fused attention on Hopper. Gradients live in one contiguous fp32 ``main_grad`` buffer
of full size (bf16 training), even with the distributed optimizer (ZeRO-1) — which is exactly what
the ZeRO-1 row of ``workbench/estimate/memory/model_states.py`` already counts; DP buckets are views into
that buffer. Data-parallel overlap is off in ``arguments.py`` but on in the published
Megatron-Bridge / NeMo recipes, which is how the record runs it.

Citations: MLM = NVIDIA/Megatron-LM @ core_v0.19.0 = 5be9626709af2722333bf54797c954c09edeada3;
TE = NVIDIA/TransformerEngine @ d0067d0da6cb01811b8072a7d304f0e00344ce2b;
MB = NVIDIA-NeMo/Megatron-Bridge @ 067f987df03b8355b03192d88d70f1709fedf51a.
FP8 cast bytes per element and role: ``engines.types.CastBytes``.
"""
from workbench.engines.types import NVFP4_TE, SINGLE_READ_CAST, CastBytes, Engine, Fp8Recipe

_MLM = "NVIDIA/Megatron-LM@5be9626709af2722333bf54797c954c09edeada3"
_TE = "NVIDIA/TransformerEngine@d0067d0da6cb01811b8072a7d304f0e00344ce2b"
_MB = "NVIDIA-NeMo/Megatron-Bridge@067f987df03b8355b03192d88d70f1709fedf51a"

ENGINE = Engine(
    name="megatron",
    label="Megatron-LM / Megatron-Core (NeMo, Megatron-Bridge)",
    about="NVIDIA's Megatron-Core with Transformer Engine; run directly, by NeMo and by "
          "Megatron-Bridge.",
    # fp8_recipe: --fp8-recipe (MLM megatron/core/transformer/transformer_config.py:573);
    # tp_comm_overlap: --tp-comm-overlap, TE userbuffers (MLM
    # megatron/core/model_parallel_config.py:265; estimate/time/tp_overlap.py: how they run);
    # fp8_param_gather: --fp8-param-gather (TransformerConfig.fp8_param "keep the parameters in
    # fp8 ... primarily the weights of GEMMs"); fp8_attention: --fp8-dot-product-attention
    # (TransformerConfig.fp8_dot_product_attention) — megatron-core 0.16
    # megatron/core/transformer/transformer_config.py.
    # validate_args (MLM megatron/training/arguments.py): "Tensor parallel communication/GEMM
    # overlap can happen only when sequence parallelism is enabled" (rule tp_comm_overlap).
    # expert_tp: --expert-tensor-parallel-size (MLM megatron/core/model_parallel_config.py:130).
    # overlap_grad_reduce / overlap_param_gather: --overlap-grad-reduce / --overlap-param-gather
    # (MLM arguments.py:2968, :2989). No torch.compile switch in Megatron-LM's arguments, and no
    # torchtitan-style async TP (parallel.async_tp): its TP overlap is tp_comm_overlap.
    # state_dtypes (training.state_dtypes): --grad-reduce-in-bf16 ("Reduce gradients in
    # bfloat16", MLM megatron/training/arguments.py:3053; without it bf16 training accumulates and
    # all-reduces in fp32, arguments.py:1209-1216); --use-precision-aware-optimizer with
    # --exp-avg-dtype / --exp-avg-sq-dtype (arguments.py:3667-3684), whose master weights are
    # kept as 16-bit remainders beside the bf16 weights (OptimizerConfig.store_param_remainders
    # "store the 16-bit FP32 parameter remainders in the optimizer state, excluding the 16 bits
    # shared with the BF16 parameters", default True, megatron/core/optimizer/
    # optimizer_config.py:192) unless FP8 other than delayed scaling keeps an fp32 master of its
    # own (use_precision_aware_optimizer_no_fp8_or_ds_fp8, optimizer_config.py:407-413), and
    # which needs Adam (":433-435 '--use-precision-aware-optimizer only supported with adam'").
    # NeMo 1's Apex DistributedFusedAdam with ``dtype: bf16`` keeps no master at all and its
    # moments in bf16 (NVIDIA/NeMo@e938df32 nemo/collections/nlp/models/language_modeling/
    # megatron_base_model.py ``store_params = False`` where the optimizer dtype is the model's).
    switches=("fp8_recipe", "tp_comm_overlap", "expert_tp", "overlap_grad_reduce",
              "overlap_param_gather", "fp8_param_gather", "fp8_attention", "state_dtypes",
              "recompute_modules"),
    # Another engine's async TP exported to Megatron-LM becomes --tp-comm-overlap, which needs
    # sequence parallelism (validate_args above).
    async_tp_needs_sp=True,
    # recompute_modules (training.recompute_modules): --recompute-modules, TransformerConfig.
    # recompute_modules (MLM@d98e8a64 megatron/core/transformer/transformer_config.py:560-580):
    # "moe_act", "layernorm" and "mla_up_proj" use output-discarding checkpointing (their output
    # is freed and rebuilt in the backward from the input the layer keeps anyway), "core_attn",
    # "mlp", "moe" and "shared_experts" normal checkpointing (only the module's input kept); each
    # applies under recompute_granularity 'selective' only (transformer_layer.py; moe/experts.py
    # ``activation_recompute``); "mlp" recomputes dense layers' MLPs only (``if not
    # isinstance(self.mlp, MoELayer)``); "layernorm" the norms that are their own module: not
    # the input norm TE fuses into linear_qkv, nor the dense layer's pre-MLP norm fused into
    # linear_fc1 (gpt_layer_specs.py ``fuse_input_layernorm``), so MLA's input norm and an
    # MoE layer's pre-MLP norm (the router reads it). Megatron refuses moe_act without grouped
    # GEMMs and mla_up_proj without MLA (transformer_config.py __post_init__).
    # recompute_granularity Literal['full', 'selective'] (MLM transformer_config.py:518);
    # selective = recompute_modules default ["core_attn"] (Korthikanti et al.),
    # transformer_config.py:546. layer: --recompute-granularity full --recompute-method block
    # --recompute-num-layers N checkpoints the first N layers of each model chunk and keeps
    # the others (MLM transformer_config.py:529-541; megatron/core/recompute.py:167-181:
    # "use_checkpoint = layer_idx < recompute_num_layers"): with N = chunk layers / k, as many
    # blocks checkpointed as one in every k.
    recompute=("none", "selective", "full", "layer"),
    # 0: DDP; 1: --use-distributed-optimizer (MLM megatron/training/arguments.py:2997);
    # 2/3: --use-megatron-fsdp with --data-parallel-sharding-strategy optim_grads /
    # optim_grads_params (MLM arguments.py:3023; megatron/training/config/common_config.py:92);
    # --use-torch-fsdp2 also exists (common_config.py:95).
    zero=(0, 1, 2, 3),
    # What Megatron-LM runs, for the rule table (scenario/rules/) and --to megatron.
    # Schedules: forward_backward_pipelining_without_interleaving (1F1B) and ..._with_interleaving
    # (MLM megatron/core/pipeline_parallel/schedules.py get_forward_backward_func).
    pp_schedules=("1f1b", "interleaved-1f1b"),
    # ZeRO-2/3 is Megatron-FSDP or torch FSDP2: "FSDP and PP are mutually exclusive in
    # Megatron's standard path" (NVIDIA/Megatron-LM PR #6081); --use-torch-fsdp2 asserts
    # pp == 1 in validate_args (MLM megatron/training/arguments.py).
    zero_with_pp=(0, 1),
    # HSDP: --num-distributed-optimizer-instances (MLM arguments.py), the distributed optimizer
    # (ZeRO-1) only.
    hsdp_zero=(1,),
    # docs/user-guide/parallelism-guide.md: "--sequence-parallel  # Required when using TP + EP".
    sp_with_tp_and_ep=True,
    # Megatron-FSDP has no switch to keep parameters gathered between forward and backward.
    keeps_gathered_params=False,
    # --optimizer-cpu-offload offloads the distributed optimizer's states (ZeRO-1) to host
    # memory (MLM arguments.py _add_training_args); no NVMe, no gradient or parameter offload.
    offload={"cpu": (1,)},
    # validate_args: "Expert parallelism is not supported with fp16 training."
    fp16_with_ep=False,
    why={
        "pp_schedules": "Megatron-LM's pipeline schedules are 1F1B and interleaved 1F1B "
                        "(megatron/core/pipeline_parallel/schedules.py)",
        "zero_with_pp": "ZeRO-2/3 is Megatron-FSDP (or torch FSDP2), which Megatron-LM does "
                        "not combine with pipeline parallelism; use zero 1",
        "hsdp_zero": "hybrid sharding is the distributed optimizer's "
                     "--num-distributed-optimizer-instances, ZeRO-1 only",
        "sp_with_tp_and_ep": "Megatron-LM requires --sequence-parallel with TP + EP "
                             "(docs/user-guide/parallelism-guide.md)",
        "keeps_gathered_params": "Megatron-FSDP has no switch to keep parameters gathered "
                                 "after forward",
        "offload": "Megatron-LM offloads optimizer states to CPU memory only "
                   "(--optimizer-cpu-offload)",
        "offload_zero": "Megatron-LM offloads the distributed optimizer's states (zero 1) "
                        "only, not the ZeRO-2/3 gradient and parameter shards",
        "fp16_with_ep": "validate_args: expert parallelism is not supported with fp16; "
                        "use bf16",
        "tp_comm_overlap_needs_sp": "validate_args: --tp-comm-overlap needs "
                                    "--sequence-parallel",
        "async_tp_needs_sp": "validate_args: --tp-comm-overlap (what parallel.async_tp "
                             "exports as) needs --sequence-parallel",
    },
    fp8_recipes={
        # Casts (bytes per element, ``CastBytes``): a single-read TE cast is
        # types.SINGLE_READ_CAST; the weight is cast once per forward with its transpose
        # (nothing left for the backward). Fused: the norm writes
        # its output quantized (TE transformer_engine/pytorch/module/layernorm_linear.py
        # ``with_quantized_norm``), the activation writes FC2's input quantized
        # (layernorm_mlp.py ``activation_func(fc1_out, fc2_input_quantizer)``): 0 extra bytes.
        # TE Float8CurrentScaling. GEMM: TE docs/features/low_precision_training/speedups.rst —
        # "recipes that differ only in how scaling factors are computed (e.g. DelayedScaling vs
        # CurrentScaling) collapse to the same kernel" -> 1.0. Cast: TE
        # docs/features/low_precision_training/fp8_current_scaling/fp8_current_scaling.rst
        # "requires reading the tensor twice" (amax read 2 B + cast read 2 B + fp8 rowwise and
        # columnwise writes 1 + 1 B = 6), fused or not: the amax needs the whole tensor first.
        "tensorwise": Fp8Recipe(1.0, CastBytes(6, 6, 0, 6, 6, 6),
                                f"{_TE} docs/features/low_precision_training/"
                                "fp8_current_scaling/fp8_current_scaling.rst"),
        # TE DelayedScaling (Megatron's default, transformer_config.py:573): same GEMM kernel (1.0,
        # speedups.rst above); amax comes from the history and is taken inside the cast:
        # types.SINGLE_READ_CAST (0 where fused into the norm / activation).
        "delayed": Fp8Recipe(1.0, SINGLE_READ_CAST,
                             f"{_TE} docs/features/low_precision_training/"
                             "performance_considerations/performance_considerations.rst"),
        # TE MXFP8Blockscaling (Blackwell). GEMM: TE
        # docs/examples/gemm_profiling/gemm_profiling.rst, pre-quantized B300 per-layer GEMM time
        # FP8Current 6.812 ms vs MXFP8 7.161 ms -> 6.812 / 7.161 = 0.95. Cast: one read,
        # rowwise+columnwise MX written in one kernel (block scales are local):
        # types.SINGLE_READ_CAST.
        # Blackwell only: TE transformer_engine/pytorch/fp8.py check_mxfp8_support "Device
        # compute capability 10.0 or higher required for MXFP8 execution".
        "mxfp8": Fp8Recipe(0.95, SINGLE_READ_CAST,
                           f"{_TE} docs/examples/gemm_profiling/gemm_profiling.rst; "
                           "transformer_engine/pytorch/fp8.py check_mxfp8_support",
                           archs=("blackwell",)),
        # "blockwise" (also offered, transformer_config.py:573) is not in FP8_RECIPES.
    },
    # MoE token dispatch: --moe-token-dispatcher-type alltoall, what Megatron-Bridge's MoE recipes
    # run (MoEAlltoAllTokenDispatcher, MLM megatron/core/transformer/moe/token_dispatcher.py):
    # permute the rank's own tokens, all-to-all over EP, all-gather in the expert-TP group
    # (dispatch_postprocess); reduce-scatter, all-to-all, unpermute on combine. MoE training
    # with TP requires sequence parallelism (MLM megatron/core/transformer/moe/moe_layer.py
    # MoELayer.forward raises otherwise), so the shard is tokens / tp.
    moe_dispatch="sequence_shard",
    # TEGroupedMLP applies the routing weights inside the activation
    # (``weighted_bias_swiglu_impl(intermediate_parallel, bias_parallel, permuted_probs, ...)``,
    # MLM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
    # megatron/core/transformer/moe/experts.py:963-970),
    # whose WeightedSwiGLUFunction saves its input and the weights
    # (``ctx.save_for_backward(input_for_backward, weights)``, megatron/core/fusions/
    # fused_bias_swiglu.py:266-270); the combine's unpermute then has no output to keep.
    probs_in_activation=True,
    fp8_default="delayed",  # fp8_recipe default "delayed" (MLM transformer_config.py:573)
    # --fp4-format e2m1 --fp4-recipe nvfp4: TE's NVFP4BlockScaling in every transformer layer
    # (megatron-core 0.16 megatron/core/transformer/transformer_config.py:510-518;
    # megatron/core/fp4_utils.py:97-99 get_fp4_recipe -> transformer_engine.common.recipe.
    # NVFP4BlockScaling(); :120-148 get_fp4_context wraps each layer in fp8_autocast with it,
    # except the first/last layers under --first-last-layers-bf16, which Megatron-Bridge's
    # performance recipes leave off: MB src/megatron/bridge/training/mixed_precision.py
    # bf16_with_nvfp4_mixed). The output layer and the embedding are not TE modules: bf16.
    fp4_recipes={"nvfp4": NVFP4_TE},
    # TE's LayerNormLinear (linear_qkv) and LayerNormMLP-style fused norm + fc1 (Megatron's
    # TELayerNormColumnParallelLinear) quantize in the norm and the activation kernels.
    fp8_cast_fusion="te",
    # TE picks FusedAttention (cuDNN) over FlashAttention on sm90+: "Disabling FlashAttention to
    # give FusedAttention preference on Hopper+" (TE transformer_engine/pytorch/attention/
    # dot_product_attention/utils.py:1648); Megatron leaves it to TE: attention_backend = auto
    # (MLM transformer_config.py:144).
    attention="cudnn",
    # Fused by default: RMSNorm in TE (TELayerNormColumnParallelLinear), --no-bias-swiglu-fusion,
    # --no-bias-dropout-fusion, --no-rope-fusion are store_false, i.e. fusions on
    # (MLM megatron/training/arguments.py:2755-2768) -> the fused reference, 1.0.
    elementwise_traffic=1.0,
    # cross_entropy_loss_fusion = True in Megatron-Bridge's performance recipes (_MB
    # src/megatron/bridge/recipes/*: "Kernel selections", impl "native" or "te"), Megatron-Core
    # megatron/core/fusions/fused_cross_entropy.py.
    loss="fused",
    # Either way the loss is vocabulary-parallel: ``logits.float()``, exp() and the softmax in
    # place, saved for backward and made the gradient in place, cast to bf16 there
    # (megatron-core 0.16.1 megatron/core/fusions/fused_cross_entropy.py calculate_gradients
    # ``grad_input.to(torch.bfloat16)``; tensor_parallel/cross_entropy.py the unfused one); the
    # bf16 logits are a local of GPTModel.forward, gone by the backward: 4 B saved + 2 B, not
    # 4 + 6. Left off: Megatron-LM's golden runs (benchmarks/memory_accuracy.py) measure the
    # last pipeline stage 10 % above even the 10 B estimate (an unmodelled term there); with it
    # on, tp1-pp4 goes from -10.4 % to -17.5 %. Switch on once that term is found.
    loss_vocab_parallel=False,
    # Defaults are False (MLM arguments.py:2968 --overlap-grad-reduce, :2989 --overlap-param-gather)
    # but the published recipes set both True: MB src/megatron/bridge/recipes/common.py:83-84
    # (DistributedDataParallelConfig(overlap_grad_reduce=True, overlap_param_gather=True)).
    # Without overlap_grad_reduce the buckets are one (bucket_size None) and the reduction runs
    # synchronously after the backward (finalize_model_grads -> finish_grad_sync: "When
    # overlap_grad_reduce is set to False, calls synchronous communication ops"; megatron-core
    # 0.16.1 megatron/core/distributed/distributed_data_parallel.py:66-68, :527-537): fully
    # exposed. parallel.overlap_grad_reduce / overlap_param_gather set them per scenario.
    overlap_grad_reduce=True,
    overlap_param_gather=True,
    # bf16 -> accumulate_allreduce_grads_in_fp32 = True (MLM arguments.py:1192-1193): one fp32
    # main_grad buffer of full size (megatron/core/distributed/param_and_grad_buffer.py), also
    # with the distributed optimizer. The ZeRO-0/1 rows of model_states.py already count 4 B/param
    # unsharded fp32 grads, so nothing is extra -> 0.
    unsharded_grad_bytes=0.0,
    # Buckets (--ddp-bucket-size, default max(4e7, 1e6*dp) params,
    # megatron/core/distributed/distributed_data_parallel_config.py:48) are views into the grad
    # buffer: reduction in place -> 0.
    dp_bucket_bytes=0.0,
    flags={
        "recompute": "--recompute-granularity {selective,full} (+ --recompute-modules for "
                     "selective; --recompute-method uniform for full; layer = full + "
                     "--recompute-method block --recompute-num-layers N)",
        "fp8_recipe": "--fp8-recipe {delayed,tensorwise,mxfp8,blockwise}",
        "fp8_format": "--fp8-format {e4m3,hybrid}",
        "tp_comm_overlap": "--tp-comm-overlap",
        "fp8_param_gather": "--fp8-param-gather",
        "fp8_attention": "--fp8-dot-product-attention",
        "expert_tp": "--expert-tensor-parallel-size",
        "zero": "--use-distributed-optimizer (1); --use-megatron-fsdp "
                "--data-parallel-sharding-strategy {no_shard,optim,optim_grads,optim_grads_params}",
        "tp": "--tensor-model-parallel-size",
        "pp": "--pipeline-model-parallel-size",
        "cp": "--context-parallel-size",
        "ep": "--expert-model-parallel-size",
        "pp_schedule": "--num-layers-per-virtual-pipeline-stage (interleaved 1F1B; default 1F1B)",
        "overlap_grad_reduce": "--overlap-grad-reduce",
        "overlap_param_gather": "--overlap-param-gather",
    },
    sources=(
        f"{_MLM} megatron/core/transformer/transformer_config.py",
        f"{_MLM} megatron/core/model_parallel_config.py",
        f"{_MLM} megatron/training/arguments.py",
        f"{_MLM} megatron/core/distributed/distributed_data_parallel_config.py",
        f"{_MLM} megatron/core/distributed/param_and_grad_buffer.py",
        f"{_MB} src/megatron/bridge/recipes/common.py",
        f"{_TE} transformer_engine/pytorch/attention/dot_product_attention/utils.py",
        f"{_TE} docs/features/low_precision_training/",
        f"{_TE} docs/examples/gemm_profiling/gemm_profiling.rst",
    ),
)

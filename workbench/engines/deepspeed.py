"""``deepspeed``: DeepSpeed ZeRO stages 0-3, as driven by Megatron-DeepSpeed (the model code the
record follows) or by Hugging Face Trainer / Accelerate.

Conventions in words: JSON config; ZeRO-1/2/3 partition optimizer states, gradients and
parameters; bf16 + ZeRO-1 with fp32 gradient accumulation goes through ``BF16_Optimizer``
(fp32 gradient buffer of full size — what the ZeRO-1 row of ``model_states.py`` already counts).
Gradient reduction copies into a contiguous bucket of ``reduce_bucket_size`` elements (5e8,
in the bf16 model dtype: 1 GB), double-buffered only when ``overlap_comm`` is on, which defaults
to on for stage 3 only. FP8 exists only through Megatron-DeepSpeed's TE path (delayed scaling).
Megatron-DeepSpeed fuses RMSNorm (apex) but runs SwiGLU and RoPE eagerly.

Citations: DS = deepspeedai/DeepSpeed @ edaa7221267243c7be7fb49c5d5f5c4fb97b4641;
MDS = deepspeedai/Megatron-DeepSpeed @ 4efb479d5317ce9b86096b9d8e3e8030b0b5263b;
PT = pytorch/pytorch @ 21c3369eded41cbad40b61858013c3312afc6dbb.
FP8 cast bytes per element and role: ``engines.types.CastBytes``.
"""
from workbench.engines.types import SINGLE_READ_CAST, Engine, Fp8Recipe

_DS = "deepspeedai/DeepSpeed@edaa7221267243c7be7fb49c5d5f5c4fb97b4641"
_MDS = "deepspeedai/Megatron-DeepSpeed@4efb479d5317ce9b86096b9d8e3e8030b0b5263b"
_TE = "NVIDIA/TransformerEngine@d0067d0da6cb01811b8072a7d304f0e00344ce2b"
_PT = "pytorch/pytorch@21c3369eded41cbad40b61858013c3312afc6dbb"

ENGINE = Engine(
    name="deepspeed",
    label="DeepSpeed ZeRO (Megatron-DeepSpeed, HF Trainer/Accelerate)",
    about="Microsoft's DeepSpeed runtime: ZeRO 0-3 and BF16_Optimizer, with Megatron-DeepSpeed "
          "or Hugging Face models.",
    # compile: DeepSpeedEngine.compile() (DS deepspeed/runtime/engine.py:5706) and the "compile"
    # JSON section (DS deepspeed/compile/config.py, deepcompile);
    # fp8_recipe: Megatron-DeepSpeed --fp8-hybrid / --fp8-e4m3 with --transformer-impl
    # transformer_engine (MDS megatron/arguments.py:503-528). No async TP or expert-TP switch.
    # overlap_grad_reduce: zero_optimization.overlap_comm (DS deepspeed/runtime/zero/config.py:138).
    switches=("compile", "fp8_recipe", "overlap_grad_reduce"),
    # --recompute-granularity {full,selective} (MDS megatron/arguments.py:830); DeepSpeed's own
    # activation_checkpointing is whole-layer (DS deepspeed/runtime/activation_checkpointing/).
    recompute=("none", "selective", "full"),
    # zero_optimization.stage, default 0 (DS deepspeed/runtime/zero/config.py:95).
    zero=(0, 1, 2, 3),
    # What DeepSpeed runs, for the rule table (scenario/rules/) and --to deepspeed.
    # PipelineEngine runs one schedule, TrainSchedule (1F1B: DS deepspeed/runtime/pipe/
    # schedule.py), and refuses ZeRO-2/3: "ZeRO-2 and ZeRO-3 are incompatible with pipeline
    # parallelism" (DS deepspeed/runtime/pipe/engine.py:76-77).
    pp_schedules=("1f1b",),
    zero_with_pp=(0, 1),
    # MiCS (hierarchical sharding) was removed: DS deepspeed/runtime/config.py rejects
    # mics_shard_size; ZeRO shards over the whole data-parallel group.
    hsdp_zero=(),
    # Sequence parallelism is Ulysses all-to-all (deepspeed/sequence/layer.py), not ring
    # attention.
    cp=False,
    # ZeRO-3 releases gathered parameters after use (stage3_max_live_parameters bounds what
    # stays; DS deepspeed/runtime/zero/config.py).
    keeps_gathered_params=False,
    # ZeRO-3 gathers parameter by parameter as each submodule runs, not block by block
    # (PartitionedParameterCoordinator.fetch_sub_module, DS
    # deepspeed/runtime/zero/partitioned_param_coordinator.py:310): it prefetches while the
    # available parameters stay under stage3_max_live_parameters (1e9 elements, zero/config.py:238;
    # ``max_params_to_prefetch = min(max_n_available - n_available, prefetch_bucket_sz)``, :452)
    # and keeps a parameter gathered when it is used again within stage3_max_reuse_distance
    # (1e9, config.py:244; ``__params_to_release``, :634), as at the turn from forward to backward.
    zero3_live_parameters=1e9,
    why={
        "pp_schedules": "DeepSpeed's PipelineEngine runs one schedule, TrainSchedule (1F1B; "
                        "deepspeed/runtime/pipe/schedule.py)",
        "zero_with_pp": "DeepSpeed's PipelineEngine refuses it: 'ZeRO-2 and ZeRO-3 are "
                        "incompatible with pipeline parallelism' (deepspeedai/DeepSpeed@edaa722 "
                        "deepspeed/runtime/pipe/engine.py:76-77); use zero 1",
        "hsdp_zero": "hierarchical sharding (MiCS) was removed from DeepSpeed; ZeRO shards "
                     "over the whole data-parallel group",
        "cp": "DeepSpeed's sequence parallelism is Ulysses all-to-all, not ring attention",
        "keeps_gathered_params": "ZeRO-3 always releases gathered parameters after use "
                                 "(stage3_max_live_parameters bounds what stays)",
    },
    fp8_recipes={
        # TE DelayedScaling through Megatron-DeepSpeed (--fp8-amax-history-len,
        # --fp8-amax-compute-algo, MDS arguments.py:520-526): same GEMM kernel as tensorwise
        # (TE docs/features/low_precision_training/speedups.rst) -> 1.0; single read, amax fused in
        # the cast: types.SINGLE_READ_CAST; which TE modules MDS builds was not read, so no cast
        # is taken as fused.
        "delayed": Fp8Recipe(1.0, SINGLE_READ_CAST,
                             f"{_MDS} megatron/arguments.py; {_TE} "
                             "docs/features/low_precision_training/"),
    },
    fp8_default="delayed",  # the only recipe TE is configured with in MDS
    # DeepSpeed has no attention kernel of its own. HF models default to attn_implementation
    # "sdpa", whose CUDA priority order is flash_attention, efficient, math, cudnn (PT
    # aten/src/ATen/native/transformers/cuda/sdp_utils.cpp priority_order) -> FlashAttention-2;
    # Megatron-DeepSpeed's FlashAttention-2 is --use-flash-attn-v2 (MDS arguments.py:930; its code
    # default is the unfused CoreAttention).
    attention="flash2",
    # Megatron-DeepSpeed llama path (MDS megatron/model/): RMSNorm = apex MixedFusedRMSNorm
    # (megatron/model/__init__.py) -> fused 10h; swiglu = F.silu(x[0]) * x[1]
    # (megatron/model/transformer.py:138-140) -> 14f = 49h vs fused 8f = 28h;
    # apply_rotary_pos_emb = t*cos + _rotate_half(t)*sin (megatron/model/rotary_pos_embedding.py):
    # fwd mul 2 + neg 1 + cat 2 + mul 2 + add 3 = 10, bwd 10 per element vs fused 4 -> 25h vs 5h;
    # residual adds 12h both. Llama-3-8B layer (h=4096, f=3.5h, k=h/4): (10+49+25+12)h /
    # (10+28+5+12)h = 96/55 = 1.75. (HF models run eager RMSNorm too: higher still.)
    elementwise_traffic=1.75,
    # DeepSpeed-MoE's ``Experts.forward`` splits the dispatched tokens into one chunk per local
    # expert and calls each expert in a Python loop (_DS deepspeed/moe/experts.py).
    expert_gemms="loop",
    # Megatron-DeepSpeed's GPT loss: vocab_parallel_cross_entropy(output.float(), labels)
    # (_MDS megatron/model/gpt_model.py post_language_model_processing): fp32 upcast.
    loss="upcast",
    # ... into Megatron's vocab_parallel_cross_entropy: exp() and the softmax in place in that
    # fp32 copy, saved and made the gradient in place (the algorithm of megatron-core 0.16.1
    # megatron/core/tensor_parallel/cross_entropy.py, which MDS's copy shares).
    loss_vocab_parallel=True,
    # BF16_Optimizer (zero 1, bf16, fp32 grad_accum_dtype: deepspeed 0.19.8 runtime/engine.py
    # L2305-2310) accumulates autograd's bf16 ``.grad`` of every parameter into its fp32 flat
    # buffer (bf16_optimizer.py ``_update_hp_grad``) and zeroes the bf16 ones in place
    # (``clear_lp_grads(set_to_none=False)`` from backward_prologue; immediate_grad_update
    # defaults to False, runtime/precision_config.py L51): 2 B/param beside the fp32 4 B.
    lp_grad_bytes_by_zero=(0.0, 2.0, 0.0, 0.0),
    # overlap_comm None -> stage == 3 (DS deepspeed/runtime/zero/config.py:383-386): False for
    # stages 0-2, True for stage 3 (overlap_at_zero3). Off, the reduction runs on the compute
    # stream inside the backward ("stream = self.reduction_stream if self.overlap_comm else
    # get_accelerator().current_stream()", deepspeed 0.19.8 deepspeed/runtime/zero/
    # stage_1_and_2.py:1594; stage3.py:340-341 reduce_and_partition_stream = the default
    # stream): serialised with the compute, fully exposed.
    overlap_grad_reduce=False,
    # Stages 1-2 all-gather the updated bf16 partitions inside step(), after the optimizer and
    # before the next forward (all_gather_dp_groups, DS
    # deepspeed/runtime/zero/stage_1_and_2.py:2396) -> not overlapped. Stage 3 prefetches parameters
    # in the forward (stage3_prefetch_bucket_size, 5e7 elements, DS zero/config.py:215) ->
    # overlapped there; as for overlap_comm, the record follows stages 1-2.
    overlap_param_gather=False,
    overlap_at_zero3=(True, True),
    # PipelineEngine's sends and receives are blocking: p2p.send / p2p.recv assert
    # async_op == False and call dist.send / dist.recv (deepspeed 0.19.8
    # deepspeed/runtime/pipe/p2p.py:46-84), issued by _exec_schedule one instruction at a time
    # (pipe/engine.py:1373-1388; TrainSchedule per micro-batch: RecvActivation, SendActivation,
    # RecvGrad, SendGrad, pipe/schedule.py): each transfer waits in line with the compute.
    pp_blocking_p2p=True,
    # BF16_Optimizer (bf16 + ZeRO-1 + fp32 grad accumulation, DS engine.py:1994-1996) keeps
    # fp32_groups_gradients_flat = zeros_like(bf16 flat, fp32): full-size 4 B/param
    # (DS deepspeed/runtime/bf16_optimizer.py:176) = the ZeRO-1 row's 4 B -> 0 extra. The default
    # ZeRO path (grad_accum_dtype = model dtype) keeps 2 B bf16 grads, less than the table.
    unsharded_grad_bytes=0.0,
    # reduce_bucket_size 5e8 ELEMENTS (DS zero/config.py:113) allocated in self.dtype (bf16, 2 B)
    # as the contiguous IPG buffer (DS deepspeed/runtime/zero/stage_1_and_2.py:2502, stage3.py:733)
    # -> 5e8 x 2 B = 1e9 B; a second buffer only with overlap_comm (stage_1_and_2.py:2511).
    # allgather_bucket_size 5e8 elements (zero/config.py:132) is a chunking limit of the param
    # all-gather after the step, not a resident buffer.
    dp_bucket_bytes=1.0e9,
    flags={
        "recompute": "--recompute-granularity {selective,full} (Megatron-DeepSpeed); "
                     "activation_checkpointing.* (DeepSpeed JSON)",
        "fp8_recipe": "--fp8-hybrid --transformer-impl transformer_engine (Megatron-DeepSpeed)",
        "compile": "DeepSpeedEngine.compile() / compile.deepcompile (JSON)",
        "zero": "zero_optimization.stage",
        "bf16": "bf16.enabled",
        "overlap_grad_reduce": "zero_optimization.overlap_comm",
        "reduce_bucket": "zero_optimization.reduce_bucket_size",
        "prefetch_bucket": "zero_optimization.stage3_prefetch_bucket_size",
        "tp": "--tensor-model-parallel-size (Megatron-DeepSpeed)",
        "pp": "--pipeline-model-parallel-size (Megatron-DeepSpeed)",
        "cp": "--ds-sequence-parallel-size (Megatron-DeepSpeed, Ulysses)",
        "ep": "--moe-expert-parallel-size (Megatron-DeepSpeed)",
    },
    sources=(
        f"{_DS} deepspeed/runtime/zero/config.py",
        f"{_DS} deepspeed/runtime/zero/stage_1_and_2.py",
        f"{_DS} deepspeed/runtime/zero/stage3.py",
        f"{_DS} deepspeed/runtime/bf16_optimizer.py",
        f"{_DS} deepspeed/runtime/engine.py",
        f"{_DS} deepspeed/compile/config.py",
        f"{_MDS} megatron/arguments.py",
        f"{_MDS} megatron/model/transformer.py",
        f"{_MDS} megatron/model/rotary_pos_embedding.py",
        f"{_PT} aten/src/ATen/native/transformers/cuda/sdp_utils.cpp",
        f"{_TE} docs/features/low_precision_training/",
    ),
)

"""``fsdp``: PyTorch FSDP1 (``FullyShardedDataParallel``, flat parameters) trainers — MosaicML
Composer / llm-foundry (the record's reference), also HF Accelerate and IBM fms-fsdp.

Conventions in words: YAML config; ``fsdp_config.sharding_strategy`` FULL_SHARD (ZeRO-3, the
default), SHARD_GRAD_OP (ZeRO-2) or NO_SHARD (DDP-like); llm-foundry's pretraining YAMLs run
``mixed_precision: PURE`` (bf16 params, reductions and buffers) over fp32 sharded flat params.
Composer defaults ``backward_prefetch`` to BACKWARD_POST and ``forward_prefetch`` to False
(FSDP1 still overlaps forward all-gathers through CPU run-ahead). FP8 is TE delayed scaling
through ``precision: amp_fp8`` with ``fc_type: te``. Attention is the flash-attn package (v2).
Layer-wise activation checkpointing only. Eagerly, llm-foundry's norms and RoPE are single fused
kernels but the GLU FFN runs one kernel per op; ``compile_config`` compiles the model.

Citations: LF = mosaicml/llm-foundry @ 8c8dd48f72168c5d51e2f7b151595892a8fba43d;
CO = mosaicml/composer @ 6405188805a0054b4551ec49e4919c54c971d0e8;
TE = NVIDIA/TransformerEngine @ d0067d0da6cb01811b8072a7d304f0e00344ce2b;
FSDP1 docs = https://docs.pytorch.org/docs/stable/fsdp.html.
FP8 cast bytes per element and role: ``engines.types.CastBytes``.
"""
from workbench.engines.types import SINGLE_READ_CAST, Engine, Fp8Recipe

_LF = "mosaicml/llm-foundry@8c8dd48f72168c5d51e2f7b151595892a8fba43d"
_CO = "mosaicml/composer@6405188805a0054b4551ec49e4919c54c971d0e8"
_TE = "NVIDIA/TransformerEngine@d0067d0da6cb01811b8072a7d304f0e00344ce2b"
_FSDP_DOCS = "https://docs.pytorch.org/docs/stable/fsdp.html"

ENGINE = Engine(
    name="fsdp",
    label="PyTorch FSDP1 trainers (Composer/llm-foundry, Accelerate, fms-fsdp)",
    about="Flat-parameter FullyShardedDataParallel trainers: MosaicML Composer/llm-foundry, "
          "HF Accelerate, IBM fms-fsdp.",
    # compile: train config compile_config (LF llmfoundry/utils/config_utils.py:182, passed to
    # Composer Trainer(compile_config=...), CO composer/trainer/trainer.py:1105);
    # fp8_recipe: precision amp_fp8 -> TE fp8_autocast (CO composer/core/precision.py:87-98),
    # requires te layers (LF llmfoundry/command_utils/train.py:99-104). No async TP / expert TP.
    switches=("compile", "fp8_recipe"),
    # fsdp_config.activation_checkpointing: checkpoint wrappers applied where the model's
    # activation_checkpointing_fn says (CO composer/distributed/dist_strategy.py:508-579); MPT's
    # model.activation_checkpointing_target selects blocks by index ({mptblock: [k-1, 2k-1,
    # ...]}, LF llmfoundry/models/utils/act_ckpt.py:101-104; modeling_mpt.py:1306-1365) ->
    # full and layer (Hugging Face models checkpoint every block only, LF
    # llmfoundry/models/hf/hf_fsdp.py:216-221); no Korthikanti selective mode.
    # llm-foundry / Composer train without activation checkpointing unless asked
    recompute_default="none",
    recompute=("none", "full", "layer"),
    # sharding_strategy default FULL_SHARD (CO parallelism.py:38); SHARD_GRAD_OP = ZeRO-2,
    # NO_SHARD = DDP (FSDP1 docs ShardingStrategy).
    zero=(0, 2, 3),
    fp8_recipes={
        # DelayedScaling(fp8_format=HYBRID, amax_history_len=16, amax_compute_algo="max")
        # (CO composer/core/precision.py:89-96). GEMM: same kernel as tensorwise (TE
        # docs/features/low_precision_training/speedups.rst) -> 1.0. Cast: single read with amax
        # fused (types.SINGLE_READ_CAST). te.Linear modules only: no cast fused.
        "delayed": Fp8Recipe(1.0, SINGLE_READ_CAST,
                             f"{_CO} composer/core/precision.py; {_TE} "
                             "docs/features/low_precision_training/"),
    },
    fp8_default="delayed",
    # attn_impl default 'flash' (LF llmfoundry/models/utils/config_defaults.py:12) -> flash_attn
    # v2 functions when is_flash_v2_installed() (LF llmfoundry/models/layers/attention.py:406).
    attention="flash2",
    # Llama-style llm-foundry MPT (ffn_type mptglu, rmsnorm, rope_impl 'dail'), Llama-3-8B layer
    # (h=4096, f=3.5h, k=h/4), per token fwd+bwd in 16-bit element accesses:
    #   norms: torch.nn.RMSNorm / LPLayerNorm -> one aten kernel each way (LF
    #   llmfoundry/models/layers/norm.py; fused RMSNorm kernel in PyTorch >= 2.9) = 10h, as fused;
    #   RoPE 'dail' = flash_attn Triton rotary (LF config_defaults.py:26) = 5h, as fused;
    #   MPTGLU: down_proj(act(gate_proj(x)) * up_proj(x)) (LF llmfoundry/models/layers/ffn.py:215-
    #   218): fwd 2f + 3f, bwd 3f + 3f + 3f = 14f = 49h vs fused 8f = 28h; residual adds 12h both.
    #   (10 + 49 + 5 + 12) / (10 + 28 + 5 + 12) = 76 / 55 = 1.38.
    # (The default MPT — LayerNorm, GELU MLP without bias, learned positions — is 1.0; HF models
    # under Accelerate run eager RMSNorm and RoPE: higher.)
    elementwise_traffic=1.38,
    # llm-foundry's causal LM: loss_fn default "fused_crossentropy" = flash-attn's
    # CrossEntropyLoss, applied to the model's 16-bit logits (mosaicml/llm-foundry@0085285a
    # llmfoundry/models/mpt/modeling_mpt.py ComposerMPTCausalLM.__init__ and .loss). That
    # kernel saves (logits, lse, labels) and its backward writes ``torch.empty_like(logits)``
    # (Dao-AILab/flash-attention@900b3793 flash_attn/ops/triton/cross_entropy.py
    # CrossEntropyLossFunction; the v1.0.3 xentropy_cuda_lib it replaced saves the same): no
    # fp32 tensor per logit.
    loss="xentropy",
    # FSDP1 makes each flat parameter's sharded gradient in its post-backward reduce-scatter
    # (torch 2.13 torch/distributed/fsdp/_runtime_utils.py L847-848 _reduce_grad
    # ``new_sharded_grad``); Composer's optimizer.zero_grad frees it between steps (set_to_none,
    # torch/optim/optimizer.py L1024 default). NO_SHARD (zero 0) keeps DDP-like buckets.
    grads_in_backward=(2, 3),
    # FSDP1 reduce-scatters each unit's grads asynchronously in the backward; Composer's
    # backward_prefetch default 'BACKWARD_POST' (CO composer/utils/parallelism.py:22) still
    # prefetches the next all-gather; forward_prefetch False (parallelism.py:27): "This is only
    # useful for CPU-bound workloads, in which case issuing the next all-gather earlier may
    # improve overlap" (FSDP1 docs) — the CPU runs ahead and issues forward all-gathers early.
    overlap_grad_reduce=True,
    overlap_param_gather=True,
    # Flat params: unsharded bf16 gradients exist per FSDP unit only until its reduce-scatter;
    # the kept gradient is the sharded fp32 flat-param grad (FSDP1 docs, MixedPrecision), as the
    # table's ZeRO-2/3 rows -> 0. mixed_precision PURE in LF scripts/train/yamls/pretrain/*.yaml.
    unsharded_grad_bytes=0.0,
    # FSDP1 communicates per flat parameter (counted with the unit's buffers) -> 0.
    dp_bucket_bytes=0.0,
    flags={
        "recompute": "fsdp_config.activation_checkpointing (layer: + "
                     "model.activation_checkpointing_target {mptblock: [k-1, 2k-1, ...]})",
        "fp8_recipe": "precision: amp_fp8 (with model.fc_type: te)",
        "compile": "compile_config",
        "zero": "fsdp_config.sharding_strategy {NO_SHARD,SHARD_GRAD_OP,FULL_SHARD} "
                "(HYBRID_SHARD / _HYBRID_SHARD_ZERO2 with HSDP replicas)",
        "mixed_precision": "fsdp_config.mixed_precision {DEFAULT,PURE,FULL}",
        "overlap_param_gather": "fsdp_config.backward_prefetch / fsdp_config.forward_prefetch",
        "tp": "tp_config.tensor_parallel_degree",
    },
    sources=(
        f"{_LF} llmfoundry/utils/config_utils.py",
        f"{_LF} llmfoundry/command_utils/train.py",
        f"{_LF} llmfoundry/models/utils/config_defaults.py",
        f"{_LF} llmfoundry/models/layers/norm.py",
        f"{_LF} llmfoundry/models/layers/ffn.py",
        f"{_LF} llmfoundry/models/layers/attention.py",
        f"{_LF} scripts/train/yamls/pretrain/",
        f"{_CO} composer/utils/parallelism.py",
        f"{_CO} composer/core/precision.py",
        f"{_CO} composer/distributed/mosaic_parallelism.py",
        _FSDP_DOCS,
    ),
)

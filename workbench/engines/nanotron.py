"""``nanotron``: Hugging Face nanotron — 3D parallelism (TP with optional sequence parallel,
pipeline engines AFAB / 1F1B, DP), ZeRO-1, fp32 gradient accumulation.

Conventions in words: YAML config. Tensor parallelism can overlap its communication with the
linear layers (``tp_linear_async_communication``). ZeRO-1 shards optimizer states; gradients are
accumulated in a full-size fp32 buffer (``accumulate_grad_in_fp32``) and the model is wrapped in
``torch.nn.parallel.DistributedDataParallel`` without ``gradient_as_bucket_view``, so DDP's
buckets hold another full-size copy of the gradients in the parameter dtype. Updated parameters
are all-gathered inside the optimizer step, not overlapped. Llama uses TritonRMSNorm,
flash-attn's rotary kernel and flash-attn varlen attention; the GLU runs eagerly. Only full-layer
recompute. No FP8 or compile switch in the config (an ``nanotron/fp8`` package exists but is not
wired to the trainer config).

Citations: NT = huggingface/nanotron @ 2411b022a75fb7f7561a1bb4166706da5e1b76de;
DDP docs =
https://docs.pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html.
"""
from workbench.engines.types import Engine

_NT = "huggingface/nanotron@2411b022a75fb7f7561a1bb4166706da5e1b76de"
_DDP_DOCS = ("https://docs.pytorch.org/docs/stable/generated/"
             "torch.nn.parallel.DistributedDataParallel.html")

ENGINE = Engine(
    name="nanotron",
    label="Hugging Face nanotron",
    about="Hugging Face's minimal library for 3D-parallel LLM pretraining.",
    # async_tp: ParallelismArgs.tp_linear_async_communication, default False
    # (NT src/nanotron/config/parallelism_config.py:34,47-48); column linear overlaps its
    # all-gather with the local GEMM (NT src/nanotron/parallel/tensor_parallel/functional.py:556),
    # row linear needs tp_mode REDUCE_SCATTER (NT src/nanotron/models/llama.py MLP).
    switches=("async_tp",),
    # recompute_layer: bool = False, "recompute each Transformer layer" (parallelism_config.py:35).
    recompute_default="none",   # nanotron recomputes only with recompute_layer: true
    recompute=("none", "full"),
    # OptimizerArgs.zero_stage (NT src/nanotron/config/config.py:409); > 0 builds
    # ZeroDistributedOptimizer (optimizer-state sharding) (NT src/nanotron/helpers.py:409-415).
    zero=(0, 1),
    attention="flash2",  # flash_attn_varlen_func in the training path (NT models/llama.py:275-290)
    # Llama-3-8B layer (h=4096, f=3.5h, k=h/4), per token fwd+bwd, 16-bit element accesses:
    #   TritonRMSNorm (NT src/nanotron/nn/layer_norm.py; models/llama.py:729,737) = 10h, fused;
    #   flash_attn RotaryEmbedding on q and kv (models/llama.py:683) = 5h, fused;
    #   GLUActivation: split, act(gate) * up (models/llama.py:204-206): 14f = 49h vs fused 8f = 28h;
    #   residual adds 12h both. (10 + 49 + 5 + 12) / (10 + 28 + 5 + 12) = 76 / 55 = 1.38.
    #   (The torch.cat + permute().contiguous() of k, v before the rotary kernel,
    #   models/llama.py:680-681, is a layout copy and not counted.)
    elementwise_traffic=1.38,
    # sharded_cross_entropy(sharded_logits, ..., dtype=torch.float) (nanotron
    # src/nanotron/models/llama.py Loss.forward): fp32 upcast of the logits.
    loss="upcast",
    # sharded_cross_entropy(logits, target, group, dtype=torch.float): ``.to(float)``, then
    # ``sharded_logits - logits_max`` (a second fp32 tensor), exp() and the softmax in place in
    # it, saved and made the gradient in place (huggingface/nanotron@00708b80c88ee7c05c89502e80c3201df916d774
    # src/nanotron/parallel/tensor_parallel/functional.py _ShardedCrossEntropy).
    loss_vocab_parallel=True,
    loss_shift_copy=True,
    # DDP reducer hooks overlap the gradient all-reduce with the backward (NT
    # src/nanotron/trainer.py:1156-1161; fp32-accumulation comm hook, helpers.py:444-446).
    overlap_grad_reduce=True,
    # ZeroDistributedOptimizer.step() runs _all_gather_params() after the update
    # (NT src/nanotron/optim/zero.py:95-120, dist.all_gather_coalesced at :235) -> not overlapped.
    overlap_param_gather=False,
    # FP32GradientAccumulator keeps fp32 grad buffers "for all parameters even when Zero 1 is used"
    # (NT src/nanotron/optim/gradient_accumulator.py:70) = the table's 4 B unsharded fp32 grads.
    # Extra: DDP is built without gradient_as_bucket_view (trainer.py:1156-1161), and DDP docs:
    # gradient_as_bucket_view=True "can reduce peak memory usage, where the saved memory size will
    # be equal to the total gradients size" -> the buckets hold a full bf16 copy: 2 B/param
    # (DDP only when dp > 1 or cp > 1, trainer.py:1093).
    unsharded_grad_bytes=2.0,
    # The DDP buckets (ddp_bucket_cap_mb = 25, NT config/config.py:313) are that full copy,
    # already counted above -> 0 here.
    dp_bucket_bytes=0.0,
    flags={
        "recompute": "parallelism.recompute_layer",
        "async_tp": "parallelism.tp_linear_async_communication (with parallelism.tp_mode "
                    "REDUCE_SCATTER)",
        "zero": "optimizer.zero_stage",
        "tp": "parallelism.tp",
        "pp": "parallelism.pp",
        "dp": "parallelism.dp",
        "cp": "parallelism.context_parallel_size",
        "ep": "parallelism.expert_parallel_size",
        "pp_schedule": "parallelism.pp_engine {afab,1f1b}",
        "sequence_parallel": "parallelism.tp_mode REDUCE_SCATTER",
    },
    sources=(
        f"{_NT} src/nanotron/config/parallelism_config.py",
        f"{_NT} src/nanotron/config/config.py",
        f"{_NT} src/nanotron/helpers.py",
        f"{_NT} src/nanotron/trainer.py",
        f"{_NT} src/nanotron/optim/zero.py",
        f"{_NT} src/nanotron/optim/gradient_accumulator.py",
        f"{_NT} src/nanotron/models/llama.py",
        f"{_NT} src/nanotron/parallel/tensor_parallel/functional.py",
        _DDP_DOCS,
    ),
)

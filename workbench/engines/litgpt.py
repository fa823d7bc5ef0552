"""``litgpt``: Lightning AI's LitGPT fine-tuning scripts (``finetune/lora.py``, ``full.py``) on
Lightning Fabric — one GPU, or FSDP over several.

Conventions in words (the commit of its published resource tables, LitGPT 8641822, with the
Lightning release it pinned, PyTorch 2.1 and bitsandbytes 0.41.1): ``--precision bf16-true``
builds the model in bf16 and trains it as it is (weights, gradients and optimizer states in
bf16, no fp32 master). The model is LitGPT's own eager ``nn.Module``s: an RMSNorm of eager ops in
the compute dtype, one fused ``attn`` linear for q, k and v, SwiGLU as three eager ops. Fabric
casts the model's output to fp32 and the script keeps it until the backward; the loss is
cross-entropy over 128-token chunks of the head's output. LoRA adapts the fused qkv linear with
one dropout; ``--quantize bnb.nf4`` swaps every ``nn.Linear``, the head included, for a
bitsandbytes 4-bit one and trains with bitsandbytes' PagedAdamW. Several GPUs run Fabric's
FSDPStrategy (FSDP1, ``use_orig_params=True``, every Block wrapped and checkpointed).

Citations: LG = Lightning-AI/litgpt@8641822b3249bb94f068c254aa5d13decbc9f0a0; L = Lightning-AI/
pytorch-lightning@71aed751f7f0ca8422ddca256e602099070f490b (LitGPT's pinned Lightning);
T = PyTorch 2.1.0 (torch/distributed/fsdp/); B = TimDettmers/bitsandbytes@18e827d666fa
("Version 0.41.1."). The saved tensors of one LitGPT block were counted from the autograd graph
of LitGPT's modules under torch 2.1.0 (docs/engines.md, "LitGPT's own modules").
"""
from workbench.engines.types import Engine

_LG = "Lightning-AI/litgpt@8641822b"
_L = "Lightning-AI/pytorch-lightning@71aed751"

ENGINE = Engine(
    name="litgpt",
    label="LitGPT (Lightning Fabric)",
    about="Lightning AI's fine-tuning scripts: full, LoRA and QLoRA on one GPU or FSDP.",
    switches=(),
    # one GPU: no activation checkpointing; FSDP: ``activation_checkpointing_policy={Block}``
    # (LG finetune/lora.py L83-89)
    recompute=("none", "full"),
    recompute_default="none",
    # Fabric's strategy "auto" on one device, FSDPStrategy (FULL_SHARD) on several
    # (LG finetune/lora.py L83-92): no DDP
    zero=(0, 3),
    zero0_without_dp=True,
    pp_schedules=(),
    cp=False,
    precisions=("fp32", "bf16"),
    # torch.optim.AdamW; with --quantize bitsandbytes' 32-bit PagedAdamW (LG finetune/lora.py
    # L141-143), whose states of tensors under 1e5 elements (every LoRA factor here) are
    # ordinary device tensors (B optim/optimizer.py ``get_state_buffer`` L304-312): adamw
    optimizers=("adamw",),
    offload={},
    methods=("full", "lora", "qlora"),
    # bf16-true: Fabric's HalfPrecision builds and keeps the model in bf16
    # (L src/lightning/fabric/plugins/precision/half.py)
    state_dtype="param",
    adapter_dtype="param",
    # ``--quantize bnb.nf4`` / ``bnb.nf4-dq`` (L plugins/precision/bitsandbytes.py)
    lora_quant=("nf4",),
    # ``lora_mlp`` adapts fc_1, fc_2 and proj together (LG lit_gpt/lora.py ``LLaMAMLP``)
    lora_mlp_whole=True,
    # ``mark_only_lora_as_trainable`` (LG lit_gpt/lora.py; finetune/lora.py L131)
    lora_trainable=(),
    attention="flash2",
    eager_activations=True,
    # LitGPT's Llama blocks are plain modules as torchtune's and torchtitan's: the same eager
    # elementwise traffic (workbench/engines/torchtitan.py derives it)
    elementwise_traffic=1.75,
    # ``chunked_cross_entropy`` over the head's 128-token chunks (LG lit_gpt/utils.py L238-262,
    # ``lm_head_chunk_size=128``, lit_gpt/lora.py L500-502), each chunk's log-softmax in fp32
    loss="chunked",
    # LG lit_gpt/rmsnorm.py L19-21: ``norm_x = torch.mean(x * x, ...)`` in the input's dtype;
    # the mean's backward keeps ``x * x`` (MeanBackward1, counted under torch 2.1.0)
    norm_keeps_square=True,
    # LG lit_gpt/model.py L201-220: ``qkv = self.attn(x)``, q, k, v split as views; q and k are
    # new tensors after RoPE (``torch.cat``), v stays a view that SDPA saves; LoRAQKVLinear
    # (lit_gpt/lora.py L290-296, L375): ``lora_A(self.lora_dropout(x))`` once for the enabled
    # parts, ``zero_pad``'s ``index_copy`` keeps its source (IndexCopyBackward0)
    fused_qkv=True,
    # L src/lightning/fabric/plugins/precision/half.py ``convert_output`` (to
    # torch.get_default_dtype(), fp32), applied by wrappers.py L116-124; the script's ``logits``
    # holds it through ``fabric.backward`` (LG finetune/lora.py ``train``)
    output_fp32=True,
    # B bitsandbytes/autograd/_functions.py L494-549 ``MatMul4Bit``: ``ctx.tensors = (A, B)``,
    # backward ``F.dequantize_4bit(B, ctx.state).to(grad_output.dtype)``; L plugins/precision/
    # bitsandbytes.py L119-134 replaces every ``torch.nn.Linear`` (``ignore_modules`` empty) and
    # quantizes from fp16 (L221: ``quant_state`` fp16, so a dequantization writes fp16 and the
    # ``.to(bf16)`` a second copy)
    qlora_keeps_inputs=True,
    qlora_head=True,
    qlora_dequant_bytes=4.0,
    # L src/lightning/fabric/strategies/fsdp.py L175 ``use_orig_params`` True; T
    # flat_param.py ~L713-743 (a flat parameter requires grad if any original does),
    # _runtime_utils.py ``_post_backward_hook`` L761-765 (no reduce under no_sync), L529-535
    # (the root is not resharded after forward); plugins/precision/fsdp.py L92-93 (bf16-true:
    # param, reduce and buffer dtype bf16)
    fsdp1_flat_params=True,
    # sharded gradients made in the backward, freed by ``optimizer.zero_grad()`` between steps
    grads_in_backward=(3,),
    why={
        "methods": "LitGPT's finetune scripts run full, lora and qlora (lora with --quantize); "
                   "for pre-training pick another engine",
        "pp_schedules": "LitGPT's finetune scripts have no pipeline parallelism; use pp 1",
        "cp": "LitGPT's finetune scripts have no context parallelism; use cp 1",
        "zero": "LitGPT runs one device (zero 0, dp 1) or Fabric's FSDPStrategy (zero 3)",
        "zero0_without_dp": "LitGPT has no DDP in its finetune scripts: several GPUs run "
                            "FSDPStrategy; use zero 3 (or dp 1)",
        "precisions": "LitGPT trains bf16-true or 32-true here: bf16 or fp32",
        "optimizers": "LitGPT's finetune scripts use AdamW (torch.optim's, or bitsandbytes' "
                      "32-bit PagedAdamW with --quantize): adamw",
        "offload": "LitGPT's finetune scripts do not offload (cpu_offload=False)",
        "adapter_tp": "LitGPT's LoRA scripts have no tensor parallelism; use tp 1",
        "lora_quant": "LitGPT's QLoRA here is bitsandbytes NF4 (--quantize bnb.nf4 / "
                      "bnb.nf4-dq); use quant nf4",
        "lora_mlp_whole": "LitGPT adapts the whole MLP or none of it (lora_mlp: fc_1, fc_2, "
                          "proj together); name gate, up and down together or none",
        "lora_trainable": "LitGPT's LoRA trains only the adapters "
                          "(mark_only_lora_as_trainable); use trainable []",
    },
    flags={"recompute": "activation_checkpointing_policy"},
    sources=(
        f"{_LG} finetune/lora.py", f"{_LG} lit_gpt/lora.py", f"{_LG} lit_gpt/model.py",
        f"{_LG} lit_gpt/rmsnorm.py", f"{_LG} lit_gpt/utils.py",
        f"{_L} src/lightning/fabric/plugins/precision/half.py",
        f"{_L} src/lightning/fabric/plugins/precision/bitsandbytes.py",
        f"{_L} src/lightning/fabric/strategies/fsdp.py",
        "bitsandbytes@18e827d6 bitsandbytes/autograd/_functions.py",
        "torch 2.1.0 torch/distributed/fsdp/flat_param.py, _runtime_utils.py",
    ),
)

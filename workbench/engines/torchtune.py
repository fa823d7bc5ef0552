"""``torchtune``: PyTorch's fine-tuning library — full fine-tuning, LoRA and QLoRA recipes for
one device or FSDP2 over several (``full_finetune_*``, ``lora_finetune_*``,
``qlora`` configs of the LoRA recipes).

Conventions in words: a YAML recipe config (release v0.6.1). The model is built in the config's
``dtype`` (bf16) and trained as it is: weights, gradients and optimizer states all bf16, no fp32
master copy; FSDP2 ``fully_shard`` without a mixed-precision policy shards them. LoRA adapters
(``LoRALinear``: ``lora_a`` and ``lora_b`` are ``nn.Linear`` in the model's dtype) train beside
frozen base weights; QLoRA stores the base as torchao NF4 (``quantize_base``). Activation
checkpointing wraps each block (full); ``enable_activation_offloading`` moves the saved
activations to pinned host memory on a side stream; ``optimizer_in_bwd`` (full fine-tuning
recipes) steps each parameter from a hook as its gradient arrives, so no gradient waits for the
others, and refuses gradient accumulation. The loss is ``CEWithChunkedOutputLoss`` (the output
projection in 8 chunks, each upcast to fp32). Models are eager ``nn.Module``s; ``compile``
compiles them.

Citations: TT = pytorch/torchtune @ v0.6.1; files named next to each value.
"""
from workbench.engines.types import OPTIMIZERS, Engine

_TT = "pytorch/torchtune@v0.6.1"

ENGINE = Engine(
    name="torchtune",
    label="torchtune (fine-tuning recipes)",
    about="PyTorch's fine-tuning library: full, LoRA and QLoRA recipes on one GPU or FSDP2.",
    # compile: recipe config key ``compile`` (TT recipes/*.py ``cfg.get("compile", False)``).
    switches=("compile",),
    # enable_activation_checkpointing (every TransformerDecoderLayer wrapped:
    # TT torchtune/training/_activation_checkpointing.py set_activation_checkpointing) -> full.
    recompute=("none", "full"),
    recompute_default="full",
    # single-device recipes (dp 1) or FSDP2 fully_shard in the distributed recipes
    # (TT torchtune/training/_distributed.py shard_model).
    zero=(0, 3),
    # no pipeline or context parallelism in the recipes (v0.6.1); tensor parallelism only in
    # full_finetune_distributed (``tensor_parallel_dim``)
    pp_schedules=(),
    cp=False,
    precisions=("fp32", "bf16"),
    optimizers=OPTIMIZERS,
    # fsdp_cpu_offload: FSDP2 CPUOffloadPolicy (TT recipes/full_finetune_distributed.py)
    offload={"cpu": (3,)},
    methods=("full", "lora", "qlora"),
    state_dtype="param",
    adapter_dtype="param",
    optimizer_in_backward=True,
    activation_offload=True,
    # TT recipes/lora_finetune_distributed.py (and the other three recipes): RuntimeError
    # "enable_activation_offloading should only be True when enable_activation_checkpointing is
    # True"
    activation_offload_needs_recompute=True,
    # QLoRA's base is torchao NF4 only (TT torchtune/modules/peft/lora.py LoRALinear
    # quantize_base -> to_nf4; FrozenNF4Linear for the projections without adapters)
    lora_quant=("nf4",),
    # one switch adapts w1, w2 and w3 together (TT torchtune/models/llama3/_component_builders.py
    # lora_llama3: ``if apply_lora_to_mlp: mlp = lora_llama3_mlp(...)``)
    lora_mlp_whole=True,
    # only the adapters train (TT recipes/lora_finetune_distributed.py
    # ``set_trainable_params(model, get_adapter_params(model))``)
    lora_trainable=(),
    # the distributed recipes always shard with FSDP2 (TT recipes/lora_finetune_distributed.py
    # ``training.shard_model``; full_finetune_distributed.py whenever data_parallel_dim > 1)
    zero0_without_dp=True,
    attention="flash2",
    # torchtune's Llama blocks are plain modules as torchtitan's (RMSNorm in fp32, RoPE on
    # reshaped fp32 copies, SwiGLU as three eager ops): the same eager elementwise traffic as
    # the torchtitan record derives (workbench/engines/torchtitan.py)
    elementwise_traffic=1.75,
    eager_activations=True,
    # CEWithChunkedOutputLoss: "logits.float()" per chunk (TT torchtune/modules/loss/ce_chunked_output_loss.py)
    loss="chunked",
    # compile: the recipes compile the loss with the model (TT torchtune/training/_compile.py
    # compile_loss @ v0.6.1)
    loss_compiled=True,
    # FSDP2 (zero 3): sharded gradients made in the backward (torch 2.13
    # torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py L754) and freed by the recipes'
    # optimizer zero_grad (set_to_none, torch/optim/optimizer.py L1024 default)
    grads_in_backward=(3,),
    why={
        "methods": "torchtune fine-tunes (full, lora, qlora recipes); for pre-training pick "
                   "another engine",
        "pp_schedules": "torchtune's recipes have no pipeline parallelism; use pp 1",
        "cp": "torchtune's recipes have no context parallelism; use cp 1",
        "zero": "torchtune runs one device (zero 0, dp 1) or FSDP2 full sharding (zero 3)",
        "precisions": "torchtune trains in its config's dtype: bf16 or fp32",
        "offload": "torchtune offloads FSDP2 shards to CPU memory only (fsdp_cpu_offload, "
                   "zero 3)",
        "optimizer_in_backward": "torchtune's optimizer_in_bwd runs in the full fine-tuning "
                                 "recipes only and refuses gradient accumulation "
                                 "('Gradient accumulation is not supported with optimizer in "
                                 "bwd', recipes/full_finetune_distributed.py)",
        "adapter_tp": "torchtune's LoRA recipes have no tensor parallelism "
                      "(tensor_parallel_dim is a full_finetune_distributed key); use tp 1",
        "activation_offload_needs_recompute": "torchtune offloads only checkpointed "
                                              "activations ('enable_activation_offloading "
                                              "should only be True when "
                                              "enable_activation_checkpointing is True'); set "
                                              "training.recompute full",
        "lora_quant": "torchtune's QLoRA stores the base as NF4 only (torchao to_nf4); use "
                      "quant nf4",
        "lora_mlp_whole": "torchtune adapts the whole MLP or none of it (apply_lora_to_mlp: "
                          "w1, w2, w3 together); name gate, up and down together or none",
        "lora_trainable": "torchtune's LoRA recipes train only the adapters "
                          "(set_trainable_params(model, get_adapter_params(model))); use "
                          "trainable []",
        "zero0_without_dp": "torchtune has no DDP: its distributed recipes shard with FSDP2; "
                            "use zero 3 (or dp 1)",
    },
    flags={
        "recompute": "enable_activation_checkpointing",
        "activation_offload": "enable_activation_offloading",
        "optimizer_in_backward": "optimizer_in_bwd",
        "compile": "compile",
        "offload": "fsdp_cpu_offload",
        "tp": "tensor_parallel_dim",
    },
    sources=(
        f"{_TT} torchtune/modules/peft/lora.py",
        f"{_TT} torchtune/training/_activation_offloading.py",
        f"{_TT} torchtune/modules/loss/ce_chunked_output_loss.py",
        f"{_TT} recipes/full_finetune_distributed.py",
        f"{_TT} recipes/lora_finetune_distributed.py",
    ),
)

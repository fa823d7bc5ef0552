"""``hf``: the Hugging Face stack — Transformers ``Trainer`` with PEFT adapters, TRL's
``SFTTrainer``, sharded by Accelerate (FSDP or DeepSpeed).

The fine-tuning conventions this record holds (the rest of the stack — Accelerate's
FSDP/DeepSpeed back ends, Liger kernels, config import — is its own work):
- weights are loaded in the checkpoint's dtype (Transformers 5 ``from_pretrained`` default
  ``dtype="auto"``) and trained as they are: a full fine-tune keeps bf16 weights, gradients and
  AdamW states (torch.optim keeps states in the parameter's dtype);
- PEFT creates adapters and upcasts them to fp32 (``get_peft_model(...,
  autocast_adapter_dtype=True)``, the default: peft/tuners/tuners_utils.py
  ``_cast_adapter_dtype``), so adapters, their gradients and their AdamW states are fp32;
- QLoRA's base is bitsandbytes ``Linear4bit`` (NF4) or ``Linear8bitLt`` (int8);
- the causal-LM loss upcasts the logits to fp32 (transformers ``loss/loss_utils.py``
  ``ForCausalLMLoss``: ``logits = logits.float()``);
- ``gradient_checkpointing`` checkpoints every decoder layer (full); TRL's
  ``activation_offloading`` moves saved activations to host memory;
- modules run eagerly unless ``torch_compile``.
"""
from workbench.engines.types import OPTIMIZERS, Engine


ENGINE = Engine(
    name="hf",
    label="Hugging Face Trainer / PEFT / TRL",
    about="Transformers Trainer with PEFT adapters and TRL's SFTTrainer, on Accelerate.",
    switches=("compile",),
    # TrainingArguments.gradient_checkpointing: every layer -> full
    recompute=("none", "full"),
    recompute_default="full",
    # Accelerate: DDP, DeepSpeed ZeRO 1-3 or FSDP (FULL_SHARD / SHARD_GRAD_OP)
    zero=(0, 1, 2, 3),
    # the Trainer runs no pipeline schedule
    pp_schedules=(),
    cp=False,
    precisions=("fp32", "fp16", "bf16"),
    # TrainingArguments.optim: adamw_torch(_fused), sgd, adamw_bnb_8bit, paged_adamw_8bit,
    # adamw_torch_4bit (torchao), adafactor (transformers OptimizerNames)
    optimizers=OPTIMIZERS,
    offload={"cpu": (1, 2, 3), "nvme": (3,)},
    methods=("pretrain", "full", "lora", "qlora"),
    state_dtype="param",
    adapter_dtype="fp32",
    activation_offload=True,
    attention="flash2",
    # Llama modules in Transformers: RMSNorm upcasts to fp32, RoPE and SwiGLU run eager ops,
    # as torchtitan's modules do (workbench/engines/torchtitan.py derives 1.75 for those)
    elementwise_traffic=1.75,
    eager_activations=True,
    loss="upcast",
    why={
        "pp_schedules": "the Trainer runs no pipeline parallelism; use pp 1",
        "cp": "context parallelism with the Trainer is not modelled yet; use cp 1",
        "optimizer_in_backward": "the Trainer has no optimizer step inside backward",
    },
    flags={
        "recompute": "gradient_checkpointing",
        "activation_offload": "activation_offloading (TRL SFTConfig)",
        "compile": "torch_compile",
        "optimizer": "optim",
    },
    sources=("huggingface/peft tuners/tuners_utils.py _cast_adapter_dtype",
             "huggingface/transformers src/transformers/loss/loss_utils.py ForCausalLMLoss"),
)

"""``hf``: the Hugging Face stack — Transformers ``Trainer`` (with PEFT adapters; TRL's
``SFTTrainer`` on top of it) run by Accelerate, which shards with FSDP2, FSDP1 or DeepSpeed
(``training.backend``), optionally with Liger kernels (``training.liger``).

One record per (backend, Liger) pair, ``record(backend, liger)``; ``ENGINE`` (the registry's
``hf``) is the record of ``training.backend`` null. The estimator asks
``workbench.engines.engine_of(training)`` for the record of a scenario.

Citations: TF = huggingface/transformers 5.25.0, AC = huggingface/accelerate 1.16.0,
PEFT = huggingface/peft 0.21 (the installed packages' ``site-packages`` files), PT = torch
2.13.0, TRL = huggingface/trl @ f2cd57710ae345ea6428ae95363267fcf38a3dc8 (1.10.0.dev0),
LG = linkedin/Liger-Kernel @ 00eba634c2e9b5f05badbfb67e9b0a4caba301a2 (ops) and
7ff9e2ea439ae608f11f67397db5f94418e86aab (transformers/monkey_patch.py).

Mechanisms, each where the estimator counts it:
- backend null is FSDP2: the Trainer builds Accelerate's FSDP plugin with
  ``fsdp_version = int(fsdp_config.get("version", 2))`` (TF training_args.py L2826) and warns that
  FSDP1 "is deprecated" (L2862-2868); ``accelerate config`` also defaults to 2 (AC
  commands/config/cluster.py L393-397). A bare ``FullyShardedDataParallelPlugin()`` or
  ``accelerate launch --use_fsdp`` without ``--fsdp_version`` still runs FSDP1 (AC
  utils/dataclasses.py L1709-1710, commands/launch.py L518-522): name ``backend: fsdp1`` then.
  ZeRO-0 is DDP under every FSDP backend (Accelerate wraps the model in DDP without an FSDP
  plugin, AC accelerator.py L1855-1872).
- which weights and states are fp32 (``state_dtype_by_zero``, ``estimate.memory.model_states``):
  weights load in the checkpoint's dtype (TF ``from_pretrained`` ``dtype="auto"``) and
  ``bf16=True`` only autocasts, so DDP trains a bf16 model as it is: bf16 weights, gradients and
  AdamW states ("param"). Accelerate's FSDP with mixed precision on upcasts every trainable
  parameter to fp32 before sharding — FSDP2 ``fsdp2_prepare_model`` ``param.data =
  param.data.to(torch.float32)`` when ``mixed_precision != "no"`` (AC utils/fsdp_utils.py
  L799-812), FSDP1 the same on each ``_flat_param`` (AC accelerator.py L1969-2010, "follow
  DeepSpeed's strategy") — so the sharded fp32 parameter is the master, with fp32 gradients
  and states ("mixed": the ZeRO-3 row of the table). DeepSpeed's bf16 engine keeps bf16
  weights and gradients (its ``grad_accum_dtype`` defaults to the model's, deepspeed 0.19.8
  runtime/engine.py L1806-1807) and fp32 masters and moments in its optimizer at every stage
  ("master16", ``estimate.memory.model_states``). PEFT creates
  adapters in fp32 (``autocast_adapter_dtype=True``, PEFT tuners/tuners_utils.py
  ``_cast_adapter_dtype``), which no backend changes; a 4-bit base is never upcast (AC
  fsdp_utils.py L801 ``not model_has_params4bit``).
- the loss (``loss``, ``logits_kept_in_backward``; ``estimate.memory.buffers``/``activations``): the
  head runs over every position (``logits_to_keep=0``, TF models/llama/modeling_llama.py
  L470-471) and ``ForCausalLMLoss`` upcasts the whole [batch, seq, vocab] logits to fp32
  (TF loss/loss_utils.py L61-62) before ``F.cross_entropy``; ``Trainer.compute_loss`` returns
  the loss alone (TF trainer.py L2209, L2253; ``training_step`` backward L2127-2163), so by the backward only the fp32 log-probabilities
  and the two fp32 gradients of the loss remain. With ``use_liger_kernel`` (TF trainer.py
  L1509-1510 ``apply_liger_kernel``) Liger patches Llama's RoPE, RMSNorm, SwiGLU and the head
  with ``fused_linear_cross_entropy=True`` (LG monkey_patch.py ``apply_liger_kernel_to_llama``):
  the head and the loss run over chunks of tokens and never hold the whole logits ("fused_linear").
  TRL's ``SFTConfig.loss_type`` defaults to ``"chunked_nll"`` (256-token checkpointed chunks,
  TRL trl/trainer/sft_config.py L334-336, sft_trainer.py L86, L117-234); no scenario key picks
  it yet, so the record follows the Trainer's loss.
- activation checkpointing: ``activation_checkpointing`` (alias ``gradient_checkpointing``)
  checkpoints each decoder layer with ``use_reentrant=False`` by default (TF modeling_utils.py
  L3159-3160), or one in ``every_n_layers`` counted from layer 0 (L3246-3249: recompute "layer",
  ``recompute_from_first``). Enabled on the model rather than through
  ``fsdp_config["activation_checkpointing"]``, the Trainer warns of "a redundant AllGather in
  the backward pass" (TF training_args.py L2795-2801, transformers#30404); that extra gather
  came from reentrant checkpointing: non-reentrant, FSDP skips its pre-forward unshard in the
  recomputed forward (PT torch/distributed/fsdp/_fully_shard/_fsdp_state.py L293-300 FSDP2,
  _runtime_utils.py L373-380 FSDP1), so the record counts none. TRL's ``SFTConfig`` turns
  checkpointing on by default (TRL sft_config.py L135): the record's default is "full".
- the optimizer: ``optim`` defaults to ``adamw_torch_fused`` with torch >= 2.8 (TF
  training_args.py L806-811), the fused AdamW the optimizer-step time assumes; ``torch_compile``
  compiles the model (the ``compile`` switch).
- modules run eagerly (RMSNorm upcasts to fp32; RoPE and SwiGLU as separate ops): the eager
  saved tensors and 1.75x elementwise traffic torchtitan's module derives; Liger's kernels are
  the fused reference (1.0) and its SwiGLU saves only its two inputs (LG ops/swiglu.py
  ``LigerSiLUMulFunction.forward``: ``ctx.save_for_backward(a, b)``).
- parallelism (Accelerate's ``ParallelismConfig``, AC parallelism_config.py): dp_replicate x
  dp_shard (HSDP) x tp x cp; CP needs an FSDP2 plugin (AC state.py L959-970: "Using cp_size>1
  requires FSDP2"); tensor parallelism comes from Transformers' ``tp_plan`` (AC accelerator.py
  L1875-1886), whose Llama plan shards no norm along the sequence (TF models/llama/
  configuration_llama.py L48-56) and gathers the head's output (``colwise_gather_output``,
  modeling_llama.py L414); no pipeline schedule. The rules the record's fields cannot say are
  ``workbench/scenario/rules/hf.py``.
"""
from __future__ import annotations

import dataclasses
from functools import lru_cache

from workbench.engines.deepspeed import ENGINE as _DEEPSPEED
from workbench.engines.types import OPTIMIZERS, Engine

# training.backend values (what Accelerate shards with); None resolves to DEFAULT_BACKEND.
BACKENDS = ("fsdp2", "fsdp1", "deepspeed")
DEFAULT_BACKEND = "fsdp2"

_TF = "huggingface/transformers 5.25.0"
_AC = "huggingface/accelerate 1.16.0"

_FSDP_WHY = {
    "pp_schedules": "the Trainer runs no pipeline parallelism; use pp 1",
    "optimizer_in_backward": "the Trainer has no optimizer step inside backward",
    "zero": "Accelerate's FSDP shards parameters, gradients and optimizer states together "
            "(reshard_after_forward true: zero 3, false: zero 2) or runs DDP (zero 0); it has "
            "no stage that shards only optimizer states: use zero 2, or training.backend "
            "deepspeed for zero 1",
    "offload": "Accelerate's FSDP offloads to the CPU only (fsdp_offload_params), parameters "
               "with their gradients and optimizer states: use zero 3, or training.backend "
               "deepspeed for NVMe",
    "offload_zero": "Accelerate's FSDP offloads parameters with their gradients and optimizer "
                    "states (fsdp_offload_params): use zero 3",
}

BASE = Engine(
    name="hf",
    label="Hugging Face Trainer / PEFT / TRL",
    about="Transformers Trainer with PEFT adapters and TRL's SFTTrainer, on Accelerate "
          "(FSDP2, FSDP1 or DeepSpeed).",
    # TrainingArguments.torch_compile (TF training_args.py L319)
    switches=("compile",),
    # activation_checkpointing: every decoder layer (full) or every_n_layers (layer)
    recompute=("none", "layer", "full"),
    recompute_default="full",
    recompute_from_first=True,
    # FSDP's sharding strategies (torch 2.13 torch/distributed/fsdp/api.py ShardingStrategy,
    # the names AC utils/constants.py FSDP_SHARDING_STRATEGY takes; FSDP2's
    # reshard_after_forward true/false is FULL_SHARD/SHARD_GRAD_OP, AC commands/to_fsdp2.py
    # ARGUMENT_VALUE_MAPPING): FULL_SHARD zero 3, SHARD_GRAD_OP zero 2, NO_SHARD zero 0;
    # none shards the optimizer states alone (ZeRO-1)
    zero=(0, 2, 3),
    pp_schedules=(),
    # HSDP: ParallelismConfig dp_replicate x dp_shard; FSDP shards over dp_shard x cp
    # (AC parallelism_config.py ``dp_shard_cp_dim_names``, ``fsdp_dim_names``)
    hsdp_zero=(2, 3),
    hsdp_whole_cp=True,
    cp=True,
    offload={"cpu": (3,)},
    precisions=("fp32", "fp16", "bf16"),
    # TrainingArguments.optim: adamw_torch(_fused), sgd, adamw_bnb_8bit, paged_adamw_8bit,
    # adamw_torch_4bit (torchao), adafactor (TF training_args.py OptimizerNames)
    optimizers=OPTIMIZERS,
    methods=("pretrain", "full", "lora", "qlora"),
    state_dtype="param",
    state_dtype_by_zero=("param", "param", "mixed", "mixed"),
    adapter_dtype="fp32",
    activation_offload=True,
    # attn_implementation "sdpa": FlashAttention-2 kernels on CUDA (as engines/deepspeed.py)
    attention="flash2",
    elementwise_traffic=1.75,
    eager_activations=True,
    loss="upcast",
    # FSDP (zero 2/3) makes sharded gradients in the backward (torch 2.13
    # torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py L754) and the Trainer frees them
    # with model.zero_grad() after each step (transformers 5.25 trainer.py L1991;
    # nn.Module.zero_grad set_to_none=True by default); DDP (zero 0) keeps its buckets.
    grads_in_backward=(2, 3),
    logits_kept_in_backward=False,
    tp_gathers_logits=True,
    why=dict(_FSDP_WHY),
    flags={
        "recompute": "activation_checkpointing",
        "recompute_every": "activation_checkpointing_kwargs.every_n_layers",
        "activation_offload": "activation_offloading (TRL SFTConfig)",
        "compile": "torch_compile",
        "optimizer": "optim",
        "liger": "use_liger_kernel",
        "backend": "fsdp_config.version / deepspeed",
    },
    sources=(f"{_TF} src/transformers/loss/loss_utils.py ForCausalLMLoss",
             f"{_TF} src/transformers/training_args.py",
             f"{_TF} src/transformers/modeling_utils.py activation_checkpointing_enable",
             f"{_AC} src/accelerate/utils/fsdp_utils.py fsdp2_prepare_model",
             f"{_AC} src/accelerate/accelerator.py prepare_model",
             f"{_AC} src/accelerate/parallelism_config.py",
             f"{_AC} src/accelerate/state.py",
             "huggingface/peft 0.21 tuners/tuners_utils.py _cast_adapter_dtype",
             "huggingface/trl@f2cd577 trl/trainer/sft_config.py, sft_trainer.py",
             "linkedin/Liger-Kernel@00eba63 src/liger_kernel/ops/fused_linear_cross_entropy.py"),
)

# What differs per backend from BASE (FSDP2).
_BACKEND_FIELDS = {
    "fsdp2": {},
    "fsdp1": {
        # "Using cp_size>1 requires FSDP2" (AC state.py L963-970)
        "cp": False,
        "why": {**_FSDP_WHY, "cp": "Accelerate runs context parallelism with FSDP2 only "
                                   "('Using cp_size>1 requires FSDP2'); set training.backend "
                                   "fsdp2"},
    },
    "deepspeed": {
        # zero_optimization.stage 0-3; bf16 engine: bf16 weights and gradients (grad_accum_dtype
        # defaults to the model's: deepspeed 0.19.8 runtime/engine.py L1806-1807), fp32 master
        # and moments in its optimizer at every stage (stage 0: FP16_Optimizer over bf16,
        # engine.py L2319-2321, L2360-2362)
        "zero": (0, 1, 2, 3),
        "state_dtype": "master16",
        "state_dtype_by_zero": None,
        # MiCS removed, ZeRO shards over the whole data-parallel group (engines/deepspeed.py)
        "hsdp_zero": (),
        "hsdp_whole_cp": False,
        "cp": False,
        # ZeRO-3 releases gathered parameters after use (engines/deepspeed.py)
        "keeps_gathered_params": False,
        # ZeRO-3 fetches parameter by parameter (engines/deepspeed.py)
        "zero3_live_parameters": _DEEPSPEED.zero3_live_parameters,
        # offload_optimizer cpu at stages 1-3; NVMe (ZeRO-Infinity) with stage 3
        "offload": {"cpu": (1, 2, 3), "nvme": (3,)},
        # reduce_bucket_size 5e8 elements in bf16 (engines/deepspeed.py)
        "dp_bucket_bytes": 1.0e9,
        # stage 1/2 flat partitions, stage 3's grad_partitions_flat_buffer: allocated by the
        # optimizer for the run (deepspeed 0.19.8 runtime/zero/stage3.py L790)
        "grads_in_backward": (),
        # DeepSpeed's overlap_comm (defaults to stage == 3) and its parameter all-gather after
        # the step at stages 1-2: deepspeed.ENGINE's record, where they are cited; its overlap
        # switches beside the Trainer's own (no fp8_recipe: BASE.switches)
        "switches": BASE.switches + tuple(s for s in _DEEPSPEED.switches
                                          if s.startswith("overlap_")),
        **{key: getattr(_DEEPSPEED, key)
           for key in ("overlap_grad_reduce", "overlap_param_gather", "overlap_at_zero3")},
        "why": {
            "pp_schedules": "the Trainer runs no pipeline parallelism; use pp 1",
            "optimizer_in_backward": "the Trainer has no optimizer step inside backward",
            "cp": "Accelerate runs context parallelism with an FSDP2 plugin only; DeepSpeed's "
                  "sequence parallelism (ALST/Ulysses sp_size) is not ring attention: set "
                  "training.backend fsdp2",
            "hsdp_zero": "hierarchical sharding (MiCS) was removed from DeepSpeed; ZeRO shards "
                         "over the whole data-parallel group",
            "keeps_gathered_params": "ZeRO-3 always releases gathered parameters after use",
            "offload_zero": "DeepSpeed offloads the optimizer to the CPU at zero 1-3 and to "
                            "NVMe at zero 3",
        },
    },
}

# Liger kernels (LG monkey_patch.py apply_liger_kernel_to_llama defaults): fused linear
# cross-entropy, and RMSNorm, SwiGLU and RoPE kernels — the fused reference of the 1.75.
_LIGER_FIELDS = {"loss": "fused_linear", "elementwise_traffic": 1.0, "fused_swiglu": True}


def resolved_backend(backend: str | None) -> str:
    """The backend Accelerate runs for ``training.backend`` (null: FSDP2, the Trainer's)."""
    return DEFAULT_BACKEND if backend is None else backend


@lru_cache(maxsize=None)
def record(backend: str | None = None, liger: bool = False) -> Engine:
    """The ``hf`` record for ``training.backend`` and ``training.liger``."""
    name = resolved_backend(backend)
    fields = dict(_BACKEND_FIELDS[name])
    if liger:
        fields.update(_LIGER_FIELDS)
    label = f"{BASE.label} on {dict(fsdp2='FSDP2', fsdp1='FSDP1', deepspeed='DeepSpeed')[name]}"
    return dataclasses.replace(BASE, label=label + (" with Liger" if liger else ""), **fields)


ENGINE = dataclasses.replace(record(None), label=BASE.label)

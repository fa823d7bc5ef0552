"""Rules of training and fine-tuning: the method the engine trains with, LoRA/QLoRA's
targets, storages and trained parts, the optimizer step inside backward, activation offload.
"""
from __future__ import annotations

from workbench.engines import ENGINES
from workbench.scenario.rules.table import E, P, Condition, layout_rule, why


layout_rule(
    "fine_tuning", "training.method is one the training.engine trains with; LoRA/QLoRA target "
    "projections the model has; QLoRA dequantises to a 16- or 32-bit compute dtype; "
    "optimizer_in_backward and activation_offload only where the engine offers them, the "
    "former without gradient accumulation, the latter (torchtune) with recompute; the "
    "engine's QLoRA storages, whole-MLP adapters and parts trained in full beside them",
    Condition("training.method", ("training.method", E),
              lambda v: v.tr.method in v.eng.methods,
              lambda v: why(v, "methods", "trains with method " + ", ".join(v.eng.methods))
              + f"; the engines that train {v.tr.method}: " + ", ".join(
                  name for name, e in ENGINES.items() if v.tr.method in e.methods)),
    Condition("training.lora.targets", ("training.lora.targets", "model.mlp"),
              lambda v: (v.tr.lora is None or v.m.mlp == "swiglu"
                         or "gate" not in v.tr.lora.targets),
              lambda v: ("a GELU MLP has no gate projection (up and down only); name up, down "
                         "or the group mlp"),
              value=lambda v: list(v.tr.lora.targets) if v.tr.lora else None),
    Condition("training.precision", ("training.precision", "training.method"),
              lambda v: (v.tr.method != "qlora") or v.tr.precision in ("bf16", "fp16", "fp32"),
              lambda v: ("QLoRA dequantises its 4/8-bit base to the compute dtype for each "
                         "GEMM: use bf16, fp16 or fp32")),
    Condition("parallel.tp", (P + "tp", "training.method", E),
              lambda v: (v.par.tp == 1) | (not v.tr.adapters) | ("adapter_tp" not in v.eng.why),
              lambda v: v.eng.why.get("adapter_tp", "")),
    Condition("training.optimizer_in_backward", ("training.optimizer_in_backward",
                                                 "training.method", E),
              lambda v: (not v.tr.optimizer_in_backward)
              or (v.eng.optimizer_in_backward and v.tr.method == "full")
              or (v.eng.name == "generic"),
              lambda v: why(v, "optimizer_in_backward", "has no optimizer step inside "
                            "backward"), value=lambda v: True),
    Condition("training.optimizer_in_backward", ("training.optimizer_in_backward",
                                                 "training.global_batch",
                                                 "training.micro_batch", P + "dp"),
              lambda v: (not v.tr.optimizer_in_backward) | (v.microbatches <= 1),
              lambda v: (f"steps each parameter as its gradient arrives, so it cannot "
                         f"accumulate {v.microbatches} microbatches: set global_batch = "
                         f"micro_batch x dp"),
              value=lambda v: True),
    Condition("training.activation_offload", ("training.activation_offload", E),
              lambda v: (not v.tr.activation_offload) or v.eng.activation_offload
              or v.eng.name == "generic",
              lambda v: why(v, "activation_offload", "does not offload activations"),
              value=lambda v: True),
    Condition("training.activation_offload", ("training.activation_offload",
                                              "training.recompute", E),
              lambda v: (not v.tr.activation_offload) or v.tr.recompute != "none"
              or not v.eng.activation_offload_needs_recompute,
              lambda v: why(v, "activation_offload_needs_recompute", "offloads only the "
                            "activations of checkpointed blocks; set training.recompute full"),
              value=lambda v: True),
    Condition("training.lora.quant", ("training.lora.quant", "training.method", E),
              lambda v: (v.tr.method != "qlora") or v.tr.lora is None
              or v.eng.lora_quant is None or v.tr.lora.quant in v.eng.lora_quant,
              lambda v: why(v, "lora_quant", "stores a QLoRA base as "
                            + ", ".join(v.eng.lora_quant or ())),
              value=lambda v: v.tr.lora.quant if v.tr.lora else None),
    Condition("training.lora.targets", ("training.lora.targets", "training.method", E),
              lambda v: (not v.tr.adapters) or v.tr.lora is None or not v.eng.lora_mlp_whole
              or len({"gate", "up", "down"} & set(v.tr.lora.targets)) in (0, 3)
              or (v.m.mlp != "swiglu"
                  and len({"up", "down"} & set(v.tr.lora.targets)) in (0, 2)),
              lambda v: why(v, "lora_mlp_whole", "adapts the whole MLP or none of it; "
                            "name all of its projections or none"),
              value=lambda v: list(v.tr.lora.targets) if v.tr.lora else None),
    Condition("training.lora.trainable", ("training.lora.trainable", "training.method", E),
              lambda v: (not v.tr.adapters) or v.tr.lora is None or v.eng.lora_trainable is None
              or set(v.tr.lora.trainable) <= set(v.eng.lora_trainable),
              lambda v: why(v, "lora_trainable", "trains only the adapters"
                            if not v.eng.lora_trainable else "trains in full only "
                            + ", ".join(v.eng.lora_trainable)),
              value=lambda v: list(v.tr.lora.trainable) if v.tr.lora else None))

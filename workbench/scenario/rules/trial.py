"""What the workbench's own trial runtime (workbench/trial) runs of a layout: not rules of the
table, asked by the trial's preparation (``trial_problems``) for the sub-layout it launches; a
layout the trials cannot run may still be estimated, planned and exported.
"""
from __future__ import annotations

from workbench.errors import Problem
from workbench.scenario.rules.table import P, Condition, Layouts
from workbench.scenario.types import Scenario


TRIAL_LIMITS: tuple[Condition, ...] = (
    Condition(P + "zero", (P + "zero", P + "dp", P + "cp", P + "tp", P + "pp"),
              lambda v: (v.par.dp * v.par.cp == 1) | (v.par.zero >= 3)
              | ((v.par.tp == 1) & (v.par.pp == 1)),
              lambda v: ("trials combine data or context parallelism with tensor or pipeline "
                         "parallelism through FSDP2 only (zero: 3), as torchtitan does: "
                         "PyTorch's DDP and ZeroRedundancyOptimizer accept neither DTensor "
                         "parameters nor several microbatches in flight")),
    Condition(P + "tp", (P + "tp", "model.moe"),
              lambda v: (v.m.moe is None) | (v.par.tp == 1),
              lambda v: ("trials of MoE models run without tensor parallelism: the trial's TP "
                         "plan does not shard the MoE layers (router, experts), where the "
                         "estimator splits each expert's FFN over TP; use tp 1 (with ep) for "
                         "the trial")),
    Condition(P + "expert_tp", (P + "expert_tp", P + "tp"),
              lambda v: (v.par.expert_tp is None) or v.par.expert_tp == v.par.tp,
              lambda v: ("trials take EP ranks from dp x cp only (torchtitan's EP mesh); MoE "
                         "parallel folding is estimated but not run; leave expert_tp out for "
                         "the trial")),
    # fine-tuning trials (trial/adapters.py): a frozen base with PEFT adapters, or an optimizer
    # whose state the trial predicts tensor by tensor (estimate/memory/optimizer_states.py)
    Condition("training.method", ("training.method", "training.optimizer", P + "tp", P + "pp",
                                  "model.moe"),
              lambda v: (not _tensor_states(v)) or ((v.par.tp == 1) & (v.par.pp == 1)
                                                    & (v.m.moe is None)),
              lambda v: ("trials of LoRA/QLoRA and of the 8-bit, 4-bit and Adafactor "
                         "optimizers run dense models with data and context parallelism only "
                         "(PEFT wraps the projections the TP plan shards; their states are "
                         "predicted whole or dim-0 sharded): use tp 1 and pp 1 for the trial, "
                         "or method full with adamw or sgd"),
              value=lambda v: f"{v.tr.method} with {v.tr.optimizer}"),
    Condition("training.method", ("training.method", P + "zero"),
              lambda v: (v.tr.method != "qlora") | (v.par.zero < 2),
              lambda v: ("QLoRA's packed base (bitsandbytes Params4bit / Int8Params) is not "
                         "sharded by FSDP2 in the trial: trial qlora with zero 0 or 1 (DDP), or "
                         "method lora under FSDP2")),
    Condition("training.optimizer", ("training.optimizer", P + "zero"),
              lambda v: (v.tr.optimizer not in ("adamw8bit", "paged_adamw8bit", "adafactor"))
              | (v.par.zero < 2),
              lambda v: ("steps FSDP2's DTensor parameters with no sharding rule "
                         "(bitsandbytes' optimizer_update kernels have no DTensor strategy; "
                         "torch's Adafactor squares a Partial gradient in place): trial it with "
                         "zero 0 or 1, or trial adamw4bit (torchao) under FSDP2")),
)


def _tensor_states(v: Layouts) -> bool:
    """A fine-tuning trial predicted tensor by tensor (trial_prediction.by_tensor)."""
    return v.tr.method in ("lora", "qlora") or v.tr.optimizer not in ("adamw", "sgd")


def trial_problems(s: Scenario) -> list[Problem]:
    """What the workbench's trial runtime cannot run of ``s``'s layout (``TRIAL_LIMITS``)."""
    v = Layouts.of(s)
    return [c.problem(v) for c in TRIAL_LIMITS if not bool(c.ok(v))]

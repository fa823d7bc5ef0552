"""Which fine-tuning method fits: the planner's best layout for full fine-tuning, LoRA and
QLoRA of one scenario (the dashboard's "what would fit instead", the claims check).

For each method the scenario's engine trains with (the rule table's ``fine_tuning`` rule:
``training.method`` among the engine's methods), the scenario is re-read with that method —
LoRA/QLoRA keep the scenario's adapter settings (``training.lora``) where it has them, else
the defaults — and the planner (``workbench.plan.plan``) searches every layout of it. The
fastest layout that fits is estimated once more (``workbench.estimate``) for its per-GPU
memory, step time, tokens/s and time to train the scenario's tokens; where none fits, the
planner's reason says why. Nothing here is a model of its own: every number is the planner's
and the estimator's.
"""
from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import dataclass

from workbench.errors import ScenarioError
from workbench.estimate import estimate
from workbench.plan.constraints import Constraints
from workbench.plan.summary import describe_layout
from workbench.plan.search import Progress, plan
from workbench.scenario import parse_scenario
from workbench.scenario.rules import engine_allows
from workbench.scenario.types import Scenario

FINE_TUNING = ("full", "lora", "qlora")
# what a person calls each method
METHOD_LABELS = {"pretrain": "pre-training", "full": "full fine-tuning", "lora": "LoRA",
                 "qlora": "QLoRA"}
# QLoRA dequantises its base to a 16/32-bit compute dtype (rule fine_tuning)
QLORA_PRECISIONS = ("bf16", "fp16", "fp32")


@dataclass(frozen=True)
class MethodFit:
    """One method's best fitting layout, or why none fits.

    ``layout``: the layout in words; ``device_per_gpu``: bytes per GPU as nvidia-smi shows them
    (what fit is judged on); ``allocated_per_gpu``: the peak allocated; ``step_s``: seconds per
    optimizer step; ``time_to_train_s``: the scenario's ``training.tokens`` at that rate.
    ``reason``: why nothing fits (``fits`` False), else ""; ``note``: what was changed to run
    the method (e.g. QLoRA's compute precision)."""

    method: str
    label: str
    fits: bool
    tokens: float
    layout: str = ""
    device_per_gpu: float = 0.0
    allocated_per_gpu: float = 0.0
    capacity: float = 0.0
    step_s: float = 0.0
    tokens_per_s: float = 0.0
    time_to_train_s: float = 0.0
    reason: str = ""
    note: str = ""
    scenario: Scenario | None = None   # the best layout's full scenario (None: nothing fits)


def method_document(s: Scenario, method: str) -> tuple[dict, str]:
    """``s``'s document with ``training.method`` = ``method`` (adapters from ``s`` or the
    defaults; QLoRA in a 16-bit compute dtype; the optimizer step inside backward only for full
    fine-tuning), and a note of what had to change."""
    doc = s.to_dict()
    tr = doc["training"]
    tr["method"] = method
    note = ""
    if method in ("lora", "qlora"):
        lora = copy.deepcopy(tr.get("lora") or {})
        if method == "lora":
            lora.pop("quant", None)
            lora.pop("double_quant", None)
        if s.model.mlp != "swiglu" and "targets" not in lora:   # a GELU MLP has no gate
            lora["targets"] = ["q", "k", "v", "o", "up", "down"]
        tr["lora"] = lora
        tr["optimizer_in_backward"] = False
        if method == "qlora" and tr.get("precision") not in QLORA_PRECISIONS:
            note = f"compute in bf16 (QLoRA does not run in {tr.get('precision')})"
            tr["precision"] = "bf16"
            tr["fp8_recipe"] = None
    else:
        tr["lora"] = None
    return doc, note


def allowed_methods(s: Scenario, methods=FINE_TUNING) -> list[str]:
    """The ``methods`` the scenario's engine trains with (the rule table's limit, read with tp 1:
    the planner searches the layout)."""
    one = dataclasses.replace(s, parallel=dataclasses.replace(s.parallel, tp=1),
                              training=dataclasses.replace(s.training,
                                                           optimizer_in_backward=False))
    return engine_allows(one, "training.method", list(methods))


def compare_methods(s: Scenario, methods=FINE_TUNING, constraints: Constraints | None = None,
                    progress: Progress | None = None) -> list[MethodFit]:
    """For each of ``methods`` the scenario's engine allows, the planner's fastest layout that
    fits (``constraints`` as ``plan`` takes them), or why none fits. ``progress(fraction,
    what)`` returning False cancels (``plan.search.Cancelled``)."""
    todo = allowed_methods(s, methods)
    out = []
    for i, method in enumerate(todo):
        share = (i / len(todo), 1 / len(todo))
        step = None if progress is None else (
            lambda f, what, _m=method, _s=share: progress(_s[0] + _s[1] * f, f"{_m}: {what}"))
        label = METHOD_LABELS.get(method, method)
        doc, note = method_document(s, method)
        try:
            variant = parse_scenario(doc, layout_required=False)
            result = plan(variant, constraints, step)
        except ScenarioError as exc:
            out.append(MethodFit(method, label, False, s.training.tokens,
                                 reason=exc.one_line(), note=note))
            continue
        best = result.scenario_of(1)
        est = estimate(best)
        m, r = est.memory, est.run
        out.append(MethodFit(
            method, label, True, s.training.tokens, layout=describe_layout(result.row(1)),
            device_per_gpu=m.per_gpu.device, allocated_per_gpu=m.per_gpu.total,
            capacity=m.capacity, step_s=est.time.step, tokens_per_s=r.tokens_per_s,
            time_to_train_s=r.time_to_train_s, note=note, scenario=best))
    return out


def timed_compare(s: Scenario, **kw) -> tuple[list[MethodFit], float]:
    """``compare_methods`` and the seconds it took (benchmarks, the report)."""
    t0 = time.perf_counter()
    out = compare_methods(s, **kw)
    return out, time.perf_counter() - t0


__all__ = ["FINE_TUNING", "METHOD_LABELS", "MethodFit", "allowed_methods", "compare_methods",
           "method_document"]

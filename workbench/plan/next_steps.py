"""The verdict's next steps that need the planner (``workbench.estimate.run.verdict`` holds the
parts and the steps that need no search): the fastest layout that fits this hardware, the same
on 2x and 4x the nodes (stopping at the first that fits without offload), and the adapter
methods that fit in place of pre-training or full fine-tuning, and QLoRA in place of LoRA
(``compare_methods``). They run only when a memory part fails; for the brief's 70B on its
8-GPU box they take about a second."""
from __future__ import annotations

import time

from workbench.errors import ScenarioError
from workbench.estimate.run.verdict import (INSTEAD, NODE_FACTORS, OFFLOAD_WORDS, NextStep, Verdict,
                                        memory_fails, verdict)
from workbench.scenario.types import Scenario
from workbench.units import duration_text, memory_text, money_text, tokens_text


def searched_verdict(s: Scenario, est, methods: list | None = None) -> Verdict:
    """The verdict with the planner's steps when a memory part fails (``methods``: a
    ``compare_methods`` answer the caller has already, so it is not searched again)."""
    v = est.verdict if est.scenario is s else verdict(s, est)
    if v.ok or not memory_fails(v):
        return v
    t0 = time.perf_counter()
    found = search_steps(s, est, methods)
    return verdict(s, est, found, time.perf_counter() - t0)


_SEARCHED_TRAINING = ("micro_batch", "recompute", "offload", "optimizer", "engine", "compile",
                      "fp8_recipe", "method")


def _paths(scenario: Scenario) -> dict:
    """A scenario's layout and the training options a search chooses, as ``--set`` key
    paths."""
    doc = scenario.document
    out = {f"parallel.{k}": v for k, v in (doc.get("parallel") or {}).items()}
    tr = doc.get("training", {})
    out.update({f"training.{k}": tr[k] for k in _SEARCHED_TRAINING if k in tr})
    return out


def _flat_set(scenario: Scenario, start: Scenario) -> dict:
    """The ``--set`` key paths that turn ``start`` into ``scenario``'s layout and options."""
    was = _paths(start)
    return {k: v for k, v in _paths(scenario).items() if k not in was or was[k] != v}


def _figures(est) -> dict:
    m, r = est.memory, est.run
    return {"gpus": est.scenario.hardware.world, "nodes": est.scenario.hardware.nodes,
            "step_s": est.time.step, "device_per_gpu": m.per_gpu.device,
            "capacity": m.capacity, "host_per_node": m.host_per_node,
            "tokens_per_s": r.tokens_per_s, "mfu": r.mfu,
            "time_to_train_s": r.time_to_train_s,
            "cost": r.cost.get("total") if r.cost else None}


def _gives(est) -> str:
    """What a layout gives, in words: step, memory, time to train, cost."""
    m, r = est.memory, est.run
    text = (f"{duration_text(est.time.step)} per step, {memory_text(m.per_gpu.device)} of "
            f"{memory_text(m.capacity)} per GPU, {tokens_text(est.scenario.training.tokens)} "
            f"in {duration_text(r.time_to_train_s)}")
    if m.host_per_node > 0:
        text += f", {memory_text(m.host_per_node)} of host memory per node"
    if r.cost:
        text += f", {money_text(r.cost['total'])}"
    return text


def search_steps(s: Scenario, est, methods: list | None = None) -> list[NextStep]:
    """The planner's answers: the fastest layout that fits this hardware, the same on more
    nodes, and the methods that fit in place of the scenario's (``INSTEAD``; taken from
    ``methods``, a ``compare_methods`` answer, when given)."""
    from workbench.estimate import estimate
    from workbench.plan import plan
    from workbench.plan.methods import compare_methods
    from workbench.plan.summary import describe_layout
    from workbench.scenario import parse_scenario

    hw = s.hardware
    out: list[NextStep] = []
    here = float("inf")
    try:
        found = plan(s)
    except ScenarioError as exc:
        out.append(NextStep(f"No layout fits {hw.world} x {hw.gpu.name}: {exc.one_line()}",
                            "layout"))
    else:
        best = estimate(found.scenario_of(1))
        here = best.time.step
        only = ("" if best.scenario.training.offload == "none" else
                f" (it needs {OFFLOAD_WORDS[best.scenario.training.offload]})")
        out.append(NextStep(
            f"Take the planner's fastest layout that fits this hardware{only}: "
            f"{describe_layout(found.row(1))}: {_gives(best)}.", "layout", _flat_set(best.scenario, s),
            _figures(best)))
    for factor in NODE_FACTORS:
        nodes = hw.nodes * factor
        doc = s.to_dict()
        doc["hardware"]["nodes"] = nodes
        doc.pop("parallel", None)
        try:
            other = plan(parse_scenario(doc, layout_required=False))
        except ScenarioError:
            continue
        if other.row(1)["step"] >= here:      # no better than this hardware's best
            continue
        e = estimate(other.scenario_of(1))
        out.append(NextStep(
            f"On {nodes} nodes ({e.scenario.hardware.world} GPUs): "
            f"{describe_layout(other.row(1))}: {_gives(e)}.", "nodes",
            {"hardware.nodes": nodes, **_flat_set(e.scenario, s)}, _figures(e)))
        if e.scenario.training.offload == "none":
            break
    method = s.training.method
    if method in INSTEAD:
        tried = INSTEAD[method][0]
        fits = (compare_methods(s, tried) if methods is None
                else [f for f in methods if f.method in tried])
        for f in fits:
            if not f.fits:
                continue
            e = estimate(f.scenario)
            out.append(NextStep(
                f"{INSTEAD[method][1]}: {f.label} fits with {f.layout}: {_gives(e)}"
                + (f" ({f.note})" if f.note else "") + ".",
                "method", _flat_set(e.scenario, s), _figures(e)))
    return out

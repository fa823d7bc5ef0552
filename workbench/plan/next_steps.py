"""The verdict's next steps that need the planner (``workbench.estimate.run.verdict`` holds the
parts and the steps that need no search): the fastest layout that fits this hardware, the
adapter methods that fit in place of pre-training or full fine-tuning and QLoRA in place of LoRA
(``compare_methods``), and the same layout on 2x and 4x the nodes (stopping at the first that
fits without offload). They run only when a memory part fails or the run misses the scenario's
deadline or budget (each step then says whether it meets them).

They answer within ``SEARCH_BUDGET_S``, whatever the scenario: each search starts in the
narrowest scope (``SCOPES[0]``: 1F1B at micro-batch 1, the least memory a layout can take, which
is what "does anything fit?" asks) and this hardware's is widened to every micro-batch and
every schedule while time is left; a search the budget cuts short is not shown, and the verdict
says what was not searched (``Verdict.unsearched``) and which command searches it. ``workbench
plan`` and the page's "what would fit instead" (in a thread) search without a budget.
"""
from __future__ import annotations

import time

from workbench.errors import ScenarioError
from workbench.estimate.run.verdict import (INSTEAD, NODE_FACTORS, OFFLOAD_WORDS, NextStep, Verdict,
                                            limit_fails, meets_limits, memory_fails, verdict)
from workbench.scenario.types import Scenario
from workbench.units import duration_text, memory_text, money_text, tokens_text

# The searches' share of ``workbench estimate``'s answer: issue 55 asks for the whole command
# in under a second on any scenario; starting the interpreter, reading the scenario and
# estimating it take about 0.31 s here (whole process, median of 5, examples/llama3-8b-8xh100.yaml,
# which fits and searches nothing, 2026-12-07), and a search stops only between its passes, so
# it may run a pass past the budget (GPT 177B on 2,304 H100: 0.72 s whole, median of 5).
SEARCH_BUDGET_S = 0.4
# The scopes a search widens through (planner constraints), with how a step names them.
SCOPES = (({"pp_schedule": "1f1b", "micro_batch": 1}, "1F1B, micro-batch 1"),
          ({"pp_schedule": "1f1b"}, "1F1B"),
          ({}, ""))


class Budget:
    """A planner progress callback that stops a search once ``seconds`` have passed since the
    budget was made (the planner raises ``Cancelled``); None: no limit."""

    def __init__(self, seconds: float | None) -> None:
        self.end = float("inf") if seconds is None else time.perf_counter() + seconds

    def left(self) -> bool:
        return time.perf_counter() < self.end

    def __call__(self, fraction: float, what: str) -> bool:
        return self.left()


def searched_verdict(s: Scenario, est, methods: list | None = None,
                     budget_s: float | None = SEARCH_BUDGET_S) -> Verdict:
    """The verdict with the planner's steps when a memory part fails, or the run misses its
    deadline or budget (``methods``: a ``compare_methods`` answer the caller has already, so
    it is not searched again; ``budget_s``: the searches' time, None without a limit). For a
    missed limit alone, a layout on this hardware is a step only where it is faster than the
    scenario's own."""
    v = est.verdict if est.scenario is s else verdict(s, est)
    if v.ok or not (memory_fails(v) or limit_fails(v)):
        return v
    t0 = time.perf_counter()
    found, unsearched = search_steps(s, est, methods, budget_s)
    if not memory_fails(v):
        found = [f for f in found if f.kind != "layout" or
                 f.figures.get("step_s", float("inf")) < est.time.step]
    return verdict(s, est, found, time.perf_counter() - t0, unsearched)


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
    return text + meets_limits(est.scenario, r.time_to_train_s,
                               r.cost.get("total") if r.cost else None)


def _planned(s: Scenario, budget: Budget, scope: dict):
    """The planner's result for ``s`` within ``scope`` (fixed fields), None when the budget
    ran out first; raises ScenarioError when no layout fits."""
    from workbench.plan import Constraints, plan
    from workbench.plan.search import Cancelled

    try:
        return plan(s, Constraints(fixed=scope), budget)
    except Cancelled:
        return None


def _tight(est) -> str:
    """" (tight: ...)" where the layout found is within the memory band of its GPU."""
    return (" (tight: within the memory band of the GPU, a trial says whether it fits)"
            if est.memory.gpu_fit == "tight" else "")


def _in_scope(words: str) -> str:
    """A step's scope in words, when its search was narrowed to fit the time."""
    return f" [quick search: {words}]" if words else ""


# a layout the planner finds is offered as faster only when it saves more than this share of
# the step: the step-time estimate's own spread between layouts of one model on one machine is
# larger than a percent or two (docs/engine-accuracy.md), so a smaller gain is no answer
FASTER_BY = 0.05


def faster_step(s: Scenario, est, budget_s: float | None = None) -> NextStep | None:
    """Where the scenario fits: the planner's fastest layout on the same hardware, when its step
    is more than ``FASTER_BY`` shorter than the scenario's own, with the time each takes for
    the scenario's tokens; None where the scenario's layout is as fast (or the search did not
    finish within ``budget_s``)."""
    from workbench.estimate import estimate
    from workbench.plan.summary import describe_layout

    try:
        found = _planned(s, Budget(budget_s), {})
    except ScenarioError:
        return None
    if found is None:
        return None
    best = estimate(found.scenario_of(1))
    if best.time.step >= est.time.step * (1 - FASTER_BY):
        return None
    gain = 1 - best.time.step / est.time.step
    return NextStep(
        f"The planner's fastest layout on this hardware is {gain:.0%} faster per step: "
        f"{describe_layout(found.row(1))}{_tight(best)}: {_gives(best)} (yours: "
        f"{duration_text(est.run.time_to_train_s)}).", "layout", _flat_set(best.scenario, s),
        _figures(best))


def search_steps(s: Scenario, est, methods: list | None = None,
                 budget_s: float | None = SEARCH_BUDGET_S) -> tuple[list[NextStep], list[str]]:
    """The planner's answers within ``budget_s`` seconds (see the module docstring): the
    fastest layout that fits this hardware, the methods that fit in place of the scenario's
    (``INSTEAD``; taken from ``methods``, a ``compare_methods`` answer, when given) and the same
    on more nodes; and what the budget left unsearched, each with the command that searches
    it."""
    from workbench.estimate import estimate
    from workbench.plan import Constraints
    from workbench.plan.methods import compare_methods
    from workbench.plan.search import Cancelled
    from workbench.plan.summary import describe_layout
    from workbench.scenario import parse_scenario

    budget = Budget(budget_s)
    hw = s.hardware
    unsearched: list[str] = []
    # without a limit every search takes the widest scope at once
    first = 0 if budget_s is not None else len(SCOPES) - 1
    narrow, narrow_words = SCOPES[first]

    def here_step(i: int, within: Budget = budget) -> tuple[NextStep | None, float, bool]:
        """This hardware's step in scope ``i``: (the step or None, its step time, whether the
        search finished within ``within``)."""
        scope, words = SCOPES[i]
        try:
            found = _planned(s, within, scope)
        except ScenarioError as exc:
            return (NextStep(f"No layout{_in_scope(words)} fits {hw.world} x {hw.gpu.name}: "
                             f"{exc.one_line()}", "layout"), float("inf"), True)
        if found is None:
            return None, float("inf"), False
        best = estimate(found.scenario_of(1))
        only = ("" if best.scenario.training.offload == "none" else
                f" (it needs {OFFLOAD_WORDS[best.scenario.training.offload]})") + _tight(best)
        return (NextStep(f"Take the planner's fastest layout that fits this hardware"
                         f"{_in_scope(words)}{only}: {describe_layout(found.row(1))}: "
                         f"{_gives(best)}.", "layout", _flat_set(best.scenario, s),
                         _figures(best)), best.time.step, True)

    here_first, here, finished = here_step(first)
    # this hardware's search widened while half the budget lasts (every micro-batch, then every
    # schedule; a wider scope holds the narrower one: its answer replaces it), the rest for the
    # methods and more nodes
    widen = Budget(None if budget_s is None else budget_s / 2)
    widen.end = min(widen.end, budget.end)
    for i in range(first + 1, len(SCOPES)):
        if not finished or not widen.left():
            break
        wider, step, done = here_step(i, widen)
        if not done:
            break
        here_first, here = wider, step
    if not finished:
        unsearched.append("a layout that fits this hardware (`workbench plan` searches every "
                          "layout, without a time limit)")
    out: list[NextStep] = []
    method = s.training.method
    if method in INSTEAD:
        tried = INSTEAD[method][0]
        try:
            fits = (compare_methods(s, tried, Constraints(fixed=narrow), budget)
                    if methods is None else [f for f in methods if f.method in tried])
        except Cancelled:
            fits = None
            unsearched.append(f"{', '.join(tried)} in place of {method} (`workbench plan "
                              f"--set training.method=...` searches them)")
        for f in fits or ():
            if not f.fits:
                continue
            e = estimate(f.scenario)
            out.append(NextStep(
                f"{INSTEAD[method][1]}: {f.label} fits with {f.layout}{_tight(e)}"
                f"{_in_scope(narrow_words if methods is None else '')}: {_gives(e)}"
                + (f" ({f.note})" if f.note else "") + ".",
                "method", _flat_set(e.scenario, s), _figures(e)))
    nodes_out: list[NextStep] = []
    for factor in NODE_FACTORS:
        nodes = hw.nodes * factor
        doc = s.to_dict()
        doc["hardware"]["nodes"] = nodes
        doc.pop("parallel", None)
        try:
            other = _planned(parse_scenario(doc, layout_required=False), budget, narrow)
        except ScenarioError:
            continue
        if other is None:
            unsearched.append(f"{nodes} nodes (`workbench plan --set hardware.nodes={nodes}` "
                              "searches them)")
            break
        if other.row(1)["step"] >= here:      # no better than this hardware's best
            continue
        e = estimate(other.scenario_of(1))
        nodes_out.append(NextStep(
            f"On {nodes} nodes ({e.scenario.hardware.world} GPUs){_in_scope(narrow_words)}"
            f"{_tight(e)}: "
            f"{describe_layout(other.row(1))}: {_gives(e)}.", "nodes",
            {"hardware.nodes": nodes, **_flat_set(e.scenario, s)}, _figures(e)))
        # more nodes stop helping memory once nothing is offloaded; a deadline may want more
        deadline = s.training.deadline
        if e.scenario.training.offload == "none" and (
                deadline is None or e.run.time_to_train_s <= deadline * 3600):
            break
    return ([here_first] if here_first is not None else []) + out + nodes_out, unsearched

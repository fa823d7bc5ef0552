"""Why the best layout beats the next ones: the step-time terms of full estimates, side by side.

The step is the sum of compute, recompute, pipeline bubble, exposed communication per
dimension, optimizer and offload (``estimate.time.step_time``); the term whose difference is largest
is what the winner gains on (or the price it pays, when negative)."""
from __future__ import annotations

import dataclasses

from workbench.errors import printable
from workbench.plan.result import PlanResult
from workbench.plan.summary import switch_words
from workbench.scenario.types import Parallel

TERMS = ("compute", "recompute", "bubble", "comm dp", "comm tp", "comm pp", "comm cp",
         "comm ep", "optimizer", "offload")


def step_terms(est) -> dict[str, float]:
    """Seconds per step by term, from an Estimate."""
    t = est.time
    out = {"compute": t.compute, "recompute": t.recompute, "bubble": t.bubble,
           "optimizer": t.optimizer, "offload": t.offload}
    for dim in ("dp", "tp", "pp", "cp", "ep"):
        out[f"comm {dim}"] = t.comm_exposed.get(dim, 0.0)
    return out


def _layout_words(lay: dict) -> str:
    p, t = lay["parallel"], lay["training"]
    words = [f"{k}={p[k]}" for k in ("dp", "tp", "pp", "cp", "ep") if p[k] > 1]
    words.append(f"zero={p['zero']}")
    if p["pp"] > 1:
        words.append(p["pp_schedule"] + (f" v={p['virtual_stages']}"
                                         if p["virtual_stages"] > 1 else ""))
    if p["tp"] > 1 and not p["sequence_parallel"]:
        words.append("no SP")
    words.append(f"mb={t['micro_batch']}")
    if t.get("engine", "generic") != "generic":
        words.append(t["engine"])
    words += switch_words({**t, "async_tp": p.get("async_tp"),
                           "tp_comm_overlap": p.get("tp_comm_overlap")})
    if t.get("optimizer", "adamw") != "adamw":
        words.append(t["optimizer"])
    if t["recompute"] != "none":
        words.append(f"{t['recompute']} recompute")
    if t["offload"] != "none":
        words.append(f"{t['offload']} offload")
    return " ".join(words)


def method_saving(s, est) -> str:
    """For a fine-tune, what its method saves on this layout against training every weight in
    the same engine and optimizer (full fine-tuning): GPU memory by component, in words."""
    from workbench.estimate import estimate
    from workbench.errors import ScenarioError
    from workbench.scenario import parse_scenario

    tr = s.training
    if not tr.adapters and tr.optimizer == "adamw":
        return ""
    doc = s.to_dict()
    doc["training"] = {**doc["training"], "method": "full", "optimizer": "adamw",
                       "optimizer_in_backward": False}
    doc["training"].pop("lora", None)
    try:
        full = estimate(parse_scenario(doc))
    except ScenarioError:
        return ""
    a, b = est.memory.per_gpu, full.memory.per_gpu
    what = {"lora": "LoRA", "qlora": "QLoRA"}.get(tr.method, "full fine-tuning")
    if tr.optimizer != "adamw":
        what += f" with {tr.optimizer}"
    parts = [f"{name} {(getattr(b, key) - getattr(a, key)) / 2**30:,.1f}" for name, key in (
        ("weights", "params"), ("gradients", "grads"), ("optimizer", "optimizer"),
        ("activations", "activations"), ("buffers", "buffers")) if
        abs(getattr(b, key) - getattr(a, key)) >= 0.05 * 2**30]
    return (f"{what} saves {(b.device - a.device) / 2**30:,.1f} GiB per GPU on this layout "
            f"against full fine-tuning with AdamW ({b.device / 2**30:,.1f} -> "
            f"{a.device / 2**30:,.1f} GiB on the device; GiB saved: {', '.join(parts)})")


def explain(result: PlanResult, others: int = 3) -> list[str]:
    """One line per runner-up: how much slower it is and which terms make the difference."""
    from workbench.estimate import estimate

    if not result.feasible:
        return [result.infeasible_reason().message]
    first = result.scenario_of(1)
    best = estimate(first)
    bt = step_terms(best)
    lines = [f"#1 {_layout_words(result.layout(1))}: {best.time.step:.3f} s/step, "
             f"{best.memory.per_gpu.total / 2**30:.1f} GiB/GPU"]
    saved = method_saving(first, best)
    if saved:
        lines.append(saved)
    for rank in range(2, min(len(result), others + 1) + 1):
        est = estimate(result.scenario_of(rank))
        ot = step_terms(est)
        gap = est.time.step - best.time.step
        diffs = sorted(((ot[k] - bt[k], k) for k in TERMS), key=lambda d: -abs(d[0]))
        # the largest term, and the next one when it matters (a tenth of the largest or more)
        top = abs(diffs[0][0])
        named = [f"{k} {d:+.4f} s" for i, (d, k) in enumerate(diffs[:2])
                 if abs(d) > 1e-9 * best.time.step and (i == 0 or abs(d) >= 0.1 * top)]
        mem = (est.memory.per_gpu.total - best.memory.per_gpu.total) / 2**30
        why = ", ".join(named) if named else (
            f"the same step time; ranked after it on memory ({mem:+.2f} GiB/GPU)")
        lines.append(f"#{rank} {_layout_words(result.layout(rank))}: {gap:+.3f} s/step "
                     f"({gap / best.time.step:+.1%}); {why}")
    return lines + switch_lines(best)


# Why each switch changes the step, in words (the cost model's reason: block_costs.block_costs).
_SWITCH_REASON = {
    "compile": "Inductor fuses the eager norms, activations and RoPE",
    "async_tp": "TP all-gathers and reduce-scatters run under the GEMMs they feed",
    "tp_comm_overlap": "Transformer Engine's userbuffers run the TP all-gathers and "
                       "reduce-scatters in chunks beside the GEMMs, on SMs of their own",
}


def switch_lines(best) -> list[str]:
    """What each switch the engine offers buys on the best layout: the same layout estimated
    with the switch flipped (the search keeps compile and async TP on because they never cost
    memory or time in the model; this says by how much they help)."""
    from workbench.engines import engine_of
    from workbench.estimate import estimate

    s = best.scenario
    eng = engine_of(s.training)
    out = []
    flips = {"compile": lambda x: dataclasses.replace(x, training=dataclasses.replace(
                 x.training, compile=not x.training.compile)),
             "async_tp": lambda x: dataclasses.replace(x, parallel=dataclasses.replace(
                 x.parallel, async_tp=not x.parallel.async_tp)),
             "tp_comm_overlap": lambda x: dataclasses.replace(x, parallel=dataclasses.replace(
                 x.parallel, tp_comm_overlap=not x.parallel.tp_comm_overlap))}
    for name, flip in flips.items():
        if not eng.offers(name) or (name != "compile" and s.parallel.tp == 1) or (
                name == "tp_comm_overlap" and not s.parallel.sp):
            continue
        other = estimate(flip(s))
        on = s.training.compile if name == "compile" else getattr(s.parallel, name)
        gain = (other.time.step - best.time.step) * (1 if on else -1)
        out.append(f"switch {name} {'on' if on else 'off'}: with it on the step is "
                   f"{abs(gain):.3f} s ({abs(gain) / max(best.time.step, other.time.step):.1%})"
                   f" {'shorter' if gain >= 0 else 'longer'}; {_SWITCH_REASON[name]}")
    if s.training.fp8_recipe:
        out.append(f"FP8 recipe {s.training.fp8_recipe}: the fastest of "
                   f"{', '.join(eng.fp8_recipes)} on this layout (GEMM rate against scaling "
                   "passes, workbench/engines/)")
    return out


def describe_start(result: PlanResult) -> str:
    """One line on the scenario's own layout: why it is invalid, or where it ranks."""
    st = result.start
    if not st["valid"]:     # as the user wrote it: its values may not even be numbers
        default = dataclasses.asdict(Parallel())
        words = " ".join(f"{k}={printable(v, 40)}" for k, v in st["parallel"].items()
                         if k not in default or default[k] != v) or "the defaults"
        more = len(st["problems"]) - 1
        return (f"your layout ({words}) is not valid: {st['problems'][0]}"
                + (f" (and {more} more)" if more > 0 else "") + "; the ranking above is what "
                "the planner found instead")
    words = _layout_words({"parallel": st["parallel"], "training": st["training"]})
    mem = f"{st['device_per_gpu'] / 2**30:.1f} GiB/GPU as nvidia-smi counts it"
    if not st["fits"]:
        return (f"your layout ({words}): {st['step']:.3f} s/step but {mem}, above the limit "
                f"of {result.limit / 2**30:.1f} GiB (or the host's DDR/NVMe for offload)")
    best = float(result.ranked["step"][0])
    return (f"your layout ({words}): #{st['rank']} of {len(result):,}, "
            f"{st['step']:.3f} s/step ({st['step'] / best - 1:+.1%} against #1), {mem}")

"""Scaling curves: throughput and memory per GPU against the GPU count or one parallel degree,
from the cost model over a layout grid (``estimate.cost_model.compose``) — the data of the widgets'
scaling chart.

Two kinds of sweep:

- ``over="gpus"``: at each GPU count, the best layout the planner finds (every degree, ZeRO
  stage, schedule, micro-batch, recompute and offload searched, exactly as ``plan``'s
  throughput-vs-GPU-count front): the fitting layout with the shortest step, or, when none fits,
  the one needing the least memory (``fits`` False). The hardware is the scenario's on that
  many GPUs: whole nodes when the count is a multiple of a node, else one partly filled node.
- ``over`` one of ``"dp"``, ``"tp"``, ``"pp"``, ``"cp"``, ``"ep"``: the scenario's own layout
  with that degree changed and every other setting kept. For tp, pp and cp the GPU count stays
  the scenario's and **dp fills it** (dp = GPUs / (tp x pp x cp)); for dp the other degrees
  stay and **the GPU count changes** (dp x tp x pp x cp); ep changes neither (EP is drawn from
  dp x cp). With pp = 1 the layout has one virtual stage.

Every requested value gives one row; a value that is no layout (a rule broken, no GPU count it
fits) has ``valid`` False, NaN figures and the validator's message in ``reason``, so callers
drop it with ``df[df.valid]`` and can say why. Figures are bytes (``memory_per_gpu``,
``capacity``: GPU memory as ``units.hbm_bytes`` reads it), seconds (``step``) and tokens/s.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from workbench.errors import ScenarioError
from workbench.estimate.cost_model.compose import evaluate_layouts
from workbench.plan.constraints import Constraints
from workbench.plan.search import Progress, with_world, search_rows
from workbench.plan.space import ROW_FIELDS, divisors
from workbench.scenario.layouts import LayoutGrid
from workbench.scenario.rules import layout_mask
from workbench.scenario.types import Scenario
from workbench.units import hbm_bytes

if TYPE_CHECKING:
    import pandas as pd

OVER = ("gpus", "dp", "tp", "pp", "cp", "ep")
DEGREES = ("dp", "tp", "pp", "cp", "ep")
COLUMNS = ("value", "gpus", "tokens_per_s", "memory_per_gpu", "fits", "step", "valid", "reason",
           "capacity", "mfu", "bubble", "nodes", "gpus_per_node", *ROW_FIELDS, "pp_schedule",
           "sequence_parallel", "recompute", "offload")


def _powers_up_to(n: int) -> list[int]:
    out, v = [], 1
    while v <= n:
        out.append(v)
        v *= 2
    return out


def default_values(s: Scenario, over: str) -> list[int]:
    """The values a sweep takes when none are given: powers of two up to the scenario's GPUs
    (and the count itself) for ``gpus``; for dp, powers of two up to what the scenario's GPUs
    hold with the other degrees (and that maximum); for tp, pp and cp, every divisor of the GPUs
    left by the other two; for ep, the divisors of gcd(dp x cp, experts) (1 for dense models)."""
    par, world = s.parallel, s.hardware.world
    if over == "gpus":
        return sorted(set(_powers_up_to(world)) | {world})
    if over == "dp":
        most = world // (par.tp * par.pp * par.cp)
        return sorted(set(_powers_up_to(most)) | {most})
    if over == "ep":
        if s.model.moe is None:
            return [1]
        return divisors(int(np.gcd(par.dp * par.cp, s.model.moe.experts)))
    others = {"tp": par.pp * par.cp, "pp": par.tp * par.cp, "cp": par.tp * par.pp}[over]
    return divisors(world // others)


def scaling_curve(scenario: Scenario, over: str = "gpus", values: list[int] | None = None,
                  constraints: Constraints | None = None, progress: Progress | None = None
                  ) -> "pd.DataFrame":
    """Tokens/s, memory per GPU, fit and step time of ``scenario`` at each value of ``over``
    (see the module docstring for what each sweep holds fixed). ``values`` defaults to
    ``default_values``; ``constraints`` applies to the ``gpus`` sweep only (the planner's
    fixed fields and memory fraction; its ``gpu_counts`` are ignored).

    Cost: a ``gpus`` sweep is one full planner search per count (seconds for hundreds of
    GPUs; ``progress(fraction, what)`` is called as in ``plan``, and returning False raises
    ``plan.search.Cancelled``); a degree sweep is one grid evaluation (milliseconds).

    Returns one row per value, sorted by value, with the columns ``COLUMNS``: ``value``,
    ``gpus``, ``tokens_per_s``, ``memory_per_gpu`` (bytes, worst GPU), ``fits``, ``step`` (s),
    ``valid``, ``reason`` ("" for a valid layout that fits, else why not), ``capacity`` (bytes
    per GPU), ``mfu``, ``bubble`` (s), ``nodes``, ``gpus_per_node`` and the layout (dp, tp, pp,
    cp, ep, zero, virtual_stages, micro_batch, pp_schedule, sequence_parallel, recompute,
    offload)."""
    import pandas as pd

    if over not in OVER:
        raise ValueError(f"over must be one of {', '.join(OVER)}, not {over!r}")
    vals = default_values(scenario, over) if values is None else list(values)
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{over} values must be positive integers, not {v!r}")
    vals = sorted({int(v) for v in vals})
    if over == "gpus":
        c = constraints or Constraints()
        rows = [_best_at(scenario, n, c, progress, (i / len(vals), 1 / len(vals)))
                for i, n in enumerate(vals)]
        if progress is not None:
            progress(1.0, "done")
    else:
        rows = _sweep_degree(scenario, over, vals)
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    return df.astype({"valid": bool, "fits": bool})


def _empty_row(value: int, gpus: int, s: Scenario, reason: str) -> dict:
    hw = s.hardware
    row = {k: np.nan for k in COLUMNS}
    row.update(value=value, gpus=gpus, fits=False, valid=False, reason=reason,
               capacity=hbm_bytes(hw.gpu.memory_gb), nodes=hw.nodes,
               gpus_per_node=hw.gpus_per_node)
    return row


def _best_at(s: Scenario, n: int, c: Constraints, progress: Progress | None,
             share: tuple[float, float]) -> dict:
    """The planner's best layout on ``n`` GPUs (``plan``'s front: the same search and pick)."""
    from workbench.plan.result import PlanResult

    if n > s.hardware.world:
        return _empty_row(n, n, s, f"more than the scenario's {s.hardware.world} GPUs")
    sn = with_world(s, n)
    said = None if progress is None else (lambda f, what: progress(f, f"{n} GPUs: {what}"))
    found = search_rows(sn, dataclasses.replace(c, gpu_counts=()), said, share)
    cols = found["columns"]
    if len(cols["step"]) == 0:
        return _empty_row(n, n, sn, str(PlanResult.build(sn, c, found).infeasible_reason()))
    fits = cols["fits"]
    if fits.any():
        # plan's order: shortest step, then least memory (max tokens/s = min step)
        idx = np.flatnonzero(fits)
        i = idx[np.lexsort((cols["memory_per_gpu"][idx], cols["step"][idx]))[0]]
        reason = ""
    else:
        i = int(np.argmin(cols["memory_per_gpu"]))
        reason = str(PlanResult.build(sn, c, found).infeasible_reason())
    row = _empty_row(n, n, sn, reason)
    row.update({k: cols[k][i].item() if hasattr(cols[k][i], "item") else cols[k][i]
                for k in (*ROW_FIELDS, "pp_schedule", "sequence_parallel", "recompute",
                          "offload", "step", "memory_per_gpu", "tokens_per_s", "mfu", "bubble")})
    row.update(valid=True, fits=bool(fits[i]))
    return row


def _document(s: Scenario, degrees: dict, hw) -> dict:
    """The scenario document with new degrees and hardware size (for the validator)."""
    doc = s.to_dict()
    par = {**doc.get("parallel", {}), **degrees}
    if par.get("shard_group") is None:
        par.pop("shard_group", None)
    doc["parallel"] = par
    doc["hardware"] = {**doc["hardware"], "nodes": hw.nodes, "gpus_per_node": hw.gpus_per_node}
    return doc


def _reason(s: Scenario, degrees: dict, hw) -> str:
    from workbench.scenario import parse_scenario

    try:
        parse_scenario(_document(s, degrees, hw))
    except ScenarioError as exc:
        return exc.one_line()
    return "rejected by the layout rules (scenario.rules.layout_mask)"


def _sweep_degree(s: Scenario, over: str, vals: list[int]) -> list[dict]:
    par, tr, world = s.parallel, s.training, s.hardware.world
    points = []                           # (value, degrees | None, scenario on its GPUs, why)
    for v in vals:
        d = {k: getattr(par, k) for k in DEGREES}
        d[over] = v
        base = s
        if over == "dp":
            base = with_world(s, v * par.tp * par.pp * par.cp)
        elif over in ("tp", "pp", "cp"):
            rest = d["tp"] * d["pp"] * d["cp"]
            if world % rest:
                points.append((v, None, s, f"parallel: tp x pp x cp = {rest} does not divide "
                                           f"the {world} GPUs"))
                continue
            d["dp"] = world // rest
        d["virtual_stages"] = par.virtual_stages if d["pp"] > 1 else 1
        points.append((v, d, base, ""))

    rows: dict[int, dict] = {}
    for v, d, base, why in points:
        if d is None:
            rows[v] = _empty_row(v, world, s, why)
    # One grid per GPU count (dp sweeps change the hardware, the others share one).
    by_world: dict[int, list] = {}
    for v, d, base, _ in points:
        if d is not None:
            by_world.setdefault(base.hardware.world, []).append((v, d, base))
    for n, pts in by_world.items():
        base = pts[0][2]
        hw = base.hardware
        arr = np.array([[d["dp"], d["tp"], d["pp"], d["cp"], d["ep"], par.zero,
                         d["virtual_stages"], tr.micro_batch, par.shard_group or 0]
                        for _, d, _ in pts]).T
        kw = dict(pp_schedule=par.pp_schedule, sequence_parallel=par.sequence_parallel,
                  reshard_after_forward=par.reshard_after_forward)
        ok = layout_mask(base, LayoutGrid(*arr, **kw))
        out = evaluate_layouts(base, LayoutGrid(*arr[:, ok], **kw)) if ok.any() else {}
        j = 0
        for (v, d, _), good in zip(pts, ok):
            if not good:
                rows[v] = _empty_row(v, n, base, _reason(s, d, hw))
                continue
            row = _empty_row(v, n, base, "")
            row.update({k: d.get(k, getattr(par, k, None)) for k in ROW_FIELDS})
            row.update(zero=par.zero, micro_batch=tr.micro_batch,
                       shard_group=par.shard_group or 0,
                       pp_schedule=par.pp_schedule, sequence_parallel=par.sequence_parallel,
                       recompute=tr.recompute, offload=tr.offload, valid=True)
            for k in ("step", "memory_per_gpu", "tokens_per_s", "mfu", "bubble"):
                row[k] = float(out[k][j])
            row["fits"] = bool(out["fits"][j])
            if not row["fits"]:
                row["reason"] = (f"needs {row['memory_per_gpu'] / 2**30:.1f} GiB per GPU, "
                                 f"more than the {row['capacity'] / 2**30:.1f} GiB it has")
            rows[v] = row
            j += 1
    return [rows[v] for v in vals]

"""Search: screen every candidate layout with the validation rules, evaluate the valid ones with
the vectorised estimator, and rank those that fit.

Options that only trade time for memory are searched by dominance, exactly: a layout is tried
with selective or full recompute, or with optimizer offload, only when it does not fit with
every cheaper setting of those two (the same layout with less recompute and less offload is
never slower). Sequence parallelism is searched both ways when TP > 1.

The engine's switches: ``compile`` and the TP overlap (``async_tp``: torchtitan's
micro-pipelined TP; ``tp_comm_overlap``: Megatron's TE userbuffers) cost no memory in the cost
model and only remove elementwise traffic or exposed TP time (the overlaps' chunked GEMMs and
the SMs userbuffers take are charged, and on every layout tried they still win), so where the
engine offers them they are searched on, unless ``--fix`` pins them; ``PlanResult.switches``
says what each one bought on the best layout. FP8 recipes trade GEMM rate against scaling
passes and are all searched. ``Constraints.engines`` searches several engines.
"""
from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable

import numpy as np

from workbench.engines.accuracy import memory_band
from workbench.errors import Problem, ScenarioError
from workbench.estimate.cost_model.compose import evaluate_layouts
from workbench.estimate.cost_model.rows import Rows
from workbench.estimate.memory.device import device_overhead
from workbench.headroom import band_fraction
from workbench.plan.constraints import REAL_ENGINES, Constraints
from workbench.plan.pruning import TIMED, Best, Group, PassRows, complete, window_rows
from workbench.plan.result import PlanResult
from workbench.plan.space import ROW_FIELDS, candidate_rows, expert_tp_values
from workbench.scenario.layouts import LayoutGrid
from workbench.scenario.rules import layout_masks
from workbench.engines import engine_of
from workbench.scenario.types import OFFLOAD, RECOMPUTE, SCHEDULES, Parallel, Scenario
from workbench.units import hbm_bytes

Progress = Callable[[float, str], bool | None]   # (fraction done, what) -> False to cancel


class Cancelled(Exception):
    """The progress callback asked the search to stop."""


def with_setting(s: Scenario, sp: bool, recompute: str, offload: str) -> Scenario:
    """The scenario with one setting the search tries: sequence parallelism, recompute and
    offload, and the switches that setting leaves valid."""
    # async TP stays on without SP only where the engine runs it so (rule async_tp_sp)
    atp = s.parallel.async_tp and (sp or not engine_of(s.training).async_tp_needs_sp)
    # TE userbuffers overlap only under SP (rule tp_comm_overlap)
    par = dataclasses.replace(s.parallel, sequence_parallel=sp, async_tp=atp,
                              tp_comm_overlap=s.parallel.tp_comm_overlap and sp)
    tr = dataclasses.replace(s.training, recompute=recompute, offload=offload)
    return dataclasses.replace(s, parallel=par, training=tr)


SWITCH_COLUMNS = ("engine", "compile", "async_tp", "tp_comm_overlap", "fp8_recipe", "optimizer",
                  "expert_tp")
# The TP overlaps: no-ops (and exported as off) without TP
TP_OVERLAPS = ("async_tp", "tp_comm_overlap")


def switch_variants(s: Scenario, c: Constraints) -> list[Scenario]:
    """``s`` once per engine searched and per setting of its switches (see the docstring)."""
    fixed = c.fixed
    names = [fixed["engine"]] if "engine" in fixed else list(c.engines or (s.training.engine,))
    out = []
    from workbench.scenario.rules import CLASSIC_OPTIMIZERS
    # a switch fixed on is searched only with the engines that offer it (the validator
    # refuses it elsewhere: rule engine_switches)
    wanted = [k for k in ("compile", "async_tp", "tp_comm_overlap", "expert_tp", "fp8_recipe")
              if fixed.get(k) not in (None, False)]
    if fixed.get("fp8_recipe") is not None and s.training.precision != "fp8":
        raise ScenarioError([Problem("fixed.fp8_recipe", fixed["fp8_recipe"],
                                     "a recipe only with training.precision fp8 (the "
                                     f"scenario's is {s.training.precision})")])
    lacking = {}
    for name in names:
        eng = engine_of(dataclasses.replace(s.training, engine=name))
        missing = [k for k in wanted if not eng.offers(k)]
        if missing:
            lacking[name] = missing
            continue
        built = eng.optimizers or CLASSIC_OPTIMIZERS          # rule engine_numerics
        optimizers = [o for o in (c.optimizers or (s.training.optimizer,)) if o in built]
        comp = fixed.get("compile", eng.offers("compile"))
        atp = fixed.get("async_tp", eng.offers("async_tp"))
        tco = fixed.get("tp_comm_overlap", eng.offers("tp_comm_overlap"))
        recipes = [None]
        if s.training.precision == "fp8" and eng.offers("fp8_recipe"):
            recipes = [fixed["fp8_recipe"]] if "fp8_recipe" in fixed else list(eng.fp8_recipes)
        # expert TP: one grid pass per value (plan.space.expert_tp_values)
        etps = [fixed["expert_tp"]] if "expert_tp" in fixed else expert_tp_values(s, eng)
        for recipe, optimizer, etp in itertools.product(recipes, optimizers, etps):
            tr = dataclasses.replace(s.training, engine=name, compile=comp and eng.offers(
                "compile"), fp8_recipe=recipe, optimizer=optimizer)
            par = dataclasses.replace(s.parallel, async_tp=atp and eng.offers("async_tp"),
                                      tp_comm_overlap=tco and eng.offers("tp_comm_overlap"),
                                      expert_tp=etp)
            out.append(dataclasses.replace(s, training=tr, parallel=par))
    if not out and lacking:
        offer = [e for e in REAL_ENGINES if all(engine_of(dataclasses.replace(
            s.training, engine=e)).offers(k) for k in wanted)]
        raise ScenarioError([Problem(f"fixed.{k}", fixed[k], (
            f"engine {', '.join(n for n, m in lacking.items() if k in m)} does not offer it; "
            f"search an engine that does ({', '.join(offer) or 'none offers all of them'}: "
            "training.engine or --engines)")) for k in dict.fromkeys(
                k for m in lacking.values() for k in m)])
    if not out:
        raise ScenarioError([Problem("optimizers", list(c.optimizers), "none of these is built "
                                     "by engine " + ", ".join(names) + " (training.optimizer "
                                     "lists what each builds)")])
    return out


def with_world(s: Scenario, world: int) -> Scenario:
    """The scenario on ``world`` GPUs: whole nodes when it is a multiple of a node, else one
    partly filled node (for the throughput-vs-GPU-count front)."""
    gpn = s.hardware.gpus_per_node
    if world % gpn == 0:
        hw = dataclasses.replace(s.hardware, nodes=world // gpn)
    else:
        hw = dataclasses.replace(s.hardware, gpus_per_node=world, nodes=1)
    return dataclasses.replace(s, hardware=hw)


def search_rows(s: Scenario, c: Constraints, progress: Progress | None = None,
                share: tuple[float, float] = (0.0, 1.0), prune: bool = True) -> dict:
    """Every evaluated layout of ``s``'s hardware: a dict of column arrays (layout fields, sp,
    pp_schedule, recompute, offload, step, memory_per_gpu, tokens_per_s, mfu, bubble, fits)
    plus the screening counts. ``prune``: the memory pass on every evaluated row, the time
    pass only on the rows ``plan.pruning`` names (the others' step, tokens_per_s, mfu and
    bubble are NaN); False times every row (the reference the pruning is tested against)."""
    fixed = c.fixed
    schedules = [fixed["pp_schedule"]] if "pp_schedule" in fixed else list(SCHEDULES)
    sps = [fixed["sequence_parallel"]] if "sequence_parallel" in fixed else [True, False]
    offloads = [fixed["offload"]] if "offload" in fixed else list(OFFLOAD)
    band = memory_band(s.training.engine, s.model.moe is not None, s.training.method)
    fraction = (band_fraction(band) if c.max_memory_fraction is None
                else c.max_memory_fraction)
    limit = fraction * hbm_bytes(s.hardware.gpu.memory_gb)
    world = s.hardware.world
    cols: dict[str, list] = {k: [] for k in (*ROW_FIELDS, "sequence_parallel", "pp_schedule",
                                            "recompute", "offload", "step", "memory_per_gpu",
                                            "device_per_gpu", "tokens_per_s", "mfu", "bubble",
                                            "host_fits", *SWITCH_COLUMNS)}
    cols["_floor"] = []      # the pruned search's step floor per row (``complete`` reads it)
    variants = switch_variants(s, c)
    # candidates and valid count each layout once per engine-and-switch setting searched
    counts = {"candidates": 0, "valid": 0, "fit": 0, "evaluated": 0,
              "settings": len(variants)}
    total = len(schedules) * len(sps) * len(variants)
    done = 0
    groups: list[Group] = []
    best = Best()
    for v in variants:
        done = _search_variant(v, c, schedules, sps, offloads, limit, world, cols, counts,
                               progress, share, done, total, prune, groups, best)
    arrays = {k: _column(v, bool if k == "sequence_parallel" else object)
              for k, v in cols.items()}
    floor = arrays.pop("_floor")
    if prune:
        complete(arrays, groups, limit, floor)
    arrays["fits"] = ((arrays["device_per_gpu"] <= limit) & arrays["host_fits"].astype(bool)
                      if len(arrays["step"]) else np.array([], bool))
    return {"columns": arrays, "counts": counts, "limit": limit, "fraction": fraction,
            "band": band, "capacity": hbm_bytes(s.hardware.gpu.memory_gb)}


def _column(chunks: list, dtype) -> np.ndarray:
    """One column from its chunks: arrays, or (value, count) for a chunk of one value (then
    of ``dtype``)."""
    if not chunks:
        return np.array([])
    if not isinstance(chunks[0], tuple):
        return np.concatenate(chunks)
    table = np.empty(len(chunks), dtype=dtype)
    table[:] = [v for v, _ in chunks]
    return np.repeat(table, [n for _, n in chunks])


def _search_variant(s: Scenario, c: Constraints, schedules, sps, offloads, limit, world, cols,
                    counts, progress, share, done, total, prune: bool, groups: list,
                    best: Best) -> int:
    """Search one engine-and-switches variant of the scenario into ``cols`` (``prune``: the
    time pass only where ``plan.pruning`` says it is needed; ``groups`` records each memory
    pass's rows, ``best`` the shortest fitting step so far)."""
    fixed = c.fixed
    eng = engine_of(s.training)
    recomputes = [fixed["recompute"]] if "recompute" in fixed else [
        r for r in RECOMPUTE if r in eng.recompute]   # RECOMPUTE: the dominance order
    sps = [sp for sp in sps if sp or eng.tp_without_sp]   # rule engine_sp
    caches: dict = {}
    switches = {"engine": s.training.engine, "compile": s.training.compile,
                "fp8_recipe": s.training.fp8_recipe, "optimizer": s.training.optimizer,
                "expert_tp": s.parallel.expert_tp}
    for schedule in schedules:
        rows = candidate_rows(s, world, schedule, fixed)
        # what depends on the layout alone, once per schedule for every setting tried on it
        # (the expert-TP width shapes the expert groups' communicators)
        overhead = (device_overhead(s.hardware, LayoutGrid(*rows, pp_schedule=schedule,
                                                           expert_tp=s.parallel.expert_tp))
                    if prune and rows.shape[1] else None)
        for sp in sps:
            if progress is not None and progress(
                    share[0] + share[1] * done / total, f"{schedule}, SP {'on' if sp else 'off'}"
            ) is False:
                raise Cancelled()
            done += 1
            wide = rows[1] > 1
            r = rows if sp else rows[:, wide]         # SP off only matters with TP
            if r.shape[1] == 0:
                continue
            counts["candidates"] += r.shape[1]
            g = LayoutGrid(*r, pp_schedule=schedule, sequence_parallel=sp,
                           expert_tp=s.parallel.expert_tp)
            # the rules read offload (its target and ZeRO stage), not recompute: one mask per
            # offload
            masks = layout_masks({off: with_setting(s, sp, recomputes[0], off) for off in offloads},
                                 g, "training.offload")
            valid = np.logical_or.reduce(list(masks.values()))
            # a layout is valid where some offload searched admits it, and fits where some
            # setting tried on it fits (the ranked table may hold it once per setting)
            counts["valid"] += int(valid.sum())
            if not valid.any():
                continue
            # the pass runs over the layouts some offload admits
            r, g = r[:, valid], g.take(valid)
            masks = {off: m[valid] for off, m in masks.items()}
            pas = None
            if prune:
                over = np.broadcast_to(overhead, rows.shape[1])[
                    slice(None) if sp else wide][valid]
                pas = PassRows(Rows(s.model, s.training.global_batch, g, False), over)
            # Fit status per (recompute, offload) pair, for the dominance rule.
            fit = {}
            for i, rc in enumerate(recomputes):
                cache = caches.setdefault((sp, rc), {})
                if prune:
                    # every layout a setting of this recompute can try: no cheaper recompute
                    # fits it without offload
                    reach = np.ones(r.shape[1], bool)
                    for (ii, jj), f in fit.items():
                        if jj == 0:
                            reach &= ~f
                    if reach.any():
                        pas.reach({off: with_setting(s, sp, rc, off) for off in offloads}, reach,
                                  cache)
                for j, off in enumerate(offloads):
                    base = with_setting(s, sp, rc, off)
                    ok = masks[off].copy()
                    for (ii, jj), f in fit.items():
                        if ii <= i and jj <= j:
                            ok &= ~f
                    f_here = np.zeros(r.shape[1], bool)
                    if ok.any():
                        n = int(ok.sum())
                        if prune:
                            out = _pruned(base, pas, rc, ok, limit, best)
                            cols["_floor"].append(out["floor"])
                            groups.append(Group(base, schedule, sp, s.parallel.expert_tp, cache,
                                                sum(len(a) for a in cols["step"])))
                        else:
                            out = evaluate_layouts(base, g.take(ok), cache)
                        counts["evaluated"] += n
                        # fits: GPU memory as nvidia-smi counts it within the limit, offload
                        # within host DDR and NVMe
                        f_here[ok] = (out["device_per_gpu"] <= limit) & out["host_fits"]
                        for k, v in zip(ROW_FIELDS, r[:, ok]):
                            cols[k].append(v)
                        # one value for the whole chunk: (value, count), expanded at the end
                        for k, val in (("sequence_parallel", sp), ("pp_schedule", schedule),
                                       ("recompute", rc), ("offload", off), *switches.items()):
                            cols[k].append((val, n))
                        for k in ("step", "memory_per_gpu", "device_per_gpu", "tokens_per_s",
                                  "mfu", "bubble"):
                            cols[k].append(np.asarray(out[k], dtype=float))
                        cols["host_fits"].append(np.asarray(out["host_fits"], dtype=bool))
                        for k in TP_OVERLAPS:      # no-ops (exported as off) without TP
                            cols[k].append(np.asarray(
                                getattr(base.parallel, k) & (r[1, ok] > 1), dtype=object))
                    fit[(i, j)] = f_here
            counts["fit"] += int(np.logical_or.reduce(list(fit.values())).sum()) if fit else 0
    return done


def _pruned(base: Scenario, pas: PassRows, recompute: str, ok: np.ndarray, limit: float,
            best: Best) -> dict:
    """The layouts ``ok`` of the pass under ``base``'s setting: their memory figures (read
    from the pass's columns), and the time pass over those that fit and those
    ``pruning.window_rows`` names: the layout figures, timed ones NaN elsewhere."""
    offload = base.training.offload
    out = pas.figures(recompute, offload, ok)
    fits = (out["device_per_gpu"] <= limit) & out["host_fits"]

    # the step floor of every layout (the window below, the far fallback in ``complete``)
    out["floor"] = pas.step_floor(base, ok)
    need = fits | window_rows(out["device_per_gpu"], fits, limit, out["floor"], best)
    for key in TIMED:
        out[key] = np.full(len(fits), np.nan)
    if need.any():
        keep = ok.copy()
        keep[ok] = need
        timed = pas.times(base, keep)
        for key in TIMED:
            out[key][need] = timed[key]
        best.update(out["step"][fits])
    return out


def plan(s: Scenario, constraints: Constraints | None = None, progress: Progress | None = None
         ) -> PlanResult:
    """Rank every valid layout of ``s``'s model and training on its hardware by step time.
    Raises ScenarioError naming the constraint that left no layout, never returns empty."""
    c = constraints or Constraints()
    start = s
    # the given layout is only a starting point: the search starts from the default one
    s = dataclasses.replace(s, parallel=Parallel(),
                            document={**s.document, "parallel": dataclasses.asdict(Parallel())})
    t0 = time.perf_counter()
    counts_front = list(c.gpu_counts)
    share = 1.0 / (1 + len(counts_front))
    main = search_rows(s, c, progress, (0.0, share))
    result = PlanResult.build(s, c, main)
    if not result.feasible:
        raise ScenarioError([result.infeasible_reason()])
    fronts = []
    for k, n in enumerate(counts_front):
        if n > s.hardware.world:
            raise ScenarioError([Problem("gpu_counts", n,
                                         f"at most the scenario's {s.hardware.world} GPUs")])
        other = search_rows(with_world(s, n), c, progress, ((k + 1) * share, share))
        cols = other["columns"]
        fits = cols["fits"] if len(cols["step"]) else np.array([], bool)
        best = float(np.max(cols["tokens_per_s"][fits])) if fits.any() else float("nan")
        fronts.append({"gpus": n, "tokens_per_s": best})
    if counts_front:
        fronts.append({"gpus": s.hardware.world, "tokens_per_s": result.best_tokens_per_s})
    result.by_gpu_count = sorted(fronts, key=lambda d: d["gpus"])
    if start.layout_given:
        result.start = starting_point(start, result)
    result.seconds = time.perf_counter() - t0
    if progress is not None:
        progress(1.0, "done")
    return result


def starting_point(start: Scenario, result: PlanResult) -> dict:
    """Where the scenario's own layout stands among the ranked ones: the problems that make it
    invalid, or its estimate, whether it fits the search's memory limit, and its rank (1 + the
    fitting layouts that are faster)."""
    from workbench.estimate import estimate

    out = {"parallel": dict(start.document["parallel"]),
           "training": {k: getattr(start.training, k) for k in ("micro_batch", "recompute",
                                                                 "offload")},
           "valid": not start.layout_problems,
           "problems": [str(p) for p in start.layout_problems],
           "step": None, "memory_per_gpu": None, "device_per_gpu": None, "fits": None,
           "rank": None}
    if start.layout_problems:
        return out
    est = estimate(start)
    # fit as the search judges it: the device figure (nvidia-smi) within the limit
    fits = (est.memory.per_gpu.device <= result.limit and est.memory.host_fits
            and est.memory.nvme_fits)
    out.update(step=est.time.step, memory_per_gpu=est.memory.per_gpu.total,
               device_per_gpu=est.memory.per_gpu.device, fits=fits)
    if fits:
        out["rank"] = 1 + int((result.ranked["step"] < est.time.step * (1 - 1e-9)).sum())
    return out

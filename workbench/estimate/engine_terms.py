"""What the chosen engine and its switches change in the cost of a block, as numbers the step-time
formulas multiply or add (``step_time.block_costs``):

- ``elementwise_traffic``: HBM traffic of the memory-bound work relative to fused kernels — the
  engine's eager figure (``Engine.elementwise_traffic``, derived in its module) or 1 under
  ``training.compile`` (Inductor fuses the elementwise chains into one kernel each).
- ``fp8_gemm_rate`` / ``fp8_cast_passes``: the FP8 recipe's GEMM rate against the tensorwise
  GEMMs the kernel table measures, and its scaling/cast passes (``Engine.fp8_recipes``).
- ``time_factor``, ``attention_factor`` and ``moe_layer_s``: the constants that cannot be
  derived — how much slower an engine's kernels run in a real step than the idealised stack
  (sustained efficiency, per engine), how much slower the fused attention kernels run inside a
  training step than in their published benchmarks (one factor for every engine), and the
  fixed cost of one MoE layer's routing and dispatch per pass (one for every engine). They are
  *fitted* on measured runs by ``benchmarks/fit_engines.py`` into
  ``workbench/engines/fitted.json``, which also holds their leave-one-source-out error (the
  band every estimate carries). ``generic`` keeps 1, 1 and 0: its estimates are those of the
  idealised stack.
"""
from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from workbench.engines import ENGINES

FITTED = Path(__file__).resolve().parent.parent / "engines" / "fitted.json"


@dataclass(frozen=True)
class RunConventions:
    elementwise_traffic: float = 1.0
    fp8_gemm_rate: float = 1.0
    fp8_cast_passes: float = 1.0
    time_factor: float = 1.0
    attention_factor: float = 1.0
    moe_layer_s: float = 0.0


@lru_cache(maxsize=1)
def _committed() -> dict:
    return json.loads(FITTED.read_text()) if FITTED.exists() else {}


_override: list[dict] = []


def fitted() -> dict:
    """The fitted constants and their cross-validated errors (the committed fit, or the one
    ``trying`` put in place; empty before the first fit)."""
    return _override[-1] if _override else _committed()


@contextmanager
def trying(constants: dict):
    """Estimate with ``constants`` in place of the committed fit (the fitting benchmark's
    candidates and its leave-one-source-out refits)."""
    _override.append(constants)
    try:
        yield
    finally:
        _override.pop()


def fitted_constants(engine: str) -> tuple[float, float, float]:
    """(time_factor, attention_factor, moe_layer_s) of ``engine``: its own time factor, else
    the one pooled over every engine with runs; generic is the unfitted reference (1, 1, 0)."""
    if engine == "generic":
        return 1.0, 1.0, 0.0
    c = fitted()
    per = c.get("engines", {}).get(engine) or c.get("pooled") or {}
    return (float(per.get("time_factor", 1.0)), float(c.get("attention_factor", 1.0)),
            float(c.get("moe_layer_s", 0.0)))


def error_band(engine: str, moe: bool) -> dict | None:
    """The cross-validated step-time error of ``engine`` in its regime (dense or MoE):
    {"median": fraction, "runs": n, "kind": "leave-one-source-out" | "in-sample"}, or None."""
    bands = fitted().get("bands", {}).get(engine, {})
    return bands.get("moe" if moe else "dense") or bands.get("all")


def conventions(s) -> RunConventions:
    """The conventions of scenario ``s``'s engine and switches (none on a calibrated CPU
    machine, whose profile measured the costs of the plain PyTorch a trial runs; a calibrated
    GPU measured kernels alone, as the catalog's figures are, and keeps them)."""
    tr = s.training
    prof = s.hardware.gpu.profile
    if prof is not None and prof.whole_machine:
        return RunConventions()
    eng = ENGINES[tr.engine]
    traffic = 1.0 if tr.compile else eng.elementwise_traffic
    rate = passes = 1.0
    if tr.precision == "fp8" and eng.fp8_recipes:
        recipe = eng.fp8_recipes.get(tr.fp8_recipe or eng.fp8_default or "")
        if recipe is not None:
            rate, passes = recipe.gemm_rate, recipe.cast_passes
    k, attn, moe_s = fitted_constants(tr.engine)
    return RunConventions(traffic, rate, passes, k, attn, moe_s)

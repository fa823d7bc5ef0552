"""What the chosen engine and its switches change in the cost of a block, as numbers the step-time
formulas multiply or add (``block_costs.block_costs``):

- ``elementwise_traffic``: HBM traffic of the memory-bound work relative to fused kernels — the
  engine's eager figure (``Engine.elementwise_traffic``, derived in its module) or 1 under
  ``training.compile`` (Inductor fuses the elementwise chains into one kernel each).
- ``fp8``: the FP8 recipe: its GEMM rate against the tensorwise GEMMs the kernel table
  measures (``Fp8Recipe.gemm_rate``) and its cast bytes (``estimate.time.fp8_casts``;
  ``Engine.fp8_recipes``; the generic engine's: ``fp8_casts.GENERIC_RECIPE``; under an FP4
  precision the engine's ``Engine.fp4_recipes`` entry);
  ``fp8_cast_fusion`` / ``fp8_separate_projections``: which casts fuse as the engine runs
  ("compile" only under ``training.compile``) and whether q/k/v and gate/up cast their shared
  input each.
- ``loss``: how the loss over the vocabulary runs (``Engine.loss``: fp32 upcast or fused).
- ``expert_loop``: the routed experts run as a Python loop of per-expert matmuls (eager MoE
  code), not as grouped GEMMs (``Engine.expert_gemms``).
Nothing here is fitted: what an engine changes is the mechanism its source shows.
``error_band`` reads the step-time error ``benchmarks/accuracy.py --write`` measured on published
runs (``workbench/engines/accuracy.json``): the band every estimate carries, from the narrowest
group of runs like it that holds at least ``BAND_MIN_RUNS``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from workbench.engines import Fp8Recipe, engine_of
from workbench.engines.types import NVFP4_TE
from workbench.estimate.time.fp8_casts import GENERIC_RECIPE
from workbench.scenario.types import FP4_PRECISIONS

ACCURACY = Path(__file__).resolve().parents[2] / "engines" / "accuracy.json"


@dataclass(frozen=True)
class RunConventions:
    elementwise_traffic: float = 1.0
    fp8: Fp8Recipe = GENERIC_RECIPE
    expert_loop: bool = False
    loss: str = "fused"
    fp8_cast_fusion: str = "none"
    fp8_separate_projections: bool = False


@lru_cache(maxsize=1)
def measured_accuracy() -> dict:
    """The committed validation (``benchmarks/accuracy.py --write``); empty before the first."""
    return json.loads(ACCURACY.read_text()) if ACCURACY.exists() else {}


# A band from fewer runs says more about those runs than about the estimate: a group needs this
# many before its median and 90th percentile stand for the runs like it. 20 is issue 43's
# choice, not derived from a statistical criterion: it makes the top tenth of a group at least
# 2 runs; with benchmarks/accuracy.py ``summary``'s p90 (the sorted |errors|' element
# int(0.9 n)) a group of 20 has its p90 at the 19th run, one run above it.
BAND_MIN_RUNS = 20


def regime_of(method: str, moe: bool) -> str:
    """The kind of run a band is measured on: fine-tuning (any ``training.method`` but
    pretrain), else MoE or dense pre-training."""
    return "fine-tuning" if method != "pretrain" else ("moe" if moe else "dense")


def band_groups(engine: str, regime: str) -> list[str]:
    """The groups an estimate's band may come from, narrowest first: this engine in this regime,
    this engine, this regime on any engine, every published run."""
    return [f"{engine}/{regime}", engine, regime, "all"]


def error_band(engine: str, moe: bool, method: str = "pretrain") -> dict | None:
    """The measured step-time error of runs like this one: the first of ``band_groups`` with at
    least ``BAND_MIN_RUNS`` runs, as {"group", "runs", "median", "p90", "kind"} (fractions;
    kind "in-sample": the runs shaped the model, nothing was fitted and left out), or None
    before ``benchmarks/accuracy.py --write`` has run."""
    groups = measured_accuracy().get("bands", {})
    for name in band_groups(engine, regime_of(method, moe)):
        band = groups.get(name)
        if band and band["runs"] >= BAND_MIN_RUNS:
            return {"group": name, **band}
    return None


def conventions(s) -> RunConventions:
    """The conventions of scenario ``s``'s engine and switches (none on a calibrated CPU
    machine, whose profile measured the costs of the plain PyTorch a trial runs; a calibrated
    GPU measured kernels alone, as the catalog's figures are, and keeps them)."""
    tr = s.training
    prof = s.hardware.gpu.profile
    if prof is not None and prof.whole_machine:
        return RunConventions()
    eng = engine_of(tr)
    traffic = 1.0 if tr.compile else eng.elementwise_traffic
    recipe = GENERIC_RECIPE
    if tr.precision == "fp8" and eng.fp8_recipes:
        recipe = eng.fp8_recipes.get(tr.fp8_recipe or eng.fp8_default or "", GENERIC_RECIPE)
    elif tr.precision in FP4_PRECISIONS:   # the engine's FP4 recipe (the rules refuse others)
        recipe = eng.fp4_recipes.get(tr.precision, NVFP4_TE)
    fusion = eng.fp8_cast_fusion
    if fusion == "compile" and not tr.compile:
        fusion = "none"
    return RunConventions(traffic, recipe, eng.expert_gemms == "loop",
                          eng.loss, fusion, eng.fp8_separate_projections)

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
Nothing here is fitted: what an engine changes is the mechanism its source shows. (The error
bands the estimate carries: ``workbench.engines.accuracy``.)
"""
from __future__ import annotations

from dataclasses import dataclass

from workbench.engines import Fp8Recipe, engine_of
from workbench.engines.types import NVFP4_TE
from workbench.estimate.time.fp8_casts import GENERIC_RECIPE
from workbench.scenario.types import FP4_PRECISIONS

@dataclass(frozen=True)
class RunConventions:
    elementwise_traffic: float = 1.0
    fp8: Fp8Recipe = GENERIC_RECIPE
    expert_loop: bool = False
    loss: str = "fused"
    fp8_cast_fusion: str = "none"
    fp8_separate_projections: bool = False


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

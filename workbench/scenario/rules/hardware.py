"""Rules of the hardware with the numerics and the nodes."""
from __future__ import annotations

from workbench.errors import Problem
from workbench.scenario.rules.table import rule
from workbench.scenario.types import FP4_PRECISIONS, PRECISIONS, Scenario

# The share of a board's maximum power a user may cap it to (``hardware.gpu_power_limit_w``):
# the sustained clock law (workbench/estimate/time/sustained.py) is checked between 300/400 W
# and 700/1000 W (ratios 0.5-1); NVIDIA's H100 PCIe is configurable 300-350 W and a DGX B200
# ships at a 700 W set point of its 1000 W maximum (docs.nvidia.com/dgx/dgxb200-user-guide/
# power-capping.html). Above the board's maximum the clock cannot follow (it is the limit the
# catalog's peak and measurements were taken at).
POWER_LIMIT_RANGE = (0.5, 1.0)


@rule("fp8", "training.precision fp8 needs a GPU with FP8 tensor cores (fp8_tflops > 0)",
      "training.precision", "hardware.gpu", layout=False)
def _fp8(s: Scenario):
    if s.training.precision == "fp8" and s.hardware.gpu.fp8_tflops <= 0:
        yield Problem("training.precision", "fp8", f"{s.hardware.gpu.name} has no FP8 tensor "
                                                   "cores (hardware.gpu.fp8_tflops 0); use bf16 "
                                                   "or fp16")


@rule("fp4", "training.precision nvfp4 needs a GPU with FP4 tensor cores (hardware.gpu."
      "fp4_tflops > 0: Blackwell, the catalog's b200 and rtx-5090)",
      "training.precision", "hardware.gpu", layout=False)
def _fp4(s: Scenario):
    gpu, prec = s.hardware.gpu, s.training.precision
    if prec in FP4_PRECISIONS and gpu.fp4_tflops <= 0:
        from workbench.catalog import GPUS
        fp4 = ", ".join(k for k, g in GPUS.items() if g.fp4_tflops > 0)
        allowed = [p for p in PRECISIONS
                   if p not in FP4_PRECISIONS and (p != "fp8" or gpu.fp8_tflops > 0)]
        yield Problem("training.precision", prec,
                      f"{gpu.name} has no FP4 tensor cores (hardware.gpu.fp4_tflops 0; FP4 "
                      f"GPUs: {fp4}); use one of {', '.join(allowed)}")


@rule("nics", "hardware.inter_node.nics_per_node >= 1 when nodes > 1",
      "hardware.inter_node.nics_per_node", "hardware.nodes", layout=False)
def _nics(s: Scenario):
    hw = s.hardware
    if hw.nodes > 1 and hw.inter_node.nics_per_node < 1:
        yield Problem("hardware.inter_node.nics_per_node", 0, "must be >= 1 when nodes > 1")


@rule("power_limit", "hardware.gpu_power_limit_w between half and all of the GPU's power_w",
      "hardware.gpu_power_limit_w", "hardware.gpu", layout=False)
def _power_limit(s: Scenario):
    hw = s.hardware
    lo, hi = (f * hw.gpu.power_w for f in POWER_LIMIT_RANGE)
    if hw.gpu_power_limit_w and not lo <= hw.gpu_power_limit_w <= hi:
        yield Problem("hardware.gpu_power_limit_w", hw.gpu_power_limit_w,
                      f"must be between {lo:g} and {hi:g} W (half to all of {hw.gpu.name}'s "
                      f"power_w {hw.gpu.power_w:g} W)")

"""The kernel shapes the estimator times for a scenario, so a GPU calibration can measure them
exactly: the scenario's blocks (``estimate.time.block_costs.block_costs``: every layer kind, the
head) are costed once on a profile that answers every question with 0 and writes down each GEMM
(m, n, k, precision) and attention kernel it is asked about. What is recorded is what the
estimator asks, by construction, whatever the model (dense, MoE, MLA) and layout (TP, SP, CP,
EP); no torch.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from workbench.scenario.types import Scenario


class ShapeRecorder:
    """A profile (``calibrate.profile.Profile``) that times everything as 0 and records the
    GEMM shapes and attention kernels asked; collectives are left to the links."""

    device = "cuda"
    whole_machine = False
    source = "shape recorder"
    date = ""

    def __init__(self) -> None:
        self.gemms: set[tuple[float, float, float, str]] = set()
        self.kernels: set = set()

    def with_ranks(self, ranks: int) -> "ShapeRecorder":
        return self

    def gemm(self, m: float, n: float, k: float, precision: str) -> float:
        self.gemms.add((float(m), float(n), float(k), precision))
        return 0.0

    def peak_flops(self, precision: str) -> float:
        return 1.0

    def attention(self, flops: float, direction: str, kernel: str = "flash2",
                  shape=None) -> float:
        if shape is not None:
            self.kernels.add(shape)
        return 0.0

    def stream(self, nbytes: float) -> float:
        return 0.0

    def ops(self, forward: float, backward: float = 0, no_grad: float = 0) -> float:
        return 0.0

    def wrapper(self, name: str, part: str) -> tuple[float, float]:
        return 0.0, 0.0

    def overlap(self, ranks: int) -> float:
        return 1.0

    def covers(self, span) -> bool:
        return False

    def collective(self, kind: str, n, nbytes, back_to_back: bool = False):
        raise AssertionError("a recorder covers no collective")

    def to_dict(self) -> dict:
        return {}

    def save(self, path: str | Path) -> Path:
        raise NotImplementedError("a shape recorder is not saved")


def scenario_shapes(s: Scenario) -> tuple[list[tuple[float, float, float, str]], list]:
    """(GEMMs as (m, n, k, precision), attention kernels as
    ``estimate.model.attention.AttentionKernel``) that ``block_costs`` times for ``s``'s layout,
    each once, sorted."""
    from workbench.estimate.time.block_costs import block_costs

    recorder = ShapeRecorder()
    hw = dataclasses.replace(s.hardware, gpu=dataclasses.replace(s.hardware.gpu,
                                                                 profile=recorder))
    block_costs(dataclasses.replace(s, hardware=hw))
    return sorted(recorder.gemms), sorted(recorder.kernels)

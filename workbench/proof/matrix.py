"""The standard matrix of trials and running it against the estimate.

Each technique alone, then 2-D, 3-D and 4-D compositions, dense and MoE, on the catalog's tiny
models (scaled down further by the trial: workbench/trial/shrink.py). ``QUICK`` is the subset
CI runs: one row per technique and per composition depth, at most 8 processes but for the 4-D
row (16).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from workbench.proof.compare import Row, compare
from workbench.scenario import parse_scenario


@dataclass(frozen=True)
class Case:
    """One trial of the matrix."""

    label: str
    depth: str                # 1-D | 2-D | 3-D | 4-D
    model: str
    parallel: dict = field(hash=False)

    @property
    def world(self) -> int:
        p = self.parallel
        return p.get("dp", 1) * p.get("tp", 1) * p.get("pp", 1) * p.get("cp", 1)

    def scenario(self):
        """The case as a scenario (H100 nodes: the trial replaces the hardware by this
        machine; only the layout and the model family matter)."""
        return parse_scenario({"hardware": {"gpu": "h100-sxm", "gpus_per_node": self.world},
                               "model": self.model, "parallel": dict(self.parallel),
                               "training": {"seq_len": 256, "global_batch": 16}})


MATRIX = (
    Case("DDP", "1-D", "tiny-dense", {"dp": 2}),
    Case("ZeRO-1", "1-D", "tiny-dense", {"dp": 2, "zero": 1}),
    Case("ZeRO-2 (FSDP2, no reshard)", "1-D", "tiny-dense", {"dp": 2, "zero": 2}),
    Case("ZeRO-3 (FSDP2)", "1-D", "tiny-dense", {"dp": 2, "zero": 3}),
    Case("TP + SP", "1-D", "tiny-dense", {"tp": 2}),
    Case("TP without SP", "1-D", "tiny-dense", {"tp": 2, "sequence_parallel": False}),
    Case("PP 1F1B", "1-D", "tiny-dense", {"pp": 2}),
    Case("PP interleaved 1F1B", "1-D", "tiny-dense",
         {"pp": 2, "pp_schedule": "interleaved-1f1b", "virtual_stages": 2}),
    Case("PP DualPipeV", "1-D", "tiny-gpt", {"pp": 2, "pp_schedule": "dualpipev"}),
    Case("CP (ring attention)", "1-D", "tiny-gpt", {"cp": 2}),
    Case("EP", "1-D", "tiny-moe", {"dp": 2, "ep": 2}),
    Case("DDP, MoE", "1-D", "tiny-moe", {"dp": 2}),
    Case("FSDP2 x TP", "2-D", "tiny-dense", {"dp": 2, "tp": 2, "zero": 3}),
    Case("TP x PP", "2-D", "tiny-dense", {"tp": 2, "pp": 2}),
    Case("FSDP2 x PP", "2-D", "tiny-dense", {"dp": 2, "pp": 2, "zero": 3}),
    Case("CP x FSDP2", "2-D", "tiny-dense", {"dp": 2, "cp": 2, "zero": 3}),
    Case("EP x FSDP2", "2-D", "tiny-moe", {"dp": 4, "ep": 2, "zero": 3}),
    Case("EP x ZeRO-1", "2-D", "tiny-moe", {"dp": 4, "ep": 2, "zero": 1}),
    Case("FSDP2 x TP x PP", "3-D", "tiny-dense", {"dp": 2, "tp": 2, "pp": 2, "zero": 3}),
    Case("CP x TP x FSDP2", "3-D", "tiny-gpt", {"cp": 2, "tp": 2, "zero": 3}),
    Case("EP x CP x FSDP2", "3-D", "tiny-moe", {"dp": 2, "cp": 2, "ep": 2, "zero": 3}),
    Case("FSDP2 x TP x PP x CP", "4-D", "tiny-dense",
         {"dp": 2, "cp": 2, "tp": 2, "pp": 2, "zero": 3}),
)

QUICK_LABELS = ("DDP", "ZeRO-1", "ZeRO-3 (FSDP2)", "TP + SP", "PP 1F1B", "CP (ring attention)",
                "EP", "FSDP2 x TP", "EP x FSDP2", "FSDP2 x TP x PP", "FSDP2 x TP x PP x CP")
QUICK = tuple(c for c in MATRIX if c.label in QUICK_LABELS)


@dataclass
class Outcome:
    """One case's trial and its comparison rows (or the error that stopped it)."""

    case: Case
    rows: list[Row] = field(default_factory=list)
    error: str | None = None
    wall_s: float = 0.0
    steps_used: int = 0


def run_matrix(cases=MATRIX, profile=None, steps: int = 8,
               on_outcome: Callable[[Outcome], None] | None = None) -> Iterator[Outcome]:
    """Run every case as a trial and compare it (``profile`` adds step time). Yields each
    case's outcome as it finishes; a failed trial is an outcome with ``error``."""
    from workbench.errors import ScenarioError
    from workbench.proof.compare import steady_step_time
    from workbench.trial import run_trial

    for case in cases:
        out = Outcome(case)
        try:
            result = run_trial(case.scenario(), steps=steps)
            out.wall_s = result.wall_s
            if result.error is not None:
                out.error = result.error
            else:
                out.rows = compare(result, profile)
                out.steps_used = steady_step_time(result)[1]
        except (ScenarioError, ValueError) as exc:
            out.error = str(exc)
        if on_outcome is not None:
            on_outcome(out)
        yield out

"""The ``workbench trial`` command line that runs the scenario's layout locally (contract 3):
``workbench trial SCENARIO [--set KEY=VALUE ...] [--steps K] [--backend auto|gloo|nccl]``,
as :func:`workbench.cli.parser.build_parser` defines it."""
from __future__ import annotations

from workbench.export.common import Source, shell_word
from workbench.scenario.types import Scenario

DEFAULT_STEPS = 3


def trial_args(s: Scenario, source: Source = Source(), *, steps: int = DEFAULT_STEPS) -> list[str]:
    """``workbench trial`` with the scenario file, its overrides and the step count. The world
    size is left to the layout's (dp*tp*pp*cp), the backend to auto (NCCL with a GPU per rank,
    else gloo)."""
    return ["workbench", "trial", *source.args(), "--steps", str(steps)]


def to_trial(s: Scenario, source: Source = Source()) -> str:
    """The command as one shell line."""
    return " ".join(shell_word(a) for a in trial_args(s, source)) + "\n"

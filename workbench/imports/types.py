"""What a config reader returns: one user's file read into part of a scenario document.

``workbench import`` (design.md, contract 1 additions of 2026-12-07) reads the configs people
already have — an Accelerate YAML with ``TrainingArguments`` / ``SFTConfig``, a DeepSpeed JSON, a
torchtitan TOML, Megatron-LM arguments, a torchtune recipe, a torchrun/Slurm script of ours, a
Hugging Face ``config.json`` — into one scenario. Each format has one reader module in this
package; each reader turns one file into a :class:`Reading`, and the package merges the readings
of all the files given, fills what none of them said, and validates the result like any scenario.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from workbench.errors import Problem


@dataclass
class Reading:
    """What one reader made of one file.

    ``document`` holds contract-1 keys only (nested dicts, e.g. ``{"parallel": {"tp": 2}}``), the
    values the file states or that its library derives from what it states. ``defaulted`` maps
    each dotted scenario path the reader filled from the *library's* own default (not the
    workbench's) to a short reason naming the library and its default, e.g.
    ``{"training.micro_batch": "TrainingArguments.per_device_train_batch_size defaults to 8"}``;
    those values are in ``document`` too. ``problems`` has one entry per unknown or
    contradictory key: ``Problem(path="FILE:key", value=given, message=what was expected)``.
    ``notes`` says what the reader resolved or assumed (``"auto"`` values, derived degrees).
    """

    source: str                                   # the file name as the user gave it
    format: str                                   # a key of workbench.imports.FORMATS
    document: dict = field(default_factory=dict)
    defaulted: dict[str, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class Reader(Protocol):
    """A format's reader module exposes these two functions."""

    def looks_like(self, name: str, text: str) -> bool:
        """Whether ``text`` (the file ``name``) is this format; cheap, no full parse needed."""

    def read(self, name: str, text: str) -> Reading:
        """The file read into a :class:`Reading`. Text the format cannot parse raises
        ``workbench.documents.text.DocumentError`` naming the file; a key it does not know is
        a problem in the reading, never silently dropped."""

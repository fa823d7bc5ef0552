"""Range-checked argparse types for the command line's numeric options.

argparse turns an ``ArgumentTypeError`` into ``workbench VERB: error: argument --OPT: MESSAGE``
with exit status 2, so every option names itself and its allowed range in one line, before any
work starts: a port outside 0..65535, ``--steps 1e23`` or ``--interval inf`` never reach a
socket, a trial or a sleep.
"""
from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from workbench.errors import shown


def integer(lo: int, hi: int, why: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number in ``lo..hi`` (``why``: the reason for the bound)."""
    def parse(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:     # also a string of more than 4300 digits (Python's own limit)
            value = None
        if value is None or not lo <= value <= hi or not text.strip().lstrip("+-").isascii():
            raise argparse.ArgumentTypeError(
                f"expected a whole number {lo:,}..{hi:,}{why} (got {shown(text)})")
        return value
    parse.__name__ = "integer"     # argparse names the type in some of its own messages
    return parse


def number(lo: float, hi: float, *, above: bool = False, why: str = "") -> Callable[[str], float]:
    """An argparse type: a finite number in ``lo..hi`` (``above``: strictly greater than lo)."""
    low = f"more than {lo:g}" if above else f"{lo:g}"

    def parse(text: str) -> float:
        try:
            value = float(text) if text.strip().isascii() else math.nan
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and (value > lo if above else value >= lo) and value <= hi):
            raise argparse.ArgumentTypeError(
                f"expected a number from {low} to {hi:g}{why} (got {shown(text)})")
        return value
    parse.__name__ = "number"
    return parse


PORT = integer(0, 65535, " (a TCP port; 0 takes a free one)")

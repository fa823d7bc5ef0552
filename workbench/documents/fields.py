"""Typed fields read out of a document's tables, every problem collected as one line.

A reader (the scenario's sections, the hardware's tables, a config importer) asks a
:class:`Fields` for each value it needs: a table of known keys, a whole number in a range, a
finite number, a boolean, one of a list of choices. A wrong value is recorded as a
:class:`~workbench.errors.Problem` naming the field path, the value and what is allowed, and the
reader gets ``None`` for it, so one pass reports every problem of a document at once.
"""
from __future__ import annotations

import math
import re
import sys
from typing import Any

from workbench.errors import Problem
from workbench.units import HOUR, parse_count, parse_duration

MISSING = object()      # a required field's default: its absence is a problem
_ASCII_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", re.ASCII)
# The smallest normal float (IEEE 754 binary64, 2**-1022; Python's sys.float_info.min): a
# non-zero number below it is subnormal and loses precision, and one operation more (a product
# with another small factor, a division of its reciprocal) rounds it to 0 or overflows to inf.
# No quantity a document states is that small, so such a number is refused where it is read.
SMALLEST_NORMAL = sys.float_info.min


class Fields:
    """Collects problems while reading one document."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.assumptions: list[str] = []    # defaults worth saying, for the estimate

    def add(self, path: str, value: Any, message: str) -> None:
        """Record one problem: the field ``path``, the ``value`` given, what is allowed."""
        self.problems.append(Problem(path, value, message))

    # -- containers ------------------------------------------------------------------------
    def table(self, value: Any, path: str, allowed: tuple[str, ...]) -> dict:
        """A mapping whose keys must all be in ``allowed``; returns {} after reporting when not."""
        if value is MISSING or value is None:
            return {}
        if not isinstance(value, dict):
            self.add(path, value, "must be a table (mapping) of fields")
            return {}
        for key in value:
            if key not in allowed:
                self.add(f"{path}.{key}" if path else str(key), value[key],
                         f"unknown key; allowed keys: {', '.join(allowed)}")
        return value

    # -- scalars ---------------------------------------------------------------------------
    def integer(self, d: dict, key: str, path: str, default: Any = MISSING, lo: int = 1,
                hi: int | None = None) -> int | None:
        """``d[key]`` as a whole number in ``lo..hi`` (a float with no fraction counts)."""
        value = d.get(key, default)
        where = f"{path}.{key}"
        if value is MISSING:
            self.add(where, None, "is required")
            return None
        if value is None and default is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                isinstance(value, float) and (not math.isfinite(value) or value != int(value))):
            self.add(where, value, "must be a whole number")
            return None
        value = int(value)
        if value < lo or (hi is not None and value > hi):
            rng = f"between {lo} and {hi}" if hi is not None else f">= {lo}"
            self.add(where, value, f"must be {rng}")
            return None
        return value

    def number(self, d: dict, key: str, path: str, default: Any = MISSING, lo: float = 0.0,
               positive: bool = True, count: bool = False) -> float | None:
        """``d[key]`` as a finite number: > 0 (``positive``) or >= ``lo``, and never subnormal
        (``SMALLEST_NORMAL``). ``count``: a count, which may also be written as people write
        one ("100M", "1.5B", "2T": ``units.parse_count``)."""
        value = d.get(key, default)
        where = f"{path}.{key}"
        if value is MISSING:
            self.add(where, None, "is required")
            return None
        # YAML 1.1 reads "1e12" (no dot) as text: such text is a number, written in ASCII
        # digits only ("８０" and "inf" are not)
        if isinstance(value, str) and _ASCII_NUMBER.fullmatch(value.strip()):
            value = float(value)
        elif count and isinstance(value, str):
            parsed = parse_count(value)
            if parsed is None:
                self.add(where, value, "must be a number: 100M, 1.5B, 2T (M = million, B = "
                                       "billion, T = trillion) or 1e12")
                return None
            value = parsed
        try:
            finite = not isinstance(value, bool) and isinstance(value, (int, float)) and \
                math.isfinite(value)
        except OverflowError:          # an integer too large for a float
            finite = False
        if not finite:
            self.add(where, value, "must be a finite number")
            return None
        value = float(value)
        if value < lo or (positive and value <= 0):
            self.add(where, value, f"must be {'> 0' if positive else f'>= {lo}'}")
            return None
        if 0 < abs(value) < SMALLEST_NORMAL:
            self.add(where, value, f"is too small to compute with (a subnormal float, below "
                                   f"{SMALLEST_NORMAL:.3g}, the smallest normal one)")
            return None
        return value

    def duration(self, d: dict, key: str, path: str) -> float | None:
        """``d[key]`` as a duration in hours, or None where it is absent or empty: a number of
        hours, or text as people write a duration ("24h", "2 days", "90 min":
        ``units.parse_duration``)."""
        value = d.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        seconds = None
        if isinstance(value, str):
            seconds = parse_duration(value)
        elif not isinstance(value, bool) and isinstance(value, (int, float)):
            seconds = float(value) * HOUR
        if seconds is None or not math.isfinite(seconds) or seconds <= 0:
            self.add(f"{path}.{key}", value, "must be a time: hours (24), or 24h, 2 days, "
                                             "90 min, 1.5 weeks")
            return None
        return seconds / HOUR

    def boolean(self, d: dict, key: str, path: str, default: bool) -> bool | None:
        """``d[key]`` as true or false (no 0/1, no text)."""
        value = d.get(key, default)
        if not isinstance(value, bool):
            self.add(f"{path}.{key}", value, "must be true or false")
            return None
        return value

    def choice(self, d: dict, key: str, path: str, allowed: tuple, default: Any) -> Any:
        """``d[key]`` as one of ``allowed`` (text compared in lower case)."""
        value = d.get(key, default)
        norm = value.strip().lower() if isinstance(value, str) else value
        # ``True == 1`` and ``3.0 == 3`` in Python: a choice among numbers takes integers only
        wrong_type = (isinstance(norm, (bool, float))
                      and not any(isinstance(a, type(norm)) for a in allowed))
        try:
            known = norm in allowed
        except TypeError:              # an unhashable value (a list or table) is no choice
            known = False
        if wrong_type or not known:
            self.add(f"{path}.{key}", value, f"must be one of {', '.join(map(str, allowed))}")
            return None
        return norm

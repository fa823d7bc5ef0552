"""The one error type every invalid scenario raises."""
from __future__ import annotations

import re
import reprlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a scenario: where, what was given, and what is allowed."""

    path: str       # dotted field path, e.g. "parallel.tp"
    value: object   # the offending value (or None when a field is missing)
    message: str    # what is allowed / why it is wrong

    def __str__(self) -> str:
        path = printable(self.path)    # a document's own key names are part of the path
        if self.value is None:   # a missing field: nothing was given to show
            return f"{path}: {self.message}"
        return f"{path}: {self.message} (got {shown(self.value)})"


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str, limit: int = 120) -> str:
    """``text`` with control characters escaped (``\x1b`` for ESC: nothing a terminal acts
    on) and cut to ``limit`` characters."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))
    return text if len(text) <= limit else text[:limit - 3] + "..."


def shown(value: object, limit: int = 80) -> str:
    """A value as a message quotes it: its repr (control characters escaped), cut to ``limit``
    characters so a huge or self-repeating value never fills a terminal or a page. Containers
    are walked only as far as the limit needs."""
    r = reprlib.Repr()
    r.maxlevel, r.maxdict, r.maxlist, r.maxstring, r.maxother = 3, 6, 6, limit, limit
    text = r.repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class ScenarioError(ValueError):
    """Raised with *every* problem found in a scenario, not only the first."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("; ".join(str(p) for p in self.problems))

    def one_line(self) -> str:
        """A single line for the command line: the first problem, and how many more."""
        first = str(self.problems[0])
        more = len(self.problems) - 1
        return first + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")

"""The one error type every invalid scenario raises."""
from __future__ import annotations

import reprlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a scenario: where, what was given, and what is allowed."""

    path: str       # dotted field path, e.g. "parallel.tp"
    value: object   # the offending value (or None when a field is missing)
    message: str    # what is allowed / why it is wrong

    def __str__(self) -> str:
        if self.value is None:   # a missing field: nothing was given to show
            return f"{self.path}: {self.message}"
        return f"{self.path}: {self.message} (got {shown(self.value)})"


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

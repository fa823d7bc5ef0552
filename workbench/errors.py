"""The one error type every invalid scenario raises."""
from __future__ import annotations

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
        return f"{self.path}: {self.message} (got {self.value!r})"


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

"""The scenario being edited: its document, the last valid scenario and estimate, the current
problems, and the views to tell when they change.

Panels write fields into the document (``set``); every change validates the whole document with
the backend and, when valid, estimates it; views subscribe with ``on_change``. An invalid edit
keeps the last valid scenario and estimate, so the charts keep the last valid state while the
panels show the validator's messages next to the fields.
"""
from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from workbench.errors import Problem, ScenarioError
from workbench.estimate import Estimate, estimate
from workbench.scenario import parse_scenario
from workbench.scenario.types import Scenario

Listener = Callable[["ScenarioState"], None]


def get_path(doc: dict, path: str, default: Any = None) -> Any:
    """``doc["a"]["b"]`` for ``"a.b"`` (a string section such as ``model: llama3-8b`` reads as
    its preset)."""
    cur: Any = doc
    for part in path.split("."):
        if isinstance(cur, str) and part == "preset":
            return cur
        if not isinstance(cur, dict) or part not in cur:
            return default
        cur = cur[part]
    return cur


def set_path(doc: dict, path: str, value: Any) -> None:
    """Set ``"a.b"`` in ``doc``, creating tables; ``None`` removes the field."""
    parts = path.split(".")
    cur = doc
    for part in parts[:-1]:
        nxt = cur.get(part)
        if isinstance(nxt, str):          # "model: llama3-8b" shorthand
            nxt = {"preset": nxt}
        if not isinstance(nxt, dict):
            nxt = {}
        cur[part] = nxt
        cur = nxt
    if value is None:
        cur.pop(parts[-1], None)
    else:
        cur[parts[-1]] = value


class ScenarioState:
    """One editable scenario shared by every panel and chart of an app."""

    def __init__(self, doc: dict) -> None:
        self.doc: dict = copy.deepcopy(doc)
        self.scenario: Scenario | None = None
        self.estimate: Estimate | None = None
        self.problems: list[Problem] = []
        # each field path's label on the page ("GPUs per node"): messages use them
        self.labels: dict[str, str] = {}
        self._listeners: list[Listener] = []
        self._batch = 0
        self._apply()

    # -- editing ---------------------------------------------------------------------------
    def set(self, path: str, value: Any) -> None:
        """Change one field and re-validate."""
        set_path(self.doc, path, value)
        self._apply()

    def update(self, changes: dict[str, Any]) -> None:
        """Change several fields at once (one validation, one redraw)."""
        for path, value in changes.items():
            set_path(self.doc, path, value)
        self._apply()

    def load(self, doc: dict) -> None:
        """Replace the whole document (an example, an uploaded file, a planner row)."""
        self.doc = copy.deepcopy(doc)
        self._apply()

    def on_change(self, listener: Listener) -> None:
        self._listeners.append(listener)

    # -- validation ------------------------------------------------------------------------
    def messages(self, prefix: str) -> list[str]:
        """The current problems whose field path starts with ``prefix``."""
        return [str(p) for p in self.problems if p.path == prefix
                or p.path.startswith(prefix + ".") or p.path.startswith(prefix + "[")]

    @property
    def valid(self) -> bool:
        return not self.problems

    def _apply(self) -> None:
        try:
            # a page names a calibration profile by name, never a path on this machine
            scenario = parse_scenario(self.doc, calibration_names_only=True)
            est = estimate(scenario)
        except ScenarioError as exc:
            self.problems = exc.problems
        except Exception as exc:   # a bug must not leave a traceback on a non-coder's page
            self.problems = [Problem("scenario", None,
                                     f"internal error ({type(exc).__name__}): {exc}")]
        else:
            self.problems = []
            self.scenario, self.estimate = scenario, est
        for listener in list(self._listeners):
            listener(self)

"""An editable scenario (YAML) with its memory estimate, updated on every valid edit."""
from __future__ import annotations

import html
from pathlib import Path

import ipywidgets as w

from widgets.memory_table import memory_table_html
from workbench.errors import Problem, ScenarioError
from workbench.estimate import Estimate, estimate
from workbench.spec import dump_scenario, parse_scenario
from workbench.spec.scenario import Scenario

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


class ScenarioEditor:
    """Pick an example or edit the YAML; invalid input shows the validator's message and the
    table keeps the last valid estimate."""

    def __init__(self, examples_dir: Path = EXAMPLES) -> None:
        self.examples = {p.stem: p for p in sorted(examples_dir.glob("*.yaml"))}
        self.picker = w.Dropdown(options=list(self.examples), description="Example",
                                 layout=w.Layout(width="420px"))
        self.text = w.Textarea(layout=w.Layout(width="100%", height="420px"),
                               continuous_update=False)
        self.message = w.HTML()
        self.table = w.HTML()
        self.scenario: Scenario | None = None
        self.estimate: Estimate | None = None
        self.error: str | None = None
        self.picker.observe(self._on_pick, names="value")
        self.text.observe(self._on_text, names="value")
        self.widget = w.VBox([self.picker, w.HBox([
            w.VBox([w.HTML("<b>Scenario</b> (YAML)"), self.text, self.message],
                   layout=w.Layout(width="50%")),
            w.VBox([w.HTML("<b>Memory per GPU</b>"), self.table], layout=w.Layout(width="50%")),
        ])])
        if self.examples:
            self._on_pick({"new": self.picker.value})

    def _on_pick(self, change: dict) -> None:
        self.text.value = self.examples[change["new"]].read_text(encoding="utf-8")

    def _on_text(self, change: dict) -> None:
        self.set_yaml(change["new"])

    def set_yaml(self, text: str) -> None:
        """Validate ``text`` and re-estimate; on error keep the last valid table."""
        import yaml

        self.error = None
        try:
            try:
                doc = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                line = f" at line {mark.line + 1}" if mark is not None else ""
                raise ScenarioError([Problem("scenario", None, f"is not valid YAML{line}")])
            scenario = parse_scenario(doc)
            est = estimate(scenario)
        except ScenarioError as exc:
            self.error = "\n".join(str(p) for p in exc.problems)
        except Exception as exc:  # a bug must not leave a traceback on a non-coder's page
            self.error = f"internal error ({type(exc).__name__}): {exc}"
        if self.error is not None:
            items = "".join(f"<li>{html.escape(line)}</li>" for line in self.error.splitlines())
            self.message.value = f"<ul class='wb-error' style='color:#cf222e'>{items}</ul>"
            return
        self.scenario, self.estimate, self.error = scenario, est, None
        self.message.value = "<span class='wb-ok' style='color:#1a7f37'>valid</span>"
        self.table.value = memory_table_html(est)

    def yaml(self) -> str:
        """The current valid scenario, every field filled in."""
        return dump_scenario(self.scenario) if self.scenario else ""

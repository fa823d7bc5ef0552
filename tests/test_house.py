"""The house (issue #42): a scenario is read without knowing calibration, documents are read by
one low-level reader, the hardware is resolved in one place, scenario/ has no module over 450
lines, and every rules module registers with the one rule table."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "workbench"


def _imports(path: Path) -> set[str]:
    """The workbench modules ``path`` imports (at any depth of the file)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m.startswith("workbench")}


@pytest.mark.parametrize("folder, forbidden", [
    ("scenario", ("workbench.calibrate",)),
    ("hardware", ("workbench.calibrate", "workbench.scenario")),
    ("documents", ("workbench.calibrate", "workbench.scenario", "workbench.hardware")),
])
def test_lower_floors_do_not_import_upper_ones(folder, forbidden):
    for path in sorted((PACKAGE / folder).rglob("*.py")):
        wrong = {m for m in _imports(path) if m.startswith(forbidden)}
        assert not wrong, f"{path.relative_to(ROOT)} imports {sorted(wrong)}"


def test_no_scenario_module_is_over_450_lines():
    sizes = {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines())
             for p in (PACKAGE / "scenario").rglob("*.py")}
    assert max(sizes.values()) <= 450, sorted(sizes.items(), key=lambda kv: -kv[1])[:3]


def test_every_rules_module_registers_with_the_one_table():
    """A rules module (one per seam) is imported by ``scenario/rules/__init__.py`` and its
    rules are in ``RULES``, once each."""
    from workbench.scenario.rules import RULES

    init = ast.parse((PACKAGE / "scenario" / "rules" / "__init__.py").read_text())
    registered = {a.name for node in init.body if isinstance(node, ast.ImportFrom)
                  and node.module == "workbench.scenario.rules" for a in node.names}
    owners = {r.check.__module__ for r in RULES}
    for path in sorted((PACKAGE / "scenario" / "rules").glob("*.py")):
        if path.stem in ("__init__", "table", "trial"):
            continue
        module = f"workbench.scenario.rules.{path.stem}"
        assert path.stem in registered, f"{module} is not imported by scenario/rules/__init__.py"
        importlib.import_module(module)
        assert module in owners or any(
            c.ok.__module__ == module for r in RULES for c in r.conditions), module
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))

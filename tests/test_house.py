"""The house (issues #42, #51): a scenario is read without knowing calibration, documents are read
by one low-level reader, the hardware is resolved in one place, scenario/ has no module over 450
lines, every rules module registers with the one rule table; the estimator's rooms stand on
the floors its index names, the index names every module and the test that holds it, and no
module imports another's private helper."""
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


ABOVE_THE_ESTIMATE = ("workbench.trial", "workbench.plan", "workbench.proof", "workbench.export",
                      "workbench.imports", "workbench.monitor", "workbench.calibrate",
                      "workbench.bench", "workbench.cli", "widgets")
# the estimator's top: its rooms never import it
TOP = ("workbench.estimate.single", "workbench.estimate.result", *ABOVE_THE_ESTIMATE)


@pytest.mark.parametrize("folder, forbidden", [
    ("scenario", ("workbench.calibrate", "workbench.estimate", "workbench.trial")),
    ("hardware", ("workbench.calibrate", "workbench.scenario")),
    ("documents", ("workbench.calibrate", "workbench.scenario", "workbench.hardware")),
    ("catalog", ("workbench.estimate", "workbench.scenario", "workbench.hardware")),
    # the estimator's rooms, lowest first (workbench/estimate/__init__.py)
    ("estimate/model", ("workbench.estimate.memory", "workbench.estimate.time",
                        "workbench.estimate.run", "workbench.estimate.cost_model", *TOP)),
    ("estimate/memory", ("workbench.estimate.time", "workbench.estimate.run",
                         "workbench.estimate.cost_model", *TOP)),
    ("estimate/time", ("workbench.estimate.run", "workbench.estimate.cost_model", *TOP)),
    ("estimate/run", ("workbench.estimate.cost_model", *TOP)),
    ("estimate/cost_model", ("workbench.estimate.run", *TOP)),
    ("estimate", ABOVE_THE_ESTIMATE),
    # the command line is the top: the verbs' own argument builders use cli_options only
    *((f, ("workbench.cli.",)) for f in (
        "proof", "bench", "calibrate", "plan", "export", "imports", "trial", "monitor")),
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


def test_the_estimators_index_names_every_module_and_an_existing_test():
    """The index (workbench/estimate/__init__.py) says where each cost lives: every module of
    the package is named there, and every test it cites exists."""
    import re

    import workbench.estimate as est

    index = est.__doc__
    for path in sorted((PACKAGE / "estimate").rglob("*.py")):
        if path.stem != "__init__":
            assert f"``{path.stem}``" in index, f"{path.relative_to(ROOT)} is not in the index"
    for test in set(re.findall(r"test_\w+\.py", index)):
        assert (ROOT / "tests" / test).exists(), test


def test_no_module_imports_another_modules_private_helper():
    """A room's public names are what the other rooms use: no ``from X import _name`` and no
    ``module._name`` across modules of workbench/ and widgets/."""
    wrong = []
    for path in sorted([*PACKAGE.rglob("*.py"), *(ROOT / "widgets").rglob("*.py")]):
        tree = ast.parse(path.read_text())
        modules = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    ("workbench", "widgets")):
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        wrong.append(f"{path.relative_to(ROOT)}: {node.module}.{a.name}")
                    modules.add(a.asname or a.name)
            elif isinstance(node, ast.Import):
                modules.update(a.asname or a.name.split(".")[0] for a in node.names
                               if a.name.startswith(("workbench", "widgets")))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in modules and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                wrong.append(f"{path.relative_to(ROOT)}: {node.value.id}.{node.attr}")
    assert not wrong, wrong

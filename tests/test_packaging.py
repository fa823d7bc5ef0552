"""The project installs from its own files and keeps its set-up promises."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import pytest
import yaml

from tests.conftest import ROOT


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_environment_yml_mirrors_pyproject():
    proj = _pyproject()["project"]
    wanted = proj["dependencies"] + proj["optional-dependencies"]["test"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert [p for p in pip if p != "-e ."] == wanted
    assert "-e ." in pip
    py = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    major_minor = tuple(int(x) for x in py.split("=")[1].split(".")[:2])
    assert major_minor >= (3, 10)


def test_torch_requirement_is_a_range():
    deps = _pyproject()["project"]["dependencies"]
    torch = next(d for d in deps if d.startswith("torch"))
    assert "==" not in torch and ">=" in torch and "<" in torch


def test_readme_holds_exactly_the_two_setup_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"^\./dev\.sh (\w+)", readme, flags=re.M)
    assert commands[:2] == ["dashboard", "test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./dev.sh test" in ci


def test_importing_workbench_does_not_import_torch_or_plotting():
    code = ("import sys, workbench, workbench.scenario, workbench.estimate, workbench.cli; "
            "bad = [m for m in ('torch', 'plotly', 'ipywidgets', 'pandas') if m in sys.modules]; "
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# What the planning verbs must never load: the trial runner and its torch, pandas, the
# calibration, the report, the collective benchmark, the monitor and the widgets.
HEAVY = ("torch", "pandas", "plotly", "ipywidgets", "widgets", "workbench.trial",
         "workbench.proof", "workbench.calibrate", "workbench.bench", "workbench.monitor")


@pytest.mark.parametrize("argv", [
    ["estimate", "examples/llama3-405b-h200-cluster.yaml"],
    ["plan", "examples/llama3-8b-8xh100.yaml", "--top", "3"],
    ["plan", "examples/mixtral-8x7b-ep.yaml", "--engines", "all", "--top", "2", "--json"],
    ["export", "examples/llama3-8b-8xh100.yaml", "--to", "torchtitan"],
])
def test_planning_verbs_import_what_they_need_and_no_more(argv):
    code = ("import sys, io, contextlib; from workbench.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    rc = main({argv!r})\n"
            f"loaded = [m for m in {HEAVY!r} if m in sys.modules]\n"
            "print(rc, loaded)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip() == "0 []", out.stdout + out.stderr


def test_rfc3987_syntax_is_not_installed():
    """Its parsers cost every kernel 5-20 s at import (docs/platform.md)."""
    import importlib.util

    assert importlib.util.find_spec("rfc3987_syntax") is None


def test_console_script_and_module_entry_point_agree(tmp_path):
    exe = ROOT / ".venv" / "bin" / "workbench"
    example = str(ROOT / "examples" / "llama3-8b-8xh100.yaml")
    a = subprocess.run([sys.executable, "-m", "workbench", "estimate", example, "--json"],
                       capture_output=True, text=True, check=True).stdout
    if exe.exists():
        b = subprocess.run([str(exe), "estimate", example, "--json"], capture_output=True,
                           text=True, check=True).stdout
        assert a == b
    assert '"per_gpu"' in a

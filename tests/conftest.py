"""Shared helpers for the test suite."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
# Other projects' own example configs (Accelerate, TRL, torchtitan, Megatron-LM, torchtune; their
# SOURCES.md names repository, path and commit) are kept in the team's shared folder beside the
# project, never in it: the tests that read them skip where that folder is absent.
IMPORTS = ROOT.parent / "shared" / "data" / "imports"


def upstream(name: str | None = None) -> Path:
    """The folder of other projects' example configs, or the file ``name`` in it; skips the
    test where the shared folder is absent."""
    if not IMPORTS.is_dir():
        pytest.skip(f"the other projects' example configs are read from {IMPORTS}, absent here")
    return IMPORTS / name if name else IMPORTS

BASE = {
    "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
    "model": {"preset": "llama3-8b"},
    "parallel": {"dp": 8},
    "training": {"seq_len": 4096, "micro_batch": 1, "global_batch": 64},
}


def scenario_doc(**sections) -> dict:
    """A valid base document with sections updated (dict merge one level deep)."""
    doc = copy.deepcopy(BASE)
    for name, fields in sections.items():
        if isinstance(fields, dict) and isinstance(doc.get(name), dict):
            doc[name].update(fields)
        else:
            doc[name] = fields
    return doc


@pytest.fixture
def doc():
    return copy.deepcopy(BASE)


@pytest.fixture
def calibration_folder(tmp_path, monkeypatch) -> Path:
    """The test's tmp_path as a calibration folder (beside the project's calibrations/):
    scenarios read profiles from the calibration folders only (workbench/hardware/locate.py)."""
    import os

    from workbench.hardware.locate import ENV, PROJECT_FOLDER

    monkeypatch.setenv(ENV, os.pathsep.join([str(tmp_path), str(PROJECT_FOLDER)]))
    return tmp_path


@dataclass(frozen=True)
class Calibration:
    """One run of ``workbench calibrate --quick`` at its default world sizes (2, 4, 8)."""
    path: Path
    stdout: str
    left_alive: list           # processes the command left running (must be none)


@pytest.fixture(scope="session")
def quick_calibration(tmp_path_factory) -> Calibration:
    """This machine measured once for the session, by the command a person runs: the
    calibration tests check what it wrote and the proof runs its trials against it (each
    measuring its own took 25-40 s of the suite on a loaded 2-core machine)."""
    import subprocess
    import sys

    import psutil

    path = tmp_path_factory.mktemp("calibration") / "here.json"
    run = subprocess.run([sys.executable, "-m", "workbench", "calibrate", "--quick", "--out",
                          str(path)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"workbench calibrate --quick failed:\n{run.stderr}"
    alive = [c for c in psutil.Process().children(recursive=True)
             if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    return Calibration(path, run.stdout, alive)


@pytest.fixture(autouse=True, scope="session")
def _private_trial_queue(tmp_path_factory):
    """The suite's trials (CLI and dashboard) queue among themselves, not behind a trial a
    person runs on this machine meanwhile (workbench/trial/slots.py)."""
    import os

    folder = tmp_path_factory.mktemp("trial-slots")
    folder.chmod(0o700)
    os.environ.setdefault("WORKBENCH_TRIAL_SLOTS_DIR", str(folder))
    yield

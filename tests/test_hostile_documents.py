"""Hostile scenario documents end in one clear line naming what is wrong — never a traceback,
a hang or a runaway: alias bombs, deep nesting, duplicate keys, FIFOs, devices, directories,
huge or binary files, dates, 5000-digit integers, full-width digits, null sections."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from workbench.errors import Problem, ScenarioError
from workbench.scenario import load_scenario, parse_scenario
from workbench.documents.text import MAX_BYTES, load_text

BOMB = ('a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
        + "".join(f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n"
                  for p, n in zip("abcdefgh", "bcdefghi"))
        + "hardware: *i\n")
EXAMPLE = ROOT / "examples" / "llama3-8b-8xh100.yaml"


def _message(path, overrides=None) -> str:
    with pytest.raises(ScenarioError) as err:
        load_scenario(path, overrides or [])
    line = err.value.one_line()
    assert "\n" not in line and len(line) < 400
    return line


@pytest.mark.parametrize("name, text, expected", [
    ("bomb.yaml", BOMB, "more than 100000 values once its YAML aliases are expanded"),
    ("deep.yaml", "a: " + "[" * 600 + "]" * 600 + "\n", "nested deeper than 32 levels"),
    ("deep.json", "{\"a\": " + "[" * 600 + "]" * 600 + "}", "nested deeper than 32 levels"),
    ("dup.yaml", "hardware: {gpu: h100-sxm}\nhardware: {gpu: b200}\n",
     "key 'hardware' is given twice in one table (line 2)"),
    ("dup.json", '{"model": {"preset": "llama3-8b"}, "model": {}}',
     "key 'model' is given twice in one table"),
    ("huge.yaml", "# " + "x" * (MAX_BYTES + 10) + "\n", "is larger than 1,000,000 bytes"),
    ("binary.yaml", None, "is not UTF-8 text"),
    ("bigint.yaml", "hardware: {gpu: h100-sxm, nodes: " + "9" * 5000 + "}\n",
     "a number of 5000 digits (at most 40)"),
    ("python.yaml", "hardware: !!python/object/apply:os.system ['touch INJ']\n",
     "is not valid YAML at line 1"),
])
def test_hostile_files_are_refused_in_one_line(tmp_path, name, text, expected):
    path = tmp_path / name
    if text is None:
        path.write_bytes(b"\xff\xfe\x00binary\x80" * 10)
    else:
        path.write_text(text)
    assert expected in _message(path)
    assert not (tmp_path / "INJ").exists()


def test_fifos_devices_and_directories_are_not_read(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for path in (fifo, "/dev/zero", tmp_path):
        assert "is not a regular file" in _message(path)


@pytest.mark.parametrize("override, expected", [
    # a count field says how a count may be written
    ("training.tokens=2024-01-01", "training.tokens: must be a number: 100M, 1.5B, 2T "
                                   "(M = million, B = billion, T = trillion) or 1e12 "
                                   "(got '2024-01-01')"),
    ("training.tokens=８０", "training.tokens: must be a number: 100M, 1.5B, 2T (M = million, "
                            "B = billion, T = trillion) or 1e12 (got '８０')"),
    ("parallel.tp=" + "9" * 5000, "--set parallel.tp: a number of 5000 digits (at most 40)"),
    ("hardware=null", "hardware: is required"),
    ("model=null", "model: is required"),
    ("training.tokens=" + "[" * 100 + "]" * 100, "--set training.tokens: nested deeper than"),
])
def test_hostile_overrides_are_refused_in_one_line(override, expected):
    assert expected in _message(EXAMPLE, [override])


def test_numbers_written_as_ascii_text_still_read():
    s = load_scenario(EXAMPLE, ["training.tokens=1e12"])
    assert s.training.tokens == 1e12


def test_a_value_in_a_message_is_short_and_escaped():
    line = str(Problem("model.name", "x" * 5000 + "\n\x1b[31m", "bad"))
    assert len(line) < 120 and "\n" not in line and "\x1b" not in line
    with pytest.raises(ScenarioError, match="aliases are expanded"):
        load_text(BOMB.replace("hardware: *i", "model: {name: *i}"))


def test_the_command_line_exits_2_with_one_line(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    r = subprocess.run([sys.executable, "-m", "workbench", "estimate", str(bomb)],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr
    with pytest.raises(ScenarioError):
        parse_scenario({"hardware": None, "model": {"preset": "llama3-8b"}})


def test_calibration_profiles_come_from_the_calibration_folders_only(tmp_path, monkeypatch):
    """``hardware.gpu: calibration:X`` opens nothing outside the calibration folders (no
    /dev/zero, no FIFO, no other file: the message is the same whether it exists or not), and
    inside them only regular files whose every field is in range."""
    from workbench.hardware.locate import ENV

    folder = tmp_path / "cal"
    folder.mkdir()
    monkeypatch.setenv(ENV, str(folder))
    good = json.loads((ROOT / "calibrations" / "amd-epyc-2core-2026-12-02.json").read_text())
    (folder / "zero-cores.json").write_text(json.dumps({**good, "cores": 0}))
    (folder / "slow.json").write_text(json.dumps({**good, "copy_gb_per_s": 1e-320}))
    (folder / "short.json").write_text(json.dumps(
        {**good, "gemm_seconds": {"fp32": good["gemm_seconds"]["fp32"][:-1]}}))
    (folder / "extra.json").write_text(json.dumps({**good, "secret_key_name": 1}))
    os.mkfifo(folder / "fifo.json")
    (tmp_path / "outside.json").write_text(json.dumps(good))
    outside = "is outside the calibration folders"
    cases = {
        "zero-cores": "its cores must be a whole number 1..100,000 (got 0)",
        "slow": "its copy_gb_per_s must be a number from 0.001 to 1e+06 (got 1e-320)",
        "short": "its gemm_seconds.fp32 must hold one time per grid shape: 80",
        "extra": "its secret_key_name is not a field of a calibration file",
        str(folder / "fifo.json"): "is not a regular file",
        "fifo": "no calibration named 'fifo'",     # a name lists regular files only
        "/dev/zero": outside, str(tmp_path / "outside.json"): outside,
        str(tmp_path / "missing.json"): outside, str(folder / ".." / "outside.json"): outside,
        "nope": "no calibration named 'nope'",
    }
    for spec, expected in cases.items():
        line = _message(EXAMPLE, [f"hardware.gpu=calibration:{spec}"])
        assert expected in line, line
    (folder / "good.json").write_text(json.dumps(good))
    assert load_scenario(EXAMPLE, ["hardware.gpu=calibration:good"]).hardware.gpu.profile
    # the dashboard names profiles, never paths
    with pytest.raises(ScenarioError, match="takes a calibration by its name"):
        parse_scenario({"hardware": {"gpu": f"calibration:{folder / 'good.json'}"},
                        "model": {"preset": "llama3-8b"}}, calibration_names_only=True)


@pytest.mark.parametrize("value", ["true", "3.0"])
def test_a_boolean_or_a_float_is_not_a_zero_stage(value):
    """``True == 1`` and ``3.0 == 3`` in Python; the DeepSpeed export once wrote them as given."""
    assert "parallel.zero: must be one of 0, 1, 2, 3" in _message(
        EXAMPLE, [f"parallel.zero={value}"])

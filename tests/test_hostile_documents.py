"""Hostile scenario documents end in one clear line naming what is wrong — never a traceback,
a hang or a runaway: alias bombs, deep nesting, duplicate keys, FIFOs, devices, directories,
huge or binary files, dates, 5000-digit integers, full-width digits, null sections."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from workbench.errors import Problem, ScenarioError
from workbench.scenario import load_scenario, parse_scenario
from workbench.scenario.document import MAX_BYTES, load_text

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
    ("training.tokens=2024-01-01", "training.tokens: must be a finite number (got '2024-01-01')"),
    ("training.tokens=８０", "training.tokens: must be a finite number (got '８０')"),
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


def test_calibration_paths_read_only_regular_calibration_files(tmp_path):
    """``hardware.gpu: calibration:PATH`` opens no FIFO or device, and a malformed record is
    refused without quoting the file's keys back."""
    bad = tmp_path / "cal.json"
    bad.write_text('{"cores": 0, "secret_key_name": 1}')
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    cases = {bad: "is not a calibration file written by `workbench calibrate`",
             fifo: "is not a regular file", "/dev/zero": "is not a regular file",
             tmp_path: "is not a regular file",
             tmp_path / "nope.json": "no calibration file at"}
    for path, expected in cases.items():
        line = _message(EXAMPLE, [f"hardware.gpu=calibration:{path}"])
        assert expected in line and "secret_key_name" not in line, line


@pytest.mark.parametrize("value", ["true", "3.0"])
def test_a_boolean_or_a_float_is_not_a_zero_stage(value):
    """``True == 1`` and ``3.0 == 3`` in Python; the DeepSpeed export once wrote them as given."""
    assert "parallel.zero: must be one of 0, 1, 2, 3" in _message(
        EXAMPLE, [f"parallel.zero={value}"])

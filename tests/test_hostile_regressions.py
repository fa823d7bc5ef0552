"""The four kinds of traceback issue #42's hostile fuzz found, each now one line naming the
field: subnormal and out-of-range figures in an inline GPU and a huge MoE capacity factor; a
YAML tag PyYAML cannot construct in a ``--set`` value (every verb that reads a scenario); bench
message sizes past the float range; a calibration profile's collectives table holding a list,
an empty table or a number past the float range where a fit belongs. And what the fuzz found in
``workbench import`` (tests/hostile_imports.py): ``-o`` into a folder, a full device, a FIFO
nobody reads, a symlink loop or a name too long, and an input name too long (the readers' own
finds are in tests/test_import_readers.py)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, upstream
from workbench.bench.definitions import parse_size
from workbench.bench.runner import MAX_MESSAGE_BYTES, make_config
from workbench.cli import main
from workbench.documents.text import DocumentError, load_text
from workbench.errors import ScenarioError, shown
from workbench.hardware.resolve import catalog_range
from workbench.scenario import load_scenario, parse_scenario

EXAMPLE = ROOT / "examples" / "llama3-8b-8xh100.yaml"
PROFILE = ROOT / "calibrations" / "amd-epyc-2core-2026-12-02.json"
GPU = {"memory_gb": 80, "hbm_gb_per_s": 3350, "bf16_tflops": 989, "power_w": 700}


def _refusal(doc: dict, **kw) -> str:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc, **kw)
    line = err.value.one_line()
    assert "\n" not in line
    return line


def _doc(gpu=None, model="llama3-8b", parallel=None) -> dict:
    return {"hardware": {"gpu": gpu or "h100-sxm", "gpus_per_node": 8}, "model": model,
            "parallel": parallel or {"dp": 8, "zero": 3}}


@pytest.mark.parametrize("field, value, expected", [
    ("hbm_gb_per_s", 5e-324, "hardware.gpu.hbm_gb_per_s: is too small to compute with (a "
                             "subnormal float, below 2.23e-308, the smallest normal one)"),
    ("bf16_tflops", 1e-320, "hardware.gpu.bf16_tflops: is too small to compute with"),
    ("bf16_tflops", 1e-30, "hardware.gpu.bf16_tflops: must be between 0.165 and 2.25e+06 (a "
                           "thousandth of the smallest to a thousand times the largest "
                           "bf16_tflops of the gpu catalog)"),
    ("memory_gb", 1e300, "hardware.gpu.memory_gb: must be between 0.024 and 1.92e+05"),
    ("fp8_tflops", 1e-9, "hardware.gpu.fp8_tflops: must be between 0.33 and 4.5e+06 (a "
                         "thousandth of the smallest to a thousand times the largest "
                         "fp8_tflops of the gpu catalog), or 0"),
])
def test_an_inline_gpu_figure_past_the_float_or_catalog_range_is_refused(field, value,
                                                                         expected):
    assert expected in _refusal(_doc(gpu={**GPU, field: value}))


def test_the_catalog_range_is_a_thousandth_of_the_smallest_to_1000x_the_largest():
    from workbench.catalog import GPUS

    rates = [g.bf16_tflops for g in GPUS.values()]
    assert catalog_range("gpu", "bf16_tflops") == (min(rates) / 1000, max(rates) * 1000)
    # an inline GPU with no FP8 tensor cores (0) still reads, as one inside the range does
    s = parse_scenario(_doc(gpu={**GPU, "fp8_tflops": 0}))
    assert s.hardware.gpu.fp8_tflops == 0.0 and s.hardware.gpu.bf16_tflops == 989.0


def test_a_capacity_factor_past_experts_over_top_k_is_refused():
    model = {"preset": "mixtral-8x7b", "moe": {"capacity_factor": 1e300}}
    line = _refusal(_doc(model=model, parallel={"dp": 8, "zero": 3, "ep": 8}))
    assert line == ("model.moe.capacity_factor: must be at most experts / "
                    "top_k = 8/2 = 4 (then every expert may take every token; 0: dropless) "
                    "(got 1e+300)")
    model["moe"]["capacity_factor"] = 4.0          # every token may reach every expert: fine
    s = parse_scenario(_doc(model=model, parallel={"dp": 8, "zero": 3, "ep": 8}))
    assert s.model.moe.capacity_factor == 4.0


@pytest.mark.parametrize("text, tag, value", [
    ("!!bool x", "bool", "'x'"), ("!!int ''", "int", "''"), ("!!int +", "int", "'+'"),
    ("!!float x", "float", "'x'"), ("{a: !!int 0x}", "int", "'0x'"),
])
def test_a_tag_pyyaml_cannot_construct_is_malformed_yaml(text, tag, value):
    with pytest.raises(DocumentError) as err:
        load_text(text, "doc")
    assert err.value.syntax
    assert err.value.one_line() == (f"doc: is not valid YAML at line 1: "
                                    f"!!{tag} cannot read {value}")


@pytest.mark.parametrize("verb", [["estimate"], ["plan"], ["export", "--to", "torchrun"],
                                  ["trial"], ["monitor"]])
def test_a_tagged_set_value_is_refused_by_every_verb(verb, capsys):
    """``--set 'hardware.nodes=!!bool x'``: the text stays text, as any value that is not
    YAML, and the validator names the field (trial and monitor never start)."""
    rc = main([verb[0], str(EXAMPLE), *verb[1:], "--set", "hardware.nodes=!!bool x"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert err.strip().endswith("hardware.nodes: must be a whole number (got '!!bool x')"), err


@pytest.mark.parametrize("text, expected", [
    ("9" * 400 + "G", "at most 9,223,372,036,854,775,807 bytes (2**63 - 1: a tensor's size "
                      "in PyTorch is a 64-bit integer)"),
    ("9223372036854775808", "at most 9,223,372,036,854,775,807 bytes"),
    ("1e400", "expected bytes, or a size like 64K, 1M, 256MiB (binary units)"),
])
def test_bench_sizes_past_every_range_are_refused(text, expected):
    with pytest.raises(ScenarioError) as err:
        make_config(2, max_bytes=text, _available=1e18)
    assert expected in err.value.one_line()


def test_bench_sizes_are_read_exactly():
    """A float would round 2**53 + 1 and overflow on 400 digits: the count is exact."""
    assert parse_size(str(2 ** 53 + 1)) == 2 ** 53 + 1
    assert parse_size("0.5K") == 512
    assert parse_size(str(MAX_MESSAGE_BYTES)) == 2 ** 63 - 1
    with pytest.raises(ValueError):
        parse_size("0.3K")          # 307.2 bytes


def test_the_bench_command_names_the_option(capsys):
    rc = main(["bench", "--world-size", "2", "--max-bytes", "9" * 400 + "G"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("workbench bench: --max-bytes: at most 9,223,372")


@pytest.mark.parametrize("fits, expected", [
    ({"2": [[1e-5, 2e-5], 1e-9]}, "its collectives.gloo.all_reduce.2[0] must be a number from 0 "
                                  "to 86400"),
    ({"2": [10 ** 400, 1e-9]}, "its collectives.gloo.all_reduce.2[0] must be a number from 0 "
                               "to 86400"),
    ({}, "its collectives.gloo.all_reduce must be a table of 1..64 entries"),
    ([2e-5, 1e-9], "its collectives.gloo.all_reduce must be a table of 1..64 entries"),
])
def test_a_profile_whose_collectives_hold_the_wrong_shape_is_refused(calibration_folder, fits,
                                                                     expected):
    good = json.loads(PROFILE.read_text())
    good["collectives"]["gloo"]["all_reduce"] = fits
    (calibration_folder / "odd.json").write_text(json.dumps(good))
    with pytest.raises(ScenarioError) as err:
        load_scenario(EXAMPLE, ["hardware.gpu=calibration:odd"])
    assert expected in err.value.one_line(), err.value.one_line()


@pytest.mark.parametrize("where, table", [
    (("collectives", "gloo", "all_reduce"), {"1": [1, 2]}),
    (("in_loop_s",), {"1": [[0.1, 0.1]]}),
])
def test_a_collective_fit_over_one_rank_is_refused_not_divided_by(calibration_folder, where,
                                                                   table):
    """Issue 55's held-out hostile run: a fit for world size 1 divided by its n - 1 ring steps
    (a ZeroDivisionError traceback from ``estimate``); it is refused by name instead."""
    doc = json.loads(PROFILE.read_text())
    parent = doc
    for key in where[:-1]:
        parent = parent[key]
    parent[where[-1]] = table
    (calibration_folder / "one.json").write_text(json.dumps(doc))
    with pytest.raises(ScenarioError) as err:
        load_scenario(EXAMPLE, ["hardware.gpu=calibration:one"])
    assert (f"its {'.'.join(where)} key must be a world size 2..4096 (a collective needs two "
            "ranks) (got '1')") in err.value.one_line(), err.value.one_line()


def test_the_planner_quotes_an_invalid_starting_layout_without_control_characters(tmp_path,
                                                                                  capsys):
    """``plan`` ranks layouts even when the given one is invalid; saying so, it escapes what
    the user wrote (a NUL in ``parallel.zero`` reached the terminal raw)."""
    import yaml

    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["parallel"]["zero"] = "\x00\x1b[2J"
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["plan", str(path), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "zero=\\x00\\x1b[2J) is not valid: parallel.zero: must be one of 0, 1, 2, 3" in out
    assert "\x00" not in out and "\x1b" not in out


# -- workbench import (the fuzz extended to the new readers: tests/hostile_imports.py) --------


def ds1() -> str:
    """DeepSpeed's ZeRO-1 example JSON, as Accelerate ships it (``upstream``)."""
    return str(upstream("accelerate-zero_stage1_config.json"))


def _import_lines(argv: list[str], capsys) -> list[str]:
    """``workbench import ARGV``'s stderr lines; the exit status must be 2."""
    assert main(["import", *argv]) == 2
    return capsys.readouterr().err.splitlines()


@pytest.mark.parametrize("target, reason", [
    (".", "is a folder; name a file"),
    ("", "is a folder; name a file"),
    ("/dev/full", "cannot write there: No space left on device"),
    ("fifo", "cannot write there: No such device or address"),   # open(2) ENXIO: no reader
    ("loop", "cannot write there: a symlink loop"),
    ("a\x00b", "is not a file name"),
    ("x" * 300, "cannot write there: File name too long"),
    ("missing/out.yaml", "its folder does not exist"),
])
def test_import_o_into_a_path_that_cannot_take_it_is_one_line(tmp_path, monkeypatch, capsys,
                                                               target, reason):
    monkeypatch.chdir(tmp_path)
    os.mkfifo("fifo")
    os.symlink("loop", "loop")
    assert _import_lines([ds1(), "-o", target], capsys) == [
        f"workbench: import: -o: {reason} (got {shown(target)})"]


def test_import_o_through_a_symlink_to_an_input_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    text = upstream("accelerate-zero_stage1_config.json").read_text()
    Path("ds.json").write_text(text)
    os.symlink("ds.json", "link.yaml")
    assert _import_lines(["ds.json", "-o", "link.yaml"], capsys) == [
        "workbench: import: -o: is one of the files imported; write the scenario elsewhere "
        "(got 'link.yaml')"]
    assert Path("ds.json").read_text() == text


def test_import_o_into_a_fifo_that_is_read_writes_it_all(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)    # a reader is there first
    try:
        assert main(["import", ds1(), "-o", str(fifo)]) == 0
        text = os.read(reader, 1 << 20).decode()            # a pipe holds 64 KiB: all of it
    finally:
        os.close(reader)
    assert yaml.safe_load(text)["parallel"]["zero"] == 1


def test_import_an_input_name_too_long_is_one_line(capsys):
    name = "x" * 300
    assert _import_lines([name], capsys) == [
        f"workbench: import: import: cannot read file: File name too long (got {shown(name)})"]

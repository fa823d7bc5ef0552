"""The project documents itself: the generated references are current, every JSON key that
docs/json.md lists is in real output, and no file sends a reader outside the repository."""
from __future__ import annotations

import dataclasses
import json
import re
import subprocess

import pytest

from tests.conftest import ROOT, scenario_doc
from workbench.cli.reference import cli_reference
from workbench.scenario.reference import scenario_reference

REGENERATE = {"docs/scenario.md": "python -m workbench.scenario.reference > docs/scenario.md",
              "docs/cli.md": "python -m workbench.cli.reference > docs/cli.md"}


@pytest.mark.parametrize("path,text", [("docs/scenario.md", scenario_reference),
                                       ("docs/cli.md", cli_reference)])
def test_generated_references_are_current(path, text):
    assert (ROOT / path).read_text(encoding="utf-8") == text(), \
        f"{path} is stale: {REGENERATE[path]}"


def test_the_scenario_reference_lists_every_key_the_validator_accepts():
    from workbench.hardware import resolve as hw
    from workbench.scenario import model as md
    from workbench.scenario.validate import PARALLEL_FIELDS
    from workbench.scenario.rules import RULES
    from workbench.scenario.types import Training

    doc = scenario_reference()
    keys = (*hw.HARDWARE_FIELDS, *hw.INTER_NODE_FIELDS, *hw.HOST_FIELDS, *hw.STORAGE_FIELDS,
            *md.MODEL_FIELDS, *md.MOE_FIELDS, *PARALLEL_FIELDS,
            *(f.name for f in dataclasses.fields(Training)))
    for key in keys:      # a key of its own, or a table with a section of its own
        assert f"`{key}`" in doc or f"### hardware.{key}\n" in doc, key
    for r in RULES:
        assert f"| `{r.name}` | {'yes' if r.layout else 'no'} | {r.text} |" in doc


def _documented(verb: str) -> list[str]:
    """The key paths in the ``keys`` block under ``## workbench VERB`` of docs/json.md."""
    text = (ROOT / "docs/json.md").read_text(encoding="utf-8")
    section = text.split(f"## workbench {verb}\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```keys\n", 1)[1].split("```", 1)[0]
    return [line.split()[0] for line in block.splitlines() if line.strip()]


def _has(node, parts: list[str]) -> bool:
    """Whether ``parts`` (``x[]`` = every element of list ``x``; ``<any>`` = some key) leads
    to a value in ``node``."""
    if not parts:
        return True
    head, rest = parts[0], parts[1:]
    if head == "[]" or head.endswith("[]"):
        key = head[:-2]
        seq = node if not key else (node.get(key) if isinstance(node, dict) else None)
        return isinstance(seq, list) and bool(seq) and all(_has(x, rest) for x in seq)
    if not isinstance(node, dict):
        return False
    if head.startswith("<"):
        return any(_has(v, rest) for v in node.values())
    return head in node and _has(node[head], rest)


def _split(path: str) -> list[str]:
    return [p for p in re.split(r"\.|(?<=\])(?=\.)", path) if p]


def _check(verb: str, out) -> None:
    missing = [k for k in _documented(verb) if not _has(out, _split(k))]
    assert not missing, f"docs/json.md lists {verb} keys the output lacks: {missing}"


def test_estimate_json_has_every_documented_key():
    from workbench.estimate import estimate
    from workbench.scenario import load_scenario

    out = json.loads(json.dumps(estimate(load_scenario(
        ROOT / "examples/llama3-8b-8xh100.yaml")).to_dict()))
    _check("estimate", out)


@pytest.mark.slow
def test_trial_json_has_every_documented_key():
    from workbench.scenario import parse_scenario
    from workbench.trial import run_trial

    s = parse_scenario(scenario_doc(hardware={"gpu": "h100-sxm", "gpus_per_node": 2},
                                    model="tiny-dense", parallel={"dp": 1, "pp": 2},
                                    training={"seq_len": 256, "global_batch": 4}))
    _check("trial", json.loads(json.dumps(run_trial(s, steps=2).to_dict())))


def test_plan_json_has_every_documented_key():
    from workbench.plan import plan
    from workbench.scenario import parse_scenario

    s = parse_scenario(scenario_doc(hardware={"gpu": "h100-sxm", "gpus_per_node": 4},
                                    parallel={"dp": 4, "zero": 3},
                                    training={"global_batch": 16}), layout_required=False)
    _check("plan", json.loads(json.dumps(plan(s).to_dict(3))))


@pytest.mark.slow
def test_bench_json_has_every_documented_key():
    from workbench.bench import run_bench
    from workbench.bench.result import to_json

    df = run_bench([2], min_bytes="1K", max_bytes="1K", warmup=1, iters=2,
                   collectives=["all_reduce"])
    _check("bench", json.loads(to_json(df)))


OUTSIDE = re.compile(r"\.\./shared|shared/(notes|design|reference|hooks)|DEVELOPERS\.md")


def test_no_file_of_the_project_names_a_path_outside_it():
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    named = []
    for name in files:
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        named += [f"{name}:{i}" for i, line in enumerate(text.splitlines(), 1)
                  if OUTSIDE.search(line)]
    assert not named, named


def _resolve(dotted: str):
    """The object a dotted name names: a module, then attributes of it."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def test_the_technique_index_names_what_exists():
    """docs/techniques.md: every function it names exists, every rule is in the rule table,
    every engine setting it quotes is written by the exporter it names, every lab exists."""
    import inspect

    from workbench.scenario.rules import RULES

    rows = [line for line in (ROOT / "docs/techniques.md").read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| Technique")]
    assert len(rows) >= 11
    rules = {r.name for r in RULES}
    for row in rows:
        technique, costed, validated, run, exported, taught = \
            [c.strip() for c in row.strip("|").split("|")]
        for name in re.findall(r"`(workbench\.[\w.]+)`", " ".join((costed, run, exported))):
            _resolve(name)
        for name in re.findall(r"`(\w+)`", validated):
            assert name in rules, (technique, name)
        for fn, keys in re.findall(r"`(workbench\.export\.[\w.]+)` \(([^)]*)\)", exported):
            source = inspect.getsource(inspect.getmodule(_resolve(fn)))
            for key in re.findall(r"`([^`]+)`", keys):
                assert key.split(".")[-1] in source, (technique, fn, key)
        for path in re.findall(r"`(notebooks/[\w/.]+)`", taught):
            assert (ROOT / path).exists(), path

"""Read, write and override scenario documents (YAML or JSON)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workbench.documents.text import DocumentError, load_text, read_text_file
from workbench.errors import Problem, ScenarioError
from workbench.scenario.types import Scenario
from workbench.scenario.validate import parse_scenario


def read_document(path: str | Path) -> dict:
    """Load a YAML or JSON scenario file into a dict (no validation yet), within the limits
    of ``workbench.documents.text``."""
    p = Path(path)
    doc = load_text(read_text_file(p), f"scenario {p}", json_text=p.suffix.lower() == ".json")
    if not isinstance(doc, dict):
        raise ScenarioError([Problem("scenario", str(p), "must hold a table with hardware, model, "
                                                         "parallel and training sections")])
    return doc


def parse_value(text: str, where: str = "--set") -> Any:
    """Turn the right-hand side of ``--set key=value`` into a YAML scalar or table (text that
    is not YAML stays text; one over the document limits is refused)."""
    try:
        return load_text(text, where)
    except DocumentError as exc:
        if exc.syntax:
            return text
        raise


def apply_overrides(doc: dict, overrides: list[str]) -> dict:
    """Apply ``key.path=value`` overrides to a copy of ``doc``.

    ``parallel.tp=8`` sets a field; ``model.moe={experts: 8, top_k: 2, expert_ffn_hidden: 1024}``
    sets a table. A path through a catalog key (``hardware.gpu.memory_gb``) is an error: write
    the whole inline table instead.
    """
    import copy

    out = copy.deepcopy(doc)
    problems = []
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            problems.append(Problem("--set", item, "must look like section.field=value, "
                                                   "e.g. parallel.tp=8"))
            continue
        parts = key.split(".")
        node = out
        for i, part in enumerate(parts[:-1]):
            nxt = node.get(part) if isinstance(node, dict) else None
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                problems.append(Problem(".".join(parts[: i + 1]), nxt,
                                        "is a single value, not a table; set it whole"))
                node = None
                break
            node = nxt
        if node is not None:
            try:
                node[parts[-1]] = parse_value(value, f"--set {key}")
            except ScenarioError as exc:
                problems.extend(exc.problems)
    if problems:
        raise ScenarioError(problems)
    return out


def load_scenario(path: str | Path, overrides: list[str] | None = None, *,
                  layout_required: bool = True) -> Scenario:
    """Read, override and validate a scenario file (``layout_required=False``: the parallel
    block is a starting point, as ``parse_scenario`` says)."""
    doc = read_document(path)
    if overrides:
        doc = apply_overrides(doc, overrides)
    return parse_scenario(doc, layout_required=layout_required)


def dump_scenario(scenario: Scenario | dict, fmt: str = "yaml") -> str:
    """Write a scenario's document form as YAML or JSON text (reads back to an equal Scenario)."""
    import yaml

    doc = scenario.to_dict() if isinstance(scenario, Scenario) else scenario
    if fmt == "json":
        return json.dumps(doc, indent=2)
    return yaml.safe_dump(doc, sort_keys=False)

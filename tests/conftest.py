"""Shared helpers for the test suite."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))

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

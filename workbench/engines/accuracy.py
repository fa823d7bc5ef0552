"""How far the estimate is from published measurements: the bands every estimate carries, read
from what the benchmarks measured and wrote here, step time (``accuracy.json``,
``benchmarks/accuracy.py --write``) and memory (``memory_accuracy.json``,
``benchmarks/memory_accuracy.py --write``). A band is the median and 90th-percentile |error| of
the narrowest group of runs like the estimate's (``band_groups``) that holds at least
``BAND_MIN_RUNS`` runs. Nothing in the estimator is fitted to these runs.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
STEP_TIME = HERE / "accuracy.json"
MEMORY = HERE / "memory_accuracy.json"

# A band from fewer runs says more about those runs than about the estimate: a group needs this
# many before its median and 90th percentile stand for the runs like it. 20 is issue 43's
# choice, not derived from a statistical criterion: it makes the top tenth of a group at least
# 2 runs; with benchmarks/accuracy.py ``summary``'s p90 (the sorted |errors|' element
# int(0.9 n)) a group of 20 has its p90 at the 19th run, one run above it.
BAND_MIN_RUNS = 20


@lru_cache(maxsize=4)
def measured(path: Path) -> dict:
    """A committed validation file (``STEP_TIME`` or ``MEMORY``); empty before the benchmark
    that writes it first ran."""
    return json.loads(path.read_text()) if path.exists() else {}


def regime_of(method: str, moe: bool) -> str:
    """The kind of run a band is measured on: fine-tuning (any ``training.method`` but
    pretrain), else MoE or dense pre-training."""
    return "fine-tuning" if method != "pretrain" else ("moe" if moe else "dense")


def band_groups(engine: str, regime: str) -> list[str]:
    """The groups an estimate's band may come from, narrowest first: this engine in this regime,
    this engine, this regime on any engine, every published run."""
    return [f"{engine}/{regime}", engine, regime, "all"]


def band(path: Path, engine: str, moe: bool, method: str = "pretrain") -> dict | None:
    """The measured error of runs like this one in ``path``'s validation: the first of
    ``band_groups`` with at least ``BAND_MIN_RUNS`` runs, as {"group", "runs", "median",
    "p90", "kind"} (fractions; kind "in-sample": the runs shaped the model, nothing was fitted
    and left out), or None before the benchmark has written it."""
    groups = measured(path).get("bands", {})
    for name in band_groups(engine, regime_of(method, moe)):
        found = groups.get(name)
        if found and found["runs"] >= BAND_MIN_RUNS:
            return {"group": name, **found}
    return None


def error_band(engine: str, moe: bool, method: str = "pretrain") -> dict | None:
    """The step-time band (``STEP_TIME``)."""
    return band(STEP_TIME, engine, moe, method)


def memory_band(engine: str, moe: bool, method: str = "pretrain") -> dict | None:
    """The memory band (``MEMORY``): the device, reserved or allocated figure against what
    published runs measured of it."""
    return band(MEMORY, engine, moe, method)

"""What the teaching labs (notebooks/labs/) share, so each lab opens on the technique it teaches:
a small scenario for a trial, a real trial run from a clean helper process, and a trial's
estimate-against-measurement rows printed as a table that asserts the exact ones.

The rows are the proof's own (``workbench.proof.compare.compare_ranks``): a lab shows them, it
does not recompute them. Importing this module does not import torch (the trial's ranks do).
"""
from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor

from workbench.proof.compare import compare_ranks
from workbench.scenario import parse_scenario
from workbench.scenario.types import Scenario
from workbench.trial import run_trial
from workbench.trial.result import TrialResult

GB, GIB = 1e9, 2 ** 30

# One row of a lab's check table: (what, predicted, measured, must be exact).
Check = tuple[str, object, object, bool]


def scenario(model: str | dict, training: dict | None = None, **parallel: int) -> Scenario:
    """A small scenario for a trial: ``model`` (a tiny preset) on dp*tp*pp*cp simulated GPUs,
    with ``training`` fields on top of the labs' own (e.g. ``{"method": "lora"}``). The trial
    scales the model down further and runs it in fp32 (docs/trials.md)."""
    world = 1
    for dim in ("dp", "tp", "pp", "cp"):
        world *= parallel.get(dim, 1)
    return parse_scenario({"hardware": {"gpu": "h100-sxm", "gpus_per_node": world},
                           "model": model, "parallel": parallel,
                           "training": {"seq_len": 256, "global_batch": 16,
                                        **(training or {})}})


def adapter_params(model, rank: int, targets: Iterable[str]) -> int:
    """LoRA's trainable parameters (Hu et al. 2021, arXiv:2106.09685): each adapted projection
    W (out x in) gets A (r x in) and B (out x r), r (in + out) parameters, in every layer.
    ``model``: a ``ModelShape`` (dense: q, k, v, o, gate, up, down)."""
    h, q, kv, f = (model.hidden, model.heads * model.dim_per_head,
                   model.kv_heads * model.dim_per_head, model.ffn_hidden)
    shapes = {"q": (h, q), "k": (h, kv), "v": (h, kv), "o": (q, h),
              "gate": (h, f), "up": (h, f), "down": (f, h)}
    return model.layers * sum(rank * sum(shapes[t]) for t in targets)


_pool: ProcessPoolExecutor | None = None


def trial(s: Scenario, **kw) -> TrialResult:
    """Run a real trial of ``s`` (``workbench.trial.run_trial``'s keywords) and return its
    result; a failed trial raises. The ranks are forked from a single-threaded helper process:
    forking them straight from a Jupyter kernel, which has threads, is unsafe
    (workbench/trial/in_subprocess.py)."""
    global _pool
    if _pool is None:
        _pool = ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"))
        null, saved = os.open(os.devnull, os.O_WRONLY), os.dup(2)
        os.dup2(null, 2)       # the helper's stderr (torch's C++ profiler log lines) is not shown
        try:
            _pool.submit(int).result()
        finally:
            os.dup2(saved, 2)
            os.close(null)
            os.close(saved)
    result = _pool.submit(run_trial, s, **kw).result()
    if result.error is not None:
        raise RuntimeError(f"the trial failed: {result.error}")
    return result


def state_rows(label: str, result: TrialResult) -> list[Check]:
    """Parameter, gradient and optimizer bytes of every rank, predicted against measured
    (exact)."""
    rows = compare_ranks(result.ranks())
    out = []
    for key in ("params", "grads", "optimizer"):
        mine = [r for r in rows if r.component == key]
        out.append((f"{label}: {key} bytes, rank 0..{len(mine) - 1}",
                    [r.predicted for r in mine], [r.measured for r in mine], True))
    return out


def comm_rows(label: str, result: TrialResult, dims: Iterable[str] | None = None,
              not_exact: Iterable[tuple[str, str]] = ()) -> list[Check]:
    """Rank 0's collectives per parallel dimension (bytes and count per step; expert-parallel
    bytes as their sum over the ranks), predicted against measured. ``dims``: only these
    dimensions; ``not_exact``: (dimension, collective) pairs shown but not asserted. A
    collective measured but not predicted shows "not modelled", one predicted but not measured
    "not measured"; neither is asserted."""
    skip = set(not_exact)
    out = []
    for r in compare_ranks(result.ranks()):
        if r.rank not in (0, None) or not r.component.startswith("comm "):
            continue
        _, dim, kind, *what = r.component.split(" ")
        if dims is not None and dim not in dims:
            continue
        modelled = not (r.predicted == 0 and what == ["count"])
        predicted = r.predicted if modelled else "not modelled"
        measured = "not measured" if r.measured is None else r.measured
        exact = modelled and r.measured is not None and (dim, kind) not in skip
        out.append((f"{label}: {dim} {kind} {' '.join(what)}", predicted, measured, exact))
    return out


def _fmt(v) -> str:
    if isinstance(v, (list, tuple)):
        return " / ".join(_fmt(x) for x in v)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return f"{v:,}" if isinstance(v, int) else str(v)


def check_table(rows: Iterable[Check]):
    """Print ``rows`` as a table (with the relative difference) and assert that every row
    marked exact is exact: the labs run in CI, so a regression fails them. Returns the
    DataFrame."""
    import pandas as pd

    df = pd.DataFrame(list(rows), columns=["check", "predicted", "measured", "must be exact"])
    df["equal"] = [p == m for p, m in zip(df["predicted"], df["measured"])]

    def diff(p, m) -> str:
        if isinstance(p, (int, float)) and isinstance(m, (int, float)) and p and p != m:
            return f"{100 * (m - p) / p:+.1f} %"
        return ""

    shown = df.assign(predicted=df["predicted"].map(_fmt), measured=df["measured"].map(_fmt),
                      difference=[diff(p, m) for p, m in zip(df["predicted"], df["measured"])])
    print(shown.to_string(index=False))
    bad = df[df["must be exact"] & ~df["equal"]]
    assert bad.empty, f"estimate and measurement differ:\n{bad.to_string()}"
    return df


__all__ = ["GB", "GIB", "adapter_params", "check_table", "comm_rows", "scenario", "state_rows", "trial"]

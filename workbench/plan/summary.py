"""The planner's answer for people: one sentence (``workbench plan`` prints it first, the page
shows it above the table), the ranked rows with those that differ only in virtual stages folded
into one, and the columns' names in words.

Nothing here computes a figure: every number is the search's (``PlanResult``); durations,
memory and token counts go through ``workbench.units``, the formatter the CLI and the page
share.
"""
from __future__ import annotations

import numpy as np

from workbench.units import duration_text, memory_text, percent_text, tokens_text

OFFLOAD_WORDS = {"cpu": "CPU", "nvme": "NVMe"}
# a layout that needs more memory is named when it is at least this much faster than the best
FASTER = 0.05

# What each column of the ranked table is, for a header or a tooltip (the page and the CLI).
COLUMN_LABELS = {
    "rank": "rank (1 = fastest)",
    "ranks": "ranks folded into this row",
    "dp": "data parallel (dp)",
    "tp": "tensor parallel (tp)",
    "pp": "pipeline stages (pp)",
    "cp": "context parallel (cp)",
    "ep": "expert parallel (ep)",
    "zero": "ZeRO stage (3 = FSDP2 full shard)",
    "shard_group": "HSDP shard group (0 = none)",
    "sequence_parallel": "sequence parallel",
    "pp_schedule": "pipeline schedule",
    "virtual_stages": "virtual stages per pipeline rank",
    "micro_batch": "micro-batch (sequences)",
    "recompute": "activation recompute",
    "offload": "optimizer offload",
    "engine": "engine",
    "compile": "torch.compile",
    "async_tp": "async TP",
    "tp_comm_overlap": "TP comm overlap",
    "fp8_recipe": "FP8 recipe",
    "optimizer": "optimizer",
    "expert_tp": "expert TP (MoE parallel folding; empty = tp)",
    "step": "step time (s)",
    "step_max": "slowest folded step time (s)",
    "tokens_per_s": "tokens/s",
    "mfu": "MFU",
    "bubble": "pipeline bubble (s)",
    "memory_gib": "allocated per GPU (GiB)",
    "device_gib": "on the device per GPU, as nvidia-smi shows it (GiB)",
    "headroom_gib": "headroom per GPU (GiB)",
    "fit": "fit: yes, or tight (within the memory band of the GPU)",
    "folded": "layouts folded into this row",
}

# The columns that make two rows the same layout apart from virtual stages (the figures differ
# a little between them: the bubble shrinks as the stages grow).
_LAYOUT_KEYS = ("dp", "tp", "pp", "cp", "ep", "zero", "shard_group", "micro_batch",
                "sequence_parallel", "pp_schedule", "recompute", "offload", "engine", "compile",
                "async_tp", "tp_comm_overlap", "fp8_recipe", "optimizer", "expert_tp")


def _plain(v):
    return v.item() if hasattr(v, "item") else v


def range_text(values) -> str:
    """Sorted integers as people write them: ``3-8``, ``1, 2, 4``, ``5``; runs of three or
    more are a range."""
    vals = sorted({int(v) for v in values})
    out, i = [], 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        if j - i >= 2:
            out.append(f"{vals[i]}-{vals[j]}")
        else:
            out += [str(v) for v in vals[i:j + 1]]
        i = j + 1
    return ", ".join(out)


def _plain_list(values) -> list:
    """A column as a list of plain Python values (``tolist`` gives them, but for the numpy
    scalars an object column may hold)."""
    arr = np.asarray(values)
    out = arr.tolist()
    return list(map(_plain, out)) if arr.dtype == object else out


def _codes(values) -> np.ndarray:
    """Each entry's index among the column's distinct values (equal plain values, equal
    codes)."""
    arr = np.asarray(values)
    if arr.dtype != object:
        return np.unique(arr, return_inverse=True)[1].reshape(-1).astype(np.int64)
    if len(arr) and bool(np.all(arr == arr[0])):
        return np.zeros(len(arr), dtype=np.int64)
    # the search writes these columns in runs of one value: code each run's head (Python's ==,
    # as the dict's keys compare), then repeat it over its run
    heads = np.flatnonzero(np.r_[True, (arr[1:] != arr[:-1]).astype(bool)])
    index: dict = {}
    codes = [index.setdefault(_plain(v), len(index)) for v in arr[heads].tolist()]
    return np.repeat(np.asarray(codes, dtype=np.int64), np.diff(np.r_[heads, len(arr)]))


def fold_virtual_stages(ranked: dict, top: int | None = None) -> dict:
    """``PlanResult.ranked`` with the rows that differ only in ``virtual_stages`` folded into
    one, in rank order: the row shows the fastest of them (its rank and figures),
    ``virtual_stages`` becomes the range of values as text (``"3-8"``), ``ranks`` the ranks
    folded (``"1-4, 7, 10"``), ``folded`` their count and ``step_max`` the slowest one's step.
    Plain lists, one per column; ``PlanResult.ranked`` itself is left as it is (the JSON of
    contract 4 lists every layout). The rows are grouped by codes of their layout columns;
    the other columns are gathered at each group's first row. ``top``: only the first ``top``
    folded rows are written out (what a table shows; every row is grouped all the same)."""
    keys = [k for k in _LAYOUT_KEYS if k in ranked]
    n = len(np.asarray(ranked["rank"]))
    # one code per distinct layout key, then the groups in order of their first row
    code = np.zeros(n, dtype=np.int64)
    for k in keys:
        c = _codes(ranked[k])
        code = np.unique(code * (int(c.max(initial=0)) + 1) + c, return_inverse=True)[1]
    _, firsts, inverse = np.unique(code, return_index=True, return_inverse=True)
    by_first = np.argsort(firsts)
    rename = np.empty(len(firsts), dtype=np.int64)
    rename[by_first] = np.arange(len(firsts))
    group_of = rename[inverse.reshape(-1)]
    firsts = firsts[by_first]
    shown = len(firsts) if top is None else min(top, len(firsts))
    first = np.asarray(firsts[:shown], dtype=np.int64)
    out = {k: _plain_list(np.asarray(v)[first]) for k, v in ranked.items()}
    size = np.bincount(group_of, minlength=len(firsts))
    # each group's members in rank order, one run per group
    order = np.argsort(group_of, kind="stable")
    runs = np.r_[0, np.cumsum(size)[:-1]]
    folded = size[:shown].tolist()
    for name, col in (("virtual_stages", "virtual_stages"), ("ranks", "rank")):
        vals = np.asarray(ranked[col])[order].tolist()
        out[name] = [str(int(vals[a])) if m == 1 else range_text(vals[a:a + m])
                     for a, m in zip(runs[:shown].tolist(), folded)]
    out["folded"] = folded
    step = np.asarray(ranked["step"], dtype=float)[order]
    out["step_max"] = np.maximum.reduceat(step, runs)[:shown].tolist() if n else []
    return out


def plan_sentence(result) -> str:
    """The planner's answer in one sentence: whether the model fits the hardware (and only
    with offload), the fastest layout's step time, MFU and time to train, what the fastest
    layout that needs more memory would give, and how many layouts fit (``result``: a
    ``PlanResult``)."""
    s = result.scenario
    hw = s.hardware
    head = f"{s.model.name} on {hw.world} x {hw.gpu.name}"
    n = result.counts
    if not result.feasible:
        return f"{head}: nothing fits. {result.infeasible_reason().message}."
    r = result.ranked
    best = result.row(1)
    off = best["offload"]
    if off != "none" and bool(np.all(np.asarray(r["offload"]) != "none")):
        verdict = f"fits only with {OFFLOAD_WORDS.get(off, off)} offload"
    elif off != "none":
        verdict = f"fits; the fastest layout offloads to {OFFLOAD_WORDS.get(off, off)}"
    else:
        verdict = "fits without offload"
    tokens = s.training.tokens
    tight = " (tight: within the memory band of the GPU)" if best.get("fit") == "tight" else ""
    text = (f"{head} {verdict}: {duration_text(best['step'])} per step, MFU "
            f"{percent_text(best['mfu'])}, {tokens_text(tokens)} in "
            f"{duration_text(tokens / best['tokens_per_s'])} ({describe_layout(best)}, "
            f"{memory_text(best['device_per_gpu'])} per GPU{tight})")
    over = result.fastest_over
    if over is not None and over["step"] < (1 - FASTER) * best["step"]:
        cap = result.limit
        if over["device_per_gpu"] > cap:
            need = (f"{memory_text(over['device_per_gpu'])} per GPU of "
                    f"{memory_text(cap)}")
        else:
            need = "more host memory or NVMe per node than the node has"
        text += (f"; the fastest layout that needs more memory is {describe_layout(over)}: "
                 f"{duration_text(over['step'])} per step, needing {need}")
    return text + f". {n['fit']:,} of {n['valid']:,} valid layouts fit."


def limit_sentence(result) -> str:
    """The memory limit the search judged "fits" against, for people: the share of the GPU,
    the GPU's memory and the bytes it leaves, and why (the band's median by default, or that
    it was chosen), and how many ranked layouts are tight (``result``: a ``PlanResult``)."""
    f = result.fraction
    share = percent_text(f, 0 if abs(f * 100 - round(f * 100)) < 1e-9 else 1)
    text = (f"Memory limit: {share} of each GPU's {memory_text(result.capacity)}, "
            f"{memory_text(result.limit)}")
    if result.constraints.max_memory_fraction is not None:
        text += " (chosen with --max-memory-fraction)"
    elif result.band:
        b = result.band
        text += (f" (the memory band's median: half of {b['runs']} published runs like this one "
                 f"needed no more than estimated at this share; nine in ten at most "
                 f"{1 / (1 + b['q10']) - 1:.0%} above the estimate)")
    else:
        text += " (no measured memory band: a tenth kept back)"
    ranked = result.ranked.get("fit")
    tight = int((ranked == "tight").sum()) if ranked is not None and len(ranked) else 0
    if tight:
        text += (f"; {tight:,} of the ranked layouts are tight (within the band of the GPU: a "
                 "trial on the GPU says whether they fit)")
    return text + "."


def describe_layout(row: dict) -> str:
    """A layout (a plan-table row) in words: its degrees, ZeRO, schedule, micro-batch,
    recompute, offload and engine switches."""
    parts = [f"{k} {int(row[k])}" for k in ("dp", "tp", "pp", "cp", "ep") if int(row[k]) > 1]
    if row.get("expert_tp") is not None:
        parts.append(f"expert TP {int(row['expert_tp'])}")
    parts.append(f"ZeRO {int(row['zero'])}")
    if int(row.get("shard_group") or 0):
        parts.append(f"HSDP shard group {int(row['shard_group'])}")
    if int(row["pp"]) > 1:
        parts.append(str(row["pp_schedule"]))
    parts += [f"micro-batch {int(row['micro_batch'])}", f"{row['recompute']} recompute",
              f"offload {row['offload']}"]
    if row.get("engine", "generic") != "generic":
        parts += [f"engine {row['engine']}", *switch_words(row)]
    return ", ".join(parts)


def switch_words(layout: dict) -> list[str]:
    """The engine switches a layout turns on, as shown to people: compile, async TP, TP comm
    overlap, fp8 <recipe>.

    ``layout`` is a plan-table row or any mapping with ``compile``, ``async_tp``,
    ``tp_comm_overlap`` and ``fp8_recipe``; switches that are off (or absent) are left out.
    """
    words = [w for w, key in (("compile", "compile"), ("async TP", "async_tp"),
                              ("TP comm overlap", "tp_comm_overlap")) if layout.get(key)]
    if layout.get("fp8_recipe"):
        words.append(f"fp8 {layout['fp8_recipe']}")
    return words


__all__ = ["COLUMN_LABELS", "describe_layout", "fold_virtual_stages", "limit_sentence",
           "plan_sentence", "range_text", "switch_words"]

"""What a calibration file may hold, checked field by field before a profile is built from it.

A profile's numbers divide and index the estimator's arithmetic (a GEMM table indexed by its
grid, a bandwidth divided into bytes, cores divided into ranks), so a file that says
``cores: 0``, ``hbm_gb_per_s: 1e-320`` or a table one entry short must be refused here, in one
line naming the field, as a scenario's fields are, rather than fail somewhere in an estimate.
The bounds are generous physical ones: the widest machine or the fastest memory any file can
describe, never a figure tuned to a measurement.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from workbench.bench.definitions import COLLECTIVES as COLLECTIVE_KINDS
from workbench.hardware.profile import READABLE_FORMATS, check_format
from workbench.errors import Problem, ScenarioError

Check = Callable[[object, str, list], None]

_TINY_S = 1e-12        # one picosecond: no kernel, copy or collective term is shorter
_LONG_S = 86_400.0     # a day: no single measured kernel or collective takes longer


def number(lo: float, hi: float, *, above: bool = False) -> Check:
    """A finite real number (not a boolean) in [lo, hi] (``above``: strictly more than lo)."""
    low = f"more than {lo:g}" if above else f"{lo:g}"

    def check(v, path, problems) -> None:
        try:
            ok = (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                  and (v > lo if above else v >= lo) and v <= hi)
        except OverflowError:          # a JSON integer past the float range
            ok = False
        if not ok:
            problems.append(Problem(path, v, f"must be a number from {low} to {hi:g}"))
    return check


def whole(lo: int, hi: int) -> Check:
    """An integer (not a boolean) in [lo, hi]."""
    def check(v, path, problems) -> None:
        if not (isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi):
            problems.append(Problem(path, v, f"must be a whole number {lo:,}..{hi:,}"))
    return check


def text(limit: int = 200) -> Check:
    """A string of at most ``limit`` characters."""
    def check(v, path, problems) -> None:
        if not (isinstance(v, str) and len(v) <= limit):
            problems.append(Problem(path, v, f"must be text of at most {limit} characters"))
    return check


def one_of(*choices: object) -> Check:
    """One of ``choices`` exactly (``true`` is not the format 1)."""
    def check(v, path, problems) -> None:
        if isinstance(v, bool) or v not in choices:
            problems.append(Problem(path, v, "must be one of " + ", ".join(map(str, choices))))
    return check


def items(each: Check, lo: int = 0, hi: int = 10_000) -> Check:
    """A list of ``lo``..``hi`` entries, each checked by ``each``."""
    def check(v, path, problems) -> None:
        if not (isinstance(v, list) and lo <= len(v) <= hi):
            problems.append(Problem(path, v, f"must be a list of {lo}..{hi:,} entries"))
            return
        for i, x in enumerate(v):
            each(x, f"{path}[{i}]", problems)
    return check


def pair(each: Check) -> Check:
    """A two-entry list, e.g. [alpha seconds, beta seconds per byte]."""
    return items(each, 2, 2)


def mapping(key: Check, value: Check, hi: int = 1_000, lo: int = 0) -> Check:
    """A table of ``lo``..``hi`` entries whose keys and values pass ``key`` and ``value``."""
    def check(v, path, problems) -> None:
        if not (isinstance(v, Mapping) and lo <= len(v) <= hi):
            problems.append(Problem(path, v, f"must be a table of {lo}..{hi:,} entries"))
            return
        for k, x in v.items():
            key(k, f"{path} key", problems)
            value(x, f"{path}.{k}", problems)
    return check


def world_key(v, path, problems) -> None:
    """A collective's world size written as a JSON key (text digits) or a number: 2..4096
    ranks (one rank runs no collective: its fit would divide by the n - 1 ring steps)."""
    try:
        n = int(v) if isinstance(v, (int, str)) and not isinstance(v, bool) and \
            str(v).isascii() and str(v).isdigit() else None
    except ValueError:
        n = None
    if n is None or not 2 <= n <= 4096:
        problems.append(Problem(path, v, "must be a world size 2..4096 (a collective needs "
                                         "two ranks)"))


def table(fields: dict[str, Check], optional: frozenset[str] = frozenset(),
          extra: bool = False) -> Check:
    """A table with exactly ``fields`` (those in ``optional`` may be missing; ``extra``:
    other keys allowed, as in the host facts kept as evidence)."""
    def check(v, path, problems) -> None:
        if not isinstance(v, Mapping):
            problems.append(Problem(path or "calibration file", v, "must be a table"))
            return
        where = f"{path}." if path else ""
        for name, each in fields.items():
            if name in v:
                each(v[name], where + name, problems)
            elif name not in optional:
                problems.append(Problem(where + name, None, "is missing"))
        if not extra:
            for name in v:
                if name not in fields:
                    problems.append(Problem(f"{where}{name}", None,
                                            "is not a field of a calibration file"))
    return check


def anything(v, path, problems) -> None:
    """Evidence kept in the file and never read by the estimator (its size is bounded by the
    document reader's limits)."""


SECONDS = number(0, _LONG_S)
POSITIVE_SECONDS = number(_TINY_S, _LONG_S)
ALPHA_BETA = pair(number(0, _LONG_S))
# backend -> kind -> world -> [alpha, beta]: a kind is listed with at least one world's fit
# (the estimator reads the fit of the nearest world; hardware/profile.py fitted_terms)
COLLECTIVES = mapping(one_of("gloo", "nccl"),
                      mapping(one_of(*COLLECTIVE_KINDS), mapping(world_key, ALPHA_BETA, 64, lo=1),
                              16),
                      2)
GRID_AXIS = items(whole(1, 1 << 24), 1, 64)
HOST = table({"cpu": text(), "cores": whole(1, 100_000), "memory_gb": number(0, 1e7)},
             optional=frozenset({"cpu", "cores", "memory_gb"}), extra=True)
COMMON = {"date": text(40), "host": HOST, "gemm_grid": table({a: GRID_AXIS for a in "mnk"}),
          "collectives": COLLECTIVES, "backend": one_of("gloo", "nccl"), "source": text(500),
          "format": one_of(*READABLE_FORMATS)}

CPU_PROFILE = table({
    **COMMON, "device": one_of("cpu"),
    "cores": whole(1, 100_000), "memory_gb": number(0, 1e7, above=True),
    "gemm_seconds": mapping(one_of("fp32", "bf16", "fp16"), items(POSITIVE_SECONDS, 1, 64 ** 3), 3),
    "copy_gb_per_s": number(1e-3, 1e6), "op_forward_s": SECONDS, "op_backward_s": SECONDS,
    "op_no_grad_s": SECONDS,
    "wrappers": mapping(text(40), mapping(one_of("layer", "rest", "tensor"),
                                          pair(SECONDS), 3), 16),
    "runtime_probe": anything,
    "in_loop_s": mapping(world_key, items(pair(SECONDS), 1, 64), 64),
}, optional=frozenset({"device", "backend", "source", "runtime_probe", "in_loop_s"}))

_ATTENTION_POINT = table({
    **{k: whole(1, 1 << 24) for k in ("batch", "seq", "heads", "kv_heads", "head_dim",
                                      "value_dim")},
    "fwd_s": POSITIVE_SECONDS, "fwd_bwd_s": POSITIVE_SECONDS, "backend": text(80)},
    optional=frozenset({"backend"}), extra=True)
_GEMM_POINT = table({**{k: whole(1, 1 << 24) for k in "mnk"},
                     "precision": one_of("bf16", "fp8"), "seconds": POSITIVE_SECONDS})
GPU_PROFILE = table({
    **COMMON, "device": one_of("cuda"),
    "gpu": table({"name": text(), "capability": pair(whole(0, 99)),
                  "memory_bytes": whole(1 << 20, 1 << 50)}, extra=True),
    "gemm_seconds": mapping(one_of("bf16", "fp8"), items(POSITIVE_SECONDS, 1, 64 ** 3), 2),
    "hbm_gb_per_s": number(1e-3, 1e6),
    "attention_points": items(_ATTENTION_POINT, 0, 1_000),
    "gemm_points": items(_GEMM_POINT, 0, 10_000),
    "grouped_gemm": anything, "errors": items(text(2_000), 0, 1_000), "wall_s": SECONDS,
}, optional=frozenset({"backend", "source", "attention_points", "gemm_points", "grouped_gemm",
                       "collectives", "errors", "wall_s"}))


def check_record(doc: object) -> None:
    """Raise a ``ScenarioError`` (every problem, each naming its field) unless ``doc`` is a
    calibration file's object this workbench can read: every field of the right kind and in
    range, and each GEMM table exactly as long as its grid."""
    problems: list[Problem] = []
    if not isinstance(doc, Mapping):
        raise ScenarioError([Problem("calibration file", doc, "must be a table")])
    check_format(doc)
    (GPU_PROFILE if doc.get("device") == "cuda" else CPU_PROFILE)(doc, "", problems)
    if not problems:
        axes = doc["gemm_grid"]
        cells = len(axes["m"]) * len(axes["n"]) * len(axes["k"])
        for name in "mnk":
            if axes[name] != sorted(set(axes[name])):
                problems.append(Problem(f"gemm_grid.{name}", axes[name],
                                        "must list distinct sizes in increasing order"))
        for precision, seconds in doc["gemm_seconds"].items():
            if len(seconds) != cells:
                problems.append(Problem(f"gemm_seconds.{precision}", f"{len(seconds)} entries",
                                        f"must hold one time per grid shape: {cells}"))
    if problems:
        raise ScenarioError(problems)

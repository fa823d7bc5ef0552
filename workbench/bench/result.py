"""From per-rank iteration times to nccl-tests-style rows: the DataFrame, JSON and text forms.

Time per operation = the maximum over ranks of each rank's **median** iteration time.
- Median, not nccl-tests' mean (it divides one timed loop by its iteration count): on a machine
  whose cores are shared (here: up to 8 ranks on 2 cores, next to other jobs) one descheduled
  iteration can take 10-100 times longer, and a mean would report the scheduler rather than the
  collective. On an idle machine the two agree within the run-to-run noise.
- Maximum over ranks, not nccl-tests' default average over ranks (-a 1): a collective is done
  when its last rank is. In back-to-back loops the ranks wait for each other, so their medians
  differ little and the maximum is the conservative choice.
"""
from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence

from workbench.bench.definitions import busbw_factor, human_bytes

COLUMNS = ("collective", "bytes", "world_size", "time_s", "algbw_gb_per_s", "busbw_gb_per_s")

STATISTIC = "max over ranks of each rank's median iteration time"


def op_time(per_rank: Mapping[int, Sequence[float]]) -> float:
    """Seconds per operation from each rank's iteration times (see the module docstring)."""
    return max(statistics.median(times) for times in per_rank.values())


def make_row(collective: str, nbytes: int, world: int,
             per_rank: Mapping[int, Sequence[float]]) -> dict:
    """One contract row: algbw = bytes / time, busbw = algbw x nccl-tests' factor (GB = 1e9 B)."""
    t = op_time(per_rank)
    algbw = nbytes / t / 1e9
    return {"collective": collective, "bytes": int(nbytes), "world_size": int(world),
            "time_s": float(t), "algbw_gb_per_s": float(algbw),
            "busbw_gb_per_s": float(algbw * busbw_factor(collective, world))}


def to_frame(rows: Iterable[Mapping], **attrs):
    """The rows as a pandas DataFrame with exactly the contract's columns; ``attrs`` (backend,
    iterations, ...) go to ``DataFrame.attrs``."""
    import pandas as pd

    df = pd.DataFrame([{k: r[k] for k in COLUMNS} for r in rows], columns=list(COLUMNS))
    df = df.astype({"bytes": "int64", "world_size": "int64", "time_s": "float64",
                    "algbw_gb_per_s": "float64", "busbw_gb_per_s": "float64"})
    df.attrs.update(attrs)
    return df


def to_records(df) -> list[dict]:
    """Plain-Python rows (ints and floats, not numpy scalars), in the contract's key order."""
    return [{"collective": str(r.collective), "bytes": int(r.bytes),
             "world_size": int(r.world_size), "time_s": float(r.time_s),
             "algbw_gb_per_s": float(r.algbw_gb_per_s),
             "busbw_gb_per_s": float(r.busbw_gb_per_s)}
            for r in df.itertuples(index=False)]


def to_json(df, indent: int | None = 2) -> str:
    """Contract 4's ``--json``: a JSON list of row objects (bytes, seconds, GB/s)."""
    return json.dumps(to_records(df), indent=indent)


def header(backend: str) -> str:
    """The text table's heading (nccl-tests' column order, with the size in words too)."""
    return "\n".join([
        f"# {backend}, float32, sum; time = {STATISTIC}; GB/s = 1e9 bytes/s",
        f"# {'collective':>14} {'ranks':>5} {'bytes':>11} {'size':>9} {'time (us)':>11} "
        f"{'algbw (GB/s)':>13} {'busbw (GB/s)':>13}",
    ])


def format_row(row: Mapping) -> str:
    """One text-table line."""
    return (f"  {row['collective']:>14} {row['world_size']:>5} {row['bytes']:>11} "
            f"{human_bytes(row['bytes']):>9} {row['time_s'] * 1e6:>11.1f} "
            f"{row['algbw_gb_per_s']:>13.4f} {row['busbw_gb_per_s']:>13.4f}")


def to_text(df) -> str:
    """The whole table (what ``workbench bench`` prints without ``--json``)."""
    lines = [header(df.attrs.get("backend", "?"))]
    lines += [format_row(r) for r in to_records(df)]
    return "\n".join(lines)

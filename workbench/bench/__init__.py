"""nccl-tests-style collective benchmark (contract 4's ``workbench bench``): time all-reduce,
all-gather, reduce-scatter, all-to-all, broadcast and send/recv over real processes and report
algbw and busbw per message size and world size.

Importing this package is light (no torch, pandas or plotly until a benchmark runs or a figure
is built). Modules: ``definitions`` (nccl-tests' sizes and busbw factors), ``collectives`` (the
timed loop in each rank), ``runner`` (validation and processes), ``result`` (DataFrame, JSON,
text), ``plot`` (plotly figure), ``command`` (the ``bench`` verb's options).
"""
from __future__ import annotations

from workbench.bench.definitions import COLLECTIVES, busbw_factor
from workbench.bench.result import COLUMNS, to_json, to_text
from workbench.bench.runner import BenchFailed, make_config, run_bench


def figure(df):
    """busbw against message size (plot.figure; imports plotly)."""
    from workbench.bench.plot import figure as _figure

    return _figure(df)


__all__ = ["COLLECTIVES", "COLUMNS", "BenchFailed", "busbw_factor", "figure", "make_config",
           "run_bench", "to_json", "to_text"]

"""The ``workbench bench`` verb: its options and what it prints (contract 4).

Kept here so workbench/cli/ only registers the verb. Importing this module is light.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbench.bench.definitions import COLLECTIVES
from workbench.errors import Problem, ScenarioError


def add_arguments(b: argparse.ArgumentParser) -> None:
    """The verb's options; sets ``run``."""
    b.add_argument("--world-size", default=None, metavar="N[,N...]",
                   help="ranks: one number or a list (default 2,4,8; --quick: 2); at most 8")
    b.add_argument("--backend", default="auto",
                   help="auto | gloo | nccl (auto: nccl when there is a CUDA GPU per rank)")
    b.add_argument("--collectives", default=None, metavar="LIST",
                   help="comma-separated subset of " + ",".join(COLLECTIVES) + " (default all)")
    b.add_argument("--min-bytes", default=None, metavar="SIZE",
                   help="smallest message, bytes or 1K/4M/1G (binary); default 1K")
    b.add_argument("--max-bytes", default=None, metavar="SIZE",
                   help="largest message; default 256M (--quick: 1M)")
    b.add_argument("--step-factor", type=int, default=None, metavar="F",
                   help="size multiplier between rows; default 4 (--quick: 32)")
    b.add_argument("--warmup", type=int, default=None, metavar="N",
                   help="at most N warm-up iterations per size (default 5; --quick: 1)")
    b.add_argument("--iters", type=int, default=None, metavar="N",
                   help="at most N timed iterations per size (default 20; --quick: 3)")
    b.add_argument("--quick", action="store_true",
                   help="a few sizes and iterations at 2 ranks: seconds, for tests and CI")
    b.add_argument("--json", action="store_true", help="print a JSON list of row objects")
    b.add_argument("--plot", default=None, metavar="FILE.html",
                   help="also write busbw against size as a self-contained plotly page")
    b.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the benchmark; rows stream to stdout as text, or one JSON list at the end."""
    from workbench.bench.result import format_row, header, to_json
    from workbench.bench.runner import BenchFailed, run_bench

    def show(ev: dict) -> None:
        if args.json:
            return
        if ev["type"] == "start" and not shown["header"]:
            print(header(ev["backend"]), flush=True)
            shown["header"] = True
        elif ev["type"] == "row":
            print(format_row(ev), flush=True)
        elif ev["type"] == "end":
            print(f"# {ev['wall_s']:.1f} s", flush=True)

    shown = {"header": False}
    try:
        if args.plot is not None and not Path(args.plot).resolve().parent.is_dir():
            raise ScenarioError([Problem("--plot", args.plot, "its folder does not exist")])
        df = run_bench(args.world_size, backend=args.backend, collectives=args.collectives,
                       min_bytes=args.min_bytes, max_bytes=args.max_bytes,
                       step_factor=args.step_factor, warmup=args.warmup, iters=args.iters,
                       quick=args.quick, on_event=show)
    except ScenarioError as exc:
        print(f"workbench bench: {exc.one_line()}", file=sys.stderr)
        return 2
    except BenchFailed as exc:
        print(f"workbench bench: failed: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(to_json(df))
    if args.plot is not None:
        from workbench.bench.plot import write_html

        write_html(df, args.plot)
        if not args.json:
            print(f"# plot written to {args.plot}")
    return 0

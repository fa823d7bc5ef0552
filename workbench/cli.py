"""`workbench` command line (contract 2): estimate, catalog, dashboard.

Invalid input exits with code 2 and one line on stderr, never a traceback.
"""
from __future__ import annotations

import argparse
import json
import sys

from workbench.errors import ScenarioError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _estimate(args: argparse.Namespace) -> int:
    from workbench.estimate import estimate
    from workbench.report.text import render_estimate
    from workbench.spec import load_scenario

    est = estimate(load_scenario(args.scenario, args.set))
    if args.json:
        print(json.dumps(est.to_dict(), indent=2))
    else:
        print(render_estimate(est))
    return 0


def _catalog(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from workbench.catalog import CATALOGS

    table = CATALOGS[args.kind]
    if args.json:
        print(json.dumps({k: asdict(v) for k, v in table.items()}, indent=2))
    else:
        for key, rec in table.items():
            print(f"{key:26} {rec.name}")
    return 0


def _dashboard(args: argparse.Namespace) -> int:
    from workbench.serve import serve_dashboard

    return serve_dashboard(port=args.port, open_browser=False)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="workbench", description="Plan distributed training before renting GPUs.")
    sub = p.add_subparsers(dest="verb", required=True, parser_class=_Parser)
    e = sub.add_parser("estimate", help="per-GPU memory (and more) for a scenario file")
    e.add_argument("scenario", help="scenario file (YAML or JSON)")
    e.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a field, e.g. --set parallel.tp=8 (repeatable)")
    e.add_argument("--json", action="store_true", help="print one JSON object")
    e.set_defaults(run=_estimate)
    c = sub.add_parser("catalog", help="list catalog entries")
    c.add_argument("kind", choices=["gpu", "link", "cpu", "memory", "drive", "model"])
    c.add_argument("--json", action="store_true")
    c.set_defaults(run=_catalog)
    d = sub.add_parser("dashboard", help="serve notebooks/dashboard.ipynb with Voila on 127.0.0.1")
    d.add_argument("--port", type=int, default=0, help="port (0 = a free one)")
    d.set_defaults(run=_dashboard)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except ScenarioError as exc:
        print(f"workbench: invalid scenario: {exc.one_line()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130

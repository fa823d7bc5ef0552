"""`workbench` command line: estimate, trial, plan, export, import, monitor, bench, calibrate,
report, catalog, dashboard (docs/cli.md, generated from the parser; JSON keys in docs/json.md).

``parser`` defines the verbs and their options (``workbench.cli_options``: the range-checked
types, which the verbs' own argument builders in bench/, calibrate/ and proof/ use too;
``reference``: docs/cli.md from the parser), ``verbs`` runs the planning verbs and ``trial``
the trial verb; ``main`` dispatches. Invalid input exits with code 2 and one line on stderr,
never a traceback.
"""
from __future__ import annotations

import os
import sys

from workbench.cli.parser import build_parser
from workbench.errors import ScenarioError


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    verb = argv[0] if argv and not argv[0].startswith("-") else None
    args = build_parser(verb).parse_args(argv)
    try:
        return args.run(args)
    except ScenarioError as exc:
        what = "option" if exc.problems[0].path.startswith("--") else "scenario"
        print(f"workbench: invalid {what}: {exc.one_line()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader (e.g. `| head`) closed the pipe: stop quietly, as coreutils do; point stdout
        # at /dev/null so the interpreter's final flush does not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141

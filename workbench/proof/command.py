"""The ``workbench report`` verb: run the standard matrix of trials and print the comparison."""
from __future__ import annotations

import argparse
import json
import sys


def add_arguments(r: argparse.ArgumentParser) -> None:
    from workbench.cli_options import integer

    r.add_argument("--calibration", default=None, metavar="FILE",
                   help="this machine's profile (workbench calibrate); default: measure a "
                        "quick one first (38 s here)")
    r.add_argument("--quick", action="store_true",
                   help="the CI subset: one trial per technique and composition depth")
    r.add_argument("--only", default=None, metavar="LABEL[;LABEL...]",
                   help="run only these trials of the matrix (labels as printed)")
    r.add_argument("--steps", type=integer(4, 1000, " (a warm-up step, the measured step and "
                                                  "two timed ones at least)"),
                   default=8, metavar="N",
                   help="steps per trial (default 8; step time is the median of every step but "
                        "the first and the measured one)")
    r.add_argument("--detail", action="store_true",
                   help="also print every row of every trial (per rank and component)")
    r.add_argument("--json", action="store_true", help="print the rows as one JSON object")
    r.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from workbench.hardware.calibration import load_profile
    from workbench.errors import ScenarioError, shown
    from workbench.proof.matrix import MATRIX, QUICK, run_matrix
    from workbench.proof.render import HEADER, matrix_line, summary, trial_rows

    cases = QUICK if args.quick else MATRIX
    if args.only:
        wanted = [w.strip() for w in args.only.split(";")]
        unknown = [w for w in wanted if w not in {c.label for c in MATRIX}]
        if unknown:
            print(f"workbench report: --only: unknown trial {unknown[0]!r}; choose from: "
                  + "; ".join(c.label for c in MATRIX), file=sys.stderr)
            return 2
        cases = tuple(c for c in MATRIX if c.label in wanted)
    text = not args.json
    if args.calibration:
        try:
            profile = load_profile(args.calibration)
        except ScenarioError as exc:   # not a regular file, malformed text, a field out of range
            print(f"workbench report: --calibration {shown(args.calibration)}: "
                  f"{exc.one_line()}", file=sys.stderr)
            return 2
        source = args.calibration
    else:
        from workbench.calibrate.measure import measure_profile

        if text:
            print("# calibrating this machine (quick profile)", flush=True)
        profile = measure_profile(quick=True)
        source = "a quick calibration measured just now"
    if text:
        print(f"# step time predicted on the profile from {source} ({profile.date})")
        print(HEADER, flush=True)
    outcomes = []
    for out in run_matrix(cases, profile, steps=args.steps):
        outcomes.append(out)
        if text:
            print(matrix_line(out), flush=True)
            if args.detail and out.rows:
                print("\n".join("    " + ln for ln in trial_rows(out.rows)), flush=True)
    if text:
        print()
        print("\n".join(summary(outcomes)))
    else:
        print(json.dumps({"calibration": source, "trials": [
            {"label": o.case.label, "depth": o.case.depth, "model": o.case.model,
             "parallel": o.case.parallel, "error": o.error,
             "rows": [{"rank": r.rank, "component": r.component, "predicted": r.predicted,
                       "measured": r.measured, "error": r.error, "bound": r.bound,
                       "ok": r.ok} for r in o.rows]} for o in outcomes]}, indent=1))
    return 0 if all(o.error is None for o in outcomes) else 1

"""Fuzz the command line with thousands of hostile inputs; count how each ended.

    .venv/bin/python benchmarks/hostile_fuzz.py [--cases 4000] [--seed 1] [--timeout 30]
                                                [--real 200]

Cases (tests/hostile.py): scenario documents with hostile fields, and with numeric fields at the
edges of their ranges (estimate, plan, export to every target; exported launch scripts are then
run with stub launchers), hostile ``--set`` overrides,
hostile option values for every verb, inline GPUs and MoE capacity factors at the far ends of the
float range, ``--set`` values with YAML tags PyYAML cannot construct (estimate, plan, export,
trial, monitor), bench message sizes past every range, calibration profiles with hostile
values in their measurement tables, and special files (alias bombs, 5000-deep nesting, 3 MB,
binary, FIFOs, /dev/zero, /proc/self/mem, directories, a symlink loop). ``workbench import``
(tests/hostile_imports.py, 45 % of the drawn cases): every format's real configs mutated
hostilely (``import``), runs' files that contradict each other (``imp-pair``), ``--format`` and
``-o`` hostile (``imp-opt``), special files as inputs (``imp-file``); an import that succeeds
must print a scenario ``load_scenario`` reads (else ``broken``). Each runs in a forked
child with a 6 GiB address-space limit and a deadline; ``--real N`` runs N of them again as
fresh ``python -m workbench`` processes to show the fork runner sees what a user sees.

Prints the counts per verdict and per kind, the defects grouped by where they happened (verdict,
kind, exception and the innermost frame of the product), the first 50 with their argv and last
stderr line, and exits 1 when there is one.
A final check, a second after the last case, looks for any process still in a case's session.
"""
from __future__ import annotations

import argparse
import collections
import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.hostile import (  # noqa: E402
    Case, bench_size_case, calibration_case, document_case, edge_case, example_docs,
    extreme_case, option_case, override_case, run_case, session_leftovers, special_file_cases,
    tag_override_case,
)
from tests.hostile_imports import (  # noqa: E402
    import_bases, import_case, import_option_case, import_pair_case, import_special_cases,
)

GOOD = ("ok", "refused")
_FRAME = re.compile(r'File "([^"]*workbench/[^"]*)", line (\d+), in (\w+)')


def signature(case: Case, out) -> str:
    """Where a defect happened: verdict, kind, and for a traceback its exception and the
    innermost frame inside the workbench package (what one fix addresses)."""
    if out.verdict != "traceback":
        return f"{out.verdict} {case.kind}"
    lines = out.stderr.strip().splitlines() or [""]
    frames = _FRAME.findall(out.stderr)
    where = ""
    if frames:
        path, line, func = frames[-1]
        where = f" at {path[path.rindex('workbench/'):]}:{line} {func}"
    return f"traceback {case.kind}: {lines[-1].split(':')[0][:60]}{where}"


def cases(n: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    docs = example_docs()
    special = special_file_cases() + import_special_cases()
    out = list(special)
    makers = (document_case, edge_case, override_case, option_case, extreme_case,
              tag_override_case, bench_size_case, calibration_case,
              import_case, import_pair_case, import_option_case)
    # the verbs before `import` keep their proportions in 55 % of the draws
    weights = tuple(w * 0.55 for w in (0.25, 0.15, 0.20, 0.10, 0.10, 0.08, 0.04, 0.08)) \
        + (0.25, 0.10, 0.10)
    while len(out) < n:
        out.append(rng.choices(makers, weights)[0](rng, docs))
    return out[:n] if n >= len(special) else out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--real", type=int, default=200,
                    help="cases also run as fresh processes (a sample)")
    args = ap.parse_args()
    from workbench.cli import main as _warm   # noqa: F401 - imported once, before the forks
    import workbench.estimate, workbench.plan, workbench.export   # noqa: E401,F401
    import workbench.imports.merge   # noqa: F401 - the readers load on use, in each fork
    import_bases()                   # the exports the import cases start from, made once

    sessions = []
    todo = cases(args.cases, args.seed)
    counts: collections.Counter = collections.Counter()
    by_kind: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    defects = []
    slowest = (0.0, None)
    started = time.monotonic()
    for i, case in enumerate(todo):
        out = run_case(case, args.timeout)
        sessions.append(out.pid)
        counts[out.verdict] += 1
        by_kind[case.kind][out.verdict] += 1
        slowest = max(slowest, (out.seconds, case), key=lambda x: x[0])
        if out.verdict not in GOOD:
            defects.append((case, out))
        if (i + 1) % 500 == 0:
            print(f"# {i + 1} cases, {time.monotonic() - started:.0f} s: {dict(counts)}",
                  flush=True)
    real = collections.Counter()
    agree = 0
    # an argument with a NUL byte cannot reach a fresh process (exec takes C strings): a user
    # cannot type one either, so those stay fork-only
    passable = [c for c in todo if not any("\x00" in a for a in c.argv)]
    sample = random.Random(args.seed + 1).sample(passable, min(args.real, len(passable)))
    for case in sample:
        fork = run_case(case, args.timeout)
        proc = run_case(case, args.timeout, subprocess_cli=True)
        sessions += [fork.pid, proc.pid]
        real[proc.verdict] += 1
        agree += fork.verdict == proc.verdict and fork.code == proc.code
        if proc.verdict not in GOOD:
            defects.append((case, proc))
    time.sleep(1.0)
    left = session_leftovers(*sessions)

    total = time.monotonic() - started
    print(f"{len(todo)} cases in {total:.0f} s (seed {args.seed}, deadline {args.timeout:g} s "
          f"each); slowest {slowest[0]:.1f} s: {slowest[1].describe() if slowest[1] else ''}")
    print("verdicts: " + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    for kind, c in sorted(by_kind.items()):
        print(f"  {kind:9} " + ", ".join(f"{k} {v}" for k, v in c.most_common()))
    print(f"fresh processes: {sum(real.values())} cases, " + ", ".join(
        f"{k} {v}" for k, v in real.most_common()) + f"; same verdict and exit status as the "
        f"fork in {agree}")
    print(f"processes left behind: {len(left)}")
    groups = collections.Counter(signature(case, out) for case, out in defects)
    for sig, n in groups.most_common():
        print(f"DEFECTS x{n}: {sig}")
    for case, out in defects[:50]:
        last = (out.stderr.strip().splitlines() or [""])[-1]
        print(f"DEFECT {out.verdict}: {case.kind}: {case.describe()!r} -> exit {out.code}: "
              f"{last[:200]!r}")
    return 1 if defects or left else 0


if __name__ == "__main__":
    sys.exit(main())

"""The planning verbs: estimate, plan, export, import, catalog, dashboard and monitor, each
reading its parsed arguments and printing its answer (the trial verb: ``cli.trial``). Each
imports what it runs when it runs."""
from __future__ import annotations

import argparse
import json
import sys
import time

from workbench.errors import ScenarioError, printable


def run_estimate(args: argparse.Namespace) -> int:
    from workbench.estimate import estimate
    from workbench.plan.next_steps import searched_verdict
    from workbench.render.text import render_estimate
    from workbench.scenario import load_scenario

    est = estimate(load_scenario(args.scenario, args.set))
    # the planner's next steps only when memory does not fit (searched_verdict)
    v = searched_verdict(est.scenario, est)
    if args.json:
        print(json.dumps(est.to_dict(v), indent=2))
    else:
        print(render_estimate(est, v))
    return 0


def run_plan(args: argparse.Namespace) -> int:
    from workbench.plan import Constraints, plan
    from workbench.plan.explain import describe_start, explain
    from workbench.render.text import settings_text, table_text
    from workbench.scenario import load_scenario

    scenario = load_scenario(args.scenario, args.set, layout_required=False)
    c = Constraints.parse(args.fix, args.max_memory_fraction, args.engines, args.optimizers)
    c = Constraints(fixed=c.fixed, max_memory_fraction=c.max_memory_fraction,
                    gpu_counts=tuple(args.gpu_counts or ()), engines=c.engines,
                    optimizers=c.optimizers)
    shown = {"at": 0.0}
    started = time.monotonic()

    def progress(fraction: float, what: str) -> None:
        # a bar on stderr once the search outlasts a blink (0.3 s); --json stays clean
        if (not args.json and sys.stderr.isatty() and time.monotonic() - started > 0.3
                and fraction - shown["at"] >= 0.1):
            shown["at"] = fraction
            bar = "#" * int(30 * fraction)
            print(f"\rsearching [{bar:30}] {fraction:4.0%} {what:30}", end="", file=sys.stderr,
                  flush=True)

    result = plan(scenario, c, progress)
    if shown["at"]:
        print(file=sys.stderr)
    from workbench.plan.summary import fold_virtual_stages, limit_sentence, plan_sentence

    if args.json:
        print(json.dumps(result.to_dict(args.top), indent=2))
        return 0
    n = result.counts
    print(plan_sentence(result))
    print(f"{scenario.model.name} on {scenario.hardware.world} x {scenario.hardware.gpu.name}: "
          f"{n['candidates']:,} candidate layouts{settings_text(n)}, {n['valid']:,} valid, "
          f"{n['fit']:,} fit, {n['rows']:,} ranked rows (a layout once per recompute and "
          f"offload that fits it) ({result.seconds:.2f} s)")
    print(limit_sentence(result))
    cols = ["rank", "dp", "tp", "pp", "cp", "ep", "zero", "sequence_parallel", "pp_schedule",
            "virtual_stages", "micro_batch", "recompute", "offload", "step", "tokens_per_s",
            "mfu", "memory_gib", "device_gib", "headroom_gib", "fit"]
    t = result.ranked
    if not args.unfold:
        t = fold_virtual_stages(t, args.top)
        if any(k > 1 for k in t["folded"]):
            cols[cols.index("rank") + 1:cols.index("rank") + 1] = ["ranks"]
            print("rows that differ only in virtual stages are folded into one: v is their "
                  "range, ranks the ranks folded, the figures the fastest one's (--unfold "
                  "shows each)")
    # the engine and switch columns, shown when a row of the table leaves the generic default
    for col, default in (("engine", "generic"), ("compile", False), ("async_tp", False),
                         ("tp_comm_overlap", False), ("fp8_recipe", None),
                         ("optimizer", scenario.training.optimizer), ("expert_tp", None)):
        if any(v != default for v in list(t[col][:args.top])):
            cols.insert(cols.index("step"), col)
    names = {"sequence_parallel": "sp", "pp_schedule": "schedule", "virtual_stages": "v",
             "micro_batch": "mb", "step": "step_s"}
    print(table_text({names.get(c, c): t[c] for c in cols}, args.top))
    print("\nwhy:")
    for line in explain(result):
        print("  " + line)
    if result.start is not None:
        print("\n" + describe_start(result))
    if result.by_gpu_count:
        print("\nbest tokens/s by GPU count: " + ", ".join(
            f"{d['gpus']}: {d['tokens_per_s']:,.0f}" for d in result.by_gpu_count))
    return 0


def run_export(args: argparse.Namespace) -> int:
    from workbench.export import ExportError, Source, export
    from workbench.scenario import load_scenario

    scenario = load_scenario(args.scenario, args.set)
    try:
        text = export(scenario, args.to, Source(args.scenario, tuple(args.set)))
    except ExportError as exc:   # a valid scenario the target cannot express
        print(f"workbench: cannot export to {args.to}: {exc.one_line()}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    for note in getattr(text, "warnings", ()):    # also said in the file, as comments
        print(f"workbench: note: {note}", file=sys.stderr)
    return 0


def run_import(args: argparse.Namespace) -> int:
    from workbench.imports import import_configs
    from workbench.imports.show import imported_text, write_output

    out = import_configs(args.files, args.format)
    if out.problems:       # one line each: the reader's, the merge's or the validator's
        for p in out.problems:
            print(f"workbench: import: {p}", file=sys.stderr)
        return 2
    text = json.dumps(out.to_dict(), indent=2) + "\n" if args.json else imported_text(out)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        target = write_output(args.output, text, args.files)
    except ScenarioError as exc:     # a folder, a full device, a FIFO nobody reads, ...
        print(f"workbench: import: {exc.problems[0]}", file=sys.stderr)
        return 2
    print(f"workbench: wrote {printable(str(target))}", file=sys.stderr)
    return 0


def run_catalog(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from workbench.catalog import CATALOGS

    table = CATALOGS[args.kind]
    if args.json:
        print(json.dumps({k: asdict(v) for k, v in table.items()}, indent=2))
    else:
        for key, rec in table.items():
            print(f"{key:26} {rec.name}")
    return 0


def run_dashboard(args: argparse.Namespace) -> int:
    from workbench.serve import serve_dashboard

    return serve_dashboard(port=args.port)


def run_monitor(args: argparse.Namespace) -> int:
    from workbench.monitor.monitor import run_monitor
    from workbench.scenario import load_scenario

    scenario = load_scenario(args.scenario, args.set)
    return run_monitor(scenario, host=args.host, port=args.port, interval=args.interval,
                       duration=args.duration)

"""`workbench` command line: estimate, trial, plan, export, import, monitor, bench, calibrate,
report, catalog, dashboard (docs/cli.md, generated from this parser; JSON keys in docs/json.md).

Invalid input exits with code 2 and one line on stderr, never a traceback.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from workbench.errors import Problem, ScenarioError, printable


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too)
        # argparse quotes some values raw ("unrecognized arguments: ..."): escape them
        self.exit(2, f"{self.prog}: error: {printable(message, 400)}\n")


def _estimate(args: argparse.Namespace) -> int:
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


def _trial(args: argparse.Namespace) -> int:
    from workbench.scenario import load_scenario
    from workbench.trial import prepare_for, run_trial
    from workbench.trial.slots import hold_for_cli

    scenario = load_scenario(args.scenario, args.set)
    if args.inject and not 0 <= args.step < args.steps:
        raise ScenarioError([Problem("--step", args.step,
                                     f"must be a step of the trial (0..{args.steps - 1})")])
    inject = {}
    if args.inject:
        inject = {"inject": args.inject, "inject_rank": args.rank, "inject_step": args.step}
    live = endpoint = None
    ready = prepare_for(scenario, args.world_size, args.backend, args.shape)
    if args.metrics_port is not None:
        from workbench.monitor.exporter import Endpoint
        from workbench.monitor.trial_metrics import TrialMetrics

        # a slice on GPUs has a step-time plan: its estimate on that GPU
        live = TrialMetrics(ready.scenario, on_gpu=ready.backend == "nccl" and ready.sliced)
        endpoint = Endpoint(live.metrics, port=args.metrics_port)
        print(f"metrics: {endpoint.url}", file=sys.stderr, flush=True)
        if args.stream:
            print(json.dumps({"type": "metrics", "url": endpoint.url}), flush=True)

    def show(ev: dict) -> None:
        if live is not None:
            live.observe(ev)
        if args.stream:             # one JSON event per line, for a live view in another process
            print(json.dumps(ev), flush=True)
            return
        if not args.json and ev["type"] == "step":
            loss = "" if ev.get("loss") is None else f" loss {ev['loss']:.4f}"
            print(f"rank {ev['rank']:2} step {ev['step']}: {ev['time'] * 1000:8.1f} ms{loss}",
                  flush=True)
        elif not args.json and ev["type"] == "start":
            print(f"{ev['world_size']} processes, {ev['backend']} ({ev['start_method']})",
                  flush=True)

    try:
        # the machine-wide trial queue (workbench/trial/slots.py): GPUs for nccl, else cores
        with hold_for_cli(ready.backend, ready.scenario.parallel.world):
            result = run_trial(scenario, world_size=args.world_size, steps=args.steps,
                               backend=args.backend, on_event=show, shape=args.shape,
                               prepared=ready, **inject)
        if endpoint is not None and args.metrics_linger:
            time.sleep(args.metrics_linger)     # a scraper sees the last values
    finally:
        if endpoint is not None:
            endpoint.close()
    comparison = None
    if result.shape == "slice" and result.error is None and result.steps:
        from workbench.proof.slice_compare import slice_rows

        comparison = slice_rows(result)
    doc = result.to_dict()
    if comparison is not None:
        doc["comparison"] = [r.as_dict() for r in comparison]
    if args.stream:
        print(json.dumps({"type": "result", "result": doc}), flush=True)
    elif args.json:
        print(json.dumps(doc, indent=2))
    else:
        for r in result.ranks():
            m, p = r["measured"], r["predicted"]
            if m["params"] is None:
                continue
            print(f"rank {r['rank']:2}: " + ", ".join(
                f"{k} {m[k]:,.0f} B (predicted {p.get(k, 0):,.0f})"
                for k in ("params", "grads", "optimizer", "activations"))
                + (f" [params frozen {m['params_frozen']:,.0f} B, trainable "
                   f"{m['params_trainable']:,.0f} B]" if m.get("params_frozen") else ""))
        print(fine_tuning_line(result.fine_tuning()))
        if comparison is not None:
            from workbench.proof.slice_compare import render_rows

            m, dev = result.scenario.model, result.ran_on()
            print(f"\n{dev.get('device_name', dev.get('device', 'cpu'))} ({dev.get('precision_ran', '')}): "
                  f"{m.name}, hidden {m.hidden}, seq {result.scenario.training.seq_len}, "
                  f"micro-batch {result.scenario.training.micro_batch}; measured against the "
                  f"estimate of this slice ({result.scenario.training.engine} conventions)")
            print(render_rows(comparison))
        for note in result.notes:
            print(f"note: {note}")
        if result.error:
            print(f"trial failed: {result.error}")
    return 1 if result.error else 0


def fine_tuning_line(ft: dict) -> str:
    """One line: the trial's method (LoRA: rank, alpha, targets, parts trained in full), its
    optimizer and how many parameters train."""
    text = f"method {ft['method']}"
    lora = ft.get("lora")
    if lora:
        text += (f": rank {lora['rank']}, alpha {lora['alpha']:g}, targets "
                 f"{', '.join(lora['targets'])}")
        if lora["trainable"]:
            text += f", also trained: {', '.join(lora['trainable'])}"
        if "quant" in lora:
            text += f", base {lora['quant']}" + (" (double quant)" if lora["double_quant"]
                                                  else "")
    text += f"; optimizer {ft['optimizer']}"
    if "parameters" in ft:
        share = ft["trainable_parameters"] / ft["parameters"] if ft["parameters"] else 0.0
        text += (f"; trainable parameters {ft['trainable_parameters']:,} of "
                 f"{ft['parameters']:,} ({share:.2%})")
    return text


def _plan(args: argparse.Namespace) -> int:
    from workbench.plan import Constraints, plan
    from workbench.plan.explain import describe_start, explain
    from workbench.render.text import settings_text, table_text
    from workbench.scenario import load_scenario

    scenario = load_scenario(args.scenario, args.set, layout_required=False)
    c = Constraints.parse(args.fix, args.max_memory_fraction, args.engines, args.optimizers)
    c = Constraints(fixed=c.fixed, max_memory_fraction=c.max_memory_fraction,
                    gpu_counts=tuple(args.gpu_counts or ()), engines=c.engines,
                    optimizers=c.optimizers)
    import time

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
            "mfu", "memory_gib", "device_gib", "headroom_gib"]
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


def _export(args: argparse.Namespace) -> int:
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


def _import(args: argparse.Namespace) -> int:
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

    return serve_dashboard(port=args.port)


def _monitor(args: argparse.Namespace) -> int:
    from workbench.monitor.monitor import run_monitor
    from workbench.scenario import load_scenario

    scenario = load_scenario(args.scenario, args.set)
    return run_monitor(scenario, host=args.host, port=args.port, interval=args.interval,
                       duration=args.duration)


# A trial proves a layout in a few steps on this machine: more processes than this, or more
# steps, is a mistake (or a run that would never end), not a proof.
MAX_TRIAL_RANKS = 256
MAX_TRIAL_STEPS = 1000


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser. ``verb``: fill in only that verb's options (the others are listed
    with their help), so a verb imports what it needs and no more (``plan`` and ``estimate``
    never load the trial runner, the calibration or the monitor); None: every verb's."""
    from workbench.cli_options import PORT, integer, number
    from workbench.export import TARGETS   # light: each exporter module loads on use
    from workbench.headroom import DEFAULT_MEMORY_FRACTION, MEMORY_FRACTION_WHY   # light

    p = _Parser(prog="workbench", description="Plan distributed training before renting GPUs.")
    sub = p.add_subparsers(dest="verb", required=True, parser_class=_Parser)
    e = sub.add_parser("estimate", help="per-GPU memory (and more) for a scenario file")
    e.add_argument("scenario", help="scenario file (YAML or JSON)")
    e.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a field, e.g. --set parallel.tp=8 (repeatable)")
    e.add_argument("--json", action="store_true", help="print one JSON object")
    e.set_defaults(run=_estimate)
    t = sub.add_parser("trial", help="run the layout on a scaled-down model in real processes")
    t.add_argument("scenario", help="scenario file (YAML or JSON)")
    t.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a field, e.g. --set parallel.tp=8 (repeatable)")
    t.add_argument("--world-size", type=integer(1, MAX_TRIAL_RANKS, " processes on this machine"),
                   default=None,
                   help="run a sub-layout with this many processes (default: the layout's)")
    t.add_argument("--steps", type=integer(1, MAX_TRIAL_STEPS), default=3,
                   help=f"training steps to run and measure (1..{MAX_TRIAL_STEPS})")
    t.add_argument("--backend", choices=["auto", "gloo", "nccl"], default="auto",
                   help="process-group backend (auto: nccl when every rank has a CUDA GPU)")
    t.add_argument("--shape", choices=["auto", "slice", "small"], default="auto",
                   help="the model that runs: small = scaled down (proves bytes), slice = the "
                   "real widths with as many layers as fit (proves time too); auto: a slice on "
                   "GPUs, small on the CPU")
    t.add_argument("--inject", choices=["kill", "raise", "hang"], default=None,
                   help="fault injection: what rank --rank does at step --step")
    t.add_argument("--rank", type=integer(0, MAX_TRIAL_RANKS - 1), default=0,
                   help="the rank --inject acts on")
    t.add_argument("--step", type=integer(0, MAX_TRIAL_STEPS - 1), default=1,
                   help="the step at which --inject acts")
    t.add_argument("--json", action="store_true", help="print one JSON object (keys: docs/json.md)")
    t.add_argument("--stream", action="store_true",
                   help="print every event as one JSON line, then the result (for live views)")
    t.add_argument("--metrics-port", type=PORT, default=None, metavar="PORT",
                   help="serve every rank's figures and the plan for Prometheus on "
                   "127.0.0.1:PORT while the trial runs (0: a free port; the URL goes to "
                   "stderr as 'metrics: URL')")
    t.add_argument("--metrics-linger", type=number(0, 3600), default=0.0, metavar="SECONDS",
                   help="keep the metrics endpoint up this long after the trial ends")
    t.set_defaults(run=_trial)
    pl = sub.add_parser("plan", help="rank every parallel layout of the scenario's hardware")
    pl.add_argument("scenario", help="scenario file; its parallel block is optional (a "
                                     "starting point)")
    pl.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                    help="override a field, e.g. --set training.seq_len=8192 (repeatable)")
    pl.add_argument("--top", type=integer(1, 100_000), default=10, help="layouts shown (default 10)")
    pl.add_argument("--fix", action="append", default=[], metavar="FIELD=VALUE",
                    help="fix a layout field, e.g. --fix tp=8 --fix recompute=none; "
                    "--fix shard_group=8 pins an HSDP group, shard_group=0 none; --fix "
                    "expert_tp=1 pins MoE parallel folding's expert TP")
    pl.add_argument("--max-memory-fraction", type=float, default=DEFAULT_MEMORY_FRACTION,
                    help="share of GPU memory (as nvidia-smi counts it) a layout may use (default "
                    f"{DEFAULT_MEMORY_FRACTION:g}: {MEMORY_FRACTION_WHY})")
    pl.add_argument("--engines", metavar="all|NAME,NAME",
                    help="search these engines instead of the scenario's training.engine: a "
                    "comma-separated list of generic, megatron, torchtitan, deepspeed, fsdp, "
                    "nanotron, torchtune, hf, or all (every one but generic, the idealised "
                    "stack)")
    pl.add_argument("--optimizers", metavar="all|NAME,NAME",
                    help="also search these optimizers (each where the engine builds it): a "
                    "comma-separated list of adamw, sgd, adamw8bit, paged_adamw8bit, adamw4bit, "
                    "adafactor, or all")
    pl.add_argument("--gpu-counts", type=integer(1, 10_000_000), nargs="*", metavar="N",
                    help="also search these GPU counts (throughput against GPU count)")
    pl.add_argument("--unfold", action="store_true",
                    help="show every ranked layout; by default rows that differ only in "
                    "virtual stages are folded into one showing their range")
    pl.add_argument("--json", action="store_true", help="print one JSON object (keys: docs/json.md)")
    pl.set_defaults(run=_plan)
    x = sub.add_parser("export", help="print the layout as a torchrun/Slurm/torchtitan/"
                                      "DeepSpeed/Megatron-LM artefact (or the trial command), "
                                      "a fine-tuning run as a torchtune config or PEFT "
                                      "LoraConfig, or its Grafana dashboard / Prometheus alert "
                                      "rules")
    x.add_argument("scenario", help="scenario file (YAML or JSON)")
    x.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a field, e.g. --set parallel.tp=8 (repeatable)")
    x.add_argument("--to", required=True, choices=list(TARGETS),
                   help="what to print: " + ", ".join(TARGETS))
    x.set_defaults(run=_export)
    im = sub.add_parser("import", help="read your own configs (Accelerate YAML, TrainingArguments "
                                       "/ SFTConfig, DeepSpeed JSON, config.json, ...) into a "
                                       "scenario, saying which fields were defaulted")
    im.add_argument("files", nargs="+", metavar="FILE",
                    help="config files, read together (a Hugging Face model id the catalog has "
                    "may stand for a config.json)")
    from workbench.imports import FORMATS   # light: each reader module loads on use

    im.add_argument("--format", default=None, choices=list(FORMATS),
                    help="read every FILE as this format instead of detecting it")
    im.add_argument("-o", "--output", default=None, metavar="SCENARIO",
                    help="write the scenario to this file (not one of the FILEs) instead of "
                    "printing it")
    im.add_argument("--json", action="store_true",
                    help="print one JSON object: scenario, defaulted, stated, notes")
    im.set_defaults(run=_import)

    def wanted(name: str) -> bool:
        return verb is None or verb == name

    b = sub.add_parser("bench", help="time collectives nccl-tests-style: algbw and busbw per "
                                     "size and world size")
    if wanted("bench"):
        from workbench.bench.command import add_arguments as add_bench_arguments
        add_bench_arguments(b)
    cal = sub.add_parser("calibrate", help="measure this machine (GEMMs, memory, eager runtime, "
                                           "collectives) into a profile usable as hardware.gpu")
    if wanted("calibrate"):
        from workbench.calibrate.command import add_arguments as add_calibrate_arguments
        add_calibrate_arguments(cal)
    rep = sub.add_parser("report", help="run the standard matrix of trials and compare each "
                                        "with the estimate")
    if wanted("report"):
        from workbench.proof.command import add_arguments as add_report_arguments
        add_report_arguments(rep)
    c = sub.add_parser("catalog", help="list catalog entries")
    c.add_argument("kind", choices=["gpu", "link", "cpu", "memory", "drive", "model"],
                   help="which catalog")
    c.add_argument("--json", action="store_true", help="every entry with its figures and source")
    c.set_defaults(run=_catalog)
    d = sub.add_parser("dashboard", help="serve notebooks/dashboard.ipynb with Voila on 127.0.0.1")
    d.add_argument("--port", type=PORT, default=0, help="port (0 = a free one)")
    d.set_defaults(run=_dashboard)
    mo = sub.add_parser("monitor", help="serve the scenario's plan and this machine's GPU "
                                        "telemetry as Prometheus metrics (docs/monitoring.md)")
    if not wanted("monitor"):
        return p
    from workbench.monitor.monitor import DEFAULT_INTERVAL_S, DEFAULT_PORT   # light

    mo.add_argument("scenario", help="scenario file (YAML or JSON) of the run being watched")
    mo.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                    help="override a field, e.g. --set parallel.tp=8 (repeatable)")
    mo.add_argument("--port", type=PORT, default=DEFAULT_PORT,
                    help="port of /metrics (0 = a free one; 9400 is left to dcgm-exporter)")
    mo.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (127.0.0.1: this machine only; 0.0.0.0 for a "
                    "Prometheus elsewhere, no authentication; an empty one is refused)")
    mo.add_argument("--interval", type=number(0.05, 86_400), default=DEFAULT_INTERVAL_S,
                    metavar="SECONDS",
                    help="seconds between GPU telemetry samples")
    mo.add_argument("--duration", type=number(0, 31_536_000, why=" (a year)"), default=None,
                    metavar="SECONDS",
                    help="stop after this many seconds (default: until SIGINT or SIGTERM)")
    mo.set_defaults(run=_monitor)
    return p


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

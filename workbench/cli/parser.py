"""The command line's parser: every verb, its options and which function runs it. A verb's own
options are filled in only when that verb runs (``build_parser(verb)``), so a verb imports what
it needs and no more (``plan`` and ``estimate`` never load the trial runner, the calibration or
the monitor)."""
from __future__ import annotations

import argparse

from workbench.cli.trial import run_trial
from workbench.cli.verbs import (
    run_catalog, run_dashboard, run_estimate, run_export, run_import, run_monitor, run_plan,
)
from workbench.errors import printable


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too)
        # argparse quotes some values raw ("unrecognized arguments: ..."): escape them
        self.exit(2, f"{self.prog}: error: {printable(message, 400)}\n")


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

    p = Parser(prog="workbench", description="Plan distributed training before renting GPUs.")
    sub = p.add_subparsers(dest="verb", required=True, parser_class=Parser)
    e = sub.add_parser("estimate", help="per-GPU memory (and more) for a scenario file")
    e.add_argument("scenario", help="scenario file (YAML or JSON)")
    e.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a field, e.g. --set parallel.tp=8 (repeatable)")
    e.add_argument("--json", action="store_true", help="print one JSON object")
    e.set_defaults(run=run_estimate)
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
    t.set_defaults(run=run_trial)
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
    pl.add_argument("--max-memory-fraction", type=float, default=None,
                    help="share of GPU memory (as nvidia-smi counts it) a layout may use "
                    f"(default: {MEMORY_FRACTION_WHY}; without a measured band "
                    f"{DEFAULT_MEMORY_FRACTION:g})")
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
    pl.set_defaults(run=run_plan)
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
    x.set_defaults(run=run_export)
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
    im.set_defaults(run=run_import)

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
    c.set_defaults(run=run_catalog)
    d = sub.add_parser("dashboard", help="serve notebooks/dashboard.ipynb with Voila on 127.0.0.1")
    d.add_argument("--port", type=PORT, default=0, help="port (0 = a free one)")
    d.set_defaults(run=run_dashboard)
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
    mo.set_defaults(run=run_monitor)
    return p

"""The trial verb: run the layout on a scaled-down model (or a slice of the real one) in real
processes, stream its events, serve its metrics, and print the measurement beside the
estimate."""
from __future__ import annotations

import argparse
import json
import sys
import time

from workbench.errors import Problem, ScenarioError


def run_trial(args: argparse.Namespace) -> int:
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

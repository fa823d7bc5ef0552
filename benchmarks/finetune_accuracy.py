"""Fine-tuning estimates against published, measured runs (full fine-tuning, LoRA, QLoRA).

Reads benchmarks/data/published_finetune.yaml (each record: source, model, hardware, layout,
method and settings, and what the source measured: peak memory and/or tokens/s or step time),
estimates each run and compares:
- peak memory: against the estimate's figure of the kind the source reports (``memory_kind``:
  allocated -> memory.per_gpu.total, reserved -> reserved, device -> device (nvidia-smi);
  unknown -> reserved, the middle of the three, and the row says so);
- speed: tokens/s per GPU (or step time), error = estimated tokens/s / measured - 1.
Nothing in the estimator is fitted to these runs, so the error per organisation is the error
on runs it never saw. Beside the estimate, on the same speed rows: the naive "40 % MFU" rule
(tokens/s = 0.4 x peak / (6 N) for full fine-tuning, / (4 N) for LoRA and QLoRA, whose frozen
weights get no weight gradients).

    .venv/bin/python benchmarks/finetune_accuracy.py           # table + summary
    .venv/bin/python benchmarks/finetune_accuracy.py --json    # rows
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from workbench.errors import ScenarioError  # noqa: E402
from workbench.estimate import estimate  # noqa: E402
from workbench.estimate.efficiency import peak_flops  # noqa: E402
from workbench.estimate.params import active_params  # noqa: E402
from workbench.scenario import parse_scenario  # noqa: E402
from workbench.units import GiB  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "published_finetune.yaml"
KIND = {"allocated": "total", "reserved": "reserved", "device": "device", "unknown": "reserved"}
ORGANISATIONS = {"torchtune": "Meta (torchtune)", "litgpt": "Lightning AI", "peft": "Hugging Face",
                 "qwen": "Alibaba (Qwen)"}


def to_scenario(rec: dict) -> dict:
    """The scenario a record describes (keys the scenario does not have yet are left out:
    ``training.backend``, the Accelerate back end, belongs to the Hugging Face engine's issue)."""
    training = {k: v for k, v in rec["training"].items() if k != "backend"}
    training.setdefault("tokens", 1e9)
    return {"hardware": rec["hardware"], "model": rec["model"],
            "parallel": rec.get("parallel", {}), "training": training}


def compare(rec: dict) -> dict:
    """One record's estimate against its measurements."""
    row = {"id": rec["id"], "organisation": ORGANISATIONS.get(rec["id"].split("-")[0], "?"),
           "method": rec["training"].get("method", "full"),
           "gpu": rec["hardware"]["gpu"] if isinstance(rec["hardware"]["gpu"], str) else "inline"}
    try:
        s = parse_scenario(to_scenario(rec))
    except ScenarioError as e:
        row["skipped"] = str(e)
        return row
    est = estimate(s)
    meas = rec["measured"]
    if "peak_memory_gib" in meas or "peak_memory_gb" in meas:
        measured = (meas["peak_memory_gib"] * GiB if "peak_memory_gib" in meas
                    else meas["peak_memory_gb"] * 1e9)
        kind = meas.get("memory_kind", "unknown")
        got = est.memory.per_gpu.as_dict()[KIND[kind]]
        row.update(memory_kind=kind, memory_measured_gib=measured / GiB,
                   memory_estimated_gib=got / GiB, memory_error=got / measured - 1)
    tps = None
    if "tokens_per_s_per_gpu" in meas:
        tps = meas["tokens_per_s_per_gpu"]
    elif "tokens_per_s" in meas:
        tps = meas["tokens_per_s"] / s.hardware.world
    elif "step_time_s" in meas:
        tps = s.training.seq_len * s.training.global_batch / meas["step_time_s"] / s.hardware.world
    if tps:
        got = est.run.tokens_per_s_per_gpu
        weight_passes = 4 if s.training.adapters else 6
        naive = 0.4 * peak_flops(s.hardware.gpu, s.training.precision) / (
            weight_passes * active_params(s.model))
        row.update(tps_measured=tps, tps_estimated=got, speed_error=got / tps - 1,
                   naive_error=naive / tps - 1)
    return row


def summary(rows: list[dict], key: str) -> dict:
    errs = [abs(r[key]) for r in rows if key in r]
    if not errs:
        return {"n": 0}
    errs.sort()
    return {"n": len(errs), "median": statistics.median(errs),
            "p90": errs[min(len(errs) - 1, int(0.9 * len(errs)))],
            "off_2x": sum(1 for r in rows if key in r and not 0.5 <= 1 + r[key] <= 2)}


def report(rows: list[dict]) -> list[str]:
    out = [f"{'run':58} {'mem meas':>9} {'est':>7} {'err':>7}  {'tok/s meas':>10} {'est':>8} "
           f"{'err':>7} {'40%MFU':>7}"]
    for r in rows:
        if "skipped" in r:
            out.append(f"{r['id'][:58]:58} skipped: {r['skipped'][:80]}")
            continue
        mem = (f"{r['memory_measured_gib']:9.1f} {r['memory_estimated_gib']:7.1f} "
               f"{r['memory_error']:+7.0%}" if "memory_error" in r else " " * 25)
        spd = (f"{r['tps_measured']:10.0f} {r['tps_estimated']:8.0f} {r['speed_error']:+7.0%} "
               f"{r['naive_error']:+7.0%}" if "speed_error" in r else "")
        out.append(f"{r['id'][:58]:58} {mem}  {spd}")
    out.append("")
    for label, key in (("peak memory", "memory_error"), ("tokens/s", "speed_error"),
                       ("tokens/s, 40 % MFU rule", "naive_error")):
        sm = summary(rows, key)
        if sm["n"]:
            out.append(f"{label}: {sm['n']} runs, median |error| {sm['median']:.1%}, 90th "
                       f"percentile {sm['p90']:.1%}, off by 2x or more: {sm['off_2x']}")
    for org in sorted({r["organisation"] for r in rows}):
        sub = [r for r in rows if r["organisation"] == org]
        parts = []
        for label, key in (("memory", "memory_error"), ("tokens/s", "speed_error")):
            sm = summary(sub, key)
            if sm["n"]:
                parts.append(f"{label} {sm['n']} runs median {sm['median']:.1%}")
        out.append(f"  {org}: " + "; ".join(parts))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = [compare(r) for r in yaml.safe_load(DATA.read_text())]
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print("\n".join(report(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

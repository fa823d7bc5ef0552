"""Fine-tuning estimates against published, measured runs (full fine-tuning, LoRA, QLoRA).

Reads benchmarks/data/published_finetune.yaml (``--data finetune``, the default), the Hugging Face
stack's runs in benchmarks/data/published_hf.yaml (``--data hf``) or both (``--data all``); each
record: source, model, hardware, layout, method and settings, and what the source measured: peak
memory and/or tokens/s or step time. It estimates each run and compares:
- peak memory: against the estimate's figure of the kind the source reports (``memory_kind``:
  allocated -> memory.per_gpu.total, reserved -> reserved, device -> device (nvidia-smi);
  unknown -> reserved, the middle of the three, and the row says so);
- speed: tokens/s per GPU (or step time), error = estimated tokens/s / measured - 1.
Nothing in the estimator is fitted to these runs (no constant is calibrated on them), so the
in-sample error is also the leave-one-organisation-out error, and the error per organisation is
the error on runs it never saw. Rows a source leaves open to more than one reading carry
``ambiguous``; the summary is given with and without them. Each row also names the estimate's
dominant memory term (the largest of params, grads, optimizer, activations, buffers). Beside the estimate, on the same speed rows: the naive "40 % MFU" rule
(tokens/s = 0.4 x peak / (6 N) for full fine-tuning, / (4 N) for LoRA and QLoRA, whose frozen
weights get no weight gradients).

    .venv/bin/python benchmarks/finetune_accuracy.py                 # table + summary
    .venv/bin/python benchmarks/finetune_accuracy.py --data hf       # the Hugging Face stack's runs
    .venv/bin/python benchmarks/finetune_accuracy.py --data all --json   # rows
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))   # summary() reads accuracy.quantile

import yaml  # noqa: E402

from workbench.errors import ScenarioError  # noqa: E402
from workbench.estimate import estimate  # noqa: E402
from workbench.estimate.time.kernels import peak_flops  # noqa: E402
from workbench.estimate.model.params import active_params  # noqa: E402
from workbench.engines.accuracy import regime_of  # noqa: E402
from workbench.scenario import parse_scenario  # noqa: E402
from workbench.units import GiB  # noqa: E402

DATA_DIR = ROOT / "benchmarks" / "data"
DATASETS = {"finetune": ("published_finetune.yaml",), "hf": ("published_hf.yaml",),
            "all": ("published_finetune.yaml", "published_hf.yaml")}
KIND = {"allocated": "total", "reserved": "reserved", "device": "device", "unknown": "reserved"}
ORGANISATIONS = {"torchtune": "Meta (torchtune)", "litgpt": "Lightning AI", "peft": "Hugging Face",
                 "qwen": "Alibaba (Qwen)", "answerai": "Answer.AI", "ibm": "IBM Research",
                 "hfblog": "Hugging Face"}
# Contract 1 keys of 2026-12-07 (design.md) that a validator of an older branch refuses as
# unknown: a record is parsed with them first and, only when the validator names one of them,
# parsed again without it (the row says which were dropped).
NEWER_TRAINING_KEYS = ("backend", "liger")
MEMORY_TERMS = ("params", "grads", "optimizer", "activations", "buffers")


def load(data: str) -> list[dict]:
    """The records of one data set (``finetune``, ``hf`` or ``all``)."""
    return [rec for name in DATASETS[data] for rec in yaml.safe_load((DATA_DIR / name).read_text())]


def to_scenario(rec: dict, drop: tuple[str, ...] = ()) -> dict:
    """The scenario a record describes, without the training keys named in ``drop``."""
    training = {k: v for k, v in rec["training"].items() if k not in drop}
    training.setdefault("tokens", 1e9)
    return {"hardware": rec["hardware"], "model": rec["model"],
            "parallel": rec.get("parallel", {}), "training": training}


def parse(rec: dict):
    """(scenario, keys dropped): the record parsed with every key the validator accepts."""
    dropped: list[str] = []
    while True:
        try:
            return parse_scenario(to_scenario(rec, tuple(dropped))), dropped
        except ScenarioError as e:
            named = [k for k in NEWER_TRAINING_KEYS
                     if k in rec["training"] and k not in dropped
                     and str(e).startswith(f"training.{k}: unknown key")]
            if not named:
                raise
            dropped.append(named[0])


def compare(rec: dict) -> dict:
    """One record's estimate against its measurements."""
    row = {"id": rec["id"], "organisation": ORGANISATIONS.get(rec["id"].split("-")[0], "?"),
           "method": rec["training"].get("method", "full"),
           "gpu": rec["hardware"]["gpu"] if isinstance(rec["hardware"]["gpu"], str) else "inline",
           "backend": rec["training"].get("backend"), "ambiguous": "ambiguous" in rec}
    try:
        s, dropped = parse(rec)
    except ScenarioError as e:
        row["skipped"] = str(e)
        return row
    if dropped:
        row["dropped_keys"] = dropped
    est = estimate(s)
    row.update(engine=s.training.engine,
               regime=regime_of(s.training.method, s.model.moe is not None))
    mem = est.memory.per_gpu.as_dict()
    row["dominant_memory_term"] = max(MEMORY_TERMS, key=lambda k: mem[k])
    meas = rec["measured"]
    if "peak_memory_gib" in meas or "peak_memory_gb" in meas:
        measured = (meas["peak_memory_gib"] * GiB if "peak_memory_gib" in meas
                    else meas["peak_memory_gb"] * 1e9)
        kind = meas.get("memory_kind", "unknown")
        got = mem[KIND[kind]]
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
    from accuracy import quantile   # here, not at the top: accuracy.py imports this file

    errs = [abs(r[key]) for r in rows if key in r]
    if not errs:
        return {"n": 0}
    return {"n": len(errs), "median": statistics.median(errs), "p90": quantile(errs, 0.9),
            "off_2x": sum(1 for r in rows if key in r and not 0.5 <= 1 + r[key] <= 2)}


def report(rows: list[dict]) -> list[str]:
    """The per-row table (GiB; tokens/s per GPU; ``?`` marks an ambiguous source, ``-k`` a
    dropped key) and the summaries: all rows, then without the ambiguous ones, then per
    organisation."""
    out = [f"{'run':52} {'mem meas':>8} {'est':>6} {'err':>6} {'dominant':>11}  "
           f"{'tok/s meas':>10} {'est':>7} {'err':>6} {'40%MFU':>7}"]
    for r in rows:
        name = ("?" if r["ambiguous"] else " ") + r["id"][:51]
        if "skipped" in r:
            out.append(f"{name:52} skipped: {r['skipped'][:80]}")
            continue
        mem = (f"{r['memory_measured_gib']:8.1f} {r['memory_estimated_gib']:6.1f} "
               f"{r['memory_error']:+6.0%}" if "memory_error" in r else " " * 22)
        spd = (f"{r['tps_measured']:10.0f} {r['tps_estimated']:7.0f} {r['speed_error']:+6.0%} "
               f"{r['naive_error']:+7.0%}" if "speed_error" in r else "")
        drop = " -" + ",".join(r["dropped_keys"]) if r.get("dropped_keys") else ""
        out.append(f"{name:52} {mem} {r['dominant_memory_term']:>11}  {spd}{drop}")
    out.append("")
    clear = [r for r in rows if not r["ambiguous"]]
    for label, key in (("peak memory", "memory_error"), ("tokens/s", "speed_error"),
                       ("tokens/s, 40 % MFU rule", "naive_error")):
        for sub, which in ((rows, ""), (clear, ", unambiguous rows only")):
            sm = summary(sub, key)
            if sm["n"] and (which == "" or len(sub) < len(rows)):
                out.append(f"{label}{which}: {sm['n']} runs, median |error| {sm['median']:.1%}, 90th "
                           f"percentile {sm['p90']:.1%}, off by 2x or more: {sm['off_2x']}")
    dropped = sorted({k for r in rows for k in r.get("dropped_keys", ())})
    if dropped:
        out.append("keys the scenario validator refused, dropped from the estimate: " + ", ".join(dropped))
    out.append("per organisation (nothing is fitted, so this is also leave-one-organisation-out):")
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
    ap.add_argument("--data", choices=sorted(DATASETS), default="finetune",
                    help="which published runs: finetune (published_finetune.yaml), hf "
                         "(published_hf.yaml) or all")
    args = ap.parse_args(argv)
    rows = [compare(r) for r in load(args.data)]
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print("\n".join(report(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

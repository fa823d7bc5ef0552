"""Step-time accuracy against published, measured training runs, by organisation.

Reads benchmarks/data/published_runs.yaml (each record: source, model, hardware, layout,
training settings and what the source measured), estimates each run and compares step time
(directly, or through tokens/s per GPU, model TFLOP/s per GPU, MFU or hardware TFLOP/s — all
proportional to 1/step time for a fixed configuration). Error = estimated step / measured - 1.

Nothing in the estimator is fitted to these runs: its kernel times come from kernel
measurements (workbench/estimate/efficiency.py, benchmarks/kernel_model.py), so the
leave-one-organisation-out error (each organisation scored by a model that never saw it) is
the error on every run, and it is reported as such. Beside it, on the same runs: the naive rule
"40 % MFU everywhere" (step = 6 N T / (0.4 x peak) with N the parameters a token meets, T the
tokens per GPU per step, attention FLOPs included as the runs' own MFU counts them).
Groups: organisation, engine, GPU generation, dense / MoE — worst group first. Layout pairs
within one published comparison are scored as ordered when the estimate orders them as
measured; estimates within 1 % of each other count as not ordered (a tie is no answer).

    .venv/bin/python benchmarks/accuracy.py              # table + summary by group
    .venv/bin/python benchmarks/accuracy.py --write      # also workbench/engines/accuracy.json
                                                         # and docs/engine-accuracy.md
    .venv/bin/python benchmarks/accuracy.py --json       # rows
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from workbench.errors import ScenarioError  # noqa: E402
from workbench.estimate import estimate  # noqa: E402
from workbench.scenario import parse_scenario  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "published_runs.yaml"
_PARALLEL_KEYS = ("dp", "zero", "shard_group", "tp", "sequence_parallel", "pp", "pp_schedule",
                  "virtual_stages", "cp", "ep", "reshard_after_forward", "async_tp", "expert_tp")
_TRAINING_KEYS = ("seq_len", "micro_batch", "global_batch", "precision", "recompute", "engine",
                  "compile", "fp8_recipe", "fp8_param_gather", "fp8_attention")
_MODEL_KEYS = ("preset", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "mlp",
               "tied_embeddings", "moe", "head_dim", "norm", "bias", "dropout", "q_lora_rank",
               "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")


# The attention kernel comes from the record's engine (``training.engine``: each engine's
# default, workbench/engines/), except where the run predates FlashAttention: Megatron-LM's
# 2021-22 papers, MT-NLG and BLOOM ran a fused softmax over batched GEMMs.
EAGER_ATTENTION_SOURCES = ("narayanan21", "korthikanti22", "mtnlg", "bloom")


def to_scenario(rec: dict) -> dict:
    """The scenario a published record describes; unstated settings take documented defaults:
    micro-batch 1, the engine's recompute default (workbench/engines/), bf16, ZeRO-1 with
    Megatron-style PP (distributed optimizer), per-node NVLink of the GPU's generation and 8 NDR
    NICs."""
    hw = dict(rec["hardware"])
    gpu = hw.get("gpu", "h100-sxm")
    hw.setdefault("gpus_per_node", 8)
    hw.setdefault("intra_node", {"a100": "nvlink3", "b200": "nvlink5"}.get(gpu.split("-")[0],
                                                                           "nvlink4"))
    hw.setdefault("inter_node", {"link": "ib-hdr" if gpu.startswith("a100") else "ib-ndr",
                                 "nics_per_node": 8})
    model = {k: v for k, v in rec["model"].items() if k in _MODEL_KEYS and v is not None}
    if isinstance(model.get("moe"), dict):
        model["moe"] = {k: v for k, v in model["moe"].items() if v is not None}
    par = {k: v for k, v in rec["parallel"].items() if k in _PARALLEL_KEYS and v is not None}
    if par.get("pp_schedule") == "interleaved-1f1b" and par.get("virtual_stages", 1) < 2:
        par["virtual_stages"] = 2
    tr = {k: v for k, v in rec["training"].items() if k in _TRAINING_KEYS and v is not None}
    if (source_of(rec) in EAGER_ATTENTION_SOURCES
            or rec["training"].get("flash_attention") is False):
        tr["attention"] = "eager"
    tr.setdefault("micro_batch", 1)
    if tr.get("precision") not in ("fp32", "fp16", "bf16", "fp8", "nvfp4"):
        tr["precision"] = "bf16"
    return {"hardware": hw, "model": model, "parallel": par, "training": tr}


# The organisation behind each source (record id's first word): the unit of independence.
# MT-NLG is a joint Microsoft/NVIDIA paper on NVIDIA's Megatron stack: counted with NVIDIA.
ORGANISATION = {
    "narayanan21": "NVIDIA", "korthikanti22": "NVIDIA", "dgxc": "NVIDIA", "mbridge": "NVIDIA",
    "nemo": "NVIDIA", "mtnlg": "NVIDIA", "mosaic": "Databricks (MosaicML)",
    "torchtitan": "Meta (PyTorch)", "llama3": "Meta (PyTorch)", "bloom": "BigScience",
}
NAIVE_MFU = 0.4


def organisation_of(rec: dict) -> str:
    """The organisation that measured and published a record."""
    return ORGANISATION.get(source_of(rec), source_of(rec))


def source_of(rec: dict) -> str:
    """The publication a record comes from (its id's first word: one benchmark table, paper
    or repository); ``ORGANISATION`` groups sources by who measured them."""
    return rec["id"].split("-")[0]


def compare(rec: dict, scenario=None) -> dict:
    """One row: the measured quantity, our value, and the step-time error (``scenario``: the
    record's parsed scenario, when the caller holds it)."""
    row = {"id": rec["id"], "source": rec.get("source", "")}
    try:
        est = estimate(scenario or parse_scenario(to_scenario(rec)))
    except ScenarioError as exc:
        return {**row, "skipped": exc.one_line()}
    meas = rec.get("measured") or {}
    t, r = est.time, est.run
    if meas.get("step_time_s"):
        q, ours, theirs = "step_time_s", t.step, float(meas["step_time_s"])
        err = ours / theirs - 1
    elif meas.get("tokens_per_s_per_gpu"):
        q, ours, theirs = "tokens_per_s_per_gpu", r.tokens_per_s_per_gpu, float(
            meas["tokens_per_s_per_gpu"])
        err = theirs / ours - 1
    elif meas.get("model_tflops_per_gpu"):
        q, ours, theirs = "model_tflops_per_gpu", r.model_tflops_per_gpu, float(
            meas["model_tflops_per_gpu"])
        err = theirs / ours - 1
    elif meas.get("mfu"):
        q, ours, theirs = "mfu", r.mfu, float(meas["mfu"])
        err = theirs / ours - 1
    elif meas.get("hardware_tflops_per_gpu"):
        peak = est.scenario.hardware.gpu.bf16_tflops
        q, ours, theirs = "hardware_tflops_per_gpu", r.hfu * peak, float(
            meas["hardware_tflops_per_gpu"])
        err = theirs / ours - 1
    else:
        return {**row, "skipped": "no step-time measurement"}
    sc = est.scenario
    measured_step = t.step / (1 + err)
    naive = r.model_tflops_per_gpu * t.step / (NAIVE_MFU * peak_tflops(sc))
    return {**row, "quantity": q, "measured": theirs, "estimated": ours, "error": err,
            "step": t.step, "naive_error": naive / measured_step - 1,
            "engine": sc.training.engine, "moe": sc.model.moe is not None,
            "organisation": organisation_of(rec), "comparison": rec.get("comparison"),
            "arch": sc.hardware.gpu.arch, "gpu": sc.hardware.gpu.name,
            "gpus": sc.hardware.world}


def peak_tflops(sc) -> float:
    """The dense peak a run's MFU is counted against (FP8 runs: the FP8 peak; NVFP4: the FP4
    peak)."""
    g = sc.hardware.gpu
    if sc.training.precision == "nvfp4":
        return g.fp4_tflops
    return g.fp8_tflops if sc.training.precision == "fp8" else g.bf16_tflops


def summary(rows: list[dict], key: str = "error") -> dict:
    """Median and p90 |error|, runs off by more than 2x."""
    errs = sorted(abs(r[key]) for r in rows)
    if not errs:
        return {"runs": 0}
    return {"runs": len(errs), "median": statistics.median(errs),
            "p90": errs[min(len(errs) - 1, int(0.9 * len(errs)))],
            "off_by_2x": sum(1 for r in rows if not 0.5 <= 1 + r[key] <= 2)}


def pairs(rows: list[dict], key: str = "error", tie: float = 0.01) -> dict:
    """Within each published comparison: pairs whose measured steps differ by more than 5 %,
    and how many the estimate orders as measured (estimates within ``tie`` are not ordered)."""
    groups: dict = {}
    for r in rows:
        if r.get("comparison"):
            groups.setdefault(r["comparison"], []).append(r)
    n = ok = 0
    for group in groups.values():
        for a, b in itertools.combinations(group, 2):
            ma, mb = (x["step"] / (1 + x["error"]) for x in (a, b))
            if abs(ma / mb - 1) <= 0.05:
                continue
            ea, eb = (x["step"] / (1 + x["error"]) * (1 + x[key]) for x in (a, b))
            n += 1
            ok += abs(ea / eb - 1) > tie and (ea < eb) == (ma < mb)
    return {"pairs": n, "ordered": ok / n if n else None}


GROUPS = (("organisation", lambda r: r["organisation"]), ("engine", lambda r: r["engine"]),
          ("GPU generation", lambda r: r["arch"]),
          ("regime", lambda r: "MoE" if r["moe"] else "dense"))


def grouped(rows: list[dict]) -> list[tuple[str, str, dict, dict]]:
    """(group kind, name, ours, naive) for every group, worst median first."""
    out = []
    for kind, key in GROUPS:
        names = sorted({key(r) for r in rows})
        for name in names:
            rs = [r for r in rows if key(r) == name]
            out.append((kind, name, summary(rs), summary(rs, "naive_error")))
    return sorted(out, key=lambda g: -g[2]["median"])


def bands(rows: list[dict]) -> dict:
    """Median |error| per engine and regime: the band an estimate shows."""
    out: dict = {}
    for e in sorted({r["engine"] for r in rows}):
        for regime, sel in (("all", lambda r: True), ("dense", lambda r: not r["moe"]),
                            ("moe", lambda r: r["moe"])):
            rs = [r for r in rows if r["engine"] == e and sel(r)]
            if rs:
                sm = summary(rs)
                out.setdefault(e, {})[regime] = {"median": round(sm["median"], 4),
                                                 "runs": sm["runs"],
                                                 "kind": "leave-one-organisation-out"}
    return out


def report_lines(done: list[dict]) -> list[str]:
    """The summary a person reads: overall, then every group worst first."""
    sm, nv = summary(done), summary(done, "naive_error")
    po, pn = pairs(done), pairs(done, "naive_error")
    orgs = sorted({r["organisation"] for r in done})
    lines = [f"{sm['runs']} runs from {len(orgs)} organisations. Nothing is fitted to them, so "
             "leave-one-organisation-out = in-sample.",
             f"workbench:   median |error| {sm['median']:.1%}, p90 {sm['p90']:.1%}, "
             f"off by >2x {sm['off_by_2x']}; layout pairs ordered {po['ordered']:.0%} of "
             f"{po['pairs']}",
             f"40 % MFU:    median |error| {nv['median']:.1%}, p90 {nv['p90']:.1%}, "
             f"off by >2x {nv['off_by_2x']}; layout pairs ordered {pn['ordered']:.0%} of "
             f"{pn['pairs']}", "",
             "| group | name | runs | workbench median | p90 | off by >2x | 40 % MFU median |",
             "|---|---|---|---|---|---|---|"]
    for kind, name, ours, naive in grouped(done):
        lines.append(f"| {kind} | {name} | {ours['runs']} | {ours['median']:.1%} | "
                     f"{ours['p90']:.1%} | {ours['off_by_2x']} | {naive['median']:.1%} |")
    return lines


ACCURACY_JSON = ROOT / "workbench" / "engines" / "accuracy.json"
DOC = ROOT / "docs" / "engine-accuracy.md"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="step-time error against published runs")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--write", action="store_true",
                    help="write workbench/engines/accuracy.json and docs/engine-accuracy.md")
    args = ap.parse_args(argv)
    rows = [compare(r) for r in yaml.safe_load(DATA.read_text())]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    done = [r for r in rows if "error" in r]
    for r in done:
        print(f"{r['id'][:58]:58} {r['quantity'][:22]:22} {r['measured']:>10.4g} "
              f"{r['estimated']:>10.4g} {r['error']:+7.1%}  naive {r['naive_error']:+7.1%}")
    print()
    lines = report_lines(done)
    print("\n".join(lines))
    for r in rows:
        if "skipped" in r:
            print(f"skipped {r['id']}: {r['skipped']}")
    if args.write:
        ACCURACY_JSON.write_text(json.dumps(
            {"bands": bands(done), "runs": len(done),
             "command": "benchmarks/accuracy.py --write"}, indent=1, sort_keys=True) + "\n")
        DOC.write_text("\n".join(
            ["# Step-time accuracy on published runs", "",
             "Generated by `.venv/bin/python benchmarks/accuracy.py --write` from "
             "`benchmarks/data/published_runs.yaml`; do not edit by hand.", ""] + lines) + "\n")
        print(f"wrote {ACCURACY_JSON.relative_to(ROOT)} and {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

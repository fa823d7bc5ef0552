"""Step-time accuracy against published, measured training runs, by organisation.

Reads benchmarks/data/published_runs.yaml (each record: source, model, hardware, layout,
training settings and what the source measured), estimates each run and compares step time
(directly, or through tokens/s per GPU, model TFLOP/s per GPU, MFU or hardware TFLOP/s — all
proportional to 1/step time for a fixed configuration). Error = estimated step / measured - 1.

Nothing in the estimator is fitted to these runs: its kernel times come from kernel
measurements (workbench/estimate/time/kernels.py, benchmarks/kernel_model.py), so there is nothing
to leave out and every figure here is in-sample — the runs did shape which mechanisms the model
has, which is why the team's held-back runs decide. Beside it, on the same runs: the naive rule
"40 % MFU everywhere" (step = 6 N T / (0.4 x peak) with N the parameters a token meets, T the
tokens per GPU per step, attention FLOPs included as the runs' own MFU counts them).
Groups: organisation, engine, GPU generation, dense / MoE — worst group first. Pairs of rows
within one published comparison are scored as ordered when the estimate orders them as
measured; estimates within 1 % of each other count as not ordered (a tie is no answer).

    .venv/bin/python benchmarks/accuracy.py              # table + summary by group
    .venv/bin/python benchmarks/accuracy.py --write      # also workbench/engines/accuracy.json
                                                         # (the bands every estimate shows)
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
from workbench.engines.accuracy import BAND_MIN_RUNS, STEP_TIME, band_groups, regime_of  # noqa: E402
from workbench.scenario import parse_scenario  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "published_runs.yaml"
_PARALLEL_KEYS = ("dp", "zero", "shard_group", "tp", "sequence_parallel", "pp", "pp_schedule",
                  "virtual_stages", "cp", "ep", "reshard_after_forward", "async_tp",
                  "tp_comm_overlap", "expert_tp")
_TRAINING_KEYS = ("seq_len", "micro_batch", "global_batch", "precision", "recompute", "engine",
                  "compile", "fp8_recipe", "fp8_param_gather", "fp8_attention", "state_dtypes",
                  "recompute_modules")
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
    hw.setdefault("intra_node", {"a100": "nvlink3", "b200": "nvlink5",
                                 "mi300x": "infinity-fabric"}.get(gpu.split("-")[0], "nvlink4"))
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
            "gpus": sc.hardware.world, "regime": regime_of(sc.training.method, sc.model.moe
                                                           is not None),
            "setting": setting_of(sc)}


def setting_of(sc) -> dict:
    """What a published comparison varies between its rows, by kind (``pair_kind``)."""
    par, tr, moe = sc.parallel, sc.training, sc.model.moe
    return {"precision": (tr.precision, tr.fp8_recipe),
            "dispatch": (par.ep, par.etp, moe.capacity_factor) if moe else None,
            "layout": (par.dp, par.tp, par.pp, par.cp, par.zero, par.sp, par.pp_schedule,
                       par.virtual_stages),
            "micro-batch": tr.micro_batch}


# The kinds of comparison, in the order a pair is classed by its first difference: precision
# first (an FP8-vs-bf16 pair may change the layout too), then the MoE dispatch (EP, expert
# TP, token dropping), the layout, the micro-batch; anything else (recompute, engine) "other".
PAIR_KINDS = ("precision", "MoE dispatch", "layout", "micro-batch", "other")


def pair_kind(a: dict, b: dict) -> str:
    """The kind of comparison two rows of one published comparison make."""
    sa, sb = a["setting"], b["setting"]
    for kind, key in (("precision", "precision"), ("MoE dispatch", "dispatch"),
                      ("layout", "layout"), ("micro-batch", "micro-batch")):
        if sa[key] != sb[key]:
            return kind
    return "other"


def peak_tflops(sc) -> float:
    """The dense peak a run's MFU is counted against (FP8 runs: the FP8 peak; NVFP4: the FP4
    peak)."""
    g = sc.hardware.gpu
    if sc.training.precision == "nvfp4":
        return g.fp4_tflops
    return g.fp8_tflops if sc.training.precision == "fp8" else g.bf16_tflops


def quantile(xs: list[float], q: float) -> float:
    """The sorted values' element int(q n) (the p90 of every accuracy benchmark: a group of 20
    has its p90 at the 19th value)."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def summary(rows: list[dict], key: str = "error") -> dict:
    """Median and p90 |error|, runs off by more than 2x."""
    errs = [abs(r[key]) for r in rows]
    if not errs:
        return {"runs": 0}
    return {"runs": len(errs), "median": statistics.median(errs), "p90": quantile(errs, 0.9),
            "off_by_2x": sum(1 for r in rows if not 0.5 <= 1 + r[key] <= 2)}


def pairs(rows: list[dict], key: str = "error", tie: float = 0.01, kind: str | None = None
          ) -> dict:
    """Within each published comparison: pairs whose measured steps differ by more than 5 %,
    and how many the estimate orders as measured (estimates within ``tie`` are not ordered);
    ``kind`` keeps the pairs of one ``pair_kind`` only."""
    groups: dict = {}
    for r in rows:
        if r.get("comparison"):
            groups.setdefault(r["comparison"], []).append(r)
    n = ok = 0
    for group in groups.values():
        for a, b in itertools.combinations(group, 2):
            if kind is not None and pair_kind(a, b) != kind:
                continue
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
    """Median and 90th-percentile |error| of every group an estimate's band may come from
    (``workbench.engines.accuracy.band_groups``: engine and regime, engine, regime, all runs). Kind
    "in-sample": nothing in the estimator is fitted to these runs, so nothing was left out, and
    the runs did shape which mechanisms the model has."""
    members: dict = {}
    for r in rows:
        for name in band_groups(r["engine"], r["regime"]):
            members.setdefault(name, []).append(r)
    out = {}
    for name, rs in sorted(members.items()):
        sm = summary(rs)
        out[name] = {"median": round(sm["median"], 4), "p90": round(sm["p90"], 4),
                     "runs": sm["runs"], "kind": "in-sample"}
    return out


def finetune_rows() -> list[dict]:
    """The fine-tuning runs of benchmarks/finetune_accuracy.py (published_finetune.yaml,
    published_hf.yaml) that state a speed and a full configuration, as step-time rows: their
    tokens/s error turned into the step's (measured tokens/s over ours, less 1). Rows the data
    flag ambiguous (a setting the source leaves open) are left out of the bands."""
    import finetune_accuracy as ft   # benchmarks/ is on sys.path when this file runs

    out = []
    for rec in ft.load("all"):
        row = ft.compare(rec)
        if "speed_error" not in row or row["ambiguous"]:
            continue
        out.append({"id": row["id"], "engine": row["engine"], "regime": row["regime"],
                    "organisation": row["organisation"],
                    "error": 1 / (1 + row["speed_error"]) - 1,
                    "naive_error": 1 / (1 + row["naive_error"]) - 1})
    return out


def report_lines(done: list[dict]) -> list[str]:
    """The summary a person reads: overall, then every group worst first."""
    sm, nv = summary(done), summary(done, "naive_error")
    po, pn = pairs(done), pairs(done, "naive_error")
    orgs = sorted({r["organisation"] for r in done})
    lines = [f"{sm['runs']} runs from {len(orgs)} organisations. Nothing is fitted to them, so "
             "there is nothing to leave out: every figure is in-sample (the runs did shape which "
             "mechanisms the model has).",
             f"workbench:   median |error| {sm['median']:.1%}, p90 {sm['p90']:.1%}, "
             f"off by >2x {sm['off_by_2x']}; pairs ordered as measured {po['ordered']:.0%} of "
             f"{po['pairs']}",
             f"40 % MFU:    median |error| {nv['median']:.1%}, p90 {nv['p90']:.1%}, "
             f"off by >2x {nv['off_by_2x']}; pairs ordered as measured {pn['ordered']:.0%} of "
             f"{pn['pairs']}", "",
             "| group | name | runs | workbench median | p90 | off by >2x | 40 % MFU median |",
             "|---|---|---|---|---|---|---|"]
    for kind, name, ours, naive in grouped(done):
        lines.append(f"| {kind} | {name} | {ours['runs']} | {ours['median']:.1%} | "
                     f"{ours['p90']:.1%} | {ours['off_by_2x']} | {naive['median']:.1%} |")
    lines += ["", "Pairs within one published comparison, by what the pair varies "
              "(pairs whose measured steps differ by more than 5 %):", "",
              "| comparison kind | pairs | workbench ordered | 40 % MFU ordered |",
              "|---|---|---|---|"]
    for kind in PAIR_KINDS:
        ours, naive = pairs(done, kind=kind), pairs(done, "naive_error", kind=kind)
        if ours["pairs"]:
            lines.append(f"| {kind} | {ours['pairs']} | {ours['ordered']:.0%} | "
                         f"{naive['ordered']:.0%} |")
    return lines


def band_lines(band_rows: list[dict]) -> list[str]:
    """The bands estimates show (``bands``), groups with at least ``BAND_MIN_RUNS`` runs."""
    lines = ["", f"Bands an estimate shows (groups of at least {BAND_MIN_RUNS} runs; an estimate "
             "takes the narrowest that holds: engine and regime, engine, regime, all; the "
             "published runs above plus the fine-tuning runs of benchmarks/finetune_accuracy.py "
             "that state a speed, ambiguous rows left out):", "",
             "| group | runs | median | p90 |", "|---|---|---|---|"]
    for name, b in bands(band_rows).items():
        if b["runs"] >= BAND_MIN_RUNS:
            lines.append(f"| {name} | {b['runs']} | {b['median']:.1%} | {b['p90']:.1%} |")
    return lines


ACCURACY_JSON = STEP_TIME
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
    band_rows = done + finetune_rows()
    lines = report_lines(done) + band_lines(band_rows)
    print("\n".join(lines))
    for r in rows:
        if "skipped" in r:
            print(f"skipped {r['id']}: {r['skipped']}")
    if args.write:
        ACCURACY_JSON.write_text(json.dumps(
            {"bands": bands(band_rows), "runs": len(band_rows),
             "command": "benchmarks/accuracy.py --write"}, indent=1, sort_keys=True) + "\n")
        DOC.write_text("\n".join(
            ["# Step-time accuracy on published runs", "",
             "Generated by `.venv/bin/python benchmarks/accuracy.py --write` from "
             "`benchmarks/data/published_runs.yaml`; do not edit by hand.", ""] + lines) + "\n")
        print(f"wrote {ACCURACY_JSON.relative_to(ROOT)} and {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

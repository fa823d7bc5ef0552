"""Step-time accuracy against published, measured training runs.

Reads benchmarks/data/published_runs.yaml (each record: source, model, hardware, layout,
training settings and what the source measured), estimates each run and compares step time
(directly, or through tokens/s per GPU, model TFLOP/s per GPU, MFU or hardware TFLOP/s — all
proportional to 1/step time for a fixed configuration). Error = estimated step / measured - 1.
No constant of the estimator is fitted to these runs: they check it, and runs from other
sources, held back by the team, decide.

    .venv/bin/python benchmarks/accuracy.py              # table + summary
    .venv/bin/python benchmarks/accuracy.py --json       # rows
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
from workbench.scenario import parse_scenario  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "published_runs.yaml"
_PARALLEL_KEYS = ("dp", "zero", "shard_group", "tp", "sequence_parallel", "pp", "pp_schedule",
                  "virtual_stages", "cp", "ep", "reshard_after_forward", "async_tp", "expert_tp")
_TRAINING_KEYS = ("seq_len", "micro_batch", "global_batch", "precision", "recompute", "engine",
                  "compile", "fp8_recipe")
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
    if tr.get("precision") not in ("fp32", "fp16", "bf16", "fp8"):
        tr["precision"] = "bf16"
    return {"hardware": hw, "model": model, "parallel": par, "training": tr}


def source_of(rec: dict) -> str:
    """The publication a record comes from (its id's first word: one benchmark table, paper
    or repository), the unit leave-one-source-out validation leaves out."""
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
    return {**row, "quantity": q, "measured": theirs, "estimated": ours, "error": err,
            "step": t.step, "engine": est.scenario.training.engine,
            "moe": est.scenario.model.moe is not None,
            "gpu": est.scenario.hardware.gpu.name, "gpus": est.scenario.hardware.world}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="step-time error against published runs")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = [compare(r) for r in yaml.safe_load(DATA.read_text())]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    done = [r for r in rows if "error" in r]
    for r in done:
        print(f"{r['id'][:58]:58} {r['quantity'][:22]:22} {r['measured']:>10.4g} "
              f"{r['estimated']:>10.4g} {r['error']:+7.1%}")
    skipped = [r for r in rows if "skipped" in r]
    errs = sorted(abs(r["error"]) for r in done)
    within2 = sum(1 for r in done if 0.5 <= 1 + r["error"] <= 2)
    print(f"\n{len(done)} runs compared, {len(skipped)} skipped; median |step-time error| "
          f"{statistics.median(errs):.1%}; p90 {errs[int(0.9 * len(errs))]:.1%}; "
          f"within 2x: {within2}/{len(done)}")
    for r in skipped:
        print(f"skipped {r['id']}: {r['skipped']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

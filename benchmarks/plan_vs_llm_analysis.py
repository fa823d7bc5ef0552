#!/usr/bin/env python3
"""The planner (``workbench.plan``) held against an independent tool: a grid over llm-analysis
0.2.2's own training analysis (``LLMAnalysis.training``) for the same model and hardware.

Run it with the peers' Python (llm-analysis needs torch; the workbench must not get it):

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install torch==2.13.0 llm-analysis==0.2.2
    cd /work/main && /tmp/peers/bin/python benchmarks/plan_vs_llm_analysis.py [--json OUT.json]

How the two halves meet: the workbench needs pandas (the planner's table), which the peers'
venv does not have, so the workbench part runs in the project's own venv: this same file is
started as a subprocess of ``.venv/bin/python`` with ``--wb-info`` (scenario shape + the
planner's tables) and ``--wb-estimate`` (``estimate()`` of a list of layouts, JSON on stdin and
stdout). That branch imports only the workbench; the llm-analysis branch imports only
llm-analysis, numpy and the standard library. Nothing is installed into the project's venv.

Cases (global batch in sequences of ``seq_len`` tokens):
  1. Llama 3.1 8B, 8 x H100 SXM     (examples/llama3-8b-8xh100.yaml: seq 8192, batch 64)
  2. Llama 3.1 70B, 64 x H100 SXM   (the same file with the 70B preset, 8 nodes, batch 128)
  3. Llama 3.1 405B, 512 x H200 SXM (examples/llama3-405b-h200-cluster.yaml: seq 8192, batch 256)

The common sub-space is what llm-analysis can express: tp, pp, dp (tp*pp*dp = GPUs), DeepSpeed
ZeRO 0-3, Megatron sequence parallelism (on = sp_size tp, off = 1), activation recomputation
none / selective / full, micro-batch (powers of two up to 16 that divide the batch); cp = ep = 1,
no offload, FlashAttention. llm-analysis has no pipeline schedule (it assumes 1F1B's in-flight
activations and no bubble), so the workbench is fixed to pp_schedule=1f1b, virtual_stages=1.
The degree lists are the planner's own (``workbench/plan/space.py``). The workbench side is
``plan(scenario, Constraints(fixed={cp:1, ep:1, pp_schedule:1f1b, virtual_stages:1,
offload:none, recompute:R}))`` for each R (fixing R turns off the planner's recompute
dominance rule, so every layout is ranked under every recompute mode that fits); the union is
ranked by (step, memory) exactly as the planner ranks. Each grid layout is also estimated on
its own (``estimate(parse_scenario(doc))``) to get the memory by component and the verdict
(invalid / does not fit) of layouts that are not in the planner's table.

llm-analysis inputs: ModelConfig from the workbench preset (layers, heads, kv heads, hidden,
vocab; ``ffn_embed_dim = 1.5 f`` with ``expansion_ratio = 1.5 f / h``, its iso-parameter SwiGLU
convention), its shipped ``h100-sxm-80gb`` GPU config (989 TFLOPS, 3350 GB/s, 80 GB; the
workbench says 989.5) and, for H200 (not shipped), a GPUConfig with the workbench's datasheet
figures (141 GB, 4800 GB/s, 989.5 TFLOPS; NVLink 450 GB/s per direction as its H100 SXM file).
``flops_efficiency`` = the workbench's large-GEMM ceiling of the GPU (``matmul_efficiency``)
and ``hbm_memory_efficiency`` = its memory-bound fraction (``MEMORY_BOUND_FRACTION``), so absolute times
are on a comparable scale (both are uniform factors: they change no ranking). dtype w16a16e16,
Adam with fp32 master (its defaults), ``flash_attn=True``, ``batch_size_per_gpu`` = micro-batch,
``global_batch_size`` = the scenario's batch (so gradient accumulation = batch / (dp * mb)).
A layout fits in llm-analysis when its ``memory_left_per_gpu`` >= 0 (capacity =
``mem_per_GPU_in_GB * 1024**3``, the same GiB reading as the workbench's ``capacity_bytes``).

Measures per case: both tools' best layout and the rank each gives the other's; Spearman rho
of step time over the layouts both say fit (average ranks for ties); the per-GPU memory ratio
llm-analysis / workbench over the same layouts (total and by component). llm-analysis's own step
time (``latency_per_iter``) is FLOPs / (tp * pp * TFLOPS) x accumulation steps, i.e. the same
for every layout with the same recompute mode, so its ranking has three levels; a second,
*derived* llm-analysis time, (3 x ``latency_fwd`` + recompute) x accumulation steps, uses its
per-layer roofline and TP all-reduce terms (it is not what ``training()`` reports) and is shown
as "LA roofline". Two checks of the planner itself are printed per case as well: how many of
its fitting layouts exceed nvidia-smi's total memory (the figures quoted in
``workbench/units.py``), and its ZeRO-2 winners estimated as the run the workbench's own trial
makes of ZeRO-2 (FSDP2 without resharding, ``workbench.trial.prediction.as_run``: zero=3 +
reshard_after_forward=false). See docs/planner-vs-llm-analysis.md for the results and their
causes. ``--json PATH`` also writes every figure. About 30-60 s on two shared cores.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WB_PYTHON = REPO / ".venv" / "bin" / "python"
GIB = 2 ** 30
RECOMPUTES = ("none", "selective", "full")
FIXED = {"cp": 1, "ep": 1, "shard_group": 0, "pp_schedule": "1f1b", "virtual_stages": 1,
         "offload": "none"}
# nvidia-smi's total memory, as quoted in workbench/units.py (capacity_bytes docstring)
SMI_MIB = {"h100-sxm": 81559, "h200-sxm": 143771}

CASES = [
    {"key": "8B / 8 x H100", "scenario": "examples/llama3-8b-8xh100.yaml", "overrides": []},
    {"key": "70B / 64 x H100", "scenario": "examples/llama3-8b-8xh100.yaml",
     "overrides": ["model.preset=llama3-70b", "hardware.nodes=8", "parallel.dp=64",
                   "training.global_batch=128"]},
    {"key": "405B / 512 x H200", "scenario": "examples/llama3-405b-h200-cluster.yaml",
     "overrides": []},
]


# =================================================================================== workbench
# Runs under the project's venv (``--wb-info`` / ``--wb-estimate``); imports only the workbench.
def _wb_scenario(case: dict):
    sys.path.insert(0, str(REPO))
    from workbench.scenario import load_scenario
    return load_scenario(str(REPO / case["scenario"]), case["overrides"])


def _layout_doc(base: dict, lay: dict) -> dict:
    doc = json.loads(json.dumps(base))
    par = dict(doc.get("parallel", {}))
    par.pop("shard_group", None)
    par.update({"dp": lay["dp"], "tp": lay["tp"], "pp": lay["pp"], "zero": lay["zero"],
                "sequence_parallel": bool(lay["sp"]) or lay["tp"] == 1, **{
                    k: v for k, v in FIXED.items() if k in ("cp", "ep", "pp_schedule",
                                                             "virtual_stages")}})
    tr = dict(doc.get("training", {}))
    tr.update({"micro_batch": lay["mb"], "recompute": lay["recompute"], "offload": "none"})
    doc["parallel"], doc["training"] = par, tr
    return doc


def case_shape(case: dict) -> dict:
    """What llm-analysis needs of a case: model, GPU, efficiencies, and the planner's own
    (tp, pp, dp, micro-batch) candidates of the common sub-space."""
    s = _wb_scenario(case)
    from workbench.catalog import GPUS
    from workbench.estimate.time.kernels import MEMORY_BOUND_FRACTION, matmul_efficiency
    from workbench.plan.space import candidate_rows
    from workbench.units import capacity_bytes

    m, hw, tr = s.model, s.hardware, s.training
    gpu_key = next(k for k, v in GPUS.items() if v == hw.gpu)
    cand = candidate_rows(s, hw.world, "1f1b", {k: FIXED[k] for k in (
        "cp", "ep", "shard_group", "virtual_stages", "pp_schedule")})
    return {
        "model": {"name": m.name, "layers": m.layers, "hidden": m.hidden, "heads": m.heads,
                  "kv_heads": m.kv_heads, "ffn_hidden": m.ffn_hidden, "vocab": m.vocab,
                  "mlp": m.mlp, "tied_embeddings": m.tied_embeddings},
        "gpu": {"key": gpu_key,
                "name": hw.gpu.name, "memory_gb": hw.gpu.memory_gb,
                "hbm_gb_per_s": hw.gpu.hbm_gb_per_s, "bf16_tflops": hw.gpu.bf16_tflops,
                "capacity_bytes": capacity_bytes(hw.gpu.memory_gb)},
        "world": hw.world, "gpus_per_node": hw.gpus_per_node, "seq_len": tr.seq_len,
        "global_batch": tr.global_batch, "attention": tr.attention,
        "efficiency": {"matmul": matmul_efficiency(hw.gpu, tr.precision),
                       "hbm": MEMORY_BOUND_FRACTION},
        "candidates": sorted({(int(c[1]), int(c[2]), int(c[0]), int(c[7]))
                              for c in cand.T.tolist()}),
    }


def wb_info(case: dict) -> dict:
    """Scenario shape, the planner's ranked table over the common sub-space (union over the
    three recompute modes), the planner's own #1 with recompute free, and its unrestricted #1."""
    s = _wb_scenario(case)
    from workbench.plan import Constraints, plan
    from workbench.units import capacity_bytes

    hw = s.hardware
    rows = []
    t0 = time.perf_counter()
    for rc in RECOMPUTES:
        r = plan(s, Constraints(fixed={**FIXED, "recompute": rc}, max_memory_fraction=1.0))
        for rec in r.table.to_dict("records"):
            rows.append({"dp": int(rec["dp"]), "tp": int(rec["tp"]), "pp": int(rec["pp"]),
                         "zero": int(rec["zero"]),
                         "sp": bool(rec["sequence_parallel"]) and int(rec["tp"]) > 1,
                         "mb": int(rec["micro_batch"]), "recompute": rec["recompute"],
                         "step": float(rec["step"]), "memory": float(rec["memory_per_gpu"])})
    rows.sort(key=lambda d: (d["step"], d["memory"]))
    for i, d in enumerate(rows, 1):
        d["rank"] = i
    free = plan(s, Constraints(fixed=dict(FIXED), max_memory_fraction=1.0))
    free_best = free.layout(1)
    unrestricted = plan(s, Constraints(max_memory_fraction=1.0))
    un = unrestricted.layout(1)
    un_row = unrestricted.table.iloc[0]
    plan_seconds = time.perf_counter() - t0
    gpu_key = case_shape(case)["gpu"]["key"]
    smi = SMI_MIB.get(gpu_key, float("inf")) * 2 ** 20
    checks = {"smi_bytes": smi,
              "restricted_above_smi": sum(d["memory"] > smi for d in rows),
              "unrestricted_fits": int(len(unrestricted.table)),
              "unrestricted_above_smi": int((unrestricted.table["memory_per_gpu"] > smi).sum()),
              "zero2_as_fsdp2": []}
    # ZeRO-2 is run as FSDP2 with reshard_after_forward=False (workbench/trial/parallelize.py),
    # the same run as zero=3 + reshard_after_forward=false: estimate the planner's winners both
    # ways.
    for name, res in (("restricted #1", None), ("unrestricted #1", unrestricted)):
        if res is None:
            lay = {"parallel": {"dp": rows[0]["dp"], "tp": rows[0]["tp"], "pp": rows[0]["pp"],
                                "zero": rows[0]["zero"],
                                "sequence_parallel": rows[0]["sp"] or rows[0]["tp"] == 1,
                                **{k: FIXED[k] for k in ("cp", "ep", "pp_schedule",
                                                         "virtual_stages")}},
                   "training": {"micro_batch": rows[0]["mb"], "recompute": rows[0]["recompute"],
                                "offload": "none"}}
        else:
            lay = res.layout(1)
        if lay["parallel"]["zero"] != 2 or lay["parallel"]["dp"] * lay["parallel"]["cp"] == 1:
            continue
        out = {"which": name}
        for tag, extra in (("zero2", {}), ("zero3_no_reshard", {"zero": 3,
                                                                "reshard_after_forward": False})):
            doc = s.to_dict()
            doc["parallel"] = {**doc["parallel"], **lay["parallel"], **extra}
            doc["parallel"].pop("shard_group", None)
            doc["training"] = {**doc["training"], **lay["training"]}
            from workbench.estimate import estimate
            from workbench.scenario import parse_scenario
            e = estimate(parse_scenario(doc))
            out[tag] = {"memory": float(e.memory.per_gpu.total), "step": float(e.time.step)}
        out["layout"] = {**lay["parallel"], **lay["training"]}
        checks["zero2_as_fsdp2"].append(out)
    # every ZeRO-2 layout of the restricted table (dp > 1), written as that same FSDP2 run
    from workbench.estimate import estimate
    from workbench.scenario import parse_scenario
    z2 = [d for d in rows if d["zero"] == 2 and d["dp"] > 1]
    over = 0
    cap = capacity_bytes(hw.gpu.memory_gb)
    for d in z2:
        doc = _layout_doc(s.to_dict(), {**d, "zero": 3})
        doc["parallel"]["reshard_after_forward"] = False
        over += estimate(parse_scenario(doc)).memory.per_gpu.total > cap
    checks["zero2_rows"] = len(z2)
    checks["zero2_rows_over_as_fsdp2"] = int(over)
    return {
        **case_shape(case),
        "plan_rows": rows, "plan_seconds": plan_seconds, "checks": checks,
        "free_best": {"dp": free_best["parallel"]["dp"], "tp": free_best["parallel"]["tp"],
                      "pp": free_best["parallel"]["pp"], "zero": free_best["parallel"]["zero"],
                      "sp": bool(free_best["parallel"]["sequence_parallel"])
                      and free_best["parallel"]["tp"] > 1,
                      "mb": free_best["training"]["micro_batch"],
                      "recompute": free_best["training"]["recompute"],
                      "step": float(free.table.iloc[0]["step"])},
        "unrestricted_best": {**un["parallel"], **un["training"], "step": float(un_row["step"]),
                              "memory": float(un_row["memory_per_gpu"])},
    }


def wb_estimate(case: dict, layouts: list[dict]) -> list[dict]:
    """``estimate()`` of each layout on its own: validity, fit, step terms, memory by component
    on the worst pipeline rank."""
    s = _wb_scenario(case)
    from workbench.errors import ScenarioError
    from workbench.estimate import estimate
    from workbench.scenario import parse_scenario

    base = s.to_dict()
    out = []
    for lay in layouts:
        try:
            sc = parse_scenario(_layout_doc(base, lay))
        except ScenarioError as exc:
            out.append({"valid": False, "why": exc.one_line()})
            continue
        e = estimate(sc)
        d = e.to_dict()
        mem = d["memory"]
        stage = mem["per_stage"][mem["worst_pipeline_rank"]]
        t = e.time
        out.append({
            "valid": True, "fits": bool(mem["fits"]), "step": float(t.step),
            "memory": float(mem["per_gpu"]["total"]),
            "states": float(mem["per_gpu"]["params"] + mem["per_gpu"]["grads"]
                            + mem["per_gpu"]["optimizer"]),
            "activations": float(mem["per_gpu"]["activations"]),
            "buffers": float(mem["per_gpu"]["buffers"]),
            "buffers_detail": {k: float(v) for k, v in stage["buffers_detail"].items()},
            "worst_rank": int(mem["worst_pipeline_rank"]),
            "inflight": stage["inflight_microbatches"],
            "terms": {"compute": float(t.compute), "recompute": float(t.recompute),
                      "bubble": float(t.bubble), "optimizer": float(t.optimizer),
                      **{f"comm {k}": float(v) for k, v in t.comm_exposed.items()}},
        })
    return out


def run_workbench(mode: str, case: dict, payload: list | None = None):
    """Run this file's workbench branch under the project's venv; JSON in, JSON out."""
    proc = subprocess.run([str(WB_PYTHON), str(Path(__file__).resolve()), mode],
                          input=json.dumps({"case": case, "layouts": payload or []}),
                          capture_output=True, text=True, cwd=REPO, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"workbench part failed ({mode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


# ================================================================================ llm-analysis
def la_setup(info: dict):
    """LLMAnalysis factory for one case: (make(tp, pp, dp, sp) -> LLMAnalysis, notes)."""
    import logging

    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import (DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig,
                                     get_gpu_config_by_name)
    from llm_analysis.logger import logger
    logger.setLevel(logging.ERROR)

    m = info["model"]
    ffn = 1.5 * m["ffn_hidden"] if m["mlp"] == "swiglu" else m["ffn_hidden"]
    mc = ModelConfig(name=m["name"], num_layers=m["layers"], n_head=m["heads"],
                     hidden_dim=m["hidden"], vocab_size=m["vocab"], max_seq_len=info["seq_len"],
                     num_key_value_heads=m["kv_heads"], ffn_embed_dim=int(ffn),
                     expansion_ratio=ffn / m["hidden"])
    g = info["gpu"]
    if g["key"] == "h100-sxm":
        gc = get_gpu_config_by_name("h100-sxm-80gb")
        gpu_note = "shipped h100-sxm-80gb"
    else:
        gc = GPUConfig(name=f"{g['key']} (workbench datasheet)", mem_per_GPU_in_GB=g["memory_gb"],
                       hbm_bandwidth_in_GB_per_sec=g["hbm_gb_per_s"],
                       intra_node_bandwidth_in_GB_per_sec=450,
                       intra_node_min_message_latency=8e-06,
                       peak_fp16_TFLOPS=g["bf16_tflops"], inter_node_bandwidth_in_GB_per_sec=400)
        gpu_note = "GPUConfig from the workbench catalog"
    eff = info["efficiency"]
    flops_eff = eff["matmul"]
    hbm_eff = eff["hbm"]

    def make(tp: int, pp: int, dp: int, sp: bool) -> LLMAnalysis:
        return LLMAnalysis(mc, gc, DtypeConfig(),
                           ParallelismConfig(tp_size=tp, pp_size=pp, dp_size=dp,
                                             sp_size=tp if sp else 1),
                           flops_efficiency=flops_eff, hbm_memory_efficiency=hbm_eff)

    notes = {"gpu_config": gpu_note, "peak_tflops": gc.peak_fp16_TFLOPS,
             "mem_gb": gc.mem_per_GPU_in_GB, "hbm": gc.hbm_bandwidth_in_GB_per_sec,
             "flops_efficiency": flops_eff, "hbm_efficiency": hbm_eff,
             "ffn_embed_dim": int(ffn), "params": None}
    return make, notes


def la_grid(info: dict) -> tuple[list[dict], dict]:
    """llm-analysis's training analysis for every layout of the common sub-space."""
    from llm_analysis.analysis import ActivationRecomputation, DSZeRO

    make, notes = la_setup(info)
    rc_enum = {"none": ActivationRecomputation.NONE,
               "selective": ActivationRecomputation.SELECTIVE,
               "full": ActivationRecomputation.FULL}
    seq, batch = info["seq_len"], info["global_batch"]
    rows = []
    shapes = sorted({(tp, pp, dp) for tp, pp, dp, _ in info["candidates"]})
    mbs = sorted({mb for *_, mb in info["candidates"]})
    for tp, pp, dp in shapes:
        for sp in ((False, True) if tp > 1 else (False,)):
            la = make(tp, pp, dp, sp)
            notes["params"] = int(la.total_num_params)
            for mb in mbs:
                if batch % (dp * mb):
                    continue
                for zero in (0, 1, 2, 3):
                    for rc in RECOMPUTES:
                        d = la.training(batch_size_per_gpu=mb, global_batch_size=batch,
                                        seq_len=seq, activation_recomputation=rc_enum[rc],
                                        ds_zero=DSZeRO(zero), flash_attn=True)
                        ga = d["gradient_accumulation_steps"]
                        if rc == "full":
                            rec = d["latency_fwd"]
                        elif rc == "selective":
                            rec = (la.get_num_flops_total_selective_recompute_attn(mb, seq)
                                   / (tp * pp * la.get_TFLOPS_per_gpu() * 1e12))
                        else:
                            rec = 0.0
                        # analysis.py 1979-1985 put the output-layer (logits) and final-norm
                        # activations into the micro-batch-1 figure; at micro-batch 1 that figure
                        # is used as is (2010-2011) and 2031-2039 add both again.
                        dup = 0.0
                        if mb == 1:
                            dup = (la.get_activation_memory_output_embedding(1, seq)
                                   + la.get_activation_memory_per_layernorm(1, seq, rc_enum[rc]))
                        rows.append({
                            "dp": dp, "tp": tp, "pp": pp, "zero": zero, "sp": sp, "mb": mb,
                            "recompute": rc, "ga": ga,
                            "step": d["latency_per_iter"],
                            "step_roofline": ga * (3 * d["latency_fwd"] + rec),
                            "tp_comm_fwd": d["latency_fwd_tp_comm"],
                            "memory": d["(weight+op_state+grad+act)_memory_per_gpu"],
                            "states": d["(weight+op_state+grad)_memory_per_gpu"],
                            "activations": d["activation_memory_per_gpu"],
                            "mb1_double_count": dup,
                            "fits": d["memory_left_per_gpu"] >= 0})
    return rows, notes


# ====================================================================================== stats
def avg_ranks(x: list[float]) -> list[float]:
    """1-based ranks, ties get their average rank (values equal to 1e-9 relative are ties)."""
    order = sorted(range(len(x)), key=lambda i: x[i])
    ranks = [0.0] * len(x)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and math.isclose(x[order[j + 1]], x[order[i]], rel_tol=1e-9):
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(a: list[float], b: list[float]) -> float:
    if len(a) < 3:
        return float("nan")
    ra, rb = avg_ranks(a), avg_ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    return cov / math.sqrt(va * vb) if va > 0 and vb > 0 else float("nan")


def quantiles(x: list[float]) -> dict:
    if not x:
        return {}
    s = sorted(x)

    def q(p):
        k = (len(s) - 1) * p
        lo, hi = math.floor(k), math.ceil(k)
        return s[lo] + (s[hi] - s[lo]) * (k - lo)
    return {"min": s[0], "p10": q(0.1), "median": q(0.5), "p90": q(0.9), "max": s[-1],
            "n": len(s)}


def key_of(d: dict) -> tuple:
    return (d["tp"], d["pp"], d["dp"], d["zero"], bool(d["sp"]) and d["tp"] > 1, d["mb"],
            d["recompute"])


def words(d: dict) -> str:
    w = [f"dp{d['dp']}"]
    if d["tp"] > 1:
        w.append(f"tp{d['tp']}" + ("+sp" if d["sp"] else ""))
    if d["pp"] > 1:
        w.append(f"pp{d['pp']}")
    w += [f"z{d['zero']}", f"mb{d['mb']}"]
    if d["recompute"] != "none":
        w.append({"selective": "sel", "full": "full"}[d["recompute"]])
    return " ".join(w)


def rank_by(rows: list[dict], step: str) -> dict:
    """key -> (rank, tied) among ``rows`` by ``step`` alone: rank = 1 + the number of layouts
    strictly faster (1e-9 relative), tied = how many share that step time."""
    vals = sorted(d[step] for d in rows)
    out = {}
    for d in rows:
        v = d[step]
        faster = sum(1 for x in vals if x < v and not math.isclose(x, v, rel_tol=1e-9))
        tied = sum(1 for x in vals if math.isclose(x, v, rel_tol=1e-9))
        out[key_of(d)] = (faster + 1, tied)
    return out


# ======================================================================================= main
def compare(case: dict) -> dict:
    t0 = time.perf_counter()
    info = run_workbench("--wb-info", case)
    la_rows, notes = la_grid(info)
    la_by = {key_of(d): d for d in la_rows}
    wb_plan = {key_of(d): d for d in info["plan_rows"]}
    # estimate every layout either tool says fits
    want = sorted({k for k, d in la_by.items() if d["fits"]} | set(wb_plan))
    lays = [dict(zip(("tp", "pp", "dp", "zero", "sp", "mb", "recompute"), k)) for k in want]
    ests = run_workbench("--wb-estimate", case, lays)
    wb_est = dict(zip(want, ests))

    # consistency of the planner with single estimates
    plan_vs_est = []
    est_fit_missing = []
    for k, e in wb_est.items():
        if k in wb_plan:
            p = wb_plan[k]
            plan_vs_est.append(max(abs(p["step"] - e["step"]) / e["step"],
                                   abs(p["memory"] - e["memory"]) / e["memory"]))
        elif e.get("valid") and e.get("fits"):
            est_fit_missing.append(k)

    la_fit = [d for d in la_rows if d["fits"]]
    la_rank = rank_by(la_fit, "step")
    la_rank_rf = rank_by(la_fit, "step_roofline")
    wb_rank = {key_of(d): d["rank"] for d in info["plan_rows"]}
    common = [k for k in wb_plan if k in la_by and la_by[k]["fits"]]

    wb1 = info["plan_rows"][0]
    la_sorted = sorted(la_fit, key=lambda d: (d["step"], d["memory"]))
    la1 = la_sorted[0]
    la_ties = [d for d in la_fit if math.isclose(d["step"], la1["step"], rel_tol=1e-9)]
    la_rf_sorted = sorted(la_fit, key=lambda d: (d["step_roofline"], d["memory"]))
    la1_rf = la_rf_sorted[0]

    def wb_verdict(k):
        if k in wb_rank:
            return f"#{wb_rank[k]}"
        e = wb_est.get(k)
        if e is None:
            return "not estimated"
        if not e["valid"]:
            return "invalid"
        return f"does not fit ({e['memory'] / GIB:.1f} GiB)"

    def la_verdict(k, ranks):
        d = la_by.get(k)
        if d is None:
            return "not expressible"
        if not d["fits"]:
            return f"no fit ({d['memory'] / GIB:.1f} GiB)"
        rank, tied = ranks[k]
        return f"#{rank}" + (f" ({tied} tied)" if tied > 1 else "")

    rho = spearman([wb_plan[k]["step"] for k in common], [la_by[k]["step"] for k in common])
    rho_rf = spearman([wb_plan[k]["step"] for k in common],
                      [la_by[k]["step_roofline"] for k in common])
    by_rc = {}
    for rc in RECOMPUTES:
        ks = [k for k in common if k[6] == rc]
        by_rc[rc] = {"n": len(ks),
                     "rho_roofline": spearman([wb_plan[k]["step"] for k in ks],
                                              [la_by[k]["step_roofline"] for k in ks])}
    ratio = [la_by[k]["memory"] / wb_plan[k]["memory"] for k in common]
    ratio_dedup = [(la_by[k]["memory"] - la_by[k]["mb1_double_count"]) / wb_plan[k]["memory"]
                   for k in common]
    dup_gib = sorted({round(d["mb1_double_count"] / GIB, 2) for d in la_rows
                      if d["mb1_double_count"] > 0})
    by_zero = {z: quantiles([la_by[k]["memory"] / wb_plan[k]["memory"]
                             for k in common if k[3] == z]) for z in range(4)}
    by_rcm = {rc: quantiles([la_by[k]["memory"] / wb_plan[k]["memory"]
                             for k in common if k[6] == rc]) for rc in RECOMPUTES}
    by_pp = {}
    for k in common:
        by_pp.setdefault("pp1" if k[1] == 1 else "pp>1", []).append(
            la_by[k]["memory"] / wb_plan[k]["memory"])
    comp = {"states": quantiles([la_by[k]["states"] / wb_est[k]["states"] for k in common]),
            "activations": quantiles([la_by[k]["activations"] / wb_est[k]["activations"]
                                      for k in common if wb_est[k]["activations"] > 0]),
            "states_pp_divides": quantiles([la_by[k]["states"] / wb_est[k]["states"]
                                            for k in common
                                            if info["model"]["layers"] % k[1] == 0]),
            "states_pp_uneven": quantiles([la_by[k]["states"] / wb_est[k]["states"]
                                           for k in common
                                           if info["model"]["layers"] % k[1] != 0]),
            "wb_buffers_share": quantiles([wb_est[k]["buffers"] / wb_est[k]["memory"]
                                           for k in common])}
    step_ratio = {rc: quantiles([la_by[k]["step"] / wb_plan[k]["step"]
                                 for k in common if k[6] == rc]) for rc in RECOMPUTES}
    la_only = [k for k, d in la_by.items() if d["fits"] and k not in wb_plan]
    la_only_invalid = [k for k in la_only if not wb_est[k]["valid"]]
    la_only_oom = [k for k in la_only if wb_est[k]["valid"]]
    wb_only = [k for k in wb_plan if not (k in la_by and la_by[k]["fits"])]
    invalid_reasons = {}
    for k in la_only_invalid:          # one entry per rule, numbers masked
        why = re.sub(r"\b\d+\b", "N", wb_est[k]["why"])
        invalid_reasons[why] = invalid_reasons.get(why, 0) + 1

    return {
        "case": case["key"], "info": {k: v for k, v in info.items()
                                      if k not in ("plan_rows", "candidates")},
        "la_notes": notes, "seconds": time.perf_counter() - t0,
        "grid": len(la_rows), "la_fits": len(la_fit), "wb_fits": len(wb_plan),
        "common": len(common), "la_only_oom": len(la_only_oom),
        "la_only_invalid": len(la_only_invalid), "invalid_reasons": invalid_reasons,
        "wb_only": len(wb_only),
        "plan_vs_estimate_max_rel": max(plan_vs_est) if plan_vs_est else float("nan"),
        "estimate_fits_not_in_plan": [words(dict(zip(("tp", "pp", "dp", "zero", "sp", "mb",
                                                      "recompute"), k)))
                                      for k in est_fit_missing],
        "wb_best": {**wb1, "words": words(wb1), "la": la_verdict(key_of(wb1), la_rank),
                    "la_roofline": la_verdict(key_of(wb1), la_rank_rf),
                    "la_step": la_by[key_of(wb1)]["step"] if key_of(wb1) in la_by else None,
                    "la_memory": la_by[key_of(wb1)]["memory"] if key_of(wb1) in la_by else None,
                    "terms": wb_est[key_of(wb1)]["terms"]},
        "la_best": {**la1, "words": words(la1), "wb": wb_verdict(key_of(la1)),
                    "wb_step": wb_plan.get(key_of(la1), {}).get("step"),
                    "wb_memory": (wb_plan.get(key_of(la1)) or wb_est.get(key_of(la1)) or {}
                                  ).get("memory"),
                    "terms": wb_est[key_of(la1)].get("terms")},
        "la_ties": len(la_ties),
        "la_ties_wb_ranks": quantiles([wb_rank[key_of(d)] for d in la_ties
                                       if key_of(d) in wb_rank]),
        "la_ties_in_wb": sum(key_of(d) in wb_rank for d in la_ties),
        "la_best_roofline": {**la1_rf, "words": words(la1_rf), "wb": wb_verdict(key_of(la1_rf))},
        "free_best": {**info["free_best"], "words": words(info["free_best"])},
        "rho": rho, "rho_roofline": rho_rf, "rho_by_recompute": by_rc,
        "memory_ratio": quantiles(ratio), "memory_ratio_mb1_dedup": quantiles(ratio_dedup),
        "mb1_double_count_gib": [dup_gib[0], dup_gib[-1]] if dup_gib else [],
        "memory_ratio_by_zero": by_zero,
        "memory_ratio_by_recompute": by_rcm,
        "memory_ratio_by_pp": {k: quantiles(v) for k, v in by_pp.items()},
        "memory_components": comp, "step_ratio": step_ratio,
        "top": [{"wb_rank": d["rank"], "words": words(d), "wb_step": d["step"],
                 "wb_mem": d["memory"], "la_step": la_by.get(key_of(d), {}).get("step"),
                 "la_mem": la_by.get(key_of(d), {}).get("memory"),
                 "la": la_verdict(key_of(d), la_rank),
                 "la_rf": la_verdict(key_of(d), la_rank_rf)} for d in info["plan_rows"][:10]],
    }


def fmt_q(q: dict, digits: int = 3) -> str:
    if not q:
        return "n/a"
    f = f".{digits}f"
    return (f"median {q['median']:{f}} [min {q['min']:{f}}, p10 {q['p10']:{f}},"
            f" p90 {q['p90']:.{digits}f}, max {q['max']:.{digits}f}] (n={q['n']})")


def print_case(r: dict) -> None:
    i, n = r["info"], r["la_notes"]
    print(f"\n== {r['case']}: {i['model']['name']} on {i['world']} x {i['gpu']['name']}, "
          f"seq {i['seq_len']}, global batch {i['global_batch']} ==")
    print(f"llm-analysis: {n['gpu_config']} ({n['peak_tflops']} TFLOPS, {n['hbm']} GB/s, "
          f"{n['mem_gb']} GB), flops_efficiency {n['flops_efficiency']:.4f}, "
          f"hbm_efficiency {n['hbm_efficiency']:.4f}, ffn_embed_dim {n['ffn_embed_dim']}, "
          f"params {n['params']:,}")
    print(f"grid {r['grid']} layouts; fit: llm-analysis {r['la_fits']}, workbench {r['wb_fits']}, "
          f"both {r['common']}; fit only in llm-analysis: {r['la_only_oom']} over the workbench's "
          f"memory + {r['la_only_invalid']} invalid in the workbench; fit only in the workbench: "
          f"{r['wb_only']}")
    for why, c in r["invalid_reasons"].items():
        print(f"  invalid in the workbench ({c}): {why[:200]}")
    print(f"planner vs single estimates: max relative difference "
          f"{r['plan_vs_estimate_max_rel']:.2e}; estimated to fit but missing from the plan "
          f"table: {len(r['estimate_fits_not_in_plan'])}")
    ck = i["checks"]
    print(f"planner layouts above nvidia-smi's {ck['smi_bytes'] / 2**20:,.0f} MiB (the planner's "
          f"limit is {i['gpu']['capacity_bytes'] / 2**20:,.0f} MiB): "
          f"{ck['restricted_above_smi']} of "
          f"{r['wb_fits']} here, {ck['unrestricted_above_smi']} of {ck['unrestricted_fits']} "
          "unrestricted")
    for z in ck["zero2_as_fsdp2"]:
        print(f"planner {z['which']} is ZeRO-2 (run as FSDP2, reshard_after_forward=False): "
              f"{z['zero2']['memory'] / GIB:.1f} GiB, {z['zero2']['step']:.3f} s as zero=2; "
              f"{z['zero3_no_reshard']['memory'] / GIB:.1f} GiB, "
              f"{z['zero3_no_reshard']['step']:.3f} s as zero=3 + reshard_after_forward=false")
    print(f"ZeRO-2 layouts (dp > 1) the planner says fit: {ck['zero2_rows']}; over capacity when "
          f"estimated as zero=3 + reshard_after_forward=false: {ck['zero2_rows_over_as_fsdp2']}")
    print("\nTop 10 by the workbench planner (common sub-space) and what llm-analysis says")
    print(f"{'WB':>4} {'layout':<28} {'WB s':>8} {'WB GiB':>7} {'LA s':>8} {'LA GiB':>7} "
          f"{'LA rank':>22} {'LA-roofline rank':>22}")
    for t in r["top"]:
        las = f"{t['la_step']:.3f}" if t["la_step"] is not None else "-"
        lam = f"{t['la_mem'] / GIB:.1f}" if t["la_mem"] is not None else "-"
        print(f"{t['wb_rank']:>4} {t['words']:<28} {t['wb_step']:>8.3f} {t['wb_mem'] / GIB:>7.1f} "
              f"{las:>8} {lam:>7} {t['la']:>22} {t['la_rf']:>22}")
    wb, la, lr = r["wb_best"], r["la_best"], r["la_best_roofline"]
    print(f"\nworkbench #1: {wb['words']} ({wb['step']:.3f} s, {wb['memory'] / GIB:.1f} GiB); "
          f"llm-analysis rank {wb['la']} (roofline {wb['la_roofline']})")
    print(f"  its terms [s]: " + ", ".join(f"{k} {v:.3f}" for k, v in wb["terms"].items() if v))
    print(f"planner with recompute free: {r['free_best']['words']} "
          f"({r['free_best']['step']:.3f} s)")
    ub = r["info"]["unrestricted_best"]
    print(f"planner unrestricted (all schedules, cp, offload): dp{ub['dp']} tp{ub['tp']} "
          f"pp{ub['pp']} cp{ub['cp']} z{ub['zero']} {ub['pp_schedule']} v{ub['virtual_stages']} "
          f"mb{ub['micro_batch']} {ub['recompute']} recompute ({ub['step']:.3f} s)")
    print(f"llm-analysis #1 (least memory of the {r['la_ties']} layouts tied at "
          f"{la['step']:.3f} s): "
          f"{la['words']} ({la['memory'] / GIB:.1f} GiB); workbench rank {la['wb']}")
    if la.get("terms"):
        print(f"  its workbench terms [s]: "
              + ", ".join(f"{k} {v:.3f}" for k, v in la["terms"].items() if v))
    print(f"  the {r['la_ties']} tied llm-analysis winners: {r['la_ties_in_wb']} fit in the "
          f"workbench, its ranks {fmt_q(r['la_ties_wb_ranks'], 0)}")
    print(f"llm-analysis roofline #1: {lr['words']} ({lr['step_roofline']:.3f} s); "
          f"workbench rank {lr['wb']}")
    print(f"Spearman rho (step, {r['common']} common layouts): llm-analysis latency_per_iter "
          f"{r['rho']:.3f}; derived roofline {r['rho_roofline']:.3f}; roofline within recompute "
          + ", ".join(f"{rc} {v['rho_roofline']:.3f} (n={v['n']})"
                      for rc, v in r["rho_by_recompute"].items()))
    print(f"step LA/WB by recompute: " + "; ".join(
        f"{rc} {fmt_q(q)}" for rc, q in r["step_ratio"].items() if q))
    print(f"memory LA/WB total: {fmt_q(r['memory_ratio'])}")
    lo, hi = r["mb1_double_count_gib"]
    print(f"  without LA's micro-batch-1 double count of the output layer ({lo}-{hi} GiB): "
          f"{fmt_q(r['memory_ratio_mb1_dedup'])}")
    for z, q in r["memory_ratio_by_zero"].items():
        print(f"  zero {z}: {fmt_q(q)}")
    for rc, q in r["memory_ratio_by_recompute"].items():
        print(f"  {rc}: {fmt_q(q)}")
    for k, q in r["memory_ratio_by_pp"].items():
        print(f"  {k}: {fmt_q(q)}")
    c = r["memory_components"]
    print(f"  model states LA/WB: {fmt_q(c['states'])}")
    print(f"    pp divides the layers: {fmt_q(c['states_pp_divides'])}")
    print(f"    pp does not divide the layers: {fmt_q(c['states_pp_uneven'])}")
    print(f"  activations LA/WB: {fmt_q(c['activations'])}")
    print(f"  WB buffers / WB total (LA has none): {fmt_q(c['wb_buffers_share'])}")


def summary(results: list[dict]) -> None:
    print("\n== Summary (LA = llm-analysis latency_per_iter; its #1 = least memory among its "
          "tied fastest) ==")
    print(f"{'case':<18} {'grid':>5} {'fit LA':>6} {'fit WB':>6} {'both':>5}  {'WB #1':<24} "
          f"{'LA rank of WB #1':<22} {'LA #1':<22} {'WB rank':>7} {'best WB rank, LA ties':>21}")
    for r in results:
        wb, la = r["wb_best"], r["la_best"]
        q = r["la_ties_wb_ranks"]
        best_tie = f"#{q['min']:.0f} ({q['n']} of {r['la_ties']} fit)" if q else "none fit"
        print(f"{r['case']:<18} {r['grid']:>5} {r['la_fits']:>6} {r['wb_fits']:>6} "
              f"{r['common']:>5}  {wb['words']:<24} {wb['la']:<22} {la['words']:<22} "
              f"{la['wb']:>7} {best_tie:>21}")
    print(f"\n{'case':<18} {'rho LA':>7} {'rho roofline':>12} "
          f"{'memory LA/WB median [min, max]':>32}"
          f" {'no mb1 double count':>26} {'states LA/WB':>13} {'activ. LA/WB':>13}")
    for r in results:
        q, d = r["memory_ratio"], r["memory_ratio_mb1_dedup"]
        c = r["memory_components"]
        print(f"{r['case']:<18} {r['rho']:>7.3f} {r['rho_roofline']:>12.3f} "
              f"{q['median']:>10.3f} [{q['min']:.3f}, {q['max']:.3f}]{'':>9}"
              f"{d['median']:>9.3f} [{d['min']:.3f}, {d['max']:.3f}] "
              f"{c['states']['median']:>13.3f} {c['activations']['median']:>13.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", metavar="PATH", help="also write every figure as JSON")
    ap.add_argument("--wb-info", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--wb-estimate", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--la-speed", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.la_speed:          # benchmarks/estimate_speed.py: llm-analysis's rate, this process
        info = json.load(sys.stdin)
        t0 = time.perf_counter()
        rows, _ = la_grid(info)
        json.dump({"layouts": len(rows), "seconds": time.perf_counter() - t0}, sys.stdout)
        return
    if args.wb_info or args.wb_estimate:
        req = json.load(sys.stdin)
        out = wb_info(req["case"]) if args.wb_info else wb_estimate(req["case"], req["layouts"])
        json.dump(out, sys.stdout)
        return
    import importlib.metadata as md
    print(f"Planner vs llm-analysis {md.version('llm-analysis')} (python "
          f"{sys.version.split()[0]}); the workbench runs under {WB_PYTHON}. "
          "GiB = 2^30 bytes; LA = llm-analysis, WB = workbench.")
    results = []
    for case in CASES:
        r = compare(case)
        print_case(r)
        results.append(r)
    summary(results)
    print(f"\n(total {sum(r['seconds'] for r in results):.1f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Our model-state memory (params + grads + optimizer per GPU) and parameter counts held against
independent tools: DeepSpeed's ZeRO-2/3 model-state estimators and llm-analysis.

Run it with a Python that has the peers installed (they need torch; the workbench does not), e.g.

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install torch==2.13.0 \\
        && DS_BUILD_OPS=0 /tmp/peers/bin/pip install --no-build-isolation deepspeed llm-analysis \\
        pyyaml
    /tmp/peers/bin/python benchmarks/model_states_vs_peers.py [--json]

The workbench is imported from this checkout (its parent folder is put on sys.path); it needs
only pyyaml. A peer that cannot be imported is skipped with a message. ``--json`` prints one
JSON object (rows, parameter counts, skipped peers) instead of the tables.

Grid: llama3-8b, llama3-70b, mixtral-8x7b, gpt3-175b presets; ZeRO 0/1/2/3; dp 8 and 64;
tp 1 and 8 where the peer models TP (llm-analysis does, DeepSpeed's estimators do not);
bf16 + AdamW, pp = cp = ep = 1. Extras: DeepSpeed with CPU offload (GPU and host side) and
llm-analysis with Mixtral at ep = 8. Sizes print in GB = 1e9 bytes; JSON holds bytes.
See docs/model-states-vs-peers.md for the explanation of every difference.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import workbench  # noqa: E402
from workbench.catalog import MODELS  # noqa: E402
from workbench.estimate import estimate  # noqa: E402
from workbench.estimate.model.params import total_params  # noqa: E402

MODEL_KEYS = ("llama3-8b", "llama3-70b", "mixtral-8x7b", "gpt3-175b")
ZERO_STAGES = (0, 1, 2, 3)
DP_SIZES = (8, 64)
TP_SIZES = (1, 8)
GPUS_PER_NODE = 8
SEQ_LEN = 2048          # irrelevant to model states; within every preset's context
GB = 1e9


# ------------------------------------------------------------------------------------------ ours
# What llm-analysis's shape family can express: one (tied) embedding table, no biases, no learned
# positions, two weight-only norms per layer and one final.
LA_TWIN = {"tied_embeddings": True, "bias": False, "norm": "rmsnorm"}


def twin_model_doc(key: str) -> dict:
    """The preset written out as an inline model (inline models carry no learned positions)
    with the ``LA_TWIN`` fields: the same shape as llm-analysis sees it."""
    m = MODELS[key]
    doc = {f: getattr(m, f) for f in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden",
                                      "vocab", "mlp", "head_dim", "dropout")}
    if m.moe is not None:
        doc["moe"] = {"experts": m.moe.experts, "top_k": m.moe.top_k,
                      "expert_ffn_hidden": m.moe.expert_ffn_hidden,
                      "shared_experts": m.moe.shared_experts, "dense_layers": m.moe.dense_layers}
    return {"name": f"{key} (llm-analysis twin)", **doc, **LA_TWIN}


def scenario_doc(model: str, dp: int, zero: int, tp: int = 1, ep: int = 1,
                 offload: str = "none", twin: bool = False) -> dict:
    """A contract-1 scenario for one grid point (hardware sized to dp*tp GPUs, 8 per node);
    ``twin`` replaces the preset by its llm-analysis-expressible twin (``LA_TWIN``)."""
    world = dp * tp
    return {
        "hardware": {
            "gpu": "h100-sxm", "gpus_per_node": GPUS_PER_NODE, "nodes": world // GPUS_PER_NODE,
            "intra_node": "nvlink4", "inter_node": {"link": "ib-ndr", "nics_per_node": 8},
            "host": {"cpu": "xeon-platinum-8480+", "memory": "ddr5-4800", "memory_gb": 2048,
                     "channels": 8, "sockets": 2},
            "storage": {"drive": "pcie4-nvme", "drives": 8},
        },
        "model": twin_model_doc(model) if twin else {"preset": model},
        "parallel": {"dp": dp, "zero": zero, "tp": tp, "ep": ep},
        "training": {"seq_len": SEQ_LEN, "micro_batch": 1, "global_batch": dp,
                     "precision": "bf16", "optimizer": "adamw", "recompute": "selective",
                     "offload": offload},
    }


def ours(model: str, dp: int, zero: int, tp: int = 1, ep: int = 1, offload: str = "none",
         twin: bool = False) -> dict:
    """Our per-GPU figures for one grid point, through the public estimate path."""
    doc = scenario_doc(model, dp, zero, tp, ep, offload, twin)
    d = estimate(workbench.parse_scenario(doc)).to_dict()
    g = d["memory"]["per_gpu"]
    stage = d["memory"]["per_stage"][d["memory"]["worst_pipeline_rank"]]
    bufs = stage["buffers_detail"]
    states = g["params"] + g["grads"] + g["optimizer"]
    gather = bufs.get("fsdp_unsharded_params", 0.0) + bufs.get("fsdp_unsharded_grads", 0.0)
    return {"params": g["params"], "grads": g["grads"], "optimizer": g["optimizer"],
            "states": states, "fsdp_gather": gather, "host_per_node": d["memory"]["host_per_node"],
            "total_params": d["model"]["params"]}


# ------------------------------------------------------------------------------------- DeepSpeed
def load_deepspeed():
    """(zero2 fn, zero3 fn, zero2 cold printer, version) or raise ImportError."""
    with contextlib.redirect_stdout(sys.stderr):  # accelerator-detection warning goes to stdout
        import deepspeed
        from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
        from deepspeed.runtime.zero.stage_1_and_2 import (
            estimate_zero2_model_states_mem_needs, estimate_zero2_model_states_mem_needs_all_cold)
    return (estimate_zero2_model_states_mem_needs, estimate_zero3_model_states_mem_needs,
            estimate_zero2_model_states_mem_needs_all_cold, deepspeed.__version__)


def largest_module_params(key: str) -> int:
    """What DeepSpeed's ``model_to_params`` (stage3.py) would return as largest_layer_params on
    the Hugging Face module tree of this shape: the largest ``sum(p.numel() for p in
    m.parameters(recurse=False))`` over modules, i.e. the largest single Embedding/Linear
    (every expert's w1/w2/w3 is its own Linear in the classic Mixtral layout). For all four
    presets this is the token embedding (vocab x hidden)."""
    m = MODELS[key]
    h, q, kv = m.hidden, m.heads * m.dim_per_head, m.kv_dim
    b = 1 if m.bias else 0
    ffn = m.moe.expert_ffn_hidden if m.moe else m.ffn_hidden
    cands = [m.vocab * h,                                  # embed_tokens / wte (and lm_head)
             int(m.extra.get("position_embeddings", 0)) * h,
             h * q + b * q, h * kv + b * kv, q * h + b * h,  # q, k, v, o projections
             h * ffn + b * ffn, ffn * h + b * h]           # MLP / expert linears
    return max(cands)


def deepspeed_rows(ds) -> list[dict]:
    z2, z3, _, _ = ds
    rows = []
    for key in MODEL_KEYS:
        P = total_params(MODELS[key])
        L = largest_module_params(key)
        for dp in DP_SIZES:
            nodes = dp // GPUS_PER_NODE
            for zero in (2, 3):
                o = ours(key, dp, zero)
                case = f"{key} z{zero} dp{dp} tp1"
                if zero == 2:
                    _, gpu = z2(P, GPUS_PER_NODE, nodes, cpu_offload=False)
                    rows.append(row(case, "deepspeed", "gpu states", gpu, o["states"],
                                    why_ds(zero, "states", key)))
                else:
                    _, gpu, _ = z3(P, L, GPUS_PER_NODE, nodes, cpu_offload=False,
                                   cpu_offload_params=False, zero_init=True)
                    rows.append(row(case, "deepspeed", "gpu states", gpu, o["states"],
                                    why_ds(zero, "states", key)))
                    rows.append(row(case, "deepspeed", "gpu states+gather", gpu,
                                    o["states"] + o["fsdp_gather"], why_ds(zero, "gather", key)))
                # CPU offload: DeepSpeed offload_optimizer (z2) / offload_param+optimizer (z3)
                # vs ours training.offload = cpu (optimizer + grad shard, + params at z3).
                oo = ours(key, dp, zero, offload="cpu")
                if zero == 2:
                    cpu, gpu = z2(P, GPUS_PER_NODE, nodes, cpu_offload=True)
                else:
                    cpu, gpu, _ = z3(P, L, GPUS_PER_NODE, nodes, cpu_offload=True,
                                     cpu_offload_params=True, zero_init=True)
                rows.append(row(case + " cpu-offload", "deepspeed", "gpu states", gpu,
                                oo["states"], why_ds(zero, "offload-gpu", key)))
                rows.append(row(case + " cpu-offload", "deepspeed", "host/node", cpu,
                                oo["host_per_node"], why_ds(zero, "offload-host", key, dp)))
    return rows


def why_ds(zero: int, what: str, key: str, dp: int = 0) -> str:
    if what == "states":
        if zero == 2:
            return "DS 2+18/N B/param (extra 2 B fp16 grad partition); ours 2+16/N (Megatron bf16)"
        return ("DS 18/N (16-bit param shard 2+fp32 grad 4+master 4+Adam 8) + 4 B x largest "
                "module; ours 16/N (FSDP2 fp32 shard is the master), gather in buffers")
    if what == "gather":
        return ("ours adds FSDP2 gather buffers 10 B x largest unit (block/embedding); "
                "DS 4 B x largest module")
    if what == "offload-gpu":
        if zero == 2:
            return "agree: both keep only bf16 params (2 B/param) on the GPU"
        return "DS 4 B x largest module on GPU; ours 0 (gathered copies are in buffers)"
    if zero == 2:
        return (f"DS P x max(4 x total_gpus, 16) x 1.5 ({'=48' if dp == 8 else '=384'} B/param/node, "
                "init-time fp32 copies); ours (12+4)/N x 8 GPUs")
    return "DS 18 B/param / nodes x 1.5 (zero_init); ours 16/N x 8 GPUs"


def deepspeed_cold_check(ds) -> dict:
    """Run the printing ``_all_cold`` function once and check its 'GB' column is bytes / 2**30."""
    z2, _, cold, _ = ds
    P = total_params(MODELS["llama3-8b"])
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        cold(P, num_gpus_per_node=8, num_nodes=1)
    text = buf.getvalue()
    printed = [float(x) for x in re.findall(r"\|\s+([0-9.]+)GB\s+\|", text)]
    exact = z2(P, 8, 1, cpu_offload=False)[1]
    return {"printed": text.rstrip("\n"), "printed_gpu_gb_no_offload": printed[-1],
            "bytes": exact, "bytes_over_2_30": exact / 2**30, "bytes_over_1e9": exact / 1e9,
            "is_gib": abs(printed[-1] - exact / 2**30) < 0.006}


# ------------------------------------------------------------------------------------ llm-analysis
def load_llm_analysis():
    with contextlib.redirect_stdout(sys.stderr):
        from llm_analysis.analysis import DSZeRO, LLMAnalysis
        from llm_analysis.config import (DtypeConfig, ModelConfig, ParallelismConfig,
                                         get_gpu_config_by_name)
        from llm_analysis.logger import logger
    logger.setLevel(logging.ERROR)
    from importlib.metadata import version
    return {"LLMAnalysis": LLMAnalysis, "DSZeRO": DSZeRO, "ModelConfig": ModelConfig,
            "DtypeConfig": DtypeConfig, "ParallelismConfig": ParallelismConfig,
            "gpu": get_gpu_config_by_name("h100-sxm-80gb"), "version": version("llm-analysis")}


def la_model_config(la, key: str, glu_isoparam: bool = True):
    """A llm-analysis ModelConfig with our shape. llm-analysis counts an MLP as two h x ffn
    matrices; for SwiGLU (three matrices of h x f) ``glu_isoparam`` passes ffn = 1.5 f so the
    count matches (its own convention: analysis.py 'swiglu decreases the expansion ratio by 2/3
    to get isoparam'). Untied heads, biases and learned positions have no field there."""
    m = MODELS[key]
    ffn = m.moe.expert_ffn_hidden if m.moe else m.ffn_hidden
    if m.mlp == "swiglu" and glu_isoparam:
        ffn = ffn * 3 // 2
    return la["ModelConfig"](
        name=key, num_layers=m.layers, n_head=m.heads, hidden_dim=m.hidden, vocab_size=m.vocab,
        max_seq_len=max(SEQ_LEN, m.max_seq_len or SEQ_LEN), num_key_value_heads=m.kv_heads,
        ffn_embed_dim=ffn, expansion_ratio=ffn / m.hidden,
        moe_num_experts=m.moe.experts if m.moe else 1, moe_top_k=m.moe.top_k if m.moe else 1)


def la_training(la, key: str, dp: int, zero: int, tp: int, ep: int = 1) -> dict:
    """llm-analysis's own ``training()`` summary for one layout (bf16 weights, fp32 master,
    Adam: its defaults master_weights_dtype_bytes=4, other_op_bytes=None -> 4+8)."""
    par = la["ParallelismConfig"](tp_size=tp, pp_size=1, dp_size=dp, ep_size=ep)
    a = la["LLMAnalysis"](la_model_config(la, key), la["gpu"],
                          la["DtypeConfig"](name="w16a16e16", weight_bits=16, activation_bits=16,
                                            embedding_bits=16), par)
    with contextlib.redirect_stdout(sys.stderr):
        s = a.training(batch_size_per_gpu=1, gradient_accumulation_steps=1, global_batch_size=dp,
                       seq_len=SEQ_LEN, ds_zero=la["DSZeRO"](zero), flash_attn=True,
                       mlp_gated_linear_units=MODELS[key].mlp == "swiglu")
    return {"params": s["weight_memory_per_gpu"], "grads": s["gradient_memory_per_gpu"],
            "optimizer": s["optimizer_state_memory_per_gpu"],
            "states": s["(weight+op_state+grad)_memory_per_gpu"],
            "total_params": s["num_params_total"]}


def why_la(key: str, zero: int, tp: int, ep: int, ratio_twin: float) -> str:
    m = MODELS[key]
    parts = []
    if zero == 3:
        parts.append("z3: LA 2/N bf16 weight shard + 4/N grad + 12/N opt = 18/N; ours 16/N (FSDP2)")
    if not m.tied_embeddings:
        parts.append("LA omits untied lm_head (v x h)")
    if m.bias or m.extra.get("position_embeddings"):
        parts.append("LA omits biases, LN biases, positions")
    if tp > 1 and abs(ratio_twin - (1.125 if zero == 3 else 1.0)) > 1e-6:
        parts.append("LA shards norms over TP; ours replicates (Megatron)")
    if ep > 1 and zero == 3 and abs(ratio_twin - 1.125) > 1e-6:
        parts.append("LA shards router over dp/ep at z3, ours over dp")
    return "; ".join(parts) or "agree"


def llm_analysis_rows(la) -> list[dict]:
    rows = []
    grid = [(k, dp, z, tp, 1) for k in MODEL_KEYS for dp in DP_SIZES for z in ZERO_STAGES
            for tp in TP_SIZES]
    grid += [("mixtral-8x7b", dp, z, 1, 8) for dp in DP_SIZES for z in ZERO_STAGES]
    for key, dp, zero, tp, ep in grid:
        o = ours(key, dp, zero, tp, ep)
        t = ours(key, dp, zero, tp, ep, twin=True)
        p = la_training(la, key, dp, zero, tp, ep)
        case = f"{key} z{zero} dp{dp} tp{tp}" + (f" ep{ep}" if ep > 1 else "")
        r = row(case, "llm-analysis", "gpu states", p["states"], o["states"], "",
                peer_params=p["total_params"], our_params=o["total_params"])
        r["ours_twin_bytes"] = t["states"]
        r["our_twin_params"] = t["total_params"]
        r["ratio_twin"] = p["states"] / t["states"]
        r["why"] = why_la(key, zero, tp, ep, r["ratio_twin"])
        r["peer_breakdown"] = {k: p[k] for k in ("params", "grads", "optimizer")}
        r["our_breakdown"] = {k: o[k] for k in ("params", "grads", "optimizer")}
        rows.append(r)
    return rows


def param_rows(la) -> list[dict]:
    out = []
    for key in MODEL_KEYS:
        ours_p = total_params(MODELS[key])
        twin = total_params(workbench.parse_scenario(scenario_doc(key, 8, 0, twin=True)).model)
        d = {"model": key, "ours": ours_p, "ours_twin": twin,
             "catalog_expected": MODELS[key].extra.get("expected_params")}
        if la is not None:
            iso = la["LLMAnalysis"](la_model_config(la, key, True), la["gpu"]).get_num_params_total()
            lit = la["LLMAnalysis"](la_model_config(la, key, False), la["gpu"]).get_num_params_total()
            d.update({"llm_analysis_isoparam": int(iso), "llm_analysis_literal_ffn": int(lit),
                      "gap_isoparam": ours_p - int(iso), "gap_literal": ours_p - int(lit),
                      "gap_twin": twin - int(iso)})
        out.append(d)
    return out


# ---------------------------------------------------------------------------------------- output
def row(case, peer, quantity, peer_b, ours_b, why, peer_params=None, our_params=None) -> dict:
    ratio = peer_b / ours_b if ours_b else None   # None: ours holds nothing there
    r = {"case": case, "peer": peer, "quantity": quantity, "peer_bytes": float(peer_b),
         "ours_bytes": float(ours_b), "ratio": ratio, "why": why}
    if peer_params is not None:
        r["peer_params"] = int(peer_params)
        r["our_params"] = int(our_params)
    return r


def fmt_ratio(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"


def print_table(rows: list[dict], with_eq: bool) -> None:
    head = ["case", "quantity", "peer GB", "ours GB", "ratio"] + (["twin"] if with_eq else []) + ["why"]
    body = [[r["case"], r["quantity"], f"{r['peer_bytes'] / GB:,.2f}", f"{r['ours_bytes'] / GB:,.2f}",
             fmt_ratio(r["ratio"])] + ([f"{r['ratio_twin']:.4f}"] if with_eq else []) + [r["why"]]
            for r in rows]
    w = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    right = {2, 3, 4, 5} if with_eq else {2, 3, 4}
    for line in [head] + body:
        print("  ".join(str(x).rjust(w[i]) if i in right else str(x).ljust(w[i])
                        for i, x in enumerate(line)).rstrip())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    args = ap.parse_args(argv)

    skipped, versions = {}, {}
    try:
        ds = load_deepspeed()
        versions["deepspeed"] = ds[3]
    except Exception as e:  # ImportError, or a broken install raising something else
        ds = None
        skipped["deepspeed"] = f"{type(e).__name__}: {e}"
    try:
        la = load_llm_analysis()
        versions["llm-analysis"] = la["version"]
    except Exception as e:
        la = None
        skipped["llm-analysis"] = f"{type(e).__name__}: {e}"
    for name, why in skipped.items():
        print(f"skipping {name}: not importable with {sys.executable} ({why})", file=sys.stderr)

    ds_rows = deepspeed_rows(ds) if ds else []
    la_rows = llm_analysis_rows(la) if la else []
    params = param_rows(la)
    cold = deepspeed_cold_check(ds) if ds else None

    if args.json:
        json.dump({"versions": versions, "skipped": skipped, "units": "bytes",
                   "params": params, "deepspeed_cold_check": cold,
                   "rows": ds_rows + la_rows}, sys.stdout, indent=1)
        print()
        return 0

    print("Model states per GPU (params + grads + optimizer), bf16 + AdamW; GB = 1e9 bytes; "
          "ratio = peer / ours. " + ", ".join([f"python {sys.version.split()[0]}"] + [
              f"{k} {v}" for k, v in versions.items()]))
    for name, why in skipped.items():
        print(f"[{name} skipped: {why}]")
    print("\n== Parameter counts (unsharded; LA = llm-analysis get_num_params_total) ==")
    head = ["model", "ours", "LA ffn=1.5f", "ours-LA", "LA ffn=f", "ours-LA(ffn=f)",
            "ours twin", "twin-LA"]
    body = [[p["model"], f"{p['ours']:,}"] + ([
        f"{p['llm_analysis_isoparam']:,}", f"{p['gap_isoparam']:+,}",
        f"{p['llm_analysis_literal_ffn']:,}", f"{p['gap_literal']:+,}", f"{p['ours_twin']:,}",
        f"{p['gap_twin']:+,}"] if "llm_analysis_isoparam" in p else ["-"] * 4 + [
        f"{p['ours_twin']:,}", "-"]) for p in params]
    w = [max(len(x) for x in col) for col in zip(head, *body)]
    for line in [head] + body:
        print("  ".join(x.ljust(w[i]) if i == 0 else x.rjust(w[i]) for i, x in enumerate(line)))
    if ds_rows:
        print("\n== DeepSpeed ZeRO estimators (no TP: tp1 only; no ZeRO-0/1 estimator) ==")
        print_table(ds_rows, with_eq=False)
        c = cold
        print(f"\nDeepSpeed's printed 'GB' is GiB: estimate_zero2_model_states_mem_needs_all_cold"
              f"(llama3-8b, 8 GPUs) prints {c['printed_gpu_gb_no_offload']:.2f}GB for offload=none;"
              f" the bytes are {c['bytes']:,} = {c['bytes_over_2_30']:.2f} GiB = "
              f"{c['bytes_over_1e9']:.2f} GB (is_gib={c['is_gib']})")
    if la_rows:
        print("\n== llm-analysis (ffn = 1.5 f for SwiGLU; twin = peer / ours on the same shape "
              "with tied embeddings, no biases/positions, weight-only norms) ==")
        print_table(la_rows, with_eq=True)
    if not ds_rows and not la_rows:
        print("\nno peer importable: nothing to compare (see the install lines in the module doc)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

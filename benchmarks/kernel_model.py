"""The kernel model (workbench/estimate/time/kernels.py) held against measured kernels.

Derives the fitted forms from the H200 table (benchmarks/data/h200-reference/kernels.jsonl:
one NVIDIA H200 SXM, PyTorch 2.11, CUDA events, 2026-12-04) and prints, for every measured
shape, the model's time against the measurement:
- bf16 GEMMs: least squares in log time of ``2 M N (K + K0) / (ceiling x peak) + 4 us`` over
  the shapes longer than 0.2 ms (shorter ones are the table's host dispatch floor, ~40 us);
- fp8 GEMMs (tensorwise / rowwise ``_scaled_mm``): the ceiling with the bf16 K0;
- causal attention forward and backward: ``c x S / (S + a)`` of the bf16 peak;
- the grouped-GEMM MoE rows against the dense GEMM form, and the per-expert loop's host time;
- memory-bound kernels: achieved fraction of the HBM peak;
- the sustained GEMM ceiling of every catalog GPU (workbench/estimate/time/sustained.py): the MSMF /
  MAMF fractions from the published records (msmf-*, mamf4-*), the value each part takes and
  the A100 check of the clock law (the SXM4 at 400 W against the PCIe card's MSMF at 300 W).
``--check`` compares the committed constants with the refit and prints the errors only.

    .venv/bin/python benchmarks/kernel_model.py
"""
from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.catalog.gpus import GPUS  # noqa: E402
from workbench.estimate.time import kernels as eff  # noqa: E402
from workbench.estimate.time import sustained  # noqa: E402
from workbench.estimate.model.attention import AttentionKernel  # noqa: E402

TABLE = ROOT / "benchmarks" / "data" / "h200-reference" / "kernels.jsonl"
KERNELS = ROOT / "benchmarks" / "data" / "published_kernels.yaml"
H200 = GPUS["h200-sxm"]


def rows(kind: str) -> list[dict]:
    out = []
    for line in TABLE.read_text().splitlines():
        r = json.loads(line)
        if r.get("kind") == kind:
            out.append(r)
    return out


def gemm_errors(dtype: str = "bf16", min_s: float = 2e-4) -> list[tuple[dict, float]]:
    """(row, model / measured - 1) for the table's GEMMs of ``dtype`` longer than ``min_s``."""
    prec = "fp8" if dtype.startswith("fp8") else "bf16"
    out = []
    for r in rows("gemm"):
        if r["dtype"] != dtype or r["ms"] * 1e-3 < min_s:
            continue
        t = eff.gemm_time(r["M"], r["N"], r["K"], H200, prec)
        out.append((r, t / (r["ms"] * 1e-3) - 1))
    return out


def attention_errors() -> list[tuple[dict, float, float]]:
    """(row, forward error, backward error) for the table's attention points."""
    out = []
    for r in rows("attention"):
        shape = AttentionKernel(r["B"], r["seq"], r["heads"], r["kv_heads"], r["head_dim"],
                                r["head_dim"])
        fwd_flops = 4 * r["B"] * r["heads"] * r["seq"] ** 2 * r["head_dim"] / 2
        f = eff.attention_time(fwd_flops, H200, "fwd", "flash3", shape)
        b = eff.attention_time(2.5 * fwd_flops, H200, "bwd", "flash3", shape)
        out.append((r, f / (r["ms_fwd"] * 1e-3) - 1,
                    b / ((r["ms_fwd_bwd"] - r["ms_fwd"]) * 1e-3) - 1))
    return out


def refit_gemm() -> tuple[float, float]:
    """(ceiling, K0) minimising the squared log error over the bf16 shapes > 0.2 ms, by a
    grid search (no optimiser dependency)."""
    data = [(r["M"], r["N"], r["K"], r["ms"] * 1e-3) for r in rows("gemm")
            if r["dtype"] == "bf16" and r["ms"] * 1e-3 >= 2e-4]
    best = None
    for k0 in range(0, 1501, 2):
        # for a fixed K0 the best ceiling is the geometric mean of the per-shape ceilings
        logs = [math.log(2 * m * n * (k + k0) / ((t - eff.KERNEL_OVERHEAD_S) * 989.5e12))
                for m, n, k, t in data]
        c = math.exp(statistics.fmean(logs))
        sse = sum((lg - math.log(c)) ** 2 for lg in logs)
        if best is None or sse < best[0]:
            best = (sse, c, k0)
    return best[1], best[2]


def sustained_records() -> dict[str, dict[str, dict[str, float]]]:
    """{"msmf" | "mamf4": {catalog key: {precision: value / the catalog's dense peak}}} from
    the published MAMF/MSMF records (benchmarks/data/published_kernels.yaml)."""
    import yaml

    out: dict = {"msmf": {}, "mamf4": {}}
    for r in yaml.safe_load(KERNELS.read_text())["gemm"]:
        kind = r["id"].split("-")[0]
        if kind in out:
            g = GPUS[r["gpu"]]
            peak = g.fp8_tflops if r["precision"] == "fp8" else g.bf16_tflops
            out[kind].setdefault(r["gpu"], {})[r["precision"]] = round(r["value"] / peak, 4)
    return out


def sustained_lines() -> list[str]:
    """The sustained-ceiling section of the report."""
    recs = sustained_records()
    lines = [f"MSMF records {recs['msmf']} (committed {sustained.MSMF})",
             f"MAMF records {recs['mamf4']} (committed {sustained.MAMF})"]
    sxm, pcie = GPUS["a100-sxm-80gb"], GPUS["a100-pcie-80gb"]
    law = sustained.TABLE["a100-sxm-80gb"]["bf16"] * (pcie.power_w / sxm.power_w) ** (1 / 3)
    got = eff.GEMM_CEILING[pcie.name]["bf16"]
    lines.append(f"clock law: A100 SXM4 {sustained.TABLE['a100-sxm-80gb']['bf16']} at "
                 f"{sxm.power_w:g} W -> {law:.3f} at {pcie.power_w:g} W; the PCIe card's "
                 f"MSMF gives {got:.3f} ({law / got - 1:+.1%})")
    for key, g in GPUS.items():
        basis = ("table" if key in sustained.TABLE else "MSMF" if key in sustained.MSMF else
                 f"same die as {sustained.SAME_DIE[key][0]}" if key in sustained.SAME_DIE
                 else f"family {g.arch}")
        c = eff.GEMM_CEILING[g.name]
        lines.append(f"  {key:15} {g.power_w:6g} W  bf16 {c['bf16']:.3f}  fp8 {c['fp8']:.3f}  "
                     f"({basis})")
    return lines


def summary(errs: list[float]) -> str:
    a = sorted(abs(e) for e in errs)
    within = sum(1 for e in a if e <= 0.10)
    return (f"median |error| {statistics.median(a):5.1%}, max {a[-1]:5.1%}, within 10 %: "
            f"{within}/{len(a)}")


def main(argv: list[str] | None = None) -> int:
    c, k0 = refit_gemm()
    print(f"bf16 GEMM refit: ceiling {c:.3f}, K0 {k0}  (committed: "
          f"{eff.GEMM_CEILING['NVIDIA H200 SXM 141GB']['bf16']:.3f}, {eff.GEMM_K0:g})")
    for dtype in ("bf16", "fp8-tensorwise", "fp8-rowwise"):
        errs = gemm_errors(dtype)
        print(f"GEMM {dtype:15} {len(errs):3} shapes > 0.2 ms: {summary([e for _, e in errs])}")
    att = attention_errors()
    print(f"attention forward  {len(att)} points: {summary([f for _, f, _ in att])}")
    print(f"attention backward {len(att)} points: {summary([b for _, _, b in att])}")
    for r in rows("moe_gemm"):
        per = r["tokens"] / r["experts"]
        grouped = eff.gemm_time(r["tokens"], r["expert_ffn"], r["hidden"], H200, "bf16")
        loop = eff.looped_gemm_time(per, r["expert_ffn"], r["hidden"], H200, "bf16",
                                    r["experts"], 2 * r["experts"])
        print(f"MoE {r['experts']:3} experts {r['hidden']}->{r['expert_ffn']}: grouped "
              f"{grouped * 1e3:6.3f} ms vs {r.get('ms_grouped', float('nan')):6.3f} measured; "
              f"loop {loop * 1e3:6.3f} ms vs {r['ms_loop']:6.3f}")
    rates = [r["gbps"] for k in ("rmsnorm", "swiglu_eager", "swiglu_compiled") for r in rows(k)]
    print(f"memory-bound: median {statistics.median(rates):.0f} GB/s = "
          f"{statistics.median(rates) / H200.hbm_gb_per_s:.3f} of the HBM peak "
          f"(committed {eff.MEMORY_BOUND_FRACTION}); fused AdamW "
          f"{rows('adamw_fused_fp32')[0]['gbps'] / H200.hbm_gb_per_s:.3f} "
          f"(committed {eff.OPTIMIZER_FRACTION})")
    ce = rows("cross_entropy_fwd_bwd_fp32_upcast")
    ps = [r["ms"] * 1e-3 / (r["tokens"] * r["vocab"]) for r in ce]
    print("fp32-upcast cross-entropy: " + ", ".join(f"{p * 1e12:.1f}" for p in ps)
          + f" ps per logit = {statistics.median(ps) * statistics.median(rates) * 1e9:.1f} B "
          "at the memory-bound rate")
    print("sustained GEMM ceilings (fraction of the dense peak at each part's power limit):")
    print("\n".join(sustained_lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

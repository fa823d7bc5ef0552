"""The GEMM rate a GPU holds running GEMMs back to back: its clock under its board power limit.

A datasheet peak assumes the boost clock. A dense GEMM that fills the SMs draws more than the
board's power limit at that clock, so the clock settles where the draw equals the limit and
stays there for as long as the GEMMs keep coming (a training run). stas00/ml-engineering
measures both regimes with ``mamf-finder.py`` (compute/accelerator/README.md @0359db89,
"Maximum Achievable and Sustainable Matmul FLOPS comparison table"): MAMF, a short burst at the
boost clock, and MSMF, the rate once the chip is saturated at its power limit, with the watts
and clock each ran at. Every MSMF row draws its board's limit (A100 PCIe ~299 of 300 W, H200
685-688 of 700 W, B200 978-987 of 1000 W, MI300X 750 of 750 W) at a clock well under boost
(B200 1399-1443 of 1965 MHz, MI300X 1290 of 2100 MHz): the sustained rate is power-limited.
(H200 holds 1860-1918 MHz at 700 W, above the 1830 MHz its datasheet peak is quoted at, so its
sustained ceiling is mostly the kernel's; the B200 and MI300X lose 27-39 % of their clock.)
Horace He ("Strangely, Matrix Multiplications on GPUs Run Faster When Given 'Predictable'
Data!", thonking.ai, 2024) shows the same on an A100 at 400 W: cuBLAS 8192^3 bf16 runs at
295 TFLOP/s on zeros and 257 on randn inputs, the clock falling with the draw.

So each part's GEMM ceiling (the fraction of its dense peak the kernel model's GEMM form
uses, ``kernels.GEMM_K0``) is:

1. measured, where a sustained measurement of that part exists (random data, run back to back
   or after a long warm-up, so the clock has settled under the power limit);
2. else the same die at another power limit or SM count (``SAME_DIE``): with the dynamic power
   ``P = a C V^2 f`` and the voltage following the clock along the DVFS curve, the board's draw
   goes as ``SMs x f^3`` (Hennessy & Patterson, Computer Architecture: A Quantitative Approach,
   6th ed., Sec. 1.5). The clock a part holds under limit ``P`` is therefore
   ``f_ref x (P / P_ref x SMs_ref / SMs)^(1/3)`` and its ceiling, as a fraction of its own
   peak (``SMs x FLOP/clk x f_boost``), scales by that clock over its boost clock, never above
   the die's burst ceiling (the clock cannot pass boost). Checked on two measured A100 parts:
   the SXM4's sustained 0.851 at 400 W predicts 0.851 x (300/400)^(1/3) = 0.773 for the
   300 W PCIe card, whose own MSMF gives 0.767 (below);
3. a user's power cap (``hardware.gpu_power_limit_w``, as ``nvidia-smi -pl`` sets) moves the
   clock by the same law from the part's own limit: ``x (cap / power_w)^(1/3)``;
4. else (an inline GPU, a part with no measurement) its family's ceiling (``FAMILY``).

Nothing here is fitted to published training runs.
"""
from __future__ import annotations

from workbench.catalog.gpus import GPUS
from workbench.catalog.types import GPU
from workbench.catalog.gpu_parts import PART_SMS, catalog_key

H200 = "h200-sxm"
# MSMF and MAMF as fractions of the catalog's dense peak: the msmf-* and mamf4-* records of
# benchmarks/data/published_kernels.yaml (value / peak; benchmarks/kernel_model.py derives them
# and tests/test_sustained_clock.py holds these to the records), from stas00/ml-engineering
# compute/accelerator/README.md @0359db89793c313e90e4f8a8bc8a2b1514ba00ae, "Maximum Achievable
# and Sustainable Matmul FLOPS comparison table", BF16 and FP8 rows and their numbered notes:
#   H200 SXM   bf16 MAMF 850 / MSMF 755 TFLOP/s (MSMF 685-688 W, 1860-1918 MHz); fp8 1525 / 1354
#              (683-689 W, 1767-1848 MHz). Every GPU of the node busy.
#   B200 SXM   bf16 1737 / 1439 (978-987 W, 1399-1443 MHz of a 1965 MHz boost); fp8 3350 / 2788
#              (975-982 W, 1399-1447 MHz). Every GPU of the node busy.
#   MI300X     bf16 676 / 659 (750 W, 1290 MHz of 2100); fp8 (e4m3fnuz) 1201 / 1187 (750 W,
#              1189 MHz). One GPU; an earlier mamf-finder version (the book: compare roughly).
#   A100 PCIe  bf16 285 / 258 (80GB, 300 W; MSMF ~299 W, 1326 MHz of 1410). One GPU.
MSMF = {
    "h200-sxm": {"bf16": 0.763, "fp8": 0.6842},
    "b200": {"bf16": 0.6396, "fp8": 0.6196},
    "mi300x": {"bf16": 0.5041, "fp8": 0.4539},
    "a100-pcie-80gb": {"bf16": 0.8269},
}
MAMF = {
    "h200-sxm": {"bf16": 0.859, "fp8": 0.7706},
    "b200": {"bf16": 0.772, "fp8": 0.7444},
    "mi300x": {"bf16": 0.5171, "fp8": 0.4593},
    "a100-pcie-80gb": {"bf16": 0.9135},
}
# Burst ceilings (the clock at boost) where a part has no sustained figure of that precision:
#   B200 nvfp4 0.564: torchao-b200-nvfp4-* (NVFP4 block-scaled scaled_mm, 2048-8192 cubes, the
#     median through the GEMM form of 0.238 0.462 0.564 0.667 0.638 of 9,000 TFLOP/s; the same
#     short torchao run as its bf16 rows). Azure's cuBLASLt FP4 cubes on a GB200 (azure-cublaslt-
#     gb200-fp4-*, a 10 PFLOP/s part) give 0.762. Held to the clock the power limit leaves as
#     the part's own burst-to-sustained ratio says (MSMF / MAMF, bf16: B200 0.829), an
#     assumption that FP4 GEMMs draw like bf16 ones at that clock.
BURST_ONLY = {"b200": {"nvfp4": 0.564}}
# Sustained ceilings measured on typical layer shapes through the GEMM form:
#   H200 SXM bf16 0.708, fp8 0.658: the team's H200 table (benchmarks/data/h200-reference/
#     kernels.jsonl: randn inputs, shapes run back to back for ~20 s, so the clock is the
#     saturated one), fitted by benchmarks/kernel_model.py.
#   A100 SXM4 80GB bf16 0.851: azure-cublaslt-a100-sxm-80gb-fp16-* (random initialisation,
#     10,000 warm-up iterations, 2048-16384 cubes; benchmarks/data/published_kernels.yaml).
# A part with an MSMF but no typical-shape table takes the H200's table scaled by its MSMF over
# the H200's (the same tool, the same definition: best-shape sustained rate), i.e. the H200's
# ratio of typical to best shapes (0.708 / 0.763 bf16, 0.658 / 0.684 fp8) carried over.
TABLE = {
    "h200-sxm": {"bf16": 0.708, "fp8": 0.658},
    "a100-sxm-80gb": {"bf16": 0.851, "fp8": 0.851},
}
# Parts derived from a measured part of the same die: catalog key -> (reference key, SMs of
# the part, SMs of the reference), the SM counts ``gpu_parts.PART_SMS``'s (cited there; the
# H200 NVL is the H200's GH100 with its 132 SMs at lower clocks).
#   H100 SXM5: the H200's die, SMs, clocks and 700 W limit (HBM3 in place of HBM3e): the same
#     sustained clock. Azure's cuBLASLt FP8 runs agree: H100 0.705, H200 0.700 through the form
#     (azure-cublaslt-h100-sxm-fp8-* / -h200-sxm-fp8-*, published_kernels.yaml).
#   H100 PCIe (350 W, 114 SMs), H200 NVL (600 W): the H200 at their limits and SM counts.
#   A100 SXM4 40GB: the 80GB part's die, SMs, clock and 400 W (HBM2 in place of HBM2e).
SAME_DIE = {key: (ref, PART_SMS[key], PART_SMS[ref]) for key, ref in (
    ("h100-sxm", H200), ("h100-pcie", H200), ("h200-nvl", H200),
    ("a100-sxm-40gb", "a100-sxm-80gb"))}
# The burst ceiling of a die (the clock at boost) over its sustained one: MAMF / MSMF of the
# die's measured part (A100: the PCIe card's; the SXM4 has no MSMF row).
BURST_OF = {"h200-sxm": "h200-sxm", "a100-sxm-80gb": "a100-pcie-80gb"}
# The family a part without its own figure takes (inline GPUs by ``arch``): Hopper the H200's,
# Ampere (and Ada, efficiency._KERNEL_FAMILY) the A100 SXM4's, Blackwell the B200's, CDNA3 the
# MI300X's.
FAMILY = {"hopper": H200, "ampere": "a100-sxm-80gb", "blackwell": "b200", "cdna3": "mi300x"}
# The clock law below is checked on power limits of 0.5-1 of a board's maximum: the validator
# refuses a user's cap outside them (scenario/rules/hardware.py, POWER_LIMIT_RANGE).


def _measured(key: str, precision: str) -> float | None:
    if precision in BURST_ONLY.get(key, {}):
        return BURST_ONLY[key][precision] * MSMF[key]["bf16"] / MAMF[key]["bf16"]
    if key in TABLE:
        return TABLE[key].get(precision)
    if key in MSMF and precision in MSMF[key]:
        return TABLE[H200][precision] * MSMF[key][precision] / MSMF[H200][precision]
    return None


def _burst(key: str, precision: str) -> float:
    """The die's ceiling at the boost clock (fraction of the peak, which the boost clock
    sets): the measured part's sustained ceiling x its MAMF / MSMF."""
    m = BURST_OF[key]
    p = precision if precision in MAMF[m] else "bf16"
    return _measured(key, precision) * MAMF[m][p] / MSMF[m][p]


def _same_die(key: str, precision: str) -> float:
    ref_key, sms, ref_sms = SAME_DIE[key]
    ref, part = GPUS[ref_key], GPUS[key]
    peak, ref_peak = _peak(part, precision), _peak(ref, precision)
    boost_ratio = (ref_peak / ref_sms) / (peak / sms)          # f_boost,ref / f_boost
    clock = (part.power_w / ref.power_w * ref_sms / sms) ** (1 / 3)   # f / f_ref (sustained)
    # the die's kernel at the boost clock is the ceiling's bound, whatever the part's peak
    return min(_measured(ref_key, precision) * boost_ratio * clock, _burst(ref_key, precision))


def _peak(gpu: GPU, precision: str) -> float:
    return gpu.fp8_tflops if precision == "fp8" and gpu.fp8_tflops else gpu.bf16_tflops


def stock_ceiling(gpu: GPU, arch: str, precision: str) -> float:
    """The sustained GEMM ceiling of ``gpu`` at its own board power limit (``power_w``), by
    ``precision`` (``bf16``, ``fp8`` or ``nvfp4``); ``arch`` is the kernel family an inline GPU falls
    back to."""
    key = catalog_key(gpu)
    if key in SAME_DIE:
        return _same_die(key, precision)
    got = _measured(key, precision) if key else None
    if got is None:
        # FP4 tensor cores are Blackwell's: a part that has them takes the B200's figure
        fam = FAMILY["blackwell"] if precision == "nvfp4" else FAMILY.get(arch, H200)
        got = _measured(fam, precision) or _measured(fam, "bf16")
    return got


def cap_factor(gpu: GPU) -> float:
    """The clock a user's power cap leaves, over the clock at the board's own limit:
    ``(cap / power_w)^(1/3)`` (1 without a cap)."""
    if not gpu.power_limit_w or not gpu.power_w:
        return 1.0
    return min(1.0, gpu.power_limit_w / gpu.power_w) ** (1 / 3)


def ceiling(gpu: GPU, arch: str, precision: str) -> float:
    """The sustained GEMM ceiling of ``gpu`` under the power limit it runs at."""
    return stock_ceiling(gpu, arch, precision) * cap_factor(gpu)

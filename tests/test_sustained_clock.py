"""The sustained GEMM clock under the board power limit (workbench/estimate/time/sustained.py): each
part's ceiling from its own sustained measurement or from the same die through the SMs x f^3
power law, a user's power cap through the same law, inline GPUs by family."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import yaml

from workbench.catalog.gpus import GPUS
from workbench.catalog.types import GPU
from workbench.errors import ScenarioError
from workbench.estimate.time import kernels as eff
from workbench.estimate import estimate
from workbench.estimate.time import sustained
from workbench.scenario import parse_scenario

ROOT = Path(__file__).resolve().parent.parent


def _kernel_model():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import kernel_model
    return kernel_model


def test_committed_msmf_and_mamf_are_the_published_records():
    """The fractions the estimator uses are the msmf-*/mamf4-* records over the catalog peak."""
    recs = _kernel_model().sustained_records()
    assert recs["msmf"] == sustained.MSMF
    assert recs["mamf4"] == sustained.MAMF


def test_h100_sxm_sustains_the_h200s_measured_rate():
    """Same GH100 die, SMs, clocks and 700 W limit: the H200 table's sustained ceiling, not the
    0.855 of short cube benchmarks that the family used to give."""
    for prec, want in (("bf16", 0.708), ("fp8", 0.658)):
        assert eff.matmul_efficiency(GPUS["h100-sxm"], prec) == want
        assert eff.matmul_efficiency(GPUS["h200-sxm"], prec) == want


def test_h100_pcie_is_the_same_die_at_350_w_and_114_sms():
    """Clock (350/700 x 132/114)^(1/3) of the SXM's, peak per SM 756.5/114 against 989.5/132:
    0.708 x 1.1296 x 0.8335 = 0.6666."""
    want = 0.708 * (989.5 / 132) / (756.5 / 114) * (350 / 700 * 132 / 114) ** (1 / 3)
    assert eff.matmul_efficiency(GPUS["h100-pcie"], "bf16") == pytest.approx(want, rel=1e-12)


def test_h200_nvl_is_bounded_by_the_dies_boost_clock():
    """At 600 W the NVL part holds nearly its (lower) boost clock: the law's 0.7965 sits just
    under the burst bound 0.708 x MAMF/MSMF = 0.708 x 0.859 / 0.763 = 0.7971."""
    law = 0.708 * (989.5 / 835.5) * (600 / 700) ** (1 / 3)
    burst = 0.708 * 0.859 / 0.763
    assert eff.matmul_efficiency(GPUS["h200-nvl"], "bf16") == pytest.approx(min(law, burst))


def test_the_clock_law_predicts_the_a100_pcie_from_the_sxm4():
    """The A100 SXM4's sustained 0.851 at 400 W, scaled by (300/400)^(1/3), lands within 1 % of
    the 300 W PCIe card's own MSMF-based ceiling (0.708 x 0.8269 / 0.763)."""
    measured = eff.matmul_efficiency(GPUS["a100-pcie-80gb"], "bf16")
    assert measured == pytest.approx(0.708 * 0.8269 / 0.763, rel=1e-12)
    law = 0.851 * (300 / 400) ** (1 / 3)
    assert abs(law / measured - 1) < 0.01


def test_mi300x_and_b200_take_their_own_sustained_figures():
    """MI300X (750 W, 1290 MHz sustained of 2100) no longer borrows Hopper's fraction; the B200
    takes its MSMF at 1000 W, not a best-shape burst."""
    mi = eff.matmul_efficiency(GPUS["mi300x"], "bf16")
    assert mi == pytest.approx(0.708 * 0.5041 / 0.763, rel=1e-12)
    assert mi != eff.matmul_efficiency(GPUS["h100-sxm"], "bf16")
    assert eff.matmul_efficiency(GPUS["mi300x"], "fp8") == pytest.approx(0.658 * 0.4539 / 0.6842)
    assert eff.matmul_efficiency(GPUS["b200"], "bf16") == pytest.approx(0.708 * 0.6396 / 0.763)
    assert eff.matmul_efficiency(GPUS["b200"], "fp8") == pytest.approx(0.658 * 0.6196 / 0.6842)


def test_inline_gpus_take_their_family_figure():
    """An inline GPU takes its arch's figure, even when it borrows a catalog part's name."""
    def inline(arch, name="inline gpu", bf16=1000.0):
        return GPU(name, 100, 3000, bf16, 2 * bf16, 700, arch=arch)
    assert eff.matmul_efficiency(inline("cdna3"), "bf16") == eff.matmul_efficiency(
        GPUS["mi300x"], "bf16")
    assert eff.matmul_efficiency(inline("blackwell"), "fp8") == eff.matmul_efficiency(
        GPUS["b200"], "fp8")
    assert eff.matmul_efficiency(inline("ada"), "bf16") == 0.851
    # named like the H100 PCIe, other figures: not the PCIe card's derived 0.6666
    fake = inline("hopper", name=GPUS["h100-pcie"].name, bf16=700.0)
    assert eff.matmul_efficiency(fake, "bf16") == 0.708


def test_a_power_cap_slows_gemms_by_the_cube_root_of_the_power():
    """nvidia-smi -pl 500 on a 700 W H100 SXM: the GEMM ceiling x (500/700)^(1/3), so a
    compute-bound GEMM's kernel time x (700/500)^(1/3) = 1.1187."""
    gpu = GPUS["h100-sxm"]
    capped = dataclasses.replace(gpu, power_limit_w=500.0)
    assert eff.matmul_efficiency(capped, "bf16") == pytest.approx(0.708 * (500 / 700) ** (1 / 3))
    oh = eff.KERNEL_OVERHEAD_S
    t0 = eff.gemm_time(8192, 8192, 8192, gpu, "bf16") - oh
    t1 = eff.gemm_time(8192, 8192, 8192, capped, "bf16") - oh
    assert t1 / t0 == pytest.approx((700 / 500) ** (1 / 3), rel=1e-12)


def _scenario(**hw):
    doc = yaml.safe_load((ROOT / "examples" / "llama3-8b-8xh100.yaml").read_text())
    doc["hardware"].update(hw)
    return doc


def test_the_scenario_key_reaches_the_estimate():
    s = parse_scenario(_scenario(gpu_power_limit_w=500))
    assert s.hardware.gpu_power_limit_w == 500 and s.hardware.gpu.power_limit_w == 500
    free = estimate(parse_scenario(_scenario())).time.step
    assert estimate(s).time.step > free


def test_a_capped_gpu_draws_its_cap_and_the_supply_is_sized_for_its_rating():
    from workbench.estimate.run.build_checks import node_power_w
    capped, free = (estimate(parse_scenario(_scenario(**kw))) for kw in
                    ({"gpu_power_limit_w": 500}, {}))
    busy = min(1.0, (capped.time.compute + capped.time.recompute) / capped.time.step)
    assert capped.run.gpu_power_w == pytest.approx(500 * busy, rel=1e-12)
    assert free.run.gpu_power_w == pytest.approx(
        700 * (free.time.compute + free.time.recompute) / free.time.step, rel=1e-12)
    assert node_power_w(capped.scenario) == node_power_w(free.scenario)


@pytest.mark.parametrize("value, words", [
    (200, "hardware.gpu_power_limit_w: must be between 350 and 700 W"),
    (800, "hardware.gpu_power_limit_w: must be between 350 and 700 W"),
    ("lots", "hardware.gpu_power_limit_w: must be a finite number"),
])
def test_out_of_range_power_limits_are_refused(value, words):
    with pytest.raises(ScenarioError) as exc:
        parse_scenario(_scenario(gpu_power_limit_w=value))
    assert exc.value.one_line().startswith(words)


def test_the_power_limit_is_not_an_inline_gpu_field():
    doc = _scenario()
    doc["hardware"]["gpu"] = {"memory_gb": 80, "hbm_gb_per_s": 3350, "bf16_tflops": 989.5,
                              "power_w": 700, "power_limit_w": 500}
    with pytest.raises(ScenarioError) as exc:
        parse_scenario(doc)
    assert "power_limit_w" in exc.value.one_line()

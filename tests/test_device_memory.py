"""Exact-value tests of workbench.estimate.memory.device, worked out by hand from its cited
constants."""
from __future__ import annotations

import pytest

from workbench.estimate.memory.device import device_terms

MiB = 1 << 20
# Line through (34 SMs, 107 MiB) and (188 SMs, 555 MiB) at the H100's 132 SMs:
# 107 + 98 * 448 / 154 MiB.
H100_CONTEXT = (107 + 98 * 448 / 154) * MiB


def test_h100_dp8_and_tp8_intra_node() -> None:
    terms = device_terms("hopper", [(8, False), (8, False)])
    # per communicator: Ring 24 channels x (10 MiB recv + 2 MiB send) = 288 MiB,
    # NVLS 16 channels x 2 x (128 KiB x 8 steps) x 8 heads = 256 MiB -> 544 MiB; two communicators.
    assert terms["nccl"] == 2 * (24 * 12 + 256) * MiB == 1088 * MiB
    assert terms["cuda_context"] == pytest.approx(H100_CONTEXT)
    # allocated through the caching allocator: already in reserved
    assert terms["cublas_workspace"] == 0.0


def test_h100_dp128_across_16_nodes() -> None:
    terms = device_terms("h100", [(128, True)])
    # 16 channels x (P2P ring pair 12 MiB + NET pair 20 MiB) = 512 MiB,
    # NVLS with 8 local heads 256 MiB.
    assert terms["nccl"] == (16 * 32 + 256) * MiB == 768 * MiB
    assert terms["cuda_context"] == pytest.approx(H100_CONTEXT)


def test_no_communicators_and_overrides() -> None:
    terms = device_terms("hopper", [])
    assert terms["nccl"] == 0.0
    assert sum(terms.values()) == pytest.approx(H100_CONTEXT)
    # two ranks: no NVLS (needs > 2); nccl_channels overrides the default channel count
    assert device_terms("hopper", [(2, False)], nccl_channels=8)["nccl"] == 8 * 12 * MiB
    # Ampere: no NVLS; 24 channels x 12 MiB (P2P read mode: 6 MiB + 6 MiB)
    ampere = device_terms("ampere", [(8, False)])
    assert ampere["nccl"] == 288 * MiB
    assert ampere["cuda_context"] == pytest.approx((107 + 74 * 448 / 154) * MiB)


@pytest.mark.parametrize("arch", ["ampere", "hopper", "blackwell", "h200", "ada", "cdna3"])
@pytest.mark.parametrize("comms", [[], [(8, False)], [(2, False), (64, True)], [(1, False)]])
def test_every_term_non_negative(arch: str, comms: list[tuple[int, bool]]) -> None:
    assert all(v >= 0 for v in device_terms(arch, comms).values())

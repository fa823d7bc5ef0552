"""Which catalog part a GPU is, and its streaming-multiprocessor count: the one source of SM
counts the estimator reads (the sustained clock of a part of the same die,
``estimate.time.sustained``; the SMs a TE userbuffers collective leaves to the GEMMs,
``estimate.time.tp_overlap``; the CUDA context's size, ``estimate.memory.device``)."""
from __future__ import annotations

import dataclasses
import functools

from workbench.catalog.gpus import GPUS
from workbench.catalog.types import GPU

# SMs per catalog part. NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), Table 3:
# H100 SXM5 132 SMs, H100 PCIe 114 SMs. The H200 SXM and H200 NVL are the H100 SXM5's GH100
# with its 132 SMs (the H200 NVL at lower clocks: NVIDIA H200 product page, 835.5 / 989.5
# dense bf16 = the clock ratio, sustained.SAME_DIE). NVIDIA A100 Tensor Core GPU Architecture
# whitepaper (2020): 108 SMs on every A100. B200: 148 SMs (NVIDIA Blackwell datasheet).
PART_SMS = {
    "h100-sxm": 132, "h100-pcie": 114, "h200-sxm": 132, "h200-nvl": 132,
    "a100-sxm-80gb": 108, "a100-sxm-40gb": 108, "a100-pcie-80gb": 108, "b200": 148,
}
# A GPU that is no catalog part above (inline, or another catalog part) takes its
# architecture's datacenter part's: A100, H100/H200 SXM, B200 (the sources above), a Hopper
# PCIe card the H100 PCIe's; any other architecture Hopper's (an assumption, said here).
FAMILY_SMS = {"ampere": 108, "hopper": 132, "blackwell": 148}


def _by_name() -> dict[str, str]:
    return {g.name: k for k, g in GPUS.items()}


def catalog_key(gpu: GPU) -> str | None:
    """The catalog key of ``gpu`` when it is a catalog part (all its figures equal), else
    None (an inline GPU, whatever it is called)."""
    key = _by_name().get(gpu.name)
    if key is None or dataclasses.replace(gpu, power_limit_w=0.0) != GPUS[key]:
        return None
    return key


def family_sm_count(arch: str) -> int:
    """SMs of architecture ``arch``'s datacenter part (``FAMILY_SMS``; Hopper's for others)."""
    return FAMILY_SMS.get(arch, FAMILY_SMS["hopper"])


@functools.lru_cache(maxsize=64)
def sm_count(gpu: GPU) -> int:
    """Streaming multiprocessors of ``gpu``: its catalog part's (``PART_SMS``), else a Hopper
    PCIe card's 114 or its architecture's (``family_sm_count``). Cached: the catalog lookup is slow and a ``GPU``
    hashes on its datasheet fields."""
    key = catalog_key(gpu)
    if key in PART_SMS:
        return PART_SMS[key]
    if gpu.arch == "hopper" and gpu.form_factor == "pcie":
        return PART_SMS["h100-pcie"]     # the Hopper PCIe card a box is built from
    return family_sm_count(gpu.arch)

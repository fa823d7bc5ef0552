"""Collective communication cost: which link tier a group spans and how long a collective takes.

Cost model (alpha-beta, nccl-tests conventions, github.com/NVIDIA/nccl-tests doc/PERFORMANCE.md):
    time = steps * latency + bytes * busbw_factor / (link_bandwidth * efficiency)
with busbw factors all-reduce 2(n-1)/n, all-gather / reduce-scatter / all-to-all (n-1)/n,
send/recv 1, and ring step counts 2(n-1), n-1, n-1, 1.

Placement: ranks are laid out with TP innermost, then CP, DP (EP is carved out of DP x CP) and PP
outermost (Megatron-LM's default order "tp-cp-ep-dp-pp"). A group of ``size`` ranks ``stride``
apart has ``min(size, gpus_per_node // stride)`` members in a node. A group that spans nodes
runs hierarchically, as NCCL does: the intra-node part on NVLink/PCIe, the inter-node part on the
NICs, each GPU using its share of the node's NICs (every group of a dimension communicates at
once, so the node's NIC bandwidth is split over its GPUs: rail-optimised clusters).
"""
from __future__ import annotations

from dataclasses import dataclass

from workbench.catalog.types import Link
from workbench.spec.scenario import Hardware

# Fraction of the link's per-direction bandwidth NCCL sustains at large messages (busbw / link).
# Sources: benchmarks/data/published_kernels.yaml (nccl-tests on DGX A100/H100 and IB clusters).
NVLINK_EFFICIENCY = 0.80
PCIE_EFFICIENCY = 0.75
RDMA_NIC_EFFICIENCY = 0.90
TCP_NIC_EFFICIENCY = 0.60

FACTORS = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
           "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
           "send_recv": lambda n: 1.0}
STEPS = {"all_reduce": lambda n: 2 * (n - 1), "all_gather": lambda n: n - 1,
         "reduce_scatter": lambda n: n - 1, "all_to_all": lambda n: n - 1,
         "send_recv": lambda n: 1}


@dataclass(frozen=True)
class Tier:
    """One level of the network as one GPU sees it."""

    name: str
    gb_per_s: float       # per GPU, per direction, at the sustained efficiency
    latency_s: float


def _efficiency(link: Link, intra: bool) -> float:
    if intra:
        return NVLINK_EFFICIENCY if "nvlink" in link.name.lower() else PCIE_EFFICIENCY
    return RDMA_NIC_EFFICIENCY if link.rdma else TCP_NIC_EFFICIENCY


def intra_tier(hw: Hardware) -> Tier:
    link = hw.intra_node
    return Tier("intra", link.gb_per_s * 1e9 * _efficiency(link, True), link.latency_us * 1e-6)


def inter_tier(hw: Hardware) -> Tier:
    link = hw.inter_node.link
    per_gpu = link.gb_per_s * hw.inter_node.nics_per_node / hw.gpus_per_node
    return Tier("inter", per_gpu * 1e9 * _efficiency(link, False), link.latency_us * 1e-6)


@dataclass(frozen=True)
class Span:
    """How a group of ``size`` ranks sits on the machine."""

    size: int
    per_node: int     # members inside one node
    nodes: int        # nodes the group spans


def group_span(size: int, stride: int, gpus_per_node: int) -> Span:
    """Placement of a group of ``size`` ranks spaced ``stride`` apart."""
    per_node = max(1, min(size, gpus_per_node // stride)) if stride < gpus_per_node else 1
    return Span(size, per_node, -(-size // per_node))


def _flat(kind: str, nbytes: float, n: int, tier: Tier) -> float:
    if n <= 1 or nbytes <= 0:
        return 0.0
    return STEPS[kind](n) * tier.latency_s + nbytes * FACTORS[kind](n) / tier.gb_per_s


def collective_time(kind: str, nbytes: float, span: Span, hw: Hardware) -> float:
    """Seconds for one collective of ``nbytes`` (the full buffer: the all-reduce input, the
    all-gather output, the reduce-scatter input, the all-to-all send buffer; one message for
    send/recv) over a group placed as ``span``."""
    if span.size <= 1 or nbytes <= 0:
        return 0.0
    intra, inter = intra_tier(hw), inter_tier(hw)
    k, nn = span.per_node, span.nodes
    if kind == "send_recv":
        return _flat(kind, nbytes, 2, inter if nn > 1 else intra)
    if nn == 1:
        return _flat(kind, nbytes, k, intra)
    if k == 1:
        return _flat(kind, nbytes, nn, inter)
    if kind == "all_to_all":
        # A share (n-k)/n of every rank's buffer leaves the node; both links run at once.
        n = span.size
        t_inter = nbytes * (n - k) / n / inter.gb_per_s + (nn - 1) * inter.latency_s
        t_intra = nbytes * (k - 1) / n / intra.gb_per_s + (k - 1) * intra.latency_s
        return max(t_inter, t_intra)
    if kind == "all_reduce":   # reduce-scatter in the node, all-reduce across, all-gather back
        return (_flat("reduce_scatter", nbytes, k, intra) + _flat("all_reduce", nbytes / k, nn, inter)
                + _flat("all_gather", nbytes, k, intra))
    # all-gather / reduce-scatter: the inter-node part moves 1/k of the buffer per rank
    return _flat(kind, nbytes, k, intra) + _flat(kind, nbytes / k, nn, inter)

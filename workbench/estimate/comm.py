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

import numpy as np

from workbench.estimate.arrays import plain

from workbench.catalog.types import Link
from workbench.scenario.types import Hardware

# Fraction of the link's per-direction bandwidth NCCL sustains at large messages (busbw / link).
# NVLink and RDMA NICs: benchmarks/data/published_kernels.yaml (nccl-tests on H200: all-gather
# 361 / reduce-scatter 363 of 450 GB/s; NVIDIA's ~46-49 GB/s per 400G NIC). PCIe peer-to-peer
# and TCP sockets have no record there: 0.75 and 0.60 are assumptions.
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
    """How a group of ``size`` ranks sits on the machine (numbers, or numpy arrays of them for a
    grid of layouts)."""

    size: object
    per_node: object     # members inside one node
    nodes: object        # nodes the group spans


def group_span(size, stride, gpus_per_node: int) -> Span:
    """Placement of a group of ``size`` ranks spaced ``stride`` apart (scalars or arrays)."""
    size, stride = np.asarray(size), np.asarray(stride)
    per_node = np.where(stride < gpus_per_node,
                        np.maximum(1, np.minimum(size, gpus_per_node // np.maximum(stride, 1))), 1)
    return Span(plain(size), plain(per_node), plain(-(-size // per_node)))



def _pick(cond, yes, no):
    """``yes()`` where ``cond`` holds, else ``no()``: element-wise for arrays; for a single
    layout only the branch taken is computed (numpy's per-call cost dominates there)."""
    if isinstance(cond, (bool, np.bool_)) or np.ndim(cond) == 0:
        return yes() if cond else no()
    if np.size(cond) == 1:       # one layout (or shape) as an array: the same, kept an array
        out = yes() if cond.flat[0] else no()
        return out if np.shape(out) == np.shape(cond) else np.where(cond, out, out)
    return np.where(cond, yes(), no())


def _flat(kind: str, nbytes, n, bw, lat):
    """One flat (ring) collective over ``n`` ranks on one tier; 0 when n <= 1."""
    return _pick(n > 1, lambda: STEPS[kind](n) * lat + nbytes * FACTORS[kind](n) / bw,
                 lambda: 0.0 * nbytes)


def collective_time(kind: str, nbytes, span: Span, hw: Hardware, back_to_back: bool = False):
    """Seconds for one collective of ``nbytes`` (the full buffer: the all-reduce input, the
    all-gather output, the reduce-scatter input, the all-to-all send buffer; one message for
    send/recv) over a group placed as ``span``. Works element-wise on numpy arrays. A calibrated
    profile answers from its measurements where it ``covers`` the group instead: a CPU
    machine's, the latency a collective adds inside a training step (``back_to_back``: issued
    right after another one, the benchmark's latency), plus its per-byte cost; a GPU's, its
    nccl fits for groups inside a node. Elsewhere (a profile measured at world size 1, a group
    across nodes) the scenario's links."""
    prof = hw.gpu.profile
    if prof is None:
        return _link_time(kind, nbytes, span, hw)
    covered = prof.covers(span)
    if np.all(covered):
        return prof.with_ranks(hw.gpus_per_node).collective(kind, span.size, nbytes, back_to_back)
    linked = _link_time(kind, nbytes, span, hw)
    if not np.any(covered):
        return linked
    measured = prof.with_ranks(hw.gpus_per_node).collective(kind, span.size, nbytes,
                                                            back_to_back)
    return plain(np.where(covered, measured, linked))


def _link_time(kind: str, nbytes, span: Span, hw: Hardware):
    """``collective_time`` on the scenario's links (the alpha-beta model of the docstring)."""
    intra, inter = intra_tier(hw), inter_tier(hw)
    a_bw, a_lat, e_bw, e_lat = intra.gb_per_s, intra.latency_s, inter.gb_per_s, inter.latency_s
    scalar = np.ndim(nbytes) == 0 and np.ndim(span.size) == 0
    nbytes = float(nbytes) if scalar else np.asarray(nbytes, dtype=float)
    n, k, nn = span.size, span.per_node, span.nodes
    if not scalar:
        n, k, nn = np.asarray(n), np.asarray(k), np.asarray(nn)

    def cost():
        if kind == "send_recv":
            return _pick(nn > 1, lambda: _flat(kind, nbytes, 2, e_bw, e_lat),
                         lambda: _flat(kind, nbytes, 2, a_bw, a_lat))

        def hier():
            if kind == "all_to_all":
                # A share (n-k)/n of every rank's buffer leaves the node; both links run at once.
                return np.maximum(nbytes * (n - k) / n / e_bw + (nn - 1) * e_lat,
                                  nbytes * (k - 1) / n / a_bw + (k - 1) * a_lat)
            if kind == "all_reduce":
                # reduce-scatter in the node, all-reduce across nodes, all-gather back
                return (_flat("reduce_scatter", nbytes, k, a_bw, a_lat)
                        + _flat("all_reduce", nbytes / k, nn, e_bw, e_lat)
                        + _flat("all_gather", nbytes, k, a_bw, a_lat))
            # all-gather / reduce-scatter: the inter-node part moves 1/k per rank
            return _flat(kind, nbytes, k, a_bw, a_lat) + _flat(kind, nbytes / k, nn, e_bw, e_lat)
        return _pick(nn == 1, lambda: _flat(kind, nbytes, k, a_bw, a_lat),
                     lambda: _pick(k == 1, lambda: _flat(kind, nbytes, nn, e_bw, e_lat),
                                   hier))

    if scalar:     # one layout: plain Python arithmetic, only the branch taken is computed
        return float(_pick(n <= 1 or nbytes <= 0, lambda: 0.0 * nbytes, cost))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = _pick((n <= 1) | (nbytes <= 0), lambda: 0.0 * nbytes, cost)
    return plain(np.asarray(t, dtype=float))

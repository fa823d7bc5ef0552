"""Collective communication cost: which link tier a group uses and how long a collective takes.

Cost model (alpha-beta, nccl-tests conventions, github.com/NVIDIA/nccl-tests doc/PERFORMANCE.md):
    time = steps * latency + bytes * busbw_factor / (link_bandwidth * efficiency)
with busbw factors all-reduce 2(n-1)/n, all-gather / reduce-scatter / all-to-all (n-1)/n,
send/recv 1, and ring step counts 2(n-1), n-1, n-1, 1.

Where a group sits (its members per node, the nodes it spans) is ``estimate.placement``'s
``Span``. A group that spans nodes runs hierarchically, as NCCL does: the intra-node part on
NVLink/PCIe, the inter-node part on the NICs, each GPU using its share of the node's NICs (every
group of a dimension communicates at once, so the node's NIC bandwidth is split over its GPUs:
rail-optimised clusters).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.estimate.arrays import plain
from workbench.estimate.placement import Span

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



def _pick(cond, yes, no):
    """``yes()`` where ``cond`` holds, else ``no()``: element-wise for arrays; for a single
    layout only the branch taken is computed (numpy's per-call cost dominates there)."""
    if isinstance(cond, (bool, np.bool_)) or np.ndim(cond) == 0:
        return yes() if cond else no()
    if np.size(cond) == 1:       # one layout (or shape) as an array: the same, kept an array
        out = yes() if cond.flat[0] else no()
        return out if np.shape(out) == np.shape(cond) else np.where(cond, out, out)
    return np.where(cond, yes(), no())


def _flat(kind: str, nbytes, n, bw, lat, zero):
    """One flat (ring) collective over ``n`` ranks on one tier; ``zero`` (``0.0 * nbytes``)
    when n <= 1. Element-wise over arrays (both sides computed: the caller silences numpy's
    division warnings, and the side not taken is dropped); for a number only the side taken."""
    if isinstance(n, np.ndarray):
        live = n > 1
        if not live.any():     # (a level no group spans: a TP group inside its node)
            return zero
        return np.where(live, STEPS[kind](n) * lat + nbytes * FACTORS[kind](n) / bw, zero)
    return STEPS[kind](n) * lat + nbytes * FACTORS[kind](n) / bw if n > 1 else zero


def _hierarchical(kind: str, nbytes, n, k, nn, tiers: tuple, zero):
    """``link_time`` of a group of ``n`` ranks, ``k`` in each of ``nn`` nodes, where n > 1 and
    nbytes > 0 (the caller returns 0 elsewhere). All-gather, reduce-scatter and all-reduce run
    as NCCL's hierarchical algorithms; where one level has a single member that level's flat
    part is 0 and the sum is exactly the other level's flat collective (0.0 added; the
    all-reduce's reduce-scatter and all-gather halves each take n-1 steps and (n-1)/n of the
    bytes, half of the flat all-reduce's 2(n-1) and 2(n-1)/n, so their sum is exactly it), so
    one formula serves every placement, numbers and arrays alike."""
    a_bw, a_lat, e_bw, e_lat = tiers
    if kind == "send_recv":       # one message over the link between the two ranks
        if isinstance(nn, np.ndarray):
            across = nn > 1
            return _flat(kind, nbytes, 2, np.where(across, e_bw, a_bw),
                         np.where(across, e_lat, a_lat), zero)
        return _flat(kind, nbytes, 2, *((e_bw, e_lat) if nn > 1 else (a_bw, a_lat)), zero)
    if kind == "all_to_all":
        def hier():
            # A share (n-k)/n of every rank's buffer leaves the node; both links run at once.
            return np.maximum(nbytes * (n - k) / n / e_bw + (nn - 1) * e_lat,
                              nbytes * (k - 1) / n / a_bw + (k - 1) * a_lat)
        return _pick(nn == 1, lambda: _flat(kind, nbytes, k, a_bw, a_lat, zero),
                     lambda: _pick(k == 1, lambda: _flat(kind, nbytes, nn, e_bw, e_lat, zero),
                                   hier))
    # all-reduce: reduce-scatter in the node, all-reduce across nodes, all-gather back;
    # all-gather / reduce-scatter: the inter-node part moves 1/k per rank
    inside = _flat("all_gather" if kind == "all_reduce" else kind, nbytes, k, a_bw, a_lat, zero)
    across = _flat(kind, nbytes / k, nn, e_bw, e_lat, zero)
    return inside + across + inside if kind == "all_reduce" else inside + across


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
        return link_time(kind, nbytes, span, hw)
    covered = prof.covers(span)
    if np.all(covered):
        return prof.with_ranks(hw.gpus_per_node).collective(kind, span.size, nbytes, back_to_back)
    linked = link_time(kind, nbytes, span, hw)
    if not np.any(covered):
        return linked
    measured = prof.with_ranks(hw.gpus_per_node).collective(kind, span.size, nbytes,
                                                            back_to_back)
    return plain(np.where(covered, measured, linked))


# On the links an all-gather and a reduce-scatter of the same buffer over the same group take
# the same time: the same bus-bandwidth factor (n-1)/n and ring steps n-1 (nccl-tests
# doc/PERFORMANCE.md; ``FACTORS``, ``STEPS``) and the same hierarchical split
# (``_hierarchical``). A calibrated profile measures each kind apart.
_LINK_ALIKE = {"reduce_scatter": "all_gather"}


def collective_times(ops: list, span: Span, hw: Hardware, timed: dict | None = None) -> list:
    """``collective_time`` of each (kind, nbytes) of ``ops`` over one group ``span``, in order;
    one collective is timed once for every entry that must take the same time (the same
    ``nbytes`` object over the same ``span`` object, the same kind or, on the links, an
    all-gather and a reduce-scatter): a layer's and the edges' TP collectives repeat one
    buffer. ``timed`` carries what was timed over several calls (it keeps each buffer and
    span alive, so their identities stay theirs)."""
    alike = _LINK_ALIKE if hw.gpu.profile is None else {}
    timed = {} if timed is None else timed
    out = []
    for kind, nbytes in ops:
        key = (alike.get(kind, kind), id(nbytes), id(span))
        if key not in timed:
            timed[key] = (collective_time(kind, nbytes, span, hw), nbytes, span)
        out.append(timed[key][0])
    return out


def link_time(kind: str, nbytes, span: Span, hw: Hardware):
    """``collective_time`` on the scenario's links (the alpha-beta model of the docstring)."""
    intra, inter = intra_tier(hw), inter_tier(hw)
    tiers = (intra.gb_per_s, intra.latency_s, inter.gb_per_s, inter.latency_s)
    n, k, nn = span.size, span.per_node, span.nodes
    if np.ndim(nbytes) == 0 and np.ndim(n) == 0:
        # one layout: plain Python arithmetic, only the branch taken is computed
        nbytes = float(nbytes)
        if n <= 1 or nbytes <= 0:
            return 0.0 * nbytes
        return float(_hierarchical(kind, nbytes, n, k, nn, tiers, 0.0 * nbytes))
    nbytes = np.asarray(nbytes, dtype=float)
    n, k, nn = np.asarray(n), np.asarray(k), np.asarray(nn)
    zero = 0.0 * nbytes
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where((n <= 1) | (nbytes <= 0), zero,
                     _hierarchical(kind, nbytes, n, k, nn, tiers, zero))
    return plain(np.asarray(t, dtype=float))

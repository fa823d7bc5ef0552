"""The link model of ``collectives``: one hierarchical formula serves every placement (a group inside
one node and a group of one rank per node give exactly the flat ring on that tier), the array
path equals the number path element by element, and ``collective_times`` equals a
``collective_time`` per entry."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import scenario_doc
from workbench.estimate.placement import group_span
from workbench.estimate.time import collectives as comm
from workbench.scenario import parse_scenario

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
SIZES = [1, 2, 3, 4, 8, 16, 24, 64]
STRIDES = [1, 2, 4, 8, 16]
NBYTES = [0.0, 1.0, 7e3, 1e6, 3.3e7, 2e8, 5e9, 1.25e10]


def _hw(nodes: int = 8):
    return parse_scenario(scenario_doc(
        hardware={"gpu": "h100-sxm", "nodes": nodes,
                  "inter_node": {"link": "ib-ndr", "nics_per_node": 8}},
        parallel={"dp": 8 * nodes})).hardware


def _flat(kind: str, nbytes: float, n: int, bw: float, lat: float) -> float:
    """The ring collective of the module docstring on one tier, by hand."""
    steps = {"all_reduce": 2 * (n - 1), "all_gather": n - 1, "reduce_scatter": n - 1}[kind]
    factor = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n,
              "reduce_scatter": (n - 1) / n}[kind]
    return steps * lat + nbytes * factor / bw


@pytest.mark.parametrize("kind", ["all_reduce", "all_gather", "reduce_scatter"])
def test_a_group_on_one_tier_is_the_flat_ring_exactly(kind):
    hw = _hw()
    intra, inter = comm.intra_tier(hw), comm.inter_tier(hw)
    for n in (2, 4, 8):
        inside = group_span(n, 1, 8)                 # one node
        across = group_span(n, 8, 8)                 # one rank per node
        assert (inside.nodes, across.per_node) == (1, 1)
        for b in NBYTES[1:]:
            assert comm.collective_time(kind, b, inside, hw) == _flat(
                kind, b, n, intra.gb_per_s, intra.latency_s)
            assert comm.collective_time(kind, b, across, hw) == _flat(
                kind, b, n, inter.gb_per_s, inter.latency_s)


def test_a_hierarchical_all_reduce_by_hand():
    """16 ranks, 8 per node on 2 nodes: reduce-scatter in the node, all-reduce of 1/8 of the
    bytes across the nodes, all-gather back."""
    hw = _hw()
    intra, inter = comm.intra_tier(hw), comm.inter_tier(hw)
    b = 1e9
    half = _flat("all_gather", b, 8, intra.gb_per_s, intra.latency_s)
    expected = half + _flat("all_reduce", b / 8, 2, inter.gb_per_s, inter.latency_s) + half
    assert comm.collective_time("all_reduce", b, group_span(16, 1, 8), hw) == expected


@pytest.mark.parametrize("kind", KINDS)
def test_arrays_are_the_numbers_element_by_element(kind):
    """The array path (a grid of layouts) gives each entry exactly what the number path (one
    estimate) gives it, whichever branch each entry takes."""
    hw = _hw()
    size = np.array([s for s in SIZES for _ in NBYTES])
    nbytes = np.array([b for _ in SIZES for b in NBYTES])
    for stride in STRIDES:
        got = comm.collective_time(kind, nbytes, group_span(size, stride, 8), hw)
        one = [comm.collective_time(kind, float(b), group_span(int(s), stride, 8), hw)
               for s, b in zip(size, nbytes)]
        assert isinstance(got, np.ndarray) and got.tolist() == one
        assert all(type(v) is float for v in one)


def test_collective_times_is_one_call_per_entry():
    hw = _hw()
    span = group_span(np.array([1, 2, 4, 8, 16]), 1, 8)
    a, b = np.array([1e6, 2e6, 3e6, 4e6, 5e6]), np.array([7.0, 8.0, 9.0, 1e3, 1e9])
    ops = [("all_gather", a), ("reduce_scatter", a), ("all_reduce", a), ("all_gather", b),
           ("reduce_scatter", a), ("all_to_all", b), ("all_reduce", b)]
    timed: dict = {}
    got = comm.collective_times(ops, span, hw, timed)
    for (kind, nbytes), t in zip(ops, got):
        assert t.tolist() == comm.collective_time(kind, nbytes, span, hw).tolist()
    # an all-gather and a reduce-scatter of one buffer are timed once on the links
    assert len(timed) == 5
    # a later call over the same span reuses what was timed
    again = comm.collective_times([("reduce_scatter", b)], span, hw, timed)
    assert again[0] is got[3] and len(timed) == 5

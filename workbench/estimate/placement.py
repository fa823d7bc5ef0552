"""Where a group of ranks sits on the machine: how many of its members share a node and how
many nodes it spans. Memory reads it (a communicator that crosses nodes holds more buffers,
``memory.device``) and time reads it (a collective that crosses nodes runs on the NICs,
``time.collectives``).

Ranks are laid out with TP innermost, then CP, DP (EP is carved out of DP x CP) and PP
outermost (Megatron-LM's default order "tp-cp-ep-dp-pp"). A group of ``size`` ranks ``stride``
apart has ``min(size, gpus_per_node // stride)`` members in a node.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.estimate.arrays import plain


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

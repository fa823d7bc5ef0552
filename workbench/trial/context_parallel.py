"""Context parallelism for the trial model: each CP rank holds one contiguous chunk of every
sequence, its attention kernels run as a ring over the CP group (``ring_attention.py``) and its
learned positions start at its chunk. The model stays plain: this module swaps each
``Attention.sdpa`` for ``RingAttention`` and shifts the position lookup with a forward pre-hook,
the way a parallel style wraps a module from outside."""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from workbench.trial.model import Attention
from workbench.trial.ring_attention import ring_attention


class RingAttention(nn.Module):
    """Causal attention of this rank's query chunk against every CP rank's key/value chunk (the
    drop-in for ``model.CausalAttention``)."""

    def __init__(self, group, ranks: list[int]):
        super().__init__()
        self.group, self.ranks = group, ranks

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return ring_attention(q, k, v, self.group, self.ranks)


def sequence_chunk(x: torch.Tensor, cp_rank: int, cp: int) -> torch.Tensor:
    """This CP rank's contiguous chunk of a (batch, sequence) tensor."""
    chunk = x.shape[1] // cp
    return x[:, cp_rank * chunk:(cp_rank + 1) * chunk]


def apply_cp(model: nn.Module, group, ranks: list[int], seq_len: int) -> None:
    """Context parallelism over ``ranks`` (the CP group ``group``): attention as a ring, and
    learned positions offset to this rank's chunk of a ``seq_len`` sequence (the trial feeds
    each CP rank ``sequence_chunk`` of every sequence)."""
    for mod in model.modules():
        if isinstance(mod, Attention):
            mod.sdpa = RingAttention(group, ranks)
    emb = getattr(model, "embeddings", None)
    if emb is not None and emb.pos is not None:
        offset = ranks.index(dist.get_rank()) * (seq_len // len(ranks))
        emb.pos.register_forward_pre_hook(lambda _mod, args: (args[0] + offset,))

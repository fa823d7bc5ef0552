"""Context parallelism on CPU: causal ring attention with send/recv inside autograd.

PyTorch's own context parallel has no CPU SDPA sharding rule (../shared/notes/platform.md), so
the trial writes the ring (Liu et al. 2023, "Ring Attention"): each CP rank holds one contiguous
chunk of the sequence; key/value chunks travel around the ring, each step attends the local
queries to the visiting chunk (causally on the diagonal, fully below it, not at all above), and
the partial results merge with their log-sum-exps. The rotation is an autograd Function whose
backward sends the gradient the other way; every visiting chunk stays in the graph (a masked one
through a zero-weighted term) so every rank runs every backward rotation and none waits alone.
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist


# What this process's ring has sent (bytes, sends): the trial reads it per step, because gloo's
# point-to-point ops reach neither the flight recorder nor, here, a profiler range.
SENT = {"bytes": 0, "count": 0}


class _RingShift(torch.autograd.Function):
    """Send ``x`` to the next rank of the ring, receive the previous rank's; backward reverses."""

    @staticmethod
    def forward(ctx, x, group, ranks):
        ctx.group, ctx.ranks = group, ranks
        return _shift(x.contiguous(), group, ranks, forward=True)

    @staticmethod
    def backward(ctx, grad):
        return _shift(grad.contiguous(), ctx.group, ctx.ranks, forward=False), None, None


def _shift(x, group, ranks, forward: bool):
    me = ranks.index(dist.get_rank())
    n = len(ranks)
    dst = ranks[(me + 1) % n] if forward else ranks[(me - 1) % n]
    src = ranks[(me - 1) % n] if forward else ranks[(me + 1) % n]
    out = torch.empty_like(x)
    SENT["bytes"] += x.numel() * x.element_size()
    SENT["count"] += 1
    ops = [dist.P2POp(dist.isend, x, dst, group), dist.P2POp(dist.irecv, out, src, group)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    return out


def ring_attention(q, k, v, group, ranks: list[int]):
    """Causal attention of the local query chunk against every rank's key/value chunk.
    q: (b, heads, s_local, d); k, v: (b, kv_heads, s_local, d)."""
    n = len(ranks)
    me = ranks.index(dist.get_rank())
    groups = q.shape[1] // k.shape[1]
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = q.shape[2]
    causal = torch.ones(s, s, dtype=torch.bool).tril()
    outs, lses = [], []
    keep = q.new_zeros(())
    kv = torch.cat([k, v], dim=1)
    for step in range(n):
        if step:
            kv = _RingShift.apply(kv, group, ranks)
        src = (me - step) % n
        kk, vv = kv.split(k.shape[1], dim=1)
        if src > me:                   # a later chunk: fully masked, kept in the graph
            keep = keep + 0.0 * kv.sum()
            continue
        kk = kk.repeat_interleave(groups, dim=1)
        vv = vv.repeat_interleave(groups, dim=1)
        scores = (q @ kk.transpose(-1, -2)) * scale
        if src == me:
            scores = scores.masked_fill(~causal, float("-inf"))
        lses.append(torch.logsumexp(scores, dim=-1))
        outs.append(torch.softmax(scores, dim=-1) @ vv)
    total = torch.logsumexp(torch.stack(lses), dim=0)
    out = sum(o * torch.exp(l - total).unsqueeze(-1) for o, l in zip(outs, lses))
    return out + keep

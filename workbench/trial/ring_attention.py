"""Context parallelism on CPU: causal ring attention, fused the way FlashAttention is.

PyTorch's own context parallel has no CPU SDPA sharding rule (docs/platform.md), so
the trial writes the ring (Liu et al. 2023, "Ring Attention"): each CP rank holds one contiguous
chunk of the sequence; key/value chunks travel around the ring, each step attends the local
queries to the visiting chunk (causally on the diagonal, fully below it, not at all above), and
the partial results merge with their log-sum-exps.

One autograd Function does the whole ring, like a fused kernel (Dao 2022; the ring-flash-attention
pattern): forward saves only q, k, v, the output and the fp32 log-sum-exp, never the s x s
scores; backward recomputes each block's probabilities from the log-sum-exp. Traffic per call,
in blocks of K and V together: cp - 1 forward rotations, cp - 1 backward rotations of K/V, and
cp - 1 hops of the dK/dV accumulator (it starts at the first visiting rank, collects every
rank's contribution and ends at its owner) — the 3 (cp - 1) the estimator counts.
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist

# What this process's ring has sent (bytes, sends): the trial reads it per step, because gloo's
# point-to-point ops reach neither the flight recorder nor, here, a profiler range.
SENT = {"bytes": 0, "count": 0}


def _shift(x: torch.Tensor, group, ranks: list[int]) -> torch.Tensor:
    """Send ``x`` to the next rank of the ring and return what the previous rank sent."""
    me = ranks.index(dist.get_rank())
    n = len(ranks)
    x = x.contiguous()
    out = torch.empty_like(x)
    SENT["bytes"] += x.numel() * x.element_size()
    SENT["count"] += 1
    ops = [dist.P2POp(dist.isend, x, ranks[(me + 1) % n], group),
           dist.P2POp(dist.irecv, out, ranks[(me - 1) % n], group)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    return out


def _scores(q, k, groups: int, scale: float, diagonal: bool):
    """Scaled scores of the local queries against one key block (GQA heads repeated)."""
    s = (q @ k.repeat_interleave(groups, dim=1).transpose(-1, -2)) * scale
    if diagonal:
        n = q.shape[2]
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool, device=q.device).tril(),
                          float("-inf"))
    return s


def _fold(x: torch.Tensor, groups: int) -> torch.Tensor:
    """Sum a per-query-head gradient over the heads that share one key/value head."""
    b, h, s, d = x.shape
    return x.view(b, h // groups, groups, s, d).sum(2)


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, group, ranks):
        n, me = len(ranks), ranks.index(dist.get_rank())
        groups = q.shape[1] // k.shape[1]
        scale = 1.0 / math.sqrt(q.shape[-1])
        kv = torch.cat([k, v], dim=1)
        outs, lses = [], []
        for step in range(n):
            if step:
                kv = _shift(kv, group, ranks)
            src = (me - step) % n
            if src > me:               # a later chunk: masked out entirely (causal)
                continue
            kk, vv = kv.split(k.shape[1], dim=1)
            s = _scores(q, kk, groups, scale, diagonal=src == me)
            lses.append(torch.logsumexp(s, dim=-1))
            outs.append(torch.softmax(s, dim=-1) @ vv.repeat_interleave(groups, dim=1))
        lse = torch.logsumexp(torch.stack(lses), dim=0)
        out = sum(o * torch.exp(l - lse).unsqueeze(-1) for o, l in zip(outs, lses))
        # Stored (b, s, heads, d) as FlashAttention writes it: the caller's transpose + reshape
        # to the output projection's input is then a view of the saved output, not a second
        # copy of it (measured: one extra s x b x q tensor per layer otherwise).
        out = out.transpose(1, 2).contiguous().transpose(1, 2)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.group, ctx.ranks, ctx.groups, ctx.scale = group, ranks, groups, scale
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        group, ranks, groups, scale = ctx.group, ctx.ranks, ctx.groups, ctx.scale
        n, me = len(ranks), ranks.index(dist.get_rank())
        dout = dout.contiguous()
        delta = (dout * out).sum(-1, keepdim=True)       # rowsum(dO * O), FlashAttention-2
        dq = torch.zeros_like(q)

        def block_grads(kv, diagonal: bool):
            kk, vv = kv.split(k.shape[1], dim=1)
            p = torch.exp(_scores(q, kk, groups, scale, diagonal) - lse.unsqueeze(-1))
            dv = _fold(p.transpose(-1, -2) @ dout, groups)
            ds = p * (dout @ vv.repeat_interleave(groups, dim=1).transpose(-1, -2) - delta)
            dq.add_(ds @ kk.repeat_interleave(groups, dim=1) * scale)
            dk = _fold(ds.transpose(-1, -2) @ q * scale, groups)
            return torch.cat([dk, dv], dim=1)

        kv = torch.cat([k, v], dim=1)
        own = block_grads(kv, diagonal=True)             # this rank's queries on its own block
        acc = None                                       # dK/dV of the visiting block
        for step in range(1, n):
            kv = _shift(kv, group, ranks)
            if step > 1:
                acc = _shift(acc, group, ranks)
            src = (me - step) % n
            mine = block_grads(kv, diagonal=False) if src < me else torch.zeros_like(kv)
            acc = mine if acc is None else acc + mine
        if acc is not None:                              # last hop: the accumulator goes home
            own = own + _shift(acc, group, ranks)
        dk, dv = own.split(k.shape[1], dim=1)
        return dq, dk, dv, None, None


def ring_attention(q, k, v, group, ranks: list[int]):
    """Causal attention of the local query chunk against every rank's key/value chunk.
    q: (b, heads, s_local, d); k, v: (b, kv_heads, s_local, d)."""
    return _RingAttention.apply(q, k, v, group, ranks)

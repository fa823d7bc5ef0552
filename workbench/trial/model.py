"""The trial model: a plain decoder-only transformer (dense or MoE) built from a ModelShape.

It knows nothing of parallelism; ``workbench.trial.parallelize`` applies DDP / FSDP2 / TP / SP /
EP / CP to it and ``workbench.trial.pipeline`` cuts it into stages, the way torchtitan keeps
``parallelize_*`` and ``ExpertParallel`` apart from the model. The seams they use: attention
reshapes with the *local* head count (``view(b, s, -1, head_dim)``), so a tensor-parallel plan
that shards q/k/v by heads needs no change here; the attention kernel is a module of its own
(``CausalAttention``) that context parallelism replaces; an MoE layer's routed experts are one
module called with the routed tokens, whose inputs and outputs expert parallelism exchanges.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from workbench.catalog.types import ModelShape


class Norm(nn.Module):
    """RMSNorm or LayerNorm over the hidden size."""

    def __init__(self, hidden: int, kind: str):
        super().__init__()
        self.kind = kind
        self.weight = nn.Parameter(torch.ones(hidden))
        self.bias = nn.Parameter(torch.zeros(hidden)) if kind == "layernorm" else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "layernorm":
            return F.layer_norm(x, x.shape[-1:], self.weight, self.bias)
        return F.rms_norm(x, x.shape[-1:], self.weight)


class CausalAttention(nn.Module):
    """The attention kernel: causal scaled-dot-product attention of (b, heads, s, d) queries
    against (b, kv_heads, s, d) keys and values (``context_parallel`` replaces it with the
    ring)."""

    def __init__(self, grouped: bool):
        super().__init__()
        self.grouped = grouped        # fewer key/value heads than query heads (GQA)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.grouped)


class Attention(nn.Module):
    """Multi-head attention with grouped key/value heads and causal masking."""

    def __init__(self, m: ModelShape):
        super().__init__()
        self.head_dim = m.dim_per_head
        q, kv = m.heads * m.dim_per_head, m.kv_dim
        self.wq = nn.Linear(m.hidden, q, bias=m.bias)
        self.wk = nn.Linear(m.hidden, kv, bias=m.bias)
        self.wv = nn.Linear(m.hidden, kv, bias=m.bias)
        self.wo = nn.Linear(q, m.hidden, bias=m.bias)
        self.sdpa = CausalAttention(grouped=m.heads // m.kv_heads > 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        out = self.sdpa(q, k, v)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class MLP(nn.Module):
    """SwiGLU (w2(silu(w1 x) * w3 x)) or GELU (w2(gelu(w1 x)))."""

    def __init__(self, hidden: int, ffn: int, kind: str, bias: bool):
        super().__init__()
        self.kind = kind
        self.w1 = nn.Linear(hidden, ffn, bias=bias)
        self.w2 = nn.Linear(ffn, hidden, bias=bias)
        self.w3 = nn.Linear(hidden, ffn, bias=bias) if kind == "swiglu" else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.w3 is not None:
            return self.w2(F.silu(self.w1(x)) * self.w3(x))
        return self.w2(F.gelu(self.w1(x)))


class Experts(nn.ModuleList):
    """One MoE layer's routed experts. A ModuleList (parameter names ``experts.<i>.w1...``) with
    a ``forward``, so FSDP2 can shard them as one unit and expert parallelism can hook their
    inputs and outputs: module hooks run on ``forward``, which a plain ModuleList never runs."""

    def forward(self, x: torch.Tensor, weights: torch.Tensor,
                chosen: torch.Tensor) -> torch.Tensor:
        """Rows of ``x`` (tokens, hidden) through the experts ``chosen`` for them (tokens, k),
        scaled by ``weights`` (tokens, k), summed per row. Every expert runs, on no rows if
        none chose it (as a grouped GEMM would): each gets a gradient, zero if unused, so data-
        parallel replicas reduce the same tensors."""
        out = torch.zeros_like(x)
        for e, expert in enumerate(self):
            rows, slot = (chosen == e).nonzero(as_tuple=True)
            out.index_add_(0, rows, expert(x[rows]) * weights[rows, slot, None].to(x.dtype))
        return out


class MoE(nn.Module):
    """Top-k routed experts plus optional shared experts (dropless, token-choice routing)."""

    def __init__(self, m: ModelShape):
        super().__init__()
        moe = m.moe
        self.top_k = moe.top_k
        self.router = nn.Linear(m.hidden, moe.experts, bias=False)
        self.experts = Experts(MLP(m.hidden, moe.expert_ffn_hidden, m.mlp, False)
                               for _ in range(moe.experts))
        self.shared = (MLP(m.hidden, moe.shared_experts * moe.expert_ffn_hidden, m.mlp, False)
                       if moe.shared_experts else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        tokens = x.reshape(-1, shape[-1])
        probs = torch.softmax(self.router(tokens).float(), dim=-1)
        weights, chosen = probs.topk(self.top_k, dim=-1)
        out = self.experts(tokens, weights, chosen)
        if self.shared is not None:
            out = out + self.shared(tokens)
        return out.reshape(shape)


class Block(nn.Module):
    """Pre-norm transformer layer."""

    def __init__(self, m: ModelShape, moe: bool):
        super().__init__()
        self.attention_norm = Norm(m.hidden, m.norm)
        self.attention = Attention(m)
        self.ffn_norm = Norm(m.hidden, m.norm)
        self.feed_forward = MoE(m) if moe else MLP(m.hidden, m.ffn_hidden, m.mlp, m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x))
        return x + self.feed_forward(self.ffn_norm(x))


class Embeddings(nn.Module):
    """Token embeddings plus learned positions (GPT-style models), in one module so a tensor-
    parallel plan can shard its output along the sequence after the positions are added."""

    def __init__(self, m: ModelShape):
        super().__init__()
        self.tok = nn.Embedding(m.vocab, m.hidden)
        positions = int(m.extra.get("position_embeddings", 0))
        self.pos = nn.Embedding(positions, m.hidden) if positions else None

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok(tokens)
        if self.pos is not None:
            h = h + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        return h


class Transformer(nn.Module):
    """Embedding, layers (a ModuleDict keyed by layer index, so pipeline stages can delete the
    layers they do not own), final norm and output head (tied to the embedding when asked)."""

    def __init__(self, m: ModelShape):
        super().__init__()
        from workbench.estimate.params import is_moe_layer

        self.shape = m
        self.embeddings = Embeddings(m)
        self.layers = nn.ModuleDict({str(i): Block(m, is_moe_layer(m, i))
                                     for i in range(m.layers)})
        self.norm = Norm(m.hidden, m.norm)
        self.output = nn.Linear(m.hidden, m.vocab, bias=False)
        if m.tied_embeddings:
            self.output.weight = self.embeddings.tok.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embeddings(tokens) if self.embeddings is not None else tokens
        for layer in self.layers.values():
            h = layer(h)
        h = self.norm(h) if self.norm is not None else h
        return self.output(h) if self.output is not None else h


def init_weights(model: nn.Module, seed: int) -> None:
    """Deterministic initialisation, identical on every rank before any sharding (drawn on the
    parameters' device: ranks on the same kind of device draw the same numbers)."""
    params = sorted(model.named_parameters())
    device = params[0][1].device if params else torch.device("cpu")
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for name, p in params:
            if name.endswith("weight") and p.dim() == 1:
                p.fill_(1.0)
            elif name.endswith("bias"):
                p.zero_()
            else:
                p.copy_(torch.randn(p.shape, generator=gen, device=device) * 0.02)

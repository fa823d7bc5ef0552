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


class Experts(nn.Module):
    """One MoE layer's routed experts as torchtitan's ``GroupedExperts`` holds them (TT =
    pytorch/torchtitan@73a0e6979dd10b6b1904098eb3c8f62c18ab87ce torchtitan/models/moe/moe.py):
    w1 and w3 (experts, ffn, hidden), w2 (experts, hidden, ffn), bias-free, one tensor per
    projection for every expert, so FSDP2 shards them as one unit and expert parallelism keeps a
    slice (``local``). Each weight is initialised as the ``nn.Linear`` of one expert would be."""

    def __init__(self, experts: int, hidden: int, ffn: int, kind: str):
        super().__init__()
        self.kind = kind
        self.w1 = nn.Parameter(_linear_init(torch.empty(experts, ffn, hidden)))
        self.w2 = nn.Parameter(_linear_init(torch.empty(experts, hidden, ffn)))
        self.w3 = (nn.Parameter(_linear_init(torch.empty(experts, ffn, hidden)))
                   if kind == "swiglu" else None)

    @property
    def num_experts(self) -> int:
        return self.w1.shape[0]

    def local(self, first: int, count: int) -> "Experts":
        """Experts [first, first + count) with their weights (expert parallelism's share)."""
        out = Experts.__new__(Experts)
        nn.Module.__init__(out)
        out.kind = self.kind
        for name in ("w1", "w2", "w3"):
            w = getattr(self, name)
            setattr(out, name, None if w is None else
                    nn.Parameter(w.detach()[first:first + count].clone()))
        return out

    def forward(self, x: torch.Tensor, weights: torch.Tensor,
                chosen: torch.Tensor) -> torch.Tensor:
        """Rows of ``x`` (tokens, hidden) through the experts ``chosen`` for them (tokens, k),
        scaled by ``weights`` (tokens, k), summed per row. The k copies of the tokens are
        sorted by expert (TT moe.py ``TokenReorderer``: a stable argsort), run as one grouped
        GEMM per projection (``run_experts``), weighted and scatter-added back per token. Every
        expert takes part, on no rows if none chose it: each gets a gradient, zero if unused, so
        data-parallel replicas reduce the same tensors."""
        flat = chosen.reshape(-1)
        order = torch.argsort(flat, stable=True)
        token_of = order // chosen.shape[1]
        counts = torch.bincount(flat, minlength=self.num_experts)
        y = run_experts(self, x[token_of], counts)
        w = weights.reshape(-1)[order, None].to(x.dtype)
        return torch.zeros_like(x).index_add(0, token_of, y * w)


def _linear_init(w: torch.Tensor) -> torch.Tensor:
    """``nn.Linear``'s default initialisation per expert (kaiming_uniform with a = sqrt(5):
    U(-1/sqrt(in), 1/sqrt(in)), in = the last dimension)."""
    bound = 1.0 / w.shape[-1] ** 0.5
    with torch.no_grad():
        return w.uniform_(-bound, bound)


# Rows per expert group are padded to a multiple of this on CUDA: the weight gradient's grouped
# GEMM contracts over the token dimension, whose group offsets the kernel wants 16-byte aligned
# ("For bf16, 8 is enough (16 byte alignment / 2 bytes per elem = 8 elements)": TT
# torchtitan/models/moe/utils.py TOKEN_GROUP_ALIGN_SIZE_M).
CUDA_GROUP_ALIGN = 8


def grouped_mm_runs(device: torch.device, widths: tuple[int, ...] = (),
                    dtype: torch.dtype = torch.float32) -> bool:
    """Whether ``torch._grouped_mm`` runs on ``device`` for operands whose rows are ``widths``
    elements of ``dtype`` (on CUDA the kernel runs in bf16): present in this torch; on CUDA a GPU
    of compute capability 8.0 or later ("Inputs are currently expected to be torch.bfloat16
    values on CUDA devices with SM >= 80", torch.nn.functional.grouped_mm); every row stride a
    multiple of 16 bytes (its check "strides should be multiple of 16 bytes", CPU and CUDA).
    The CPU build runs it in the tensors' dtype (torch 2.13: forward and backward, fp32, bf16)."""
    if not hasattr(torch, "_grouped_mm"):
        return False
    if device.type == "cuda":
        dtype = torch.bfloat16
        if torch.cuda.get_device_capability(device) < (8, 0):
            return False
    elif device.type != "cpu":
        return False
    size = torch.empty((), dtype=dtype).element_size()
    return all(w * size % 16 == 0 for w in widths)


def expert_gemms(device: torch.device, hidden: int, ffn: int,
                 dtype: torch.dtype = torch.float32) -> str:
    """How the trial's routed experts of ``hidden`` x ``ffn`` run on ``device``: "grouped"
    (``torch._grouped_mm``, as torchtitan and Megatron-Core run them) or "loop" (one matmul
    chain per expert): the ``Engine.expert_gemms`` value of what the trial runs."""
    return "grouped" if grouped_mm_runs(device, (hidden, ffn), dtype) else "loop"


def run_experts(experts: Experts, x: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """The expert MLPs on rows ``x`` sorted by expert, ``counts`` rows each."""
    if grouped_mm_runs(x.device, tuple(experts.w1.shape[1:]), x.dtype):
        return _grouped(experts, x, counts)
    return _loop(experts, x, counts)


def _act(experts: Experts, up, gate) -> torch.Tensor:
    return F.silu(up) * gate() if experts.kind == "swiglu" else F.gelu(up)


def _grouped(experts: Experts, x: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """One ``torch._grouped_mm`` per projection over every expert (TT moe.py
    ``_run_experts_grouped_mm``: offsets the cumulative row counts, weights transposed; on CUDA
    in bf16, cast back to the input's dtype, with each group padded to ``CUDA_GROUP_ALIGN``
    rows as TT's ``_permute`` / ``indices_padding_wrapper`` pad them)."""
    cuda = x.device.type == "cuda"
    dest = None
    if cuda:
        x, counts, dest = _pad_groups(x, counts, CUDA_GROUP_ALIGN)
    dt = torch.bfloat16 if cuda else x.dtype
    offs = torch.cumsum(counts, dim=0, dtype=torch.int32)
    xs = x.to(dt)

    def mm(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch._grouped_mm(a, w.to(dt).transpose(-2, -1), offs=offs)

    h = _act(experts, mm(xs, experts.w1), lambda: mm(xs, experts.w3))
    out = mm(h, experts.w2).to(x.dtype)
    return out if dest is None else out[dest]


def _pad_groups(x: torch.Tensor, counts: torch.Tensor, align: int) -> tuple:
    """``x``'s expert groups copied into groups padded with zero rows to a multiple of
    ``align``: (padded rows, padded counts, each original row's index among the padded)."""
    padded = (counts + align - 1) // align * align
    group = torch.repeat_interleave(torch.arange(len(counts), device=x.device), counts)
    within = torch.arange(x.shape[0], device=x.device) - (torch.cumsum(counts, 0) - counts)[group]
    dest = (torch.cumsum(padded, 0) - padded)[group] + within
    rows = x.new_zeros(int(padded.sum()), x.shape[1]).index_copy(0, dest, x)
    return rows, padded, dest


def _loop(experts: Experts, x: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """One matmul chain per expert (TT moe.py ``_run_experts_for_loop``), where
    ``torch._grouped_mm`` does not run: the row counts come to the host once (a sync)."""
    outs = []
    for e, rows in enumerate(torch.split(x, counts.tolist(), dim=0)):
        h = _act(experts, rows @ experts.w1[e].T, lambda: rows @ experts.w3[e].T)
        outs.append(h @ experts.w2[e].T)
    return torch.cat(outs) if outs else x.new_zeros(0, x.shape[1])


class MoE(nn.Module):
    """Top-k routed experts plus optional shared experts (dropless, token-choice routing)."""

    def __init__(self, m: ModelShape):
        super().__init__()
        moe = m.moe
        self.top_k = moe.top_k
        self.router = nn.Linear(m.hidden, moe.experts, bias=False)
        self.experts = Experts(moe.experts, m.hidden, moe.expert_ffn_hidden, m.mlp)
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
        from workbench.estimate.model.params import is_moe_layer

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

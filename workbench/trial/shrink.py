"""Scale a scenario down to a trial this machine can run, keeping the model's family.

Kept: the GQA ratio (heads per key/value head), MLP kind (SwiGLU/GELU), norm kind, biases, tied
or untied embeddings, MoE experts (up to 16) with their top-k and shared experts, the FFN/hidden
ratio, and the whole parallel layout. Shrunk: hidden size, layers (one per pipeline chunk, at
least two), vocabulary, sequence length and batch. Trials run in fp32 (this CPU runs bf16
matmuls ~50x slower, docs/platform.md); the precision is modelled analytically.
"""
from __future__ import annotations

import dataclasses
import math

from workbench.catalog.types import ModelShape, MoE
from workbench.scenario.schedules import schedule
from workbench.scenario.types import Parallel, Scenario, Training

TRIAL_VOCAB = 512
TRIAL_SEQ = 64
TRIAL_HEAD_DIM = 8


def _round_up(x: float, multiple: int) -> int:
    return max(multiple, int(math.ceil(x / multiple)) * multiple)


def trial_model(m: ModelShape, tp: int, ep: int, pp_chunks: int) -> ModelShape:
    """The scaled-down shape of ``m`` for a layout with ``tp``, ``ep`` and ``pp_chunks`` chunks."""
    groups = max(1, m.heads // m.kv_heads)
    kv_heads = tp                               # each TP rank keeps one key/value head
    heads = kv_heads * groups
    hidden = heads * TRIAL_HEAD_DIM
    ratio = m.ffn_hidden / m.hidden
    ffn = _round_up(hidden * ratio, 8 * tp)
    moe = None
    if m.moe is not None:
        experts = min(m.moe.experts, 16)
        experts = _round_up(experts, ep) if experts % ep else experts
        e_ratio = m.moe.expert_ffn_hidden / m.hidden
        moe = MoE(experts=experts, top_k=min(m.moe.top_k, experts),
                  expert_ffn_hidden=_round_up(hidden * e_ratio, 8 * tp),
                  shared_experts=min(m.moe.shared_experts, 1),
                  dense_layers=min(m.moe.dense_layers, 1), capacity_factor=0.0)
    layers = max(2, pp_chunks)
    positions = TRIAL_SEQ if m.extra.get("position_embeddings") else 0
    return ModelShape(name=f"trial of {m.name}", layers=layers, hidden=hidden, heads=heads,
                      kv_heads=kv_heads, ffn_hidden=ffn, vocab=TRIAL_VOCAB, mlp=m.mlp,
                      tied_embeddings=m.tied_embeddings, moe=moe, head_dim=TRIAL_HEAD_DIM,
                      norm=m.norm, bias=m.bias, dropout=False, max_seq_len=TRIAL_SEQ,
                      source=f"scaled down from {m.name} for a trial",
                      extra={"position_embeddings": positions} if positions else {})


def eager_parallel(par: Parallel, section: dict) -> tuple[Parallel, dict]:
    """``par`` and its scenario-file ``parallel`` section as a trial runs them: plain PyTorch
    (the engine switches are the full run's), so no async TP or Megatron TP overlap (the
    trial's TP is DTensor's synchronous collectives), no expert TP and no engine overlap
    switches. Used by the CPU trial (``trial_scenario``) and the GPU slice (``slice.py``)."""
    par = dataclasses.replace(par, async_tp=False, tp_comm_overlap=False, expert_tp=None,
                              overlap_grad_reduce=None, overlap_param_gather=None)
    section = {**section, "async_tp": False, "tp_comm_overlap": False}
    for key in ("expert_tp", "overlap_grad_reduce", "overlap_param_gather"):
        section.pop(key, None)
    return par, section


def trial_scenario(s: Scenario, micro_batch: int = 2) -> Scenario:
    """The user's layout on the scaled-down model, fp32, short sequences; microbatches as the
    schedule needs them (at least 2, at least pp; DualPipeV 2 x pp)."""
    par = s.parallel
    m = trial_model(s.model, par.tp, par.ep, par.pp * par.chunks_per_rank)
    microbatches = max(2, par.pp, int(schedule(par.pp_schedule).min_microbatches(par.pp)))
    tr = Training(seq_len=TRIAL_SEQ, micro_batch=micro_batch,
                  global_batch=micro_batch * par.dp * microbatches, precision="fp32",
                  recompute="none", optimizer=s.training.optimizer, offload="none",
                  tokens=1e6, attention="flash2", method=s.training.method,
                  lora=s.training.lora)
    doc = s.to_dict()
    doc["training"] = dataclasses.asdict(tr)
    par, doc["parallel"] = eager_parallel(par, doc.get("parallel", {}))
    return dataclasses.replace(s, model=m, parallel=par, training=tr, document=doc)

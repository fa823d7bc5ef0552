"""Rules of the model's shape alone: attention groups, head width, the experts."""
from __future__ import annotations

from workbench.errors import Problem
from workbench.scenario.rules.table import rule
from workbench.scenario.types import Scenario


@rule("gqa", "model.kv_heads divides model.heads (grouped-query attention groups)",
      "model.kv_heads", "model.heads", layout=False)
def _gqa(s: Scenario):
    m = s.model
    if m.heads % m.kv_heads:
        yield Problem("model.kv_heads", m.kv_heads,
                      f"must divide model.heads = {m.heads} (GQA groups)")


@rule("head_dim", "model.heads divides model.hidden unless model.head_dim is given",
      "model.heads", "model.hidden", "model.head_dim", layout=False)
def _head_dim(s: Scenario):
    m = s.model
    if not m.head_dim and m.hidden % m.heads:
        yield Problem("model.heads", m.heads, f"must divide model.hidden = {m.hidden} "
                                              "(or set model.head_dim)")


@rule("moe_shape", "model.moe.top_k <= model.moe.experts, model.moe.dense_layers <= "
      "model.layers and model.moe.capacity_factor <= experts / top_k (a capacity of every "
      "token)", "model.moe.top_k", "model.moe.experts", "model.moe.dense_layers",
      "model.moe.capacity_factor", layout=False)
def _moe_shape(s: Scenario):
    m = s.model
    if m.moe is None:
        return
    if m.moe.top_k > m.moe.experts:
        yield Problem("model.moe.top_k", m.moe.top_k,
                      f"must be <= model.moe.experts = {m.moe.experts}")
    if m.moe.dense_layers > m.layers:
        yield Problem("model.moe.dense_layers", m.moe.dense_layers,
                      f"must be <= model.layers = {m.layers}")
    # Megatron-Core's capacity is ceil(tokens x top_k / experts x capacity_factor) and it drops
    # nothing once that reaches the tokens (megatron-core 0.16 transformer/moe/moe_utils.py
    # get_capacity, apply_router_token_dropping): past experts / top_k a factor changes nothing
    # but the padding the estimate would count
    most = m.moe.experts / m.moe.top_k
    if m.moe.top_k <= m.moe.experts and m.moe.capacity_factor > most:
        yield Problem("model.moe.capacity_factor", m.moe.capacity_factor,
                      f"must be at most experts / top_k = {m.moe.experts}/{m.moe.top_k} = "
                      f"{most:g} (then every expert may take every token; 0: dropless)")

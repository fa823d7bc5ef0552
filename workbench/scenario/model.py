"""The scenario's ``model`` section read: a catalog preset, changed field by field, or a shape
given whole; mixture of experts (``model.moe``) and multi-head latent attention keys included.
"""
from __future__ import annotations

import difflib

from typing import Any

from workbench.catalog import CATALOGS
from workbench.catalog.types import ModelShape, MoE
from workbench.documents.fields import MISSING, Fields
from workbench.scenario.types import MLP_KINDS, NORM_KINDS

# Megatron-Core's router top-k default (megatron-core 0.16.1, transformer/transformer_config.py:
# moe_router_topk = 2), used when an MoE table leaves top_k out.
MOE_TOP_K_DEFAULT = 2

MLA_FIELDS = ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
               "v_head_dim")
MODEL_FIELDS = ("preset", "name", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab",
                 "mlp", "tied_embeddings", "moe", "head_dim", "norm", "bias", "dropout",
                 *MLA_FIELDS)
MOE_FIELDS = ("experts", "top_k", "expert_ffn_hidden", "shared_experts", "dense_layers",
               "capacity_factor")


def read_model(c: Fields, raw: Any) -> tuple[ModelShape | None, dict]:
    p = "model"
    if isinstance(raw, str):  # shorthand: just the preset
        raw = {"preset": raw}
    d = c.table(raw, p, MODEL_FIELDS)
    base = None
    doc: dict[str, Any] = {}
    if "preset" in d:
        key = str(d["preset"]).strip().lower()
        base = CATALOGS["model"].get(key)
        if base is None:
            close = difflib.get_close_matches(key, list(CATALOGS["model"]), n=4, cutoff=0.5)
            c.add("model.preset", d["preset"],
                  "unknown model preset" + (f"; did you mean {', '.join(close)}?" if close
                                            else "")
                  + f" (allowed: {', '.join(sorted(CATALOGS['model']))}; or give the model's "
                  "shape: workbench import its config.json)")
            return None, dict(d)
        doc["preset"] = key
    elif raw is not MISSING:
        for need in ("layers", "hidden", "heads", "ffn_hidden", "vocab"):
            if need not in d:
                c.add(f"model.{need}", None, "is required when no model.preset is given")
        if any(k not in d for k in ("layers", "hidden", "heads", "ffn_hidden", "vocab")):
            return None, dict(d)

    def dflt(name: str, fallback: Any) -> Any:
        return getattr(base, name) if base is not None else fallback

    vals: dict[str, Any] = {}
    vals["layers"] = c.integer(d, "layers", p, dflt("layers", MISSING), hi=100_000)
    vals["hidden"] = c.integer(d, "hidden", p, dflt("hidden", MISSING), hi=1_000_000)
    vals["heads"] = c.integer(d, "heads", p, dflt("heads", MISSING), hi=100_000)
    vals["kv_heads"] = c.integer(d, "kv_heads", p, dflt("kv_heads", d.get("heads", 1)), hi=100_000)
    vals["ffn_hidden"] = c.integer(d, "ffn_hidden", p, dflt("ffn_hidden", MISSING), hi=10_000_000)
    vals["vocab"] = c.integer(d, "vocab", p, dflt("vocab", MISSING), hi=100_000_000)
    vals["head_dim"] = c.integer(d, "head_dim", p, dflt("head_dim", 0), lo=0, hi=100_000)
    vals["mlp"] = c.choice(d, "mlp", p, MLP_KINDS, dflt("mlp", "swiglu"))
    vals["norm"] = c.choice(d, "norm", p, NORM_KINDS, dflt("norm", "rmsnorm"))
    vals["tied_embeddings"] = c.boolean(d, "tied_embeddings", p, dflt("tied_embeddings", False))
    vals["bias"] = c.boolean(d, "bias", p, dflt("bias", False))
    vals["dropout"] = c.boolean(d, "dropout", p, dflt("dropout", False))
    _mla(c, d, vals, dflt)
    name = d.get("name", dflt("name", "custom"))
    moe_doc = None
    moe = None
    if "moe" in d and d["moe"] is None:
        moe = None
    elif "moe" in d or (base is not None and base.moe is not None):
        bm = base.moe if base is not None else None
        md = c.table(d.get("moe", {}), "model.moe", MOE_FIELDS)
        if bm is None and "moe" in d and "experts" not in md:
            c.add("model.moe.experts", None, "is required for an MoE model (routed experts "
                                             "per MoE layer)")
        if bm is None:
            # Megatron-Core's defaults (MOE_TOP_K_DEFAULT; moe_ffn_hidden_size None ->
            # ffn_hidden_size in TransformerConfig.__post_init__), said in the estimate's
            # assumptions when they apply.
            for key, value, what in (("top_k", MOE_TOP_K_DEFAULT,
                                      f"{MOE_TOP_K_DEFAULT}, Megatron-Core's moe_router_topk "
                                      "default"),
                                     ("expert_ffn_hidden", vals["ffn_hidden"],
                                      f"model.ffn_hidden = {vals['ffn_hidden']}, as "
                                      "Megatron-Core's moe_ffn_hidden_size defaults to "
                                      "ffn_hidden_size")):
                if key not in md and value is not None:
                    c.assumptions.append(f"model.moe.{key} not given: {what}")

        def mdef(name: str, fallback: Any) -> Any:
            return getattr(bm, name) if bm is not None else fallback

        mv = {
            "experts": c.integer(md, "experts", "model.moe", mdef("experts", 1), hi=100_000),
            "top_k": c.integer(md, "top_k", "model.moe", mdef("top_k", MOE_TOP_K_DEFAULT),
                               hi=100_000),
            "expert_ffn_hidden": c.integer(md, "expert_ffn_hidden", "model.moe",
                                           mdef("expert_ffn_hidden", vals["ffn_hidden"] or 1),
                                           hi=10_000_000),
            "shared_experts": c.integer(md, "shared_experts", "model.moe",
                                        mdef("shared_experts", 0), lo=0, hi=1000),
            "dense_layers": c.integer(md, "dense_layers", "model.moe", mdef("dense_layers", 0),
                                      lo=0, hi=100_000),
            "capacity_factor": c.number(md, "capacity_factor", "model.moe",
                                        mdef("capacity_factor", 0.0), positive=False),
        }
        if all(v is not None for v in mv.values()):
            moe = MoE(**mv)
            moe_doc = dict(mv)
    if any(v is None for v in vals.values()):
        return None, dict(d)
    changed = base is None or any(vals[k] != getattr(base, k) for k in vals) or (
        moe != base.moe)
    model = ModelShape(
        name=str(name) + (" (modified)" if base is not None and changed and "name" not in d
                          else ""),
        moe=moe, max_seq_len=base.max_seq_len if base is not None else 0,
        source=base.source if base is not None and not changed else
        (f"{base.source} -- modified by the scenario" if base is not None else "inline"),
        # Structural extras (learned position rows) stay; published counts no longer apply.
        extra={k: v for k, v in base.extra.items()
               if not changed or not k.startswith(("expected", "published"))}
        if base is not None else {},
        **vals)
    doc.update({k: v for k, v in vals.items()
                if k not in MLA_FIELDS or model.mla or k in d})
    doc["moe"] = moe_doc
    if "name" in d:
        doc["name"] = str(d["name"])
    return model, doc


def _mla(c: Fields, d: dict, vals: dict, dflt) -> None:
    """Multi-head latent attention keys (non-negative whole numbers; kv_lora_rank > 0 turns MLA
    on and then needs the per-head dims; without it the other keys must stay 0)."""
    p = "model"
    for key in MLA_FIELDS:
        vals[key] = c.integer(d, key, p, dflt(key, 0), lo=0, hi=1_000_000)
    kv = vals["kv_lora_rank"]
    if kv is None:
        return
    for key in MLA_FIELDS:
        if key == "kv_lora_rank" or vals[key] is None:
            continue
        if kv > 0 and key != "q_lora_rank" and vals[key] == 0:
            c.add(f"model.{key}", vals[key], "must be > 0 when model.kv_lora_rank > 0 "
                                             "(multi-head latent attention)")
            vals[key] = None
        elif kv == 0 and vals[key] > 0:
            c.add(f"model.{key}", vals[key], "needs model.kv_lora_rank > 0 (multi-head latent "
                                             "attention); 0 without MLA")
            vals[key] = None

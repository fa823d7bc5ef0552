"""The scenario's ``training`` section read: batch and sequence, numerics, the engine and its
switches, and fine-tuning (``training.method``, ``training.lora``).
"""
from __future__ import annotations

import dataclasses
from typing import Any

from workbench.documents.fields import Fields
from workbench.engines import ENGINE_NAMES, ENGINES, FP8_RECIPES
from workbench.scenario.types import (
    ATTENTION_KERNELS, BACKENDS, LORA_PROJECTIONS, LORA_QUANT, LORA_TARGET_GROUPS,
    LORA_TRAINABLE, METHODS, OFFLOAD, OPTIMIZERS, PRECISIONS, RECOMPUTE, RECOMPUTE_MODULES,
    STATE_GRADS,
    STATE_MASTER, STATE_MOMENTS, Lora, StateDtypes, Training,
)


def read_training(c: Fields, raw: Any) -> tuple[Training | None, dict]:
    p = "training"
    d = c.table(raw, p, tuple(f.name for f in dataclasses.fields(Training)))
    dfl = Training()
    vals = {
        "seq_len": c.integer(d, "seq_len", p, dfl.seq_len, hi=100_000_000),
        "micro_batch": c.integer(d, "micro_batch", p, dfl.micro_batch, hi=1_000_000),
        "global_batch": c.integer(d, "global_batch", p, dfl.global_batch, hi=1_000_000_000),
        "precision": c.choice(d, "precision", p, PRECISIONS, dfl.precision),
        "optimizer": c.choice(d, "optimizer", p, OPTIMIZERS, dfl.optimizer),
        "offload": c.choice(d, "offload", p, OFFLOAD, dfl.offload),
        "tokens": c.number(d, "tokens", p, dfl.tokens, count=True),
        "engine": c.choice(d, "engine", p, ENGINE_NAMES, dfl.engine),
        "compile": c.boolean(d, "compile", p, dfl.compile),
        "recompute_every": c.integer(d, "recompute_every", p, dfl.recompute_every,
                                     hi=1_000_000),
        "method": c.choice(d, "method", p, METHODS, dfl.method),
        "optimizer_in_backward": c.boolean(d, "optimizer_in_backward", p,
                                           dfl.optimizer_in_backward),
        "activation_offload": c.boolean(d, "activation_offload", p, dfl.activation_offload),
        "liger": c.boolean(d, "liger", p, dfl.liger),
        "fp8_param_gather": c.boolean(d, "fp8_param_gather", p, dfl.fp8_param_gather),
        "fp8_attention": c.boolean(d, "fp8_attention", p, dfl.fp8_attention),
    }
    # The attention kernel and the recompute policy default to the engine's (generic: flash2,
    # selective).
    eng = ENGINES.get(vals["engine"]) if vals["engine"] is not None else None
    vals["recompute"] = c.choice(d, "recompute", p, RECOMPUTE,
                                 eng.recompute_default if eng else dfl.recompute)
    vals["attention"] = c.choice(d, "attention", p, ATTENTION_KERNELS,
                                 eng.attention if eng else dfl.attention)
    vals["fp8_recipe"] = (c.choice(d, "fp8_recipe", p, FP8_RECIPES, None)
                          if d.get("fp8_recipe") is not None else None)
    vals["backend"] = (c.choice(d, "backend", p, BACKENDS, None)
                       if d.get("backend") is not None else None)
    for price in ("price_per_gpu_hour", "price_per_kwh"):
        vals[price] = c.number(d, price, p, None, positive=False) if d.get(price) is not None \
            else None
    vals["deadline"] = c.duration(d, "deadline", p)
    vals["budget"] = (c.number(d, "budget", p, None, count=True)
                      if d.get("budget") not in (None, "") else None)
    if vals["budget"] is not None and vals["price_per_gpu_hour"] is None \
            and vals["price_per_kwh"] is None:
        c.add("training.budget", d.get("budget"), "needs a price to cost the run: set "
              "training.price_per_gpu_hour (per GPU-hour) or training.price_per_kwh")
    blocks_ok = True
    vals["lora"] = None
    if vals["method"] in ("lora", "qlora"):
        vals["lora"] = _lora(c, d.get("lora"), vals["method"])
        blocks_ok = vals["lora"] is not None
    elif d.get("lora") is not None and vals["method"] is not None:
        c.add("training.lora", d.get("lora"), f"applies to method lora or qlora only (method is "
              f"{vals['method']}); remove it or set training.method")
        blocks_ok = False
    vals["recompute_modules"] = None
    if d.get("recompute_modules") is not None:
        vals["recompute_modules"] = _names(c, d.get("recompute_modules"),
                                           p + ".recompute_modules", RECOMPUTE_MODULES, {})
        blocks_ok = blocks_ok and vals["recompute_modules"] is not None
    vals["state_dtypes"] = None
    if d.get("state_dtypes") is not None:
        vals["state_dtypes"] = _state_dtypes(c, d.get("state_dtypes"))
        blocks_ok = blocks_ok and vals["state_dtypes"] is not None
    optional = ("price_per_gpu_hour", "price_per_kwh", "budget", "fp8_recipe", "backend",
                "deadline", "recompute_modules", "lora", "state_dtypes")
    if not blocks_ok or any(v is None for k, v in vals.items() if k not in optional) or any(
            d.get(k) not in (None, "") and vals[k] is None for k in optional[:-2]):
        return None, dict(d)
    tr = Training(**vals)
    doc = dataclasses.asdict(tr)
    if tr.recompute_modules is not None:
        doc["recompute_modules"] = list(tr.recompute_modules)
    if tr.lora is not None:      # lists, as a document has them (YAML writes no tuples)
        doc["lora"] = {k: list(v) if isinstance(v, tuple) else v for k, v in doc["lora"].items()
                       # quant and double_quant are QLoRA's: a LoRA document without them
                       # reads back (the validator refuses them with method lora)
                       if tr.method == "qlora" or k not in ("quant", "double_quant")}
    return tr, doc


def _names(c: Fields, value: Any, path: str, allowed: tuple[str, ...],
           groups: dict[str, tuple[str, ...]]) -> tuple[str, ...] | None:
    """A list of names from ``allowed`` (or one group name standing for several)."""
    if isinstance(value, str) and value.strip().lower() in groups:
        return groups[value.strip().lower()]
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        c.add(path, value, f"must be {' | '.join(groups) + ' or ' if groups else ''}a list of "
              f"{', '.join(allowed)}")
        return None
    out = []
    for item in value:
        name = item.strip().lower() if isinstance(item, str) else item
        if name not in allowed:
            c.add(path, item, f"unknown name; allowed: {', '.join(allowed)}")
            return None
        if name not in out:
            out.append(name)
    return tuple(n for n in allowed if n in out)     # canonical order


def _lora(c: Fields, raw: Any, method: str) -> Lora | None:
    """``training.lora`` for method lora / qlora; every key optional (defaults: ``Lora``)."""
    p = "training.lora"
    d = c.table(raw, p, tuple(f.name for f in dataclasses.fields(Lora)))
    dfl = Lora()
    n = len(c.problems)
    rank = c.integer(d, "rank", p, dfl.rank, hi=65_536)
    alpha = c.number(d, "alpha", p, dfl.alpha)
    targets = _names(c, d.get("targets", "all-linear"), p + ".targets", LORA_PROJECTIONS,
                     LORA_TARGET_GROUPS)
    if targets is not None and not targets:
        c.add(p + ".targets", d.get("targets"), "must name at least one projection")
    trainable = _names(c, d.get("trainable", []), p + ".trainable", LORA_TRAINABLE, {})
    dropout = c.number(d, "dropout", p, dfl.dropout, positive=False)
    if dropout is not None and not 0 <= dropout < 1:
        c.add(p + ".dropout", dropout, "a probability: at least 0, below 1")
    quant, double_quant = dfl.quant, dfl.double_quant
    if method == "qlora":
        quant = c.choice(d, "quant", p, LORA_QUANT, dfl.quant)
        double_quant = c.boolean(d, "double_quant", p, dfl.double_quant)
    else:
        for key in ("quant", "double_quant"):
            if key in d:
                c.add(f"{p}.{key}", d[key], "applies to method qlora only (a LoRA base stays in "
                      "the compute dtype)")
    if len(c.problems) > n:
        return None
    return Lora(rank=rank, alpha=alpha, targets=targets, quant=quant,
                double_quant=double_quant, trainable=trainable, dropout=dropout)


def _state_dtypes(c: Fields, raw: Any) -> StateDtypes | None:
    """``training.state_dtypes``: every key optional (defaults: ``StateDtypes``, fp32)."""
    p = "training.state_dtypes"
    d = c.table(raw, p, tuple(f.name for f in dataclasses.fields(StateDtypes)))
    dfl = StateDtypes()
    n = len(c.problems)
    vals = {"grads": c.choice(d, "grads", p, STATE_GRADS, dfl.grads),
            "master": c.choice(d, "master", p, STATE_MASTER, dfl.master),
            "moments": c.choice(d, "moments", p, STATE_MOMENTS, dfl.moments)}
    if len(c.problems) > n or any(v is None for v in vals.values()):
        return None
    return StateDtypes(**vals)

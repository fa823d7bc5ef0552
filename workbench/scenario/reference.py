"""The scenario reference (docs/scenario.md), generated from the code that reads scenarios: the
keys the validator accepts, the dataclasses' defaults and field comments, the allowed values,
the catalogs and the rule table, so the document cannot drift from what is checked.

    python -m workbench.scenario.reference > docs/scenario.md
"""
from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Any

from workbench.catalog import CATALOGS
from workbench.catalog.types import CPU, GPU, Drive, HostMemory, Link, ModelShape, MoE
from workbench.scenario import types as sc
from workbench.hardware import resolve as hw
from workbench.scenario import model as md
from workbench.scenario.validate import PARALLEL_FIELDS
from workbench.scenario.rules import RULES

_FIELD = re.compile(r"^\s+(\w+):[^#]*?(?:#\s?(.*))?$")
_MORE = re.compile(r"^\s+#\s+(.*)$")

# What each section's keys may take, where the dataclass type says too little.
ALLOWED = {
    "parallel.zero": sc.ZERO_STAGES, "parallel.pp_schedule": sc.SCHEDULES,
    "training.precision": sc.PRECISIONS, "training.recompute": sc.RECOMPUTE,
    "training.optimizer": sc.OPTIMIZERS, "training.offload": sc.OFFLOAD,
    "training.attention": sc.ATTENTION_KERNELS, "model.mlp": sc.MLP_KINDS,
    "model.norm": sc.NORM_KINDS, "training.method": sc.METHODS,
    "training.backend": sc.BACKENDS,
    "training.lora.quant": sc.LORA_QUANT,
    "training.lora.targets": ("attention", "mlp", "all-linear", "or a list of "
                              + ", ".join(sc.LORA_PROJECTIONS)),
    "training.lora.trainable": ("a list of " + ", ".join(sc.LORA_TRAINABLE),),
    "training.recompute_modules": ("a list of " + ", ".join(sc.RECOMPUTE_MODULES),),
    "training.state_dtypes.grads": sc.STATE_GRADS,
    "training.state_dtypes.master": sc.STATE_MASTER,
    "training.state_dtypes.moments": sc.STATE_MOMENTS,
}


def field_comments(cls: type) -> dict[str, str]:
    """Each dataclass field's trailing comment, with its continuation lines (``#`` lines that
    follow it, indented)."""
    out: dict[str, str] = {}
    last = None
    for line in inspect.getsource(cls).splitlines():
        more = _MORE.match(line)
        if more and last is not None:
            out[last] = f"{out[last]} {more.group(1).strip()}".strip()
            continue
        m = _FIELD.match(line)
        if m and not line.strip().startswith(("def ", "@", "return", '"')):
            last = m.group(1)
            out[last] = (m.group(2) or "").strip()
        elif line.strip():
            last = None
    return out


def _default(value: Any) -> str:
    if value is dataclasses.MISSING:
        return "required"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_default(x)}" for k, x in value.items()) + "}"
    return f"{value:g}" if isinstance(value, float) else str(value)


_TYPE_WORDS = {"int": "whole number", "float": "number", "bool": "true or false", "str": "text",
               "MoE": "table", "InterNode": "table or link key", "Host": "table",
               "Storage": "table", "Lora": "table", "StateDtypes": "table"}


def _type_words(annotation: str) -> str:
    """A field's type as a user reads it: catalog records are a key or an inline table."""
    words = []
    for part in (p.strip() for p in annotation.split("|")):
        if part == "None":
            words.append("null")
        else:
            words.append(_TYPE_WORDS.get(part, "catalog key or inline table"))
    return " or ".join(words)


def _table(prefix: str, keys: tuple[str, ...], cls: type, defaults: dict[str, Any]) -> list[str]:
    comments = field_comments(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    rows = ["| key | default | allowed | meaning |", "|---|---|---|---|"]
    for key in keys:
        f = fields.get(key)
        if key in defaults:
            default = _default(defaults[key])
        elif f is not None and f.default is not dataclasses.MISSING:
            default = _default(f.default)
        else:
            default = "required" if f is not None else ""
        allowed = ALLOWED.get(f"{prefix}.{key}")
        allowed = " \\| ".join(map(str, allowed)) if allowed else _type_words(str(f.type))
        meaning = comments.get(key, "")
        if not meaning:
            raise ValueError(f"{cls.__name__}.{key} has no comment to document {prefix}.{key}")
        rows.append(f"| `{key}` | {default} | {allowed} | {meaning.replace('|', chr(92) + '|')} |")
    return rows


def _catalog_keys(kind: str) -> str:
    return ", ".join(f"`{k}`" for k in sorted(CATALOGS[kind]))


def _inline(kind: str, cls: type) -> str:
    required = hw.INLINE[kind][1]
    optional = [f.name for f in dataclasses.fields(cls)
                if f.name not in required
                and f.name not in ("name", "source", "profile", "power_limit_w")]
    return (f"inline `{kind}` table: required {', '.join(f'`{k}`' for k in required)}; "
            f"optional {', '.join(f'`{k}`' for k in optional)}")


def scenario_reference() -> str:
    """docs/scenario.md as text."""
    hd = hw.HARDWARE_DEFAULTS
    out = [
        "# Scenario reference",
        "",
        "Generated by `python -m workbench.scenario.reference` from the validator, the scenario",
        "dataclasses, the catalogs and the rule table (`workbench/scenario/`); a test keeps it",
        "current. A scenario is a YAML or JSON file with four sections: `hardware` and `model`",
        "are required, `parallel` and `training` take their defaults. Unknown keys are errors;",
        "catalog names are case-insensitive and any catalog entry can be an inline table of its",
        "figures. Units: GB = 1e9 bytes, GiB = 2^30 bytes, GB/s = 1e9 bytes/s; links per",
        "direction (a NIC's Gbit/s / 8: 400GbE = 50 GB/s). Every problem is reported at once,",
        "each naming its field, the value and what is allowed. `workbench plan` needs no",
        "`parallel` block: a given one is only a starting point (see the rules below).",
        "",
        "## hardware",
        "",
        *_table("hardware", tuple(k for k in hw.HARDWARE_FIELDS
                                  if k not in ("inter_node", "host", "storage")), sc.Hardware,
                {k: hd[k] for k in ("gpus_per_node", "nodes")} | {"gpu": dataclasses.MISSING,
                                                                   "intra_node": "by GPU"}),
        "",
        f"- `gpu`: {_catalog_keys('gpu')}; or an {_inline('gpu', GPU)}.",
        f"- `intra_node`, `inter_node.link`: {_catalog_keys('link')}; or an "
        f"{_inline('link', Link)}.",
        "",
        "### hardware.inter_node",
        "",
        *_table("hardware.inter_node", hw.INTER_NODE_FIELDS, sc.InterNode,
                hd["inter_node"]),
        "",
        "### hardware.host",
        "",
        "Left out, the host is the default one; given, it may leave out its CPU.",
        "",
        *_table("hardware.host", hw.HOST_FIELDS, sc.Host,
                {"cpu": f"{hd['host']['cpu']} (no host given); none (a host given)",
                 "memory": f"{hd['host']['memory']} (ddr4-3200 for a DDR4 CPU)",
                 "memory_gb": f"{hd['host']['memory_gb']} (no host given)",
                 "channels": f"the CPU's; {hd['host']['channels']} without a CPU",
                 "sockets": f"{hd['host']['sockets']} (no host given); 1"}),
        "",
        f"- `cpu`: {_catalog_keys('cpu')}; or an {_inline('cpu', CPU)}.",
        f"- `memory`: {_catalog_keys('memory')}; or an {_inline('memory', HostMemory)}.",
        "",
        "### hardware.storage",
        "",
        *_table("hardware.storage", hw.STORAGE_FIELDS, sc.Storage, hd["storage"]),
        "",
        f"- `drive`: {_catalog_keys('drive')}; or an {_inline('drive', Drive)}.",
        "",
        "## model",
        "",
        f"`preset`: {_catalog_keys('model')} (also `model: NAME` alone). Fields given next to a",
        "preset override it; without a preset `layers`, `hidden`, `heads`, `ffn_hidden` and",
        "`vocab` are required.",
        "",
        *_table("model", tuple(k for k in md.MODEL_FIELDS if k != "preset"), ModelShape,
                {"name": "custom", "head_dim": "0 (hidden / heads)",
                 "kv_heads": "heads"}),
        "",
        "### model.moe",
        "",
        *_table("model.moe", md.MOE_FIELDS, MoE,
                {"top_k": md.MOE_TOP_K_DEFAULT, "expert_ffn_hidden": "ffn_hidden"}),
        "",
        "## parallel",
        "",
        *_table("parallel", PARALLEL_FIELDS, sc.Parallel, {}),
        "",
        "## training",
        "",
        *_table("training", tuple(f.name for f in dataclasses.fields(sc.Training)), sc.Training,
                {}),
        "",
        "### training.lora",
        "",
        *_table("training.lora", tuple(f.name for f in dataclasses.fields(sc.Lora)), sc.Lora,
                {"targets": "all-linear", "trainable": "[]"}),
        "",
        "### training.state_dtypes",
        "",
        *_table("training.state_dtypes", tuple(f.name for f in dataclasses.fields(
            sc.StateDtypes)), sc.StateDtypes, {}),
        "",
        "## Rules across fields",
        "",
        "A *layout* rule judges the parallel layout and the options searched with it; "
        "`workbench plan`",
        "reports it for the given layout instead of refusing the scenario.",
        "",
        "| rule | layout | what it requires |",
        "|---|---|---|",
        *[f"| `{r.name}` | {'yes' if r.layout else 'no'} | {r.text} |" for r in RULES],
        "",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    print(scenario_reference(), end="")

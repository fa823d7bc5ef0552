"""Parse and validate a scenario document (contract 1: docs/scenario.md).

Every problem is collected, each naming the field path, the value and what is allowed; the
caller gets one :class:`~workbench.errors.ScenarioError` carrying all of them. Unknown keys are
errors. Catalog names are case-insensitive and any catalog entry may be an inline table.
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

from workbench.catalog import CATALOGS
from workbench.engines import ENGINE_NAMES, ENGINES, FP8_RECIPES
from workbench.catalog.types import CPU, GPU, Drive, HostMemory, Link, ModelShape, MoE
from workbench.errors import Problem, ScenarioError, shown
from workbench.scenario.rules import check_rules
from workbench.scenario.types import (
    ATTENTION_KERNELS, LORA_PROJECTIONS, LORA_QUANT, LORA_TARGET_GROUPS, LORA_TRAINABLE, METHODS,
    MLP_KINDS, NORM_KINDS, OFFLOAD, OPTIMIZERS, PRECISIONS, RECOMPUTE, SCHEDULES, ZERO_STAGES,
    Hardware, Host, InterNode, Lora, Parallel, Scenario, Storage, Training,
)

_MISSING = object()
_ASCII_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", re.ASCII)

# Defaults for the optional hardware parts, so a scenario may name only GPUs and counts.
HARDWARE_DEFAULTS = {
    "gpus_per_node": 8,
    "nodes": 1,
    "inter_node": {"link": "400gbe-rdma", "nics_per_node": 8},
    "host": {"cpu": "epyc-9654", "memory": "ddr5-4800", "memory_gb": 1536, "channels": 12,
             "sockets": 2},
    "storage": {"drive": "pcie5-nvme", "drives": 1},
}

# The keys each hardware table accepts.
_HARDWARE_FIELDS = ("gpu", "gpus_per_node", "nodes", "intra_node", "inter_node", "host", "storage")
_INTER_NODE_FIELDS = ("link", "nics_per_node")
_HOST_FIELDS = ("cpu", "memory", "memory_gb", "channels", "sockets")
_STORAGE_FIELDS = ("drive", "drives")
# Megatron-Core's router top-k default (megatron-core 0.16.1, transformer/transformer_config.py:
# moe_router_topk = 2), used when an MoE table leaves top_k out.
MOE_TOP_K_DEFAULT = 2

# ``hardware.gpu: "calibration:FILE"`` uses a measured machine profile as the accelerator.
CALIBRATION_PREFIX = "calibration:"


def default_intra_node(gpu) -> str:
    """The GPU-to-GPU link a GPU comes with when the scenario names none: the NVLink generation
    of SXM boards (A100: NVLink 3, H100/H200: NVLink 4, B200: NVLink 5), else its PCIe slot."""
    if gpu is not None and gpu.form_factor == "sxm":
        return {"ampere": "nvlink3", "blackwell": "nvlink5"}.get(gpu.arch, "nvlink4")
    gen = gpu.pcie_gen if gpu is not None else 5
    return "pcie-gen4" if gen <= 4 else "pcie-gen5"


# Inline forms: required fields and optional ones (with types) per catalog kind.
_INLINE = {
    "gpu": (GPU, ("memory_gb", "hbm_gb_per_s", "bf16_tflops", "power_w")),
    "link": (Link, ("gb_per_s", "latency_us")),
    "cpu": (CPU, ("cores", "pcie_lanes", "memory_channels")),
    "memory": (HostMemory, ("mt_per_s",)),
    "drive": (Drive, ("capacity_tb", "read_gb_per_s", "write_gb_per_s")),
}
# Fields the inline form may omit, with the value used instead.
_INLINE_DEFAULTS = {
    "gpu": {"fp8_tflops": 0.0},          # 0: no FP8 tensor cores (fp8 precision is refused)
    "cpu": {"threads": None, "base_ghz": 0.0, "pcie_gen": 5, "max_memory_gb": 0.0,
            "memory_type": "ddr5", "tdp_w": 0.0, "socket": "inline"},
    "memory": {"kind": "ddr5"},
    "drive": {"pcie_gen": 5},
}


class _Checker:
    """Collects problems while reading one document."""

    def __init__(self, calibration_names_only: bool = False) -> None:
        self.problems: list[Problem] = []
        self.assumptions: list[str] = []    # defaults worth saying, for the estimate
        self.calibration_names_only = calibration_names_only

    def add(self, path: str, value: Any, message: str) -> None:
        self.problems.append(Problem(path, value, message))

    # -- containers ------------------------------------------------------------------------
    def table(self, value: Any, path: str, allowed: tuple[str, ...]) -> dict:
        """A mapping whose keys must all be in ``allowed``; returns {} after reporting when not."""
        if value is _MISSING or value is None:
            return {}
        if not isinstance(value, dict):
            self.add(path, value, "must be a table (mapping) of fields")
            return {}
        for key in value:
            if key not in allowed:
                self.add(f"{path}.{key}" if path else str(key), value[key],
                         f"unknown key; allowed keys: {', '.join(allowed)}")
        return value

    # -- scalars ---------------------------------------------------------------------------
    def integer(self, d: dict, key: str, path: str, default: Any = _MISSING, lo: int = 1,
                hi: int | None = None) -> int | None:
        value = d.get(key, default)
        where = f"{path}.{key}"
        if value is _MISSING:
            self.add(where, None, "is required")
            return None
        if value is None and default is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                isinstance(value, float) and (not math.isfinite(value) or value != int(value))):
            self.add(where, value, "must be a whole number")
            return None
        value = int(value)
        if value < lo or (hi is not None and value > hi):
            rng = f"between {lo} and {hi}" if hi is not None else f">= {lo}"
            self.add(where, value, f"must be {rng}")
            return None
        return value

    def number(self, d: dict, key: str, path: str, default: Any = _MISSING, lo: float = 0.0,
               positive: bool = True) -> float | None:
        value = d.get(key, default)
        where = f"{path}.{key}"
        if value is _MISSING:
            self.add(where, None, "is required")
            return None
        # YAML 1.1 reads "1e12" (no dot) as text: such text is a number, written in ASCII
        # digits only ("８０" and "inf" are not)
        if isinstance(value, str) and _ASCII_NUMBER.fullmatch(value.strip()):
            value = float(value)
        try:
            finite = not isinstance(value, bool) and isinstance(value, (int, float)) and \
                math.isfinite(value)
        except OverflowError:          # an integer too large for a float
            finite = False
        if not finite:
            self.add(where, value, "must be a finite number")
            return None
        if value < lo or (positive and value <= 0):
            self.add(where, value, f"must be {'> 0' if positive else f'>= {lo}'}")
            return None
        return float(value)

    def boolean(self, d: dict, key: str, path: str, default: bool) -> bool | None:
        value = d.get(key, default)
        if not isinstance(value, bool):
            self.add(f"{path}.{key}", value, "must be true or false")
            return None
        return value

    def choice(self, d: dict, key: str, path: str, allowed: tuple, default: Any) -> Any:
        value = d.get(key, default)
        norm = value.strip().lower() if isinstance(value, str) else value
        # ``True == 1`` and ``3.0 == 3`` in Python: a choice among numbers takes integers only
        wrong_type = (isinstance(norm, (bool, float))
                      and not any(isinstance(a, type(norm)) for a in allowed))
        if wrong_type or norm not in allowed:
            self.add(f"{path}.{key}", value, f"must be one of {', '.join(map(str, allowed))}")
            return None
        return norm

    def catalog(self, kind: str, value: Any, path: str) -> tuple[Any, Any]:
        """Resolve a catalog key or an inline table; returns (record, document form)."""
        table = CATALOGS[kind]
        if kind == "gpu" and isinstance(value, str) and value.startswith(CALIBRATION_PREFIX):
            return self._calibration(value, path)
        if isinstance(value, str):
            key = value.strip().lower()
            if key in table:
                return table[key], key
            self.add(path, value, f"unknown {kind}; allowed: {', '.join(sorted(table))}, "
                                  f"or an inline table")
            return None, value
        if isinstance(value, dict):
            return self._inline(kind, value, path)
        self.add(path, value, f"must be a {kind} catalog key ({', '.join(sorted(table))}) "
                              "or an inline table")
        return None, value

    def _calibration(self, value: str, path: str) -> tuple[Any, Any]:
        """``calibration:NAME``: a machine profile written by ``workbench calibrate``, found in
        the calibration folders only (``calibrate/locate.py``) and checked field by field
        (``calibrate/record.py``)."""
        from workbench.calibrate.locate import NotAllowed, locate
        from workbench.calibrate.profile import load_profile, profile_gpu

        spec = value[len(CALIBRATION_PREFIX):]
        try:
            file = locate(spec, names_only=self.calibration_names_only)
            return profile_gpu(load_profile(file), source=f"calibration file {file}"), value
        except NotAllowed as exc:
            self.add(path, value, str(exc))
        except ScenarioError as exc:      # not a regular file, too large, malformed text/record
            p = exc.problems[0]
            field = "" if p.path.startswith(("calibration file", "scenario")) else \
                f"its {p.path} "
            got = "" if p.value is None else f" (got {shown(p.value, 40)})"
            self.add(path, value, f"calibration {shown(spec.strip(), 60)}: {field}{p.message}{got}")
        return None, value

    def _inline(self, kind: str, value: dict, path: str) -> tuple[Any, Any]:
        cls, required = _INLINE[kind]
        # a measured profile comes from a calibration file, never from an inline table
        fields = {f.name: f for f in dataclasses.fields(cls) if f.name != "profile"}
        self.table(value, path, tuple(fields))
        kwargs: dict[str, Any] = {"name": str(value.get("name", f"inline {kind}")), "source": str(
            value.get("source", "inline (user-supplied figures)"))}
        ok = True
        for name, f in fields.items():
            if name in ("name", "source"):
                continue
            default = _INLINE_DEFAULTS.get(kind, {}).get(name, f.default)
            if name in required:
                default = _MISSING
            elif default is dataclasses.MISSING:
                default = _MISSING
            if f.type in ("bool",) or isinstance(f.default, bool):
                got = self.boolean(value, name, path, default if default is not _MISSING else True)
            elif f.type in ("str",):
                got = value.get(name, default)
                if not isinstance(got, str):
                    self.add(f"{path}.{name}", got, "must be text")
                    got = None
            elif f.type in ("int",):
                got = self.integer(value, name, path, default, lo=0)
            else:
                got = self.number(value, name, path, default,
                                  positive=name in required and name != "fp8_tflops")
            if got is None and default is not None:
                ok = False
            kwargs[name] = got
        if kind == "cpu" and kwargs.get("threads") is None and kwargs.get("cores"):
            kwargs["threads"] = kwargs["cores"]
        if not ok:
            return None, value
        record = cls(**kwargs)
        return record, dict(value)


# ------------------------------------------------------------------------------------------
def parse_scenario(doc: Any, *, layout_required: bool = True,
                   calibration_names_only: bool = False) -> Scenario:
    """Validate a scenario document (a dict from YAML/JSON) and return the resolved Scenario.

    Raises ScenarioError listing every problem found. With ``layout_required=False`` (what the
    planner reads) the ``parallel`` block is optional and only a starting point: its problems
    and those of the layout rules (``scenario.rules``) are kept in ``Scenario.layout_problems``
    instead of raised, and an unreadable block leaves the default layout. With
    ``calibration_names_only`` (the dashboard) a ``calibration:`` GPU must name a profile of the
    calibration folders, not a path.
    """
    c = _Checker(calibration_names_only)
    top = c.table(doc, "", ("hardware", "model", "parallel", "training"))
    if not isinstance(doc, dict):
        raise ScenarioError(c.problems or [Problem("scenario", doc, "must be a table")])
    for section in ("hardware", "model"):
        if top.get(section) is None:     # absent, or given as null
            c.add(section, None, "is required")
    hardware, hw_doc = _hardware(c, top.get("hardware", _MISSING))
    model, model_doc = _model(c, top.get("model", _MISSING))
    lc = c if layout_required else _Checker()
    parallel, par_doc = _parallel(lc, top.get("parallel", {}))
    if parallel is None and not layout_required:    # unreadable: kept as given, for reports
        parallel = Parallel()
    training, train_doc = _training(c, top.get("training", {}))
    if c.problems:
        raise ScenarioError(c.problems)
    scenario = Scenario(hardware, model, parallel, training,
                        document={"hardware": hw_doc, "model": model_doc,
                                  "parallel": par_doc, "training": train_doc},
                        assumptions=tuple(c.assumptions))
    c.problems += check_rules(scenario, layout=False)
    lc.problems += check_rules(scenario, layout=True)
    if c.problems:
        raise ScenarioError(c.problems)
    if not layout_required:
        scenario = dataclasses.replace(scenario, layout_problems=tuple(lc.problems),
                                       layout_given="parallel" in top)
    return scenario


def _hardware(c: _Checker, raw: Any) -> tuple[Hardware | None, dict]:
    p = "hardware"
    d = c.table(raw, p, _HARDWARE_FIELDS)
    if raw is not _MISSING and "gpu" not in d and isinstance(raw, dict):
        c.add("hardware.gpu", None, "is required (a GPU catalog key or an inline table)")
    gpu, gpu_doc = c.catalog("gpu", d.get("gpu"), "hardware.gpu") if "gpu" in d else (None, None)
    per_node = c.integer(d, "gpus_per_node", p, HARDWARE_DEFAULTS["gpus_per_node"], hi=1024)
    nodes = c.integer(d, "nodes", p, HARDWARE_DEFAULTS["nodes"], hi=1_000_000)
    intra, intra_doc = c.catalog("link", d.get("intra_node", default_intra_node(gpu)),
                                 "hardware.intra_node")

    inter_raw = d.get("inter_node", HARDWARE_DEFAULTS["inter_node"])
    if isinstance(inter_raw, str):  # shorthand: just the link
        inter_raw = {"link": inter_raw}
    di = c.table(inter_raw, "hardware.inter_node", _INTER_NODE_FIELDS)
    inter_link, inter_link_doc = c.catalog(
        "link", di.get("link", HARDWARE_DEFAULTS["inter_node"]["link"]), "hardware.inter_node.link")
    nics = c.integer(di, "nics_per_node", "hardware.inter_node",
                     HARDWARE_DEFAULTS["inter_node"]["nics_per_node"], lo=0, hi=64)

    hd = c.table(d.get("host", {}), "hardware.host", _HOST_FIELDS)
    hdef = HARDWARE_DEFAULTS["host"]
    given = "host" in d
    # A host that is given may leave out its CPU (users often know the DDR, not the CPU model):
    # another CPU's figures would mislead, so the checks that need one say "not checked".
    cpu, cpu_doc = None, None
    if not given:
        cpu, cpu_doc = c.catalog("cpu", hdef["cpu"], "hardware.host.cpu")
    elif hd.get("cpu") is not None:
        cpu, cpu_doc = c.catalog("cpu", hd["cpu"], "hardware.host.cpu")
    default_mem = "ddr4-3200" if (cpu is not None and cpu.memory_type == "ddr4") else hdef["memory"]
    mem, mem_doc = c.catalog("memory", hd.get("memory", default_mem), "hardware.host.memory")
    if given and "memory_gb" not in hd:
        # no default is sensible: installed DDR varies 16x between machines of one CPU
        c.add("hardware.host.memory_gb", None,
              "is required when hardware.host is given (the installed DDR, GB); leave out "
              f"hardware.host for the default host ({hdef['sockets']} x {hdef['cpu']}, "
              f"{hdef['memory_gb']:g} GB {hdef['memory'].upper()})")
        mem_gb = None
    else:
        mem_gb = c.number(hd, "memory_gb", "hardware.host", hdef["memory_gb"])
    sockets = c.integer(hd, "sockets", "hardware.host", 1 if given else hdef["sockets"], hi=8)
    # a given CPU has every channel populated; without one, the default host's count
    default_channels = cpu.memory_channels if given and cpu is not None else hdef["channels"]
    channels = c.integer(hd, "channels", "hardware.host", default_channels, hi=24)
    if given and hd.get("cpu") is None:
        said = ["hardware.host.cpu not given: the PCIe-lane and supported-memory checks are "
                "not made and run.power_w counts no CPU"]
        if "channels" not in hd and mem is not None and channels and sockets:
            said.append(f"host DDR bandwidth (CPU offload) assumes {channels} channels x "
                        f"{sockets} socket(s) of {mem.name} = "
                        f"{mem.gb_per_s_per_channel * channels * sockets:,.1f} GB/s (set "
                        "hardware.host.channels)")
        c.assumptions.append("; ".join(said))
    if cpu and channels and channels > cpu.memory_channels:
        c.add("hardware.host.channels", channels,
              f"{cpu.name} has {cpu.memory_channels} memory channels per socket")
    if cpu and mem and mem.kind != cpu.memory_type:
        c.add("hardware.host.memory", mem_doc,
              f"{cpu.name} takes {cpu.memory_type.upper()}, not {mem.kind.upper()}")

    sd = c.table(d.get("storage", HARDWARE_DEFAULTS["storage"]), "hardware.storage",
                 _STORAGE_FIELDS)
    drive, drive_doc = c.catalog("drive", sd.get("drive", HARDWARE_DEFAULTS["storage"]["drive"]),
                                 "hardware.storage.drive")
    drives = c.integer(sd, "drives", "hardware.storage", 1, lo=0, hi=64)

    doc = {"gpu": gpu_doc, "gpus_per_node": per_node, "nodes": nodes, "intra_node": intra_doc,
           "inter_node": {"link": inter_link_doc, "nics_per_node": nics},
           "host": {"cpu": cpu_doc, "memory": mem_doc, "memory_gb": mem_gb,
                    "channels": channels, "sockets": sockets},
           "storage": {"drive": drive_doc, "drives": drives}}
    parts = (gpu, per_node, nodes, intra, inter_link, nics, mem, mem_gb, channels, sockets,
             drive, drives)
    if any(x is None for x in parts):
        return None, doc
    hw = Hardware(gpu=gpu, gpus_per_node=per_node, nodes=nodes, intra_node=intra,
                  inter_node=InterNode(inter_link, nics),
                  host=Host(cpu, mem, mem_gb, channels, sockets), storage=Storage(drive, drives))
    return hw, doc


_MLA_FIELDS = ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
               "v_head_dim")
_MODEL_FIELDS = ("preset", "name", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab",
                 "mlp", "tied_embeddings", "moe", "head_dim", "norm", "bias", "dropout",
                 *_MLA_FIELDS)
_MOE_FIELDS = ("experts", "top_k", "expert_ffn_hidden", "shared_experts", "dense_layers",
               "capacity_factor")


def _model(c: _Checker, raw: Any) -> tuple[ModelShape | None, dict]:
    p = "model"
    if isinstance(raw, str):  # shorthand: just the preset
        raw = {"preset": raw}
    d = c.table(raw, p, _MODEL_FIELDS)
    base = None
    doc: dict[str, Any] = {}
    if "preset" in d:
        key = str(d["preset"]).strip().lower()
        base = CATALOGS["model"].get(key)
        if base is None:
            c.add("model.preset", d["preset"],
                  f"unknown model preset; allowed: {', '.join(sorted(CATALOGS['model']))}")
            return None, dict(d)
        doc["preset"] = key
    elif raw is not _MISSING:
        for need in ("layers", "hidden", "heads", "ffn_hidden", "vocab"):
            if need not in d:
                c.add(f"model.{need}", None, "is required when no model.preset is given")
        if any(k not in d for k in ("layers", "hidden", "heads", "ffn_hidden", "vocab")):
            return None, dict(d)

    def dflt(name: str, fallback: Any) -> Any:
        return getattr(base, name) if base is not None else fallback

    vals: dict[str, Any] = {}
    vals["layers"] = c.integer(d, "layers", p, dflt("layers", _MISSING), hi=100_000)
    vals["hidden"] = c.integer(d, "hidden", p, dflt("hidden", _MISSING), hi=1_000_000)
    vals["heads"] = c.integer(d, "heads", p, dflt("heads", _MISSING), hi=100_000)
    vals["kv_heads"] = c.integer(d, "kv_heads", p, dflt("kv_heads", d.get("heads", 1)), hi=100_000)
    vals["ffn_hidden"] = c.integer(d, "ffn_hidden", p, dflt("ffn_hidden", _MISSING), hi=10_000_000)
    vals["vocab"] = c.integer(d, "vocab", p, dflt("vocab", _MISSING), hi=100_000_000)
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
        md = c.table(d.get("moe", {}), "model.moe", _MOE_FIELDS)
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
        name=str(name) + (" (modified)" if base is not None and changed and "name" not in d else ""),
        moe=moe, max_seq_len=base.max_seq_len if base is not None else 0,
        source=base.source if base is not None and not changed else
        (f"{base.source} -- modified by the scenario" if base is not None else "inline"),
        # Structural extras (learned position rows) stay; published counts no longer apply.
        extra={k: v for k, v in base.extra.items()
               if not changed or not k.startswith(("expected", "published"))}
        if base is not None else {},
        **vals)
    doc.update({k: v for k, v in vals.items()
                if k not in _MLA_FIELDS or model.mla or k in d})
    doc["moe"] = moe_doc
    if "name" in d:
        doc["name"] = str(d["name"])
    return model, doc


def _mla(c: _Checker, d: dict, vals: dict, dflt) -> None:
    """Multi-head latent attention keys (non-negative whole numbers; kv_lora_rank > 0 turns MLA
    on and then needs the per-head dims; without it the other keys must stay 0)."""
    p = "model"
    for key in _MLA_FIELDS:
        vals[key] = c.integer(d, key, p, dflt(key, 0), lo=0, hi=1_000_000)
    kv = vals["kv_lora_rank"]
    if kv is None:
        return
    for key in _MLA_FIELDS:
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


_PARALLEL_FIELDS = ("dp", "zero", "shard_group", "tp", "sequence_parallel", "pp", "pp_schedule",
                    "virtual_stages", "cp", "ep", "reshard_after_forward", "async_tp",
                    "expert_tp")


def _parallel(c: _Checker, raw: Any) -> tuple[Parallel | None, dict]:
    p = "parallel"
    d = c.table(raw, p, _PARALLEL_FIELDS)
    dfl = Parallel()
    vals = {
        "dp": c.integer(d, "dp", p, dfl.dp, hi=10_000_000),
        "zero": c.choice(d, "zero", p, ZERO_STAGES, dfl.zero),
        "tp": c.integer(d, "tp", p, dfl.tp, hi=1024),
        "sequence_parallel": c.boolean(d, "sequence_parallel", p, dfl.sequence_parallel),
        "pp": c.integer(d, "pp", p, dfl.pp, hi=1024),
        "pp_schedule": c.choice(d, "pp_schedule", p, SCHEDULES, dfl.pp_schedule),
        "virtual_stages": c.integer(d, "virtual_stages", p, dfl.virtual_stages, hi=1024),
        "cp": c.integer(d, "cp", p, dfl.cp, hi=1024),
        "ep": c.integer(d, "ep", p, dfl.ep, hi=100_000),
        "async_tp": c.boolean(d, "async_tp", p, dfl.async_tp),
    }
    raf = d.get("reshard_after_forward")
    if raf is not None and not isinstance(raf, bool):
        c.add("parallel.reshard_after_forward", raf,
              "must be true, false, or null (null: true unless pp > 1, as torchtitan)")
        raf = None
    sg = c.integer(d, "shard_group", p, None, hi=10_000_000)
    etp = c.integer(d, "expert_tp", p, None, hi=1024)
    if any(v is None for v in vals.values()) or any(
            k in d and d[k] is not None and v is None
            for k, v in (("shard_group", sg), ("expert_tp", etp))):
        return None, dict(d)
    par = Parallel(shard_group=sg, reshard_after_forward=raf, expert_tp=etp, **vals)
    return par, dataclasses.asdict(par)


def _training(c: _Checker, raw: Any) -> tuple[Training | None, dict]:
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
        "tokens": c.number(d, "tokens", p, dfl.tokens),
        "engine": c.choice(d, "engine", p, ENGINE_NAMES, dfl.engine),
        "compile": c.boolean(d, "compile", p, dfl.compile),
        "recompute_every": c.integer(d, "recompute_every", p, dfl.recompute_every,
                                     hi=1_000_000),
        "method": c.choice(d, "method", p, METHODS, dfl.method),
        "optimizer_in_backward": c.boolean(d, "optimizer_in_backward", p,
                                           dfl.optimizer_in_backward),
        "activation_offload": c.boolean(d, "activation_offload", p, dfl.activation_offload),
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
    for price in ("price_per_gpu_hour", "price_per_kwh"):
        vals[price] = c.number(d, price, p, None, positive=False) if d.get(price) is not None \
            else None
    lora_ok = True
    vals["lora"] = None
    if vals["method"] in ("lora", "qlora"):
        vals["lora"] = _lora(c, d.get("lora"), vals["method"])
        lora_ok = vals["lora"] is not None
    elif d.get("lora") is not None and vals["method"] is not None:
        c.add("training.lora", d.get("lora"), f"applies to method lora or qlora only (method is "
              f"{vals['method']}); remove it or set training.method")
        lora_ok = False
    optional = ("price_per_gpu_hour", "price_per_kwh", "fp8_recipe", "lora")
    if not lora_ok or any(v is None for k, v in vals.items() if k not in optional) or any(
            d.get(k) is not None and vals[k] is None for k in optional[:3]):
        return None, dict(d)
    tr = Training(**vals)
    doc = dataclasses.asdict(tr)
    if tr.lora is not None:      # lists, as a document has them (YAML writes no tuples)
        doc["lora"] = {k: list(v) if isinstance(v, tuple) else v for k, v in doc["lora"].items()
                       # quant and double_quant are QLoRA's: a LoRA document without them
                       # reads back (the validator refuses them with method lora)
                       if tr.method == "qlora" or k not in ("quant", "double_quant")}
    return tr, doc


def _names(c: _Checker, value: Any, path: str, allowed: tuple[str, ...],
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


def _lora(c: _Checker, raw: Any, method: str) -> Lora | None:
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
                double_quant=double_quant, trainable=trainable)

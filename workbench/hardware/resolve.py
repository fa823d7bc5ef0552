"""The hardware a scenario names, resolved in one place: catalog keys, inline tables and
``calibration:NAME`` (a machine profile that ``workbench calibrate`` measured, found by
``locate`` and checked by ``record``) become the records of ``hardware.types``.

The scenario's validator hands its ``hardware`` section here (``read_hardware``) and never
learns where a GPU's figures came from; the dashboard's panels and the reference read the
defaults and inline forms below.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from workbench.catalog import CATALOGS
from workbench.catalog.types import CPU, GPU, Drive, HostMemory, Link
from workbench.documents.fields import MISSING, Fields
from workbench.errors import ScenarioError, shown
from workbench.hardware.locate import NotAllowed, locate
from workbench.hardware.types import Hardware, Host, InterNode, Storage

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
HARDWARE_FIELDS = ("gpu", "gpus_per_node", "nodes", "intra_node", "inter_node", "host", "storage",
                   "gpu_power_limit_w", "owned")
INTER_NODE_FIELDS = ("link", "nics_per_node")
HOST_FIELDS = ("cpu", "memory", "memory_gb", "channels", "sockets")
STORAGE_FIELDS = ("drive", "drives")
# ``hardware.gpu: "calibration:FILE"`` uses a measured machine profile as the accelerator.
CALIBRATION_PREFIX = "calibration:"


def default_intra_node(gpu) -> str:
    """The GPU-to-GPU link a GPU comes with when the scenario names none: the NVLink generation
    of SXM boards (A100: NVLink 3, H100/H200: NVLink 4, B200: NVLink 5; MI300X's OAM modules:
    Infinity Fabric), else its PCIe slot."""
    if gpu is not None and gpu.form_factor == "sxm":
        return {"ampere": "nvlink3", "blackwell": "nvlink5",
                "cdna3": "infinity-fabric"}.get(gpu.arch, "nvlink4")
    gen = gpu.pcie_gen if gpu is not None else 5
    return "pcie-gen4" if gen <= 4 else "pcie-gen5"


# Inline forms: required fields and optional ones (with types) per catalog kind.
INLINE = {
    "gpu": (GPU, ("memory_gb", "hbm_gb_per_s", "bf16_tflops", "power_w")),
    "link": (Link, ("gb_per_s", "latency_us")),
    "cpu": (CPU, ("cores", "pcie_lanes", "memory_channels")),
    "memory": (HostMemory, ("mt_per_s",)),
    "drive": (Drive, ("capacity_tb", "read_gb_per_s", "write_gb_per_s")),
}
# Fields the inline form may omit, with the value used instead.
INLINE_DEFAULTS = {
    # 0: no FP8 / FP4 tensor cores (fp8 / nvfp4 precision is refused)
    "gpu": {"fp8_tflops": 0.0, "fp4_tflops": 0.0},
    "cpu": {"threads": None, "base_ghz": 0.0, "pcie_gen": 5, "max_memory_gb": 0.0,
            "memory_type": "ddr5", "tdp_w": 0.0, "socket": "inline"},
    "memory": {"kind": "ddr5"},
    "drive": {"pcie_gen": 5},
}

def read_hardware(f: Fields, raw: Any, *, names_only: bool = False) -> tuple[Hardware | None, dict]:
    """Resolve a scenario's ``hardware`` section ``raw`` (``MISSING`` when absent), recording
    its problems in ``f``: (the record or None, its document form). With ``names_only`` (the
    dashboard) a ``calibration:`` GPU must name a profile of the calibration folders, not a
    path."""
    return _Resolver(f, names_only).read(raw)


class _Resolver:
    """One hardware section's resolution: catalog keys, inline tables, calibration profiles."""

    def __init__(self, f: Fields, names_only: bool) -> None:
        self.f = f
        self.names_only = names_only

    def read(self, raw: Any) -> tuple[Hardware | None, dict]:
        """The ``hardware`` section ``raw`` resolved: (record, document form), the record None
        after its problems are recorded."""
        c = self.f
        p = "hardware"
        d = c.table(raw, p, HARDWARE_FIELDS)
        if raw is not MISSING and "gpu" not in d and isinstance(raw, dict):
            c.add("hardware.gpu", None, "is required (a GPU catalog key or an inline table)")
        gpu, gpu_doc = (self.catalog("gpu", d.get("gpu"), "hardware.gpu") if "gpu" in d
                        else (None, None))
        gpu = self._power_limit(gpu, d)
        per_node = c.integer(d, "gpus_per_node", p, HARDWARE_DEFAULTS["gpus_per_node"], hi=1024)
        nodes = c.integer(d, "nodes", p, HARDWARE_DEFAULTS["nodes"], hi=1_000_000)
        intra, intra_doc = self.catalog("link", d.get("intra_node", default_intra_node(gpu)),
                                        "hardware.intra_node")

        inter_raw = d.get("inter_node", {})
        if isinstance(inter_raw, str):  # shorthand: just the link
            inter_raw = {"link": inter_raw}
        di = c.table(inter_raw, "hardware.inter_node", INTER_NODE_FIELDS)
        inter_link, inter_link_doc = self.catalog(
            "link", di.get("link", HARDWARE_DEFAULTS["inter_node"]["link"]),
            "hardware.inter_node.link")
        # a one-node scenario that names no NICs has none: the inter-node network is ignored
        # when nodes == 1 (design.md contract 1), and a cluster node's eight NICs would
        # otherwise fail a two-GPU workstation's PCIe lanes and add their power to its bill
        nics = c.integer(di, "nics_per_node", "hardware.inter_node",
                         HARDWARE_DEFAULTS["inter_node"]["nics_per_node"] if nodes != 1 else 0,
                         lo=0, hi=64)

        hd = c.table(d.get("host", {}), "hardware.host", HOST_FIELDS)
        hdef = HARDWARE_DEFAULTS["host"]
        given = "host" in d
        # A host that is given may leave out its CPU (users often know the DDR, not the CPU model):
        # another CPU's figures would mislead, so the checks that need one say "not checked".
        cpu, cpu_doc = None, None
        if not given:
            cpu, cpu_doc = self.catalog("cpu", hdef["cpu"], "hardware.host.cpu")
        elif hd.get("cpu") is not None:
            cpu, cpu_doc = self.catalog("cpu", hd["cpu"], "hardware.host.cpu")
        default_mem = ("ddr4-3200" if (cpu is not None and cpu.memory_type == "ddr4")
                       else hdef["memory"])
        mem, mem_doc = self.catalog("memory", hd.get("memory", default_mem), "hardware.host.memory")
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
                     STORAGE_FIELDS)
        drive, drive_doc = self.catalog(
            "drive", sd.get("drive", HARDWARE_DEFAULTS["storage"]["drive"]),
            "hardware.storage.drive")
        drives = c.integer(sd, "drives", "hardware.storage", 1, lo=0, hi=64)
        owned = c.boolean(d, "owned", p, False)

        doc = {"gpu": gpu_doc, "gpus_per_node": per_node, "nodes": nodes, "intra_node": intra_doc,
               **({"gpu_power_limit_w": d["gpu_power_limit_w"]} if "gpu_power_limit_w" in d
                  else {}),
               "inter_node": {"link": inter_link_doc, "nics_per_node": nics},
               "host": {"cpu": cpu_doc, "memory": mem_doc, "memory_gb": mem_gb,
                        "channels": channels, "sockets": sockets},
               "storage": {"drive": drive_doc, "drives": drives},
               **({"owned": True} if owned else {})}
        parts = (gpu, per_node, nodes, intra, inter_link, nics, mem, mem_gb, channels, sockets,
                 drive, drives, owned)
        if any(x is None for x in parts):
            return None, doc
        hw = Hardware(gpu=gpu, gpus_per_node=per_node, nodes=nodes, intra_node=intra,
                      inter_node=InterNode(inter_link, nics),
                      host=Host(cpu, mem, mem_gb, channels, sockets),
                      storage=Storage(drive, drives), gpu_power_limit_w=gpu.power_limit_w,
                      owned=owned)
        return hw, doc

    def _power_limit(self, gpu: GPU | None, d: dict) -> GPU | None:
        """``gpu`` running under ``hardware.gpu_power_limit_w`` (the estimator reads the limit
        off the GPU record: ``estimate/time/sustained.py``). The range against the GPU's own
        ``power_w`` is a rule (``scenario/rules/hardware.py``); a calibrated GPU was measured at
        the limit it ran at, so a limit beside it is refused."""
        if "gpu_power_limit_w" not in d:
            return gpu
        limit = self.f.number(d, "gpu_power_limit_w", "hardware")
        if gpu is None or limit is None:
            return None if limit is None else gpu
        if gpu.profile is not None:
            self.f.add("hardware.gpu_power_limit_w", limit,
                       "is not allowed with a calibration: GPU (its kernels were measured at "
                       "the power limit it ran at)")
            return None
        return dataclasses.replace(gpu, power_limit_w=float(limit))

    def catalog(self, kind: str, value: Any, path: str) -> tuple[Any, Any]:
        """Resolve a catalog key or an inline table; returns (record, document form)."""
        table = CATALOGS[kind]
        if kind == "gpu" and isinstance(value, str) and value.startswith(CALIBRATION_PREFIX):
            return self._calibration(value, path)
        if isinstance(value, str):
            key = value.strip().lower()
            if key in table:
                return table[key], key
            self.f.add(path, value, f"unknown {kind}; allowed: {', '.join(sorted(table))}, "
                                    f"or an inline table")
            return None, value
        if isinstance(value, dict):
            return self._inline(kind, value, path)
        self.f.add(path, value, f"must be a {kind} catalog key ({', '.join(sorted(table))}) "
                                "or an inline table")
        return None, value

    def _calibration(self, value: str, path: str) -> tuple[Any, Any]:
        """``calibration:NAME``: a machine profile written by ``workbench calibrate``, found in
        the calibration folders only (``hardware/locate.py``) and checked field by field
        (``hardware/record.py``)."""
        # read here, not at import: a profile's reading loads the bench's definitions, which
        # a scenario of catalog parts never needs (tests/test_packaging.py holds the verbs to
        # what they use)
        from workbench.hardware.calibration import load_profile, profile_gpu

        spec = value[len(CALIBRATION_PREFIX):]
        try:
            file = locate(spec, names_only=self.names_only)
            return profile_gpu(load_profile(file), source=f"calibration file {file}"), value
        except NotAllowed as exc:
            self.f.add(path, value, str(exc))
        except ScenarioError as exc:      # not a regular file, too large, malformed text/record
            p = exc.problems[0]
            field = "" if p.path.startswith(("calibration file", "scenario")) else \
                f"its {p.path} "
            got = "" if p.value is None else f" (got {shown(p.value, 40)})"
            self.f.add(path, value,
                       f"calibration {shown(spec.strip(), 60)}: {field}{p.message}{got}")
        return None, value

    def _inline(self, kind: str, value: dict, path: str) -> tuple[Any, Any]:
        cls, required = INLINE[kind]
        # a measured profile comes from a calibration file, never from an inline table
        # ... nor a power limit, which is hardware.gpu_power_limit_w (one way to say it)
        fields = {f.name: f for f in dataclasses.fields(cls)
                  if f.name not in ("profile", "power_limit_w")}
        self.f.table(value, path, tuple(fields))
        kwargs: dict[str, Any] = {"name": str(value.get("name", f"inline {kind}")), "source": str(
            value.get("source", "inline (user-supplied figures)"))}
        ok = True
        for name, f in fields.items():
            if name in ("name", "source"):
                continue
            default = INLINE_DEFAULTS.get(kind, {}).get(name, f.default)
            if name in required:
                default = MISSING
            elif default is dataclasses.MISSING:
                default = MISSING
            if f.type in ("bool",) or isinstance(f.default, bool):
                got = self.f.boolean(value, name, path, default if default is not MISSING else True)
            elif f.type in ("str",):
                got = value.get(name, default)
                if not isinstance(got, str):
                    self.f.add(f"{path}.{name}", got, "must be text")
                    got = None
            elif f.type in ("int",):
                got = self.f.integer(value, name, path, default, lo=0)
            else:
                got = self.f.number(value, name, path, default,
                                    positive=name in required
                                    and name not in ("fp8_tflops", "fp4_tflops"))
            if isinstance(got, (int, float)) and not isinstance(got, bool) and got != 0:
                got = self._within_catalog(kind, name, got, f"{path}.{name}")
            if got is None and default is not None:
                ok = False
            kwargs[name] = got
        if kind == "cpu" and kwargs.get("threads") is None and kwargs.get("cores"):
            kwargs["threads"] = kwargs["cores"]
        if not ok:
            return None, value
        record = cls(**kwargs)
        return record, dict(value)

    def _within_catalog(self, kind: str, name: str, value: float, path: str):
        """``value`` when it lies within ``catalog_range(kind, name)``, else None after
        recording why: an inline figure a million times past every catalog part is a typo or a
        unit slip, and the estimator's arithmetic (seconds = FLOPs / rate, a figure times
        another) leaves the float range on its way to such an answer."""
        bounds = catalog_range(kind, name)
        if bounds is None or bounds[0] <= value <= bounds[1]:
            return value
        lo, hi = bounds
        self.f.add(path, value, f"must be between {lo:.3g} and {hi:.3g} (a thousandth of the "
                                f"smallest to a thousand times the largest {name} of the {kind} "
                                "catalog)" + (", or 0" if name in ZERO_MEANS_NONE else ""))
        return None


# Inline figures whose 0 says "the part has none" (no FP8 tensor cores, an on-board link with
# no adapter of its own): 0 stays allowed beside the catalog range.
ZERO_MEANS_NONE = ("fp8_tflops", "fp4_tflops", "fp32_tflops", "tf32_tflops", "pcie_lanes", "power_w",
                   "base_ghz", "max_memory_gb", "tdp_w")
# How far past the catalog an inline figure may lie, each way.
_CATALOG_SPAN = 1000


def catalog_range(kind: str, name: str) -> tuple[float, float] | None:
    """(lowest, highest) an inline ``kind`` record's figure ``name`` may take: a thousandth of
    the smallest non-zero value the catalog's records hold to a thousand times the largest
    (None: the catalog holds no such figure)."""
    values = [getattr(r, name) for r in CATALOGS[kind].values()]
    values = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)
              and v > 0]
    if not values:
        return None
    return min(values) / _CATALOG_SPAN, max(values) * _CATALOG_SPAN


"""A GPU's profile: what ``workbench calibrate`` measured on one CUDA device, in the form the
estimator reads (the questions of ``profile.Profile``; the CPU machine's are
``profile.MachineProfile``).

Pure Python and numpy (no torch). The measurements are made in a spawned child by
``gpu.measure_gpu`` (and the nccl collectives by ``workbench.bench``); ``measure_gpu.py``
assembles them. What the estimator asks, and how this profile answers:
- ``gemm``: the seconds measured for that exact shape (a grid shape, or one of a scenario's
  shapes, ``gemm_points``), else the grid's log-linear interpolation
  (``profile.grid_gemm_seconds``, as a CPU profile's; outside the grid the nearest grid
  shape's seconds times the FLOP ratio). bf16 and fp16 read
  the bf16 table; fp8 the fp8 table (tensorwise ``torch._scaled_mm``) where it was measured,
  else bf16's; fp32 the bf16 table at half the rate (TF32 tensor cores, as the catalog path
  times fp32: the dense TF32 peak is half the BF16 one, within 2.3 %, on every part in
  ``catalog/gpus.py``).
- ``attention``: FLOPs at the achieved rate of the nearest measured SDPA point (log distance
  over sequence, heads, KV heads and head dim): forward at the forward's rate, backward at
  2.5 x the forward's FLOPs over (forward+backward - forward) seconds. FLOPs follow
  ``estimate/model/flops.py`` and the team's H200 kernel sweep (2026-12-04): 2 x batch x heads x
  seq^2 x (head_dim + value_dim) / 2 for a causal forward, the backward 2.5 x that.
- ``stream``: bytes / the measured device-copy bandwidth (bytes read + written).
- ``ops`` and ``wrapper``: 0 — the eager runtime's per-op cost and the wrappers' host work are a
  CPU machine's concepts; a GPU kernel's measured time includes its launch.
- ``overlap``: 1, as on a catalog GPU (communication runs on its own streams).
- ``covers`` / ``collective``: the nccl benchmark's fits for groups inside one node when they
  were measured (``profile.fitted_terms``); else the scenario's links (``estimate/time/collectives.py``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import ClassVar

import numpy as np

from workbench.hardware.profile import (
    FORMAT, check_format, collective_seconds, fitted_terms, grid_gemm_seconds, grid_shapes,
    write_json,
)

# fp32 GEMMs on TF32 tensor cores: half the BF16 dense rate (catalog/gpus.py, every entry:
# A100 156 / 312, H100 and H200 SXM 494.5 / 989.5, B200 1100 / 2250, L40S 183 / 362.05).
TF32_SLOWDOWN = 2.0
# Backward attention FLOPs per forward FLOP (dQ, dK, dV and the recomputed scores: 5 matmuls
# against the forward's 2), the convention of estimate/time/step_time.py and the H200 kernel sweep.
BACKWARD_FLOPS = 2.5


def gemm_flops(m: float, n: float, k: float) -> float:
    """FLOPs of one (m x k) @ (k x n) product (a multiply and an add per MAC)."""
    return 2.0 * m * n * k


def causal_attention_flops(batch: float, seq: float, heads: float, head_dim: float,
                           value_dim: float | None = None) -> float:
    """FLOPs of one causal attention forward: QK^T and AV over half the seq x seq square."""
    value_dim = head_dim if value_dim is None else value_dim
    return 2.0 * batch * heads * seq * seq * (head_dim + value_dim) / 2


def arch_of_capability(major: int, minor: int) -> str:
    """The architecture family ``estimate/time/kernels.py`` keys its kernel efficiencies by, from
    the CUDA compute capability (CUDA C++ Programming Guide, "Compute Capabilities": 8.0/8.6/8.7
    Ampere, 8.9 Ada Lovelace, 9.0 Hopper, 10.x and 12.x Blackwell); "" when unknown."""
    if major == 8:
        return "ada" if minor == 9 else "ampere"
    return {9: "hopper", 10: "blackwell", 12: "blackwell"}.get(int(major), "")


@dataclass(frozen=True)
class GpuProfile:
    """Measurements of one CUDA device and its software stack (see the module docstring)."""

    device: ClassVar[str] = "cuda"
    whole_machine: ClassVar[bool] = False

    date: str                      # ISO date of the measurement
    host: dict                     # cpu, cores, memory_gb, torch, python, hostname
    gpu: dict                      # name, capability [major, minor], sms, memory_bytes, count,
    #                                driver, cuda, torch, cudnn (the device's facts)
    gemm_grid: dict                # {"m": [...], "n": [...], "k": [...]}
    gemm_seconds: dict             # bf16 | fp8 -> seconds, flat over (m, n, k), row-major
    hbm_gb_per_s: float            # device copy: bytes read + written / seconds, GB/s
    attention_points: list = field(default_factory=list)
    #   [{batch, seq, heads, kv_heads, head_dim, value_dim, fwd_s, fwd_bwd_s, backend}]: causal
    #   SDPA in bf16; backend: the one SDPA chose (flash_attention, cudnn_attention, ...)
    gemm_points: list = field(default_factory=list)
    #   [{m, n, k, precision, seconds}]: a scenario's exact GEMM shapes
    grouped_gemm: list = field(default_factory=list)
    #   [{tokens, hidden, expert_ffn, experts, grouped_s, dense_s}]: torch._grouped_mm against
    #   one dense GEMM of the same FLOPs (evidence; the estimator times experts as GEMMs)
    collectives: dict = field(default_factory=dict)   # "nccl" -> kind -> {world: [a, b]}
    backend: str = "nccl"
    source: str = ""               # the command that measured it
    errors: list = field(default_factory=list)        # what could not be measured, one line each
    wall_s: float = 0.0            # seconds the GPU measurements took

    # -- persistence -----------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The file's JSON object (``format``, ``device: cuda`` and every field)."""
        return {"format": FORMAT, "device": self.device, **asdict(self)}

    def save(self, path: str | Path) -> Path:
        """Write the profile as JSON to ``path`` (its folder created if need be)."""
        return write_json(path, self.to_dict())

    @classmethod
    def from_dict(cls, d: dict) -> "GpuProfile":
        """The profile of a file's JSON object (format 2, ``device: cuda``)."""
        check_format(d)
        if d.get("device") != "cuda":
            raise ValueError(f"device {d.get('device')!r} is not a GPU profile")
        d = {k: v for k, v in d.items() if k not in ("format", "device")}
        d["collectives"] = {b: {kind: {int(w): tuple(v) for w, v in worlds.items()}
                                for kind, worlds in kinds.items()}
                            for b, kinds in d.get("collectives", {}).items()}
        return cls(**d)

    def with_ranks(self, ranks: int) -> "GpuProfile":
        """The profile as one of ``ranks`` ranks sees it: each has a GPU of its own."""
        return self

    # -- what the estimator asks -----------------------------------------------------------
    share: ClassVar[float] = 1.0   # ranks never share a GPU's compute

    def gemm(self, m: float, n: float, k: float, precision: str) -> float:
        """Seconds for one (m x k) @ (k x n) product (module docstring)."""
        table, slowdown = self._precision(precision)
        key = _shape_key(m, n, k)
        exact = self._points.get((table, key))
        if exact is not None:
            flops = max(m, 1.0) * max(n, 1.0) * max(k, 1.0)
            return exact * (flops / (key[0] * key[1] * key[2])) * slowdown
        return grid_gemm_seconds(self.gemm_grid, self.gemm_seconds[table], m, n, k) * slowdown

    def peak_flops(self, precision: str) -> float:
        """Best measured FLOP/s of the precision's GEMMs (grid and exact shapes)."""
        table, slowdown = self._precision(precision)
        rates = [gemm_flops(m, n, k) / t for (m, n, k), t in zip(grid_shapes(self.gemm_grid),
                                                                 self.gemm_seconds[table])]
        rates += [gemm_flops(p["m"], p["n"], p["k"]) / p["seconds"] for p in self.gemm_points
                  if p["precision"] == table]
        return max(rates) / slowdown

    def attention(self, flops: float, direction: str, kernel: str = "flash2",
                  shape=None) -> float:
        """Seconds of attention kernels executing ``flops`` in ``direction`` (fwd | bwd) for a
        kernel of ``shape`` (``estimate.model.attention.AttentionKernel``): the nearest
        measured point's achieved rate (module docstring), whatever the scenario's ``kernel``
        (what was measured is the kernel SDPA chose, each point's ``backend``). Without a
        measured point, the best bf16 GEMM rate."""
        point = self.nearest_attention(shape)
        if point is None:
            return flops / self.peak_flops("bf16")
        return flops / attention_rates(point)[0 if direction == "fwd" else 1]

    def nearest_attention(self, shape) -> dict | None:
        """The measured attention point nearest ``shape`` (squared log2 distance over seq,
        heads, kv_heads and head_dim; then total tokens), or the first one without a shape."""
        if not self.attention_points:
            return None
        if shape is None:
            return self.attention_points[0]

        def distance(p: dict) -> tuple[float, float]:
            d = sum((math.log2(max(p[a], 1)) - math.log2(max(getattr(shape, a), 1))) ** 2
                    for a in ("seq", "heads", "kv_heads", "head_dim"))
            tokens = abs(math.log2(max(p["batch"] * p["seq"], 1))
                         - math.log2(max(shape.batch * shape.seq, 1)))
            return d, tokens

        return min(self.attention_points, key=distance)

    def stream(self, nbytes: float) -> float:
        """Seconds to stream ``nbytes`` (read + written) through HBM at the measured rate."""
        return nbytes / (self.hbm_gb_per_s * 1e9)

    def ops(self, forward: float, backward: float = 0, no_grad: float = 0) -> float:
        """0: a GPU kernel's measured time includes its launch (no separate eager cost)."""
        return 0.0

    def wrapper(self, name: str, part: str) -> tuple[float, float]:
        """(0, 0): the wrappers' host work is a CPU machine's concept."""
        return 0.0, 0.0

    def overlap(self, ranks: int) -> float:
        """1: communication overlaps compute as on a catalog GPU."""
        return 1.0

    def covers(self, span) -> object:
        """Where the profile times a group (``estimate.placement.Span``, numbers or arrays): the
        nccl fits were measured and the group lies inside one node."""
        if not self.collectives.get(self.backend):
            return False
        inside = np.asarray(span.nodes) <= 1
        return bool(inside) if inside.ndim == 0 else inside

    def collective(self, kind: str, n, nbytes, back_to_back: bool = False):
        """Seconds for one collective over ``n`` ranks (numbers or arrays) from the nccl fits:
        alpha x ring steps + beta x bus-bandwidth factor x bytes (``profile.fitted_terms``)."""
        _, alpha, steps, beta, factor = fitted_terms(
            self.collectives.get(self.backend, {}), kind, n, f"GPU calibration {self.date}")
        return collective_seconds(alpha, steps, beta, factor, n, nbytes)

    # -- helpers -----------------------------------------------------------------------------
    def _precision(self, precision: str) -> tuple[str, float]:
        """(table, time factor) answering ``precision`` (module docstring)."""
        if precision == "fp8" and "fp8" in self.gemm_seconds:
            return "fp8", 1.0
        return "bf16", TF32_SLOWDOWN if precision == "fp32" else 1.0

    @cached_property
    def _points(self) -> dict:
        """{(table, (m, n, k)): seconds} of every measured shape: the grid's (so a grid shape
        reads its own seconds, not their round trip through the logarithm) and the
        scenario's."""
        shapes = grid_shapes(self.gemm_grid)
        out = {(table, shape): float(t) for table, times in self.gemm_seconds.items()
               for shape, t in zip(shapes, times)}
        out.update({(p["precision"], _shape_key(p["m"], p["n"], p["k"])): float(p["seconds"])
                    for p in self.gemm_points})
        return out


def attention_rates(point: dict) -> tuple[float, float]:
    """(forward, backward) achieved FLOP/s of a measured attention point (module docstring)."""
    flops = causal_attention_flops(point["batch"], point["seq"], point["heads"],
                                   point["head_dim"], point.get("value_dim"))
    backward_s = max(point["fwd_bwd_s"] - point["fwd_s"], 1e-12)
    return flops / point["fwd_s"], BACKWARD_FLOPS * flops / backward_s


def _shape_key(m: float, n: float, k: float) -> tuple[int, int, int]:
    """The integer GEMM shape measured for a question (a fractional row count rounds)."""
    return tuple(max(1, int(round(v))) for v in (m, n, k))


def gpu_record(profile: GpuProfile, source: str = ""):
    """The profile as a scenario's accelerator record (``catalog.types.GPU``): memory = the
    device's total memory (``memory_gb`` chosen so that ``units.hbm_bytes`` gives exactly the
    bytes the device reported), HBM = the measured copy bandwidth; peaks, power, architecture,
    form factor and host interface from the catalog entry the driver's name matches
    (``catalog.gpus.catalog_key_for_device``: datasheet figures, for MFU), else the best
    measured rates, the architecture of the compute capability and 0 W."""
    from workbench.catalog import CATALOGS
    from workbench.catalog.gpus import catalog_key_for_device
    from workbench.catalog.types import GPU
    from workbench.units import GiB, HBM_REPORTED_FRACTION

    facts = profile.gpu
    key = catalog_key_for_device(facts.get("name", ""))
    entry = CATALOGS["gpu"][key] if key is not None else None
    memory_gb = float(facts["memory_bytes"]) / (GiB * HBM_REPORTED_FRACTION)
    where = source or profile.source
    if entry is not None:
        peaks = dict(bf16_tflops=entry.bf16_tflops, fp8_tflops=entry.fp8_tflops,
                     fp32_tflops=entry.fp32_tflops, tf32_tflops=entry.tf32_tflops,
                     power_w=entry.power_w, pcie_gen=entry.pcie_gen, pcie_lanes=entry.pcie_lanes,
                     form_factor=entry.form_factor, arch=entry.arch)
        said = (f"{where}; peaks, power and form factor of catalog entry {key} "
                f"({entry.name}, datasheet)")
    else:
        major, minor = (list(facts.get("capability") or [0, 0]) + [0, 0])[:2]
        fp8 = profile.peak_flops("fp8") / 1e12 if "fp8" in profile.gemm_seconds else 0.0
        peaks = dict(bf16_tflops=profile.peak_flops("bf16") / 1e12, fp8_tflops=fp8,
                     power_w=0.0, form_factor="pcie", arch=arch_of_capability(major, minor))
        said = (f"{where}; no catalog entry matches {facts.get('name')!r}: peaks are the best "
                "measured GEMM rates, power unknown (0 W)")
    return GPU(name=f"{facts.get('name', 'GPU')} (calibrated {profile.date})",
               memory_gb=memory_gb, hbm_gb_per_s=profile.hbm_gb_per_s, source=said,
               profile=profile, **peaks)

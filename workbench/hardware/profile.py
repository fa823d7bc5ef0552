"""A machine profile: what the machine at hand measured, in the form the estimator reads.

Pure Python and numpy (no torch): the estimator loads profiles without importing torch. The
measurements are made by ``measure.py`` (GEMMs, copy, collectives), ``runtime.py`` (the eager
runtime and what DDP/TP/FSDP2 add) and ``sync.py`` (a collective's latency inside a training
loop); the file is JSON (``save`` / ``calibration.load_profile``). What the estimator asks:
- ``gemm``: seconds of an (m x k) @ (k x n) product: log-linear interpolation of the measured
  seconds over the grid (log2 m, log2 n, log2 k), per precision; outside the grid the nearest
  grid shape's seconds times the FLOP ratio (compute-bound).
- ``stream``: bytes / the measured copy bandwidth.
- ``ops``: the eager runtime's cost of recorded forward ops, backward nodes and no-grad ops.
- ``wrapper``: what DDP, TP or FSDP2 add per layer, outside the layers, per optimizer tensor.
- ``collective``: inside a step, the in-loop latency of a group of n, slowed by the per-hop
  ratio when more processes than n share the machine (``hop_latency``); back to back, the
  benchmark's alpha (scaled by the ring's step count to an unmeasured n); plus the benchmark's
  beta x bytes (scaled by nccl-tests' bus-bandwidth factor, ``bench/definitions.py``).
- ``share``: ``ranks`` single-threaded processes on ``cores`` cores compute ``ranks / cores``
  times slower when they outnumber the cores.
- ``attention``: the attention kernels' FLOPs at the best measured fp32 GEMM rate.
- ``overlap``: nothing overlaps once the ranks occupy every core; ``covers``: the profile's
  collective fits time every group (none measured, world size 1: the scenario's links do).

A GPU's profile (``gpu_profile.GpuProfile``, ``device == "cuda"``) answers the same questions
(``Profile``) from its own measurements; ``calibration.load_profile`` and
``calibration.profile_gpu`` read either.
The file's ``format``: 1 = a CPU profile (no ``device`` key), 2 = ``device`` says which.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import ClassVar, Protocol

import numpy as np

from workbench.bench.definitions import busbw_factor

FORMAT = 2                 # what this workbench writes
READABLE_FORMATS = (1, 2)  # what it reads (1: CPU profiles written before GPU profiles existed)

# Ring step counts (latency terms) of the collectives, as the estimator's comm model uses them.
_STEPS = {"all_reduce": lambda n: 2 * (n - 1), "all_gather": lambda n: n - 1,
          "reduce_scatter": lambda n: n - 1, "all_to_all": lambda n: n - 1,
          "broadcast": lambda n: n - 1, "send_recv": lambda n: 1}


class Profile(Protocol):
    """The questions the estimator asks a calibrated profile (``estimate/time/kernels.py``,
    ``estimate/time/collectives.py``): one code path for a CPU machine (``MachineProfile``) and a GPU
    (``gpu_profile.GpuProfile``)."""

    device: str            # "cpu" | "cuda"
    whole_machine: bool    # the profile is the machine and its software: the scenario's engine
    #                        conventions, host parts, power and build checks do not apply
    source: str
    date: str

    def with_ranks(self, ranks: int) -> "Profile": ...
    def gemm(self, m: float, n: float, k: float, precision: str) -> float: ...
    def peak_flops(self, precision: str) -> float: ...
    def attention(self, flops: float, direction: str, kernel: str = "flash2",
                  shape=None) -> float: ...
    def stream(self, nbytes: float) -> float: ...
    def ops(self, forward: float, backward: float = 0, no_grad: float = 0) -> float: ...
    def wrapper(self, name: str, part: str) -> tuple[float, float]: ...
    def overlap(self, ranks: int) -> float: ...
    def covers(self, span) -> object: ...
    def collective(self, kind: str, n, nbytes, back_to_back: bool = False): ...
    def to_dict(self) -> dict: ...
    def save(self, path: str | Path) -> Path: ...


@dataclass(frozen=True)
class MachineProfile:
    """Measurements of one machine and software stack (see the module docstring)."""

    device: ClassVar[str] = "cpu"
    whole_machine: ClassVar[bool] = True

    date: str                          # ISO date of the measurement
    host: dict                         # cpu, cores, memory_gb, torch, python, hostname
    cores: int                         # cores the ranks share
    memory_gb: float                   # host RAM, GB (1e9 bytes): the "device memory" of a rank
    gemm_grid: dict                    # {"m": [...], "n": [...], "k": [...]}
    gemm_seconds: dict                 # precision -> flat list over (m, n, k), row-major
    copy_gb_per_s: float               # one thread: bytes read + written / seconds
    op_forward_s: float                # one eager op with autograd recording (runtime.py)
    op_backward_s: float               # one autograd node of the backward
    op_no_grad_s: float                # one op outside autograd (the optimizer's)
    wrappers: dict                     # ddp | tp | fsdp | fsdp_reshard -> what each adds
    collectives: dict                  # backend -> kind -> {world: [alpha_s, beta_s_per_byte]}
    backend: str = "gloo"
    source: str = ""                   # the command that measured it
    runtime_probe: dict = field(default_factory=dict)   # runtime.py's raw seconds (evidence)
    in_loop_s: dict = field(default_factory=dict)  # world -> [[burst s, latency s], ...]
    ranks: int = field(default=1, compare=False)   # processes sharing ``cores`` (estimate time)

    # -- persistence -----------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The file's JSON object (``format``, ``device`` and every field but ``ranks``)."""
        d = asdict(self)
        d.pop("ranks")
        return {"format": FORMAT, "device": self.device, **d}

    def save(self, path: str | Path) -> Path:
        """Write the profile as JSON to ``path`` (its folder created if need be)."""
        return write_json(path, self.to_dict())

    @classmethod
    def from_dict(cls, d: dict) -> "MachineProfile":
        """The profile of a file's JSON object (format 1, or 2 with ``device: cpu``)."""
        check_format(d)
        d = {k: v for k, v in d.items() if k not in ("format", "device")}
        d["wrappers"] = {w: {k: tuple(v) for k, v in parts.items()}
                         for w, parts in d.get("wrappers", {}).items()}
        d["in_loop_s"] = {int(w): [tuple(p) for p in v] for w, v in d.get("in_loop_s", {}).items()}
        d["collectives"] = {b: {kind: {int(w): tuple(v) for w, v in worlds.items()}
                                for kind, worlds in kinds.items()}
                            for b, kinds in d["collectives"].items()}
        return cls(**d)

    def with_ranks(self, ranks: int) -> "MachineProfile":
        """The profile as seen by one of ``ranks`` processes sharing this machine."""
        return replace(self, ranks=max(1, int(ranks)))

    # -- what the estimator asks -----------------------------------------------------------
    @property
    def share(self) -> float:
        """How many times slower a rank computes because ranks outnumber cores (>= 1)."""
        return max(1.0, self.ranks / self.cores)

    def peak_flops(self, precision: str) -> float:
        """Best measured FLOP/s of one rank's thread over the sweep (for MFU-style figures)."""
        g = self._grid_flops()
        return float(np.max(g / np.asarray(self._table(precision))))

    def gemm(self, m: float, n: float, k: float, precision: str) -> float:
        """Seconds for one (m x k) @ (k x n) product on one rank's thread (sharing included)."""
        return float(grid_gemm_seconds(self.gemm_grid, self._table(precision), m, n, k)
                     * self.share)

    def stream(self, nbytes: float) -> float:
        """Seconds to stream ``nbytes`` (read + written) through memory on one rank."""
        return nbytes / (self.copy_gb_per_s * 1e9) * self.share

    def attention(self, flops: float, direction: str, kernel: str = "flash2",
                  shape=None) -> float:
        """Seconds of attention kernels executing ``flops``: the trials' precision (fp32) at
        the best measured GEMM rate, whatever the direction, kernel or shape."""
        return flops / self.peak_flops("fp32") * self.share

    def overlap(self, ranks: int) -> float:
        """1 when communication can hide behind compute, 0 once ``ranks`` processes occupy
        every core (a CPU rank's collective runs on the cores its compute needs, and a rank
        waiting for a descheduled peer has nothing to overlap with)."""
        return 0.0 if ranks >= self.cores else 1.0

    def covers(self, span) -> bool:
        """Whether the profile times collectives (any group ``span``): it does when the
        benchmark ran; a profile measured at world size 1 leaves them to the scenario's links."""
        return bool(self.collectives.get(self.backend))

    def ops(self, forward: float, backward: float = 0, no_grad: float = 0) -> float:
        """Seconds of eager-runtime cost for ``forward`` recorded ops, ``backward`` autograd
        nodes and ``no_grad`` unrecorded ops."""
        return (forward * self.op_forward_s + backward * self.op_backward_s
                + no_grad * self.op_no_grad_s) * self.share

    def collective(self, kind: str, n, nbytes, back_to_back: bool = False):
        """Seconds for one collective over ``n`` ranks (numbers or numpy arrays): the in-loop
        latency inside a step, or the benchmark's latency when it follows another collective
        ``back_to_back`` (or the profile has no in-loop probe), plus the benchmark's per-byte
        cost."""
        n_arr, alpha, steps, beta, factor = fitted_terms(
            self.collectives.get(self.backend, {}), kind, n, f"calibration {self.date}")
        if self.in_loop_s and not back_to_back:
            # inside a step: the in-loop latency of a group of n (sync.py), slowed as each of
            # its hops is when more processes than the group's share the machine
            alpha = np.vectorize(lambda a: self.in_loop(a) * self.hop_latency(self.ranks)
                                 / self.hop_latency(a))(n_arr)
            steps = 1.0
        return collective_seconds(alpha, steps, beta, factor, n, nbytes)

    def wrapper(self, name: str, part: str) -> tuple[float, float]:
        """What wrapper ``name`` (ddp, tp, fsdp, fsdp_reshard) adds to ``part``: ``layer`` or
        ``rest`` -> (forward, backward) seconds per microbatch; ``tensor`` -> (optimizer
        seconds per parameter tensor, 0)."""
        value = self.wrappers.get(name, {}).get(part, (0.0, 0.0))
        return value[0] * self.share, value[1] * self.share

    def in_loop(self, world: int) -> float:
        """A collective's in-loop latency measured with ``world`` processes: the median over
        the probe's compute bursts (on this kind of machine it does not follow the burst
        length: sync.py's rows), at the nearest measured world size at or above it."""
        worlds = sorted(self.in_loop_s)
        w = next((x for x in worlds if x >= world), worlds[-1])
        return float(np.median([p[1] for p in self.in_loop_s[w]]))

    def hop_latency(self, processes: int) -> float:
        """Seconds per ring hop of an in-step collective while ``processes`` share the
        machine: the probe's all-reduce over all of them made 2(W-1) hops. A waiting rank
        sleeps until its peer's message wakes it; the more processes per core, the longer
        that takes, whatever the group's size."""
        worlds = sorted(self.in_loop_s)
        w = next((x for x in worlds if x >= processes), worlds[-1])
        return self.in_loop(w) / (2 * (w - 1))

    # -- helpers -----------------------------------------------------------------------------
    def _table(self, precision: str) -> list:
        table = self.gemm_seconds.get(precision) or self.gemm_seconds.get("fp32")
        if table is None:
            raise ValueError(f"calibration {self.date} has no {precision} GEMM measurements")
        return table

    def _grid_flops(self) -> np.ndarray:
        g = self.gemm_grid
        m, n, k = np.meshgrid(g["m"], g["n"], g["k"], indexing="ij")
        return (2.0 * m * n * k).ravel()


def grid_shapes(grid: dict) -> list[tuple[int, int, int]]:
    """Every (m, n, k) of ``grid``, row-major (the order of a profile's ``gemm_seconds``)."""
    return [(m, n, k) for m in grid["m"] for n in grid["n"] for k in grid["k"]]


def grid_gemm_seconds(grid: dict, table, m: float, n: float, k: float) -> float:
    """Seconds of an (m x k) @ (k x n) product from ``table`` (seconds over ``grid``'s
    (m, n, k), row-major): log-linear interpolation of the seconds over (log2 m, log2 n,
    log2 k); outside the grid the nearest grid shape's seconds times the FLOP ratio."""
    axes = [np.log2(np.asarray(grid[a], dtype=float)) for a in ("m", "n", "k")]
    point = [math.log2(max(v, 1.0)) for v in (m, n, k)]
    clamped = [min(max(p, ax[0]), ax[-1]) for p, ax in zip(point, axes)]
    log_table = np.log(np.asarray(table, dtype=float)).reshape([len(a) for a in axes])
    log_t = _interpolate(axes, log_table, clamped)
    scale = 2.0 ** (sum(point) - sum(clamped))        # FLOP ratio outside the grid
    return math.exp(log_t) * scale


def fitted_terms(table: dict, kind: str, n, what: str) -> tuple:
    """(n, alpha, steps, beta, factor) of ``kind`` over ``n`` ranks (numbers or arrays) from
    benchmark fits ``table`` ({kind: {world: (alpha, beta)}}; an unmeasured kind takes
    all-reduce's): the fit of the smallest measured world >= n (else the largest), its latency
    scaled by the ring's step count and its per-byte cost by nccl-tests' bus-bandwidth factor
    (``bench/definitions.py``) from that world to n."""
    fits = table.get(kind) or table.get("all_reduce")
    if not fits:
        raise ValueError(f"{what} has no {kind} measurements")
    worlds = np.array(sorted(fits))
    n_arr = np.maximum(np.asarray(n), 2)
    idx = np.clip(np.searchsorted(worlds, n_arr), 0, len(worlds) - 1)
    w = worlds[idx]
    alpha = np.array([fits[int(x)][0] for x in np.atleast_1d(w)]).reshape(np.shape(w))
    beta = np.array([fits[int(x)][1] for x in np.atleast_1d(w)]).reshape(np.shape(w))
    steps = np.vectorize(lambda a, b: _STEPS[kind](a) / _STEPS[kind](b))(n_arr, w)
    factor = np.vectorize(lambda a, b: busbw_factor(kind, a) / busbw_factor(kind, b))(n_arr, w)
    return n_arr, alpha, steps, beta, factor


def collective_seconds(alpha, steps, beta, factor, n, nbytes):
    """alpha x steps + beta x factor x bytes; 0 for a group of one or no bytes (a float for
    scalar inputs, else an array)."""
    t = alpha * steps + beta * factor * np.asarray(nbytes, dtype=float)
    t = np.where((np.asarray(n) <= 1) | (np.asarray(nbytes) <= 0), 0.0, t)
    return float(t) if np.ndim(t) == 0 else t


def check_format(d: dict) -> None:
    """Raise a ``ScenarioError`` (a ValueError) unless ``d`` is a calibration file this
    workbench reads."""
    from workbench.errors import Problem, ScenarioError

    if d.get("format") not in READABLE_FORMATS:
        raise ScenarioError([Problem("format", d.get("format"), "this workbench reads "
                                     "calibration formats " + " and ".join(
                                         map(str, READABLE_FORMATS)) + " (run `workbench "
                                     "calibrate` again)")])


def write_json(path: str | Path, doc: dict) -> Path:
    """Write ``doc`` as indented JSON to ``path``, creating its folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


def _interpolate(axes: list[np.ndarray], table: np.ndarray, point: list[float]) -> float:
    """Multilinear interpolation of ``table`` (one axis per coordinate) at ``point``."""
    value = table
    for ax, p in zip(axes, point):
        if len(ax) == 1:
            value = value[0]
            continue
        i = int(np.clip(np.searchsorted(ax, p) - 1, 0, len(ax) - 2))
        f = (p - ax[i]) / (ax[i + 1] - ax[i])
        value = value[i] * (1 - f) + value[i + 1] * f
    return float(value)


def fit_alpha_beta(rows: list[tuple[float, float]]) -> tuple[float, float]:
    """(alpha, beta) of time = alpha + beta x bytes minimising the squared *relative* error over
    (bytes, seconds) rows: small messages weigh as much as large ones. Both kept >= 0."""
    s = np.array([r[0] for r in rows], dtype=float)
    t = np.array([r[1] for r in rows], dtype=float)
    a = np.stack([1 / t, s / t], axis=1)
    (alpha, beta), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    if alpha < 0:            # latency below resolution: a pure bandwidth fit
        alpha, beta = 0.0, float(np.sum(s / t) / np.sum((s / t) ** 2))
    if beta < 0:
        alpha, beta = float(np.median(t)), 0.0
    return float(alpha), float(beta)

"""What a trial rank measures, three ways: model-state bytes from the tensors themselves
(``local_bytes``, ``optimizer_bytes``), the activations autograd saves for backward
(saved-tensor hooks: ``StepMeter``), and traffic per parallel dimension and op (the flight
recorder for collectives: ``CommRecorder``; gloo's sends reach only the profiler, and the ring
attention counts its own: ``StepMeter``)."""
from __future__ import annotations

import contextlib
import math
import os
import pickle
import weakref
from collections.abc import Iterator

import torch
import torch.distributed as dist
from torch import nn

from workbench.trial.build import Rank
from workbench.trial.device import seconds_between, stamp
from workbench.trial.ring_attention import SENT as RING_SENT


def local_bytes(t: torch.Tensor) -> int:
    """Bytes of this rank's part of ``t`` (its local shard of a DTensor)."""
    local = t.to_local() if hasattr(t, "to_local") else t
    return local.numel() * local.element_size()


def optimizer_bytes(opt) -> int:
    """Bytes of this rank's optimizer state (ZeRO-1: its shard; several optimizers: all): every
    state tensor but the 0-d step counters, each storage once (bitsandbytes' 8-bit AdamW points
    every tensor's ``qmap1``/``qmap2`` at one shared map), a tensor subclass by its inner
    tensors (torchao's ``OptimState4bit``: codes, scale, qmap)."""
    total = 0
    seen: set[int] = set()
    for part in getattr(opt, "parts", [opt]):      # parallelize.Optimizers: ZeRO-1 under EP
        inner = getattr(part, "optim", part)   # ZeroRedundancyOptimizer keeps the local shard
        for state in inner.state.values():
            for v in state.values():
                if isinstance(v, torch.Tensor) and v.dim() > 0:
                    total += _state_bytes(v, seen)
    return total


def _state_bytes(t: torch.Tensor, seen: set[int]) -> int:
    local = t.to_local() if hasattr(t, "to_local") else t
    if hasattr(local, "__tensor_flatten__") and type(local) is not torch.Tensor:
        names, _ = local.__tensor_flatten__()
        return sum(_state_bytes(getattr(local, n), seen) for n in names)
    ptr = local.untyped_storage().data_ptr()
    if ptr in seen:
        return 0
    seen.add(ptr)
    return local.numel() * local.element_size()


def weight_pointers(params: list[nn.Parameter]) -> set[int]:
    """Storage addresses of this rank's (local) parameters: what saved-tensor counting skips."""
    return {(p.to_local() if hasattr(p, "to_local") else p).data_ptr() for p in params}


class StepMeter:
    """One step's saved activations (``activations``: bytes saved for backward) and point-to-
    point traffic (``p2p``: dim -> {"send_recv": {bytes, count}}), recorded around its forward
    and backward by ``record()``. Each costs time per op, so a trial meters one step."""

    def __init__(self, weights: set[int], activations: bool, p2p: bool) -> None:
        self.weights = weights
        self.count_activations, self.count_p2p = activations, p2p
        self.activations = 0
        self.p2p: dict = {}
        self._alive: dict[int, weakref.ref] = {}

    @contextlib.contextmanager
    def record(self) -> Iterator[None]:
        hooks = (torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
                 if self.count_activations else contextlib.nullcontext())
        # gloo's send/recv never reach the flight recorder: the profiler sees them
        profiler = (torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                           record_shapes=True)
                    if self.count_p2p else contextlib.nullcontext())
        ring_before = dict(RING_SENT)
        with hooks, profiler as prof:
            yield
        if prof is not None:
            self.p2p = p2p_traffic(prof, {k: RING_SENT[k] - ring_before[k] for k in RING_SENT})

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        # Count each storage once while it is alive: a pointer seen again after the tensor that
        # held it died (an earlier microbatch's graph freed by its backward) is new memory.
        local = t.to_local() if hasattr(t, "to_local") else t
        try:
            storage = local.untyped_storage()
            ptr = storage.data_ptr()
        except RuntimeError:      # tensors without real storage (meta, fake)
            return t
        base = getattr(t, "_base", None)
        if ptr in self.weights or isinstance(t, nn.Parameter) or isinstance(base, nn.Parameter):
            return t        # weights, their views and FSDP2's unsharded copies
        ref = self._alive.get(ptr)
        if ref is None or ref() is None:
            self._alive[ptr] = weakref.ref(t)
            self.activations += storage.nbytes()
        return t


def p2p_traffic(prof, ring_sent: dict) -> dict:
    """Bytes and counts of one step's gloo sends, per dimension: what the ring attention sent
    (it counts its own sends) is context-parallel, the rest pipeline-parallel (trial
    activations are fp32: 4 bytes per element)."""
    total = {"bytes": 0, "count": 0}
    for e in prof.events():
        if e.name == "gloo:send":
            n = 1
            for size in (e.input_shapes[0] if e.input_shapes else []):
                n *= size
            total["bytes"] += 4 * n
            total["count"] += 1
    out: dict = {}
    if ring_sent["count"]:
        out["cp"] = {"send_recv": dict(ring_sent)}
    pp = {k: total[k] - ring_sent[k] for k in total}
    if pp["count"]:
        out["pp"] = {"send_recv": pp}
    return out


def group_dims(rank: Rank) -> dict[str, tuple[str, int]]:
    """Process-group name -> (parallel dimension, group size), for classifying recorded
    collectives."""
    mesh = rank.mesh
    groups = [(mesh[d].get_group(), d) for d in ("pp", "dp", "cp", "tp")]
    if rank.scenario.parallel.cp > 1:
        groups.append((mesh["dp_cp"].get_group(), "dp"))
    if rank.ep_group is not None:
        groups.append((rank.ep_group, "ep"))
    if rank.edp_group is not None:
        groups.append((rank.edp_group, "dp"))
    if rank.tied_group is not None:
        groups.append((rank.tied_group, "pp"))
    return {g.group_name: (d, dist.get_world_size(g)) for g, d in groups}


# The flight recorder keeps nothing unless told how many entries to keep: PyTorch >= 2.7 reads
# TORCH_FR_BUFFER_SIZE (FlightRecorder.hpp; the older name still works there, with a deprecation
# warning per rank), earlier versions only TORCH_NCCL_TRACE_BUFFER_SIZE (ProcessGroupNCCL's own
# recorder).
RECORDER_SIZE_ENV = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
RECORDER_ENTRIES = "20000"


def recorder_environment(environ=None, version: str | None = None) -> dict[str, str]:
    """The flight recorder's size under the name this PyTorch (``version``, else the installed
    one) reads: the value already given under either name (the newer first), else
    RECORDER_ENTRIES; the older name only where the newer is not read."""
    environ = os.environ if environ is None else environ
    given = next((environ[k] for k in RECORDER_SIZE_ENV if environ.get(k)), RECORDER_ENTRIES)
    major, minor = (int(x) for x in (version or torch.__version__).split(".")[:2])
    return {"TORCH_FR_BUFFER_SIZE" if (major, minor) >= (2, 7)
            else "TORCH_NCCL_TRACE_BUFFER_SIZE": given}


class CommRecorder:
    """Reads the flight recorder (every collective and point-to-point op this rank issued, with
    its process group, sizes and dtypes) and sums bytes and counts per dimension and op since
    the last call. Wrappers around torch.distributed would miss DDP's and DTensor's traffic."""

    SIZES = {"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4,
             "Bool": 1, "Byte": 1, "Char": 1, "Short": 2}

    def __init__(self, dims: dict[str, tuple[str, int]]) -> None:
        self.dims = dims
        self.seen: set = set()
        self.note: str | None = None      # why traffic could not be read, in one line

    def collect(self) -> dict:
        """dim -> op -> {bytes, count} of the ops recorded since the last call; {} with
        ``note`` set when the flight recorder could not be read."""
        trace = None
        failures = []
        c10d = torch._C._distributed_c10d
        # NCCL keeps its own recorder (FlightRecorder<CUDAEvent>, dumped by _dump_nccl_trace in
        # CUDA builds); gloo's is the generic one (_dump_fr_trace)
        dumps = ("_dump_nccl_trace", "_dump_fr_trace") if dist.get_backend() == "nccl" \
            else ("_dump_fr_trace",)
        for name in dumps:
            try:          # no stack traces: symbolising them costs more than the step
                trace = pickle.loads(getattr(c10d, name)(includeCollectives=True,
                                                         includeStackTraces=False,
                                                         onlyActive=False))
                break
            except Exception as exc:      # not in this build, or the recorder is off
                text = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
                failures.append(f"{name}: {text}")
                continue
        if trace is None:          # report nothing rather than guess, and say why
            self.note = (f"{dist.get_backend()} traffic not measured: the flight recorder "
                         f"could not be read ({'; '.join(failures)})")
            return {}
        out: dict = {}
        for e in trace.get("entries", []):
            key = (e.get("process_group", ("", ""))[0], e.get("collective_seq_id"),
                   e.get("p2p_seq_id"), e.get("record_id"))
            if key in self.seen:
                continue
            self.seen.add(key)
            dim, size = self.dims.get(e.get("process_group", ("", ""))[0], ("other", 1))
            name = e.get("profiling_name", "").split(":")[-1]
            # nccl-tests' sizes: an all-gather counts its output (input x group size: gloo's
            # functional all-gather records one rank's slice as its output), every other op its
            # input
            nbytes = 0
            for sizes, dtype in zip(e.get("input_sizes", []), e.get("input_dtypes", [])):
                nbytes += math.prod(sizes) * self.SIZES.get(dtype, 4)
            if name.startswith("all_gather"):
                nbytes *= size
            slot = out.setdefault(dim, {}).setdefault(name, {"bytes": 0, "count": 0})
            slot["bytes"] += nbytes
            slot["count"] += 1
        return out


class BlockTimer:
    """Time of each transformer block's forward and backward, from stamps (``device.stamp``:
    CUDA events on the stream on a GPU, the host clock on the CPU) that hooks take while
    ``timing()`` is on: the forward between the block's forward pre-hook and hook; the backward
    from the gradient reaching the block's output to the gradient leaving it for the block's
    input (tensor hooks; the autograd engine runs them on the stream of the op that produced
    the tensor). Without pipeline parallelism (one microbatch in flight per block); a block
    whose input or output is a DTensor (TP/SP) is timed forward only (``read`` counts both)."""

    def __init__(self, modules: list[nn.Module], cuda: bool) -> None:
        self.cuda = cuda
        self.on = False
        self.forward: list[tuple] = []
        self.backward: list[tuple] = []
        self._fwd_start: dict[int, object] = {}
        self._bwd_start: dict[int, object] = {}
        self.blocks = [b for m in modules for b in getattr(m, "layers", {}).values()]
        for b in self.blocks:
            b.register_forward_pre_hook(self._pre)
            b.register_forward_hook(self._post)

    @contextlib.contextmanager
    def timing(self) -> Iterator[None]:
        """Stamp the blocks while the body runs (one step)."""
        self.on = True
        try:
            yield
        finally:
            self.on = False

    def _pre(self, module: nn.Module, args: tuple) -> None:
        if not self.on:
            return
        self._fwd_start[id(module)] = stamp(self.cuda)
        x = args[0] if args else None
        if isinstance(x, torch.Tensor) and x.requires_grad and not hasattr(x, "to_local"):
            key = id(module)
            x.register_hook(lambda g: self._bwd_end(key))

    def _post(self, module: nn.Module, args: tuple, out) -> None:
        if not self.on:
            return
        start = self._fwd_start.pop(id(module), None)
        if start is not None:
            self.forward.append((start, stamp(self.cuda)))
        if isinstance(out, torch.Tensor) and out.requires_grad and not hasattr(out, "to_local"):
            key = id(module)
            out.register_hook(lambda g: self._bwd_begin(key))

    def _bwd_begin(self, key: int) -> None:
        self._bwd_start[key] = stamp(self.cuda)

    def _bwd_end(self, key: int) -> None:
        start = self._bwd_start.pop(key, None)
        if start is not None:
            self.backward.append((start, stamp(self.cuda)))

    def read(self) -> dict:
        """Mean seconds per block per microbatch, forward and backward, of the timed step;
        then forget them."""
        out = {"blocks_timed": len(self.forward), "block_backwards_timed": len(self.backward)}
        for name, pairs in (("block_forward_s", self.forward),
                            ("block_backward_s", self.backward)):
            if pairs:
                out[name] = sum(seconds_between(a, b) for a, b in pairs) / len(pairs)
        self.forward, self.backward = [], []
        return out

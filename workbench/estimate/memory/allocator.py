"""What PyTorch's caching allocator holds beyond the tensors alive, and what a step needs at the
limit of the GPU. Rules read from PyTorch 2.11 (pytorch/pytorch@70d99e998b4955e0049d13a98d77ae1b14db1f45,
c10/cuda/CUDACachingAllocator.cpp and torch/distributed/fsdp/_fully_shard/):

- A freed block stays reserved (cached) and is reused only by a later allocation on the stream it
  was allocated on: ``get_free_block`` refuses a block of another stream (``Block::stream``;
  "Once freed, blocks can be re-allocated on the same stream, but not on any other stream").
- FSDP2 allocates the reduce-scatter output inside ``with stream(reduce_scatter_stream)`` and
  makes every sharded ``.grad`` a view of it (``_fsdp_collectives.foreach_reduce``); FSDP1 does
  the same on its post-backward stream. ``zero_grad(set_to_none=True)`` frees them after the
  step, so in the next step's forward and loss the gradient bytes are reserved, cached on that
  stream, while the default stream reaches its peak beside them (``reserved_bytes``).
- When ``cudaMalloc`` fails the allocator frees every cached segment with no live block, on
  every stream (``release_cached_blocks``), and retries before it raises out-of-memory: at the
  limit of a GPU a step needs its live tensors, not what it caches on a roomier one
  (``least_bytes``). What the limit cannot reclaim — free space inside segments that still hold
  a live block (best fit, no merging across segments) — is not modelled: on one H200 it was
  1.1-4.4 GiB (4-6 % of allocated) under FSDP2 and 1.4 % on one stream
  (benchmarks/data/h200-reference/training_probe.jsonl, measured 2026-12-04, after the
  leftovers benchmarks/h200_probe.py names); the memory band carries it.
- ``expandable_segments:True`` (torchtitan's ``run_train.sh`` sets it; torchtitan logs
  memory/max_reserved, torchtitan/components/metrics.py:447-450) maps pages per stream and
  pool: it shrinks that unmodelled slack, not the per-stream caching.

The CUDA context and NCCL's buffers, outside the allocator, are ``memory.device``.
"""
from __future__ import annotations

import numpy as np

from workbench.estimate.memory.peak import PHASES, peak_bytes
from workbench.scenario.types import zero_in


def side_stream_grads(engine, zero) -> np.ndarray:
    """Per row, whether the gradients are made in the backward on a side stream and freed
    after the step (``Engine.grads_in_backward``: FSDP's sharded gradients)."""
    return np.asarray(zero_in(zero, engine.grads_in_backward))


def reserved_bytes(engine, phases: dict, parts: dict, grads, zero) -> np.ndarray:
    """The allocator's peak reserved bytes on a GPU with room to spare: at each moment of the
    step, the bytes alive (``phases``; by category ``parts``) and the gradient bytes cached on
    the reduce-scatter stream where they are not alive then (``side_stream_grads``); the
    largest. The ``generic`` engine carries its allowance in the total instead."""
    if engine.allowance_in_total:
        return peak_bytes(phases)
    side = side_stream_grads(engine, zero)
    out = None
    for p in PHASES:
        cached = np.where(side, grads - parts[p]["grads"], 0.0)
        here = phases[p] + cached
        out = here if out is None else np.maximum(out, here)
    return out


def least_bytes(allocated, reserved, device):
    """What nvidia-smi would show at the limit of the GPU: ``device`` (the roomy figure) less
    the cache the allocator frees before it fails (``reserved`` - ``allocated``)."""
    return device - reserved + allocated

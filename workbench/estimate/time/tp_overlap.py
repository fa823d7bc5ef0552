"""Tensor-parallel communication overlapped with the GEMMs it feeds, as two engines run it.

Under sequence parallelism each layer's pass has four TP collectives, each paired with GEMMs:
the all-gather of the input feeds the first attention GEMM(s) and the MLP's first GEMM; the
reduce-scatter drains the attention output projection and the MLP's last GEMM
(``block_costs.block_costs``). Overlapping a pair means splitting its GEMM into chunks so that one
chunk's transfer runs under another chunk's GEMM. What that costs is the mechanism here:

- the chunks are smaller GEMMs, timed through the kernel model (``kernels.gemm_time``: the
  fixed per-tile work ``GEMM_K0`` and the launch overhead weigh more on a smaller M), so the
  chunked GEMMs take longer than the whole one;
- one chunk's transfer (all-gather) or one chunk's GEMM (reduce-scatter) cannot overlap;
- where the collective runs on SMs, the GEMMs get the rest of them.

``async_tp_exposed`` (torchtitan async TP, PyTorch symmetric memory; pytorch/pytorch
torch/distributed/_symmetric_memory/__init__.py @ torch 2.13, ``_pipelined_all_gather_and_consume``
and ``_fused_matmul_reduce_scatter_impl``): tp chunks per pair (``A.chunk(group_size)``), the
transfers copy-engine ``copy_`` on a backend stream (no SMs taken), and the matmul-reduce-scatter
ends with ``torch.sum`` over the tp partial chunks (a memory-bound kernel: reads tp chunks,
writes one).

``userbuffers_exposed`` (Megatron-LM ``--tp-comm-overlap``: Transformer Engine userbuffers,
NVIDIA/TransformerEngine transformer_engine/pytorch/module/base.py ``initialize_ub``
``get_default_config``): the all-gathers (qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad) run
``ring_exchange`` with tp splits over the copy engines (``use_ce`` True, 1 SM); the forward
reduce-scatters (proj_fprop, fc2_fprop) run ``pipeline`` with 4 splits and 16 communication
SMs, the GEMMs on the remaining SMs (``set_sm_margin``: cuBLAS ``math_sm_count`` = SMs - 16);
the backward reduce-scatters (qkv_dgrad, fc1_dgrad) run ``bulk``: the whole collective beside the
whole weight-gradient GEMM, again on 16 SMs.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from workbench.estimate.time import kernels as eff
from workbench.estimate.arrays import plain
from workbench.catalog.gpu_parts import sm_count

# TE userbuffers' communication SMs for the pipeline and bulk methods (get_default_config
# ``num_sm``: 1 for ring_exchange, else 16) and the pipeline method's splits (``num_splits`` 4).
UB_COMM_SMS = 16
UB_PIPELINE_SPLITS = 4


class Pair(NamedTuple):
    """One TP collective of a pass and the GEMMs it feeds (all-gather) or drains
    (reduce-scatter): ``gemms`` are (m, n, k) shapes, m the gathered token rows."""

    collective: str          # "all_gather" | "reduce_scatter"
    comm: float              # seconds of the collective alone
    gemms: tuple             # ((m, n, k), ...)
    out_bytes: float = 0.0   # bytes of the reduce-scatter's full output (tokens x h x e)


def gemms_time(shapes, gpu, prec: str, chunks: int = 1, rate: float = 1.0) -> float:
    """Seconds of ``shapes`` each split into ``chunks`` GEMMs along M, at ``rate`` of the
    kernel model's throughput (an FP8 recipe's GEMM rate, the SM share left to them)."""
    return sum(chunks * eff.gemm_time(m / chunks, n, k, gpu, prec) for m, n, k in shapes) / rate


def _pipelined(comm: float, chunked: float, whole: float, chunks: int, gather: bool) -> float:
    """Exposed seconds of one pair split into ``chunks``: the chunked GEMMs' extra time over
    the whole GEMM, plus what of the transfer no chunk's GEMM covers. All-gather: the local
    chunk's GEMM runs while the first remote chunk arrives, each later chunk's GEMM after its
    transfer (end = max(comm + one chunk's GEMM, all GEMMs)); reduce-scatter: the first chunk's
    GEMM runs alone, each transfer under the next chunk's GEMM, the last transfer alone
    (end = max(one chunk's GEMM + comm, all GEMMs + one chunk's transfer))."""
    one = chunked / chunks
    if gather:
        end = np.maximum(comm + one, chunked)
    else:
        end = np.maximum(one + comm, chunked + comm / chunks)
    return end - whole


def async_tp_exposed(pairs: list[Pair], t, gpu, prec: str, rate: float):
    """Exposed seconds of one pass's TP pairs under torchtitan async TP (module docstring);
    ``t``, the pairs' seconds and shapes numbers or arrays over shapes."""
    out = 0.0
    for p in pairs:
        whole = gemms_time(p.gemms, gpu, prec, 1, rate)
        if not p.gemms:             # nothing to hide under: the collective as it is
            out += p.comm
            continue
        chunked = gemms_time(p.gemms, gpu, prec, t, rate)
        out += _pipelined(p.comm, chunked, whole, t, p.collective == "all_gather")
        if p.collective == "reduce_scatter":   # torch.sum over the tp partial chunks
            out += eff.memory_time((t + 1) * p.out_bytes / t, gpu, kernels=1)
    return plain(np.asarray(out))


def userbuffers_exposed(pairs: list[Pair], t, gpu, prec: str, rate: float, backward: bool):
    """Exposed seconds of one pass's TP pairs under TE userbuffers (module docstring); ``t``,
    the pairs' seconds and shapes numbers or arrays over shapes."""
    sms = sm_count(gpu)                         # (gpu_parts: the part's SMs)
    share = (sms - UB_COMM_SMS) / sms           # SMs left to the GEMMs
    out = 0.0
    for p in pairs:
        whole = gemms_time(p.gemms, gpu, prec, 1, rate)
        if not p.gemms:
            out += p.comm
        elif p.collective == "all_gather":          # ring_exchange over the copy engines
            out += _pipelined(p.comm, gemms_time(p.gemms, gpu, prec, t, rate), whole, t, True)
        elif not backward:                          # pipeline: 4 splits on SMs - 16
            slow = gemms_time(p.gemms, gpu, prec, UB_PIPELINE_SPLITS, rate * share)
            out += _pipelined(p.comm, slow, whole, UB_PIPELINE_SPLITS, False)
        else:                                       # bulk: beside the whole GEMM, SMs - 16
            slow = whole / share
            out += np.maximum(slow, p.comm) - whole
    return plain(np.asarray(out))

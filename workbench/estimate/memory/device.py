"""GPU memory that nvidia-smi shows on top of PyTorch's caching-allocator *reserved* memory.

device = reserved + device_terms(...).values(), per process and GPU. Each constant has its source
next to it. NCCL source: github.com/NVIDIA/nccl at 5067397c2676d5aed50042fc39e5c8ee96eb0027
(v2.30.7), "nccl@5067397" below.

Modelled NCCL behaviour (NCCL >= 2.22, PyTorch default CUDA_MODULE_LOADING=LAZY,
NCCL_CUMEM_ENABLE default):
* NCCL_RUNTIME_CONNECT=1 (src/init.cc:61): buffers are connected when an algorithm is first used,
  so only Ring (+ Tree across nodes) and NVLS, which training's all-reduce/reduce-scatter/
  all-gather use, are counted.
* Ring: per channel one send and one receive connection. Tree across nodes: one more inter-node
  (NET) pair.
* all-to-all / send-recv (EP, PP) open connections to every peer on every p2p channel; not
  modelled. NCCL issue #1685 (8x H100): +3.28 GB after the first all_to_all_single; 32 ch x 7
  peers x 12 MiB gives 2.82 GB.

Published checks (no published run gives all three of peak allocated, peak reserved and
nvidia-smi):
* github.com/NVIDIA/nccl/issues/1685, 8x H100, one process per GPU: "NV 1.06 GB" excluding
  PyTorch before the first all-to-all (context + one 8-rank intra-node communicator). This
  module: 392 + 544 MiB = 0.98 GB (-8%).
* github.com/vllm-project/vllm/issues/9699 (8x H200, NCCL 2.20/2.21): "nvlsPerRankSize 301989888
  nvlsTotalSize 2415919104", i.e. 2.25 GiB of NVLS buffers per GPU; the old formula
  nChannels*2*(buffSize+memSize)*nHeads (nccl@b6475625 nvls.cc:311). NCCL >= 2.22 uses 128 KiB
  chunks: 256 MiB here. Older NCCL is far above this.
* github.com/vllm-project/vllm/pull/10511 (H100, vLLM "non_torch_memory"): 1.79 GiB at TP=1,
  3.58 GiB at TP=2. This module gives 0.38 / 0.66 GiB: vLLM's figure also counts cuBLAS/cudagraph
  memory allocated outside torch and its second (pynccl) communicator, so it is not a clean check.
* github.com/pytorch/torchtitan/issues/735 (8 GPUs, TP4 x FSDP2): memory_summary and nvidia-smi
  are printed but only their difference between FSDP1 and FSDP2 (10 GB), not the per-process
  offset.
"""
from __future__ import annotations

import functools

import numpy as np

from workbench.estimate.placement import group_span
from workbench.catalog.gpu_parts import family_sm_count

MiB = 1 << 20

# --- CUDA context ---------------------------------------------------------------------------------
# Bare context with lazy loading, measured by cudaMemGetInfo: 555 MiB on RTX PRO 6000 Blackwell (188
# SMs), 107 MiB on RTX 4060 Ti (34 SMs); "the cost scales with SM count"
# (github.com/ggml-org/llama.cpp/pull/23604). Fitted as a line in SM count. This agrees with
# ptrblck, github.com/pytorch/pytorch/issues/109888: "around 400MB if CUDA >= 11.7 is used and lazy
# module loading enabled (default in PyTorch)". LAZY is PyTorch's default since 1.13
# (github.com/pytorch/pytorch/pull/86509: 287,047,680 B lazy vs 666,632,192 B eager) and CUDA's
# since 12.2 (docs.nvidia.com/cuda/cuda-programming-guide/04-special-topics/lazy-loading.html).
CTX_FIT_POINTS = ((34, 107 * MiB), (188, 555 * MiB))

# --- NCCL buffers (nccl@5067397) ------------------------------------------------------------------
# src/init.cc:813 DEFAULT_BUFFSIZE 4 MiB; NCCL_BUFFSIZE in the NCCL env-var docs
NCCL_SIMPLE_BUFF = 1 << 22
# init.cc:810 LINES_PER_THREAD*LL_MAX_NTHREADS*NCCL_STEPS*16 B (device.h:26,97-98)
NCCL_LL_BUFF = 8 * 512 * 8 * 16
# init.cc:812 ELEMS_PER_THREAD*LL128_MAX_NTHREADS*STEPS*8 B (device.h:114-115)
NCCL_LL128_BUFF = 120 * 640 * 8 * 8
# src/include/comm.h:46; p2p.cc:410,491 round each connection buffer up to it
CUDA_IPC_MIN = 2 * MiB
# P2P (NVLink) connection per channel: receiver holds LL+LL128+Simple (p2p.cc:486-491) and the
# sender only ncclSendMem (Hopper: P2P read is Ampere-only, paths.cc:417) -> 10 MiB + 2 MiB, the two
# allocation sizes NCCL_DEBUG_SUBSYS=ALLOC prints on 8x H100 (10485760 and 2097152, NCCL issue
# #1685). Ampere (read mode): sender 4 MiB Simple + header -> 6 MiB, receiver LL+LL128 -> 6 MiB:
# also 12 MiB per pair.
P2P_RECV_CONN = 10 * MiB
P2P_SEND_CONN = CUDA_IPC_MIN
# NET (IB, GPUDirect RDMA) connection: receiver LL+LL128+Simple on device (net.cc:1101), sender
# LL128+Simple on device, LL in host memory (net.cc:917); each rounded up to the 2 MiB cuMem
# granularity -> 10 MiB + 10 MiB.
NET_RECV_CONN = 10 * MiB
NET_SEND_CONN = 10 * MiB
# Default channel counts seen in NCCL_DEBUG=INFO logs (no documented default; pass nccl_channels to
# override): H100 intra-node "Channel 00/24" (github.com/pytorch/torchtitan/issues/1570); HGX A100
# "Channel 23/24" (github.com/NVIDIA/nccl-tests/issues/100); Blackwell NVL "32 coll channels" (NCCL
# issue text found via find_string "32 coll channels, 32 collnet channels"); H100 multi-node "16
# coll channels ... 16 nvls channels" (github.com/NVIDIA/nccl/issues/1814, 64 ranks) and channels
# 00-15 (github.com/NVIDIA/nccl/issues/1453).
INTRA_CHANNELS = {"ampere": 24, "hopper": 24, "blackwell": 32}
INTER_CHANNELS = 16
# NVLS (NVLink SHARP, NVSwitch systems, Hopper+; enabled by default NCCL_NVLS_ENABLE=2, nvls.cc:159;
# vLLM #9699: used only for > 2 GPUs): per rank nvlsChannels*2*buffSize, times nHeads (= local
# ranks), nvls.cc:428-430, buffSize = NCCL_NVLS_CHUNKSIZE 128 KiB * NCCL_STEPS 8 (nvls.cc:160, 427).
# Channels: nvls.cc:155-157, 206-209.
NVLS_CHUNK = 128 * 1024
NCCL_STEPS = 8  # src/include/device.h:26
NVLS_CHANNELS = {"hopper": (16, 16), "blackwell": (24, 32)}  # (single node, multi-node)
NVLS_MIN_RANKS = 3
# Assumed local ranks of a cross-node communicator (HGX/DGX nodes); not in the signature.
GPUS_PER_NODE = 8

# --- cuBLAS / cuBLASLt / cuDNN workspaces ---------------------------------------------------------
# pytorch@26a39059ec580351411f180816c47e2ef5134ae1 aten/src/ATen/cuda/CublasHandlePool.cpp:
# getNewWorkspace() and getNewCUDABlasLtWorkspace() allocate through
# c10::cuda::CUDACachingAllocator, so the cuBLAS workspace (default 32 MiB on sm90,
# 4096*1024*2+16*1024*8 B otherwise, per handle and stream, CUBLAS_WORKSPACE_CONFIG) and the
# cuBLASLt one (1 MiB, CUBLASLT_WORKSPACE_SIZE, unified with cuBLAS by default) are already in
# `reserved`.
CUBLAS_WORKSPACE_OUTSIDE_ALLOCATOR = 0
# cuDNN: PyTorch requests its workspaces from the caching allocator too (not re-checked at a commit
# here); LLM training rarely uses cuDNN, and its kernels, loaded lazily, are counted in the context.
CUDNN_WORKSPACE_OUTSIDE_ALLOCATOR = 0


def _arch(gpu_arch: str) -> str:
    a = gpu_arch.lower()
    return {"a100": "ampere", "h100": "hopper", "h200": "hopper", "b200": "blackwell"}.get(a, a)


def cuda_context_bytes(gpu_arch: str) -> float:
    """Line through CTX_FIT_POINTS at the SM count of the architecture's datacenter part
    (``gpu_parts.family_sm_count``: Hopper's for unknown architectures)."""
    (s0, b0), (s1, b1) = CTX_FIT_POINTS
    sms = family_sm_count(_arch(gpu_arch))
    return b0 + (sms - s0) * (b1 - b0) / (s1 - s0)


def communicator_bytes(
    gpu_arch: str, ranks, crosses_nodes, nccl_channels: int | None = None
):
    """NCCL device buffers of one rank in one communicator (Ring, Tree across nodes, NVLS):
    a float for numbers, element-wise for arrays of ``ranks`` and ``crosses_nodes`` (every
    communicator of every layout at once: ``device_overhead``)."""
    arch = _arch(gpu_arch)
    ranks, crosses = np.asarray(ranks), np.asarray(crosses_nodes, dtype=bool)
    p2p_pair = P2P_RECV_CONN + P2P_SEND_CONN
    # across nodes: Ring and Tree over NET connections, NVLS among the node's local ranks
    inter = (nccl_channels or INTER_CHANNELS) * (p2p_pair + NET_RECV_CONN + NET_SEND_CONN)
    intra = (nccl_channels or INTRA_CHANNELS.get(arch, INTRA_CHANNELS["hopper"])) * p2p_pair
    buffers = np.where(crosses, inter, intra)
    local_ranks = np.where(crosses, np.minimum(ranks, GPUS_PER_NODE), ranks)
    if arch in NVLS_CHANNELS:
        single, multi = NVLS_CHANNELS[arch]
        nvls_channels = np.where(crosses, multi, single)
        buffers = buffers + np.where(local_ranks >= NVLS_MIN_RANKS, nvls_channels * 2 * NVLS_CHUNK
                                     * NCCL_STEPS * local_ranks, 0)
    out = np.where(ranks > 1, buffers, 0).astype(float)
    return float(out) if out.ndim == 0 else out


def device_terms(
    gpu_arch: str, communicators: list[tuple[int, bool]], nccl_channels: int | None = None
) -> dict[str, float]:
    """Bytes nvidia-smi shows on top of the allocator's reserved memory for one training process
    on one GPU: {"cuda_context": ..., "nccl": ..., "cublas_workspace": ..., ...}.

    communicators: one (ranks, crosses_nodes) per NCCL communicator of more than one rank that this
    rank belongs to (e.g. its DP, TP, PP, CP, EP groups).
    """
    nccl = sum(communicator_bytes(gpu_arch, r, x, nccl_channels) for r, x in communicators)
    return {
        "cuda_context": cuda_context_bytes(gpu_arch),
        "nccl": float(nccl),
        "cublas_workspace": float(CUBLAS_WORKSPACE_OUTSIDE_ALLOCATOR),
        "cudnn_workspace": float(CUDNN_WORKSPACE_OUTSIDE_ALLOCATOR),
    }


def _groups(par, gpus_per_node: int) -> tuple[np.ndarray, np.ndarray]:
    """``communicators`` stacked: (ranks, crosses nodes), each an array of one row per
    communicator (over the layouts of ``par`` where it is a grid), every group placed by one
    ``group_span`` call."""
    tp, cp, ep, pp = (np.asarray(v) for v in (par.tp, par.cp, par.ep, par.pp))
    dpcp = np.asarray(par.dp) * cp
    sg = np.asarray(par.shard_group if par.shard_group is not None else 0)
    sg = np.where(sg > 0, sg, dpcp)
    etp = np.asarray(par.etp)
    # expert groups exist only under EP (without it the experts replicate with the dense weights)
    edp = np.where(ep > 1, np.asarray(par.expert_data_parallel), 1)
    peer = np.where(pp > 1, 2, 1)
    shape = np.broadcast(tp, cp, ep, pp, dpcp, sg, etp, edp).shape
    size = np.empty((8, *shape), dtype=np.int64)
    stride = np.empty((6, *shape), dtype=np.int64)     # the collective groups' (not the peers')
    for i, (n, apart) in enumerate(((sg, tp), (dpcp // np.maximum(sg, 1), tp * sg), (tp, 1),
                                    (cp, tp), (ep, etp), (edp, etp * ep))):
        size[i], stride[i] = n, apart
    size[6:] = peer
    crosses = np.empty(size.shape, dtype=bool)
    crosses[:6] = np.asarray(group_span(size[:6], stride, gpus_per_node).nodes) > 1
    # the pipeline peers: the neighbour stage is one stage's GPUs (dp x cp x tp) away
    crosses[6:] = dpcp * tp >= gpus_per_node
    return size, crosses


def communicators(par, gpus_per_node: int) -> list[tuple[object, object]]:
    """(ranks, crosses nodes) of each NCCL communicator one GPU of the layout belongs to (numbers
    or arrays; ranks 1 where the group does not exist): its data-parallel group over dp x cp
    (and, under HSDP, the shard and replica groups), TP, CP, EP, the expert-data-parallel group,
    and under pipelining one point-to-point communicator with each neighbour stage (PyTorch's
    ProcessGroupNCCL creates one per peer pair for send/recv)."""
    return list(zip(*_groups(par, gpus_per_node)))


@functools.lru_cache(maxsize=None)
def _fixed_bytes(arch: str) -> float:
    """The device terms no communicator adds (context and workspaces) of ``arch``."""
    return sum(device_terms(arch, []).values())


def device_overhead(hw, par) -> np.ndarray | float:
    """What nvidia-smi shows beyond the allocator's reserved bytes for one GPU of each layout of
    ``par`` (``device_terms``: CUDA context, NCCL communicator buffers, library
    workspaces): the NCCL term summed over every communicator of every layout at once."""
    size, crosses = _groups(par, hw.gpus_per_node)
    # whole bytes below 2**53: the sum is exact in any order
    out = _fixed_bytes(hw.gpu.arch) + communicator_bytes(hw.gpu.arch, size, crosses).sum(axis=0)
    return float(out) if np.ndim(out) == 0 else out

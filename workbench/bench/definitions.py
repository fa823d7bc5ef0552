"""nccl-tests' definitions: the collectives, how big each one's buffer is, algbw and busbw.

Source: NVIDIA/nccl-tests, doc/PERFORMANCE.md ("Performance reported by NCCL tests") and the
per-test files src/all_reduce.cu, all_gather.cu, reduce_scatter.cu, alltoall.cu, broadcast.cu,
sendrecv.cu (github.com/NVIDIA/nccl-tests):

    algbw = S / t                 (GB/s, 1 GB = 1e9 bytes)
    busbw = algbw * factor        all_reduce 2(n-1)/n; all_gather, reduce_scatter,
                                  all_to_all (n-1)/n; broadcast 1; send/recv 1

S is the size of the whole array: the all-reduce and broadcast buffer, the all-gather *output*
(sendcount x n), the reduce-scatter *input* (recvcount x n), each rank's all-to-all send buffer
(n chunks, one per peer), and for send/recv the message one rank sends. Send/recv runs as
nccl-tests' sendrecv does: a ring exchange in which every rank sends S bytes to rank + 1 and
receives S bytes from rank - 1 at the same time.

This module is pure Python (no torch), so the estimator's calibration can import it.
"""
from __future__ import annotations

import re
from decimal import Decimal

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
               "send_recv")

# The PyTorch call each collective runs (torch.distributed).
TORCH_CALLS = {"all_reduce": "all_reduce",
               "all_gather": "all_gather_into_tensor (all_gather_single from torch 2.13)",
               "reduce_scatter": "reduce_scatter_tensor (reduce_scatter_single from torch 2.13)",
               "all_to_all": "all_to_all_single",
               "broadcast": "broadcast (root 0)",
               "send_recv": "batch_isend_irecv: isend to rank+1, irecv from rank-1"}

# float32 elements, nccl-tests' default datatype (-d float); reductions are sums (-o sum).
DTYPE = "float32"
ELEMENT_BYTES = 4

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30   # ints: message sizes are whole bytes

# Collectives whose buffer is split into n equal chunks (one per rank or per peer).
_CHUNKED = ("all_gather", "reduce_scatter", "all_to_all")


def busbw_factor(collective: str, n: int) -> float:
    """nccl-tests' bus-bandwidth correction factor for ``collective`` over ``n`` ranks
    (doc/PERFORMANCE.md, "Summary"; send/recv: src/sendrecv.cu, factor 1)."""
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    if collective in _CHUNKED:
        return (n - 1) / n
    if collective in ("broadcast", "send_recv"):
        return 1.0
    raise KeyError(collective)


def buffer_elements(collective: str, nbytes: int, n: int) -> int:
    """float32 elements of the full buffer S for a requested size: whole elements, and for the
    chunked collectives a multiple of ``n`` (nccl-tests rounds the same way: count / nranks per
    rank, and reports the rounded size)."""
    count = nbytes // ELEMENT_BYTES
    if collective in _CHUNKED:
        count -= count % n
    return count


def buffer_bytes(collective: str, nbytes: int, n: int) -> int:
    """The size S that actually moves (the ``bytes`` column): ``nbytes`` itself whenever it is
    a whole number of elements (of chunks, for the chunked collectives)."""
    return buffer_elements(collective, nbytes, n) * ELEMENT_BYTES


def size_ladder(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """min, min*factor, min*factor^2, ... up to max, and max itself (nccl-tests' -b/-e/-f)."""
    sizes = []
    size = min_bytes
    while size < max_bytes:
        sizes.append(size)
        size *= factor
    sizes.append(max_bytes)
    return sizes


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(|b|k|kib|m|mib|g|gib)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": KiB, "kib": KiB, "m": MiB, "mib": MiB, "g": GiB, "gib": GiB}


def parse_size(text: str | int) -> int:
    """Bytes from ``1024``, ``"64K"``, ``"1MiB"``, ``"256M"`` (binary units, as nccl-tests' -b
    and -e). Raises ValueError on anything else."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"not a size: {text!r}")
    # exact decimal arithmetic: a float would round a 17-digit count and overflow past 1e308
    value = Decimal(m.group(1)) * _UNITS[m.group(2).lower()]
    if value != value.to_integral_value():
        raise ValueError(f"not a whole number of bytes: {text!r}")
    return int(value)


def human_bytes(nbytes: float) -> str:
    """``1 KiB``, ``256 MiB``, ``1008 B`` (binary units, for tables and axis labels)."""
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if nbytes >= size:
            value = nbytes / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.3g} {unit}"
    return f"{nbytes:.0f} B"

"""Unit constants. GB = 1e9 bytes, GiB = 2**30 bytes (docs/scenario.md, units)."""
GB = 1e9
GiB = float(2**30)
TB = 1e12
MB = 1e6


def capacity_bytes(vendor_gb: float) -> float:
    """Bytes of a memory sold as ``vendor_gb`` "GB". HBM and DIMM sizes are binary: an H100
    "80 GB" reports 81,559 MiB (85.5e9 bytes) in nvidia-smi, an H200 "141 GB" 143,771 MiB, a
    "64 GB" DIMM holds 64 GiB — so the vendor figure is read as GiB."""
    return vendor_gb * GiB


# nvidia-smi's total is 0.44 % under the binary reading: H100 "80 GB" 81,559 of 81,920 MiB,
# H200 "141 GB" 143,771 of 144,384 MiB (the driver withholds the rest).
HBM_REPORTED_FRACTION = 81_559 / 81_920


def hbm_bytes(vendor_gb: float) -> float:
    """GPU memory a program can see on a GPU sold as ``vendor_gb`` "GB": the binary reading less
    what the driver withholds (as nvidia-smi reports it on H100 and H200; assumed the same on
    other GPUs). The CUDA context (a few hundred MiB) is not subtracted."""
    return capacity_bytes(vendor_gb) * HBM_REPORTED_FRACTION


# One unit per quantity, on the page, in the CLI and in the docs: memory (GPU HBM, host DDR,
# what a rank holds) in GiB, because HBM and DIMMs are binary and nvidia-smi and PyTorch report
# binary units; storage (drives, checkpoints) in decimal GB/TB and bandwidth in GB/s, as their
# vendors rate them.
MiB = float(2**20)


def memory_text(n_bytes: float, digits: int = 1) -> str:
    """Memory for people: ``171.5 GiB``, or ``310 MiB`` under 1 GiB (and ``12.0 KiB`` under
    1 MiB), with thousands separators."""
    if n_bytes == 0:
        return "0 GiB"
    if abs(n_bytes) >= GiB:
        return f"{n_bytes / GiB:,.{digits}f} GiB"
    if abs(n_bytes) >= MiB:
        return f"{n_bytes / MiB:,.0f} MiB"
    return f"{n_bytes / 1024:,.1f} KiB"

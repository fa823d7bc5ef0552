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
    """Memory for people: ``171.5 GiB``; under 1 GiB ``310 MiB`` (``1.7 MiB`` under 100 MiB),
    under 1 MiB ``12.0 KiB``; thousands separators."""
    if n_bytes == 0:
        return "0 GiB"
    if abs(n_bytes) >= GiB:
        return f"{n_bytes / GiB:,.{digits}f} GiB"
    if abs(n_bytes) >= MiB:
        mib = n_bytes / MiB
        return f"{mib:,.{1 if abs(mib) < 100 else 0}f} MiB"
    return f"{n_bytes / 1024:,.1f} KiB"


# The one formatter of durations, token counts and shares for charts, tables and text (the
# page, the CLI and the verdict call these; nothing formats a duration of its own).
MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0
YEAR = 365 * DAY


def _three(x: float) -> str:
    """About three significant digits, never in scientific notation: 78.9, 5.12, 401, 1,234."""
    a = abs(x)
    if a >= 100:
        return f"{x:,.0f}"
    if a >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def duration_text(seconds: float) -> str:
    """Seconds for people: ``78.9 ms`` below a second (``12.0 µs`` below a millisecond),
    ``2.50 s`` .. ``401 s`` below ten minutes (step times stay in seconds), then ``45.0 min``,
    ``5.3 h``, ``13.6 days`` and ``33.9 years`` (of 365 days)."""
    s = float(seconds)
    if s != s:
        return "unknown"
    if s in (float("inf"), float("-inf")):
        return "never"
    a = abs(s)
    if a == 0:
        return "0 s"
    if a < 1e-3:
        return f"{_three(s * 1e6)} µs"
    if a < 1:
        return f"{_three(s * 1e3)} ms"
    if a < 10 * MINUTE:
        return f"{_three(s)} s"
    for unit, size in (("years", YEAR), ("days", DAY), ("h", HOUR), ("min", MINUTE)):
        if a >= size:
            return f"{s / size:,.1f} {unit}"
    return f"{_three(s)} s"      # not reached


def tokens_text(n: float) -> str:
    """A token count for people: ``1.4 T tokens``, ``15 B tokens``, ``524 K tokens``,
    ``900 tokens`` (T = 1e12, B = 1e9, M = 1e6, K = 1e3)."""
    n = float(n)
    for size, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= size:
            v = n / size
            return f"{v:.3g} {unit} tokens" if abs(v) < 1000 else f"{v:,.0f} {unit} tokens"
    return f"{n:,.0f} tokens"


def percent_text(fraction: float, digits: int = 0) -> str:
    """A share for people: ``9 %`` (``28.5 %`` with digits=1)."""
    return f"{fraction * 100:,.{digits}f} %"


def money_text(amount: float) -> str:
    """An amount in the scenario's currency (its prices carry no currency of their own):
    ``1,234,567 currency units``; two decimals below 100."""
    return (f"{amount:,.2f}" if abs(amount) < 100 else f"{amount:,.0f}") + " currency units"

"""Unit constants. GB = 1e9 bytes, GiB = 2**30 bytes (docs/scenario.md, units)."""
import re

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


# ---- counts and durations as people type them ----------------------------------------------
# Decimal multipliers, as token counts and parameter counts are published ("15T tokens",
# "1.5B parameters"): K = 1e3, M = 1e6, B (or G) = 1e9, T = 1e12, in either case ("100m
# tokens" is a hundred million: no count is a thousandth).
COUNT_SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
_COUNT = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([a-zA-Z]?)", re.ASCII)
# Units of a duration, by what people write ("24h", "2 days", "90 min", "1.5 weeks"); months are
# left out (28 to 31 days: not one length).
DURATION_UNITS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1.0),
    **dict.fromkeys(("min", "mins", "minute", "minutes"), MINUTE),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), HOUR),
    **dict.fromkeys(("d", "day", "days"), DAY),
    **dict.fromkeys(("w", "wk", "wks", "week", "weeks"), 7 * DAY),
    **dict.fromkeys(("y", "yr", "yrs", "year", "years"), YEAR),
}
_DURATION = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([a-zA-Z]*)", re.ASCII)


def _digits(text: str) -> str:
    """``text`` without thousands separators ("1,024", "1_000_000", "1 000") and outer space."""
    return re.sub(r"(?<=\d)[,_ ](?=\d{3}\b)", "", text.strip())


def _scaled(text: str, pattern: re.Pattern, units: dict[str, float], plain: float
            ) -> float | None:
    """A number followed by a unit of ``units`` (any case; none: ``plain``), as ``pattern``
    splits it; None when the text is not one."""
    m = pattern.fullmatch(_digits(text))
    if m is None:
        return None
    number, unit = m.groups()
    if unit and unit.lower() not in units:
        return None
    return float(number) * (units[unit.lower()] if unit else plain)


def parse_count(text: str) -> float | None:
    """A count as people type it: ``"100M"``, ``"1.5 B"``, ``"2T"``, ``"524k"``, ``"1,024"``,
    ``"1.4e12"`` (``COUNT_SUFFIXES``); None when the text is not one."""
    return _scaled(text, _COUNT, COUNT_SUFFIXES, 1.0)


def parse_duration(text: str, plain: float = HOUR) -> float | None:
    """A duration in seconds as people type it: ``"24h"``, ``"2 days"``, ``"90 min"``,
    ``"1.5 weeks"`` (``DURATION_UNITS``); a bare number is in ``plain`` seconds (hours by
    default); None when the text is not one."""
    return _scaled(text, _DURATION, DURATION_UNITS, plain)


def count_text(n: float) -> str:
    """A count as a field shows it and ``parse_count`` reads it back: ``100 M``, ``1.4 T``,
    ``524 K``, ``900`` (``tokens_text`` without the word)."""
    return tokens_text(n).removesuffix(" tokens").removesuffix("tokens").strip()


def hours_text(hours: float) -> str:
    """A deadline as people say it and ``parse_duration`` reads it back: ``24 h``, ``90 min``,
    ``3 days`` (from 48 h on, when whole days), ``1.5 weeks`` (from 14 days on, when whole
    half-weeks)."""
    if hours < 1:
        return f"{hours * 60:g} min"
    if hours >= 14 * 24 and (hours / (7 * 24) * 2).is_integer():
        return f"{hours / (7 * 24):g} weeks"
    if hours >= 48 and (hours / 24 * 2).is_integer():
        return f"{hours / 24:g} days"
    return f"{hours:g} h"

"""Unit constants. GB = 1e9 bytes, GiB = 2**30 bytes (../shared/design.md, "Units and conventions")."""
GB = 1e9
GiB = float(2**30)
TB = 1e12
MB = 1e6
MiB = float(2**20)


def gb(nbytes: float) -> str:
    """Human form in GB (1e9 bytes)."""
    return f"{nbytes / GB:,.1f} GB"


def gib(nbytes: float) -> str:
    """Human form in GiB (2**30 bytes)."""
    return f"{nbytes / GiB:,.2f} GiB"

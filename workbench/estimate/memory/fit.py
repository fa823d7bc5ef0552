"""Does it fit? The GPU-memory answer with its band: a layout fits surely ("pass") when the
memory runs like it needed in nine of ten cases (the memory band, ``workbench.engines.accuracy
.memory_band``: the signed error of the estimate against published runs, its 10th percentile
``q10``) still leaves the GPU room; it cannot fit ("fail") when even the least it could need —
what nvidia-smi would show at the limit, the allocator's cache freed (``device_least``), at the
band's other end (``q90``) — is above the GPU; otherwise it is "tight": the estimate cannot tell,
a trial on the GPU does. Without a measured band (before ``benchmarks/memory_accuracy.py
--write``) the device figure alone decides.

A measured need below the estimate (error e = estimate / measured - 1 > 0) gives room, above it
(e < 0) takes it: the measured need of a run with estimate d is d / (1 + e).
"""
from __future__ import annotations

import numpy as np

STATUSES = ("pass", "tight", "fail")


def surely_fits(device, capacity, band: dict | None):
    """Whether nine in ten runs like it (``band`` q10) needed at most ``capacity`` (arrays
    allowed)."""
    low = band["q10"] if band else 0.0
    return np.asarray(device) / (1 + low) <= capacity


def can_fit(least, capacity, band: dict | None):
    """Whether the least it could need (``least``, the allocator's cache freed) fits at the
    band's upper end (``band`` q90; arrays allowed)."""
    high = band["q90"] if band else 0.0
    return np.asarray(least) / (1 + high) <= capacity


def fit_status(device: float, least: float, capacity: float, band: dict | None) -> str:
    """"pass", "tight" or "fail" for one GPU (module docstring)."""
    if band is None:
        return "pass" if device <= capacity else "fail"
    if surely_fits(device, capacity, band):
        return "pass"
    return "tight" if can_fit(least, capacity, band) else "fail"


def band_words(band: dict | None) -> str:
    """The band as the verdict says it: "20 published runs like it: half within 5 %; nine in ten
    needed at most 13 % above the estimate"."""
    if not band:
        return "no measured band"
    above = 1 / (1 + band["q10"]) - 1
    return (f"{band['runs']} published runs like it: half within {band['median']:.0%}; nine in "
            f"ten needed at most {above:.0%} above the estimate")

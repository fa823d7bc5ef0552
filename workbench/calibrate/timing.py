"""The calibration's timing statistic, shared by every probe: the median over repeats of the mean
of a timed loop. The loop mean spreads one timer read over many calls of a microsecond-scale
operation; the median, because the trials it predicts are compared on the median of their
steps (this shared 2-core box drifts by +-25 % between runs of the same loop, so the minimum
would describe a machine the trials rarely see)."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_mean(fn: Callable[[], object], budget_s: float, repeats: int = 5) -> float:
    """Median over ``repeats`` of the mean seconds per call of loops lasting ~budget_s in all."""
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    n = max(1, int(budget_s / repeats / one))
    means = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        means.append((time.perf_counter() - t0) / n)
    return statistics.median(means)

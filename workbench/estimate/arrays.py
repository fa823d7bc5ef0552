"""The shared cost formulas accept numbers or numpy arrays (one entry per layout of a grid)."""
from __future__ import annotations

import numpy as np


def plain(x):
    """A plain Python number for a scalar result, the array otherwise."""
    return x.item() if np.ndim(x) == 0 else x

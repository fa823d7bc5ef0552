"""The memory headroom the planner keeps: the share of GPU memory a layout may use unless the
user says otherwise (``workbench plan --max-memory-fraction``, the planner panel's slider,
``plan.Constraints.max_memory_fraction``). A module of its own, importing nothing, so the CLI's
parser can say the default without loading the planner.

By default the share comes from the memory band of runs like the scenario's
(``workbench.engines.accuracy.memory_band``, measured by ``benchmarks/memory_accuracy.py
--write``): the planner ranks a layout where half the published runs like it needed no more than
the GPU holds, i.e. its device figure within the capacity x (1 + the band's median signed error
``q50``), never above the capacity itself; each ranked layout then says whether it fits surely
or is tight (``estimate.memory.fit``). Dense pre-training (20 runs, 2026-12-08): q50 = -3.7 %,
a share of 96.3 %; fine-tuning (57 runs): -4.1 %, 95.9 %.
"""
from __future__ import annotations

# Without a measured band (no benchmarks/memory_accuracy.py --write yet) the planner keeps a
# tenth back: vLLM keeps the same tenth, ``gpu_memory_utilization`` 0.90
# (vllm/engine/arg_utils.py EngineArgs), for fragmentation and short-lived workspaces
# (PyTorch's "CUDA semantics: memory management" notes).
DEFAULT_MEMORY_FRACTION = 0.9
MEMORY_FRACTION_WHY = ("the memory band's median: the share where half the published runs like "
                       "this one needed no more than the GPU holds")


def band_fraction(band: dict | None) -> float:
    """The share of the GPU the planner lets a layout use by default (module docstring)."""
    if not band:
        return DEFAULT_MEMORY_FRACTION
    return min(1.0, 1.0 + band["q50"])

"""The memory headroom the planner keeps by default: the share of GPU memory a layout may use
unless the user says otherwise (``workbench plan --max-memory-fraction``, the planner panel's
slider, ``plan.Constraints.max_memory_fraction``). A module of its own, importing nothing, so
the CLI's parser can say the default without loading the planner.
"""
from __future__ import annotations

# The share of GPU memory as nvidia-smi counts it (the estimate's ``device`` figure, which already
# holds the caching allocator's measured reserved-over-allocated ratio, the CUDA context and the
# NCCL buffers): 0.9, also the share above which the estimate's verdict warns
# (``estimate.run.verdict.GPU_WARN_FRACTION`` is this number), so the planner ranks only layouts
# whose estimate passes without that warning. The tenth kept
# back covers what no peak figure holds: fragmentation beyond the measured ratio and workspaces
# that come and go faster than any logged peak (PyTorch's "CUDA semantics: memory management"
# notes, https://pytorch.org/docs/stable/notes/cuda.html#memory-management; vLLM keeps the same
# tenth, ``gpu_memory_utilization`` 0.90, vllm/engine/arg_utils.py EngineArgs), and the memory
# model's own error against published peaks (benchmarks/memory_accuracy.py, 2026-12-07: median
# |error| 4.8 % over 11 cases, two of them 16 % and 31 % low; fine-tuning runs 12.6 %,
# benchmarks/finetune_accuracy.py). Experts' published
# layouts sit at a median 78 % of the GPU by this estimate, the search's #1 at 1.0 at 92 %
# (issue 44).
DEFAULT_MEMORY_FRACTION = 0.9
MEMORY_FRACTION_WHY = ("the headroom kept for allocator fragmentation, short-lived peaks and the "
                       "memory estimate's error; the estimate warns above it")

"""The memory headroom the planner keeps by default: the share of GPU memory a layout may use
unless the user says otherwise (``workbench plan --max-memory-fraction``, the planner panel's
slider, ``plan.Constraints.max_memory_fraction``). A module of its own, importing nothing, so
the CLI's parser can say the default without loading the planner.
"""
from __future__ import annotations

# The share of GPU memory as nvidia-smi counts it (the estimate's ``device`` figure, which already
# holds the caching allocator's measured reserved-over-allocated ratio, the CUDA context and the
# NCCL buffers): 0.9, the share above which the estimate's verdict warns
# (``estimate.verdict.GPU_WARN_FRACTION``; tests/test_plan_space.py keeps the two equal), so
# the planner ranks only layouts whose estimate passes without that warning. The tenth kept
# back covers what no peak figure holds: fragmentation beyond the measured ratio and workspaces
# that come and go faster than any logged peak (PyTorch's "CUDA semantics: memory management"
# notes, https://pytorch.org/docs/stable/notes/cuda.html#memory-management; vLLM keeps the same
# tenth, ``gpu_memory_utilization`` 0.90, vllm/engine/arg_utils.py EngineArgs), and the memory
# model's own error, median |error| 9.9 % against published peaks (README, "Accuracy against
# published peak-memory measurements"; benchmarks/memory_accuracy.py). Experts' published
# layouts sit at a median 78 % of the GPU by this estimate, the search's #1 at 1.0 at 92 %
# (issue 44).
DEFAULT_MEMORY_FRACTION = 0.9
MEMORY_FRACTION_WHY = ("the headroom kept for allocator fragmentation, short-lived peaks and the "
                       "memory estimate's error (median 9.9 %); the estimate warns above it")

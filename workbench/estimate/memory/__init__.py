"""Memory on one GPU: model states, activations, buffers, the peak as a moment of the step, what the
allocator reserves and what nvidia-smi shows. It reads model/ and the ground (``placement``),
never time/: the planner runs the memory pass over every layout before it times any. Its
modules and tests: the index, ``workbench/estimate/__init__.py``."""

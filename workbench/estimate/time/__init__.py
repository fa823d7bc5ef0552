"""The seconds of a step: kernels and their ceilings, collectives and what overlaps them, MoE
dispatch, the blocks' costs, the pipeline and its timeline. It reads model/ and memory/ (what is
saved decides what is recomputed; state bytes decide the optimizer's and offload's traffic).
Its modules and tests: the index, ``workbench/estimate/__init__.py``."""

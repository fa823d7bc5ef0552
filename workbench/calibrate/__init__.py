"""Calibration: measure the machine at hand and write it as a profile a scenario can name.

On a CPU machine ``measure.measure_profile`` (imports torch) times GEMMs, memory, the eager
runtime and collectives into a ``MachineProfile``; on a machine with a CUDA GPU
``measure_gpu.measure_gpu_profile`` times the GPU's kernels in one spawned process (and nccl
collectives) into a ``GpuProfile``. The profiles themselves, and reading them back, belong to
the hardware (``workbench/hardware/``): a scenario names one as ``calibration:NAME``.
"""

"""Calibration: measure the machine at hand and use it as a scenario's hardware.

On a CPU machine ``measure_profile`` (imports torch) times GEMMs, memory, the eager runtime and
collectives into a ``MachineProfile``; on a machine with a CUDA GPU ``measure_gpu_profile``
times the GPU's kernels in one spawned process (and nccl collectives) into a ``GpuProfile``.
``load_profile`` (no torch) reads either; both answer the estimator's questions
(``profile.Profile``).
"""
from workbench.calibrate.gpu_profile import GpuProfile
from workbench.calibrate.profile import MachineProfile, fit_alpha_beta, load_profile

__all__ = ["GpuProfile", "MachineProfile", "fit_alpha_beta", "load_profile"]

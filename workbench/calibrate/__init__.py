"""Calibration: measure the machine at hand and use it as a scenario's hardware.

``measure_profile`` (imports torch) times GEMMs, memory, the eager runtime and collectives;
``MachineProfile`` / ``load_profile`` (no torch) are what the estimator reads.
"""
from workbench.calibrate.profile import MachineProfile, fit_alpha_beta, load_profile

__all__ = ["MachineProfile", "fit_alpha_beta", "load_profile"]

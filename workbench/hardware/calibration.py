"""A calibration file read back: either kind of profile (``load_profile``), and a profile as
the accelerator record a scenario's ``hardware.gpu: calibration:NAME`` resolves to
(``profile_gpu``).
"""
from __future__ import annotations

from pathlib import Path

from workbench.catalog.types import GPU
from workbench.documents.text import load_text, read_text_file
from workbench.hardware.gpu_profile import GpuProfile, gpu_record
from workbench.hardware.profile import MachineProfile, Profile
from workbench.hardware.record import check_record


def load_profile(path: str | Path) -> Profile:
    """Read a calibration file written by ``workbench calibrate``: a ``MachineProfile`` (a CPU
    machine) or a ``gpu_profile.GpuProfile`` (``device: cuda``)."""
    # a regular file under the document size limit, parsed within the document limits
    doc = load_text(read_text_file(path, "calibration file"), "calibration file",
                    json_text=True)
    check_record(doc)         # every field in range before any arithmetic reads it
    if isinstance(doc, dict) and doc.get("device") == "cuda":
        return GpuProfile.from_dict(doc)
    return MachineProfile.from_dict(doc)


def profile_gpu(profile: Profile, source: str = ""):
    """The profile as a scenario's accelerator record, the profile attached for the estimator.
    A GPU's profile: ``gpu_profile.gpu_record``. A CPU machine's: one rank of this machine,
    its host RAM as device memory, the measured peaks; board power is not measured (0 W:
    energy figures of such a scenario read 0)."""
    if profile.device == "cuda":
        return gpu_record(profile, source)

    cpu = profile.host.get("cpu", "this machine")
    return GPU(name=f"{cpu} ({profile.cores} cores, calibrated {profile.date})",
               memory_gb=profile.memory_gb, hbm_gb_per_s=profile.copy_gb_per_s,
               bf16_tflops=profile.peak_flops("bf16") / 1e12, fp8_tflops=0.0, power_w=0.0,
               fp32_tflops=profile.peak_flops("fp32") / 1e12, form_factor="cpu",
               source=source or profile.source, arch="calibrated", profile=profile)

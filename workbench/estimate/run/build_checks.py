"""Can one node of the scenario be built? Power, PCIe lanes, host memory, drives, cooling.

Each check returns pass / warn / fail with a one-line reason, or skip ("not checked: ...") when
the scenario leaves out a part the check needs (a host given without its CPU). Sources of the rules:
- PSU: the parts' rated power summed, and sized so it runs at <= 80 % of its rating
  (continuous-load rule of the US National Electrical Code 210.19/210.20 and the usual PSU
  efficiency sweet spot); a 15 A / 120 V household circuit carries 1,440 W continuous and a
  16 A / 230 V one 3,680 W (IEC 60884 socket rating).
- PCIe lanes: x16 per GPU (its host interface in the catalog), the NIC's lanes (ConnectX-7:
  x16 Gen5), x4 per NVMe drive, against the CPU's usable lanes per socket. HGX/SXM boards put
  the GPUs behind PCIe switches, so a shortfall there is a warning, not a failure.
- Host memory: offload plus pinned staging (workbench.estimate.memory.records) against the installed
  DDR, and the installed DDR against what the CPU supports.
- Drives: one checkpoint (bf16 weights + fp32 master and Adam moments = 14 B/param, the node's
  share) against capacity, and its write time at the drives' sequential write speed. Under
  LoRA / QLoRA a checkpoint holds the trained parameters only (PEFT's ``save_pretrained`` writes
  the adapters; the Trainer adds their optimizer state), and the base model the run loads sits
  on the drives once, in bf16 safetensors (2 B/param; ``checkpoint_bytes``).
- Cooling: the node's heat load; above 10.2 kW (NVIDIA DGX H100's maximum system power, the
  reference air-cooled 8-GPU chassis) it needs liquid cooling or a chassis rated for it.
"""
from __future__ import annotations

from dataclasses import dataclass

from workbench.estimate.memory.records import MemoryEstimate
from workbench.estimate.model.finetune import trainable_params
from workbench.estimate.model.params import total_params
from workbench.estimate.run.run_level import host_power_w
from workbench.scenario.types import Scenario
from workbench.units import capacity_bytes, memory_text

PSU_LOAD = 0.8
HOUSEHOLD_CIRCUITS_W = {"15 A / 120 V": 1440.0, "16 A / 230 V": 3680.0}
AIR_COOLED_8GPU_LIMIT_W = 10_200.0
NVME_LANES = 4
CHECKPOINT_BYTES_PER_PARAM = 14


def checkpoint_bytes(s: Scenario) -> tuple[float, float]:
    """(one checkpoint, the base model kept once) in bytes per node: every trained parameter at
    ``CHECKPOINT_BYTES_PER_PARAM``, split over the nodes; with adapters the base the run loads
    as well, 2 B/param (bf16 safetensors), on every node that loads it."""
    trained = trainable_params(s.model, s.training)
    base = 2.0 * total_params(s.model) if s.training.adapters else 0.0
    return trained * CHECKPOINT_BYTES_PER_PARAM / s.hardware.nodes, base


@dataclass(frozen=True)
class Check:
    name: str
    status: str     # "pass" | "warn" | "fail" | "skip" (not checked: a part is not given)
    reason: str


def node_power_w(s: Scenario) -> float:
    """Rated power of one node: GPUs at their datasheet board power (not a user's power cap:
    a cap is a driver setting anyone can lift, and the supply must carry the board's rating)
    plus the host parts."""
    return s.hardware.gpu.power_w * s.hardware.gpus_per_node + host_power_w(s)


def build_checks(s: Scenario, mem: MemoryEstimate) -> list[Check]:
    """Power, PCIe lanes, host memory, drives and cooling of one node to be built. None for a
    calibrated CPU machine: it exists already, and its processes are not GPUs in slots (a
    calibrated GPU is checked as a catalog one)."""
    hw = s.hardware
    out: list[Check] = []
    if hw.gpu.profile is not None and hw.gpu.profile.whole_machine:
        return out

    power = node_power_w(s)
    psu = power / PSU_LOAD
    circuits = ", ".join(f"{k}: {v:,.0f} W" for k, v in HOUSEHOLD_CIRCUITS_W.items())
    status = "warn" if psu > max(HOUSEHOLD_CIRCUITS_W.values()) else "pass"
    out.append(Check("power", status,
                     f"parts draw {power:,.0f} W per node; size the PSU(s) for >= {psu:,.0f} W "
                     f"(80 % load)" + (f"; more than a household circuit carries ({circuits})"
                                       if status == "warn" else "")
                     + ("; no CPU counted: none given" if hw.host.cpu is None else "")))

    cpu = hw.host.cpu
    if cpu is None:
        out.append(Check("pcie_lanes", "skip", "not checked: no CPU given (hardware.host.cpu)"))
    else:
        out.append(_pcie_lanes(s))

    have = capacity_bytes(hw.host.memory_gb)
    need_mem = mem.host_per_node
    msg = (f"offload and staging need {memory_text(need_mem, 0)} of {memory_text(have, 0)} "
           "installed")
    status = "pass" if need_mem <= have else "fail"
    if cpu is None:
        msg += "; the CPU's supported memory is not checked: no CPU given"
    elif cpu.max_memory_gb and hw.host.memory_gb > cpu.max_memory_gb * hw.host.sockets:
        status = "warn" if status == "pass" else status
        msg += (f"; {cpu.name} officially supports "
                f"{memory_text(capacity_bytes(cpu.max_memory_gb * hw.host.sockets), 0)}")
    out.append(Check("host_memory", status, msg))

    ckpt, base = checkpoint_bytes(s)
    cap = hw.storage.drives * hw.storage.drive.capacity_tb * 1e12
    nvme_use = mem.nvme_per_node
    if hw.storage.drives == 0:
        out.append(Check("drives", "fail", f"no drive for a {ckpt / 1e9:,.0f} GB checkpoint share"))
    else:
        write = ckpt / (hw.storage.drives * hw.storage.drive.write_gb_per_s * 1e9)
        ok = ckpt + base + nvme_use <= cap
        size = f"{ckpt / 1e9:,.0f} GB" if ckpt >= 1e9 else f"{ckpt / 1e6:,.0f} MB"
        out.append(Check("drives", "pass" if ok else "fail",
                         f"one checkpoint is {size} per node"
                         + (f" (what trains) beside the {base / 1e9:,.0f} GB base model it "
                            "loads" if base else "")
                         + (f" plus {nvme_use / 1e9:,.0f} GB of NVMe offload" if nvme_use else "")
                         + f" on {cap / 1e12:,.1f} TB; writing it takes {write:,.0f} s at "
                         f"{hw.storage.drive.write_gb_per_s:g} GB/s per drive"))

    heat = power
    status = "pass" if heat <= AIR_COOLED_8GPU_LIMIT_W else "warn"
    out.append(Check("cooling", status,
                     f"heat load {heat / 1000:,.1f} kW ({heat * 3.412:,.0f} BTU/h) per node"
                     + ("" if status == "pass" else
                        "; above the 10.2 kW of an air-cooled DGX H100: plan liquid cooling")))
    return out


def _pcie_lanes(s: Scenario) -> Check:
    """GPUs x16, NICs at their adapter's width, x4 per drive, against the CPUs' usable lanes."""
    hw = s.hardware
    cpu = hw.host.cpu
    lanes_have = cpu.usable_pcie_lanes(hw.host.sockets)
    gpu_lanes = hw.gpu.pcie_lanes * hw.gpus_per_node
    nic_lanes = hw.inter_node.link.pcie_lanes * hw.inter_node.nics_per_node
    nvme_lanes = NVME_LANES * hw.storage.drives
    need = gpu_lanes + nic_lanes + nvme_lanes
    detail = (f"{hw.gpus_per_node} GPUs x{hw.gpu.pcie_lanes} + {hw.inter_node.nics_per_node} "
              f"NICs x{hw.inter_node.link.pcie_lanes} + {hw.storage.drives} drives x{NVME_LANES}"
              f" = {need} lanes; {cpu.name} x{hw.host.sockets} provides {lanes_have}")
    if need <= lanes_have:
        return Check("pcie_lanes", "pass", detail)
    if hw.gpu.form_factor == "sxm":
        return Check("pcie_lanes", "warn", detail + " (an HGX board's PCIe switches share "
                                                    "them, at reduced host bandwidth)")
    return Check("pcie_lanes", "fail", detail + f": short by {need - lanes_have}; "
                 "the GPUs would run at x4/x8 or not at all")

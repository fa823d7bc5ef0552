"""The hardware of a scenario, resolved: the GPUs, the links between them, one node's host
and storage. Built by ``hardware.resolve``; the scenario (``scenario.types.Scenario``) holds one.
"""
from __future__ import annotations

from dataclasses import dataclass

from workbench.catalog.types import CPU, GPU, Drive, HostMemory, Link


@dataclass(frozen=True)
class InterNode:
    link: Link                # the NIC's link: catalog key or inline {gb_per_s, latency_us}, per
    #                           NIC per direction (ignored when nodes == 1)
    nics_per_node: int        # NICs per node (RDMA NICs: usually one per GPU; 8, none if 1 node)


@dataclass(frozen=True)
class Host:
    cpu: CPU | None           # host CPU, one socket: catalog key or inline {cores, pcie_lanes,
    #                           memory_channels}; may be left out (the checks that need it say so)
    memory: HostMemory        # DDR speed grade: catalog key or inline {mt_per_s}
    memory_gb: float          # installed host memory per node, GB (required when host is given)
    channels: int             # populated DDR channels per socket (default: all the CPU's)
    sockets: int = 1          # CPU sockets per node

    @property
    def memory_gb_per_s(self) -> float:
        """Peak DDR bandwidth per node: channels x sockets x MT/s x 8 bytes."""
        return self.memory.gb_per_s_per_channel * self.channels * self.sockets


@dataclass(frozen=True)
class Storage:
    drive: Drive              # NVMe drive: catalog key or inline {capacity_tb, read_gb_per_s,
    #                           write_gb_per_s}
    drives: int               # drives per node (checkpoints; NVMe offload needs >= 1)


@dataclass(frozen=True)
class Hardware:
    gpu: GPU                  # catalog key, inline {memory_gb, hbm_gb_per_s, bf16_tflops, power_w,
    #                           fp8_tflops}, or "calibration:FILE" (a `workbench calibrate` profile)
    gpus_per_node: int        # GPUs in one node
    nodes: int                # nodes; the world is gpus_per_node x nodes
    intra_node: Link          # GPU-to-GPU link in a node, per GPU per direction (default: the
    #                           GPU's NVLink generation on SXM boards, else its PCIe slot)
    inter_node: InterNode     # the network between nodes (a link key alone is short for {link})
    host: Host                # the host of one node (default: 2 x EPYC 9654, 1536 GB DDR5-4800)
    storage: Storage          # local NVMe of one node
    gpu_power_limit_w: float = 0.0   # board power limit the GPUs run under (nvidia-smi -pl),
    #                           W: half to all of the GPU's power_w; it lowers the clock GEMMs
    #                           hold by (limit / power_w)^(1/3). 0 = the GPU's own power_w
    owned: bool = False       # the machine exists (you own or rent it as it is): the build
    #                           checks are advice, not part of the answer (false: it is being
    #                           planned, and a node that cannot be built fails the verdict)

    @property
    def world(self) -> int:
        return self.gpus_per_node * self.nodes

"""GPU-to-GPU links (intra-node) and network adapters (inter-node).

Units
-----
- ``gb_per_s``: bandwidth PER DIRECTION, GB/s (1e9 bytes/s). Intra-node links are
  per GPU; network entries are per NIC (one port at line rate).
  Vendors quote NVLink as the bidirectional total per GPU ("900 GB/s" for NVLink 4
  = 450 GB/s each way) and NICs in Gbit/s (400GbE = 400e9 bit/s = 50 GB/s each way).
  PCIe is computed from the PCI-SIG signalling rate: GT/s x lanes x 128/130 / 8.
- ``latency_us``: the per-hop alpha of the alpha-beta cost model, microseconds: the
  small-message time of one NCCL step over this link (not the bare wire latency).
  These are typical publicly measured figures (or NCCL's own tuning-model constants),
  not datasheet values; each source says which.
- ``rdma``: True for NVLink/PCIe peer-to-peer and for GPUDirect RDMA NICs (InfiniBand
  verbs or RoCE v2). False for plain TCP/IP sockets: higher latency, and achievable
  bandwidth is below line rate (kernel copies, host staging, single-flow CPU limits).
- ``pcie_lanes`` / ``power_w``: what ONE adapter needs (NICs only; 0 for on-board links).

Compute figures (TFLOP/s) live in gpus.py; there, dense = sparse/2.
"""
from workbench.catalog.types import Link

# NVLink 4 is defined once because two keys ("nvlink4" and the alias "nvlink") share it.
NVLINK4 = Link(
    name="NVLink 4 (H100/H200 SXM via NVSwitch; H200 NVL bridge)",
    gb_per_s=450,
    latency_us=3.0,
    rdma=True,
    pcie_lanes=0,
    power_w=0.0,
    source=(
        "NVIDIA H100 / H200 datasheets (2023/2024), https://www.nvidia.com/en-us/data-center/h100/ and "
        "/h200/: 'NVIDIA NVLink 900 GB/s' per GPU, which is the bidirectional total of 18 NVLink 4 links "
        "x 25 GB/s per direction -> 450 GB/s per direction (NVIDIA Hopper architecture whitepaper, 2022). "
        "latency_us: typical measured NCCL small-message send/recv between two NVLink-connected Hopper "
        "GPUs, ~3 us (NVIDIA/nccl issue #1487: 'nccl-tests report the expected latency (~3us)' on 2x "
        "H100 NVLink; NVIDIA/nccl issue #1984: sendrecv_perf 3.7 us on H800 NVLink); NCCL's tuning "
        "model uses 3.4 us per NVLink ring hop for the Simple protocol (src/graph/tuning.cc). "
        "Not a datasheet figure."
    ),
)

LINKS: dict[str, Link] = {
    # ---------------- intra-node: NVLink generations ----------------
    # NVLink 3 (A100 SXM4): 12 links x 25 GB/s per direction = 300 GB/s per direction
    # (600 GB/s bidirectional). A100 PCIe pairs reach the same 600 GB/s with 3 bridges.
    "nvlink3": Link(
        name="NVLink 3 (A100 SXM4 via NVSwitch)",
        gb_per_s=300,
        latency_us=3.0,
        rdma=True,
        pcie_lanes=0,
        power_w=0.0,
        source=(
            "NVIDIA A100 datasheet (2021), https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/"
            "a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf: 'NVLink: 600GB/s' per GPU, the "
            "bidirectional total of 12 third-generation links x 25 GB/s per direction (NVIDIA Ampere GA100 "
            "whitepaper, 2020) -> 300 GB/s per direction. latency_us: typical measured NCCL small-message "
            "step over NVLink, ~3 us (nccl-tests sendrecv; NCCL's tuning model: 3.4 us per NVLink ring hop, "
            "Simple protocol, src/graph/tuning.cc). Not a datasheet figure."
        ),
    ),
    # NVLink 4 (H100/H200): 18 links x 25 GB/s per direction = 450 GB/s per direction.
    "nvlink4": NVLINK4,
    # Alias used by scenario files ("intra_node: nvlink"): identical to nvlink4.
    "nvlink": NVLINK4,
    # NVLink 5 (B200): 18 links x 50 GB/s per direction = 900 GB/s per direction (1.8 TB/s bidirectional).
    "nvlink5": Link(
        name="NVLink 5 (B200 / HGX B200 via NVSwitch)",
        gb_per_s=900,
        latency_us=3.0,
        rdma=True,
        pcie_lanes=0,
        power_w=0.0,
        source=(
            "NVIDIA Blackwell datasheet (2024/2025), https://www.nvidia.com/en-us/data-center/hgx/: "
            "'5th Generation NVLink: 1.8TB/s' per GPU (HGX B200 total NVLink bandwidth 14.4 TB/s for 8 "
            "GPUs), the bidirectional total of 18 links x 50 GB/s per direction (NVIDIA Blackwell "
            "Architecture Technical Brief) -> 900 GB/s per direction. latency_us: typical measured NCCL "
            "small-message time on 8x B200, 'just over 3 microseconds' (NVIDIA/nccl-tests issue #333, "
            "NVIDIA maintainer comment, 2025). Not a datasheet figure."
        ),
    ),
    # AMD Infinity Fabric (MI300X on an 8-GPU UBB): every GPU has a direct link to each of the
    # other 7 (a full mesh, no switch); per GPU and direction 7 x 64 GB/s = 448 GB/s, which a
    # collective reaches only when it drives all 7 links at once (RCCL's rings over the mesh,
    # all-to-all).
    "infinity-fabric": Link(
        name="AMD Infinity Fabric (MI300X 8-GPU full mesh)",
        gb_per_s=448,
        latency_us=3.0,
        rdma=True,
        pcie_lanes=0,
        power_w=0.0,
        source=(
            "AMD Instinct MI300X data sheet (2023), amd-instinct-mi300x-data-sheet.pdf: 7 AMD Infinity "
            "Fabric links, 'peak Infinity Fabric link bandwidth 128 GB/s' (bidirectional) per link, "
            "'896 GB/s' aggregate per GPU -> 448 GB/s per direction; AMD Instinct MI300X platform: "
            "8 GPUs fully connected on the UBB. latency_us: no published RCCL small-message figure "
            "was found; NVLink's ~3 us is taken (an assumption, not a measurement)."
        ),
    ),
    # ---------------- intra-node: PCIe (GPU peer-to-peer, no NVLink) ----------------
    # x16, 128b/130b encoding: 16 GT/s x 16 x 128/130 / 8 = 31.5 GB/s per direction.
    # Achieved GPU-GPU P2P is below this, and lower still when it crosses a CPU root complex.
    "pcie-gen4": Link(
        name="PCIe 4.0 x16 (GPU peer-to-peer)",
        gb_per_s=31.5,
        latency_us=5.0,
        rdma=True,
        pcie_lanes=0,
        power_w=0.0,
        source=(
            "PCI-SIG PCI Express Base Specification 4.0 (2017): 16.0 GT/s per lane, 128b/130b encoding -> "
            "16 x 16 x 128/130 / 8 = 31.5 GB/s per direction for x16 (PCI-SIG/NVIDIA quote '64 GB/s' "
            "bidirectional, e.g. A100 datasheet 'PCIe Gen4: 64GB/s'). latency_us: ~5 us is a typical "
            "figure for one NCCL small-message step over PCIe P2P, taken from NCCL's tuning model "
            "(src/graph/tuning.cc: PCI ring hop 1.0 us LL / 2.5 us LL128 / 5.7 us Simple); an estimate, "
            "not a datasheet figure, and higher when traffic crosses the CPU's root complex."
        ),
    ),
    # x16: 32 GT/s x 16 x 128/130 / 8 = 63.0 GB/s per direction (NVIDIA quotes 128 GB/s bidirectional).
    "pcie-gen5": Link(
        name="PCIe 5.0 x16 (GPU peer-to-peer)",
        gb_per_s=63.0,
        latency_us=5.0,
        rdma=True,
        pcie_lanes=0,
        power_w=0.0,
        source=(
            "PCI-SIG PCI Express Base Specification 5.0 (2019): 32.0 GT/s per lane, 128b/130b encoding -> "
            "32 x 16 x 128/130 / 8 = 63.0 GB/s per direction for x16 (NVIDIA H100/H200 datasheets: "
            "'PCIe Gen5: 128GB/s', the bidirectional round figure). latency_us: ~5 us typical NCCL "
            "small-message step over PCIe P2P, from NCCL's tuning model (src/graph/tuning.cc: PCI ring hop "
            "1.0-5.7 us by protocol); an estimate, not a datasheet figure."
        ),
    ),
    # ---------------- inter-node: Ethernet, plain TCP sockets (no RDMA) ----------------
    # gb_per_s keeps line rate; NCCL's socket transport usually achieves well below it
    # (a rough expectation, not measured here: perhaps half to most of line rate at 100GbE,
    # much less at 400GbE where one TCP flow is CPU-bound).
    "100gbe": Link(
        name="100GbE, TCP/IP sockets (no RDMA)",
        gb_per_s=12.5,
        latency_us=25.0,
        rdma=False,
        pcie_lanes=16,
        power_w=15.0,
        source=(
            "Line rate 100 Gbit/s = 12.5 GB/s per direction (IEEE 802.3 100GbE). Adapter: e.g. NVIDIA "
            "ConnectX-5 / ConnectX-6 Dx 100GbE, PCIe 3.0/4.0 x16 edge connector (NVIDIA ConnectX-6 EN user "
            "manual, https://docs.nvidia.com/networking/display/ConnectX6EN/Introduction: 'a PCIe x16 slot "
            "can support a bandwidth of up to 100GbE in a PCIe Gen 3.0/4.0 slot'). power_w ~15 W is an "
            "estimate (no 100G product-brief figure retrieved): the NVIDIA ConnectX-5 EN OCP 2.0 user "
            "manual lists 12.95 W typical / 15.55 W max with passive cables for a dual-25G card, and 100G "
            "QSFP28 cards sit in the mid-teens. latency_us: ~25 us is a typical measured small-message "
            "one-way time for kernel TCP sockets plus NCCL's socket proxy (10-30 us range); not a "
            "datasheet figure. Achievable bandwidth over TCP is below line rate."
        ),
    ),
    "200gbe": Link(
        name="200GbE, TCP/IP sockets (no RDMA)",
        gb_per_s=25.0,
        latency_us=25.0,
        rdma=False,
        pcie_lanes=16,
        power_w=20.0,
        source=(
            "Line rate 200 Gbit/s = 25 GB/s per direction. Adapter: NVIDIA ConnectX-6 (e.g. MCX653105A-HDAT, "
            "MCX623105A-VDAT), PCIe 4.0 x16 (NVIDIA ConnectX-6 EN user manual: 'up to 200GbE in a PCIe Gen "
            "4.0 slot'; a Gen3 x16 slot caps it near 100GbE). power_w ~20 W is an estimate: the ConnectX-6 "
            "spec table was not retrieved; NVIDIA documents 16.7 W typical for the 200G ConnectX-7 "
            "MCX75310AAS-HEAT and 24.9 W for the 400G MCX75310AAS-NEAT (ConnectX-7 user manual, "
            "specifications). latency_us: ~25 us typical kernel-TCP + NCCL socket small-message time "
            "(10-30 us range); not a datasheet figure. Achievable bandwidth over TCP is well below line rate."
        ),
    ),
    "400gbe": Link(
        name="400GbE, TCP/IP sockets (no RDMA)",
        gb_per_s=50.0,
        latency_us=25.0,
        rdma=False,
        pcie_lanes=16,
        power_w=24.9,
        source=(
            "Line rate 400 Gbit/s = 50 GB/s per direction. Adapter: NVIDIA ConnectX-7 400GbE/NDR, PCIe 5.0 "
            "x16 (a Gen4 x16 slot, 31.5 GB/s, cannot carry 400G). power_w: 24.9 W, 'typical power with "
            "passive cables in PCIe Gen 5.0 x16' for MCX75310AAS-NEAT (NVIDIA ConnectX-7 adapter cards user "
            "manual, specifications, https://docs.nvidia.com/networking/display/connectx7vpi/specifications). "
            "latency_us: ~25 us typical kernel-TCP + NCCL socket small-message time (10-30 us range); not a "
            "datasheet figure. Over TCP a single flow is CPU-bound far below 50 GB/s."
        ),
    ),
    # ---------------- inter-node: Ethernet with RDMA (RoCE v2, GPUDirect RDMA) ----------------
    "100gbe-rdma": Link(
        name="100GbE RoCE v2 (GPUDirect RDMA)",
        gb_per_s=12.5,
        latency_us=5.0,
        rdma=True,
        pcie_lanes=16,
        power_w=15.0,
        source=(
            "Line rate 100 Gbit/s = 12.5 GB/s per direction. Adapter: NVIDIA ConnectX-5 / ConnectX-6 Dx "
            "100GbE (RoCE v2), PCIe 3.0/4.0 x16 (ConnectX-6 EN user manual). power_w ~15 W: estimate, see "
            "'100gbe'. latency_us: verbs-level one-way latency is ~1 us (perftest ib_send_lat ~0.8 us for "
            "32 B RC sends; ConnectX-6 quoted 'sub-600ns' adapter latency); NCCL adds its proxy and protocol "
            "steps, and NCCL's tuning model uses 2.7 (LL) / 4.0 (LL128) / 9.6 (Simple) us per network ring "
            "hop (src/graph/tuning.cc). ~5 us is a typical per-hop NCCL figure; RoCE through an Ethernet "
            "switch can add ~0.5-1 us over InfiniBand. Not a datasheet figure."
        ),
    ),
    "200gbe-rdma": Link(
        name="200GbE RoCE v2 (GPUDirect RDMA)",
        gb_per_s=25.0,
        latency_us=5.0,
        rdma=True,
        pcie_lanes=16,
        power_w=20.0,
        source=(
            "Line rate 200 Gbit/s = 25 GB/s per direction. Adapter: NVIDIA ConnectX-6 / ConnectX-6 Dx 200GbE, "
            "PCIe 4.0 x16 (ConnectX-6 EN user manual, https://docs.nvidia.com/networking/display/ConnectX6EN/"
            "Introduction). power_w ~20 W: estimate, see '200gbe'. latency_us: ~5 us typical per-hop NCCL "
            "small-message time over RDMA (verbs ~1 us + NCCL overhead; NCCL tuning model 2.7-9.6 us per "
            "network hop by protocol, src/graph/tuning.cc). Not a datasheet figure."
        ),
    ),
    # The seed brief's network: 400GbE ConnectX-7 with RDMA.
    "400gbe-rdma": Link(
        name="400GbE RoCE v2 (GPUDirect RDMA, ConnectX-7)",
        gb_per_s=50.0,
        latency_us=5.0,
        rdma=True,
        pcie_lanes=16,
        power_w=24.9,
        source=(
            "Line rate 400 Gbit/s = 50 GB/s per direction. Adapter: NVIDIA ConnectX-7 400GbE, PCIe Gen 5.0 x16 "
            "(ConnectX-7 user manuals: 'single port of NDR and 400GbE connectivity, and PCIe Gen 5.0 x16 host "
            "connectivity'). power_w: 24.9 W typical with passive cables, PCIe Gen5 x16, MCX75310AAS-NEAT "
            "(NVIDIA ConnectX-7 user manual, specifications, https://docs.nvidia.com/networking/display/"
            "connectx7vpi/specifications). latency_us: ~5 us typical per-hop NCCL small-message time over "
            "RDMA (verbs ~1 us; NCCL tuning model 2.7-9.6 us per network hop by protocol, "
            "src/graph/tuning.cc). Not a datasheet figure."
        ),
    ),
    # ---------------- inter-node: InfiniBand ----------------
    # HDR = 4 lanes x 50 Gb/s = 200 Gb/s = 25 GB/s per direction.
    "ib-hdr": Link(
        name="InfiniBand HDR 200 Gb/s (ConnectX-6 VPI)",
        gb_per_s=25.0,
        latency_us=5.0,
        rdma=True,
        pcie_lanes=16,
        power_w=20.0,
        source=(
            "InfiniBand HDR: 200 Gb/s per 4x port = 25 GB/s per direction. Adapter: NVIDIA ConnectX-6 VPI "
            "MCX653105A-HDAT (HDR IB and 200GbE, single-port QSFP56), PCIe 4.0 x16; ConnectX-6 is specified "
            "at 'up to 200Gb/s ... sub-600ns latency' (NVIDIA ConnectX-6 user manual, https://docs.nvidia.com/"
            "networking/display/ConnectX6EN/Introduction). power_w ~20 W: estimate, see '200gbe' (ConnectX-6 "
            "spec table not retrieved). latency_us: verbs one-way ~1 us (perftest ib_send_lat); ~5 us is a "
            "typical per-hop NCCL small-message figure (NCCL tuning model 2.7-9.6 us per network hop by "
            "protocol, src/graph/tuning.cc). Not a datasheet figure."
        ),
    ),
    # NDR = 4 lanes x 100 Gb/s = 400 Gb/s = 50 GB/s per direction.
    "ib-ndr": Link(
        name="InfiniBand NDR 400 Gb/s (ConnectX-7)",
        gb_per_s=50.0,
        latency_us=5.0,
        rdma=True,
        pcie_lanes=16,
        power_w=24.9,
        source=(
            "InfiniBand NDR: 400 Gb/s per 4x port = 50 GB/s per direction. Adapter: NVIDIA ConnectX-7 "
            "MCX75310AAS-NEAT (NDR 400Gb/s / 400GbE, single-port OSFP), PCIe Gen 5.0 x16; 24.9 W 'typical "
            "power with passive cables in PCIe Gen 5.0 x16' (NVIDIA ConnectX-7 adapter cards user manual, "
            "specifications, https://docs.nvidia.com/networking/display/connectx7vpi/specifications). "
            "latency_us: verbs one-way ~1 us (perftest ib_send_lat); ~5 us is a typical per-hop NCCL "
            "small-message figure (NCCL tuning model 2.7-9.6 us per network hop by protocol, "
            "src/graph/tuning.cc). Not a datasheet figure."
        ),
    ),
}

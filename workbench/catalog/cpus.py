"""Host processors (one socket each).

Units
-----
- ``base_ghz``: guaranteed base clock, GHz.
- ``pcie_lanes``: PCIe lanes of the stated generation that are usable for
  add-in devices (GPUs, NICs, drives). Lanes that permanently feed the chipset
  are *not* counted.
- ``memory_channels``: DDR channels per socket (64-bit channels; a DDR5 DIMM
  splits each into two 32-bit sub-channels, which does not change the count).
- ``max_memory_gb``: largest memory capacity per socket that the vendor lists.
  DRAM capacities are kept as vendors print them, and DIMM sizes are
  binary-sized (a "128 GB" RDIMM holds 128 GiB), so "2 TB" is recorded as
  2048 GB (16 x 128 GB DIMMs). The 1e9-byte convention of the rest of the
  catalog applies to bandwidths and drive capacities, not to this limit.
- ``tdp_w``: the vendor's default TDP, W.

Every record names its source. Vendor spec pages are cited by URL. Where a
figure was checked against a second copy during cataloguing, that copy is named too.
"""
from workbench.catalog.types import CPU

CPUS: dict[str, CPU] = {
    "ryzen-9-9950x3d": CPU(
        name="AMD Ryzen 9 9950X3D",
        cores=16,
        threads=32,
        base_ghz=4.3,
        pcie_lanes=24,
        pcie_gen=5,
        memory_channels=2,
        max_memory_gb=192,
        memory_type="ddr5",
        tdp_w=170,
        socket="AM5",
        source=(
            "AMD product page, amd.com/en/products/processors/desktops/ryzen/9000-series/"
            "amd-ryzen-9-9950x3d.html: 16 cores/32 threads, base 4.3 GHz (boost up to 5.7 GHz), "
            "default TDP 170 W, socket AM5, PCIe 5.0, DDR5 in 2 channels, official memory speed up to "
            "DDR5-5600, max memory 192 GB. PCIe lanes: AMD lists 28 PCIe 5.0 lanes in total and 24 "
            "usable. The other 4 are the link to the AM5 chipset. pcie_lanes=24 is the usable count, "
            "normally split as x16 (one GPU, or two at x8) plus x4 plus x4 (NVMe). So the chip cannot feed 8 GPUs at "
            "PCIe 5.0 x16, which would take 128 lanes. Max memory: AMD's page gives 192 GB. Board makers "
            "(MSI, ASRock) have announced 4 x 64 GB = 256 GB on AM5 boards with newer BIOSes, but that is "
            "board validation, not AMD's figure, so 192 GB is kept. Cross-checked against the TechPowerUp 9950X3D "
            "review (16C/32T) and TechPowerUp's 'Zen 4 & Socket AM5 explained' (28 lanes, 4 to the chipset)."
        ),
    ),
    "threadripper-pro-7995wx": CPU(
        name="AMD Ryzen Threadripper PRO 7995WX",
        cores=96,
        threads=192,
        base_ghz=2.5,
        pcie_lanes=128,
        pcie_gen=5,
        memory_channels=8,
        max_memory_gb=2048,
        memory_type="ddr5",
        tdp_w=350,
        socket="sTR5 (WRX90)",
        source=(
            "AMD product page, amd.com/en/products/processors/workstations/ryzen-threadripper/"
            "7000-wx-series/amd-ryzen-threadripper-pro-7995wx.html: 96 cores/192 threads, base 2.5 GHz "
            "(boost up to 5.1 GHz), default TDP 350 W, socket sTR5 on the WRX90 platform, 8-channel DDR5 "
            "RDIMM, max memory 2 TB (recorded as 2048 GB, i.e. 16 x 128 GB RDIMMs), 128 PCIe 5.0 lanes. "
            "AMD's platform total also includes extra PCIe 4.0 lanes, one link of which feeds the WRX90 "
            "chipset. Only the 128 Gen5 lanes are counted here. Enough for 8 GPUs at x16 with nothing left "
            "for NICs at x16, or 6 GPUs at x16 plus 2 NICs at x16."
        ),
    ),
    "threadripper-pro-5975wx": CPU(
        name="AMD Ryzen Threadripper PRO 5975WX",
        cores=32,
        threads=64,
        base_ghz=3.6,
        pcie_lanes=128,
        pcie_gen=4,
        memory_channels=8,
        max_memory_gb=2048,
        memory_type="ddr4",
        tdp_w=280,
        socket="sWRX8 (WRX80)",
        source=(
            "AMD product page, amd.com/en/products/processors/workstations/ryzen-threadripper/"
            "5000-wx-series/amd-ryzen-threadripper-pro-5975wx.html (AMD's spec export, as mirrored in "
            "github.com/felixsteinke/cpu-spec-dataset dataset/amd-cpus.csv): 32 cores/64 threads, base "
            "3.6 GHz (boost up to 4.5 GHz), default TDP 280 W, socket sWRX8 (WRX80 boards), PCIe 4.0, DDR4 "
            "up to 3200 MT/s in 8 channels. 128 PCIe 4.0 lanes from the CPU (AMD Threadripper PRO 5000 WX "
            "launch material; also SweClockers' launch report). Max memory 2 TB (AMD, recorded as 2048 GB)."
        ),
    ),
    "epyc-9654": CPU(
        name="AMD EPYC 9654",
        cores=96,
        threads=192,
        base_ghz=2.4,
        pcie_lanes=128,
        pcie_lanes_2p=160,  # AMD: the 2P platform exposes up to 160 lanes (3 xGMI links)
        pcie_gen=5,
        memory_channels=12,
        max_memory_gb=6144,
        memory_type="ddr5",
        tdp_w=360,
        socket="SP5",
        source=(
            "AMD product page, amd.com/en/products/processors/server/epyc/4th-generation-9004-and-8004-"
            "series/amd-epyc-9654.html: 96 cores/192 threads, base 2.4 GHz (boost up to 3.7 GHz), default "
            "TDP 360 W (cTDP 320-400 W), socket SP5, 128 PCIe 5.0 lanes per socket (1P), 12 channels of "
            "DDR5-4800, 460.8 GB/s memory bandwidth per socket (12 x 4800 MT/s x 8 B), max 6 TB per socket "
            "(recorded as 6144 GB). In a 2P system some lanes become socket-to-socket xGMI links: the 2P "
            "platform exposes 128 lanes with 4 xGMI links or 160 with 3 (about 64-80 per socket), not 256. "
            "Genoa's 12 DDR5 channels, 4800 MT/s and 6 TB/socket are also in WikiChip's Genoa page."
        ),
    ),
    "xeon-platinum-8480+": CPU(
        name="Intel Xeon Platinum 8480+",
        cores=56,
        threads=112,
        base_ghz=2.0,
        pcie_lanes=80,
        pcie_gen=5,
        memory_channels=8,
        max_memory_gb=4096,
        memory_type="ddr5",
        tdp_w=350,
        socket="FCLGA4677",
        source=(
            "Intel ARK, intel.com/content/www/us/en/products/sku/231746/intel-xeon-platinum-8480-"
            "processor-105m-cache-2-00-ghz/specifications.html: Sapphire Rapids, 56 cores/112 threads, base "
            "2.00 GHz, max turbo 3.80 GHz, TDP 350 W, FCLGA4677, max 80 PCIe 5.0 lanes, 8 memory channels "
            "of DDR5-4800 (1 DIMM per channel; 4400 at 2 per channel), max memory 4 TB (recorded as 4096 GB). "
            "NVIDIA DGX H100/H200 actually ships the Xeon Platinum 8480C, a variant of the 8480+ with the same "
            "56 cores and 2.0/3.8 GHz (NVIDIA DGX H100/H200 datasheet; NVIDIA's MLPerf system descriptions "
            "list 'Intel(R) Xeon(R) Platinum 8480C', 56 cores). 8480C details beyond cores and clocks are "
            "not on ARK, so the retail 8480+ is catalogued as its stand-in."
        ),
    ),
}

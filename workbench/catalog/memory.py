"""Host DRAM speed grades.

Units
-----
- ``mt_per_s``: data rate in megatransfers per second (MT/s).
- Peak bandwidth of one 64-bit channel = MT/s x 8 bytes, in GB/s (1e9 bytes/s).
  See ``HostMemory.gb_per_s_per_channel``. Examples: DDR4-3200 is 25.6 GB/s,
  DDR5-4800 is 38.4 GB/s and DDR5-6000 is 48.0 GB/s per channel. This is the
  transfer-rate ceiling. Measured STREAM-style bandwidth is lower.

JEDEC standards: DDR4 is JESD79-4, with speed bins up to DDR4-3200. DDR5 is
JESD79-5. Its 2020 edition defined bins up to DDR5-6400, and the 2024 update
(JESD79-5C) extended them to DDR5-8800. Some grades are JEDEC bins yet still run
as overclocks on a given CPU, because the CPU vendor validates a lower speed, or
because retail DIMMs of that speed use EXPO/XMP profiles (tighter timings, higher
voltage) rather than JEDEC timings. Each record says which case applies.
"""
from workbench.catalog.types import HostMemory

HOST_MEMORY: dict[str, HostMemory] = {
    "ddr4-3200": HostMemory(
        name="DDR4-3200",
        mt_per_s=3200,
        kind="ddr4",
        source=(
            "JEDEC JESD79-4 (DDR4 SDRAM): DDR4-3200 is the top standard speed bin, 25.6 GB/s per 64-bit "
            "channel. It is the official maximum of Threadripper PRO 5000 WX (AMD spec: 'up to 3200 MHz', "
            "8 channels, so 204.8 GB/s per socket)."
        ),
    ),
    "ddr5-4800": HostMemory(
        name="DDR5-4800",
        mt_per_s=4800,
        kind="ddr5",
        source=(
            "JEDEC JESD79-5 (DDR5 SDRAM, 2020): standard bin DDR5-4800 (4800A CL34), 38.4 GB/s per channel. "
            "It is the official maximum of AMD EPYC 9004 'Genoa' (12 channels, so 460.8 GB/s per socket) "
            "and of Intel Xeon Platinum 8480+ at 1 DIMM per channel (ARK; 8 channels, so 307.2 GB/s per socket)."
        ),
    ),
    "ddr5-5600": HostMemory(
        name="DDR5-5600",
        mt_per_s=5600,
        kind="ddr5",
        source=(
            "JEDEC JESD79-5: standard bin DDR5-5600 (5600A CL40), 44.8 GB/s per channel. It is AMD's official "
            "maximum memory speed for the Ryzen 9 9950X3D (AMD product page, 2 DIMMs, one per channel). "
            "With 2 channels that is 89.6 GB/s per socket."
        ),
    ),
    "ddr5-6000": HostMemory(
        name="DDR5-6000",
        mt_per_s=6000,
        kind="ddr5",
        source=(
            "JEDEC JESD79-5 does define a DDR5-6000 bin (6000A CL42; AnandTech's table of JEDEC DDR5 bins). "
            "But retail DDR5-6000 kits are AMD EXPO / Intel XMP profiles (typically CL30-36 at about 1.35 V). "
            "On AM5, DDR5-6000 is above AMD's official DDR5-5600 maximum for the Ryzen 9 9950X3D, so it is an "
            "EXPO/XMP overclock that AMD does not guarantee. 48.0 GB/s per channel, 96 GB/s for AM5's 2 channels."
        ),
    ),
    "ddr5-6400": HostMemory(
        name="DDR5-6400",
        mt_per_s=6400,
        kind="ddr5",
        source=(
            "JEDEC JESD79-5 (2020): DDR5-6400 (6400A CL46) was the top bin of the original DDR5 standard. "
            "51.2 GB/s per channel. On AM5 (Ryzen 9 9950X3D, official maximum DDR5-5600) it runs only as an "
            "EXPO/XMP overclock."
        ),
    ),
    "ddr5-8000": HostMemory(
        name="DDR5-8000",
        mt_per_s=8000,
        kind="ddr5",
        source=(
            "JEDEC JESD79-5C (2024 update, bins up to DDR5-8800): DDR5-8000 (8000A CL56), 64.0 GB/s per "
            "channel (AnandTech, 'JEDEC extends DDR5 specification to 8800 MT/s'). Retail DDR5-8000 kits are "
            "XMP/EXPO overclock profiles, far above AMD's DDR5-5600 maximum for AM5. Treat it as a best case "
            "for overclocked desktop memory, not as a validated speed."
        ),
    ),
}

"""NVMe drives.

Units
-----
- ``capacity_tb``: TB (1e12 bytes), as printed by the vendor.
- ``read_gb_per_s`` / ``write_gb_per_s``: vendor "up to" sequential figures in
  GB/s (1e9 bytes/s). Vendors give MB/s, and 7,000 MB/s = 7.0 GB/s. These are
  burst figures. Sustained writes drop once the SLC cache is full.
- ``power_w``: average active power from the vendor datasheet, W, where one was
  found. Records say so when the figure is not a confirmed datasheet value.

Interface ceilings for scale: PCIe 4.0 x4 is 16 GT/s x 4 x 128/130 / 8, about
7.88 GB/s per direction. PCIe 5.0 x4 is about 15.75 GB/s.
"""
from workbench.catalog.types import Drive

DRIVES: dict[str, Drive] = {
    "samsung-980-pro-2tb": Drive(
        name="Samsung 980 PRO 2TB (MZ-V8P2T0)",
        capacity_tb=2.0,
        read_gb_per_s=7.0,
        write_gb_per_s=5.1,
        pcie_gen=4,
        pcie_lanes=4,
        power_w=6.2,
        source=(
            "Samsung 980 PRO data sheet and product page (semiconductor.samsung.com/consumer-storage/"
            "internal-ssd/980pro/): PCIe 4.0 x4, NVMe 1.3c, M.2 2280. 2TB: sequential read up to 7,000 MB/s, "
            "write up to 5,100 MB/s (1TB: 7,000/5,000). It is a PCIe 4.0 drive, not PCIe 5.0. Average power "
            "6.2 W (Samsung's launch spec table, reproduced by Hardwareluxx, gives 1TB idle/average/max as "
            "35 mW/6.2 W/8.9 W, and Puget Systems' 2TB listing gives 6.2 W). The drive's NVMe PS0 ceiling "
            "is 8.49 W (AnandTech review)."
        ),
    ),
    "samsung-990-pro-2tb": Drive(
        name="Samsung 990 PRO 2TB (MZ-V9P2T0)",
        capacity_tb=2.0,
        read_gb_per_s=7.45,
        write_gb_per_s=6.9,
        pcie_gen=4,
        pcie_lanes=4,
        power_w=5.4,
        source=(
            "Samsung 990 PRO data sheet and product page (semiconductor.samsung.com/consumer-storage/"
            "internal-ssd/990-pro/): PCIe 4.0 x4, NVMe 2.0, M.2 2280. Sequential read up to 7,450 MB/s and "
            "write up to 6,900 MB/s for 1TB, 2TB and 4TB. Power: Samsung lists 5.4 W average for the 1TB and "
            "6.5 W average / 8.6 W peak for the 4TB. The 2TB's own average figure was not confirmed while "
            "cataloguing. 5.4 W is the 1TB figure used as a stand-in, and the 2TB lies between 5.4 and 6.5 W."
        ),
    ),
    "samsung-9100-pro-2tb": Drive(
        name="Samsung 9100 PRO 2TB (MZ-VAP2T0)",
        capacity_tb=2.0,
        read_gb_per_s=14.7,
        write_gb_per_s=13.4,
        pcie_gen=5,
        pcie_lanes=4,
        power_w=8.0,
        source=(
            "Samsung 9100 PRO product page (semiconductor.samsung.com/consumer-storage/internal-ssd/"
            "9100-pro/): PCIe 5.0 x4, NVMe 2.0, M.2 2280, Presto controller, V8 TLC V-NAND. 2TB: sequential "
            "read up to 14,700 MB/s, write up to 13,400 MB/s (4TB/8TB: 14,800/13,400). Speeds cross-checked "
            "with TechPowerUp's 2TB review (MZ-VAP2T0BW) and launch coverage. power_w=8.0 is a PLACEHOLDER "
            "(the catalog's default), not a datasheet value: Samsung's average-power figure for the 2TB was "
            "not found while cataloguing. Samsung only claims up to 49% better power efficiency than the 990 PRO."
        ),
    ),
    "pcie4-nvme": Drive(
        name="Generic PCIe 4.0 x4 NVMe, 2 TB",
        capacity_tb=2.0,
        read_gb_per_s=7.0,
        write_gb_per_s=6.0,
        pcie_gen=4,
        pcie_lanes=4,
        power_w=6.0,
        source=(
            "Typical high-end PCIe 4.0 x4 M.2 drive, rounded from the named drives in this catalog: Samsung "
            "980 PRO 2TB (7.0/5.1 GB/s, 6.2 W average) and Samsung 990 PRO 2TB (7.45/6.9 GB/s, about 5.4 W "
            "average). Read is taken at the lower of the two, write and power between them. PCIe 4.0 x4 tops "
            "out at about 7.88 GB/s per direction, so no Gen4 drive reads much above 7.5 GB/s."
        ),
    ),
    "pcie5-nvme": Drive(
        name="Generic PCIe 5.0 x4 NVMe, 2 TB",
        capacity_tb=2.0,
        read_gb_per_s=14.0,
        write_gb_per_s=12.0,
        pcie_gen=5,
        pcie_lanes=4,
        power_w=8.0,
        source=(
            "Typical top PCIe 5.0 x4 M.2 drive, rounded down from the vendor figures of the Samsung 9100 PRO "
            "2TB (14.7/13.4 GB/s) and the Crucial T705 2TB (14.5/12.7 GB/s, Crucial product page "
            "crucial.com/ssd/t705/ct2000t705ssd3, Phison E26). First-wave Gen5 drives such as the Crucial "
            "T700 2TB were slower (12.4/11.8 GB/s). PCIe 5.0 x4 tops out at about 15.75 GB/s per direction. "
            "power_w=8.0 is a PLACEHOLDER, not a datasheet value: neither vendor's average-power figure was "
            "confirmed while cataloguing."
        ),
    ),
}

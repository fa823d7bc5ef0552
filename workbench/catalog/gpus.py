"""Accelerators (one GPU or one module each).

Units
-----
- ``memory_gb``: on-package memory as the vendor prints it, GB (1e9 bytes).
  ("141 GB" on an H200 is what NVIDIA states; nvidia-smi shows ~143,771 MiB.)
- ``hbm_gb_per_s``: peak memory bandwidth, GB/s (1e9 bytes/s).
- ``bf16_tflops``, ``fp8_tflops``, ``tf32_tflops``: DENSE tensor-core peaks,
  TFLOP/s (1e12 FLOP/s), i.e. without 2:4 structured sparsity. NVIDIA data-center
  datasheets print the sparse figure (marked "with sparsity"), which is 2x the
  dense one, so those figures are halved here: dense = sparse/2. Each source
  says where that was done. ``fp8_tflops`` is 0 for parts without FP8 tensor cores.
- ``fp32_tflops``: non-tensor (CUDA-core / vector) FP32 peak, TFLOP/s.
- ``power_w``: maximum board power (TDP / TGP), W. Where the vendor gives a
  configurable range, the upper figure is used and the source says so.
- ``pcie_gen`` / ``pcie_lanes``: host interface of the board.
- ``form_factor``: "sxm" (SXM / OAM mezzanine modules on a baseboard), "pcie"
  (data-center PCIe cards) or "consumer" (GeForce cards).

GeForce cards run tensor-core math at HALF rate when accumulating in FP32
(FP16/BF16/FP8 inputs). Training accumulates in FP32, so the FP32-accumulate
dense figures are recorded for them. Data-center parts do not have this halving.

Every record names its source, with the year and a URL where known.
"""
from workbench.catalog.types import GPU

GPUS: dict[str, GPU] = {
    # H200 SXM: same GH100 silicon and compute as the H100 SXM, with 141 GB HBM3e at 4.8 TB/s.
    # Max TDP "up to 700 W (configurable)". NVLink 4: 18 links, 900 GB/s bidirectional
    # = 450 GB/s per direction (see links.py "nvlink4"). Host: PCIe Gen5 x16, 128 GB/s bidirectional.
    "h200-sxm": GPU(
        arch="hopper",
        name="NVIDIA H200 SXM 141GB",
        memory_gb=141,
        hbm_gb_per_s=4800,
        bf16_tflops=989.5,
        fp8_tflops=1979.0,
        power_w=700,
        fp32_tflops=67,
        tf32_tflops=494.5,
        pcie_gen=5,
        pcie_lanes=16,
        form_factor="sxm",
        source=(
            "NVIDIA H200 Tensor Core GPU datasheet / product page (2024), "
            "https://www.nvidia.com/en-us/data-center/h200/ (H200 SXM column): 141 GB HBM3e, 4.8 TB/s, "
            "FP32 67 TFLOPS, TF32 989 TFLOPS*, BF16 1,979 TFLOPS*, FP8 3,958 TFLOPS* (* = with sparsity; "
            "dense = sparse/2 -> TF32 494.5, BF16 989.5, FP8 1979), FP64 34 / FP64 Tensor 67 TFLOPS, "
            "Max TDP up to 700 W (configurable; upper figure used), NVLink 900 GB/s, PCIe Gen5 128 GB/s. "
            "Copy of the table checked in a public note (zdszero.github.io Hardware page)."
        ),
    ),
    # H200 NVL: PCIe dual-slot air-cooled card; lower clocks than the SXM (hence ~0.84x compute).
    # Max TDP "up to 600 W (configurable)". NVLink bridge 2- or 4-way, 900 GB/s per GPU
    # (450 per direction) within the bridged group; PCIe Gen5 x16 128 GB/s bidirectional.
    "h200-nvl": GPU(
        arch="hopper",
        name="NVIDIA H200 NVL 141GB",
        memory_gb=141,
        hbm_gb_per_s=4800,
        bf16_tflops=835.5,
        fp8_tflops=1670.5,
        power_w=600,
        fp32_tflops=60,
        tf32_tflops=417.5,
        pcie_gen=5,
        pcie_lanes=16,
        form_factor="pcie",
        source=(
            "NVIDIA H200 Tensor Core GPU datasheet / product page (2024), "
            "https://www.nvidia.com/en-us/data-center/h200/ (H200 NVL column): 141 GB HBM3e, 4.8 TB/s, "
            "FP32 60 TFLOPS, TF32 835 TFLOPS*, BF16 1,671 TFLOPS*, FP8 3,341 TFLOPS* (* = with sparsity; "
            "dense = sparse/2 -> TF32 417.5, BF16 835.5, FP8 1670.5), FP64 30 / FP64 Tensor 60 TFLOPS, "
            "Max TDP up to 600 W (configurable; upper figure used), form factor PCIe dual-slot air-cooled, "
            "NVLink bridge 2- or 4-way 900 GB/s per GPU, PCIe Gen5 128 GB/s, MIG up to 7 @ 16.5 GB."
        ),
    ),
    # H100 SXM5: Max TDP "up to 700 W (configurable)". NVLink 4 (900 GB/s bidirectional).
    # The datasheet's 3.35 TB/s is the shipping figure; the 2022 Hopper whitepaper's
    # preliminary table said 3,000 GB/s and 1000/2000 TFLOPS (not final clocks).
    "h100-sxm": GPU(
        arch="hopper",
        name="NVIDIA H100 SXM5 80GB",
        memory_gb=80,
        hbm_gb_per_s=3350,
        bf16_tflops=989.5,
        fp8_tflops=1979.0,
        power_w=700,
        fp32_tflops=67,
        tf32_tflops=494.5,
        pcie_gen=5,
        pcie_lanes=16,
        form_factor="sxm",
        source=(
            "NVIDIA H100 Tensor Core GPU datasheet (2023), https://www.nvidia.com/en-us/data-center/h100/ "
            "and https://resources.nvidia.com/en-us-tensor-core (H100 SXM column): 80 GB HBM3, 3.35 TB/s, "
            "FP32 67 TFLOPS, TF32 989 TFLOPS*, BF16 1,979 TFLOPS*, FP8 3,958 TFLOPS* (* = with sparsity, "
            "'specifications 1/2 lower without sparsity'; dense = sparse/2 -> TF32 494.5, BF16 989.5, "
            "FP8 1979), Max TDP up to 700 W (configurable; upper figure used), NVLink 900 GB/s, "
            "PCIe Gen5 128 GB/s. Matches the computed Hopper peaks listed by glennklockwood.com "
            "(BF16 matrix 989.4, FP8 1978.9 dense)."
        ),
    ),
    # H100 PCIe (the original 2022 PCIe card, 114 SMs, HBM2e). TDP 300-350 W configurable;
    # the product brief says it "operates unconstrained up to its maximum TDP level of 350 W".
    # NVLink bridge pairs two cards at 600 GB/s bidirectional. Not the later H100 NVL (94 GB).
    "h100-pcie": GPU(
        arch="hopper",
        name="NVIDIA H100 PCIe 80GB",
        memory_gb=80,
        hbm_gb_per_s=2000,
        bf16_tflops=756.5,
        fp8_tflops=1513.0,
        power_w=350,
        fp32_tflops=51,
        tf32_tflops=378,
        pcie_gen=5,
        pcie_lanes=16,
        form_factor="pcie",
        source=(
            "NVIDIA H100 Tensor Core GPU datasheet (2022/2023, H100 PCIe column), "
            "https://www.nvidia.com/en-us/data-center/h100/: 80 GB HBM2e, 2 TB/s (2,000 GB/s), FP32 51 TFLOPS, "
            "TF32 756 TFLOPS*, BF16 1,513 TFLOPS*, FP8 3,026 TFLOPS* (* = with sparsity; dense = sparse/2 "
            "-> TF32 378, BF16 756.5, FP8 1513), TDP 300-350 W (configurable; upper figure 350 W used), "
            "NVLink bridge 600 GB/s, PCIe Gen5 128 GB/s. Power and bandwidth also in NVIDIA H100 PCIe "
            "Product Brief PB-11133-001_v02 (Nov 2022): 'maximum thermal design power (TDP) level of "
            "350 W', memory bandwidth 'greater than 2,000 GBps'."
        ),
    ),
    # A100 SXM4 80GB: TDP 400 W standard; the HGX A100-80GB CTS (custom thermal solution)
    # SKU supports up to 500 W, a different SKU, so 400 W is kept. No FP8 tensor cores.
    # NVLink 3: 12 links, 600 GB/s bidirectional = 300 per direction. Host PCIe Gen4 x16.
    "a100-sxm-80gb": GPU(
        arch="ampere",
        name="NVIDIA A100 SXM4 80GB",
        memory_gb=80,
        hbm_gb_per_s=2039,
        bf16_tflops=312,
        fp8_tflops=0,
        power_w=400,
        fp32_tflops=19.5,
        tf32_tflops=156,
        pcie_gen=4,
        pcie_lanes=16,
        form_factor="sxm",
        source=(
            "NVIDIA A100 Tensor Core GPU datasheet (2021), https://www.nvidia.com/content/dam/en-zz/"
            "Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf "
            "(A100 80GB SXM column): 80 GB HBM2e, 2,039 GB/s, FP32 19.5 TFLOPS, TF32 156 | 312* TFLOPS, "
            "BF16 312 | 624* TFLOPS (A100 prints dense | sparse, so the dense figure is taken directly; "
            "it equals sparse/2), no FP8. Max TDP 400 W ('400W TDP for standard configuration. "
            "HGX A100-80GB CTS SKU can support TDPs up to 500W'), NVLink 600 GB/s, PCIe Gen4 64 GB/s."
        ),
    ),
    # A100 SXM4 40GB: the launch part, HBM2; same compute and power as the 80GB SXM.
    "a100-sxm-40gb": GPU(
        arch="ampere",
        name="NVIDIA A100 SXM4 40GB",
        memory_gb=40,
        hbm_gb_per_s=1555,
        bf16_tflops=312,
        fp8_tflops=0,
        power_w=400,
        fp32_tflops=19.5,
        tf32_tflops=156,
        pcie_gen=4,
        pcie_lanes=16,
        form_factor="sxm",
        source=(
            "NVIDIA A100 Tensor Core GPU datasheet (2020 edition, A100 40GB SXM) and NVIDIA Ampere "
            "Architecture (GA100) whitepaper (2020), https://images.nvidia.com/aem-dam/en-zz/Solutions/"
            "data-center/nvidia-ampere-architecture-whitepaper.pdf, Table 'A100 Tensor Core GPU': "
            "40 GB HBM2, 1,555 GB/s, Peak FP32 19.5, TF32 156/312 (dense/sparse), BF16 312/624 (dense/"
            "sparse; dense taken directly = sparse/2), no FP8, TDP 400 W, NVLink 600 GB/s, PCIe Gen4."
        ),
    ),
    # A100 PCIe 80GB: 300 W card; NVLink bridge for up to two GPUs (600 GB/s bidirectional).
    "a100-pcie-80gb": GPU(
        arch="ampere",
        name="NVIDIA A100 PCIe 80GB",
        memory_gb=80,
        hbm_gb_per_s=1935,
        bf16_tflops=312,
        fp8_tflops=0,
        power_w=300,
        fp32_tflops=19.5,
        tf32_tflops=156,
        pcie_gen=4,
        pcie_lanes=16,
        form_factor="pcie",
        source=(
            "NVIDIA A100 Tensor Core GPU datasheet (2021), https://www.nvidia.com/content/dam/en-zz/"
            "Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf "
            "(A100 80GB PCIe column): 80 GB HBM2e, 1,935 GB/s, FP32 19.5, TF32 156 | 312*, "
            "BF16 312 | 624* TFLOPS (dense taken directly = sparse/2), no FP8, Max TDP 300 W, "
            "NVLink Bridge for 2 GPUs 600 GB/s, PCIe Gen4 64 GB/s."
        ),
    ),
    # B200 as shipped on HGX B200 (8 GPUs per baseboard): 180 GB HBM3e, 7.7 TB/s per GPU;
    # Max TDP "configurable up to 1,000 W". Earlier announcements quoted 192 GB / 8 TB/s.
    # NVLink 5: 18 links x 50 GB/s per direction = 1.8 TB/s bidirectional per GPU.
    "b200": GPU(
        arch="blackwell",
        name="NVIDIA B200 (HGX B200, SXM6) 180GB",
        memory_gb=180,
        hbm_gb_per_s=7700,
        bf16_tflops=2250,
        fp8_tflops=4500,
        # FP4: HGX B200 datasheet (https://www.nvidia.com/en-us/data-center/hgx/, per GPU)
        # "FP4 Tensor Core 18 PFLOPS" with sparsity -> dense 9,000; the Blackwell Architecture
        # Technical Brief v2.1 Table 3 prints HGX B200 FP4 as 9/18 PFLOPS (dense/sparse).
        fp4_tflops=9000,
        power_w=1000,
        fp32_tflops=75,
        tf32_tflops=1100,
        pcie_gen=5,
        pcie_lanes=16,
        form_factor="sxm",
        source=(
            "NVIDIA Blackwell datasheet (2024/2025 editions; HGX B200 column, per GPU), "
            "https://www.nvidia.com/en-us/data-center/hgx/ : FP8/FP6 Tensor 9 PFLOPS, FP16/BF16 Tensor "
            "4.5 PFLOPS, TF32 Tensor 2.2 PFLOPS, all with sparsity (dense = sparse/2 -> FP8 4500, "
            "BF16 2250, TF32 1100 TFLOPS), FP32 75 TFLOPS, FP64 37 TFLOPS, 180 GB HBM3e, 7.7 TB/s, "
            "Max TDP configurable up to 1,000 W (upper figure used), 5th-gen NVLink 1.8 TB/s, "
            "PCIe Gen5 128 GB/s. The NVIDIA Blackwell Architecture Technical Brief (v2.1), Table 3, "
            "prints the same HGX B200 figures as dense/sparse pairs (FP8 4.5/9, BF16 2.2/4.5, TF32 "
            "1.1/2.2 PFLOPS). HGX B200 8-GPU totals: 1.4 TB, 62 TB/s, NVLink 14.4 TB/s."
        ),
    ),
    # RTX 4090 (consumer, AD102, 128 SMs). GeForce runs FP16/BF16/FP8 tensor math at half rate
    # with FP32 accumulate: BF16 is only offered with FP32 accumulate (165.2 dense); FP16 with
    # FP16 accumulate is 330.3. FP8 with FP32 accumulate is 330.3 dense (660.6 with FP16 accumulate;
    # the whitepaper corrected the FP8/FP32-acc row in v2.02). Training accumulates in FP32, so the
    # FP32-accumulate figures are used. TGP 450 W. No NVLink. PCIe 4.0 x16.
    "rtx-4090": GPU(
        arch="ada",
        name="NVIDIA GeForce RTX 4090 24GB",
        memory_gb=24,
        hbm_gb_per_s=1008,
        bf16_tflops=165.2,
        fp8_tflops=330.3,
        power_w=450,
        fp32_tflops=82.6,
        tf32_tflops=82.6,
        pcie_gen=4,
        pcie_lanes=16,
        form_factor="consumer",
        source=(
            "NVIDIA Ada GPU Architecture whitepaper v2.02 (2023), Appendix A Table 2 'GeForce RTX 4090', "
            "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf: "
            "24 GB GDDR6X, 1,008 GB/s, Peak FP32 82.6 TFLOPS (non-tensor), Peak TF32 Tensor 82.6/165.2, "
            "Peak BF16 Tensor with FP32 Accumulate 165.2/330.4, Peak FP16 Tensor with FP16 Accumulate "
            "330.3/660.6, Peak FP8 Tensor with FP32 Accumulate 330.3/660.6 (FP16 Accumulate 660.6/1321.2); "
            "pairs are dense/sparse, so the dense (first) figure is used (= sparse/2). FP32-ACCUMULATE "
            "figures chosen because training accumulates in FP32 and GeForce halves the tensor rate with "
            "FP32 accumulate. TGP 450 W, PCIe 4.0 x16."
        ),
    ),
    # RTX 5090 (consumer, GB202, 170 SMs): same GeForce half-rate-with-FP32-accumulate rule.
    # TGP 575 W. No NVLink. PCIe 5.0 x16.
    "rtx-5090": GPU(
        arch="blackwell",
        name="NVIDIA GeForce RTX 5090 32GB",
        memory_gb=32,
        hbm_gb_per_s=1792,
        bf16_tflops=209.5,
        fp8_tflops=419,
        # FP4: RTX Blackwell GPU Architecture whitepaper (2025) Table 3 'GeForce RTX 5090',
        # "Peak FP4 Tensor TFLOPS with FP32 Accumulate (FP4 AI TOPS)" 1676/3352 (dense/sparse;
        # NVIDIA's "3352 AI TOPS" is the sparse figure) -> dense 1,676.
        fp4_tflops=1676,
        power_w=575,
        fp32_tflops=104.8,
        tf32_tflops=104.8,
        pcie_gen=5,
        pcie_lanes=16,
        form_factor="consumer",
        source=(
            "NVIDIA RTX Blackwell GPU Architecture whitepaper (2025), Table 3 'GeForce RTX 5090', "
            "https://images.nvidia.com/aem-dam/Solutions/geforce/blackwell/nvidia-rtx-blackwell-gpu-"
            "architecture.pdf: 32 GB GDDR7, 1,792 GB/s, Peak FP32 104.8 TFLOPS, Peak TF32 Tensor "
            "104.8/209.5, Peak BF16 Tensor with FP32 Accumulate 209.5/419, Peak FP8 Tensor with FP32 "
            "Accumulate 419/838 (FP16 accumulate 838/1676); pairs are dense/sparse, dense used "
            "(= sparse/2). FP32-accumulate figures chosen for training (GeForce halves the rate with FP32 "
            "accumulate). TGP 575 W, PCIe 5.0 x16. Dense BF16 cross-checked: 170 SM x 512 FLOP/clk x "
            "2.407 GHz = 209.5 TFLOPS."
        ),
    ),
    # L40S (data-center Ada, AD102, 142 SMs, passive PCIe card). Max power 350 W, no NVLink,
    # PCIe Gen4 x16. Caveat: the datasheet does not say which accumulate precision its BF16/FP8
    # figures assume; its dense BF16 figure (362.05) is printed directly and is NOT exactly half of
    # the sparse 733. Treat the tensor peaks as optimistic for FP32-accumulate training.
    "l40s": GPU(
        arch="ada",
        name="NVIDIA L40S 48GB",
        memory_gb=48,
        hbm_gb_per_s=864,
        bf16_tflops=362.05,
        fp8_tflops=733,
        power_w=350,
        fp32_tflops=91.6,
        tf32_tflops=183,
        pcie_gen=4,
        pcie_lanes=16,
        form_factor="pcie",
        source=(
            "NVIDIA L40S datasheet (2023), https://www.nvidia.com/en-us/data-center/l40s/: 48 GB GDDR6 "
            "with ECC, 864 GB/s, FP32 91.6 TFLOPS, TF32 Tensor 183 | 366*, BFLOAT16 Tensor 362.05 | 733*, "
            "FP16 Tensor 362.05 | 733*, FP8 Tensor 733 | 1,466* TFLOPS (* = with sparsity; dense figures "
            "printed by NVIDIA are used directly, roughly sparse/2), Max Power 350 W, PCIe Gen4 x16 "
            "64 GB/s bidirectional, no NVLink, no MIG. Accumulate precision not stated by NVIDIA."
        ),
    ),
    # MI300X: OAM module (OCP Accelerator Module) on an 8-GPU UBB baseboard, recorded as "sxm"
    # (the catalog's mezzanine-module form factor). AMD prints dense figures and, separately,
    # "with structured sparsity" figures (2x). GPU-GPU: 7 Infinity Fabric links of 128 GB/s
    # (bidirectional) each, i.e. 896 GB/s aggregate per GPU in a fully connected 8-GPU node.
    "mi300x": GPU(
        arch="cdna3",
        name="AMD Instinct MI300X 192GB (OAM)",
        memory_gb=192,
        hbm_gb_per_s=5300,
        bf16_tflops=1307.4,
        fp8_tflops=2614.9,
        power_w=750,
        fp32_tflops=163.4,
        tf32_tflops=653.7,
        pcie_gen=5,
        pcie_lanes=16,
        form_factor="sxm",
        source=(
            "AMD Instinct MI300X accelerator data sheet (2023), https://www.amd.com/content/dam/amd/en/"
            "documents/instinct-tech-docs/data-sheets/amd-instinct-mi300x-data-sheet.pdf: 192 GB HBM3, "
            "5.3 TB/s, peak FP16/BF16 1,307.4 TFLOPS (2,614.9 with structured sparsity), peak FP8 "
            "2,614.9 TFLOPS (5,229.8 with sparsity), TF32 653.7 TFLOPS, FP32 vector 163.4 TFLOPS, "
            "total board power 750 W, OAM module, host PCIe Gen5 x16. AMD prints the dense figures "
            "directly (sparse = 2x dense). Same dense figures used in public MI300X-vs-H200 studies "
            "(e.g. github.com/alpharomercoma/MI300X-vs-H200 METHODOLOGY.md)."
        ),
    ),
}


# What the CUDA driver and NVML call each part (``torch.cuda.get_device_name``, nvidia-smi's
# "name"), lower-cased, against the catalog key: the longest matching prefix wins. "NVIDIA
# H200" was read off a real H200 SXM (nvidia-smi, benchmarks/gpu_check.py, 2026-12-04); the
# others are the driver's product names as NVIDIA prints them in nvidia-smi. A part that matches
# none (an H100 NVL, a GeForce not listed; AMD parts, which NVML does not see) is not guessed.
DEVICE_NAMES = {
    "nvidia h200 nvl": "h200-nvl",
    "nvidia h200": "h200-sxm",
    "nvidia h100 80gb hbm3": "h100-sxm",
    "nvidia h100 sxm": "h100-sxm",
    "nvidia h100 pcie": "h100-pcie",
    "nvidia a100-sxm4-80gb": "a100-sxm-80gb",
    "nvidia a100-sxm4-40gb": "a100-sxm-40gb",
    "nvidia a100 80gb pcie": "a100-pcie-80gb",
    "nvidia b200": "b200",
    "nvidia geforce rtx 4090": "rtx-4090",
    "nvidia geforce rtx 5090": "rtx-5090",
    "nvidia l40s": "l40s",
}


def catalog_key_for_device(name: str) -> str | None:
    """The catalog key of the GPU the driver calls ``name`` (None when no entry matches)."""
    low = " ".join(str(name).lower().split())
    hits = [prefix for prefix in DEVICE_NAMES if low.startswith(prefix)]
    return DEVICE_NAMES[max(hits, key=len)] if hits else None

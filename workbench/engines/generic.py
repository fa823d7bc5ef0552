"""``generic``: the idealised stack the estimator modelled before engines existed — fused
elementwise kernels, every data-parallel collective overlapped as the best engines do it,
gradients sharded exactly as ZeRO says, no switches. Its estimates are the reference the
others are compared with, and they stay as they were (tests/data/estimate_golden.json)."""
from workbench.engines.types import NVFP4_TE, OPTIMIZERS, Engine

ENGINE = Engine(
    name="generic",
    label="generic (idealised)",
    about="No particular engine: fused kernels, full overlap, ZeRO as in the paper.",
    switches=(),
    recompute=("none", "selective", "full"),
    zero=(0, 1, 2, 3),
    attention="flash2",
    allowance_in_total=True,
    # Its FP8 is Transformer Engine's (estimate.time.fp8_casts.GENERIC_RECIPE); so is its FP4.
    fp4_recipes={"nvfp4": NVFP4_TE},
    # every method and optimizer the scenario can name, each costed by its mechanism
    methods=("pretrain", "full", "lora", "qlora"),
    optimizers=OPTIMIZERS,
    sources=("Rajbhandari et al. 2020 (ZeRO); Korthikanti et al. 2022 (selective recompute)",),
)

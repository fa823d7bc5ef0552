"""NVFP4 training (Transformer Engine's NVFP4BlockScaling, Megatron --fp4-format e2m1
--fp4-recipe nvfp4): where it is allowed, the GEMM time at the FP4 peak x ceiling for the blocks'
linears and bf16 for the rest, the casts, and the bytes the recipe keeps."""
from __future__ import annotations

import dataclasses

import pytest

from workbench.catalog import GPUS, MODELS
from workbench.engines import ENGINES
from workbench.errors import ScenarioError
from workbench.estimate.time import kernels as eff
from workbench.estimate.memory.activations import activation_shape, head_bytes, layer_terms
from workbench.estimate.model.attention import attention_gemms
from workbench.estimate.memory.buffers import buffer_terms
from workbench.estimate.time.fp8_casts import cast_traffic, layer_operands
from workbench.estimate.memory.model_states import bytes_per_param
from workbench.estimate.time.block_costs import block_costs
from workbench.scenario import load_scenario

EXAMPLE = "examples/llama3-8b-8xh100.yaml"
B200 = ["hardware.gpu=b200", "training.engine=megatron", "training.precision=nvfp4"]


def test_nvfp4_is_refused_on_a_gpu_without_fp4_tensor_cores():
    with pytest.raises(ScenarioError) as err:
        load_scenario(EXAMPLE, ["training.engine=megatron", "training.precision=nvfp4"])
    assert str(err.value) == (
        "training.precision: NVIDIA H100 SXM5 80GB has no FP4 tensor cores (hardware.gpu."
        "fp4_tflops 0; FP4 GPUs: b200, rtx-5090); use one of fp32, fp16, bf16, fp8 "
        "(got 'nvfp4')")


def test_nvfp4_is_refused_by_an_engine_without_the_recipe():
    with pytest.raises(ScenarioError) as err:
        load_scenario(EXAMPLE, ["hardware.gpu=b200", "training.engine=deepspeed",
                                "training.precision=nvfp4"])
    assert str(err.value) == (
        "training.precision: engine deepspeed has no nvfp4 recipe (FP4 training: generic, "
        "megatron); use one of fp32, fp16, bf16, fp8 (got 'nvfp4')")
    # Megatron and the generic engine train it on a B200
    assert load_scenario(EXAMPLE, B200).training.precision == "nvfp4"
    assert load_scenario(EXAMPLE, ["hardware.gpu=b200", "training.precision=nvfp4"])


def test_catalog_fp4_peaks_are_the_dense_datasheet_figures():
    assert GPUS["b200"].fp4_tflops == 9000 and GPUS["rtx-5090"].fp4_tflops == 1676
    assert GPUS["h100-sxm"].fp4_tflops == 0


def test_nvfp4_gemm_runs_at_the_fp4_peak_times_its_ceiling():
    gpu = GPUS["b200"]
    assert eff.peak_flops(gpu, "nvfp4") == 9000e12
    # torchao's burst 0.564 held to the clock the 1000 W limit leaves (the B200's bf16
    # MSMF / MAMF, estimate/time/sustained.py)
    ceiling = 0.564 * 0.6396 / 0.772
    assert eff.matmul_efficiency(gpu, "nvfp4") == pytest.approx(ceiling, rel=1e-12)
    assert eff.matmul_efficiency(GPUS["rtx-5090"], "nvfp4") == pytest.approx(ceiling, rel=1e-12)
    m = n = k = 8192
    want = 2 * m * n * (k + eff.GEMM_K0) / (9000e12 * ceiling) + eff.KERNEL_OVERHEAD_S
    assert eff.gemm_time(m, n, k, gpu, "nvfp4") == pytest.approx(want, rel=1e-12)


def test_nvfp4_times_the_block_linears_in_fp4_and_the_head_in_bf16():
    s = load_scenario(EXAMPLE, B200 + ["parallel.tp=2", "parallel.dp=4",
                                       "parallel.sequence_parallel=true"])
    m, tr, t = s.model, s.training, s.parallel.tp
    gpu = GPUS["b200"]
    tokens = tr.seq_len * tr.micro_batch
    f = m.ffn_hidden / t
    want = sum(eff.gemm_time(tokens * a.rows, a.n, a.k, gpu, "nvfp4", a.count)
               for a in attention_gemms(m, t, True))
    want += (eff.gemm_time(tokens, 2 * f, m.hidden, gpu, "nvfp4")
             + eff.gemm_time(tokens, m.hidden, f, gpu, "nvfp4"))
    costs = block_costs(s)
    # fprop = dgrad = wgrad GEMMs, all NVFP4 (summed in another order: last-bit rounding)
    assert costs["dense"].wgrad == pytest.approx(want, rel=1e-12)
    assert costs["head"].wgrad == eff.gemm_time(tokens, m.vocab / t, m.hidden, gpu, "bf16")


def test_nvfp4_casts_read_twice_and_write_two_fp4_copies():
    """Every operand: amax read 2 B + cast read 2 B + rowwise and columnwise E2M1 with an E4M3
    scale per 16 (2 x 0.5625 B); the weight's 2D-scaled transpose comes with its forward cast."""
    m = MODELS["llama3-8b"]
    recipe = ENGINES["megatron"].fp4_recipes["nvfp4"]
    M = 4096
    h, q, kv, f = m.hidden, m.heads * m.dim_per_head, m.kv_dim, m.ffn_hidden
    got = cast_traffic(layer_operands(m, recipe, "te", False, M, 1, False, False),
                       recipe.casts)
    # Megatron's fused linear_qkv and fc1 cast their shared input once
    inputs = M * (h + q + h + f)
    weights = h * (q + 2 * kv) + q * h + 2 * h * f + f * h
    grads = M * (q + 2 * kv + h + 2 * f + h)
    assert got.fwd == 5.125 * (inputs + weights)
    assert got.bwd == 5.125 * grads


def test_nvfp4_keeps_bf16_weights_fp32_grads_and_masters():
    for zero in (0, 1):
        assert bytes_per_param("nvfp4", "adamw", zero) == bytes_per_param("bf16", "adamw", zero)
    bpp = bytes_per_param("nvfp4", "adamw", 1)
    assert (bpp.params, bpp.grads, bpp.optimizer) == (2, 4, 12)


def test_nvfp4_saves_fp4_gemm_inputs_and_caches_fp4_weights():
    s = load_scenario(EXAMPLE, B200)
    bf = load_scenario(EXAMPLE, B200[:2] + ["training.precision=bf16"])
    x, xb = activation_shape(s.training, s.parallel), activation_shape(bf.training, bf.parallel)
    assert x.gemm_in == 0.5625 and x.elem == 2
    terms, ref = layer_terms(s.model, x, False), layer_terms(bf.model, xb, False)
    for key in ("attn.qkv_input", "mlp.fc1_input", "mlp.fc2_input"):
        assert terms[key] == ref[key] * 0.5625 / 2
    sb = s.training.seq_len * s.training.micro_batch
    assert terms["attn.proj_input"] == sb * s.model.heads * s.model.dim_per_head * 0.5625
    assert head_bytes(s.model, x) == head_bytes(bf.model, xb)   # the head is bf16
    unit = 218_112_000
    got = buffer_terms(s.model, s.parallel, x, "nvfp4", 8e9, unit, True, False)
    assert got["fp8_weights"] == 2 * unit * 0.5625


def test_exports_megatron_fp4_flags_and_reads_them_back():
    from workbench.export.megatron import megatron_args
    from workbench.imports import megatron as mi
    args = megatron_args(load_scenario(EXAMPLE, B200))
    i = args.index("--fp4-format")
    assert args[i:i + 4] == ["--fp4-format", "e2m1", "--fp4-recipe", "nvfp4"]
    assert "--bf16" in args and "--fp8-format" not in args
    back = mi.read("train.sh", "torchrun pretrain_gpt.py --bf16 --fp4-format e2m1\n")
    assert back.document["training"]["precision"] == "nvfp4"
    bad = mi.read("train.sh", "torchrun pretrain_gpt.py --bf16 --fp4-format e2m1 "
                              "--fp4-recipe custom\n")
    assert [str(p) for p in bad.problems] == [
        "train.sh:--fp4-recipe: expected nvfp4 (custom quantizers are not costed) "
        "(got 'custom')"]


def test_edges_stay_bf16_under_nvfp4_and_an_unknown_arch_takes_blackwells_fp4_ceiling():
    assert eff.edge_precision("fp8") == "fp8" and eff.edge_precision("nvfp4") == "bf16"
    h100 = dataclasses.replace(GPUS["h100-sxm"], fp4_tflops=1.0, arch="")
    # the assumption: Blackwell's
    assert eff.matmul_efficiency(h100, "nvfp4") == pytest.approx(0.564 * 0.6396 / 0.772,
                                                                 rel=1e-12)

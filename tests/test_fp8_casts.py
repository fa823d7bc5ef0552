"""FP8 casts as torchao's roofline counts them, FP8 FSDP all-gather, FP8 attention, FP4."""
from __future__ import annotations

import pytest

from workbench.catalog import MODELS
from workbench.engines import ENGINES
from workbench.estimate import estimate
from workbench.estimate.time.fp8_casts import cast_traffic, layer_operands
from workbench.scenario import load_scenario

EXAMPLE = "examples/llama3-8b-8xh100.yaml"


def _roofline_tensorwise(M, K, N, fused):
    """torchao roofline_utils.get_float8_mem_sympy, tensorwise, in bytes (pytorch/ao@0598012
    torchao/testing/training/roofline_utils.py): input [amax 2, cast 2 + 1 + 1] (amax dropped
    when fused), weight [amax 2, cast 2 + 1, cast 2 + 1], grad_output like the input."""
    act = (0 if fused else 2) + 2 + 2 * 1
    return M * K * act + K * N * (2 + 3 + 3) + M * N * act


@pytest.mark.parametrize("fusion", ["none", "compile"])
def test_cast_bytes_of_a_llama_layer_equal_torchaos_roofline(fusion):
    m = MODELS["llama3-8b"]
    recipe = ENGINES["torchtitan"].fp8_recipes["tensorwise"]
    M = 8192
    h, q, kv, f = m.hidden, m.heads * m.dim_per_head, m.kv_dim, m.ffn_hidden
    # torchtitan's linears: wq, wk, wv, wo, w1, w3, w2 — each counted on its own
    linears = [(h, q), (h, kv), (h, kv), (q, h), (h, f), (h, f), (f, h)]
    expected = sum(_roofline_tensorwise(M, k, n, fusion == "compile") for k, n in linears)
    got = cast_traffic(layer_operands(m, recipe, fusion, True, M, 1, False, False),
                       recipe.casts)
    assert got.fwd + got.bwd == expected
    # the forward's part (what a recomputed forward casts again): inputs and the weight's
    # first two kernels
    act_in = (0 if fusion == "compile" else 2) + 4
    assert got.fwd == sum(M * k * act_in + k * n * 5 for k, n in linears)


def test_float8_tp_casts_on_the_sequence_shard_once_per_input():
    """Under torchao's float8 TP (tensorwise) the column-parallel inputs are cast on the
    rank's s/t tokens once (PrepareFloat8ModuleInput), the row-parallel output gradients on
    the shard; weights and the sharded widths on the rank's share."""
    m = MODELS["llama3-8b"]
    recipe = ENGINES["torchtitan"].fp8_recipes["tensorwise"]
    M, t = 8192, 8
    h, q, kv, f = m.hidden, m.heads * m.dim_per_head, m.kv_dim, m.ffn_hidden
    got = cast_traffic(layer_operands(m, recipe, "none", True, M, t, True, False),
                       recipe.casts)
    inputs = 6 * (M / t * h + M * q / t + M / t * h + M * f / t)
    weights = 8 * (h * (q + 2 * kv) / t + q / t * h + 2 * h * f / t + f / t * h)
    grads = 6 * (M * (q + 2 * kv) / t + M / t * h + 2 * M * f / t + M / t * h)
    assert got.fwd + got.bwd == pytest.approx(inputs + weights + grads, rel=1e-12)


def test_rowwise_casts_after_the_gather_each_projection():
    m = MODELS["llama3-8b"]
    recipe = ENGINES["torchtitan"].fp8_recipes["rowwise"]
    M, t = 8192, 8
    h, q, kv, f = m.hidden, m.heads * m.dim_per_head, m.kv_dim, m.ffn_hidden
    got = cast_traffic(layer_operands(m, recipe, "none", True, M, t, True, False),
                       recipe.casts)
    # roofline rowwise: input/grad 8 B, weight 3 + 4 + 3 = 10 B
    inputs = 8 * (3 * M * h + M * q / t + 2 * M * h + M * f / t)
    weights = 10 * (h * (q + 2 * kv) / t + q / t * h + 2 * h * f / t + f / t * h)
    grads = 8 * (M * (q + 2 * kv) / t + M * h + 2 * M * f / t + M * h)
    assert got.fwd + got.bwd == pytest.approx(inputs + weights + grads, rel=1e-12)


def test_transformer_engine_fuses_the_norm_and_activation_casts():
    """Megatron (TE delayed): the qkv and fc1 inputs come quantized out of the norm, fc2's out
    of the activation, fc1's output gradient out of its backward: only proj's input, the
    weights and the other output gradients are cast, 4 B each (2 + 1 + 1)."""
    m = MODELS["llama3-8b"]
    recipe = ENGINES["megatron"].fp8_recipes["delayed"]
    M = 4096
    h, q, kv, f = m.hidden, m.heads * m.dim_per_head, m.kv_dim, m.ffn_hidden
    got = cast_traffic(layer_operands(m, recipe, "te", False, M, 1, False, False),
                       recipe.casts)
    assert got.fwd == 4 * (M * q + h * (q + 2 * kv) + q * h + 2 * h * f + f * h)
    assert got.bwd == 4 * (M * (q + 2 * kv) + M * h + M * h)


def _ratio(tp, *extra):
    steps = {}
    for prec in ("bf16", "fp8"):
        s = load_scenario(EXAMPLE, ["training.engine=torchtitan", "training.recompute=full",
                                    f"training.precision={prec}", f"parallel.tp={tp}",
                                    f"parallel.dp={8 // tp}", "parallel.sequence_parallel=true",
                                    *extra])
        steps[prec] = estimate(s).time.step
    return steps["bf16"] / steps["fp8"]


def test_fp8_is_not_slower_than_bf16_at_tp8_on_the_example():
    """The example under torchtitan, ZeRO-3, full recompute: FP8 (tensorwise) was 23 % slower
    than bf16 at TP 8 with the casts counted on the full sequence and doubled."""
    assert _ratio(8) > 1.0
    assert _ratio(1) > 1.0


def _dp_gather(*extra):
    s = load_scenario(EXAMPLE, ["training.engine=torchtitan", "training.recompute=full",
                                "training.precision=fp8", *extra])
    return s, estimate(s).time.volume["dp"]["all_gather"]


def test_fp8_param_gather_halves_the_linear_weights_in_the_zero3_gather():
    from workbench.estimate.model.finetune import linear_weights
    s, bf16 = _dp_gather()
    _, fp8 = _dp_gather("training.fp8_param_gather=true")
    m = s.model
    linear = m.layers * linear_weights(m, False, 1)
    # every gather of the step (one per FSDP unit: the blocks and the root, per microbatch
    # forward and backward): the blocks' linear weights 1 byte instead of 2, the rest as is
    gathers = fp8["count"] / (m.layers + 1)
    assert fp8["count"] == bf16["count"] and gathers == 16
    assert bf16["bytes"] - fp8["bytes"] == pytest.approx(linear * gathers, rel=1e-12)
    held = bf16["bytes"] / gathers / 2
    assert fp8["bytes"] / gathers == pytest.approx(2 * held - linear, rel=1e-12)


def test_fp8_switches_are_checked():
    from workbench.errors import ScenarioError
    with pytest.raises(ScenarioError, match="training.fp8_param_gather: needs training"
                                            ".precision fp8"):
        load_scenario(EXAMPLE, ["training.engine=torchtitan", "training.fp8_param_gather=true"])
    with pytest.raises(ScenarioError, match="training.fp8_param_gather: engine torchtitan "
                                            "gathers FP8 parameters with fp8_recipe tensorwise"):
        load_scenario(EXAMPLE, ["training.engine=torchtitan", "training.precision=fp8",
                                "training.fp8_recipe=rowwise", "training.fp8_param_gather=true"])
    with pytest.raises(ScenarioError, match="training.fp8_attention: engine torchtitan does "
                                            "not offer it"):
        load_scenario(EXAMPLE, ["training.engine=torchtitan", "training.precision=fp8",
                                "training.fp8_attention=true"])


def test_fp8_attention_runs_the_attention_kernel_at_the_fp8_rate():
    base = ["training.engine=megatron", "training.precision=fp8"]
    plain = estimate(load_scenario(EXAMPLE, base)).time
    fast = estimate(load_scenario(EXAMPLE, base + ["training.fp8_attention=true"])).time
    assert fast.step < plain.step


def test_exports_and_imports_carry_the_fp8_switches():
    from workbench.export.megatron import megatron_args
    from workbench.imports import megatron as mi
    s = load_scenario(EXAMPLE, ["training.engine=megatron", "training.precision=fp8",
                                "training.fp8_param_gather=true", "training.fp8_attention=true"])
    args = megatron_args(s)
    assert "--fp8-param-gather" in args and "--fp8-dot-product-attention" in args
    back = mi.read("train.sh", "torchrun pretrain_gpt.py --bf16 --fp8-format hybrid "
                               "--fp8-param-gather --fp8-dot-product-attention\n").document
    assert back["training"]["fp8_param_gather"] is True
    assert back["training"]["fp8_attention"] is True

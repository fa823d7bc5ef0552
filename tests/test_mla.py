"""Multi-head latent attention (DeepSeek-V2 arXiv:2405.04434 Sec. 2.1, DeepSeek-V3
arXiv:2412.19437): parameters, FLOPs, activations, TP GEMM shapes and validation."""
from __future__ import annotations

import dataclasses

import pytest

from tests.conftest import scenario_doc
from workbench.catalog.models import MODELS
from workbench.catalog.types import ModelShape
from workbench.errors import ScenarioError
from workbench.estimate.memory import activations as act
from workbench.estimate import estimate
from workbench.estimate.model.attention import attention_gemms, qkv_widths, tp_gather_width
from workbench.estimate.model.flops import layer_flops
from workbench.estimate.model.params import (active_params, attention_params, layer_params,
                                       sequence_parallel_replicated, total_params)
from workbench.scenario import parse_scenario

DSV3 = MODELS["deepseek-v3"]
# A tiny MLA shape whose figures are worked out by hand below (v_head_dim != qk head dim).
TINY = ModelShape(name="tiny-mla", layers=2, hidden=64, heads=4, kv_heads=4, ffn_hidden=128,
                  vocab=100, q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8,
                  qk_nope_head_dim=16, v_head_dim=20)


def _doc(model) -> dict:
    doc = scenario_doc()
    doc["model"] = model          # the whole table (scenario_doc merges into the base preset)
    return doc


def _mha(m: ModelShape) -> ModelShape:
    return dataclasses.replace(m, q_lora_rank=0, kv_lora_rank=0, qk_rope_head_dim=0,
                               qk_nope_head_dim=0, v_head_dim=0)


def test_deepseek_v3_preset_is_mla_with_the_configs_shape():
    m = DSV3
    assert m.mla and not MODELS["llama3-8b"].mla
    assert (m.q_lora_rank, m.kv_lora_rank, m.qk_rope_head_dim, m.qk_nope_head_dim,
            m.v_head_dim, m.heads) == (1536, 512, 64, 128, 128, 128)
    assert "q_lora_rank 1536, kv_lora_rank 512" in m.source
    # the other MLA model of the catalog is DeepSeek-V2-Lite (no query compression)
    assert [k for k, p in MODELS.items() if p.mla] == ["deepseek-v3", "deepseek-v2-lite"]
    assert MODELS["deepseek-v2-lite"].q_lora_rank == 0


def test_deepseek_v3_totals_match_the_published_671b_37b():
    m = DSV3
    total, active = total_params(m), active_params(m)
    assert total == m.extra["expected_params"] == 671_026_404_352
    assert active == m.extra["expected_active_params"] == 37_552_282_624
    assert total == pytest.approx(m.extra["published_params"], rel=0.005)          # 671B
    # The reference code's exact counts differ only by the router's score-correction bias
    # (256 per MoE layer), which the shape family does not count.
    assert m.extra["reference_code_params"] - total == 58 * 256
    assert m.extra["reference_code_active_params"] - active == 58 * 256
    assert active == pytest.approx(m.extra["reference_code_active_params"], rel=0.005)
    # "37B activated" is rounded: ours (embedding lookup included) is 37.55e9.
    assert active == pytest.approx(m.extra["published_active_params"], rel=0.02)


def test_attention_params_per_layer_follow_the_mla_formula_exactly():
    m = DSV3
    h, a, ql, kl = m.hidden, m.heads, m.q_lora_rank, m.kv_lora_rank
    rope, nope, v = m.qk_rope_head_dim, m.qk_nope_head_dim, m.v_head_dim
    replicated = h * ql + ql + h * (kl + rope) + kl        # W_DQ, q norm, W_DKV, kv norm
    sharded = ql * a * (nope + rope) + kl * a * (nope + v) + a * v * h   # W_UQ, W_UKV, W_O
    assert attention_params(m) == replicated + sharded == m.extra["attention_params_per_layer"]
    for tp in (2, 4, 8):
        assert attention_params(m, tp) == replicated + sharded // tp
    # the dense MLP layers and MoE layers both carry it
    assert layer_params(m, 0).dense - 3 * h * m.ffn_hidden - 2 * h == replicated + sharded


def test_tiny_mla_params_flops_by_hand():
    # q_down 64x32, q_up 32x(4*24), kv_down 64x(16+8), kv_up 16x(4*(16+20)), o (4*20)x64
    assert attention_params(TINY) == 2048 + 32 + 3072 + 1536 + 16 + 2304 + 5120 == 14128
    assert attention_params(TINY, 2) == (3072 + 2304 + 5120) // 2 + 2048 + 32 + 1536 + 16
    lf = layer_flops(TINY, tokens=10, s_kv=10, moe_layer=False)
    attn_macs = 2048 + 3072 + 1536 + 2304 + 5120                 # 14080 per token
    mlp_macs = 3 * 64 * 128                                       # swiglu
    assert lf.gemm == 2 * 10 * (attn_macs + mlp_macs) == 773_120
    # QK^T over heads*(nope+rope) = 96, AV over heads*v = 80
    assert lf.attention == 2 * 10 * 10 * (96 + 80) == 35_200
    assert lf.expert_gemm == 0


def test_mha_flops_and_gemms_are_unchanged():
    m = MODELS["llama3-8b"]
    h, q, kv = m.hidden, m.heads * m.dim_per_head, m.kv_dim
    lf = layer_flops(m, 4096, 4096, False)
    assert lf.attention == 4 * 4096 * 4096 * q
    assert [(g.n, g.k, g.count, g.rows) for g in attention_gemms(m, 4, True)] == [
        ((q + 2 * kv) / 4, h, 1, 1.0), (h, q / 4, 1, 1.0)]
    assert qkv_widths(m) == (q, kv, kv)
    assert tp_gather_width(m) == h


def test_mla_gemms_shard_the_up_and_out_projections_and_replicate_the_down_ones():
    m, t = DSV3, 8
    g = {a.name: a for a in attention_gemms(m, t, sp=True)}
    assert (g["q_down"].n, g["q_down"].k, g["q_down"].rows) == (1536, 7168, 1 / 8)
    assert (g["kv_down"].n, g["kv_down"].k, g["kv_down"].rows) == (576, 7168, 1 / 8)
    assert (g["q_up"].n, g["q_up"].k) == (128 * 192 / 8, 1536)
    assert (g["kv_up"].n, g["kv_up"].k) == (128 * 256 / 8, 512)
    assert (g["proj"].n, g["proj"].k) == (7168, 128 * 128 / 8)
    assert {a.rows for a in attention_gemms(m, t, sp=False)} == {1.0}
    # without query compression, one column-parallel hidden -> heads*(nope+rope) projection
    noq = dataclasses.replace(m, q_lora_rank=0)
    assert [a.name for a in attention_gemms(noq, t)] == ["q", "kv_down", "kv_up", "proj"]
    assert attention_params(noq) == (7168 * 128 * 192 + 7168 * 576 + 512
                                     + 512 * 128 * 256 + 128 * 128 * 7168)
    assert qkv_widths(m) == (128 * 192, 128 * 192, 128 * 128)
    assert tp_gather_width(m) == 1536 + 512 + 64


def test_sequence_parallel_reduces_the_replicated_down_projections():
    m = DSV3
    el, ts = sequence_parallel_replicated(m, 4, False)
    norms, norm_ts = sequence_parallel_replicated(_mha(m), 4, False)
    assert el - norms == 4 * (7168 * (1536 + 512 + 64) + 1536 + 512)
    assert ts - norm_ts == 4 * 4


def test_mla_activations_save_the_latents_and_per_head_qkv():
    x = act.ActivationShape(s=4096, s_kv=4096, b=1, t=2, sp=True, elem=2, gemm_in=2,
                            flash=True, recompute="selective")
    terms = act.attention_terms(DSV3, x)
    sb = 4096
    assert terms["q"] == terms["k"] == sb * 128 * 192 / 2 * 2
    assert terms["v"] == terms["attn_out"] == sb * 128 * 128 / 2 * 2
    assert terms["q_norm_input"] == terms["q_up_input"] == sb * 1536 / 2 * 2
    assert terms["kv_norm_input"] == terms["kv_up_input"] == sb * 512 / 2 * 2
    assert terms["qkv_input"] == sb * 7168 / 2 * 2
    mha = act.attention_terms(_mha(DSV3), x)
    assert not set(mha) & {"q_norm_input", "kv_up_input"}


def test_the_estimate_uses_mla():
    doc = _doc("deepseek-v3")
    doc["hardware"]["nodes"] = 8
    doc["parallel"] = {"dp": 8, "pp": 8, "ep": 8, "tp": 1}
    s = parse_scenario(doc)
    assert s.model.mla and s.model.extra.get("expected_params") == 671_026_404_352
    got = estimate(s).to_dict()["model"]
    assert (got["params"], got["active_params"]) == (671_026_404_352, 37_552_282_624)
    # the same layout with MLA counted as 128 x 128 MHA is slower: more projection GEMMs
    mha = dataclasses.replace(s, model=_mha(s.model))
    assert estimate(s).time.compute < estimate(mha).time.compute


@pytest.mark.parametrize("fields,path,words", [
    ({"kv_lora_rank": 512, "qk_nope_head_dim": 128, "v_head_dim": 128},
     "model.qk_rope_head_dim", "must be > 0 when model.kv_lora_rank > 0"),
    ({"kv_lora_rank": 512, "qk_rope_head_dim": 64, "v_head_dim": 128},
     "model.qk_nope_head_dim", "must be > 0 when model.kv_lora_rank > 0"),
    ({"kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128},
     "model.v_head_dim", "must be > 0 when model.kv_lora_rank > 0"),
    ({"q_lora_rank": -1}, "model.q_lora_rank", "must be between 0 and"),
    ({"kv_lora_rank": 1.5}, "model.kv_lora_rank", "must be a whole number"),
    ({"q_lora_rank": 64}, "model.q_lora_rank", "needs model.kv_lora_rank > 0"),
])
def test_a_bad_mla_table_names_the_field(fields, path, words):
    model = {"layers": 2, "hidden": 256, "heads": 4, "ffn_hidden": 512, "vocab": 1000, **fields}
    with pytest.raises(ScenarioError) as err:
        parse_scenario(_doc(model))
    line = err.value.one_line()
    assert "\n" not in line and path in line and words in line


def test_an_inline_mla_table_parses_and_a_preset_can_turn_it_off():
    model = {"layers": 2, "hidden": 256, "heads": 4, "ffn_hidden": 512, "vocab": 1000,
             "q_lora_rank": 64, "kv_lora_rank": 32, "qk_rope_head_dim": 16,
             "qk_nope_head_dim": 32, "v_head_dim": 48}
    m = parse_scenario(_doc(model)).model
    assert m.mla and (m.q_lora_rank, m.v_head_dim) == (64, 48)
    off = parse_scenario(_doc({"preset": "deepseek-v3", "kv_lora_rank": 0, "q_lora_rank": 0,
                               "qk_rope_head_dim": 0, "qk_nope_head_dim": 0,
                               "v_head_dim": 0})).model
    assert not off.mla and "expected_params" not in off.extra
    # a non-MLA document does not grow MLA keys
    assert "kv_lora_rank" not in parse_scenario(scenario_doc()).to_dict()["model"]

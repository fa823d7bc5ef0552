"""The memory model, component by component, against hand-computed values."""
from __future__ import annotations

import pytest

from tests.conftest import scenario_doc
from workbench.catalog import MODELS
from workbench.catalog.types import ModelShape
from workbench.estimate import estimate
from workbench.estimate.memory import activations as act
from workbench.estimate.memory.model_states import bytes_per_param, model_states
from workbench.estimate.model.params import chunk_layers, layer_params, rank_chunks
from workbench.scenario import parse_scenario
from workbench.scenario.types import Parallel

N = 1_000_000


# -- model states ----------------------------------------------------------------------------
@pytest.mark.parametrize("precision,zero,d,expected", [
    # Megatron-LM dist_optimizer.md table: fp16 20 | 4+16/d; bf16 18 | 6+12/d; fp32 16 | 8+8/d
    ("fp16", 0, 8, 20 * N), ("fp16", 1, 8, 4 * N + 16 * N / 8),
    ("bf16", 0, 8, 18 * N), ("bf16", 1, 8, 6 * N + 12 * N / 8),
    ("fp32", 0, 8, 16 * N), ("fp32", 1, 8, 8 * N + 8 * N / 8),
    # ZeRO-2: gradients sharded too; ZeRO-3 (FSDP2): everything, 16 B/param / d
    ("bf16", 2, 8, 2 * N + 16 * N / 8), ("bf16", 3, 8, 16 * N / 8), ("fp32", 3, 4, 16 * N / 4),
    ("fp8", 1, 4, 6 * N + 12 * N / 4),
])
def test_adam_bytes_per_parameter_under_each_zero_stage(precision, zero, d, expected):
    ms = model_states(N, 0, precision, "adamw", zero, d, d)
    assert ms.params + ms.grads + ms.optimizer == pytest.approx(expected)


def test_sgd_keeps_one_moment():
    assert bytes_per_param("fp32", "sgd", 0).optimizer == 4
    assert bytes_per_param("bf16", "sgd", 0).optimizer == 8   # master + momentum


def test_zero3_matches_zero_paper_table1():
    """ZeRO (Rajbhandari et al. 2020) Table 1, stage 3 = 16 Psi / Nd, e.g. 7.5B at Nd=64."""
    import yaml
    from tests.conftest import ROOT

    rows = [r for r in yaml.safe_load((ROOT / "tests/data/published_memory.yaml").read_text())
            if r["id"].startswith("zero-table1-") and r["id"].endswith("stage3")]
    assert len(rows) >= 12
    for r in rows:
        psi, nd = int(r["model"]["params"]), r["parallel"]["dp"]
        ms = model_states(psi, 0, "bf16", "adamw", 3, nd, nd)
        # The table prints two decimals (0.12) or three significant figures (1.88).
        got = (ms.params + ms.grads + ms.optimizer) / 1e9
        assert abs(got - r["value"]) <= max(0.005, 0.005 * r["value"]), r["id"]


def test_offload_moves_states_to_host_or_nvme():
    cpu = model_states(N, 0, "bf16", "adamw", 3, 8, 8, "cpu")
    assert (cpu.params, cpu.grads, cpu.optimizer) == (0, 0, 0) and cpu.host == 16 * N / 8
    z2 = model_states(N, 0, "bf16", "adamw", 2, 8, 8, "cpu")
    assert z2.params == 2 * N and z2.grads == 0 and z2.host == 16 * N / 8
    nv = model_states(N, 0, "bf16", "adamw", 3, 8, 8, "nvme")
    assert nv.nvme == (4 + 8) * N / 8 and nv.host == 4 * N / 8


# -- parameters and sharding -----------------------------------------------------------------
def test_llama3_8b_layer_split_by_tensor_parallelism():
    m = MODELS["llama3-8b"]
    h, kv, f = 4096, 1024, 14336
    for tp in (1, 2, 8):
        lp = layer_params(m, 0, tp)
        assert lp.dense == (2 * h * h + 2 * h * kv) // tp + 3 * h * f // tp + 2 * h
        assert lp.expert == 0


def _stages(model: str, **parallel):
    """Per pipeline rank of an estimate: what the rank holds."""
    pp = parallel.get("pp", 1)
    doc = scenario_doc(model=model, parallel={"dp": 8 // pp, **parallel},
                       training={"global_batch": 64, "seq_len": 1024})
    return estimate(parse_scenario(doc)).memory.per_stage


def test_pipeline_stages_hold_layers_embedding_and_head():
    st = _stages("llama3-8b", pp=4)
    assert [s.layers for s in st] == [8, 8, 8, 8]
    emb, head = 128256 * 4096, 128256 * 4096 + 4096
    assert st[0].has_embedding and not st[0].has_head and not st[3].has_embedding
    assert st[3].has_head and st[3].dense_params - st[1].dense_params == head
    assert st[0].dense_params - st[1].dense_params == emb
    # interleaved: rank r holds chunks r and r + pp
    par = Parallel(pp=4, dp=2, pp_schedule="interleaved-1f1b", virtual_stages=2)
    runs = chunk_layers(32, 8)
    assert rank_chunks(par)[0] == (0, 4)
    assert [i for c in rank_chunks(par)[0] for i in runs[c]] == [0, 1, 2, 3, 16, 17, 18, 19]
    # DualPipeV: the V puts the embedding and the head on rank 0
    st = _stages("llama3-8b", pp=4, pp_schedule="dualpipev")
    assert st[0].has_embedding and st[0].has_head
    assert rank_chunks(Parallel(pp=4, dp=2, pp_schedule="dualpipev"))[0] == (0, 7)


def test_tied_head_is_copied_to_another_stage():
    one = _stages("gpt2-small")[0]
    two = _stages("gpt2-small", pp=2)
    layers = 12 * layer_params(MODELS["gpt2-small"], 0).dense
    emb = 50257 * 768 + 1024 * 768                 # the vocabulary and the learned positions
    assert one.dense_params - layers - emb == 2 * 768     # final LayerNorm only: tied head
    assert two[1].dense_params - 6 * layer_params(MODELS["gpt2-small"], 0).dense == \
        50257 * 768 + 2 * 768                      # Megatron keeps a copy on the last stage


def test_expert_parallel_shards_experts_and_expert_data_parallel_shards_their_states():
    s = parse_scenario(scenario_doc(model="mixtral-8x7b", parallel={"dp": 8, "ep": 8, "zero": 1},
                                    training={"precision": "bf16"}))
    st = estimate(s).memory.per_stage[0]
    assert st.expert_params == 32 * 1 * 3 * 4096 * 14336    # one expert per rank per layer
    assert s.parallel.expert_shard == 1 and s.parallel.dense_shard == 8
    mem = estimate(s).memory.per_gpu
    assert mem.optimizer == pytest.approx(12 * (st.dense_params / 8 + st.expert_params),
                                          rel=1e-6)


def test_hsdp_shards_within_the_shard_group():
    s = parse_scenario(scenario_doc(hardware={"nodes": 2}, parallel={"dp": 16, "zero": 3,
                                                                     "shard_group": 8}))
    total = estimate(s).memory.per_stage[0].dense_params
    assert estimate(s).memory.per_gpu.params == pytest.approx(4 * -(-total // 8))


# -- activations (Korthikanti et al. 2022) -----------------------------------------------------
GPT3 = ModelShape(name="gpt3", layers=96, hidden=12288, heads=96, kv_heads=96, ffn_hidden=49152,
                  vocab=51200, mlp="gelu", norm="layernorm", bias=True, dropout=True)


def _shape(t=1, sp=False, rc="none", s=2048, b=1, flash=False):
    return act.ActivationShape(s=s, s_kv=s, b=b, t=t, sp=sp, elem=2, gemm_in=2, flash=flash,
                               recompute=rc)


def _no_stats(terms: dict) -> float:
    return sum(v for k, v in terms.items() if not k.endswith("norm_stats"))


@pytest.mark.parametrize("t,sp,rc,formula", [
    (1, False, "none", lambda s, b, h, a, t: s * b * h * (34 + 5 * a * s / h)),          # Eq. 1
    (8, False, "none", lambda s, b, h, a, t: s * b * h * (10 + 24 / t + 5 * a * s / (h * t))),
    (8, True, "none", lambda s, b, h, a, t: s * b * h / t * (34 + 5 * a * s / h)),       # Eq. 4
    (8, True, "selective", lambda s, b, h, a, t: s * b * h * 34 / t),                   # Eq. 6
    (8, False, "selective", lambda s, b, h, a, t: s * b * h * (10 + 24 / t)),
])
def test_korthikanti_table2_per_layer(t, sp, rc, formula):
    x = _shape(t, sp, rc)
    got = _no_stats(act.layer_terms(GPT3, x, False))
    assert got == pytest.approx(formula(2048, 1, 12288, 96, t), rel=1e-12)


def test_korthikanti_full_recompute_keeps_the_layer_input():
    assert act.layer_bytes(GPT3, _shape(8, True, "full"), False) == 2 * 2048 * 12288 / 8
    assert act.layer_bytes(GPT3, _shape(1, False, "full"), False) == 2 * 2048 * 12288


def test_korthikanti_output_layer_terms():
    """Sec. 4.3: final norm 2sbh/t + head input 2sbh/t + fp32 logits 4sbv/t (with SP)."""
    x = _shape(8, True)
    s, b, h, v, t = 2048, 1, 12288, 51200, 8
    stats = 2 * s * b / t * 4
    assert act.head_bytes(GPT3, x) - stats == pytest.approx(4 * s * b * h / t * (1 + v / h))


def test_gqa_swiglu_flash_layer_by_hand():
    m = MODELS["llama3-8b"]
    s, b, h, kv, f, a = 4096, 1, 4096, 1024, 14336, 32
    x = _shape(1, False, "selective", s=s, flash=True)
    terms = act.layer_terms(m, x, False)
    sb = s * b
    assert terms["attn.k"] == terms["attn.v"] == 2 * sb * kv
    assert terms["attn.softmax_lse"] == 4 * sb * a
    assert terms["mlp.act"] == 2 * 2 * sb * f and terms["mlp.fc2_input"] == 2 * sb * f
    expected = (2 * sb * h * 6 + 2 * 2 * sb * kv + 4 * sb * a   # norms, qkv in, q, out, fc1 in
                + 3 * 2 * sb * f + 2 * 4 * sb)                   # swiglu, rms stats
    assert sum(terms.values()) == pytest.approx(expected)


def test_moe_tokens_per_expert_follow_top_k():
    m = MODELS["mixtral-8x7b"]
    x = _shape(1, False, "selective", s=4096, flash=True)
    one = act.mlp_terms(m, x, True)
    m2 = ModelShape(**{**m.__dict__, "moe": m.moe.__class__(**{**m.moe.__dict__, "top_k": 4})})
    two = act.mlp_terms(m2, x, True)
    assert two["expert_act"] == 2 * one["expert_act"]
    assert one["expert_input"] == 4096 * 2 * 4096 * 2          # s*b*k tokens x h x 2 bytes


def test_context_parallel_divides_the_sequence():
    base = scenario_doc(parallel={"dp": 4, "cp": 2}, training={"seq_len": 8192, "global_batch": 64})
    with_cp = estimate(parse_scenario(base)).memory.per_stage[0]
    half = scenario_doc(parallel={"dp": 4, "cp": 1}, hardware={"gpus_per_node": 4},
                        training={"seq_len": 4096, "global_batch": 64})
    without = estimate(parse_scenario(half)).memory.per_stage[0]
    assert with_cp.memory.activations == pytest.approx(without.memory.activations)


def test_first_pipeline_rank_holds_pp_microbatches_under_1f1b():
    doc = scenario_doc(parallel={"dp": 2, "pp": 4}, training={"global_batch": 16,
                                                             "recompute": "full"})
    est = estimate(parse_scenario(doc))
    assert [g.inflight_microbatches for g in est.memory.per_stage] == [4, 3, 2, 2]
    # Korthikanti Eq. 5: rank 0 holds L layers' worth whatever p is (here L/p layers x p mbs)
    x = act.activation_shape(parse_scenario(doc).training, parse_scenario(doc).parallel)
    layer = act.layer_bytes(MODELS["llama3-8b"], x, False)
    g0 = est.memory.per_stage[0]
    working = act.full_recompute_working_set(MODELS["llama3-8b"], x, False)
    assert g0.memory.activations == pytest.approx(4 * 8 * layer + working)


def test_worst_gpu_is_reported_and_fits_against_capacity():
    doc = scenario_doc(model="llama3-70b", parallel={"dp": 8, "zero": 3})
    est = estimate(parse_scenario(doc))
    assert est.memory.per_gpu.total == max(g.memory.total for g in est.memory.per_stage)
    assert est.memory.capacity == 81_559 * 2**20 and est.memory.fits is False   # nvidia-smi
    assert any("does not fit" in w for w in est.warnings)


def test_more_data_parallel_ranks_never_increase_zero3_memory():
    totals = []
    for nodes in (1, 2, 4, 8):
        doc = scenario_doc(hardware={"nodes": nodes}, parallel={"dp": 8 * nodes, "zero": 3},
                           training={"global_batch": 64 * nodes})
        totals.append(estimate(parse_scenario(doc)).memory.per_gpu.total)
    assert totals == sorted(totals, reverse=True)

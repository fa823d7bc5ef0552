"""MoE dispatch as each engine runs it (block_costs.block_costs, Engine.moe_dispatch) and the
trial's routed experts (trial/model.py ``Experts``: torch._grouped_mm, a loop only where it
does not run)."""
from __future__ import annotations

import pytest
import torch

from workbench.estimate.time.block_costs import block_costs
from workbench.scenario import parse_scenario

SEQ, H, K, E = 4096, 4096, 2, 8          # mixtral-8x7b: hidden 4096, top-2 of 8 experts


def _moe(engine: str, tp: int, ep: int, expert_tp: int | None = None, recompute="selective"):
    """Mixtral 8x7B on 2 nodes of 8 H100s, bf16 (2 B per element), SP on."""
    par = {"dp": 16 // tp, "tp": tp, "ep": ep, "zero": 1, "sequence_parallel": True}
    if expert_tp is not None:
        par["expert_tp"] = expert_tp
    if engine == "torchtitan":
        par["zero"] = 3
        recompute = "op" if recompute == "selective" else recompute
    return parse_scenario({
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
        "model": {"preset": "mixtral-8x7b"}, "parallel": par,
        "training": {"engine": engine, "seq_len": SEQ, "micro_batch": 1, "global_batch": 64,
                     "precision": "bf16", "recompute": recompute}})


def _ep_volume(s) -> list[tuple]:
    return [v for v in block_costs(s)["moe"].volume if v[0] == "ep"]


def test_megatron_all_to_all_carries_the_ranks_own_shard_under_expert_tp():
    """MoEAlltoAllTokenDispatcher: each rank sends k copies of its sequence shard (4096 / 4
    tokens) over EP, not its TP group's whole sequence; dispatch and combine, forward and
    backward (4 per microbatch without a recomputed forward)."""
    vol = _ep_volume(_moe("megatron", tp=4, ep=2))
    own = SEQ / 4
    tokens = [v for v in vol if v[1] == "all_to_all" and v[2] > 1e6]
    assert tokens == [("ep", "all_to_all", own * K * H * 2, 4)]
    # the routing probabilities travel beside them, fp32, forward and backward
    assert ("ep", "all_to_all", own * K * 4, 2) in vol
    # full recompute runs the forward's dispatch and combine again
    full = _ep_volume(_moe("megatron", tp=4, ep=2, recompute="full"))
    assert ("ep", "all_to_all", own * K * H * 2, 6) in full


def test_megatron_expert_tp_group_gathers_and_scatters_the_routed_tokens():
    """The expert-TP group (et = tp = 4) all-gathers the 4 shards each rank received
    (dispatch_postprocess) and reduce-scatters the experts' output (combine_preprocess); an
    all-gather's backward is a reduce-scatter: 2 of each per microbatch, 4 x 2048 rows."""
    vol = _ep_volume(_moe("megatron", tp=4, ep=2))
    routed = SEQ / 4 * K * 4
    assert ("ep", "all_gather", routed * H * 2, 2) in vol
    assert ("ep", "reduce_scatter", routed * H * 2, 2) in vol
    # the tokens-per-expert counts: int64, all-gathered over the tp x ep group, forward only
    assert ("ep", "all_gather", 4 * 2 * E * 8, 1) in vol
    # expert TP 1 (parallel folding): no expert-TP collective, the same shard over EP
    folded = _ep_volume(_moe("megatron", tp=4, ep=8, expert_tp=1))
    assert not [v for v in folded if v[1] == "reduce_scatter"]
    assert ("ep", "all_to_all", SEQ / 4 * K * H * 2, 4) in folded


def test_torchtitan_expert_tp_sends_the_gathered_sequence():
    """torchtitan all-gathers the MoE input over TP; with expert TP = tp every TP rank sends the
    whole sequence's k copies over EP (ExpertTensorParallel), with expert TP 1 the reorderer
    splits them over the TP ranks. The counts go by one all-to-all (int64 per expert)."""
    vol = _ep_volume(_moe("torchtitan", tp=2, ep=2))
    assert ("ep", "all_to_all", SEQ * K * H * 2, 4) in vol
    assert ("ep", "all_to_all", E * 8, 1) in vol
    assert not [v for v in vol if v[1] in ("all_gather", "reduce_scatter")]
    split = _ep_volume(_moe("torchtitan", tp=2, ep=8, expert_tp=1))
    assert ("ep", "all_to_all", SEQ / 2 * K * H * 2, 4) in split


def test_megatron_dispatch_is_faster_than_the_gathered_one_under_expert_tp():
    """etp = tp = 4, EP 4 strided by 4 across the two nodes: the sharded dispatch sends 1/4 of
    the bytes over the network (the expert-TP gathers stay on NVLink), so its EP time is lower
    than the gathered one's."""
    import dataclasses

    from workbench.engines import ENGINES

    s = _moe("megatron", tp=4, ep=4)
    sharded = dict(block_costs(s)["moe"].comm)["ep"]
    gathered = dataclasses.replace(ENGINES["megatron"], moe_dispatch="tp_gathered")
    ENGINES["megatron"], saved = gathered, ENGINES["megatron"]
    try:
        other = dict(block_costs(s)["moe"].comm)["ep"]
    finally:
        ENGINES["megatron"] = saved
    assert 0 < sharded < other


# -- the trial's experts ----------------------------------------------------------------------
def _experts(kind: str, dtype=torch.float32):
    from workbench.trial.model import Experts

    torch.manual_seed(0)
    ex = Experts(5, 16, 24, kind).to(dtype)      # expert 4 is chosen by no token
    x = torch.randn(10, 16, dtype=dtype)
    chosen = torch.tensor([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2], [0, 1], [1, 3], [2, 0],
                           [0, 3], [1, 0]])
    weights = torch.rand(10, 2)
    return ex, x, weights, chosen


@pytest.mark.parametrize("kind", ["swiglu", "gelu"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_trial_grouped_experts_equal_the_loop(kind, dtype, monkeypatch):
    """torch._grouped_mm runs on this CPU (torch 2.13): the trial's experts, output and every
    gradient, equal the per-expert loop they replace."""
    from workbench.trial import model

    assert model.expert_gemms(torch.device("cpu"), 16, 24, dtype) == "grouped"
    assert model.expert_gemms(torch.device("cpu"), 16, 6, dtype) == "loop"   # 16 B strides
    got = {}
    for path in ("grouped", "loop"):
        ex, x, weights, chosen = _experts(kind, dtype)
        x.requires_grad_(True)
        monkeypatch.setattr(model, "grouped_mm_runs", lambda *a, p=path: p == "grouped")
        y = ex(x, weights, chosen)
        (y.float() * torch.linspace(-1, 1, y.numel()).view_as(y)).sum().backward()
        got[path] = [y.detach(), x.grad] + [p.grad for p in ex.parameters()]
    tol = {"atol": 1e-5, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
    assert len(got["grouped"]) == (5 if kind == "swiglu" else 4)
    for a, b in zip(got["grouped"], got["loop"]):
        torch.testing.assert_close(a.float(), b.float(), **tol)


def test_trial_experts_equal_the_dense_mlps_they_hold():
    """Each token's output is the weighted sum of its chosen experts' SwiGLU MLPs."""
    import torch.nn.functional as F

    ex, x, weights, chosen = _experts("swiglu")
    y = ex(x, weights, chosen)
    for t in range(x.shape[0]):
        want = sum(weights[t, j] * (F.silu(x[t] @ ex.w1[e].T) * (x[t] @ ex.w3[e].T)) @ ex.w2[e].T
                   for j, e in enumerate(chosen[t].tolist()))
        torch.testing.assert_close(y[t], want, atol=1e-5, rtol=1e-5)


def test_cuda_group_padding_keeps_every_row():
    """The CUDA path pads each expert's rows to a multiple of 8 (torchtitan's bf16 alignment);
    the padded grouped GEMM, read back at each row's place, equals the unpadded one."""
    from workbench.trial.model import _pad_groups

    x = torch.randn(11, 16)
    counts = torch.tensor([3, 0, 8, 0])
    w = torch.randn(4, 16, 8)
    rows, padded, dest = _pad_groups(x, counts, 8)
    assert padded.tolist() == [8, 0, 8, 0] and rows.shape == (16, 16)
    assert dest.tolist() == [0, 1, 2, 8, 9, 10, 11, 12, 13, 14, 15]
    plain = torch._grouped_mm(x, w, offs=torch.cumsum(counts, 0, dtype=torch.int32))
    out = torch._grouped_mm(rows, w, offs=torch.cumsum(padded, 0, dtype=torch.int32))
    torch.testing.assert_close(out[dest], plain)


def test_expert_parallel_share_keeps_the_experts_weights():
    ex, *_ = _experts("swiglu")
    part = ex.local(2, 2)
    assert part.num_experts == 2 and part.w1.shape == (2, 24, 16) and part.w3 is not None
    torch.testing.assert_close(part.w2, ex.w2[2:4])


def test_megatron_moe_layers_have_no_mlp_gather_under_sp_but_shared_experts_keep_it():
    """Megatron-Core's MoE layer routes the rank's sequence shard itself: its TP collectives
    are the attention's all-gather and reduce-scatter only, unless shared experts (a
    sequence-parallel MLP) need the pair; dense layers and torchtitan keep all four."""
    def tp_kinds(s, block="moe"):
        return [v[1] for v in block_costs(s)[block].volume if v[0] == "tp"]
    four = ["all_gather", "all_gather", "reduce_scatter", "reduce_scatter"]
    megatron = _moe("megatron", tp=4, ep=2)
    assert tp_kinds(megatron) == ["all_gather", "reduce_scatter"]
    assert tp_kinds(_moe("torchtitan", tp=4, ep=2)) == four
    shared = parse_scenario({**_megatron_doc(), "model": {
        "preset": "mixtral-8x7b", "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 14336,
                                          "shared_experts": 1}}})
    assert tp_kinds(shared) == four


def _megatron_doc() -> dict:
    """The scenario document of ``_moe``'s Megatron Mixtral (tp 4, ep 2)."""
    return {"hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
            "parallel": {"dp": 4, "tp": 4, "ep": 2, "zero": 1, "sequence_parallel": True},
            "training": {"engine": "megatron", "seq_len": SEQ, "micro_batch": 1,
                         "global_batch": 64, "precision": "bf16", "recompute": "selective"}}


@pytest.mark.parametrize("engine", ["megatron", "torchtitan"])
@pytest.mark.parametrize("expert_tp", [None, 1])
def test_saved_expert_rows_are_the_rows_the_experts_run(engine, expert_tp):
    """A GPU's routed experts save k*s*b*et/t token rows of ffn/et columns: every token at
    ffn/t with expert TP = tp; the rank's own share of the k copies at the whole ffn with
    expert TP 1 — the rows the time model's dispatch gives them (``moe_block``)."""
    from workbench.estimate.memory.activations import activation_shape, mlp_terms
    s = _moe(engine, tp=4, ep=2, expert_tp=expert_tp)
    terms = mlp_terms(s.model, activation_shape(s.training, s.parallel), moe_layer=True)
    et = expert_tp or 4
    rows = SEQ * K * et / 4
    assert terms["expert_input"] == rows * H * 2
    assert terms["expert_act"] == rows * 2 * (14336 // et) * 2      # SwiGLU's gate and up


def test_megatron_weights_the_routed_activation_and_keeps_no_expert_output():
    """Megatron-Core's TEGroupedMLP multiplies the routing weights into the SwiGLU (its
    WeightedSwiGLUFunction saves its input and the weights): an fp32 weight per routed row,
    no expert output. torchtitan weights the experts' output, which it keeps."""
    from workbench.estimate.memory.activations import activation_shape, mlp_terms
    saved = {}
    for engine in ("megatron", "torchtitan"):
        s = _moe(engine, tp=1, ep=2)
        saved[engine] = mlp_terms(s.model, activation_shape(s.training, s.parallel), True)
    rows = SEQ * K
    assert saved["megatron"]["expert_probs"] == rows * 4
    assert "expert_output" not in saved["megatron"]
    assert saved["torchtitan"]["expert_output"] == rows * H * 2

"""Fine-tuning in the estimate: each mechanism of estimate/model/finetune.py against a hand count."""
from __future__ import annotations

import pytest

from workbench.errors import ScenarioError
from workbench.estimate.time import kernels as eff
from workbench.estimate import estimate
from workbench.estimate.model import finetune as ft
from workbench.estimate.time.block_costs import block_costs
from workbench.estimate.model.finetune import NF4_BYTES
from workbench.estimate.model.params import total_params
from workbench.scenario import parse_scenario

H, KV, L, FFN, V = 4096, 1024, 32, 14336, 128256      # Llama 3 8B


def doc(dp: int = 1, zero: int = 0, **training) -> dict:
    return {"hardware": {"gpu": "h100-sxm", "gpus_per_node": dp},
            "model": {"preset": "llama3-8b"},
            "parallel": {"dp": dp, "zero": zero},
            "training": {"seq_len": 2048, "micro_batch": 1, "global_batch": dp,
                         "recompute": "full", "engine": "torchtune", **training}}


def adapters_qv(r: int) -> int:
    """LoRA on q (h -> h) and v (h -> kv) of every layer: r x (in + out) each."""
    return L * r * ((H + H) + (H + KV))


def test_lora_states_are_the_frozen_base_and_the_adapters():
    e = estimate(parse_scenario(doc(method="lora", lora={"rank": 8, "targets": ["q", "v"]})))
    g = e.memory.per_gpu
    a = adapters_qv(8)
    # torchtune: everything in bf16 (no master copy), AdamW's two moments in bf16
    assert g.params - g.params_frozen == pytest.approx(2 * a)
    assert g.grads == pytest.approx(2 * a)
    assert g.optimizer == pytest.approx(2 * 2 * a)
    model = parse_scenario(doc(method="full")).model
    assert g.params_frozen == pytest.approx(2 * total_params(model))


def test_qlora_stores_block_linears_in_nf4_and_the_rest_in_bf16():
    s = parse_scenario(doc(method="qlora", lora={"rank": 8, "targets": ["q", "v"]}))
    g = estimate(s).memory.per_gpu
    per_layer_linear = H * H + 2 * H * KV + H * H + 3 * H * FFN
    linears = L * per_layer_linear
    rest = total_params(s.model) - linears
    assert g.params_frozen == pytest.approx(linears * NF4_BYTES[True] + rest * 2)
    assert NF4_BYTES[True] == pytest.approx(0.5 + 0.127 / 8, rel=1e-3)   # QLoRA Sec. 3
    off = estimate(parse_scenario(doc(method="qlora", lora={"rank": 8, "targets": ["q", "v"],
                                                             "double_quant": False})))
    assert off.memory.per_gpu.params_frozen - g.params_frozen == pytest.approx(
        linears * (4 / 64 - 1 / 64 - 4 / (64 * 256)))


def test_hf_adapters_train_in_fp32():
    g = estimate(parse_scenario(doc(method="lora", engine="hf",
                                    lora={"rank": 8, "targets": ["q", "v"]}))).memory.per_gpu
    a = adapters_qv(8)
    assert (g.params - g.params_frozen, g.grads, g.optimizer) == pytest.approx(
        (4 * a, 4 * a, 8 * a))


def test_ddp_reduces_only_the_adapters_gradients():
    e = estimate(parse_scenario(doc(2, method="lora", engine="hf",
                                    lora={"rank": 8, "targets": ["q", "v"]})))
    dp = e.time.volume["dp"]
    assert dp["all_reduce"]["bytes"] == pytest.approx(4 * adapters_qv(8))   # fp32 adapters
    assert set(dp) == {"all_reduce"}


def test_fsdp_gathers_the_frozen_base_in_its_stored_format():
    e = estimate(parse_scenario(doc(2, 3, method="qlora",
                                    lora={"rank": 8, "targets": ["q", "v"]})))
    g = e.time.volume["dp"]["all_gather"]
    # ZeRO-3 over 2 ranks: the whole model is each shard's bytes twice, gathered as stored
    # (NF4 base, bf16 adapters and norms), in L + 1 units of equal share per round
    stored = e.memory.per_gpu.params * 2
    assert g["bytes"] / g["count"] * (L + 1) == pytest.approx(stored, rel=1e-9)
    assert stored < 0.4 * 2 * total_params(e.scenario.model)      # far below a bf16 base


def test_a_frozen_base_has_no_weight_gradients():
    full = estimate(parse_scenario(doc(method="full")))
    lora = estimate(parse_scenario(doc(method="lora", lora={"rank": 8, "targets": ["q", "v"]})))
    wf, wl = full.time.stages[0].wgrad, lora.time.stages[0].wgrad
    assert 0 < wl < 0.05 * wf
    assert lora.time.compute < full.time.compute
    # model FLOPs: the base's backward is its input gradient only (4 N instead of 6 N)
    assert lora.run.model_tflops_per_gpu * lora.time.step < full.run.model_tflops_per_gpu \
        * full.time.step * 0.8


def test_lora_keeps_no_input_of_a_linear_nothing_trains():
    attn = estimate(parse_scenario(doc(method="lora", recompute="none",
                                       lora={"rank": 8, "targets": "attention"})))
    mlp_too = estimate(parse_scenario(doc(method="lora", recompute="none",
                                          lora={"rank": 8, "targets": "all-linear"})))
    assert attn.memory.per_gpu.activations < mlp_too.memory.per_gpu.activations


def test_paged_states_live_outside_the_allocator():
    s = parse_scenario(doc(method="full", optimizer="paged_adamw8bit"))
    g = estimate(s).memory.per_gpu
    assert g.optimizer == 0 and g.paged == pytest.approx(
        total_params(s.model) * 2 * (1 + 4 / 256), rel=0.01)


def test_optimizer_in_backward_keeps_one_gradient():
    g = estimate(parse_scenario(doc(method="full", optimizer_in_backward=True))).memory.per_gpu
    assert g.grads == 0 and g.buffers > 0


@pytest.mark.parametrize("training,message", [
    ({"method": "lora", "engine": "torchtitan"}, "trains with method pretrain, full"),
    ({"method": "full", "lora": {"rank": 8}}, "applies to method lora or qlora only"),
    ({"method": "lora", "lora": {"quant": "nf4"}}, "applies to method qlora only"),
    ({"method": "lora", "lora": {"targets": ["q", "x"]}}, "allowed: q, k, v, o, gate, up, down"),
    ({"method": "full", "optimizer_in_backward": True, "global_batch": 8},
     "cannot accumulate 8 microbatches"),
])
def test_fine_tuning_settings_are_checked(training, message):
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(doc(**training))


def test_expert_adapters_run_on_the_routed_rows_capacity_factor_included():
    # LoRA on Mixtral's experts only (gate, up, down), EP 2: each local expert's adapters see
    # the rows its base GEMMs do, seq x top_k x capacity_factor x ep / experts (moe_part's rows)
    def wgrad(cap: float) -> tuple:
        s = parse_scenario({
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 2},
            "model": {"preset": "mixtral-8x7b", "moe": {"capacity_factor": cap}},
            "parallel": {"dp": 2, "ep": 2, "zero": 3},
            "training": {"seq_len": 2048, "micro_batch": 1, "global_batch": 2, "method": "lora",
                         "lora": {"rank": 8, "targets": ["gate", "up", "down"]}}})
        m, gpu = s.model, eff.on_hardware(s.hardware)
        rows = 2048 * m.moe.top_k * (cap or 1.0) * 2 / m.moe.experts
        want = sum(eff.gemm_time(8, p.k, rows, gpu, "bf16", p.count)
                   + eff.gemm_time(p.n, 8, rows, gpu, "bf16", p.count)
                   for p in ft.adapted(s.training, m, True, m.moe.experts // 2))
        return block_costs(s)["moe"].wgrad, want, rows

    got, want, rows = wgrad(1.25)
    assert rows == 1280.0 and got == pytest.approx(want, rel=1e-12)
    dropless, want0, rows0 = wgrad(0.0)
    assert rows0 == 1024.0 and dropless == pytest.approx(want0, rel=1e-12) and got > dropless


def test_lora_dropout_keeps_each_adapted_input_and_its_mask():
    """With lora.dropout above 0 each adapted projection runs its own dropout on its input
    and lora_A keeps the dropped copy (2 B) beside the mask (1 B): q and v on Llama 3 8B keep
    2 x 4096 x 3 B per token per layer more; with dropout 0 lora_A reads the input the base
    keeps anyway. Under full recompute they are rebuilt, not kept."""
    def run(dropout, recompute="none", targets=("q", "v")):
        return estimate(parse_scenario({
            "hardware": {"gpu": "a100-sxm-80gb", "gpus_per_node": 1, "nodes": 1},
            "model": {"preset": "llama3-8b"}, "parallel": {"dp": 1},
            "training": {"engine": "hf", "method": "lora", "seq_len": 2048, "micro_batch": 1,
                         "global_batch": 4, "recompute": recompute,
                         "lora": {"targets": list(targets), "dropout": dropout}}}))
    tokens, layers, h = 2048, 32, 4096
    extra = run(0.05).memory.per_gpu.activations - run(0.0).memory.per_gpu.activations
    assert extra == pytest.approx(tokens * layers * 2 * h * 3, rel=1e-12)
    down = run(0.1, targets=("down",)).memory.per_gpu.activations - run(
        0.0, targets=("down",)).memory.per_gpu.activations
    assert down == pytest.approx(tokens * layers * 14336 * 3, rel=1e-12)   # down reads ffn
    full = run(0.05, "full").memory.per_gpu.activations - run(0.0, "full").memory.per_gpu.\
        activations
    assert full == pytest.approx(extra / layers, rel=1e-12)   # the layer being rebuilt only
    with pytest.raises(ScenarioError, match="training.lora.dropout"):
        run(1.0)


def test_an_adapter_checkpoint_is_the_adapters_beside_the_base_kept_once():
    """Issue 52: a 405B QLoRA was sized as full training state (5,682 GB per node): PEFT saves
    the adapters (and the Trainer their optimizer state); the base the run loads is on the
    drives once, in bf16."""
    from workbench.estimate.model.finetune import trainable_params
    from workbench.estimate.model.params import total_params
    from workbench.estimate.run.build_checks import CHECKPOINT_BYTES_PER_PARAM, checkpoint_bytes
    from workbench.scenario import load_scenario

    from tests.conftest import ROOT
    brief = ROOT / "examples" / "brief-8xh200-70b.yaml"
    full = load_scenario(brief)
    assert checkpoint_bytes(full) == (total_params(full.model) * CHECKPOINT_BYTES_PER_PARAM, 0.0)
    q = load_scenario(brief, ["training.method=qlora", "training.lora.rank=16",
                              "training.lora.targets=[q,v]"])
    m = q.model
    adapters = m.layers * 16 * (2 * m.hidden + m.heads * m.dim_per_head + m.kv_dim)
    assert trainable_params(m, q.training) == adapters
    assert checkpoint_bytes(q) == (adapters * CHECKPOINT_BYTES_PER_PARAM,
                                   2.0 * total_params(m))
    drives = next(c for c in estimate(q).checks if c.name == "drives")
    assert drives.status == "pass" and "(what trains) beside the 141 GB base" in drives.reason

"""Peak memory as a moment of the step (estimate/memory/peak.py): which categories live at each phase,
and the loss's and the engines' own bytes, against values computed by hand."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.conftest import scenario_doc
from workbench.engines import ENGINES, engine_of
from workbench.estimate import estimate
from workbench.estimate.memory.buffers import loss_per_logit
from workbench.estimate.memory.peak import (
    PHASES, at_peak, grads_before_backward, phase_parts, phase_totals,
)
from workbench.render.text import render_estimate
from workbench.scenario import parse_scenario

V, H = 128256, 4096     # Llama 3 8B vocabulary and width


def _est(**sections):
    return estimate(parse_scenario(scenario_doc(**sections)))


def _one_gpu(engine: str, zero: int, global_batch: int = 8, **training):
    """Llama 3 8B (18 layers) on eight H200s, dp 8, seq 4096, micro-batch 1 (one microbatch
    per step at global batch 8)."""
    return _est(hardware={"gpu": "h200-sxm", "gpus_per_node": 8, "nodes": 1},
                model={"preset": "llama3-8b", "layers": 18},
                parallel={"dp": 8, "zero": zero},
                training={"seq_len": 4096, "micro_batch": 1, "global_batch": global_batch,
                          "engine": engine, "recompute": "none", **training})


def test_phases_by_hand():
    """Each phase sums what lives then; the backward's activations-for-gradients trade peaks at
    one of its ends."""
    bufs = {"logits": np.array([10.0]), "fsdp_unsharded_grads": np.array([3.0]),
            "fsdp_unsharded_params": np.array([2.0]), "engine_grad_buffer": np.array([1.0])}
    one = np.array([1.0])
    late_parts = phase_parts(100 * one, 40 * one, 80 * one, 50 * one, bufs,
                             np.array([False]), 4 * one, 5 * one, 6 * one)
    late = phase_totals(late_parts)
    assert {k: float(v[0]) for k, v in late.items()} == {
        "forward": 100 + 80 + 1 + 50 + 2 + 6,            # no gradient yet
        "loss": 100 + 80 + 1 + 50 + 2 + 10,
        "backward": 100 + 80 + 1 + 2 + 3 + max(50 - 5 + 4, 40),
        "optimizer": 100 + 80 + 1 + 40}
    early = phase_totals(phase_parts(100 * one, 40 * one, 80 * one, 50 * one, bufs,
                                     np.array([True]), 4 * one, 5 * one, 6 * one))
    assert float(early["loss"][0]) == 100 + 80 + 1 + 40 + 50 + 2 + 10
    assert float(early["backward"][0]) == 100 + 80 + 1 + 40 + 2 + 3 + 45
    # what lives at the peak, by category: the loss phase (index 1) holds no gradient yet
    parts = {k: float(v[0]) for k, v in at_peak(late_parts, np.array([1])).items()}
    assert parts == {"params": 100, "grads": 0, "optimizer": 80, "activations": 50,
                     "buffers": 1 + 2 + 10}
    backward = {k: float(v[0]) for k, v in at_peak(late_parts, np.array([2])).items()}
    assert backward == {"params": 100, "grads": 4, "optimizer": 80, "activations": 45,
                        "buffers": 1 + 2 + 3}


def test_gradients_live_before_backward_unless_fsdp_makes_them_in_one_microbatch():
    tt, mg = engine_of(_tr("torchtitan")), engine_of(_tr("megatron"))
    assert grads_before_backward(tt, np.array([0, 2, 3, 3, 3]), np.array([1, 1, 1, 2, 1]),
                                 np.array([1, 1, 1, 1, 2])).tolist() == [
        True, False, False, True, True]
    assert grads_before_backward(mg, np.array([0, 1, 3]), 1, 1).tolist() == [True] * 3


def _tr(engine):
    return parse_scenario(scenario_doc(training={"engine": engine})).training


def test_fsdp2_zero3_peak_excludes_the_gradients_at_the_loss():
    """torchtitan ZeRO-3, one microbatch: the sharded gradients are made in the backward, so
    the loss's backward (the peak here) holds params + optimizer + activations + buffers but
    the FSDP2 unsharded-gradient buffers and no gradient; two microbatches: the gradients of
    the first are alive at the second's loss."""
    g = _one_gpu("torchtitan", 3).memory.per_gpu
    stage = _one_gpu("torchtitan", 3).memory.worst
    unsharded_grads = stage.buffers["fsdp_unsharded_grads"]
    assert g.peak_phase == "loss"
    assert g.phases["loss"] == pytest.approx(
        g.params + g.optimizer + g.activations + g.buffers - unsharded_grads, rel=1e-12)
    assert g.total == g.phases["loss"] < g.params + g.grads + g.optimizer + g.activations \
        + g.buffers
    assert g.phases["optimizer"] == pytest.approx(g.params + g.grads + g.optimizer, rel=1e-12)
    two = _one_gpu("torchtitan", 3, global_batch=16).memory.per_gpu
    assert two.phases["loss"] == pytest.approx(
        two.params + two.grads + two.optimizer + two.activations + two.buffers
        - unsharded_grads, rel=1e-12)
    # reserved: the peak beside the gradients cached on the reduce-scatter stream (freed by
    # zero_grad, not alive at the loss); with them alive (two microbatches) nothing is cached
    assert g.reserved == pytest.approx(g.phases["loss"] + g.grads, rel=1e-12)
    assert two.reserved == two.total


def test_vocab_parallel_loss_holds_4_bytes_saved_and_its_bf16_cast():
    """A vocabulary-parallel loss (Megatron-Core's, Megatron-DeepSpeed's): the saved fp32
    softmax (4 B per logit, in activations) made the gradient in place, plus its bf16 cast:
    2 B per logit in buffers (the upcast loss: 2 B logits + 8 B gradients); nanotron's forward
    also holds a second fp32 copy (the max subtracted)."""
    assert loss_per_logit("fused", 2, True, vocab_parallel=True) == (2.0, 2.0)
    assert loss_per_logit("upcast", 2, True, vocab_parallel=True, shift_copy=True) == (6.0, 2.0)
    assert loss_per_logit("upcast", 2, True) == (6.0, 10.0)
    e = _est(parallel={"dp": 2, "tp": 4, "zero": 1},
             training={"engine": "deepspeed", "global_batch": 16})
    assert e.memory.worst.buffers["logits"] == 4096 * (V // 4) * 2
    n = _est(parallel={"dp": 2, "tp": 4, "zero": 1},
             training={"engine": "nanotron", "global_batch": 16}).memory.per_gpu
    assert n.phases["forward"] - n.phases["loss"] == pytest.approx(4096 * (V // 4) * 4,
                                                                  rel=1e-12)


def test_compiled_loss_fuses_the_upcast_away():
    """torch.compile'd upcast loss: the bf16 logits and their bf16 gradient (4 B per logit);
    torchtune's chunked loss compiled: one chunk's bf16 gradient in 8."""
    assert loss_per_logit("upcast", 2, True, compiled=True) == (2.0, 4.0)
    assert loss_per_logit("chunked", 2, True, compiled=True) == (2.0, 2.25)
    assert loss_per_logit("chunked", 2, True) == (2.5, 3.0)
    eager = _one_gpu("torchtitan", 3).memory.worst
    assert eager.buffers["logits"] == 4096 * V * 10


def test_deepspeed_bf16_optimizer_keeps_the_bf16_grads_all_step():
    """BF16_Optimizer (ZeRO-1): a bf16 .grad of every parameter beside the fp32 gradient, in
    every phase including the optimizer step; not at ZeRO-2."""
    z1 = _est(parallel={"dp": 8, "zero": 1}, training={"engine": "deepspeed"}).memory
    params = z1.worst.dense_params + z1.worst.expert_params
    assert z1.worst.buffers["lp_grads"] == 2 * params
    g = z1.per_gpu
    assert g.phases["optimizer"] == pytest.approx(g.params + g.grads + g.optimizer
                                                  + 2 * params, rel=1e-12)
    z2 = _est(parallel={"dp": 8, "zero": 2}, training={"engine": "deepspeed"}).memory
    assert "lp_grads" not in z2.worst.buffers


def test_text_names_the_phase_at_the_peak():
    e = _one_gpu("torchtitan", 3)
    text = render_estimate(e)
    assert "phases of the worst GPU's step (allocated, GiB): forward " in text
    assert "; the peak is the loss" in text
    d = e.to_dict()["memory"]
    assert set(d["phases"]) == set(PHASES) and d["peak_phase"] == "loss"
    assert d["per_gpu"]["total"] == max(d["phases"].values())


def test_the_eager_upcast_loss_holds_what_benchmarks_loss_memory_cpu_measures():
    """10 B per logit at the forward and 12 B at the backward with the 16-bit logits freed
    (benchmarks/loss_memory_cpu.py measured 10.04 and 12.04 on this CPU), the saved fp32
    log-probabilities (4 B, counted with the activations) among them."""
    from workbench.estimate.memory.buffers import loss_per_logit
    fwd, bwd = loss_per_logit("upcast", 2, logits_kept=False)
    assert (fwd + 4, bwd + 4) == (10.0, 12.0)


def test_flash_attn_loss_keeps_the_16_bit_logits_and_a_log_sum_exp(monkeypatch):
    """llm-foundry's loss (``Engine.loss`` "xentropy", flash-attn's kernel) saves the 16-bit
    logits and one fp32 log-sum-exp per token, and writes a 16-bit gradient: 2 B per logit at
    the forward, 4 B at the backward, against the fp32-gradient kernel's 10 and 10 (4 B of
    log-probabilities saved among its activations)."""
    assert loss_per_logit("xentropy", 2, True) == (2.0, 4.0)
    assert loss_per_logit("xentropy", 2, False) == (2.0, 4.0)   # it saved them itself
    tokens = 4096
    xent = _one_gpu("fsdp", 3).memory
    assert xent.worst.buffers["logits"] == tokens * V * 4
    monkeypatch.setitem(ENGINES, "fsdp", dataclasses.replace(ENGINES["fsdp"], loss="fused"))
    fused = _one_gpu("fsdp", 3).memory
    assert fused.worst.buffers["logits"] == tokens * V * 6
    # the activations differ by the fp32 log-probabilities less the log-sum-exp per token
    assert (fused.per_gpu.activations - xent.per_gpu.activations
            == pytest.approx(tokens * (V * 4 - 4), rel=1e-12))


def test_deepspeed_zero3_gathers_parameter_by_parameter():
    """DeepSpeed's ZeRO-3 fetches one module's parameters at a time and stops prefetching at
    stage3_max_live_parameters (1e9 elements), so at most that bound, the module being fetched
    and one prefetched parameter are gathered, never more than the model; one parameter's 16-bit
    gradient waits for the reduce bucket. FSDP gathers two whole blocks and keeps one block's
    gradient with its fp32 reduce copy."""
    from workbench.estimate.model.finetune import largest_linear
    from workbench.estimate.memory.buffers import zero3_gathered
    m = parse_scenario(scenario_doc(model={"preset": "llama3-8b"})).model
    big = largest_linear(m)
    assert big == H * 14336                       # the MLP's 4096 x 14336 projections
    params, grad = zero3_gathered(8e9, 2.2e8, big, 1e9)
    assert (float(params), float(grad)) == (1e9 + 2 * big, big)
    assert float(zero3_gathered(5e8, 2.2e8, big, 1e9)[0]) == 5e8     # the whole model, at most
    assert [float(v) for v in zero3_gathered(8e9, 2.2e8, big)] == [4.4e8, 2.2e8]
    ds = _one_gpu("deepspeed", 3).memory.worst.buffers
    assert ds["fsdp_unsharded_params"] == pytest.approx((1e9 + 2 * big) * 2, rel=1e-12)
    assert ds["fsdp_unsharded_grads"] == pytest.approx(big * 2, rel=1e-12)
    fsdp = _one_gpu("fsdp", 3).memory.worst.buffers
    assert fsdp["fsdp_unsharded_grads"] == pytest.approx(fsdp["fsdp_unsharded_params"] / 2 * 6
                                                         / 2, rel=1e-12)

"""The Hugging Face stack's engine records (``workbench/engines/hf.py``) in the estimate: each
mechanism against a hand count in bytes, and the rules of Accelerate's parallelism
(``workbench/scenario/rules/hf.py``)."""
from __future__ import annotations

import dataclasses
import math

import pytest

from workbench.engines import ENGINES, engine_of, hf
from workbench.errors import ScenarioError
from workbench.estimate import estimate
from workbench.estimate.memory.activations import activation_shape, checkpointed_fraction, head_bytes
from workbench.estimate.model.params import total_params
from workbench.scenario import parse_scenario
from workbench.scenario.types import Training

V, H, L = 128256, 4096, 32          # Llama 3 8B


def scenario(gpus: int = 1, parallel: dict | None = None, backend: str | None = None,
             liger: bool = False, **training):
    """A Llama 3 8B scenario on H100s with engine hf (``training`` overrides), validated."""
    return parse_scenario({
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": gpus},
        "model": {"preset": "llama3-8b"},
        "parallel": dict(parallel or {"dp": gpus, "zero": 0}),
        "training": {"seq_len": 4096, "micro_batch": 4, "global_batch": 4 * gpus,
                     "engine": "hf", "method": "full", "backend": backend, "liger": liger,
                     **training}})


def test_a_null_backend_is_fsdp2_and_the_registry_holds_it():
    assert hf.resolved_backend(None) == "fsdp2"
    assert engine_of(Training(engine="hf")) == hf.record("fsdp2")
    assert ENGINES["hf"].zero == (0, 2, 3) and ENGINES["hf"].cp
    assert engine_of(Training(engine="hf", backend="fsdp1")).cp is False
    assert engine_of(Training(engine="hf", backend="deepspeed")).zero == (0, 1, 2, 3)
    # other engines: their one record, whatever the hf-only keys say
    assert engine_of(Training(engine="torchtitan", liger=True)) is ENGINES["torchtitan"]


def test_the_trainer_loss_holds_fp32_log_probabilities_and_two_fp32_gradients():
    # micro-batch 4 x 4,096 tokens x 128,256: one fp32 copy of the logits is 8.4 GB
    logits = 4 * 4096 * V
    assert logits * 4 == 8_405_385_216
    s = scenario()
    # the loss's backward: its two fp32 gradients (buffers); the bf16 logits are gone with the
    # model output Trainer.compute_loss dropped
    assert estimate(s).memory.worst.buffers["logits"] == logits * 8
    # the fp32 log-probabilities the log-softmax saved: in the head's activations
    x = activation_shape(s.training, s.parallel, pytorch_eager=True)
    sb = 4 * 4096
    norm = sb * H * 2 + sb * 4
    head_input = sb * H * 2 * 2     # the linear's input and the eager RMSNorm's normalised copy
    assert head_bytes(s.model, x) == norm + head_input + logits * 4 + sb * 8
    # an engine whose loss keeps the bf16 logits alive in its backward counts them too
    tt = dataclasses.replace(s, training=dataclasses.replace(s.training, engine="torchtitan",
                                                             method="pretrain"))
    assert estimate(tt).memory.worst.buffers["logits"] == logits * (2 + 8)


def test_liger_keeps_no_logits():
    s = scenario(liger=True)
    sb = 4 * 4096
    # fused linear cross-entropy: chunks of next_pow2(ceil(16384 / ceil(128256 / 4096))) = 512
    # tokens of bf16 logits, and the head weight's bf16 gradient made in the forward
    assert estimate(s).memory.worst.buffers["logits"] == 512 * V * 2 + V * H * 2
    x = activation_shape(s.training, s.parallel, pytorch_eager=True)
    # its saved head input gradient (bf16) and fp32 loss per token, no log-probabilities
    assert head_bytes(s.model, x) == sb * H * 2 + sb * 4 + sb * H * 2 + sb * 4 + sb * 8


def test_liger_swiglu_and_loss_lower_activations_by_the_counted_tensors():
    base, lig = (estimate(scenario(recompute="none", liger=flag)) for flag in (False, True))
    sb = 4 * 4096
    f = 14336
    saved = base.memory.per_gpu.activations - lig.memory.per_gpu.activations
    # per layer one f-wide SwiGLU tensor fewer (Liger saves gate and up, eager PyTorch also
    # the SiLU's output); the head: fp32 log-probabilities and the
    # normalised copy replaced by the fp32 per-token loss
    assert saved == L * sb * f * 2 + (sb * V * 4 + sb * H * 2 - sb * 4)


@pytest.mark.parametrize("backend,zero,states", [
    # DDP: a bf16-loaded model trains as it is: bf16 weights, gradients and AdamW moments
    (None, 0, lambda n, d: (2 * n, 2 * n, 2 * 2 * n)),
    # FSDP with mixed precision upcasts the trainable parameters: fp32 shards are the master
    ("fsdp2", 3, lambda n, d: (4 * math.ceil(n / d), 4 * math.ceil(n / d),
                               8 * math.ceil(n / d))),
    ("fsdp1", 2, lambda n, d: (2 * n, 4 * math.ceil(n / d), 12 * math.ceil(n / d))),
    # DeepSpeed's bf16 engine: bf16 weights and gradients, fp32 masters and moments
    ("deepspeed", 1, lambda n, d: (2 * n, 2 * n, 12 * math.ceil(n / d))),
    ("deepspeed", 0, lambda n, d: (2 * n, 2 * n, 12 * n)),
    ("deepspeed", 3, lambda n, d: (2 * math.ceil(n / d), 2 * math.ceil(n / d),
                                   12 * math.ceil(n / d))),
])
def test_which_weights_and_states_are_fp32(backend, zero, states):
    s = scenario(8, {"dp": 8, "zero": zero}, backend=backend, micro_batch=1,
                 global_batch=8)
    g = estimate(s).memory.per_gpu
    n = total_params(s.model)
    assert (g.params, g.grads, g.optimizer) == states(n, 8)


def test_ddp_reduces_bf16_gradients_and_fsdp_fp32():
    n = total_params(scenario().model)
    ddp = estimate(scenario(8, {"dp": 8, "zero": 0}, micro_batch=1, global_batch=8))
    assert ddp.time.volume["dp"]["all_reduce"]["bytes"] == pytest.approx(2 * n, rel=1e-12)
    fsdp = estimate(scenario(8, {"dp": 8, "zero": 3}, micro_batch=1, global_batch=8))
    rs = fsdp.time.volume["dp"]["reduce_scatter"]
    assert rs["bytes"] == pytest.approx(4 * n, rel=1e-12)


def test_every_n_layers_counts_from_the_first_layer():
    m = scenario().model
    assert checkpointed_fraction(m, 3, from_first=True) == 11 / 32     # layers 0, 3, ..., 30
    assert checkpointed_fraction(m, 3) == 10 / 32                      # torchtitan's 3, ..., 30
    hf_layer = estimate(scenario(recompute="layer", recompute_every=3))
    none = estimate(scenario(recompute="none"))
    full = estimate(scenario(recompute="full"))
    assert none.time.recompute == 0
    assert hf_layer.time.recompute == pytest.approx(full.time.recompute * 11 / 32, rel=1e-9)


def test_the_tp_plan_gathers_the_logits_on_every_rank():
    s = scenario(8, {"dp": 4, "tp": 2, "zero": 3, "sequence_parallel": False},
                 micro_batch=1, global_batch=4)
    # the loss holds all 128,256 columns on each TP rank (colwise_gather_output)
    assert estimate(s).memory.worst.buffers["logits"] == 4096 * V * 8


def bad(*args, **kwargs) -> list[tuple[str, str]]:
    """The validator's problems with ``scenario(*args, **kwargs)``: (field, first clause)."""
    try:
        scenario(*args, **kwargs)
    except ScenarioError as exc:
        return [(p.path, p.message.split(";")[0]) for p in exc.problems]
    return []


def test_accelerate_parallelism_rules():
    assert bad(8, {"dp": 8, "zero": 3}) == []
    assert bad(8, {"dp": 4, "cp": 2, "zero": 0}, micro_batch=1) == [
        ("parallel.cp", "Accelerate runs context parallelism only with an FSDP2 plugin, which "
                        "shards the model over dp_shard x cp")]
    assert [p for p, _ in bad(8, {"dp": 4, "tp": 2, "zero": 0, "sequence_parallel": False},
                              micro_batch=1)] == ["parallel.zero"]
    assert [p for p, _ in bad(8, {"dp": 4, "tp": 2, "zero": 3, "sequence_parallel": False},
                              backend="fsdp1", micro_batch=1)] == ["parallel.tp"]
    assert [p for p, _ in bad(8, {"dp": 4, "tp": 2, "zero": 3},
                              micro_batch=1)] == ["parallel.sequence_parallel"]
    assert [p for p, _ in bad(8, {"dp": 1, "tp": 8, "zero": 3, "sequence_parallel": False},
                              micro_batch=1, global_batch=1)] == ["parallel.zero"]
    assert [p for p, _ in bad(8, {"dp": 4, "cp": 2, "zero": 3, "shard_group": 2},
                              micro_batch=1)] == ["parallel.shard_group"]
    # DeepSpeed runs AutoTP (tensor_parallel.autotp_size) with ZeRO
    assert bad(8, {"dp": 4, "tp": 2, "zero": 1, "sequence_parallel": False},
               backend="deepspeed", micro_batch=1) == []
    # FSDP has no ZeRO-1 (the record's zero stages per back end)
    assert [p for p, _ in bad(8, {"dp": 8, "zero": 1}, backend="fsdp1")] == ["parallel.zero"]
    # other engines: not these rules
    assert bad(8, {"dp": 4, "cp": 2, "zero": 0}, micro_batch=1, engine="generic",
               method="pretrain") == []


def test_the_rules_judge_a_grid_of_layouts_at_once():
    import numpy as np
    from workbench.scenario.layouts import LayoutGrid
    from workbench.scenario.rules import layout_mask
    s = scenario(8, {"dp": 4, "cp": 2, "zero": 3}, micro_batch=1)
    grid = LayoutGrid.of(s).take(np.zeros(2, dtype=int))
    grid.zero = np.array([0, 3])
    assert list(layout_mask(s, grid)) == [False, True]


def test_pretraining_under_fsdp_gathers_bf16_and_reduces_fp32():
    # method pretrain at ZeRO-3: the fp32 upcast shards gather in the compute dtype
    # (MixedPrecisionPolicy param_dtype) and reduce fp32 gradients
    s = scenario(8, {"dp": 8, "zero": 3}, micro_batch=1, global_batch=8, method="pretrain")
    e = estimate(s)
    n = total_params(s.model)
    g = e.memory.per_gpu
    assert (g.params, g.grads, g.optimizer) == (4 * math.ceil(n / 8), 4 * math.ceil(n / 8),
                                                8 * math.ceil(n / 8))
    ag, rs = (e.time.volume["dp"][k] for k in ("all_gather", "reduce_scatter"))
    assert ag["bytes"] == pytest.approx(2 * n * 2, rel=1e-12)     # forward and backward gathers
    assert rs["bytes"] == pytest.approx(4 * n, rel=1e-12)

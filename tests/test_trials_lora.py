"""Fine-tuning trials (gloo, forked processes): LoRA with PEFT's adapters under DDP and FSDP2,
QLoRA's bitsandbytes base under DDP, bitsandbytes' 8-bit AdamW under ZeRO-1; per rank the
measured parameter (frozen + trainable), gradient and optimizer bytes and every data-parallel
collective equal the prediction exactly, losses equal the single-process reference; the
optimizer-state function against the libraries' own optimizers; what trials refuse."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT
from workbench.errors import ScenarioError
from workbench.scenario import parse_scenario

pytest.importorskip("peft")
pytest.importorskip("bitsandbytes")


def _scenario(parallel: dict, training: dict, model: str = "tiny-dense"):
    world = parallel.get("dp", 1) * parallel.get("tp", 1) * parallel.get("cp", 1)
    return parse_scenario({"hardware": {"gpu": "h100-sxm", "gpus_per_node": world},
                           "model": model, "parallel": parallel,
                           "training": {"seq_len": 256, "global_batch": 16, **training}})


def _assert_exact(result) -> None:
    assert result.error is None, result.error
    for r in result.ranks():
        m, p = r["measured"], r["predicted"]
        for key in ("params", "grads", "optimizer", "params_frozen", "params_trainable",
                    "trainable_numel"):
            assert m[key] == p[key], (r["rank"], key, m[key], p[key])
        # saved activations: the frozen base's linears keep no input (estimate/model/finetune.py)
        assert abs(m["activations"] / p["activations"] - 1) <= 0.05, (r["rank"], m, p)
        measured, predicted = r["comm"]["measured"], r["comm"]["predicted"]
        assert set(measured) == set(predicted) == {"dp"}, r["rank"]
        assert set(measured["dp"]) == set(predicted["dp"]), r["rank"]
        for kind, want in predicted["dp"].items():
            got = measured["dp"][kind]
            assert (got["bytes"], got["count"]) == (want["bytes"], want["count"]), (r["rank"],
                                                                                    kind)


LORA = {"method": "lora", "lora": {"rank": 8, "alpha": 16, "targets": ["q", "v", "down"],
                                   "trainable": ["norms"]}}

RUNS = [
    ({"dp": 2}, LORA),                                                         # DDP
    ({"dp": 2, "zero": 3}, LORA),                                              # FSDP2
    ({"dp": 2, "zero": 1}, {"method": "full", "optimizer": "adamw8bit"}),      # bnb 8-bit, ZeRO-1
    ({"dp": 2}, {"method": "qlora", "lora": {"rank": 4, "targets": "all-linear"}}),   # NF4 base
]


@pytest.mark.slow
@pytest.mark.parametrize("parallel,training", RUNS, ids=lambda v: str(v))
def test_fine_tuning_trial_equals_prediction_and_reference(parallel, training):
    from workbench.trial import run_trial
    from workbench.trial.reference import reference_losses

    result = run_trial(_scenario(parallel, training), steps=3)
    _assert_exact(result)
    assert result.loss() == pytest.approx(reference_losses(result.scenario, 3), abs=2e-6)
    ft = result.to_dict()["fine_tuning"]
    assert ft["trainable_measured_rank0"] * (2 if parallel.get("zero") == 3 else 1) \
        == ft["trainable_parameters"]
    if training["method"] != "full":            # a frozen base: far fewer gradients
        r0 = result.ranks()[0]["measured"]
        assert r0["grads"] == r0["params_trainable"] < r0["params_frozen"] / 4


def test_parameter_shapes_list_the_adapted_models_tensors_in_order():
    from workbench.catalog import CATALOGS
    from workbench.trial.prediction import parameter_shapes
    from workbench.scenario.types import Lora, Training
    from workbench.trial.adapters import apply_method
    from workbench.trial.model import Transformer
    from workbench.trial.shrink import trial_model

    cases = [("lora", Lora(rank=4, targets=("q", "k", "v", "o", "gate", "up", "down"),
                           trainable=("norms", "head"))),
             ("lora", Lora(rank=2, targets=("v", "up"), trainable=("embeddings",))),
             ("qlora", Lora(rank=4, targets=("q", "down"), quant="int8", double_quant=False))]
    for name in ("tiny-dense", "tiny-gpt"):
        m = trial_model(CATALOGS["model"][name], 1, 1, 1)
        for method, lora in cases:
            if m.mlp != "swiglu":
                lora = Lora(rank=lora.rank, targets=tuple(t for t in lora.targets
                                                          if t != "gate"),
                            quant=lora.quant, double_quant=lora.double_quant,
                            trainable=lora.trainable)
            model = apply_method(Transformer(m), Training(method=method, lora=lora), 1)
            got = [(tuple(p.shape) if method == "lora" or p.dtype.is_floating_point else
                    None, p.requires_grad) for p in model.parameters()]
            want = [(t.shape if method == "lora" or t.elem_bytes == 4.0 else None, t.trainable)
                    for t in parameter_shapes(m, method, lora)]
            assert got == want, (name, method)


@pytest.mark.parametrize("optimizer", ["adamw", "sgd", "adamw8bit", "paged_adamw8bit",
                                       "adafactor", "adamw4bit"])
def test_optimizer_state_bytes_equal_the_libraries(optimizer):
    """``optimizer_states`` against the state each library allocates (one step on the CPU),
    measured as the trial measures it (every storage once, tensor subclasses by their parts)."""
    import warnings

    import torch

    from workbench.estimate.memory.optimizer_states import optimizer_bytes
    from workbench.trial.adapters import optimizer_class
    from workbench.trial.measure import optimizer_bytes as measured_bytes

    if optimizer == "adamw4bit":
        pytest.importorskip("torchao")
    shapes = [(64, 128), (100,), (8, 40), (4096,), (33, 257), (512, 16)]
    params = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    cls, kwargs = optimizer_class(optimizer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = cls(params, **kwargs)
        sum(p.sum() for p in params).backward()
        opt.step()
    assert measured_bytes(opt) == optimizer_bytes(optimizer, shapes)


def test_fine_tuning_trials_refuse_what_they_cannot_run():
    from workbench.trial import prepare

    with pytest.raises(ScenarioError, match="QLoRA's packed base .* trial qlora with zero 0 "
                                            "or 1"):
        prepare(_scenario({"dp": 2, "zero": 3}, {"method": "qlora"}))
    with pytest.raises(ScenarioError, match="use tp 1 and pp 1 for the trial"):
        prepare(_scenario({"dp": 1, "tp": 2}, {"method": "lora"}))
    with pytest.raises(ScenarioError, match="trial it with zero 0 or 1"):
        prepare(_scenario({"dp": 2, "zero": 3}, {"optimizer": "adamw8bit"}))
    prepare(_scenario({"dp": 2, "zero": 3}, {"method": "lora", "optimizer": "adamw4bit"}))
    prepare(_scenario({"dp": 2}, {"method": "qlora"}))


@pytest.mark.slow
def test_cli_trial_of_a_lora_scenario_says_method_rank_targets_and_trainable(tmp_path):
    doc = tmp_path / "lora.yaml"
    doc.write_text("hardware: {gpu: h100-sxm, gpus_per_node: 2}\nmodel: {preset: tiny-dense}\n"
                   "parallel: {dp: 2, zero: 3}\ntraining: {seq_len: 256, global_batch: 8, engine: "
                   "torchtune, method: lora, lora: {rank: 8, alpha: 16, targets: [q, v]}}\n")
    r = subprocess.run([sys.executable, "-m", "workbench", "trial", str(doc), "--steps", "2"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert ("method lora: rank 8, alpha 16, targets q, v; optimizer adamw; trainable "
            "parameters 896 of 23,504 (3.81%)") in r.stdout, r.stdout
    assert "params frozen 45,216 B, trainable 1,792 B" in r.stdout      # zero 3: half each

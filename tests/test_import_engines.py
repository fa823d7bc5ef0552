"""The engine-format readers (torchtitan TOML, Megatron-LM arguments, our torchrun / Slurm
launches, torchtune recipes) on upstream files read from the team's shared folder (each with a
header naming repository, path and commit) and on our own exports: exact values read, the
library defaults filled and said, one problem line per unknown or contradictory key, and
hostile text refused with one line."""
from __future__ import annotations


import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import ROOT, upstream
from workbench.errors import ScenarioError
from workbench.export import Source, export
from workbench.imports import launch, megatron, torchtitan, torchtune
from workbench.scenario import load_scenario, parse_scenario
from workbench.documents.text import DocumentError

EX = ROOT / "examples"


def text(name: str) -> str:
    return upstream(name).read_text()


def test_torchtitan_llama3_8b_upstream():
    r = torchtitan.read("llama3_8b.toml", text("torchtitan_llama3_8b.toml"))
    assert r.problems == []
    assert r.document == {
        "parallel": {"tp": 1, "pp": 1, "cp": 1, "zero": 3},
        "training": {"engine": "torchtitan", "micro_batch": 1, "seq_len": 8192,
                     "precision": "bf16", "compile": False, "recompute": "op",
                     "optimizer": "adamw",
                     # shard degree -1: the steps and the (absent) accumulation, for the merge
                     # to make tokens once the GPUs give dp
                     "steps": 1000, "grad_accum": 1},
        "model": {"preset": "llama3-8b"}}
    assert set(r.defaulted) == {"training.precision"}
    assert any("data_parallel_shard_degree = -1" in n for n in r.notes)
    assert any(n.startswith("[checkpoint] ignored") for n in r.notes)


def test_torchtitan_llama3_70b_upstream_reads_tp_with_sequence_parallel():
    r = torchtitan.read("llama3_70b.toml", text("torchtitan_llama3_70b.toml"))
    assert r.problems == []
    assert r.document["parallel"] == {"tp": 8, "pp": 1, "cp": 1, "sequence_parallel": True,
                                      "zero": 3}
    assert (r.document["training"]["micro_batch"], r.document["training"]["recompute"]) == (
        8, "full")


def test_torchtitan_unknown_keys_are_one_line_each():
    r = torchtitan.read("x.toml", '[training]\nlocal_batch_size = 2\nwarp_speed = 9\n'
                        '[parallelism]\ntensor_parallel_degree = "two"\n[nonsense]\na = 1\n')
    assert sorted(p.path for p in r.problems) == [
        "x.toml:nonsense", "x.toml:parallelism.tensor_parallel_degree",
        "x.toml:training.warp_speed"]
    assert r.defaulted["training.recompute"].startswith("torchtitan's activation_checkpoint")


@pytest.mark.parametrize("bad", ["[a\n", "a = [" * 5000, "x = 1\nx = 2\n"])
def test_torchtitan_refuses_text_that_is_not_toml(bad):
    with pytest.raises(DocumentError) as err:
        torchtitan.read("bad.toml", bad)
    assert len(str(err.value).splitlines()) == 1


def test_megatron_upstream_llama3_8b_fp8_script():
    r = megatron.read("train.sh", text("megatron_train_llama3_8b_h100_fp8.sh"))
    d = r.document
    assert d["parallel"] == {"tp": 1, "cp": 1, "pp": 1, "dp": 8, "sequence_parallel": True,
                             "zero": 1, "overlap_grad_reduce": True,
                             "overlap_param_gather": True}
    assert d["training"] == {"engine": "megatron", "micro_batch": 1, "global_batch": 128,
                             "seq_len": 8192, "precision": "fp8", "recompute": "none",
                             "optimizer": "adamw", "attention": "cudnn",
                             "fp8_param_gather": True,     # the script's --fp8-param-gather
                             # and its --grad-reduce-in-bf16: bf16 gradients
                             "state_dtypes": {"grads": "bf16"},
                             # --train-samples 1953125000 sequences of 8192 tokens
                             "tokens": 1953125000 * 8192.0}
    assert d["model"]["layers"] == 32 and d["model"]["kv_heads"] == 8
    assert d["hardware"] == {"gpus_per_node": 8, "nodes": 1}
    # the script's two data branches set the tokenizer two ways: read as argparse would (the
    # last), and said; the script imports without an edit
    assert r.problems == []
    assert any(n.startswith("--tokenizer-type given twice") for n in r.notes)
    assert set(r.defaulted) == {"parallel.pp", "training.optimizer"}


def test_megatron_unknown_and_contradictory_flags():
    r = megatron.read("run.sh", "torchrun pretrain_gpt.py --tensor-model-parallel-size 2 "
                      "--tensor-model-parallel-size 4 --turbo-mode --micro-batch-size x")
    assert [p.path for p in r.problems] == ["run.sh:--tensor-model-parallel-size",
                                            "run.sh:--turbo-mode", "run.sh:--micro-batch-size"]


def test_torchtune_upstream_llama3_2_1b_lora():
    r = torchtune.read("1B_lora.yaml", text("torchtune_llama3_2_1B_lora_single_device.yaml"))
    assert r.problems == []
    tr = r.document["training"]
    assert (tr["method"], tr["lora"]) == ("lora", {"targets": ["q", "v", "o", "gate", "up",
                                                               "down"],
                                                   "rank": 64, "alpha": 128,
                                                   "dropout": 0.0})   # its lora_dropout
    assert (tr["micro_batch"], tr["global_batch"], tr["recompute"]) == (4, 32, "none")
    assert r.document["model"] == {"preset": "llama3.2-1b"}
    assert r.document["parallel"] == {"zero": 0, "dp": 1}
    assert any("max_seq_len is null" in n for n in r.notes)


def test_torchtune_unknown_key():
    body = text("torchtune_llama3_2_1B_lora_single_device.yaml") + "\nturbo: true\n"
    r = torchtune.read("x.yaml", body)
    assert [p.path for p in r.problems] == ["x.yaml:turbo"]


def test_launch_reads_layout_machines_and_overrides():
    s = load_scenario(EX / "llama3-405b-h200-cluster.yaml")
    for target in ("torchrun", "slurm"):
        body = export(s, target, Source("cluster.yaml", ("training.compile=true",)))
        r = launch.read("job.sh", body)
        assert r.problems == []
        assert r.document["parallel"] == {"dp": 4, "zero": 1, "tp": 8, "pp": 16, "cp": 1,
                                          "ep": 1, "pp_schedule": "interleaved-1f1b",
                                          "virtual_stages": 2}
        assert r.document["hardware"] == {"nodes": 64, "gpus_per_node": 8, "gpu": "h200-sxm"}
        assert r.document["training"] == {"compile": True}
        assert any("cluster.yaml" in n for n in r.notes)


def test_launch_contradiction_and_bad_set():
    s = load_scenario(EX / "llama3-8b-8xh100.yaml")
    body = export(s, "torchrun", Source("s.yaml", ("parallel.tp",)))
    body = body.replace("--nproc-per-node=8", "--nproc-per-node=4")
    r = launch.read("run.sh", body)
    assert sorted(p.path for p in r.problems) == ["run.sh:--set --set",
                                                  "run.sh:hardware.gpus_per_node"]
    with pytest.raises(DocumentError):
        launch.read("x.sh", "echo nothing here\n")


def test_looks_like_tells_the_formats_apart():
    s = parse_scenario({"hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
                        "model": {"preset": "llama3-8b"}, "parallel": {"dp": 8, "zero": 3},
                        "training": {"engine": "torchtune", "method": "full",
                                     "recompute": "full", "global_batch": 64}})
    files = {"a.toml": text("torchtitan_llama3_8b.toml"),
             "b.sh": text("megatron_train_llama3_8b_h100_fp8.sh"),
             "c.sh": export(s, "torchrun"), "d.yaml": export(s, "torchtune")}
    owners = {name: [m.FORMAT for m in (torchtitan, megatron, launch, torchtune)
                     if m.looks_like(name, body)] for name, body in files.items()}
    assert owners == {"a.toml": ["torchtitan"], "b.sh": ["megatron"], "c.sh": ["launch"],
                      "d.yaml": ["torchtune"]}


def test_hostile_yaml_is_one_line():
    with pytest.raises(ScenarioError) as err:
        torchtune.read("x.yaml", "a: &a [" + "*a, " * 200 + "]\n")
    assert len(str(err.value).splitlines()) == 1


@settings(max_examples=150, deadline=None)
@given(body=st.one_of(st.text(max_size=400),
                      st.sampled_from(["[parallelism]\ntensor_parallel_degree = 1e999\n",
                                       "[training]\nlocal_batch_size = -3\n[parallelism]\n",
                                       "pretrain_gpt.py --num-layers 99999999999999999999999",
                                       "pretrain_gpt.py --seq-length '",
                                       "-m workbench.trial.torchrun_main s.yaml --set 'a=!!bool x'",
                                       "torchtune. _component_: [\n"])))
def test_readers_never_raise_anything_but_a_refusal(body):
    """Hostile text: a Reading or one refusal (ScenarioError, DocumentError), never another
    exception."""
    for mod in (torchtitan, megatron, launch, torchtune):
        try:
            mod.read("f", body)
        except ScenarioError as err:
            assert str(err).strip()


@pytest.mark.parametrize("name,engine", [
    ("torchtitan_llama3_8b.toml", "torchtitan"), ("torchtitan_llama3_70b.toml", "torchtitan"),
    ("megatron_train_llama3_8b_h100_fp8.sh", "megatron"),
    ("torchtune_llama3_2_1B_lora_single_device.yaml", "torchtune")])
def test_upstream_files_make_a_valid_scenario_of_their_engine(name, engine):
    """Each upstream file, unedited, through the whole import (merge, defaults, validation)."""
    from workbench.imports import import_configs

    out = import_configs([upstream(name)])
    assert out.problems == [] and out.scenario["training"]["engine"] == engine

"""Export, then import: for random valid scenarios, each engine target's file read back by that
format's reader gives the same layout (dp, tp, pp, cp, ep, zero, shard group, virtual stages,
schedule) and switches (recompute, precision, compile, sequence parallelism, micro and global
batch, method and LoRA) wherever the target carries them.

Where a target writes a documented approximation the expected value says so: torchtitan writes
the estimator's selective recompute as its per-op SAC (``op``) and always shards the sequence
with TP; Megatron-LM writes ``op`` as its selective recompute; torchrun / Slurm scripts carry the
layout and the ``--set`` overrides, not the scenario file.

The DeepSpeed and Accelerate / TrainingArguments readers are another change's
(``workbench.imports.deepspeed``, ``workbench.imports.accelerate``,
``workbench.imports.training_args``): their cases import them by name and skip until they are
there.
"""
from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from workbench.errors import ScenarioError
from workbench.export import Source, export
from workbench.imports import import_configs, launch, megatron, torchtitan, torchtune
from workbench.scenario import parse_scenario
from workbench.scenario.rules import min_microbatches

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])


@st.composite
def layouts(draw, engine: str, moe: bool = False) -> dict:
    """A scenario document for ``engine``; the rules (and the target's export) may still
    refuse it, which the tests ``assume`` away."""
    model = "mixtral-8x7b" if moe else draw(st.sampled_from(["llama3-8b", "llama3-70b"]))
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from([1, 2, 4]))
    cp = draw(st.sampled_from([1, 2]))
    dp = draw(st.sampled_from([1, 2, 4, 8]))
    sched = draw(st.sampled_from(["1f1b", "interleaved-1f1b", "gpipe", "zero-bubble",
                                  "dualpipev"])) if pp > 1 else "1f1b"
    v = draw(st.sampled_from([2, 4])) if sched in ("interleaved-1f1b", "zero-bubble") else 1
    zero = draw(st.sampled_from([0, 1, 2, 3]))
    ep = draw(st.sampled_from([e for e in (1, 2, 4, 8) if (dp * cp) % e == 0])) if moe else 1
    par = {"dp": dp, "tp": tp, "pp": pp, "cp": cp, "ep": ep, "zero": zero,
           "pp_schedule": sched, "virtual_stages": v,
           "sequence_parallel": draw(st.booleans())}
    if zero and dp * cp > 1 and draw(st.booleans()):
        par["shard_group"] = draw(st.sampled_from([g for g in (2, 4, 8, 16)
                                                   if (dp * cp) % g == 0] or [dp * cp]))
    micro = draw(st.sampled_from([1, 2]))
    world = dp * tp * pp * cp
    gpn = min(8, world)
    training = {"engine": engine, "seq_len": draw(st.sampled_from([2048, 4096])),
                "micro_batch": micro,
                "global_batch": micro * dp * min_microbatches(sched, pp) * draw(
                    st.integers(1, 3)),
                "precision": draw(st.sampled_from(["bf16", "fp32", "fp16", "fp8", "nvfp4"])),
                "recompute": draw(st.sampled_from(["none", "selective", "full", "op"])),
                "compile": draw(st.booleans()),
                "offload": draw(st.sampled_from(["none", "none", "cpu"])) if zero else "none"}
    # NVFP4 needs FP4 tensor cores (rule fp4): a B200
    gpu = "b200" if training["precision"] == "nvfp4" else "h100-sxm"
    return {"hardware": {"gpu": gpu, "gpus_per_node": gpn, "nodes": world // gpn},
            "model": {"preset": model}, "parallel": par, "training": training}


def exported(doc: dict, target: str, source: Source = Source()):
    """The scenario and its export, or None when the rules or the target refuse it."""
    try:
        s = parse_scenario(doc)
        return s, export(s, target, source)
    except ScenarioError:   # ExportError is one
        return None


def _layout(s, *, sp_always: bool = False) -> dict:
    p = s.parallel
    out = {"dp": p.dp, "tp": p.tp, "pp": p.pp, "cp": p.cp, "zero": p.zero}
    if p.pp > 1:
        out |= {"pp_schedule": p.pp_schedule, "virtual_stages": p.virtual_stages}
    if p.tp > 1:
        out["sequence_parallel"] = True if sp_always else p.sequence_parallel
    if p.ep > 1:
        out["ep"] = p.ep
    if p.shard_group and p.zero and p.shard_group < p.dp * p.cp:
        out["shard_group"] = p.shard_group   # a group of all dp x cp ranks is plain sharding
    return out


def _read_layout(doc: dict, keys) -> dict:
    par = doc.get("parallel", {})
    return {k: par[k] for k in keys if k in par}


@given(st.data())
@SETTINGS
def test_torchtitan(data):
    doc = data.draw(layouts("torchtitan", moe=data.draw(st.booleans())))
    got = exported(doc, "torchtitan")
    assume(got is not None)
    s, text = got
    r = torchtitan.read("job.toml", text)
    assert r.problems == []
    want = _layout(s, sp_always=True)
    assert _read_layout(r.document, want) == want
    tr = r.document["training"]
    recompute = "op" if s.training.recompute == "selective" else s.training.recompute
    assert (tr["micro_batch"], tr["global_batch"], tr["seq_len"], tr["precision"],
            tr["recompute"], tr.get("compile", False) or s.parallel.async_tp) == (
        s.training.micro_batch, s.training.global_batch, s.training.seq_len,
        s.training.precision, recompute, s.training.compile)


@given(st.data())
@SETTINGS
def test_megatron(data):
    doc = data.draw(layouts("megatron", moe=data.draw(st.booleans())))
    got = exported(doc, "megatron")
    assume(got is not None)
    s, text = got
    r = megatron.read("run.sh", text)
    assert r.problems == []
    want = _layout(s)
    if s.parallel.zero == 0 or s.parallel.zero >= 2:
        want.pop("shard_group", None)   # the exporter writes HSDP groups at ZeRO-1 only
    assert _read_layout(r.document, want) == want
    tr = r.document["training"]
    recompute = "selective" if s.training.recompute == "op" else s.training.recompute
    assert (tr["micro_batch"], tr["global_batch"], tr["seq_len"], tr["precision"],
            tr["recompute"]) == (s.training.micro_batch, s.training.global_batch,
                                 s.training.seq_len, s.training.precision, recompute)


def test_megatron_nvfp4_round_trip():
    """training.precision nvfp4 is written as --bf16 --fp4-format e2m1 --fp4-recipe nvfp4 and
    read back as nvfp4 (not every random draw reaches it)."""
    doc = {"hardware": {"gpu": "b200", "gpus_per_node": 8, "nodes": 1},
           "model": {"preset": "llama3-8b"},
           "parallel": {"dp": 4, "tp": 2, "pp": 1, "cp": 1, "zero": 1,
                        "sequence_parallel": True},
           "training": {"engine": "megatron", "seq_len": 4096, "micro_batch": 1,
                        "global_batch": 64, "precision": "nvfp4", "recompute": "selective"}}
    s, text = exported(doc, "megatron")
    assert "--fp4-format e2m1" in text and "--fp4-recipe nvfp4" in text
    assert "--fp8-format" not in text
    r = megatron.read("run.sh", text)
    assert r.problems == []
    assert r.document["training"]["precision"] == "nvfp4"


@given(st.data())
@SETTINGS
def test_torchrun_and_slurm(data):
    doc = data.draw(layouts("generic", moe=data.draw(st.booleans())))
    for target in ("torchrun", "slurm"):
        got = exported(doc, target, Source("s.yaml", ("training.compile=true",)))
        assume(got is not None)
        s, text = got
        r = launch.read("job.sh", text)
        assert r.problems == []
        want = _layout(s)
        want.pop("sequence_parallel", None)   # not in the layout comment
        assert _read_layout(r.document, want) == want
        assert (r.document["hardware"]["nodes"], r.document["hardware"]["gpus_per_node"]) == (
            s.hardware.nodes, s.hardware.gpus_per_node)
        assert r.document["training"] == {"compile": True}


@given(method=st.sampled_from(["full", "lora", "qlora"]), gpus=st.sampled_from([1, 2, 8]),
       micro=st.sampled_from([1, 2, 4]), accum=st.integers(1, 4),
       recompute=st.sampled_from(["none", "full"]), compile_=st.booleans(),
       rank=st.sampled_from([8, 16, 64]),
       targets=st.sampled_from(["attention", "all-linear", ["q", "v"]]))
@SETTINGS
def test_torchtune(method, gpus, micro, accum, recompute, compile_, rank, targets):
    doc = {"hardware": {"gpu": "h100-sxm", "gpus_per_node": gpus},
           "model": {"preset": "llama3-8b"},
           "parallel": {"dp": gpus, "zero": 3 if gpus > 1 else 0},
           "training": {"engine": "torchtune", "method": method, "micro_batch": micro,
                        "global_batch": micro * gpus * accum, "recompute": recompute,
                        "compile": compile_, "seq_len": 2048}}
    if method != "full":
        doc["training"]["lora"] = {"rank": rank, "alpha": 2 * rank, "targets": targets}
    got = exported(doc, "torchtune")
    assume(got is not None)
    s, text = got
    r = torchtune.read("recipe.yaml", text)
    assert r.problems == []
    tr = r.document["training"]
    assert (tr["method"], tr["micro_batch"], tr["global_batch"], tr["recompute"],
            tr["compile"], tr["seq_len"]) == (method, micro, micro * gpus * accum, recompute,
                                              compile_, 2048)
    assert r.document["parallel"]["dp"] == gpus
    assert r.document["parallel"]["zero"] == s.parallel.zero
    if method != "full":
        lora = s.training.lora
        assert (tr["lora"]["rank"], tr["lora"]["alpha"], sorted(tr["lora"]["targets"])) == (
            lora.rank, lora.alpha, sorted(lora.targets))


def _reader(name: str):
    """A reader module of the other change, by name; the case skips until it exists."""
    return pytest.importorskip(f"workbench.imports.{name}")


@given(st.data())
@SETTINGS
def test_deepspeed(data):
    reader = _reader("deepspeed")
    doc = data.draw(layouts("deepspeed"))
    got = exported(doc, "deepspeed")
    assume(got is not None)
    s, text = got
    r = reader.read("ds_config.json", text)
    par, tr = r.document.get("parallel", {}), r.document.get("training", {})
    assert (par.get("zero"), tr.get("micro_batch"), tr.get("global_batch"),
            tr.get("precision", "fp32"), tr.get("offload", "none")) == (
        s.parallel.zero, s.training.micro_batch, s.training.global_batch,
        "bf16" if s.training.precision == "fp8" else s.training.precision, s.training.offload)


@given(st.data())
@SETTINGS
def test_accelerate(data):
    doc = data.draw(layouts("hf"))
    doc["parallel"]["sequence_parallel"] = False
    got = exported(doc, "accelerate")
    assume(got is not None)
    s, text = got
    docs = list(yaml.safe_load_all(text))
    # both files together, as a user passes them: FSDP's activation checkpointing is in the
    # Accelerate config, the Trainer's gradient_checkpointing in the arguments
    out = import_configs([("accelerate_config.yaml", yaml.safe_dump(docs[0])),
                          ("sft_config.yaml", yaml.safe_dump(docs[1]))])
    assert out.problems == []
    par, tr = out.scenario["parallel"], out.scenario["training"]
    assert (par["dp"], par.get("tp", 1), par.get("cp", 1), par["zero"]) == (
        s.parallel.dp, s.parallel.tp, s.parallel.cp, s.parallel.zero)
    assert (tr["micro_batch"], tr["global_batch"], tr["precision"], tr["compile"],
            tr["recompute"]) == (s.training.micro_batch, s.training.global_batch,
                                 s.training.precision, s.training.compile, s.training.recompute)

"""Contract 1: every field validated; errors name the field, the value and what is allowed."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.conftest import EXAMPLES, ROOT, scenario_doc
from workbench.catalog import CATALOGS
from workbench.errors import ScenarioError
from workbench.estimate import estimate
from workbench.export import export
from workbench.render.text import render_estimate
from workbench.scenario import apply_overrides, dump_scenario, parse_scenario


def problems(doc) -> dict[str, str]:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc)
    out: dict[str, str] = {}
    for p in err.value.problems:
        out[p.path] = (out[p.path] + " | " if p.path in out else "") + p.message
    return out


def test_valid_base_scenario(doc):
    s = parse_scenario(doc)
    assert s.parallel.world == 8 and s.model.layers == 32 and s.microbatches == 8


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_examples_are_valid_and_round_trip_through_yaml_and_json(path):
    s = parse_scenario(yaml.safe_load(path.read_text()))
    again = parse_scenario(yaml.safe_load(dump_scenario(s)))
    assert again == s and again.to_dict() == s.to_dict()
    again = parse_scenario(json.loads(dump_scenario(s, "json")))
    assert again == s


def test_unknown_keys_are_errors_at_every_level(doc):
    doc["hardware"]["gpus"] = 8
    doc["training"]["lr"] = 1e-4
    doc["extra"] = 1
    p = problems(doc)
    assert "unknown key" in p["hardware.gpus"] and "gpus_per_node" in p["hardware.gpus"]
    assert "training.lr" in p and "extra" in p


def test_all_problems_are_reported_together(doc):
    doc["parallel"] = {"dp": "eight", "zero": 4, "pp_schedule": "bogus"}
    doc["training"]["precision"] = "int4"
    p = problems(doc)
    assert set(p) >= {"parallel.dp", "parallel.zero", "parallel.pp_schedule",
                      "training.precision"}
    assert "one of gpipe, 1f1b, interleaved-1f1b, zero-bubble, dualpipev" in p[
        "parallel.pp_schedule"]
    assert "one of fp32, fp16, bf16, fp8" in p["training.precision"]


def test_catalog_names_case_insensitive_and_unknown_lists_allowed(doc):
    doc["hardware"]["gpu"] = "H100-SXM"
    assert parse_scenario(doc).hardware.gpu.name.startswith("NVIDIA H100")
    doc["hardware"]["gpu"] = "h300"
    assert "allowed: a100" in problems(doc)["hardware.gpu"]


def test_inline_gpu_and_link(doc):
    doc["hardware"]["gpu"] = {"name": "my gpu", "memory_gb": 96, "hbm_gb_per_s": 4000,
                              "bf16_tflops": 900, "fp8_tflops": 1800, "power_w": 700}
    doc["hardware"]["intra_node"] = {"gb_per_s": 200, "latency_us": 2}
    s = parse_scenario(doc)
    assert s.hardware.gpu.memory_gb == 96 and s.hardware.intra_node.gb_per_s == 200
    assert parse_scenario(yaml.safe_load(dump_scenario(s))) == s


def test_inline_gpu_missing_field_named(doc):
    doc["hardware"]["gpu"] = {"memory_gb": 96}
    p = problems(doc)
    assert p["hardware.gpu.hbm_gb_per_s"] == "is required"


@pytest.mark.parametrize("change,path,fragment", [
    ({"parallel": {"dp": 4}}, "parallel", "must equal hardware.gpus_per_node*nodes"),
    ({"parallel": {"dp": 1, "tp": 8}, "model": {"preset": "llama3-8b", "kv_heads": 4}},
     "parallel.tp", "must divide model.kv_heads"),
    ({"parallel": {"dp": 1, "tp": 8}, "model": {"preset": "llama3-8b", "heads": 36,
                                                "kv_heads": 4}},
     "parallel.tp", "must divide model.heads"),
    ({"parallel": {"dp": 1, "pp": 8}, "model": {"preset": "llama3-8b", "layers": 4}},
     "model.layers", "at least pp * chunks per rank"),
    ({"parallel": {"dp": 8, "ep": 2}}, "parallel.ep", "needs an MoE model"),
    ({"model": "mixtral-8x7b", "parallel": {"dp": 8, "ep": 16}}, "parallel.ep", "must divide dp*cp"),
    ({"model": {"preset": "mixtral-8x7b", "moe": {"experts": 6}}, "parallel": {"dp": 8, "ep": 4}},
     "parallel.ep", "must divide model.moe.experts"),
    ({"training": {"global_batch": 60}}, "training.global_batch", "multiple of micro_batch*dp"),
    ({"parallel": {"dp": 2, "pp": 4}, "training": {"global_batch": 6}},
     "training.global_batch", "1f1b with pp=4 needs at least 4"),
    ({"parallel": {"dp": 2, "pp": 4, "pp_schedule": "dualpipev"}, "training": {"global_batch": 12}},
     "training.global_batch", "dualpipev with pp=4 needs at least 8"),
    ({"parallel": {"dp": 2, "pp": 4, "pp_schedule": "interleaved-1f1b"}},
     "parallel.virtual_stages", "needs virtual_stages >= 2"),
    ({"parallel": {"dp": 2, "pp": 4, "virtual_stages": 2}},
     "parallel.virtual_stages", "must be 1 for pp_schedule 1f1b"),
    ({"parallel": {"dp": 4, "cp": 2}, "training": {"seq_len": 4098}},
     "training.seq_len", "divisible by 2*cp"),
    ({"parallel": {"dp": 8, "shard_group": 3, "zero": 3}}, "parallel.shard_group", "must divide"),
    ({"parallel": {"dp": 8, "shard_group": 4}}, "parallel.shard_group", "needs zero >= 1"),
    ({"hardware": {"gpu": "a100-sxm-80gb"}, "training": {"precision": "fp8"}},
     "training.precision", "no FP8 tensor cores"),
    ({"training": {"offload": "cpu"}}, "training.offload", "needs zero >= 1"),
    ({"hardware": {"gpu": "h100-sxm", "storage": {"drive": "pcie5-nvme", "drives": 0}},
      "parallel": {"dp": 8, "zero": 3}, "training": {"offload": "nvme"}},
     "training.offload", "needs hardware.storage.drives >= 1"),
    ({"hardware": {"gpu": "h100-sxm", "host": {"cpu": "epyc-9654", "memory": "ddr4-3200",
                                                "memory_gb": 512}}},
     "hardware.host.memory", "takes DDR5"),
])
def test_cross_field_rules(change, path, fragment):
    p = problems(scenario_doc(**change))
    assert path in p, p
    assert fragment in p[path], p[path]


def test_overrides_set_fields_and_tables(doc):
    out = apply_overrides(doc, ["parallel.tp=8", "parallel.dp=1", "training.precision=fp8",
                                "model.moe={experts: 8, top_k: 2, expert_ffn_hidden: 1024}"])
    s = parse_scenario(out)
    assert s.parallel.tp == 8 and s.training.precision == "fp8" and s.model.moe.experts == 8
    assert doc["parallel"] == {"dp": 8}   # the input is not modified


def test_bad_override_is_a_clear_error(doc):
    with pytest.raises(ScenarioError, match="section.field=value"):
        apply_overrides(doc, ["parallel.tp"])
    with pytest.raises(ScenarioError, match="is a single value"):
        apply_overrides(doc, ["hardware.gpu.memory_gb=96"])


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True,
                          text=True, cwd=ROOT)


@pytest.mark.parametrize("args,fragment", [
    (["--set", "parallel.tp=3"], "parallel"),
    (["--set", "training.recompute=sometimes"], "training.recompute: must be one of none"),
    (["--set", "hardware.gpu=h300"], "hardware.gpu: unknown gpu"),
])
def test_cli_invalid_input_exits_2_with_one_line(args, fragment):
    r = _cli("estimate", str(ROOT / "examples" / "llama3-8b-8xh100.yaml"), *args)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in r.stderr


def test_cli_missing_file_and_bad_yaml(tmp_path):
    r = _cli("estimate", str(tmp_path / "nope.yaml"))
    assert r.returncode == 2 and "cannot read file" in r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("hardware: [unclosed\n")
    r = _cli("estimate", str(bad))
    assert r.returncode == 2 and "is not valid YAML at line 2" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_modified_preset_keeps_its_position_embeddings():
    from workbench.estimate.model.params import total_params

    base = parse_scenario(scenario_doc(model="gpt3-175b", parallel={"dp": 8}))
    changed = parse_scenario(scenario_doc(model={"preset": "gpt3-175b", "vocab": 51200},
                                          parallel={"dp": 8}))
    assert total_params(changed.model) - total_params(base.model) == (51200 - 50257) * 12288
    assert "expected_params" not in changed.model.extra


def test_inline_host_parts_round_trip_and_name_missing_fields(doc):
    doc["hardware"]["host"] = {"cpu": {"cores": 64, "pcie_lanes": 128, "memory_channels": 8},
                               "memory": {"mt_per_s": 5200}, "memory_gb": 512, "channels": 8}
    doc["hardware"]["storage"] = {"drive": {"capacity_tb": 4, "read_gb_per_s": 12,
                                            "write_gb_per_s": 10}, "drives": 2}
    s = parse_scenario(doc)
    assert s.hardware.host.cpu.pcie_lanes == 128 and s.hardware.host.memory_gb_per_s == 8 * 41.6
    assert parse_scenario(yaml.safe_load(dump_scenario(s))) == s
    doc["hardware"]["host"] = {"cpu": {"cores": "x"}}
    p = problems(doc)
    assert p["hardware.host.cpu.cores"] == "must be a whole number"
    assert p["hardware.host.cpu.pcie_lanes"] == "is required"
    assert p["hardware.host.memory_gb"].startswith("is required when hardware.host is given")


def test_odd_inputs_are_clean_errors(doc, tmp_path):
    doc["training"]["tokens"] = 10 ** 400
    assert "finite number" in problems(doc)["training.tokens"]
    bad = tmp_path / "utf16.yaml"
    bad.write_bytes("hardware: {}".encode("utf-16"))
    r = _cli("estimate", str(bad))
    assert r.returncode == 2 and "UTF-8" in r.stderr


def test_inline_gpu_without_fp8_and_default_links_follow_the_gpu(doc):
    doc["hardware"]["gpu"] = {"memory_gb": 40, "hbm_gb_per_s": 1555, "bf16_tflops": 312,
                              "fp8_tflops": 0, "power_w": 400}
    doc["training"]["precision"] = "fp8"
    assert "no FP8 tensor cores" in problems(doc)["training.precision"]
    for gpu, link in [("a100-sxm-80gb", "NVLink 3"), ("b200", "NVLink 5"),
                      ("rtx-4090", "PCIe 4.0"), ("h100-pcie", "PCIe 5.0")]:
        s = parse_scenario(scenario_doc(hardware={"gpu": gpu}))
        assert s.hardware.intra_node.name.startswith(link), (gpu, s.hardware.intra_node.name)


def test_a_host_given_without_its_cpu_is_accepted_and_the_cpu_checks_say_so(doc):
    """hardware.host: {memory_gb: 256}: no CPU is assumed; the checks that need one are not
    made, power counts none, and the estimate says what it assumed."""
    doc["hardware"]["host"] = {"memory_gb": 256}
    s = parse_scenario(doc)
    assert s.hardware.host.cpu is None and s.hardware.host.memory_gb == 256
    assert parse_scenario(yaml.safe_load(dump_scenario(s))) == s
    est = estimate(s)
    checks = {c.name: c for c in est.checks}
    assert checks["pcie_lanes"].status == "skip"
    assert checks["pcie_lanes"].reason == "not checked: no CPU given (hardware.host.cpu)"
    assert "not checked: no CPU given" in checks["host_memory"].reason
    assert checks["power"].reason.endswith("no CPU counted: none given")
    with_cpu = estimate(parse_scenario({**doc, "hardware": {**doc["hardware"], "host": {
        "cpu": "epyc-9654", "memory_gb": 256, "channels": 12}}}))
    cpu = CATALOGS["cpu"]["epyc-9654"]
    assert with_cpu.run.host_power_w - est.run.host_power_w == pytest.approx(cpu.tdp_w)
    (said,) = est.to_dict()["assumptions"]
    assert said.startswith("hardware.host.cpu not given") and "460.8 GB/s" in said
    assert "assumed: hardware.host.cpu not given" in render_estimate(est)
    assert "cpus-per-task" not in export(s, "slurm")     # --exclusive gives the whole node


def test_moe_defaults_follow_megatron_core_and_are_said(doc):
    doc["model"] = {"layers": 4, "hidden": 512, "heads": 8, "ffn_hidden": 1024, "vocab": 1000,
                    "moe": {"experts": 8}}
    s = parse_scenario(doc)
    assert (s.model.moe.top_k, s.model.moe.expert_ffn_hidden) == (2, 1024)
    said = estimate(s).assumptions
    assert "model.moe.top_k not given: 2, Megatron-Core's moe_router_topk default" in said
    assert any(a.startswith("model.moe.expert_ffn_hidden not given: model.ffn_hidden = 1024")
               for a in said)
    doc["model"]["moe"] = {"top_k": 2}
    assert problems(doc)["model.moe.experts"].startswith("is required for an MoE model")
    # presets carry their own figures: nothing to assume
    assert parse_scenario(scenario_doc(model="mixtral-8x7b")).assumptions == ()


def test_an_inline_gpu_without_fp8_figures_has_no_fp8(doc):
    doc["hardware"]["gpu"] = {"memory_gb": 48, "hbm_gb_per_s": 864, "bf16_tflops": 181,
                              "power_w": 300}
    assert parse_scenario(doc).hardware.gpu.fp8_tflops == 0
    doc["training"]["precision"] = "fp8"
    assert "no FP8 tensor cores" in problems(doc)["training.precision"]


def test_every_rule_is_documented_and_named_once():
    from workbench.scenario.rules import RULES

    names = [r.name for r in RULES]
    assert len(names) == len(set(names)) and len(RULES) >= 15
    assert all(r.text and r.fields for r in RULES)
    layout = {r.name for r in RULES if r.layout}
    assert {"world", "tp_width", "global_batch", "offload"} <= layout
    assert {"gqa", "fp8", "nics"}.isdisjoint(layout)


def test_expert_tp_on_a_dense_model_is_refused():
    """parallel.expert_tp splits experts: on a dense model it would be a silent no-op (the
    planner once printed "expert TP 1" for Llama 3 8B)."""
    got = problems(scenario_doc(parallel={"dp": 8, "expert_tp": 1},
                                training={"engine": "megatron"}))
    assert got["parallel.expert_tp"] == "expert tensor parallelism needs an MoE model (model.moe)"

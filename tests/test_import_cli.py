"""`workbench import` on the command line: the printed scenario is itself a scenario file,
--json carries {scenario, defaulted, stated, notes}, -o writes (never over an imported file),
and problems exit 2 with one line each on stderr. Plus a seeded fuzz of the readers: mutated
example configs end in a scenario or in problems, never in a traceback."""
from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import upstream
from workbench.errors import ScenarioError
from workbench.imports import import_configs
from workbench.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent


def pair() -> list[str]:
    """Accelerate's DeepSpeed template and the ZeRO-1 JSON it names (``upstream``)."""
    return [str(upstream("accelerate-config_yaml_templates-deepspeed.yaml")),
            str(upstream("accelerate-zero_stage1_config.json"))]


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", "import", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_text_output_is_a_scenario_with_its_defaults_as_comments(tmp_path):
    r = cli(*pair())
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(r.stdout) == import_configs(pair()).scenario
    assert "#   training.micro_batch = 8  (library default, " in r.stdout
    assert "#   hardware.gpu = h100-sxm  (workbench default: " in r.stdout
    f = tmp_path / "s.yaml"
    f.write_text(r.stdout)
    s = load_scenario(f)
    assert (s.parallel.zero, s.parallel.dp, s.training.precision) == (1, 2, "fp16")


def test_json_and_output_file(tmp_path):
    r = cli(*pair(), "--json")
    doc = json.loads(r.stdout)
    assert set(doc) == {"scenario", "defaulted", "stated", "notes"}
    assert doc["defaulted"]["training.micro_batch"]["by"] == "library"
    out = tmp_path / "imported.yaml"
    r = cli(*pair(), "-o", str(out))
    assert r.returncode == 0 and r.stdout == ""
    assert yaml.safe_load(out.read_text()) == doc["scenario"]


def test_refusals_exit_2_one_line_each(tmp_path):
    src = tmp_path / "acc.yaml"
    src.write_text("distributed_type: FSDP\nnum_processes: 8\nbogus: 1\n"
                   "fsdp_config: {fsdp_nonsense: 2}\n")
    r = cli(str(src))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [
        f"workbench: import: {src}:bogus: is not a key of an Accelerate config (accelerate 1.16 "
        "commands/config/config_args.py ClusterConfig) (got 1)",
        f"workbench: import: {src}:fsdp_config.fsdp_nonsense: is not a key of fsdp_config "
        "(accelerate 1.16 commands/launch.py options: fsdp_version, fsdp_offload_params, "
        "fsdp_min_num_params, fsdp_sharding_strategy, fsdp_reshard_after_forward, "
        "fsdp_auto_wrap_policy, fsdp_transformer_layer_cls_to_wrap, fsdp_backward_prefetch, "
        "fsdp_state_dict_type, fsdp_forward_prefetch, fsdp_use_orig_params, "
        "fsdp_cpu_ram_efficient_loading, fsdp_sync_module_states, "
        "fsdp_activation_checkpointing, fsdp_activation_checkpointing_offload) (got 2)"]
    # never over an imported file
    good = tmp_path / "good.yaml"
    good.write_text("distributed_type: MULTI_GPU\nnum_processes: 2\n")
    r = cli(str(good), "-o", str(good))
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1
    assert "is one of the files imported" in r.stderr
    assert good.read_text() == "distributed_type: MULTI_GPU\nnum_processes: 2\n"
    for args in (["missing.yaml"], [str(good), "--format", "nope"], ["/dev/zero"]):
        r = cli(*args)
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, (args, r.stderr)


def _mutate(rng: random.Random, doc: object) -> object:
    hostile = [None, -1, 0, 1e308, "auto", "", "x" * 300, [], {}, True, "\x1b[31m", 2 ** 70,
               {"a": [1, {"b": None}]}, "FULL_SHARD", "none", 3.5]
    if isinstance(doc, dict) and doc:
        key = rng.choice(list(doc))
        out = dict(doc)
        pick = rng.random()
        if pick < 0.5:
            out[key] = rng.choice(hostile) if rng.random() < 0.7 else _mutate(rng, doc[key])
        elif pick < 0.7:
            del out[key]
        else:
            out[rng.choice(["zz_unknown", key.upper(), key + "_"])] = rng.choice(hostile)
        return out
    return rng.choice(hostile)


def test_mutated_example_configs_never_raise_anything_but_problems():
    rng = random.Random(42)
    files = sorted(upstream().glob("*.yaml")) + sorted(upstream().glob("*.json"))
    docs = [(f.name, yaml.safe_load(f.read_text())) for f in files]
    from tests.test_import_readers import MIXTRAL

    docs.append(("config.json", dict(MIXTRAL, shared_expert_intermediate_size=14336,
                                     num_experts_per_tok=2)))
    ended = {"scenario": 0, "problems": 0}
    for _ in range(600):
        name, doc = rng.choice(docs)
        for _ in range(rng.randint(1, 3)):
            doc = _mutate(rng, doc)
        text = json.dumps(doc) if name.endswith(".json") else yaml.safe_dump(doc)
        try:
            out = import_configs([(name, text)])
        except ScenarioError as exc:
            assert exc.problems
            ended["problems"] += 1
            continue
        ended["problems" if out.problems else "scenario"] += 1
        for p in out.problems:
            assert "\n" not in str(p) and "\x1b" not in str(p)
    assert ended["scenario"] > 0 and ended["problems"] > 0

"""Exported launch scripts carry scenario values as data: a hostile model name, scenario path or
``--set`` value in a torchrun, Slurm, Megatron-LM or trial export never runs a command, neither
through ``$(...)``/backticks in a word nor through a newline in a comment. Each script is
checked with ``bash -n`` and then run with stub launchers that record the arguments they got.
The config exports with a launch line in a comment (torchtune) or none (PEFT) keep a hostile
name inside their comments: the file parses to the same keys, and the ``tune run`` line, run
under bash with a stub ``tune``, runs nothing else."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from workbench.export import Source, export
from workbench.scenario import parse_scenario

HOSTILE = "x$(touch INJ1)`touch INJ2`;touch INJ3 \"q' \n touch INJ4\n"
LAUNCHERS = ("torchrun", "srun", "scontrol", "workbench")


def _scenario(name: str):
    return parse_scenario({
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
        "model": {"preset": "llama3-8b", "name": name},
        "parallel": {"dp": 16, "zero": 1},
        "training": {"engine": "megatron", "seq_len": 4096, "global_batch": 64},
    })


def _stubs(tmp: Path) -> Path:
    """Launchers that write their arguments, one per line, to ARGS and exit 0."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for name in LAUNCHERS:
        stub = bin_dir / name
        stub.write_text('#!/bin/bash\nprintf "%s\\n" "$@" >> "$ARGS_FILE"\n'
                        'if [ "$0" = "${0%scontrol}scontrol" ]; then echo node0; fi\n')
        stub.chmod(0o755)
    return bin_dir


@pytest.mark.parametrize("target", ["torchrun", "slurm", "megatron", "trial"])
def test_a_hostile_value_in_an_export_is_data_not_a_command(target, tmp_path):
    s = _scenario(HOSTILE)
    source = Source(path=f"scen {HOSTILE}.yaml", overrides=(f"model.name={HOSTILE}",))
    out = export(s, target, source)
    text = out if isinstance(out, str) else out.text
    script = tmp_path / "run.sh"
    script.write_text(text)
    syntax = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
    env = {**os.environ, "PATH": f"{_stubs(tmp_path)}:{os.environ['PATH']}",
           "ARGS_FILE": str(tmp_path / "args"), "MASTER_ADDR": "node0",
           "NCCL_SOCKET_IFNAME": "eth0", "SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "node0"}
    run = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert not list(tmp_path.glob("INJ*")), "an injected command ran"
    got = (tmp_path / "args").read_text()
    # the launcher received the hostile values whole, as the arguments they are (Megatron-LM
    # gets the model as flags, not the scenario file)
    if target != "megatron":
        assert f"model.name={HOSTILE}" in got
        assert f"scen {HOSTILE}.yaml" in got
    # the launcher's own variables were expanded
    if target != "trial":
        assert "--rdzv-endpoint=node0:29500" in got


def test_comments_and_notes_stay_on_their_line():
    s = _scenario("bad\nname\r\x1b[31m")
    text = export(s, "slurm", Source())
    text = text if isinstance(text, str) else text.text
    assert "bad\\nname\\r\\x1b[31m" in text
    assert "\x1b" not in text and "\r" not in text


def _finetune(name: str):
    return parse_scenario({
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
        "model": {"preset": "llama3-8b", "name": name},
        "parallel": {"dp": 16, "zero": 3},
        "training": {"engine": "torchtune", "method": "lora", "recompute": "full",
                     "seq_len": 4096, "global_batch": 64},
    })


@pytest.mark.parametrize("target", ["torchtune", "peft"])
def test_a_hostile_name_stays_in_a_config_exports_comments(target, tmp_path):
    source = Source(path=f"scen {HOSTILE}.yaml", overrides=(f"model.name={HOSTILE}",))
    text = export(_finetune(HOSTILE), target, source)
    plain = export(_finetune("plain"), target, source)
    load = json.loads if target == "peft" else yaml.safe_load
    assert load(text) == load(plain)        # the name changed no key and no value
    if target == "peft":
        return
    assert "\x1b" not in text and "\r" not in text
    launch = [line for line in text.splitlines() if line.startswith("#   tune run")]
    assert len(launch) == 1
    script = tmp_path / "run.sh"
    script.write_text(launch[0].lstrip("# ") + "\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "tune").write_text('#!/bin/bash\nprintf "%s\\n" "$@" >> "$ARGS_FILE"\n')
    (bin_dir / "tune").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "ARGS_FILE": str(tmp_path / "args"), "MASTER_ADDR": "node0"}
    run = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert not list(tmp_path.glob("INJ*")), "an injected command ran"
    got = (tmp_path / "args").read_text().split()
    assert got[:2] == ["run", "--nnodes"] and "node0:29500" in got

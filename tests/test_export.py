"""Exports (contract 4) checked against each target's real parser or schema.

- torchrun / Slurm: torch's own ``torch.distributed.run.get_args_parser()``; the scripts run
  under bash with stub ``scontrol`` / ``srun`` / ``torchrun`` that record what they receive.
- torchtitan: every key and value against torchtitan 0.2.2's JobConfig field types, stored in
  tests/data/torchtitan_0.2.2_job_config.json (generated from the real wheel; torchtitan
  itself imports triton and CUDA-only kernels, so it does not install here); schedule names
  with torch's own ``get_schedule_class``.
- DeepSpeed: DeepSpeed's own ``DeepSpeedConfig`` (pydantic models, batch identity).
- Megatron-LM: an argparse parser built from the flag definitions stored, with their commit,
  in tests/data/megatron_lm_pretrain_args.json (arguments.py is in no PyPI package), plus
  megatron-core's own ``PipelineParallelLayerLayout`` for layout strings.
"""
from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import re
import shlex
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from workbench.cli import main
from workbench.estimate.model.params import chunk_layers
from workbench.errors import ScenarioError
from workbench.export import TARGETS, ExportError, Source, export
from workbench.export.deepspeed import deepspeed_config, to_deepspeed
from workbench.export.megatron import megatron_args, to_megatron
from workbench.export.slurm import to_slurm
from workbench.export.torchrun import nccl_env, to_torchrun
from workbench.export.torchtitan import to_torchtitan
from workbench.scenario import load_scenario

tomllib = pytest.importorskip("tomllib")
DATA = ROOT / "tests" / "data"
EX = ROOT / "examples"
TINY = "tiny-trial-4d.yaml"          # 2 nodes x 8: dp=cp=tp=pp=2, FSDP
LLAMA8 = "llama3-8b-8xh100.yaml"     # 1 node x 8: FSDP dp=8
MIXTRAL = "mixtral-8x7b-ep.yaml"     # 2 nodes x 8: FSDP dp=16, EP 8, IB
L405 = "llama3-405b-h200-cluster.yaml"  # 64 nodes: ZeRO-1, tp 8, interleaved pp 16
BRIEF = "brief-8xh200-70b.yaml"


def load(name: str, *sets: str):
    return load_scenario(EX / name, list(sets))


def src(name: str, *sets: str) -> Source:
    return Source(str(EX / name), tuple(sets))


def refused_paths(excinfo) -> list[str]:
    return [p.path for p in excinfo.value.problems]


# ---------------------------------------------------------------- shell helpers
def _stub(bindir: Path, name: str, body: str) -> None:
    path = bindir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def run_bash(script: str, tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run ``script`` with stub scontrol/srun/torchrun on PATH; each stub writes its argv,
    one word a line, to $STUB_LOG (srun and torchrun after a MASTER_ADDR= line)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    _stub(bindir, "scontrol", "printf 'gpu-node-07\\ngpu-node-08\\n'\n")
    record = 'printf "%s\\n" "MASTER_ADDR=$MASTER_ADDR" "$(basename "$0")" "$@" > "$STUB_LOG"\n'
    _stub(bindir, "srun", record)
    _stub(bindir, "torchrun", record)
    path = tmp_path / "job.sh"
    path.write_text(script)
    full = {"PATH": f"{bindir}:{os.environ['PATH']}", "STUB_LOG": str(tmp_path / "argv"),
            "HOME": str(tmp_path), **env}
    return subprocess.run(["bash", str(path)], capture_output=True, text=True, env=full,
                          timeout=60)


def recorded(tmp_path: Path) -> list[str]:
    return (tmp_path / "argv").read_text().splitlines()


def bash_syntax_ok(script: str, tmp_path: Path) -> None:
    path = tmp_path / "syntax.sh"
    path.write_text(script)
    out = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def command_words(text: str, first: str) -> list[str]:
    """The words of the (backslash-continued) command that starts with ``first``."""
    joined = text.replace("\\\n", " ")
    line = next(ln for ln in joined.splitlines() if ln.startswith(first + " "))
    return shlex.split(line)


def torchrun_parser():
    from torch.distributed.run import get_args_parser
    return get_args_parser()


# ---------------------------------------------------------------- torchrun
@pytest.mark.parametrize("name", [TINY, LLAMA8, MIXTRAL, L405, BRIEF])
def test_torchrun_command_parses_with_torchs_own_parser(name):
    s = load(name)
    words = command_words(to_torchrun(s, src(name)), "torchrun")
    args = torchrun_parser().parse_args(words[1:])
    assert args.nnodes == str(s.hardware.nodes)
    assert args.nproc_per_node == str(s.hardware.gpus_per_node)
    assert int(args.nnodes) * int(args.nproc_per_node) == s.parallel.world
    assert (args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id) == (
        "c10d", "$MASTER_ADDR:29500", "workbench-trial")
    assert args.max_restarts == 0
    assert args.module and args.training_script == "workbench.trial.torchrun_main"
    assert args.training_script_args == [str(EX / name), "--steps", "3", "--backend", "nccl"]


def test_torchrun_passes_overrides_on_and_runs_under_bash(tmp_path):
    s = load(TINY, "parallel.zero=1")
    text = to_torchrun(s, src(TINY, "parallel.zero=1"))
    bash_syntax_ok(text, tmp_path)
    out = run_bash(text, tmp_path, {"MASTER_ADDR": "10.0.0.1", "NCCL_SOCKET_IFNAME": "eth0"})
    assert out.returncode == 0, out.stderr
    argv = recorded(tmp_path)
    assert argv[:2] == ["MASTER_ADDR=10.0.0.1", "torchrun"]
    args = torchrun_parser().parse_args(argv[2:])
    assert args.rdzv_endpoint == "10.0.0.1:29500"      # $MASTER_ADDR expanded by bash
    assert args.training_script_args[:3] == [str(EX / TINY), "--set", "parallel.zero=1"]


def test_multinode_launch_stops_until_the_socket_interface_is_set(tmp_path):
    out = run_bash(to_torchrun(load(TINY), src(TINY)), tmp_path, {"MASTER_ADDR": "h0"})
    assert out.returncode != 0 and "NCCL_SOCKET_IFNAME" in out.stderr
    assert not (tmp_path / "argv").exists()


def _env(s) -> dict[str, str]:
    return {e.name: e.value for e in nccl_env(s)}


def test_nccl_environment_follows_the_inter_node_link():
    roce = _env(load(TINY))                          # 400GbE RoCE v2, 2 nodes
    assert roce["NCCL_IB_HCA"].endswith("mlx5}") and "NCCL_IB_GID_INDEX" in roce
    assert "NCCL_IB_DISABLE" not in roce and "NCCL_SOCKET_IFNAME" in roce
    ib = _env(load(MIXTRAL))                         # InfiniBand NDR
    assert "NCCL_IB_HCA" in ib and "NCCL_IB_GID_INDEX" not in ib
    tcp = _env(load(TINY, "hardware.inter_node.link=400gbe"))   # no RDMA
    assert tcp["NCCL_IB_DISABLE"] == "1" and "NCCL_IB_HCA" not in tcp
    single = _env(load(LLAMA8))                      # one node: no inter-node variables
    assert not {"NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_DISABLE"} & set(single)
    assert single["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "3"


def test_pytorch_nccl_variables_exist_in_this_pytorch():
    import torch

    inc = Path(torch.__file__).parent / "include" / "torch" / "csrc" / "distributed" / "c10d"
    headers = [inc / "ProcessGroupNCCL.hpp", inc / "FlightRecorder.hpp"]
    if not all(h.exists() for h in headers):
        pytest.skip("this torch build ships no c10d headers")
    text = "".join(h.read_text() for h in headers)
    names = [n for n in _env(load(TINY)) if n.startswith("TORCH_")]
    assert len(names) == 3
    for name in names:
        assert f'"{name}"' in text, name


# ---------------------------------------------------------------- Slurm
SBATCH = re.compile(r"^#SBATCH --([a-z][a-z-]*)(?:=(\S+))?$")
# long options of sbatch(1) the exporter may write (https://slurm.schedmd.com/sbatch.html)
SBATCH_OPTIONS = {"job-name", "nodes", "ntasks-per-node", "gpus-per-node", "cpus-per-task",
                  "exclusive", "time"}


@pytest.mark.parametrize("name", [TINY, MIXTRAL, LLAMA8])
def test_slurm_script_directives_and_torchrun(name, tmp_path):
    s = load(name)
    text = to_slurm(s, src(name))
    bash_syntax_ok(text, tmp_path)
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    # sbatch reads directives only before the first command line
    first_cmd = next(i for i, ln in enumerate(lines) if ln and not ln.startswith("#"))
    directives = [ln for ln in lines if ln.startswith("#SBATCH")]
    assert all(lines.index(d) < first_cmd for d in directives)
    opts = {}
    for d in directives:
        m = SBATCH.match(d)
        assert m, d
        opts[m.group(1)] = m.group(2)
    assert set(opts) == SBATCH_OPTIONS
    assert opts["nodes"] == str(s.hardware.nodes)
    assert opts["ntasks-per-node"] == "1"
    assert opts["gpus-per-node"] == str(s.hardware.gpus_per_node)
    assert opts["exclusive"] is None
    assert re.fullmatch(r"\d\d:\d\d:\d\d", opts["time"])
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST"' in text
    words = command_words(text, "srun")
    args = torchrun_parser().parse_args(words[2:])
    assert words[1] == "torchrun"
    assert (args.nnodes, args.nproc_per_node) == (str(s.hardware.nodes),
                                                  str(s.hardware.gpus_per_node))
    assert (args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id) == (
        "c10d", "$MASTER_ADDR:29500", "$SLURM_JOB_ID")


def test_slurm_script_runs_with_stub_slurm_commands(tmp_path):
    s = load(MIXTRAL)
    env = {"SLURM_JOB_NODELIST": "gpu-node-[07-08]", "SLURM_JOB_ID": "4242",
           "NCCL_SOCKET_IFNAME": "ib0"}
    out = run_bash(to_slurm(s, src(MIXTRAL)), tmp_path, env)
    assert out.returncode == 0, out.stderr
    argv = recorded(tmp_path)
    assert argv[:3] == ["MASTER_ADDR=gpu-node-07", "srun", "torchrun"]
    args = torchrun_parser().parse_args(argv[3:])
    assert args.rdzv_endpoint == "gpu-node-07:29500" and args.rdzv_id == "4242"
    assert args.nnodes == "2" and args.nproc_per_node == "8"


# ---------------------------------------------------------------- torchtitan
TT = json.loads((DATA / "torchtitan_0.2.2_job_config.json").read_text())["schema"]


def _fits(value, spec) -> bool:
    kind = spec["kind"]
    if kind == "literal":
        return value in spec["choices"]
    if kind == "union":
        return any(_fits(value, s) for s in spec["of"])
    if kind == "list":
        return isinstance(value, list) and all(_fits(v, spec["of"][0]) for v in value)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind == "none":
        return value is None
    raise AssertionError(f"schema kind {kind} not handled")


def check_job_config(tree: dict, schema: dict = TT, where: str = "") -> None:
    for key, value in tree.items():
        path = f"{where}{key}"
        assert key in schema, f"{path} is not a torchtitan 0.2.2 JobConfig field"
        spec = schema[key]
        if spec["kind"] == "section":
            assert isinstance(value, dict), path
            check_job_config(value, spec["fields"], path + ".")
        else:
            assert _fits(value, spec), f"{path} = {value!r} does not fit {spec}"


def titan(name: str, *sets: str) -> dict:
    conf = tomllib.loads(to_torchtitan(load(name, *sets)))
    check_job_config(conf)
    return conf


def test_the_schema_data_is_torchtitans():
    # spot checks that would fail on a hand-edited or truncated schema file
    assert TT["parallelism"]["fields"]["fsdp_reshard_after_forward"]["choices"] == [
        "default", "always", "never"]
    assert TT["activation_checkpoint"]["fields"]["mode"]["choices"] == [
        "selective", "full", "memory_budget", "none"]
    assert "float8" in TT["quantize"]["fields"]["linear"]["fields"]


def test_torchtitan_4d_layout():
    s = load(TINY)
    p = titan(TINY)["parallelism"]
    assert (p["data_parallel_replicate_degree"], p["data_parallel_shard_degree"]) == (1, 2)
    assert (p["tensor_parallel_degree"], p["pipeline_parallel_degree"],
            p["context_parallel_degree"]) == (2, 2, 2)
    degrees = (p["data_parallel_replicate_degree"] * p["data_parallel_shard_degree"]
               * p["tensor_parallel_degree"] * p["pipeline_parallel_degree"]
               * p["context_parallel_degree"])
    assert degrees == s.hardware.world        # parallel_dims.py's rule
    assert p["pipeline_parallel_schedule"] == "1F1B"
    assert p["pipeline_parallel_microbatch_size"] == s.training.micro_batch == 2
    tr = titan(TINY)["training"]
    # one local batch of 4 pipeline microbatches of 2 per step
    assert (tr["local_batch_size"], tr["global_batch_size"], tr["seq_len"]) == (8, 16, 256)
    assert tr["mixed_precision_param"] == "float32"
    parts = p["module_fqns_per_model_part"]
    assert parts == [["tok_embeddings", "layers.0", "layers.1"],
                     ["layers.2", "layers.3", "norm", "output"]]


def test_torchtitan_fsdp_and_gradient_accumulation():
    conf = titan(LLAMA8)
    assert (conf["model"]["name"], conf["model"]["flavor"]) == ("llama3", "8B")
    assert conf["parallelism"]["data_parallel_shard_degree"] == 8
    assert conf["parallelism"]["fsdp_reshard_after_forward"] == "default"
    assert (conf["training"]["local_batch_size"], conf["training"]["global_batch_size"]) == (1, 64)
    assert conf["activation_checkpoint"] == {"mode": "selective", "selective_ac_option": "op"}
    assert "module_fqns_per_model_part" not in conf["parallelism"]


def test_torchtitan_hsdp_splits_the_shard_group_over_cp():
    p = titan(LLAMA8, "parallel.shard_group=4")["parallelism"]
    assert (p["data_parallel_shard_degree"], p["data_parallel_replicate_degree"]) == (4, 2)
    # dp*cp = 4 ranks of shard groups of 2: the CP pair is the shard group, dp replicates
    p = titan(TINY, "parallel.shard_group=2")["parallelism"]
    assert (p["data_parallel_shard_degree"], p["data_parallel_replicate_degree"]) == (1, 2)
    with pytest.raises(ExportError) as e:
        to_torchtitan(load(TINY, "parallel.shard_group=1"))   # splits a CP pair
    assert refused_paths(e) == ["parallel.shard_group"]


def test_torchtitan_expert_parallel():
    conf = titan(MIXTRAL)
    p = conf["parallelism"]
    assert (p["expert_parallel_degree"], p["data_parallel_shard_degree"]) == (8, 16)
    assert conf["model"]["flavor"] == "mixtral-8x7b" and conf["model"]["name"] == "deepseek_v3"
    assert "NOT a torchtitan flavor" in to_torchtitan(load(MIXTRAL))


@pytest.mark.parametrize("schedule,v,name,chunks", [
    ("interleaved-1f1b", 2, "Interleaved1F1B", 2), ("zero-bubble", 2, "InterleavedZeroBubble", 2),
    ("dualpipev", 1, "DualPipeV", 2), ("gpipe", 1, "GPipe", 1)])
def test_torchtitan_pipeline_schedules_are_torchs(schedule, v, name, chunks):
    from torch.distributed.pipelining.schedules import PipelineScheduleSingle, get_schedule_class

    sets = [f"parallel.pp_schedule={schedule}", f"parallel.virtual_stages={v}",
            "model.layers=8", "training.global_batch=32"]
    p = titan(TINY, *sets)["parallelism"]
    assert p["pipeline_parallel_schedule"] == name
    cls = get_schedule_class(name)
    assert issubclass(cls, PipelineScheduleSingle) == (chunks == 1)
    parts = p["module_fqns_per_model_part"]
    assert len(parts) == 2 * chunks
    flat = [m for part in parts for m in part]
    assert flat == ["tok_embeddings", *[f"layers.{i}" for i in range(8)], "norm", "output"]


def test_torchtitan_zero2_is_fsdp2_without_resharding_after_forward():
    p = titan(LLAMA8, "parallel.zero=2")["parallelism"]
    assert p["fsdp_reshard_after_forward"] == "never" and p["data_parallel_shard_degree"] == 8


def test_torchtitan_fp8_and_cpu_offload():
    conf = titan(LLAMA8, "training.precision=fp8", "training.offload=cpu",
                 "training.engine=torchtitan", "training.recompute=full",
                 "training.fp8_param_gather=true")
    assert conf["model"]["converters"] == ["quantize.linear.float8"]
    f8 = conf["quantize"]["linear"]["float8"]
    # tensorwise is recipe_name unset: torchtitan v0.2.2 float8.py asserts that recipe_name is
    # not combined with enable_fsdp_float8_all_gather
    assert "recipe_name" not in f8 and f8["enable_fsdp_float8_all_gather"] is True
    assert conf["training"]["enable_cpu_offload"] is True
    # without training.fp8_param_gather the weights are gathered in bf16, as estimated
    f8 = titan(LLAMA8, "training.precision=fp8")["quantize"]["linear"]["float8"]
    assert "enable_fsdp_float8_all_gather" not in f8


@pytest.mark.parametrize("name,sets,path", [
    (L405, [], "parallel.zero"),                                           # ZeRO-1
    (TINY, ["parallel.zero=0"], "parallel.zero"),                          # DDP + TP/PP/CP
    (TINY, ["parallel.sequence_parallel=false"], "parallel.sequence_parallel"),
    (LLAMA8, ["training.precision=fp16"], "training.precision"),
    (LLAMA8, ["training.offload=nvme"], "training.offload"),
    (LLAMA8, ["training.optimizer=sgd"], "training.optimizer"),
])
def test_torchtitan_refuses_what_it_cannot_express(name, sets, path):
    with pytest.raises(ExportError) as e:
        to_torchtitan(load(name, *sets))
    assert path in refused_paths(e)


def test_torchtitan_pure_ddp():
    p = titan(LLAMA8, "parallel.zero=0")["parallelism"]
    assert (p["data_parallel_replicate_degree"], p["data_parallel_shard_degree"]) == (8, 1)
    assert "fsdp_reshard_after_forward" not in p


# ---------------------------------------------------------------- DeepSpeed
class _MPU:
    """The one method DeepSpeedConfig asks an mpu for: the data-parallel world size."""

    def __init__(self, dp: int):
        self.dp = dp

    def get_data_parallel_world_size(self) -> int:
        return self.dp


@pytest.fixture
def ds_config(monkeypatch):
    pytest.importorskip("deepspeed")
    from deepspeed.runtime import config as dsc

    # no process group here: DeepSpeedConfig asks deepspeed.comm for the rank first and would
    # fall back to world size 1; with rank 0 it takes the data-parallel world from the mpu
    monkeypatch.setattr(dsc.dist, "get_rank", lambda *a, **k: 0)

    def build(cfg: dict, dp: int):
        return dsc.DeepSpeedConfig(copy.deepcopy(cfg), mpu=_MPU(dp))
    return build


def test_deepspeed_config_loads_in_deepspeed(ds_config):
    s = load(LLAMA8)
    cfg = deepspeed_config(s)
    c = ds_config(cfg, s.parallel.dp)
    assert c.world_size == 8
    assert c.train_batch_size == s.training.global_batch == 64
    assert c.train_micro_batch_size_per_gpu == s.training.micro_batch == 1
    assert c.gradient_accumulation_steps == 8
    assert c.zero_optimization_stage == 3 and c.bfloat16_config.enabled
    assert c.optimizer_name == "adamw"
    assert cfg["activation_checkpointing"]["partition_activations"] is False
    # the batch identity is DeepSpeed's own check: another dp world breaks it
    with pytest.raises(AssertionError, match="train_batch_size is not equal"):
        ds_config(cfg, 4)


@pytest.mark.parametrize("sets,stage,opt_dev,param_dev", [
    (["parallel.zero=1", "training.offload=cpu"], 1, "cpu", None),
    (["parallel.zero=2"], 2, None, None),
    (["training.offload=nvme"], 3, "nvme", "nvme"),
    (["parallel.zero=0", "training.precision=fp16", "training.recompute=none"], 0, None, None),
])
def test_deepspeed_zero_stages_and_offload(ds_config, sets, stage, opt_dev, param_dev):
    s = load(LLAMA8, *sets)
    cfg = deepspeed_config(s)
    c = ds_config(cfg, s.parallel.dp)
    assert c.zero_optimization_stage == stage
    z = c.zero_config
    assert (z.offload_optimizer.device if z.offload_optimizer else None) == opt_dev
    assert (z.offload_param.device if z.offload_param else None) == param_dev
    if opt_dev == "nvme":
        assert str(z.offload_optimizer.nvme_path) == "/local_nvme"
    assert c.float16_config.enabled == (s.training.precision == "fp16")
    assert ("activation_checkpointing" in cfg) == (s.training.recompute != "none")


def test_deepspeed_sgd_falls_back_to_torch_optim(ds_config):
    s = load(LLAMA8, "training.optimizer=sgd")
    c = ds_config(deepspeed_config(s), 8)
    assert c.optimizer_name == "SGD" and c.zero_allow_untested_optimizer


def test_deepspeed_refuses_what_deepspeed_cannot_run_and_notes_megatron_deepspeed_settings(
        ds_config):
    # TINY: FSDP (zero 3) with pp 2 and ring-attention cp 2: the engine record's limits
    with pytest.raises(ExportError) as e:
        deepspeed_config(load(TINY))
    assert refused_paths(e) == ["parallel.zero", "parallel.cp"]
    # the same problems, word for word, as the validator's for a deepspeed scenario
    with pytest.raises(ScenarioError) as v:
        load(TINY, "training.engine=deepspeed")
    assert [str(p) for p in e.value.problems] == [str(p) for p in v.value.problems]
    with pytest.raises(ExportError) as e:
        deepspeed_config(load(LLAMA8, "parallel.shard_group=4"))
    assert refused_paths(e) == ["parallel.shard_group"]
    # TP, PP and EP are Megatron-DeepSpeed's launch and model code: exported with a note each
    text = to_deepspeed(load(MIXTRAL, "training.engine=deepspeed", "parallel.zero=1"))
    assert any(w.startswith("parallel.ep = 8: set in the model code") for w in text.warnings)
    s = load(LLAMA8, "training.engine=deepspeed", *DP4TP2, "parallel.zero=1",
             "training.precision=fp8")
    text = to_deepspeed(s)
    cfg = json.loads(text)
    assert cfg["bf16"] == {"enabled": True} and cfg["_comment"] == list(text.warnings)
    assert [w.split(" = ")[0] for w in text.warnings] == [
        "parallel.tp", "parallel.sequence_parallel", "training.precision"]
    ds_config(cfg, 4)   # DeepSpeed's own config class accepts it (dp = 4)


# ---------------------------------------------------------------- Megatron-LM
MEG = json.loads((DATA / "megatron_lm_pretrain_args.json").read_text())
_TYPES = {"int": int, "float": float, "str": str}


def _moe_freq(text: str):
    """arguments.py moe_freq_type: an int, or a list expression over ,0-9[]()+* only."""
    if re.search(r"[^,\d\[\]\(\)\+\*]", text):
        raise argparse.ArgumentTypeError(f"invalid pattern {text}")
    return eval(compile(ast.parse(text, mode="eval"), "<moe_freq>", "eval")) \
        if "[" in text else int(text)


# Flags the stored list lacks, copied the same way from arguments.py at the same commit
# (000c4ac2, _add_training_args: group.add_argument('--tp-comm-overlap', action='store_true')).
MEG_EXTRA = {"--tp-comm-overlap": {"action": "store_true"}}


def megatron_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(allow_abbrev=False, exit_on_error=False)
    for flag, spec in {**MEG["flags"], **MEG_EXTRA}.items():
        kw = {}
        if "action" in spec:
            kw["action"] = spec["action"]
        else:
            kw["type"] = _moe_freq if spec.get("type") == "moe_freq" else \
                _TYPES[spec.get("type", "str")]
        for key in ("choices", "nargs", "dest", "default"):
            if key in spec:
                kw[key] = spec[key]
        p.add_argument(flag, **kw)
    return p


def megatron(name: str, *sets: str):
    s = load(name, *sets)
    a = megatron_parser().parse_args(megatron_args(s))
    return s, a


def check_megatron_rules(s, a) -> None:
    """validate_args' rules the layout must meet (arguments.py at the stored commit)."""
    world = s.hardware.world
    model = a.tensor_model_parallel_size * a.pipeline_model_parallel_size * \
        a.context_parallel_size
    assert world % model == 0 and world // model == s.parallel.dp  # data_parallel_size
    assert a.global_batch_size % (a.micro_batch_size * s.parallel.dp) == 0
    assert a.max_position_embeddings >= a.seq_length
    if a.context_parallel_size > 1:
        assert a.seq_length % (2 * a.context_parallel_size) == 0
    if a.pipeline_model_parallel_layout is None:
        assert a.num_layers % a.pipeline_model_parallel_size == 0
    if a.recompute_granularity == "selective":
        assert a.recompute_method is None
    if a.use_megatron_fsdp:
        assert a.ckpt_format == "fsdp_dtensor"
    if a.overlap_param_gather:
        assert a.use_distributed_optimizer and a.overlap_grad_reduce
    if a.optimizer_cpu_offload:
        assert a.use_precision_aware_optimizer
    if a.tp_comm_overlap:
        assert a.sequence_parallel and a.tensor_model_parallel_size > 1
    # NullTokenizer adds one id; Megatron pads to make_vocab_size_divisible_by * tp
    vocab, multiple = a.vocab_size + 1, a.make_vocab_size_divisible_by * \
        a.tensor_model_parallel_size
    padded = -(-vocab // multiple) * multiple
    assert vocab == s.model.vocab
    if s.model.vocab % s.parallel.tp == 0:
        assert padded == s.model.vocab            # the estimator's vocab, unpadded


def test_megatron_expert_parallel_mixtral():
    s, a = megatron(MIXTRAL)
    check_megatron_rules(s, a)
    assert a.tensor_model_parallel_size == s.parallel.tp == 1
    assert a.expert_model_parallel_size == s.parallel.ep == 8
    assert (a.num_experts, a.moe_router_topk, a.moe_ffn_hidden_size) == (8, 2, 14336)
    assert a.moe_token_dispatcher_type == "alltoall"
    assert a.use_megatron_fsdp and a.data_parallel_sharding_strategy == "optim_grads_params"
    assert (a.num_layers, a.hidden_size, a.num_attention_heads) == (32, 4096, 32)
    assert a.group_query_attention and a.num_query_groups == 8
    assert a.swiglu and a.normalization == "RMSNorm" and a.add_bias_linear is False
    assert a.untie_embeddings_and_output_weights and a.bf16
    assert (a.recompute_granularity, a.recompute_method, a.recompute_num_layers) == (
        "full", "uniform", 1)
    assert (a.micro_batch_size, a.global_batch_size, a.seq_length) == (1, 128, 4096)


def test_megatron_deepseek_v3_is_multi_latent_attention():
    from workbench.scenario import parse_scenario
    s = parse_scenario({
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 32},
        "model": {"preset": "deepseek-v3"},
        "parallel": {"dp": 32, "tp": 2, "pp": 4, "ep": 32, "zero": 1},
        "training": {"engine": "megatron", "seq_len": 4096, "global_batch": 1024}})
    a = megatron_parser().parse_args(megatron_args(s))
    check_megatron_rules(s, a)
    assert a.multi_latent_attention and not a.group_query_attention
    # DeepSeek-V3 config.json: q_lora_rank 1536, kv_lora_rank 512, qk_nope 128, rope 64, v 128
    assert (a.q_lora_rank, a.kv_lora_rank, a.qk_head_dim, a.qk_pos_emb_head_dim,
            a.v_head_dim) == (1536, 512, 128, 64, 128)


def test_megatron_4d_layout_with_distributed_optimizer():
    s, a = megatron(TINY, "parallel.zero=1")
    check_megatron_rules(s, a)
    assert (a.tensor_model_parallel_size, a.pipeline_model_parallel_size,
            a.context_parallel_size) == (s.parallel.tp, s.parallel.pp, s.parallel.cp) == (2, 2, 2)
    assert a.sequence_parallel and a.cp_comm_type == ["p2p"]
    assert a.use_distributed_optimizer and not a.use_megatron_fsdp
    assert a.num_virtual_stages_per_pipeline_rank is None
    assert not a.bf16 and not a.fp16                  # fp32 scenario
    assert a.recompute_granularity is None
    assert a.num_query_groups == 8 and a.ffn_hidden_size == 344


def test_megatron_interleaved_405b_layout_is_megatron_cores():
    s, a = megatron(L405)
    check_megatron_rules(s, a)
    assert (a.tensor_model_parallel_size, a.pipeline_model_parallel_size) == (8, 16)
    assert a.use_distributed_optimizer and a.sequence_parallel
    assert a.make_vocab_size_divisible_by == 32       # 128256 = 32 * 8 * 501: no padding
    # 126 layers do not split into 16 x 2 stages evenly: an explicit layout
    layout = a.pipeline_model_parallel_layout
    assert layout is not None and a.num_virtual_stages_per_pipeline_rank is None
    stages = layout.split("|")
    assert [st.count("t") for st in stages] == [len(r) for r in chunk_layers(126, 32)]
    mod = pytest.importorskip("megatron.core.transformer.pipeline_parallel_layer_layout")
    real = mod.PipelineParallelLayerLayout.from_str(layout, a.pipeline_model_parallel_size)
    real.validate_layer_layout(num_layers=a.num_layers, mtp_num_layers=None)
    assert real.virtual_pipeline_model_parallel_size == s.parallel.virtual_stages == 2


def test_megatron_even_interleaved_split_uses_virtual_stages():
    s, a = megatron(L405, "model.layers=128")
    assert a.num_virtual_stages_per_pipeline_rank == 2
    assert a.pipeline_model_parallel_layout is None
    check_megatron_rules(s, a)


def test_megatron_hybrid_sharding_and_moe_dense_layers():
    s, a = megatron(LLAMA8, "parallel.zero=1", "parallel.shard_group=4")
    assert a.use_distributed_optimizer and a.num_distributed_optimizer_instances == 2
    s, a = megatron(MIXTRAL, "model.moe.dense_layers=2", "model.moe.shared_experts=1")
    assert a.moe_layer_freq == [0, 0] + [1] * 30
    assert a.moe_shared_expert_intermediate_size == 14336


def test_megatron_fp8_cpu_offload_and_attention_backend():
    s, a = megatron(LLAMA8, "parallel.zero=1", "training.precision=fp8",
                    "training.offload=cpu", "training.attention=eager")
    check_megatron_rules(s, a)
    assert a.bf16 and a.fp8 == "hybrid"
    assert a.optimizer_cpu_offload and a.use_precision_aware_optimizer
    assert a.attention_backend == "unfused"


@pytest.mark.parametrize("name,sets,path", [
    (TINY, [], "parallel.zero"),                                    # FSDP with PP
    (TINY, ["parallel.zero=1", "parallel.pp_schedule=gpipe"], "parallel.pp_schedule"),
    (TINY, ["parallel.zero=1", "parallel.pp_schedule=dualpipev", "training.global_batch=32"],
     "parallel.pp_schedule"),
    (LLAMA8, ["training.offload=nvme"], "training.offload"),
    (LLAMA8, ["parallel.shard_group=4"], "parallel.shard_group"),
    (MIXTRAL, ["training.precision=fp16"], "training.precision"),
])
def test_megatron_refuses_what_it_cannot_express(name, sets, path):
    with pytest.raises(ExportError) as e:
        megatron_args(load(name, *sets))
    assert path in refused_paths(e)


def test_megatron_script_passes_exactly_the_arguments(tmp_path):
    s = load(L405)
    text = to_megatron(s)
    bash_syntax_ok(text, tmp_path)
    assert "export CUDA_DEVICE_MAX_CONNECTIONS=1" in text
    out = run_bash(text, tmp_path, {"MASTER_ADDR": "n0", "NCCL_SOCKET_IFNAME": "ib0"})
    assert out.returncode == 0, out.stderr
    argv = recorded(tmp_path)
    assert argv[:2] == ["MASTER_ADDR=n0", "torchrun"]
    i = argv.index("pretrain_gpt.py")
    launch = torchrun_parser().parse_args(argv[2:i + 1])
    assert (launch.nnodes, launch.nproc_per_node) == ("64", "8")
    assert argv[i + 1:] == megatron_args(s)
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in to_megatron(load(LLAMA8))   # FSDP: unset


# ---------------------------------------------------------------- trial and the CLI
def test_trial_command_is_what_workbench_trial_accepts():
    from workbench.cli.parser import build_parser

    text = export(load(TINY, "parallel.zero=1"), "trial", src(TINY, "parallel.zero=1"))
    words = shlex.split(text)
    args = build_parser().parse_args(words[1:])
    assert words[0] == "workbench" and args.verb == "trial"
    assert (args.scenario, args.set, args.steps) == (str(EX / TINY), ["parallel.zero=1"], 3)


def test_cli_export_deepspeed_prints_json(capsys):
    assert main(["export", str(EX / LLAMA8), "--to", "deepspeed"]) == 0
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["train_batch_size"] == 64 and cfg["zero_optimization"]["stage"] == 3


@pytest.mark.parametrize("target", list(TARGETS))
def test_cli_every_target_prints_something(capsys, target):
    # the fine-tuning targets export adapters (torchtune and the HF Trainer checkpoint whole
    # blocks): the example as a LoRA run
    sets = (["--set", "training.method=lora", "--set", "training.recompute=full"]
            if target in ("torchtune", "peft", "accelerate") else [])
    assert main(["export", str(EX / LLAMA8), "--to", target, *sets]) == 0
    assert capsys.readouterr().out.strip()


def test_cli_bad_target_exits_2_with_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        main(["export", str(EX / LLAMA8), "--to", "horovod"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--to" in err and "horovod" in err


def test_cli_inexpressible_layout_exits_2_naming_the_field(capsys):
    assert main(["export", str(EX / TINY), "--to", "deepspeed"]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    err = out.err.strip()
    assert "\n" not in err and err.startswith(
        "workbench: cannot export to deepspeed: parallel.zero: DeepSpeed's PipelineEngine "
        "refuses it")


def test_cli_invalid_scenario_still_exits_2(capsys):
    assert main(["export", str(EX / LLAMA8), "--to", "torchrun", "--set", "parallel.tp=3"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "parallel" in err


def test_unknown_target_in_the_api():
    with pytest.raises(KeyError):
        export(load(LLAMA8), "horovod")


# ---------------------------------------------------------------- engine switches (contract 1)
# Scenarios for an engine, with its switches, through the validator (the --set path); each
# export parsed back with its target's checker above. generic scenarios export exactly what
# they did before the switches (the tests above) and warn about nothing.
TITAN = ("training.engine=torchtitan", "training.recompute=op")
DP4TP2 = ("parallel.dp=4", "parallel.tp=2")


def test_generic_exports_carry_no_notes():
    s = load(LLAMA8)
    for target in ("torchtitan", "megatron", "deepspeed"):
        text = export(s, target)
        assert text.warnings == () and "NOTE" not in text and "_comment" not in text
    conf = titan(LLAMA8)
    assert "compile" not in conf and conf["parallelism"]["enable_async_tensor_parallel"] is False
    assert "--tp-comm-overlap" not in megatron_args(load(LLAMA8, "parallel.zero=1"))


def test_torchtitan_switches():
    sets = (*TITAN, *DP4TP2, "parallel.async_tp=true", "training.compile=true",
            "training.precision=fp8", "training.fp8_recipe=rowwise")
    assert to_torchtitan(load(LLAMA8, *sets)).warnings == ()
    conf = titan(LLAMA8, *sets)
    assert conf["parallelism"]["enable_async_tensor_parallel"] is True
    assert conf["parallelism"]["tensor_parallel_degree"] == 2
    assert conf["compile"] == {"enable": True, "components": ["model", "loss"]}
    assert conf["model"]["converters"] == ["quantize.linear.float8"]
    f8 = conf["quantize"]["linear"]["float8"]
    assert f8["recipe_name"] == "rowwise" and "enable_fsdp_float8_all_gather" not in f8
    assert conf["activation_checkpoint"] == {"mode": "selective", "selective_ac_option": "op"}


def test_torchtitan_async_tp_turns_compile_on_with_a_note():
    text = to_torchtitan(load(LLAMA8, *TITAN, *DP4TP2, "parallel.async_tp=true"))
    conf = tomllib.loads(text)
    check_job_config(conf)
    assert conf["parallelism"]["enable_async_tensor_parallel"] is True
    assert conf["compile"]["enable"] is True
    assert [w.split(" =")[0] for w in text.warnings] == ["parallel.async_tp"]
    assert f"# NOTE: {text.warnings[0]}" in text


def test_torchtitan_mxfp8_on_blackwell_and_its_refusals():
    b200 = ("hardware.gpu=b200",)
    conf = titan(LLAMA8, *TITAN, *b200, "training.precision=fp8", "training.fp8_recipe=mxfp8")
    assert conf["model"]["converters"] == ["quantize.linear.mx"]
    assert conf["quantize"]["linear"]["mx"]["recipe_name"] == "mxfp8_cublas"
    assert "float8" not in conf["quantize"]["linear"]
    # mx.py "TP not yet supported with torch.compile" (async TP turns compile on): a Megatron
    # scenario that runs there is refused for torchtitan
    meg = load(LLAMA8, *b200, *DP4TP2, "training.engine=megatron", "parallel.zero=1",
               "parallel.tp_comm_overlap=true", "training.precision=fp8", "training.fp8_recipe=mxfp8")
    with pytest.raises(ExportError) as e:
        to_torchtitan(meg)
    assert refused_paths(e) == ["parallel.zero", "training.fp8_recipe"]
    assert "'TP not yet supported with torch.compile for mxfp8'" in str(e.value)
    # SM100+ only: off Blackwell the validator refuses it for either engine
    for engine in ("torchtitan", "megatron"):
        with pytest.raises(ScenarioError, match="mxfp8 runs on blackwell GPUs only "
                                                f"\\(engine {engine}\\); NVIDIA H100"):
            load(LLAMA8, f"training.engine={engine}", "training.precision=fp8",
                 "training.fp8_recipe=mxfp8")


def test_torchtitan_expert_tp_folding():
    sets = (*TITAN, "parallel.dp=8", "parallel.tp=2")
    p = titan(MIXTRAL, *sets, "parallel.expert_tp=1")["parallelism"]
    assert (p["expert_parallel_degree"], p["expert_tensor_parallel_degree"]) == (8, 1)
    assert titan(MIXTRAL, *sets)["parallelism"]["expert_tensor_parallel_degree"] == 2


def test_megatron_switches(tmp_path):
    sets = ("training.engine=megatron", *DP4TP2, "parallel.zero=1",
            "parallel.tp_comm_overlap=true",
            "training.precision=fp8", "training.fp8_recipe=tensorwise")
    s, a = megatron(LLAMA8, *sets)
    check_megatron_rules(s, a)
    assert a.tp_comm_overlap and a.sequence_parallel
    assert a.fp8 == "hybrid" and a.fp8_recipe == "tensorwise"
    text = to_megatron(s)
    assert text.warnings == ()
    bash_syntax_ok(text, tmp_path)
    # generic fp8: no --fp8-recipe (Megatron's default, delayed), as before the switches
    assert "--fp8-recipe" not in megatron_args(load(LLAMA8, "parallel.zero=1",
                                                    "training.precision=fp8"))


def test_megatron_expert_tp_folding():
    sets = ("training.engine=megatron", "parallel.dp=8", "parallel.tp=2", "parallel.zero=1")
    s, a = megatron(MIXTRAL, *sets, "parallel.expert_tp=1")
    check_megatron_rules(s, a)
    assert (a.expert_model_parallel_size, a.expert_tensor_parallel_size) == (8, 1)
    assert megatron(MIXTRAL, *sets)[1].expert_tensor_parallel_size is None   # = tp (default)


def test_megatron_async_tp_needs_sequence_parallel():
    # a megatron scenario cannot ask for it (its TP overlap is parallel.tp_comm_overlap); a
    # nanotron one, which runs
    # async TP without SP, is refused when exported to Megatron-LM
    with pytest.raises(ScenarioError, match="parallel.async_tp"):
        load(LLAMA8, "training.engine=megatron", *DP4TP2, "parallel.zero=1",
             "parallel.async_tp=true", "parallel.sequence_parallel=false")
    with pytest.raises(ExportError) as e:
        megatron_args(load(LLAMA8, "training.engine=nanotron", "training.recompute=none",
                           *DP4TP2, "parallel.zero=1",
                           "parallel.async_tp=true", "parallel.sequence_parallel=false"))
    assert refused_paths(e) == ["parallel.async_tp"]


def test_torchtitan_scenario_exported_to_megatron_says_what_does_not_carry_over(tmp_path):
    sets = (*TITAN, *DP4TP2, "parallel.async_tp=true", "training.compile=true",
            "training.precision=fp8", "training.fp8_recipe=rowwise")
    s = load(LLAMA8, *sets, "parallel.zero=3")
    text = export(s, "megatron")
    bash_syntax_ok(text, tmp_path)
    assert [w.split(" =")[0] for w in text.warnings] == [
        "training.engine", "training.compile", "training.fp8_recipe", "training.recompute"]
    for w in text.warnings:
        assert f"# NOTE: {w}" in text
    a = megatron_parser().parse_args(megatron_args(s))
    check_megatron_rules(s, a)
    assert a.tp_comm_overlap and a.fp8_recipe == "blockwise"      # what does carry over
    assert a.recompute_granularity == "selective" and a.recompute_method is None


def test_megatron_scenario_exported_to_torchtitan_names_delayed_scaling():
    s = load(LLAMA8, "training.engine=megatron", "training.precision=fp8",
             "training.recompute=full")   # fp8_recipe null: megatron's default, delayed
    text = to_torchtitan(s)
    conf = tomllib.loads(text)
    check_job_config(conf)
    assert [w.split(" =")[0] for w in text.warnings] == ["training.engine", "training.fp8_recipe"]
    assert "delayed" in text.warnings[1] and f"# NOTE: {text.warnings[1]}" in text
    assert conf["model"]["converters"] == ["quantize.linear.float8"]   # tensorwise instead


def test_deepspeed_compile_and_foreign_recompute_are_noted(ds_config):
    s = load(LLAMA8, "training.engine=deepspeed", "training.compile=true")
    text = export(s, "deepspeed")
    cfg = json.loads(text)
    assert cfg["_comment"] == list(text.warnings) and len(text.warnings) == 1
    assert "model_engine.compile()" in text.warnings[0]
    c = ds_config(cfg, s.parallel.dp)                  # DeepSpeed ignores the note key
    assert c.zero_optimization_stage == 3 and c.train_batch_size == 64
    s = load(LLAMA8, *TITAN)
    notes = json.loads(export(s, "deepspeed"))["_comment"]
    assert [n.split(" =")[0] for n in notes] == ["training.engine", "training.recompute"]
    assert "activation_checkpointing" in deepspeed_config(s)

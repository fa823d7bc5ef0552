"""Real multi-process trials (gloo, forked processes): each technique against a single-process
reference, exact model-state bytes, faults named by rank, and nothing left running."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import psutil
import pytest

from tests.conftest import ROOT
from workbench.errors import ScenarioError
from workbench.scenario import parse_scenario

pytestmark = pytest.mark.slow


def _scenario(model: str, **parallel):
    world = (parallel.get("dp", 1) * parallel.get("tp", 1) * parallel.get("pp", 1)
             * parallel.get("cp", 1))
    return parse_scenario({"hardware": {"gpu": "h100-sxm", "gpus_per_node": world},
                           "model": model, "parallel": parallel,
                           "training": {"seq_len": 256, "global_batch": 16}})


def _children() -> list:
    """Live processes under this one, but Python's own resource tracker: the spawn start
    method starts one per parent process and it exits with the parent (test_bench ignores it
    likewise); an earlier test's spawned ranks leave it running in the test process."""
    return [c for c in psutil.Process().children(recursive=True) if c.is_running()
            and c.status() != psutil.STATUS_ZOMBIE
            and "multiprocessing.resource_tracker" not in " ".join(c.cmdline())]


LAYOUTS = [
    ("tiny-dense", {"dp": 4}),                                   # DDP
    ("tiny-dense", {"dp": 4, "zero": 1}),                        # ZeRO-1
    ("tiny-gpt", {"dp": 4, "zero": 3}),                          # FSDP2
    ("tiny-gpt", {"dp": 1, "tp": 4}),                            # TP + SP, tied embeddings
    ("tiny-dense", {"dp": 2, "tp": 2, "zero": 3}),               # FSDP2 x TP
    ("tiny-gpt", {"dp": 1, "pp": 4}),                            # 1F1B, tied across stages
    ("tiny-dense", {"dp": 2, "pp": 2, "zero": 3, "pp_schedule": "gpipe"}),
    ("tiny-dense", {"dp": 1, "pp": 2, "pp_schedule": "interleaved-1f1b", "virtual_stages": 2}),
    ("tiny-moe", {"dp": 1, "pp": 2, "pp_schedule": "zero-bubble", "virtual_stages": 2}),
    ("tiny-gpt", {"dp": 1, "pp": 2, "pp_schedule": "dualpipev"}),
    ("tiny-dense", {"dp": 1, "tp": 2, "pp": 2}),                 # TP x PP
    ("tiny-moe", {"dp": 4, "ep": 4}),                            # EP (all-to-all dispatch)
    ("tiny-moe", {"dp": 4, "ep": 2}),                            # EP x expert-data-parallel
    ("tiny-moe", {"dp": 4, "ep": 2, "zero": 3}),                 # EP x FSDP2, experts over EDP
    ("tiny-moe", {"dp": 4, "ep": 4, "zero": 2}),                 # EP x ZeRO-2 (EDP of 1)
    ("tiny-moe", {"dp": 2, "cp": 2, "ep": 2}),                   # EP x CP, DDP
    ("tiny-moe", {"dp": 2, "cp": 2, "ep": 4, "zero": 3}),        # EP over dp x cp, FSDP2
    ("tiny-moe", {"dp": 4, "ep": 2, "zero": 1}),                 # EP x ZeRO-1 (two partitions)
    ("tiny-moe", {"dp": 2, "pp": 2, "ep": 2, "zero": 3}),        # EP x PP x FSDP2
    ("tiny-gpt", {"dp": 1, "cp": 4}),                            # CP: ring attention
    ("tiny-dense", {"dp": 2, "cp": 2, "zero": 3}),               # FSDP2 over dp x cp
    ("tiny-gpt", {"dp": 1, "cp": 2, "tp": 2, "zero": 3}),        # CP x TP
    ("tiny-dense", {"dp": 2, "cp": 2, "tp": 2, "pp": 2, "zero": 3}),   # 4-D, 16 processes
]


@pytest.mark.parametrize("model,parallel", LAYOUTS, ids=lambda v: str(v))
def test_trial_matches_single_process_reference(model, parallel):
    from workbench.trial import run_trial
    from workbench.trial.reference import reference_losses

    result = run_trial(_scenario(model, **parallel), steps=3)
    assert result.error is None
    ref = reference_losses(result.scenario, 3)
    # three steps: the first loss checks the forward, the next two the gradients and update
    assert result.loss() == pytest.approx(ref, abs=2e-6)
    assert result.backend == "gloo"
    for r in result.ranks():
        assert len(r["step_time_s"]) == 3 and all(t > 0 for t in r["step_time_s"])
    assert not _children()


@pytest.mark.parametrize("fault,words", [("raise", "injected failure on rank 2"),
                                         ("kill", "was killed by signal 9"),
                                         ("hang", "stopped making progress for 10 s")])
def test_a_failing_rank_is_named_and_nothing_is_left(fault, words):
    """The supervisor names the rank and what happened to it (a hang: by its own watchdog,
    stall_s); how fast is the benchmark's business, not this test's."""
    from workbench.trial import run_trial

    result = run_trial(_scenario("tiny-dense", dp=4), steps=3, inject=fault, inject_rank=2,
                       inject_step=1, stall_s=10)
    assert result.error is not None and "rank 2" in result.error, result.error
    assert words in result.error, result.error
    time.sleep(0.2)
    assert not _children()


def test_two_trials_at_once_do_not_collide():
    from workbench.trial import run_trial

    results = []
    threads = [threading.Thread(target=lambda: results.append(
        run_trial(_scenario("tiny-dense", dp=2), steps=2))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(results) == 2, results
    assert [r.error for r in results] == [None, None]


def test_invalid_trial_layouts_are_refused_before_any_process_starts():
    from workbench.trial import prepare

    with pytest.raises(ScenarioError, match="at most 16"):
        prepare(_scenario("tiny-dense", dp=4), world_size=32)
    with pytest.raises(ScenarioError, match="FSDP2 only"):
        prepare(_scenario("tiny-dense", dp=2, tp=2))
    with pytest.raises(ScenarioError, match="MoE models run without tensor parallelism"):
        prepare(_scenario("tiny-moe", dp=2, tp=2, ep=2, zero=3))
    with pytest.raises(ScenarioError, match="MoE models run without tensor parallelism"):
        prepare(_scenario("tiny-moe", dp=1, tp=2))       # crashed in a rank before: refused now
    prepare(_scenario("tiny-moe", dp=2, cp=2, ep=4, zero=3))     # EP x CP x FSDP2 runs
    assert not _children()


def test_cli_trial_json_has_contract_3_keys():
    r = subprocess.run([sys.executable, "-m", "workbench", "trial",
                        str(ROOT / "examples/tiny-trial-4d.yaml"), "--world-size", "4",
                        "--steps", "2", "--json"], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    for key in ("backend", "world_size", "layout", "model", "ranks", "loss", "error"):
        assert key in out
    assert out["world_size"] == 4 and out["error"] is None and len(out["loss"]) == 2
    rank = out["ranks"][0]
    for key in ("rank", "step_time_s", "measured", "predicted", "comm"):
        assert key in rank
    assert set(rank["measured"]) >= {"params", "grads", "optimizer", "activations", "peak"}


def test_cli_refuses_an_impossible_trial_with_exit_2():
    r = subprocess.run([sys.executable, "-m", "workbench", "trial",
                        str(ROOT / "examples/llama3-8b-8xh100.yaml"), "--world-size", "64"],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and "at most 16" in r.stderr


def test_the_same_entry_point_runs_under_two_torchrun_agents_as_two_nodes(tmp_path):
    """Two torchrun agents on 127.0.0.1 form one 4-rank job (c10d rendezvous), as two nodes of a
    cluster would."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=2",
           "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=wb-test",
           "-m", "workbench.trial.torchrun_main", str(ROOT / "examples/llama3-8b-8xh100.yaml"),
           "--steps", "2", "--set", "model.preset=tiny-dense", "--set", "parallel.dp=4",
           "--set", "hardware.gpus_per_node=4"]
    agents = [subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True) for _ in range(2)]
    outs = []
    try:
        for a in agents:
            out, err = a.communicate(timeout=240)
            assert a.returncode == 0, err[-2000:]
            outs.append(out)
    finally:
        for a in agents:
            if a.poll() is None:
                a.kill()
                a.wait()
    events = [json.loads(line) for out in outs for line in out.splitlines()
              if line.startswith("{")]
    steps = [e for e in events if e["type"] == "step"]
    assert sorted({e["rank"] for e in steps}) == [0, 1, 2, 3]
    assert len(steps) == 8 and sum(e["type"] == "done" for e in events) == 4


def test_backend_choice_nccl_only_with_a_gpu_per_rank(monkeypatch):
    from workbench import rank_devices
    from workbench.rank_devices import choose_backend

    monkeypatch.setattr(rank_devices, "visible_gpus", lambda: [("NVIDIA H200", 1)] * 4)
    assert choose_backend("auto", 4) == "nccl"
    assert choose_backend("auto", 8) == "gloo"
    monkeypatch.setattr(rank_devices, "visible_gpus", lambda: [])
    assert choose_backend("auto", 1) == "gloo"
    assert choose_backend("nccl", 2) == "nccl"      # an explicit choice is kept


def test_closing_the_stream_midway_leaves_no_process():
    """A notebook user interrupting the kernel closes the generator: every rank is reaped."""
    from workbench.trial import stream_trial

    events = stream_trial(_scenario("tiny-dense", dp=4), steps=50)
    for ev in events:
        if ev["type"] == "step":
            break
    events.close()
    time.sleep(0.2)
    assert not _children()


def test_a_layout_larger_than_memory_is_refused(monkeypatch):
    import workbench.trial as trial

    monkeypatch.setattr(trial, "available_memory", lambda: 1e9)
    with pytest.raises(ScenarioError, match="this machine has 954 MiB available"):
        trial.prepare(_scenario("tiny-dense", dp=4))


def test_sub_layouts_shrink_data_parallelism_first_to_a_divisor():
    from workbench.trial import sub_layout

    s = parse_scenario({"hardware": {"gpu": "h100-sxm", "gpus_per_node": 6}, "model": "tiny-dense",
                        "parallel": {"dp": 6}, "training": {"global_batch": 12}})
    assert sub_layout(s, 2).parallel.dp == 2 and sub_layout(s, 3).parallel.dp == 3
    s4d = parse_scenario({"hardware": {"gpu": "h100-sxm", "gpus_per_node": 16}, "model": "tiny-dense",
                          "parallel": {"dp": 2, "cp": 2, "pp": 2, "tp": 2, "zero": 3},
                          "training": {"seq_len": 256, "global_batch": 16}})
    p = sub_layout(s4d, 4).parallel
    assert (p.dp, p.cp, p.pp, p.tp) == (1, 1, 2, 2)


def test_events_stream_while_the_trial_runs_and_results_become_dataframes():
    from workbench.trial import run_trial, stream_trial

    kinds = [ev["type"] for ev in stream_trial(_scenario("tiny-dense", dp=2), steps=4)]
    # every step is yielded as it happens, between the start and the end
    assert kinds[0] == "start" and kinds[-1] == "end" and kinds.count("step") == 8
    result = run_trial(_scenario("tiny-dense", dp=2), steps=2)
    frames = result.frames()
    assert len(frames["steps"]) == 4 and set(frames["steps"]["rank"]) == {0, 1}
    assert list(frames["ranks"]["measured_params"]) == list(frames["ranks"]["predicted_params"])


MEASURED_LAYOUTS = [
    ("tiny-dense", {"dp": 4}),                                   # DDP
    ("tiny-gpt", {"dp": 4}),                                     # DDP, GPT family
    ("tiny-moe", {"dp": 2}),                                     # DDP, experts replicated
    ("tiny-dense", {"dp": 4, "zero": 1}),                        # ZeroRedundancyOptimizer
    ("tiny-dense", {"dp": 2, "zero": 2}),                        # FSDP2 without resharding
    ("tiny-dense", {"dp": 4, "zero": 3}),                        # FSDP2
    ("tiny-dense", {"dp": 1, "tp": 2}),                          # TP + SP
    ("tiny-dense", {"dp": 1, "tp": 2, "sequence_parallel": False}),
    ("tiny-gpt", {"dp": 1, "tp": 2}),                            # TP + SP, tied, positions
    ("tiny-dense", {"dp": 2, "tp": 2, "zero": 3}),               # FSDP2 x TP
    ("tiny-dense", {"dp": 1, "pp": 4}),                          # 1F1B
    ("tiny-dense", {"dp": 1, "pp": 2, "pp_schedule": "interleaved-1f1b", "virtual_stages": 2}),
    ("tiny-gpt", {"dp": 1, "pp": 2, "pp_schedule": "dualpipev"}),
    ("tiny-dense", {"dp": 1, "pp": 2, "tp": 2}),                 # TP x PP
    ("tiny-dense", {"dp": 2, "pp": 2, "zero": 3}),               # FSDP2 x PP
    ("tiny-dense", {"dp": 2, "tp": 2, "pp": 2, "zero": 3}),      # FSDP2 x TP x PP
    ("tiny-dense", {"dp": 1, "tp": 2, "zero": 3}),               # zero 3 on one replica
    ("tiny-gpt", {"dp": 1, "cp": 2}),                            # ring attention
    ("tiny-dense", {"dp": 1, "cp": 4}),
    ("tiny-dense", {"dp": 1, "cp": 2, "tp": 2, "zero": 3}),      # CP x TP
    ("tiny-moe", {"dp": 4, "ep": 4}),                            # EP
    ("tiny-moe", {"dp": 4, "ep": 2}),                            # EP x expert data parallel
    ("tiny-moe", {"dp": 4, "ep": 4, "zero": 3}),                 # EP x FSDP2, EDP of 1
    ("tiny-moe", {"dp": 4, "ep": 2, "zero": 3}),                 # EP x FSDP2, experts over EDP
    ("tiny-moe", {"dp": 4, "ep": 2, "zero": 2}),                 # EP x ZeRO-2 (FSDP2)
    ("tiny-moe", {"dp": 2, "cp": 2, "ep": 2}),                   # EP x CP, DDP
    ("tiny-moe", {"dp": 2, "cp": 2, "ep": 2, "zero": 3}),        # EP x CP x FSDP2
    ("tiny-moe", {"dp": 4, "ep": 2, "zero": 1}),                 # EP x ZeroRedundancyOptimizer
]


@pytest.mark.parametrize("model,parallel", MEASURED_LAYOUTS, ids=lambda v: str(v))
def test_measurements_equal_the_estimate(model, parallel):
    """Per rank: parameter, gradient and optimizer bytes (from the tensors) equal the
    estimator's exactly; saved activations within 5 %; every collective's bytes and count per
    dimension (flight recorder, profiler, the ring's own count) equal the estimator's volume for
    that rank's pipeline stage. Expert-parallel payloads depend on the routing per rank; their
    sum over all ranks equals the sum of the balanced predictions. Three steps: DDP rebuilds its
    buckets once, in the second step (two small broadcasts), so the third is the steady state."""
    from workbench.trial import run_trial

    result = run_trial(_scenario(model, **parallel), steps=3)
    assert result.error is None
    ranks = result.ranks()
    for r in ranks:
        for key in ("params", "grads", "optimizer"):
            assert r["measured"][key] == r["predicted"][key], (r["rank"], key)
        assert r["measured"]["activations"] == pytest.approx(r["predicted"]["activations"],
                                                             rel=0.05), r["rank"]
        measured, predicted = r["comm"]["measured"], r["comm"]["predicted"]
        assert predicted and set(measured) == set(predicted), r["rank"]
        for dim, ops in predicted.items():
            assert set(measured[dim]) == set(ops), (r["rank"], dim)
            for kind, want in ops.items():
                got = measured[dim][kind]
                assert got["count"] == want["count"], (r["rank"], dim, kind)
                if dim != "ep":
                    assert got["bytes"] == pytest.approx(want["bytes"]), (r["rank"], dim, kind)
    for kind in ranks[0]["comm"]["predicted"].get("ep", {}):
        total = sum(r["comm"]["measured"]["ep"][kind]["bytes"] for r in ranks)
        want = sum(r["comm"]["predicted"]["ep"][kind]["bytes"] for r in ranks)
        assert total == pytest.approx(want), kind


def test_zero1_partition_lists_the_trial_models_tensors_in_order():
    """The ZeRO-1 prediction enumerates the trial model's parameters from the shape alone."""
    from workbench.catalog import CATALOGS
    from workbench.trial.model import Transformer
    from workbench.trial.shrink import trial_model
    from workbench.trial.prediction import parameter_tensors, zero_redundancy_partition

    for name in ("tiny-dense", "tiny-gpt", "tiny-moe"):
        m = trial_model(CATALOGS["model"][name], 1, 1, 1)
        assert parameter_tensors(m) == [p.numel() for p in Transformer(m).parameters()]
    # largest first, each to the least-loaded rank (lowest on a tie)
    assert zero_redundancy_partition([5, 9, 2, 9, 1], 2) == [[1, 0], [3, 2, 4]]


def test_the_stall_window_grows_with_ranks_per_core():
    """A rank with a core of its own is hung after 20 s without progress; ranks sharing cores
    run a share of the time, so the window grows with ranks per core (16 ranks on 2 cores:
    8x), never below 20 s."""
    from workbench.trial.launcher import STALL_S, stall_window
    assert STALL_S == 20.0
    assert stall_window(4, cores=8) == 20.0
    assert stall_window(2, cores=2) == 20.0
    assert stall_window(16, cores=2) == 160.0

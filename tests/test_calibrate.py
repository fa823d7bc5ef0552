"""Calibration: the profile's arithmetic, its file, its use as a scenario's hardware, the eager
operation counts against the trial model's real dispatches, and ``workbench calibrate``."""
from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from workbench.hardware.calibration import load_profile
from workbench.hardware.profile import MachineProfile, fit_alpha_beta
from workbench.errors import ScenarioError
from workbench.scenario import parse_scenario

GRID = {"m": [16, 256], "n": [16, 256], "k": [16, 256]}


@pytest.fixture(autouse=True)
def _profiles_in_tmp_path(calibration_folder):
    """Profiles these tests write to tmp_path are read from there."""


def _profile(**changes) -> MachineProfile:
    """A hand-made profile: every GEMM of the grid takes 1 us per 2**12 FLOPs."""
    seconds = [2.0 * m * n * k / 2 ** 12 * 1e-6 for m in GRID["m"] for n in GRID["n"]
               for k in GRID["k"]]
    base = dict(date="2026-12-02", host={"cpu": "test cpu"}, cores=2, memory_gb=16.0,
                gemm_grid=GRID, gemm_seconds={"fp32": seconds, "bf16": seconds},
                copy_gb_per_s=10.0, op_forward_s=5e-6, op_backward_s=7e-6, op_no_grad_s=3e-6,
                wrappers={"tp": {"layer": (1e-3, 2e-3), "rest": (4e-3, 6e-3),
                                 "tensor": (1e-4, 0.0)}},
                collectives={"gloo": {"all_reduce": {2: (1e-4, 1e-9), 4: (4e-4, 2e-9)},
                                      "send_recv": {2: (5e-5, 1e-9)}}},
                in_loop_s={2: [(1e-3, 2e-3), (4e-3, 2e-3)], 4: [(1e-3, 6e-3)]})
    base.update(changes)
    return MachineProfile(**base)


def test_alpha_beta_fit_recovers_a_line_exactly():
    rows = [(s, 3e-4 + s * 2e-9) for s in (1024, 65536, 1 << 20, 16 << 20)]
    alpha, beta = fit_alpha_beta(rows)
    assert alpha == pytest.approx(3e-4, rel=1e-9)
    assert beta == pytest.approx(2e-9, rel=1e-9)


def test_gemm_interpolates_on_the_grid_and_scales_by_flops_outside():
    p = _profile()
    assert p.gemm(16, 256, 16, "fp32") == pytest.approx(2.0 * 16 * 256 * 16 / 2 ** 12 * 1e-6)
    # log-linear in each coordinate between grid points: exact for a power law in m, n, k
    assert p.gemm(64, 64, 64, "fp32") == pytest.approx(2.0 * 64 ** 3 / 2 ** 12 * 1e-6)
    # beyond the grid: the nearest grid shape's seconds times the FLOP ratio
    assert p.gemm(1024, 256, 256, "fp32") == pytest.approx(4 * p.gemm(256, 256, 256, "fp32"))
    assert p.peak_flops("fp32") == pytest.approx(2 ** 12 / 1e-6)


def test_sharing_cores_slows_compute_and_collectives_follow_the_in_loop_probe():
    p = _profile()
    assert p.with_ranks(8).gemm(16, 16, 16, "fp32") == pytest.approx(4 * p.gemm(16, 16, 16,
                                                                              "fp32"))
    assert p.with_ranks(2).ops(10, 20, 30) == pytest.approx(10 * 5e-6 + 20 * 7e-6 + 30 * 3e-6)
    two = p.with_ranks(2)
    # a group of all the processes: the probe's latency (median over bursts) + bytes x beta
    assert two.collective("all_reduce", 2, 1e6) == pytest.approx(2e-3 + 1e6 * 1e-9)
    # back to back: the benchmark's lockstep latency
    assert two.collective("all_reduce", 2, 1e6, back_to_back=True) == pytest.approx(
        1e-4 + 1e6 * 1e-9)
    # a group of 2 among 4 processes: its latency slowed by the per-hop ratio 6e-3/6 : 2e-3/2
    four = p.with_ranks(4)
    assert four.collective("all_reduce", 2, 0.0 + 1) == pytest.approx(2e-3 * 1.0 + 1e-9)
    assert four.hop_latency(4) == pytest.approx(6e-3 / 6)
    assert four.hop_latency(2) == pytest.approx(2e-3 / 2)
    # a kind the benchmark did not measure falls back to all-reduce's per-byte cost
    assert two.collective("all_gather", 2, 0) == 0.0


def test_a_profile_file_round_trips_and_rejects_other_formats(tmp_path):
    p = _profile()
    path = p.save(tmp_path / "machine.json")
    assert load_profile(path) == p
    doc = json.loads(path.read_text())
    doc["format"] = 99
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"calibration formats 1 and 2 .* \(got 99\)"):
        load_profile(path)


def _calibrated_scenario(path, **parallel):
    world = 1
    for k in ("dp", "tp", "pp", "cp"):
        world *= parallel.get(k, 1)
    return parse_scenario({"hardware": {"gpu": f"calibration:{path}", "gpus_per_node": world},
                           "model": "tiny-dense", "parallel": parallel,
                           "training": {"seq_len": 64, "micro_batch": 2,
                                        "global_batch": 2 * parallel.get("dp", 1) * 2,
                                        "precision": "fp32"}})


def test_a_calibration_file_is_a_scenarios_hardware(tmp_path):
    path = _profile().save(tmp_path / "machine.json")
    s = _calibrated_scenario(path, dp=1)
    assert s.hardware.gpu.profile is not None
    assert "calibrated 2026-12-02" in s.hardware.gpu.name
    assert s.document["hardware"]["gpu"] == f"calibration:{path}"
    with pytest.raises(ScenarioError) as err:
        _calibrated_scenario(tmp_path / "missing.json", dp=1)
    assert err.value.problems[0].path == "hardware.gpu"
    assert "workbench calibrate --out" in err.value.problems[0].message


def test_one_process_step_on_a_profile_is_the_sum_of_its_parts(tmp_path):
    """On one process (no collectives) the step is: per microbatch, each block's GEMMs, its
    eager operations and its streamed bytes, forward and backward; then the optimizer's
    operations. Recomputed here from the profile and the operation counts."""
    from workbench.estimate.time import eager_ops
    from workbench.estimate.single import estimate_step_time

    p = _profile(copy_gb_per_s=1e6)            # streaming cost ~0: GEMMs and ops remain
    path = p.save(tmp_path / "machine.json")
    s = _calibrated_scenario(path, dp=1)
    m = s.model
    tokens, h, q, kv, f = 128, m.hidden, m.heads * m.dim_per_head, m.kv_dim, m.ffn_hidden
    layer_gemm = (p.gemm(tokens, q + 2 * kv, h, "fp32") + p.gemm(tokens, h, q, "fp32")
                  + p.gemm(tokens, 2 * f, h, "fp32") + p.gemm(tokens, h, f, "fp32"))
    head_gemm = p.gemm(tokens, m.vocab, h, "fp32")
    lf, lb = eager_ops.layer_ops(m, False)
    hf, hb = eager_ops.head_ops(m)
    ef, eb = eager_ops.embedding_ops(m)
    attn = 0.0
    from workbench.estimate.model.flops import layer_flops

    attn_fwd = layer_flops(m, tokens, 64, False).attention * 0.5
    attn = (attn_fwd + 2.5 * attn_fwd) / p.peak_flops("fp32")
    per_mb = (m.layers * (3 * layer_gemm + p.ops(lf, lb) + attn) + 3 * head_gemm
              + p.ops(hf + ef, hb + eb))
    tensors = m.layers * eager_ops.layer_tensors(m, False) + eager_ops.edge_tensors(m, True, True)
    optimizer = p.ops(0, 0, eager_ops.optimizer_ops(tensors, "adamw"))
    got = estimate_step_time(s).step
    assert got == pytest.approx(s.microbatches * per_mb + optimizer, rel=1e-3)


def test_tensor_parallel_wrapper_cost_is_added_per_layer(tmp_path):
    from workbench.estimate.single import estimate_step_time

    path = _profile().save(tmp_path / "machine.json")
    plain = estimate_step_time(_calibrated_scenario(path, dp=1, tp=1))
    s = _calibrated_scenario(path, dp=1, tp=2)
    tp = estimate_step_time(s)
    stage = tp.stages[0]
    # the TP layers carry the wrapper's (forward, backward) per microbatch, shared by 2 ranks
    # of 2 cores: no slowdown
    assert stage.fwd - stage.recompute >= s.model.layers * 1e-3
    assert tp.step > plain.step


# -- the operation counts against the model's real dispatches --------------------------------

def _dispatch_counts(m) -> tuple[int, int]:
    import torch
    import torch.nn.functional as F
    from torch.utils._python_dispatch import TorchDispatchMode

    from workbench.trial.model import Transformer

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += 1
            return func(*args, **(kwargs or {}))

    torch.manual_seed(0)
    model = Transformer(m)
    tokens = torch.randint(0, m.vocab, (2, 65))
    with Count() as fwd:
        loss = F.cross_entropy(model(tokens[:, :-1]).flatten(0, 1).float(),
                               tokens[:, 1:].flatten())
    with Count() as bwd:
        loss.backward()
    return fwd.n, bwd.n


VARIANTS = [
    {},
    {"mlp": "gelu"},
    {"norm": "layernorm"},
    {"bias": True},
    {"bias": True, "mlp": "gelu", "norm": "layernorm"},
    {"tied_embeddings": True},
    {"extra": {"position_embeddings": 64}},
    {"kv_heads": 4},
    {"moe": ("swiglu", 4, 2, 0)},
    {"moe": ("swiglu", 8, 1, 1)},
    {"moe": ("gelu", 4, 2, 1), "mlp": "gelu"},
]


@pytest.mark.parametrize("variant, grouped",
                         [(v, True) for v in VARIANTS] + [(v, False) for v in VARIANTS
                                                          if "moe" in v],
                         ids=lambda x: (str(x) or "base") if isinstance(x, dict)
                         else ("grouped" if x else "loop"))
def test_operation_counts_equal_the_trial_models_dispatches(variant, grouped, monkeypatch):
    """Both ways the trial runs routed experts: grouped where ``torch._grouped_mm`` runs (this
    CPU build), the per-expert loop where it does not (forced here)."""
    import workbench.trial.model as trial_model
    if not grouped:
        monkeypatch.setattr(trial_model, "grouped_mm_runs", lambda *a, **k: False)
    from workbench.catalog.types import MoE, ModelShape
    from workbench.estimate.time.eager_ops import embedding_ops, head_ops, layer_ops

    v = dict(variant)
    moe = v.pop("moe", None)
    shape = dict(name="t", layers=2, hidden=32, heads=4, kv_heads=1, ffn_hidden=96, vocab=512,
                 head_dim=8)
    m = ModelShape(**{**shape, **v})
    if moe is not None:
        m = dataclasses.replace(m, moe=MoE(experts=moe[1], top_k=moe[2], expert_ffn_hidden=48,
                                           shared_experts=moe[3]))
    want_f, want_b = _dispatch_counts(m)
    lf, lb = layer_ops(m, moe is not None, grouped=grouped)
    ef, eb = embedding_ops(m)
    hf, hb = head_ops(m)
    # dropless routing with 128 tokens: every expert receives rows, so every expert runs
    assert (2 * lf + ef + hf, 2 * lb + eb + hb) == (want_f, want_b)


def test_optimizer_operation_counts_equal_adamw_and_sgd_steps():
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from workbench.estimate.time.eager_ops import optimizer_ops

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += 1
            return func(*args, **(kwargs or {}))

    for name, make in (("adamw", lambda ps: torch.optim.AdamW(ps, lr=1e-3)),
                       ("sgd", lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9))):
        for n in (1, 5):
            params = [torch.nn.Parameter(torch.randn(4)) for _ in range(n)]
            for p in params:
                p.grad = torch.randn(4)
            opt = make(params)
            opt.step()                    # the first step creates the state
            with Count() as c:
                opt.step()
            assert c.n == optimizer_ops(n, name), (name, n)


# -- the command ---------------------------------------------------------------------------

@pytest.mark.slow
def test_calibrate_quick_writes_a_profile_the_estimator_uses(quick_calibration, tmp_path):
    import shutil

    out = quick_calibration.stdout
    assert "written to" in out and "inside a training loop" in out
    p = load_profile(quick_calibration.path)
    assert p.cores >= 1 and p.copy_gb_per_s > 0 and p.op_forward_s > 0
    assert set(p.gemm_seconds) == {"fp32", "bf16"} and all(t > 0 for t in p.gemm_seconds["fp32"])
    assert set(p.wrappers) == {"ddp", "tp", "fsdp", "fsdp_reshard"}
    assert set(p.collectives["gloo"]["all_reduce"]) == {2, 4, 8}
    assert set(p.in_loop_s) == {2, 4, 8, 16}
    # scenarios read profiles from the calibration folders only: this test's is tmp_path
    s = _calibrated_scenario(shutil.copy(quick_calibration.path, tmp_path / "here.json"), dp=2)
    from workbench.estimate import estimate

    est = estimate(s)
    assert math.isfinite(est.time.step) and est.time.step > 0
    assert quick_calibration.left_alive == []


def test_calibrate_names_a_bad_option():
    run = subprocess.run([sys.executable, "-m", "workbench", "calibrate", "--out",
                          "/nonexistent-folder/x.json"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 2
    assert "--out" in run.stderr and "folder does not exist" in run.stderr


def test_the_planner_plans_on_a_calibration_profile_as_the_estimate_does(tmp_path):
    """The planner ranks layouts of a calibrated machine (nothing overlaps there, every
    collective in turn) with the same cost model as a single estimate."""
    from workbench.estimate import estimate
    from workbench.plan import plan

    path = _profile().save(tmp_path / "machine.json")
    result = plan(_calibrated_scenario(path, dp=4))
    assert len(result.table) > 5
    for rank in sorted({1, 2, len(result.table)}):
        row = result.table.iloc[rank - 1]
        est = estimate(result.scenario_of(rank))
        assert est.time.step == pytest.approx(row["step"], rel=1e-9)
        assert est.memory.per_gpu.total == pytest.approx(row["memory_per_gpu"], rel=1e-9)


def test_the_committed_calibration_of_the_ci_machine_loads_and_estimates():
    """calibrations/ keeps a full profile of this project's 2-core CI machine type; it must
    stay readable as the format evolves."""
    from workbench.estimate import estimate

    (path,) = sorted((ROOT / "calibrations").glob("amd-epyc-2core-*.json"))
    p = load_profile(path)
    assert p.cores == 2 and p.date and p.source.startswith("workbench calibrate")
    est = estimate(_calibrated_scenario(path, dp=2))
    assert est.time.step > 0 and est.checks == []

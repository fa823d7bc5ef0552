"""Step time, communication, pipeline schedules, run-level figures and build checks."""
from __future__ import annotations


import pytest

from tests.conftest import ROOT, scenario_doc
from workbench.catalog import MODELS
from workbench.estimate import estimate
from workbench.estimate.placement import group_span
from workbench.estimate.time import collectives as comm
from workbench.estimate.time.kernels import gemm_time
from workbench.estimate.model.flops import model_flops_per_step
from workbench.estimate.model.params import active_params
from workbench.estimate.single import estimate_step_time
from workbench.estimate.time.timeline import makespan, simulate
from workbench.scenario import load_scenario, parse_scenario
from workbench.scenario.types import Parallel


# -- FLOPs -------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["llama3-8b", "llama3-70b", "mixtral-8x7b"])
def test_model_flops_are_6nd_plus_attention(key):
    """3 x forward = 6 x (non-embedding active params) x tokens + 12 L h_q s per token (PaLM)."""
    m = MODELS[key]
    s = 8192
    per_token = model_flops_per_step(m, s, 1) / s
    n = active_params(m) - m.vocab * m.hidden            # input embedding does no matmul
    norms = (2 * m.layers + 1) * m.hidden                 # norm weights do no matmul either
    expected = 6 * (n - norms) + 12 * m.layers * m.heads * m.dim_per_head * s
    assert per_token == pytest.approx(expected, rel=1e-9)


# -- collectives ------------------------------------------------------------------------------
def _hw(**hardware):
    return parse_scenario(scenario_doc(hardware=hardware,
                                       parallel={"dp": hardware.get("gpus_per_node", 8)
                                                 * hardware.get("nodes", 1)})).hardware


def test_one_all_reduce_on_nvlink_by_hand():
    hw = _hw(gpu="h100-sxm", intra_node="nvlink4")
    n, size = 8, 1e9
    bw = 450e9 * comm.NVLINK_EFFICIENCY
    expected = 2 * (n - 1) * 3e-6 + size * 2 * (n - 1) / n / bw
    got = comm.collective_time("all_reduce", size, group_span(8, 1, 8), hw)
    assert got == pytest.approx(expected)


def test_inter_node_group_uses_each_gpus_share_of_the_nics():
    hw = _hw(gpu="h100-sxm", nodes=4, inter_node={"link": "ib-ndr", "nics_per_node": 8})
    span = group_span(4, 8, 8)        # one member per node (stride 8 = a full node)
    assert (span.per_node, span.nodes) == (1, 4)
    bw = 50e9 * 8 / 8 * comm.RDMA_NIC_EFFICIENCY
    expected = 3 * 5e-6 + 1e9 * 3 / 4 / bw
    assert comm.collective_time("all_gather", 1e9, span, hw) == pytest.approx(expected)


def test_more_bandwidth_is_never_slower():
    times = []
    for link in ("100gbe", "100gbe-rdma", "200gbe-rdma", "400gbe-rdma"):
        s = parse_scenario(scenario_doc(hardware={"nodes": 4, "inter_node": {"link": link}},
                                        parallel={"dp": 32, "zero": 3},
                                        training={"global_batch": 64}))
        times.append(estimate_step_time(s).step)
    assert times == sorted(times, reverse=True) and times[0] > times[-1]


# -- pipeline ---------------------------------------------------------------------------------
SCHEDULES = [("gpipe", 4, 8, 1), ("1f1b", 4, 8, 1), ("1f1b", 8, 32, 1),
             ("interleaved-1f1b", 4, 8, 2), ("interleaved-1f1b", 4, 16, 3),
             ("zero-bubble", 4, 8, 2), ("zero-bubble", 2, 8, 3), ("dualpipev", 4, 8, 1),
             ("dualpipev", 3, 12, 1)]


@pytest.mark.parametrize("sched,p,m,v", SCHEDULES)
def test_timeline_makespan_equals_the_closed_form_bubble(sched, p, m, v):
    F, B, W = 1.0, 2.0, 1.0
    par = Parallel(pp=p, pp_schedule=sched, virtual_stages=v)
    blocks = simulate(par, m, [F] * p, [B] * p, [W] * p)
    vv = par.chunks_per_rank
    bubble = {"gpipe": (p - 1) * (F + B), "1f1b": (p - 1) * (F + B),
              "interleaved-1f1b": (p - 1) * (F + B) / vv,
              "zero-bubble": (p - 1) * (F + B - 2 * W) / vv,
              "dualpipev": (p - 1) * ((F + B) / 2 + B / 2 - 3 * W / 2)}[sched]
    assert makespan(blocks) == pytest.approx(m * (F + B) + bubble)
    # every block of every microbatch is there, and ranks never run two blocks at once
    for r in range(p):
        mine = sorted((b.start, b.end) for b in blocks if b.rank == r)
        assert all(a[1] <= b[0] + 1e-12 for a, b in zip(mine, mine[1:]))


def test_more_microbatches_never_enlarge_the_1f1b_bubble_fraction():
    fractions = []
    for gb in (8, 16, 32, 64, 128):
        s = parse_scenario(scenario_doc(parallel={"dp": 2, "pp": 4},
                                        training={"global_batch": gb}))
        t = estimate_step_time(s)
        fractions.append(t.bubble / t.step)
    assert fractions == sorted(fractions, reverse=True)


def test_interleaving_and_zero_bubble_shrink_the_bubble():
    base = scenario_doc(parallel={"dp": 2, "pp": 4}, training={"global_batch": 32})
    b = {}
    for sched, v in [("1f1b", 1), ("interleaved-1f1b", 2), ("zero-bubble", 2)]:
        base["parallel"].update({"pp_schedule": sched, "virtual_stages": v})
        b[sched] = estimate_step_time(parse_scenario(base)).bubble
    assert b["1f1b"] > b["interleaved-1f1b"] > b["zero-bubble"] > 0


# -- compute ----------------------------------------------------------------------------------
def test_large_gemm_runs_at_the_stated_efficiency_and_small_ones_at_the_memory_roof():
    gpu = load_scenario(ROOT / "examples/llama3-8b-8xh100.yaml").hardware.gpu
    big = gemm_time(8192, 8192, 8192, gpu, "bf16")
    # H100 SXM: the rate its die sustains at 700 W, measured on the H200 (same GH100, SMs,
    # clocks and power limit): 8192^3 bf16 at 655.6 TFLOP/s (benchmarks/data/h200-reference/
    # kernels.jsonl), not the short-burst cube figures (797.8 fastcu, 797.5 zzc)
    assert 2 * 8192**3 / big == pytest.approx(655.6e12, rel=0.02)
    tiny = gemm_time(1, 4096, 4096, gpu, "bf16")       # a GEMV: bound by reading the weights
    assert tiny > 2 * 4096 * 4096 / gpu.hbm_gb_per_s / 1e9


def test_step_breakdown_adds_up_and_recompute_costs_time():
    s = parse_scenario(scenario_doc(training={"recompute": "none"}))
    full = parse_scenario(scenario_doc(training={"recompute": "full"}))
    a, b = estimate_step_time(s), estimate_step_time(full)
    assert b.step > a.step and b.recompute > 0 == a.recompute
    for t in (a, b):
        parts = t.compute + t.recompute + t.bubble + t.optimizer + t.offload + sum(
            t.comm_exposed.values())
        assert parts == pytest.approx(t.step, rel=1e-9)


def test_tensor_parallel_collectives_are_counted_per_layer():
    s = parse_scenario(scenario_doc(parallel={"dp": 1, "tp": 8},
                                    training={"global_batch": 4, "recompute": "none"}))
    vol = estimate_step_time(s).volume["tp"]
    layers, mbs = 32, 4
    # SP: 2 all-gathers + 2 reduce-scatters per layer, forward and backward; the head gathers
    # its input (reduce-scatter back), the embedding reduce-scatters its output (gather back)
    assert vol["all_gather"]["count"] == (2 * 2 * layers + 2) * mbs
    assert vol["reduce_scatter"]["count"] == (2 * 2 * layers + 2) * mbs
    assert vol["all_gather"]["bytes"] / vol["all_gather"]["count"] == 4096 * 4096 * 2
    # vocab-parallel cross-entropy: 3 fp32 all-reduces per token per microbatch; the norms'
    # partial gradients: one coalesced fp32 all-reduce per step (65 RMSNorm weights of 4096)
    assert vol["all_reduce"]["count"] == 3 * mbs + 1
    assert vol["all_reduce"]["bytes"] == 3 * mbs * 4096 * 4 + 65 * 4096 * 4


# -- run level and build checks ---------------------------------------------------------------
def test_throughput_mfu_and_time_to_train_are_consistent():
    est = estimate(load_scenario(ROOT / "examples/llama3-8b-8xh100.yaml"))
    s, t, r = est.scenario, est.time, est.run
    tokens = s.training.seq_len * s.training.global_batch
    assert r.tokens_per_s == pytest.approx(tokens / t.step)
    flops = model_flops_per_step(s.model, s.training.seq_len, s.training.global_batch)
    assert r.mfu == pytest.approx(flops / t.step / 8 / (s.hardware.gpu.bf16_tflops * 1e12))
    assert 0 < r.mfu < r.hfu + 1e-12 <= 1.0 + 1e-12
    assert r.time_to_train_s == pytest.approx(s.training.tokens / r.tokens_per_s)
    assert r.energy_kwh == pytest.approx(r.power_w * r.time_to_train_s / 3.6e6)


def test_costs_only_when_prices_are_given():
    s = parse_scenario(scenario_doc(training={"price_per_gpu_hour": 2.0, "price_per_kwh": 0.1}))
    r = estimate(s).run
    hours = r.time_to_train_s / 3600
    assert r.cost["gpus"] == pytest.approx(8 * hours * 2.0)
    assert r.cost["energy"] == pytest.approx(r.energy_kwh * 0.1)
    assert estimate(parse_scenario(scenario_doc())).run.cost == {}


def test_the_briefs_machine_fails_the_pcie_lane_check():
    est = estimate(load_scenario(ROOT / "examples/brief-8xh200-70b.yaml"))
    checks = {c.name: c for c in est.checks}
    assert checks["pcie_lanes"].status == "fail"
    assert "148 lanes" in checks["pcie_lanes"].reason and "provides 24" in checks[
        "pcie_lanes"].reason
    assert checks["power"].status == "warn"            # 8 x 600 W + host > one circuit
    assert "6,2" in checks["power"].reason              # >= 6.2 kW PSU for 5.0 kW of parts
    assert any("pcie_lanes" in w for w in est.warnings)


def test_a_two_socket_epyc_server_feeds_eight_pcie_gpus():
    hw = {"gpu": "h100-pcie", "inter_node": {"link": "400gbe-rdma", "nics_per_node": 1},
          "storage": {"drive": "pcie5-nvme", "drives": 2},
          "host": {"cpu": "epyc-9654", "memory": "ddr5-4800", "memory_gb": 1536, "sockets": 2}}
    checks = {c.name: c for c in estimate(parse_scenario(scenario_doc(hardware=hw))).checks}
    assert checks["pcie_lanes"].status == "pass"       # 128 + 16 + 8 = 152 of 160 (2P, xGMI)
    hw["inter_node"]["nics_per_node"] = 8               # one NIC per GPU needs switches
    checks = {c.name: c for c in estimate(parse_scenario(scenario_doc(hardware=hw))).checks}
    assert checks["pcie_lanes"].status == "fail" and "provides 160" in checks[
        "pcie_lanes"].reason


def test_estimate_timeline_draws_every_microbatch_on_every_rank():
    s = parse_scenario(scenario_doc(parallel={"dp": 2, "pp": 4, "pp_schedule": "zero-bubble",
                                              "virtual_stages": 2},
                                    training={"global_batch": 16}))
    est = estimate(s)
    blocks = est.timeline()
    assert {b.rank for b in blocks} == {0, 1, 2, 3}
    assert sum(1 for b in blocks if b.kind == "F") == 4 * 2 * s.microbatches
    assert {b.kind for b in blocks} == {"F", "I", "W"}
    assert len(est.timeline(microbatches=4)) == 4 * 2 * 4 * 3


@pytest.mark.parametrize("parallel", [
    {"dp": 2, "pp": 4, "zero": 1}, {"dp": 2, "pp": 4, "zero": 3},
    {"dp": 1, "pp": 4, "tp": 2, "pp_schedule": "interleaved-1f1b", "virtual_stages": 2},
    {"dp": 4, "cp": 2, "zero": 3}, {"dp": 8, "zero": 2}])
def test_breakdown_adds_up_for_every_layout(parallel):
    t = estimate_step_time(parse_scenario(scenario_doc(parallel=parallel,
                                                       training={"global_batch": 32})))
    parts = t.compute + t.recompute + t.bubble + t.optimizer + t.offload + sum(
        t.comm_exposed.values())
    assert parts == pytest.approx(t.step, rel=1e-9)


def test_zero3_offloaded_parameters_are_copied_in_before_every_gather():
    """ZeRO-3 with CPU offload keeps the parameter shard in host memory: every all-gather round
    first copies it over PCIe (FSDP2 CPUOffloadPolicy), so the exposed DP time grows by the
    copies the compute cannot hide; without offload nothing changes."""
    import dataclasses
    from workbench.estimate.memory.model_states import model_states
    from workbench.estimate.time.step_time import param_upload_time, pcie_bytes_per_s
    from workbench.scenario import load_scenario

    s = load_scenario(ROOT / "examples/brief-8xh200-70b.yaml",
                      ["parallel.zero=3", "training.offload=cpu"])
    ms = model_states(8e9, 0, "bf16", "adamw", 3, 8, 8, "cpu")
    assert ms.params_far == pytest.approx(8e9 / 8 * 4)          # the fp32 shard, in host DDR
    assert model_states(8e9, 0, "bf16", "adamw", 3, 8, 8, "none").params_far == 0
    assert param_upload_time(s.hardware, s.training, ms.params_far) == pytest.approx(
        ms.params_far / pcie_bytes_per_s(s.hardware))
    nvme = dataclasses.replace(s.training, offload="nvme")
    hw = s.hardware
    assert param_upload_time(hw, nvme, ms.params_far) == pytest.approx(
        ms.params_far / pcie_bytes_per_s(hw) + ms.params_far * hw.gpus_per_node
        / (max(1, hw.storage.drives) * hw.storage.drive.read_gb_per_s * 1e9))
    # the once-per-step copy back after the CPU optimizer is gradients only at ZeRO-3: the
    # parameters travel before the gathers instead
    from workbench.estimate.time.step_time import optimizer_and_offload
    _, once = optimizer_and_offload(hw, s.training, 1e9)
    _, zero3 = optimizer_and_offload(hw, s.training, 1e9, params_up=False)
    assert once - zero3 == pytest.approx(2 * 1e9 / pcie_bytes_per_s(hw))
    # in the step: not hidden when the gathers are not overlapped
    from workbench.estimate.time.step_time import dp_exposed
    par = s.parallel
    args = (par, hw, "bf16", 4, 1e9, 0.0, 0.0, 0.0)
    plain = dp_exposed(*args, overlap_gather=False)
    up = dp_exposed(*args, overlap_gather=False, upload_s=0.25)
    gathers = 2 * 4 if par.reshards else 4
    assert up - plain == pytest.approx(gathers * 0.25)

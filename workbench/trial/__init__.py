"""Real multi-process training trials of a scenario's layout on a scaled-down model.

This package imports torch; ``import workbench`` does not import it.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from workbench.errors import Problem, ScenarioError
from workbench.scenario.types import Scenario
from workbench.trial.launcher import MAX_PROCESSES, stream
from workbench.trial.result import TrialResult
from workbench.trial.shrink import trial_scenario

def sub_layout(s: Scenario, world_size: int | None) -> Scenario:
    """The scenario's layout, or a sub-layout of ``world_size`` processes: data parallelism is
    reduced first, then context, pipeline and tensor parallelism, each to the largest divisor
    of its degree that fits."""
    par = s.parallel
    target = world_size or par.world
    if target > MAX_PROCESSES:
        raise ScenarioError([Problem("trial.world_size", target,
                                     f"this machine runs at most {MAX_PROCESSES} trial processes")])
    dims = {"dp": par.dp, "pp": par.pp, "tp": par.tp, "cp": par.cp}
    for name in ("dp", "cp", "pp", "tp"):
        others = dims["dp"] * dims["pp"] * dims["tp"] * dims["cp"] // dims[name]
        if others * dims[name] <= target:
            break
        # the largest divisor that brings the total to the target, or at least under it
        divisors = [d for d in range(1, dims[name] + 1) if dims[name] % d == 0]
        exact = [d for d in divisors if others * d == target]
        under = [d for d in divisors if others * d <= target]
        dims[name] = max(exact or under or [1])
    world = dims["dp"] * dims["pp"] * dims["tp"] * dims["cp"]
    if world != target:
        raise ScenarioError([Problem("trial.world_size", target,
                                     f"no sub-layout of dp={par.dp} tp={par.tp} pp={par.pp} "
                                     f"cp={par.cp} has exactly {target} ranks; try {world}")])
    ep = par.ep if (dims["dp"] * dims["cp"]) % par.ep == 0 else 1
    new_par = dataclasses.replace(par, ep=ep, shard_group=None, **dims)
    hw = dataclasses.replace(s.hardware, gpus_per_node=world, nodes=1)
    return dataclasses.replace(s, parallel=new_par, hardware=hw)


def prepare(s: Scenario, world_size: int | None = None) -> Scenario:
    """Validate that the layout can run here and return the scaled-down trial scenario."""
    s = sub_layout(s, world_size)
    problems = []
    par = s.parallel
    if par.dp * par.cp > 1 and par.zero < 3 and (par.tp > 1 or par.pp > 1):
        problems.append(Problem(
            "parallel.zero", par.zero, "trials combine data or context parallelism with tensor or "
            "pipeline "
            "parallelism through FSDP2 only (zero: 3), as torchtitan does: PyTorch's DDP and "
            "ZeroRedundancyOptimizer accept neither DTensor parameters nor several microbatches "
            "in flight"))
    if s.model.moe is not None and par.tp > 1:
        problems.append(Problem(
            "parallel.tp", par.tp, "trials of MoE models run without tensor parallelism: the "
            "trial's TP plan does not shard the MoE layers (router, experts), where the "
            "estimator splits each expert's FFN over TP; use tp 1 (with ep) for the trial"))
    if problems:
        raise ScenarioError(problems)
    trial = trial_scenario(s)
    need = trial.parallel.world * PER_PROCESS_BYTES
    have = _available_memory()
    if have is not None and need > have:
        raise ScenarioError([Problem("trial.world_size", trial.parallel.world,
                                     f"{trial.parallel.world} processes need about "
                                     f"{need / 1e9:.1f} GB; this machine has {have / 1e9:.1f} GB "
                                     "available")])
    return trial


# Resident memory of one trial process: torch and its distributed packages imported, the tiny
# model and its buffers. Measured here with psutil: 0.28 GB peak RSS per rank at 4 ranks (DDP,
# 5 steps); 0.5 GB leaves room for larger layouts.
PER_PROCESS_BYTES = 0.5e9


def _available_memory() -> float | None:
    try:
        import psutil

        return float(psutil.virtual_memory().available)
    except ImportError:
        return None


def as_run(trial: Scenario) -> Scenario:
    """The scenario whose estimate describes what the trial runs: ZeRO-2 runs as FSDP2 without
    resharding after forward (torchtitan's ZeRO-2; PyTorch has no Megatron/DeepSpeed-style
    ZeRO-2 that keeps whole parameters), so it is predicted as that."""
    par = trial.parallel
    if par.zero == 2 and par.dp * par.cp > 1:
        par = dataclasses.replace(par, zero=3, reshard_after_forward=False)
    return dataclasses.replace(trial, parallel=par)


def predicted_bytes(trial: Scenario) -> dict[int, dict]:
    """The estimator's prediction for every rank of the trial (PyTorch's conventions:
    sequence-parallel GEMMs keep the gathered input; ZeRO-1 partitions whole tensors, as
    PyTorch's ZeroRedundancyOptimizer does)."""
    from workbench.estimate.activations import activation_shape, embedding_bytes, head_bytes, layer_bytes
    from workbench.estimate.model_states import model_states
    from workbench.estimate.params import stage_params
    from workbench.trial.zero_partition import (
        parameter_tensors, routed_expert_tensors, zero_redundancy_partition,
    )

    run = as_run(trial)
    par, tr, m = run.parallel, run.training, run.model
    x = activation_shape(tr, par, pytorch_eager=True)
    per_stage = {}
    for st in stage_params(m, par):
        ms = model_states(st.dense, st.expert, tr.precision, tr.optimizer, par.zero,
                          par.dense_shard, par.expert_shard)
        act = sum(layer_bytes(m, x, lp.is_moe) for lp in st.layer_params)
        act += embedding_bytes(m, x) * st.has_embedding + head_bytes(m, x) * st.has_head
        per_stage[st.rank] = {"params": ms.params, "grads": ms.grads, "optimizer": ms.optimizer,
                              "activations": act / len(st.chunks)}
    zero1 = par.zero == 1 and par.dense_shard > 1
    if zero1:      # trials refuse ZeRO-1 with TP or PP: one stage, the whole model
        # under EP two ZeroRedundancyOptimizers: dense tensors over dp x cp, the rank's own
        # experts over the expert-data-parallel group (parallelize.make_optimizer)
        sizes = parameter_tensors(m, experts=0 if par.ep > 1 else None)
        owned = zero_redundancy_partition(sizes, par.dense_shard)
        experts = routed_expert_tensors(m, m.moe.experts // par.ep) if par.ep > 1 else []
        expert_owned = zero_redundancy_partition(experts, par.expert_shard)
        state_bytes = model_states(1, 0, tr.precision, tr.optimizer, 0, 1, 1).optimizer
    out = {}
    for rank in range(par.world):
        pp_rank = rank // (par.dp * par.cp * par.tp)
        pred = dict(per_stage[pp_rank])
        if zero1:
            shard_rank = (rank // par.tp) % (par.dp * par.cp)     # rank in the dp x cp group
            pred["optimizer"] = state_bytes * (
                sum(sizes[i] for i in owned[shard_rank])
                + sum(experts[i] for i in expert_owned[shard_rank // par.ep]))
        pred["peak"] = sum(pred.values())
        out[rank] = pred
    return out


def predicted_comm(trial: Scenario, backend: str) -> dict[int, dict]:
    """The estimator's communication volume of every rank of the trial (rank -> dim ->
    collective -> {bytes, count}), for what the trial runs, named as ``backend`` executes it.
    A rank moves what a GPU of its pipeline rank moves (TP, CP, DP and EP peers are alike; EP
    payloads are the balanced share, routing decides the real one). ZeRO-1 under PyTorch's
    ZeroRedundancyOptimizer: DDP's gradient all-reduce, then one broadcast per parameter tensor
    from its owner (``_sync_params``), which every rank joins; under EP the same again for the
    rank's experts over the expert-data-parallel group (their coalesced gradient all-reduce,
    ``worker._reduce_expert_grads``, then the second optimizer's broadcasts) when that group has
    more than one rank."""
    from workbench.estimate.step_time import estimate_step_time
    from workbench.trial.zero_partition import parameter_tensors, routed_expert_tensors

    run = as_run(trial)
    per_stage = estimate_step_time(run).volume_per_stage
    par = run.parallel
    if par.zero == 1 and par.dense_shard > 1:     # trials refuse ZeRO-1 with TP or PP
        groups = [parameter_tensors(run.model, experts=0 if par.ep > 1 else None)]
        if par.ep > 1 and par.expert_shard > 1:
            groups.append(routed_expert_tensors(run.model, run.model.moe.experts // par.ep))
        dp: dict = {"all_reduce": {"bytes": 0.0, "count": 0.0},
                    "broadcast": {"bytes": 0.0, "count": 0.0}}
        for sizes in groups:
            grad_bytes = 4.0 * sum(sizes)            # fp32 trials: DDP reduces fp32 gradients
            dp["all_reduce"]["bytes"] += grad_bytes
            dp["all_reduce"]["count"] += 1
            dp["broadcast"]["bytes"] += grad_bytes
            dp["broadcast"]["count"] += len(sizes)
        per_stage = [{**v, "dp": dp} for v in per_stage]
    stage_ranks = par.dp * par.cp * par.tp          # ranks per pipeline stage (mesh: pp outer)
    return {rank: as_run_by(per_stage[rank // stage_ranks], backend)
            for rank in range(par.world)}


# gloo runs a reduce-scatter as an all-reduce of the whole input (measured: ProcessGroupGloo's
# reduce_scatter_tensor is recorded as gloo:all_reduce with the full input size).
GLOO_RUNS_AS = {"reduce_scatter": "all_reduce"}


def as_run_by(volume: dict, backend: str) -> dict:
    """The estimator's communication volume named as ``backend`` executes it: on gloo a
    reduce-scatter is an all-reduce of the same input bytes (nccl-tests' size convention)."""
    if backend != "gloo":
        return volume
    out: dict = {}
    for dim, ops in volume.items():
        for kind, v in ops.items():
            slot = out.setdefault(dim, {}).setdefault(GLOO_RUNS_AS.get(kind, kind),
                                                      {"bytes": 0.0, "count": 0.0})
            slot["bytes"] += v["bytes"]
            slot["count"] += v["count"]
    return out


def stream_trial(s: Scenario, world_size: int | None = None, steps: int = 3,
                 backend: str = "auto", **kw) -> Iterator[dict]:
    """Yield the trial's events while it runs (for live charts)."""
    yield from stream(prepare(s, world_size), steps=steps, backend=backend, **kw)


def run_trial(s: Scenario, world_size: int | None = None, steps: int = 3,
              backend: str = "auto", on_event=None, **kw) -> TrialResult:
    """Run a trial to the end and return its result (``on_event`` sees every event)."""
    trial = prepare(s, world_size)
    if kw.get("inject") and not 0 <= kw.get("inject_rank", -1) < trial.parallel.world:
        raise ScenarioError([Problem("--rank", kw.get("inject_rank"),
                                     f"must be a rank of the trial (0..{trial.parallel.world - 1})")])
    result = TrialResult(scenario=trial, backend="", world_size=trial.parallel.world,
                         predicted=predicted_bytes(trial))
    for ev in stream(trial, steps=steps, backend=backend, **kw):
        if on_event is not None:
            on_event(ev)
        if ev["type"] == "start":
            result.backend = ev["backend"]
            result.predicted_comm = predicted_comm(trial, ev["backend"])
        elif ev["type"] == "step":
            result.steps.append(ev)
        elif ev["type"] == "end":
            result.error = ev["error"]
            result.wall_s = ev["wall_s"]
    return result


__all__ = ["TrialResult", "prepare", "run_trial", "stream_trial", "sub_layout"]

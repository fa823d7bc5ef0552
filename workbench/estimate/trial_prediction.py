"""What a trial will measure, predicted by the estimator: per rank, model-state and activation
bytes (``predicted_bytes``) and every collective's bytes and count (``predicted_comm``), for the
scaled-down scenario the trial runs (``workbench/trial/``), in PyTorch's conventions where they
differ from the engines the estimator models:

- ZeRO-2 runs as FSDP2 without resharding after forward (torchtitan's ZeRO-2): ``as_run``.
- gloo runs a reduce-scatter as an all-reduce of the same input: ``as_run_by``.
- ZeRO-1 is PyTorch's ``torch.distributed.optim.ZeroRedundancyOptimizer``, which assigns whole
  parameter tensors to ranks — largest first, each to the rank with the fewest elements so far
  (``_partition_parameters``) — where Megatron-LM's distributed optimizer (the estimator's
  ZeRO-1) splits one flat buffer evenly; after its step every rank broadcasts the tensors it
  owns (``_sync_params``), the gradients all-reduced by DDP beforehand. ``parameter_tensors``
  lists the trial model's parameter tensors in registration order from the shape (no torch),
  so the prediction stays a calculation; a test holds it equal to the model's.
"""
from __future__ import annotations

import dataclasses

from workbench.catalog.types import ModelShape
from workbench.estimate.model_states import model_states
from workbench.estimate.params import is_moe_layer
from workbench.estimate.single import estimate_step_time, evaluate_scenario
from workbench.scenario.types import Scenario


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
    run = as_run(trial)
    par, tr, m = run.parallel, run.training, run.model
    ev = evaluate_scenario(run, pytorch_eager=True)
    rk = ev.rank
    # the trial's hooks see one microbatch through each chunk, averaged over the rank's chunks
    per_stage = {int(r): {"params": float(rk["params"][i]), "grads": float(rk["grads"][i]),
                          "optimizer": float(rk["optimizer"][i]),
                          "activations": float(rk["activations_one_microbatch"][i])
                          / par.chunks_per_rank}
                 for i, r in enumerate(ev.rank_index)}
    zero1 = par.zero == 1 and par.dense_shard > 1
    if zero1:      # trials refuse ZeRO-1 with TP or PP: one stage, the whole model
        # under EP two ZeroRedundancyOptimizers: dense tensors over dp x cp, the rank's own
        # experts over the expert-data-parallel group (trial/parallelize.py's make_optimizer)
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
    ``trial/expert_parallel.py``'s ``reduce_expert_grads``, then the second optimizer's
    broadcasts) when that group has more than one rank."""
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


def parameter_tensors(m: ModelShape, experts: int | None = None) -> list[int]:
    """Element counts of the trial Transformer's parameters, in ``Module.parameters()`` order
    (tied output weight once), for the unsharded model. ``experts``: routed experts listed per
    MoE layer (all by default; 0 gives the dense tensors an expert-parallel rank shares with
    its whole data-parallel group, ``routed_expert_tensors`` its own experts)."""
    h, q, kv = m.hidden, m.heads * m.dim_per_head, m.kv_dim
    norm = [h, h] if m.norm == "layernorm" else [h]

    def linear(n_in: int, n_out: int, bias: bool) -> list[int]:
        return [n_in * n_out] + ([n_out] if bias else [])

    def mlp(ffn: int, bias: bool) -> list[int]:
        out = linear(h, ffn, bias) + linear(ffn, h, bias)
        return out + (linear(h, ffn, bias) if m.mlp == "swiglu" else [])

    sizes = [m.vocab * h]
    positions = int(m.extra.get("position_embeddings", 0))
    if positions:
        sizes.append(positions * h)
    for i in range(m.layers):
        sizes += norm
        sizes += (linear(h, q, m.bias) + linear(h, kv, m.bias) + linear(h, kv, m.bias)
                  + linear(q, h, m.bias))
        sizes += norm
        if is_moe_layer(m, i):
            e = m.moe
            sizes.append(e.experts * h)                              # router
            for _ in range(e.experts if experts is None else experts):
                sizes += mlp(e.expert_ffn_hidden, False)
            if e.shared_experts:
                sizes += mlp(e.shared_experts * e.expert_ffn_hidden, False)
        else:
            sizes += mlp(m.ffn_hidden, m.bias)
    sizes += norm
    if not m.tied_embeddings:
        sizes.append(m.vocab * h)
    return sizes


def routed_expert_tensors(m: ModelShape, local: int) -> list[int]:
    """Element counts of ``local`` routed experts per MoE layer (an expert-parallel rank's
    ``experts`` modules), in ``Module.parameters()`` order: each expert's bias-free w1, w2
    (and w3 for SwiGLU), hidden x expert_ffn_hidden elements each."""
    if m.moe is None:
        return []
    per_expert = [m.hidden * m.moe.expert_ffn_hidden] * (3 if m.mlp == "swiglu" else 2)
    moe_layers = sum(is_moe_layer(m, i) for i in range(m.layers))
    return per_expert * local * moe_layers


def zero_redundancy_partition(sizes: list[int], world: int) -> list[list[int]]:
    """Indices of the tensors each rank owns: sorted by size, largest first (a stable sort), each
    to the rank holding the fewest elements so far (the lowest rank on a tie)."""
    owned: list[list[int]] = [[] for _ in range(world)]
    load = [0] * world
    for i in sorted(range(len(sizes)), key=lambda j: sizes[j], reverse=True):
        r = load.index(min(load))
        owned[r].append(i)
        load[r] += sizes[i]
    return owned

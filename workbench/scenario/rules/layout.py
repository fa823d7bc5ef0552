"""Rules of the parallel layout itself: the degrees fill the GPUs and divide what they split,
pipelines hold their stages and microbatches, experts and shard groups fit their ranks.
"""
from __future__ import annotations

import numpy as np

from workbench.scenario.rules.table import (
    P, Condition, Layouts, layout_rule, min_microbatches,
)
from workbench.scenario.schedules import schedule


def _off(switch) -> bool:
    """Whether a switch is off for every layout (a False number, not a column): the
    condition it gates holds without reading the degrees (the same answer, a few array
    operations fewer per mask)."""
    return switch is False or switch is np.False_


def _degrees(v: Layouts) -> dict:
    par = v.par
    return {"dp": par.dp, "tp": par.tp, "pp": par.pp, "cp": par.cp}


layout_rule(
    "world", "dp x tp x pp x cp equals the GPUs, hardware.gpus_per_node x hardware.nodes",
    Condition("parallel", (P + "dp", P + "tp", P + "pp", P + "cp", "hardware.gpus_per_node",
                           "hardware.nodes"),
              lambda v: v.par.dp * v.par.tp * v.par.pp * v.par.cp == v.hw.world,
              lambda v: (f"dp*tp*pp*cp = {v.par.dp}*{v.par.tp}*{v.par.pp}*{v.par.cp} = "
                         f"{v.par.world} must equal hardware.gpus_per_node*nodes = "
                         f"{v.hw.gpus_per_node}*{v.hw.nodes} = {v.hw.world}"),
              value=_degrees))

layout_rule(
    "tp_width", "parallel.tp divides model.heads, model.kv_heads, model.ffn_hidden and "
    "model.moe.expert_ffn_hidden (each TP rank holds whole heads and an equal FFN slice)",
    Condition(P + "tp", (P + "tp", "model.heads"), lambda v: v.m.heads % v.par.tp == 0,
              lambda v: f"must divide model.heads = {v.m.heads}"),
    Condition(P + "tp", (P + "tp", "model.kv_heads"), lambda v: v.m.kv_heads % v.par.tp == 0,
              lambda v: f"must divide model.kv_heads = {v.m.kv_heads} (each TP rank needs "
                        "whole key/value heads)"),
    Condition(P + "tp", (P + "tp", "model.ffn_hidden"),
              lambda v: v.m.ffn_hidden % v.par.tp == 0,
              lambda v: f"must divide model.ffn_hidden = {v.m.ffn_hidden}"),
    Condition(P + "tp", (P + "tp", "model.moe.expert_ffn_hidden", P + "expert_tp"),
              lambda v: (v.m.moe is None or v.par.expert_tp is not None
                         or v.m.moe.expert_ffn_hidden % v.par.tp == 0),
              lambda v: f"must divide model.moe.expert_ffn_hidden = {v.m.moe.expert_ffn_hidden}"))

layout_rule(
    "zero2_pp", "ZeRO-2 does not combine with pipeline parallelism over dp x cp > 1",
    Condition(P + "zero", (P + "zero", P + "pp", P + "dp", P + "cp"),
              lambda v: np.logical_not((v.par.zero == 2) & (v.par.pp > 1)
                                       & (v.par.dp * v.par.cp > 1)),
              lambda v: ("ZeRO-2 does not combine with pipeline parallelism in any engine "
                         "(DeepSpeed's PipelineEngine refuses ZeRO-2/3; Megatron-LM's distributed "
                         "optimizer is ZeRO-1); use zero 1, or zero 3 (FSDP2) with "
                         "reshard_after_forward false")))


_VS = (P + "virtual_stages", P + "pp_schedule", P + "pp")
layout_rule(
    "virtual_stages", "parallel.virtual_stages >= 2 with interleaved-1f1b and zero-bubble "
    "(pp > 1), and 1 with every other schedule or without pipelining",
    Condition(P + "virtual_stages", _VS,
              lambda v: (not schedule(v.par.pp_schedule).interleaved)
              or np.logical_not((v.par.pp > 1) & (v.par.virtual_stages < 2)),
              lambda v: (f"{v.par.pp_schedule} needs virtual_stages >= 2 (model chunks per "
                         "pipeline rank, as PyTorch's interleaved schedules require); or use "
                         "1f1b / dualpipev")),
    Condition(P + "virtual_stages", _VS,
              lambda v: schedule(v.par.pp_schedule).interleaved or (v.par.virtual_stages == 1),
              lambda v: (f"must be 1 for pp_schedule {v.par.pp_schedule}; virtual stages need "
                         "interleaved-1f1b or zero-bubble")),
    Condition(P + "virtual_stages", _VS,
              lambda v: (v.par.virtual_stages == 1) | (v.par.pp > 1),
              lambda v: "needs pp > 1"))

layout_rule(
    "stages_hold_layers", "model.layers >= pp x model chunks per rank (every pipeline stage "
    "holds a layer)",
    Condition("model.layers", ("model.layers", *_VS),
              lambda v: v.m.layers >= v.par.pp * v.par.chunks_per_rank,
              lambda v: (f"must be at least pp * chunks per rank = {v.par.pp} * "
                         f"{v.par.chunks_per_rank} = {v.par.pp * v.par.chunks_per_rank} so "
                         "every pipeline stage holds a layer")))

layout_rule(
    "ep", "parallel.ep > 1 and parallel.expert_tp need an MoE model; ep divides dp x cp and "
    "model.moe.experts",
    Condition(P + "ep", (P + "ep", "model.moe"), lambda v: (v.par.ep == 1) | (v.m.moe is not None),
              lambda v: "expert parallelism needs an MoE model (model.moe)"),
    # a dense model has no experts to split: the setting would be a silent no-op
    Condition(P + "expert_tp", (P + "expert_tp", "model.moe"),
              lambda v: v.par.expert_tp is None or v.m.moe is not None,
              lambda v: "expert tensor parallelism needs an MoE model (model.moe)"),
    Condition(P + "ep", (P + "ep", P + "dp", P + "cp", P + "expert_tp"),
              lambda v: ((v.par.dp * v.par.cp) % v.par.ep == 0 if v.par.expert_tp is None
                         else (v.par.dp * v.par.cp * v.par.tp) % (v.par.expert_tp * v.par.ep)
                         == 0),
              lambda v: (f"must divide dp*cp = {v.par.dp * v.par.cp} (EP takes its ranks from "
                         "the data/context-parallel ranks; set parallel.expert_tp for MoE "
                         "parallel folding)" if v.par.expert_tp is None else
                         f"times expert_tp = {v.par.expert_tp} must divide dp*cp*tp = "
                         f"{v.par.dp * v.par.cp * v.par.tp} (MoE parallel folding)")),
    Condition(P + "expert_tp", (P + "expert_tp", "model.moe.expert_ffn_hidden"),
              lambda v: (v.par.expert_tp is None or v.m.moe is None
                         or v.m.moe.expert_ffn_hidden % v.par.expert_tp == 0),
              lambda v: (f"must divide model.moe.expert_ffn_hidden = "
                         f"{v.m.moe.expert_ffn_hidden}")),
    Condition(P + "ep", (P + "ep", "model.moe.experts"),
              lambda v: v.m.moe is None or v.m.moe.experts % v.par.ep == 0,
              lambda v: f"must divide model.moe.experts = {v.m.moe.experts}"))

layout_rule(
    "shard_group", "parallel.shard_group (HSDP) needs zero >= 1 and divides dp x cp",
    Condition(P + "shard_group", (P + "shard_group", P + "zero"),
              lambda v: (v.shard_group == 0) | (v.par.zero > 0),
              lambda v: "needs zero >= 1 (it is the group ZeRO/FSDP shards over; HSDP = zero 3)"),
    Condition(P + "shard_group", (P + "shard_group", P + "dp", P + "cp"),
              lambda v: (v.par.dp * v.par.cp) % np.maximum(v.shard_group, 1) == 0,
              lambda v: f"must divide dp*cp = {v.par.dp * v.par.cp}"))

_GB = ("training.global_batch", "training.micro_batch", P + "dp", P + "pp", P + "pp_schedule")
layout_rule(
    "global_batch", "training.global_batch is a multiple of micro_batch x dp, and gives each "
    "pipeline at least pp microbatches (1F1B-style schedules) or 2 x pp (DualPipeV)",
    Condition("training.global_batch", _GB,
              lambda v: v.tr.global_batch % (v.micro_batch * v.par.dp) == 0,
              lambda v: (f"must be a multiple of micro_batch*dp = {v.micro_batch}*{v.par.dp} = "
                         f"{v.micro_batch * v.par.dp}")),
    Condition("training.global_batch", _GB,
              lambda v: ((v.tr.global_batch % (v.micro_batch * v.par.dp) != 0) | (v.par.pp == 1)
                         | (v.microbatches >= schedule(v.par.pp_schedule).min_microbatches(
                             v.par.pp))),
              lambda v: (f"gives {v.microbatches} microbatches per pipeline "
                         f"(global_batch/(micro_batch*dp)); {v.par.pp_schedule} with "
                         f"pp={v.par.pp} needs at least "
                         f"{min_microbatches(v.par.pp_schedule, v.par.pp)}")))

layout_rule(
    "seq_split", "training.seq_len is divisible by tp with sequence parallelism and by 2 x cp "
    "with context parallelism (load-balanced ring attention chunks)",
    Condition("training.seq_len", ("training.seq_len", P + "tp", P + "sequence_parallel"),
              lambda v: (_off(v.par.sequence_parallel)
                         or (np.logical_not(v.par.sequence_parallel & (v.par.tp > 1))
                             | (v.tr.seq_len % v.par.tp == 0))),
              lambda v: f"must be divisible by tp = {v.par.tp} with sequence_parallel"),
    Condition("training.seq_len", ("training.seq_len", P + "cp"),
              lambda v: (v.par.cp == 1) | (v.tr.seq_len % (2 * v.par.cp) == 0),
              lambda v: (f"must be divisible by 2*cp = {2 * v.par.cp} (load-balanced ring "
                         "attention chunks)")))

layout_rule(
    "offload", "training.offload needs zero >= 1, and nvme needs hardware.storage.drives >= 1",
    Condition("training.offload", ("training.offload", P + "zero"),
              lambda v: v.tr.offload == "none" or (v.par.zero >= 1),
              lambda v: ("needs zero >= 1 (ZeRO-Offload / FSDP2 CPUOffloadPolicy offload "
                         "sharded states)")),
    Condition("training.offload", ("training.offload", "hardware.storage.drives"),
              lambda v: (v.tr.offload != "nvme") | (v.hw.storage.drives > 0),
              lambda v: "needs hardware.storage.drives >= 1", value=lambda v: "nvme"))

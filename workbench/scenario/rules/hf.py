"""What Accelerate's parallelism (``ParallelismConfig``: dp_replicate x dp_shard x tp x cp,
accelerate/parallelism_config.py) lets the Hugging Face stack run, beyond the limits its
engine records state field by field (``workbench/engines/hf.py``: ZeRO stages per backend —
FSDP has no ZeRO-1 —, CP with FSDP2 only, offload targets, HSDP, no pipeline schedule).

Each rule is a layout rule of the one table: the field it blames, the fields it reads (and
training.engine: it binds only engine hf), a predicate over ``par`` (a ``Parallel`` or a
``LayoutGrid``: numbers or arrays, one entry per layout) and ``tr``, and a message — so the
validator, the planner's mask and the parallel panel judge it alike.

Accelerate's other rule, CP and its DeepSpeed sequence parallelism (ALST/Ulysses ``sp_size``)
are mutually exclusive (parallelism_config.py L324-330), has no field here to read: the
scenario's ``parallel.sequence_parallel`` is Megatron-style sharding of the norms over TP.

Citations: AC = huggingface/accelerate 1.16.0, TF = huggingface/transformers 5.25.0 (the
installed packages' files).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from workbench.engines.hf import resolved_backend
from workbench.scenario.rules.table import E, P, Condition, layout_rule


def _hf(name: str, text: str, field: str, reads: tuple[str, ...],
        ok: Callable[[object, object], object], message: Callable[[object, object], str]):
    """Register one rule of engine hf: it holds for every other engine."""
    layout_rule(name, text, Condition(
        field, reads + (E,),
        lambda v: (v.tr.engine != "hf") | np.asarray(ok(v.par, v.tr), dtype=bool),
        lambda v: message(v.par, v.tr)))


def _shard_group(par):
    """The HSDP shard group (0 where none: a grid's column already says 0)."""
    sg = par.shard_group
    return np.asarray(sg if np.ndim(sg) else (sg or 0))


def _fsdp(tr) -> bool:
    return resolved_backend(tr.backend) in ("fsdp1", "fsdp2")


_hf(
    "hf_cp_sharded", "with engine hf, parallel.cp > 1 needs FSDP sharding (zero 2 or 3): "
    "Accelerate's context parallelism shards the model over dp_shard x cp",
    P + "cp", (P + "cp", P + "zero"),
    # AC state.py L959-962: "`cp_size > 1` specified in the `parallelism_config`, but no
    # `fsdp_plugin` was provided"
    lambda par, tr: (np.asarray(par.cp) == 1) | (np.asarray(par.zero) >= 2),
    lambda par, tr: "Accelerate runs context parallelism only with an FSDP2 plugin, which "
                    "shards the model over dp_shard x cp; set parallel.zero 3 (or 2)")
_hf(
    "hf_tp_with_dp", "with engine hf, tensor parallelism together with data parallelism "
    "needs ZeRO sharding (zero >= 1): Accelerate composes no DDP with TP",
    P + "zero", (P + "zero", P + "tp", P + "dp"),
    # AC accelerator.py L1855: DDP wraps the model only without TP (L1875-1886 checks the
    # tp_plan and wraps nothing); parallelism_config.py L43-44 "composing DDP + TP is
    # currently not supported"
    lambda par, tr: ~((np.asarray(par.tp) > 1) & (np.asarray(par.dp) > 1)
                      & (np.asarray(par.zero) == 0)),
    lambda par, tr: "Accelerate does not wrap a tensor-parallel model in DDP (composing "
                    "DDP + TP is not supported); shard it: zero 3 (FSDP2) or a DeepSpeed "
                    "stage")
_hf(
    "hf_tp_fsdp1", "with engine hf, parallel.tp > 1 not with training.backend fsdp1: "
    "Accelerate's ParallelismConfig runs with FSDP2, DDP or DeepSpeed only",
    P + "tp", (P + "tp", P + "zero", "training.backend"),
    # AC parallelism_config.py L386-393: "ParallelismConfig is only compatible
    # DistributedType.FSDP (version 2) or DistributedType.Multi{Device} or
    # DistributedType.DEEPSPEED"
    lambda par, tr: ~((np.asarray(par.tp) > 1) & (np.asarray(par.zero) >= 2)
                      & (resolved_backend(tr.backend) == "fsdp1")),
    lambda par, tr: "Accelerate's ParallelismConfig (tensor parallelism) runs with FSDP2, "
                    "DDP or DeepSpeed, not FSDP1; set training.backend fsdp2")
_hf(
    "hf_no_sequence_parallel", "with engine hf, parallel.sequence_parallel false when "
    "tp > 1: Transformers' tensor-parallel plans shard no norm along the sequence",
    P + "sequence_parallel", (P + "sequence_parallel", P + "tp"),
    # TF models/llama/configuration_llama.py L48-56 base_model_tp_plan: colwise q/k/v,
    # gate/up, rowwise o/down; the norms stay replicated
    lambda par, tr: (np.asarray(par.tp) == 1) | ~np.asarray(par.sequence_parallel),
    lambda par, tr: "Transformers' tp_plan (colwise q/k/v/gate/up, rowwise o/down) "
                    "replicates the norms; set parallel.sequence_parallel false")
_hf(
    "hf_fsdp_has_a_shard", "with engine hf and an FSDP backend, zero 2 or 3 with tp > 1 "
    "needs dp x cp > 1: FSDP must have ranks to shard over",
    P + "zero", (P + "zero", P + "tp", P + "dp", P + "cp", "training.backend"),
    # AC parallelism_config.py L377-384: "FSDP is enabled but the parallelism config has no
    # dimension for FSDP to shard across (both `dp_shard_size` and `cp_size` are 1)"
    lambda par, tr: ~((np.asarray(par.zero) >= 2) & (np.asarray(par.tp) > 1)
                      & (np.asarray(par.dp) * np.asarray(par.cp) == 1) & _fsdp(tr)),
    lambda par, tr: "Accelerate's FSDP has no dimension to shard across when tensor "
                    "parallelism takes every GPU; use zero 0, or leave ranks to dp")
_hf(
    "hf_hsdp_cp", "with engine hf, HSDP with cp > 1 needs a shard group larger than cp "
    "(dp_shard > 1)",
    P + "shard_group", (P + "shard_group", P + "cp", P + "dp"),
    # AC parallelism_config.py L332-337: "Context parallelism (cp_size > 1) cannot be used
    # with pure data parallelism (dp_replicate_size > 1 and dp_shard_size == 1)"
    lambda par, tr: ~((np.asarray(par.cp) > 1) & (_shard_group(par) == np.asarray(par.cp))
                      & (np.asarray(par.dp) > 1)),
    lambda par, tr: "Accelerate refuses context parallelism over replicas that shard "
                    "nothing (dp_shard 1); make parallel.shard_group a larger multiple of "
                    "cp")

"""The eager runtime's cost on this machine, measured on the workbench's reference model in one
process (world size 1, gloo).

A CPU trial's step is mostly the runtime's per-operation cost, not arithmetic: ~10 us per ATen
operation, ~10x that per DTensor operation. This probe times the trial model of ``tiny-dense``
(the reference: its shape is the trial's, workbench/trial/shrink.py) with 1, 3 and 5 layers:
- plain (what PP, CP and EP ranks compute around their collectives);
- under DDP (``parallelize.apply_ddp``) on a 1-rank group: its hooks and bucket copies;
- under the tensor-parallel plan (``parallelize.apply_tp``) on a 1-rank mesh: every sharded
  module's operations go through DTensor's dispatch, as on a real TP group;
- under FSDP2 (``parallelize.apply_fsdp``) on a 1-rank mesh, with and without resharding: the
  per-unit hooks (gather, reshard, reduce) run as they do on more ranks.
From the depths, the per-layer cost (least-squares slope) and the rest (intercept: embedding,
final norm, head, loss) of the forward, the backward and the optimizer step. The per-operation
costs are the plain model's seconds against its operation counts (``estimate/time/eager_ops.py``), less the
GEMM seconds the profile predicts; the DDP, TP and FSDP2 figures are what they add.
Collectives on a 1-rank group cost next to nothing: what remains is the framework's own work.
"""
from __future__ import annotations

import dataclasses
import statistics
from datetime import timedelta

from workbench.calibrate.processes import run_processes
from workbench.calibrate.timing import median_mean
from workbench.process_runner import supervised_rank

VARIANTS = ("plain", "ddp", "tp", "fsdp", "fsdp_reshard")
DEPTHS = (1, 3, 5)


def _probe(variant: str, layers: int, budget_s: float) -> dict:
    """(forward, backward, optimizer) seconds of one microbatch / step of the reference model."""
    import contextlib

    import torch
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import loss_parallel

    from workbench.catalog import CATALOGS
    from workbench.trial.model import Transformer, init_weights
    from workbench.trial.parallelize import apply_ddp, apply_fsdp, apply_tp, finalize_tp_grads
    from workbench.trial.shrink import TRIAL_SEQ, trial_model

    shape = dataclasses.replace(trial_model(CATALOGS["model"]["tiny-dense"], 1, 1, 1),
                                layers=layers)
    model = Transformer(shape)
    init_weights(model, 0)
    mesh = init_device_mesh("cpu", (1,))
    params = [p for p in model.parameters()]
    if variant == "tp":
        apply_tp(model, mesh, sequence_parallel=True)
        params = [p for p in model.parameters()]
    elif variant.startswith("fsdp"):
        apply_fsdp(model, mesh, reshard_after_forward=variant == "fsdp_reshard")
        params = [p for p in model.parameters()]
    elif variant == "ddp":
        model = apply_ddp(model, mesh)
    opt = torch.optim.AdamW(params, lr=1e-3)
    data = torch.randint(0, shape.vocab, (2, TRIAL_SEQ + 1), generator=torch.Generator()
                         .manual_seed(0))
    tokens, labels = data[:, :-1], data[:, 1:]
    ctx = loss_parallel if variant == "tp" else contextlib.nullcontext

    def loss():
        return F.cross_entropy(model(tokens).flatten(0, 1).float(), labels.flatten())

    def forward():
        with ctx():
            return loss()

    def forward_backward():
        with ctx():
            loss().backward()
        if variant == "tp":
            finalize_tp_grads(params)

    forward_backward()
    fwd = median_mean(forward, budget_s)
    both = median_mean(forward_backward, budget_s)
    step = median_mean(opt.step, budget_s)
    return {"forward": fwd, "backward": max(0.0, both - fwd), "optimizer": step,
            "tensors": len(params)}


def probe_runtime(budget_s: float = 0.3) -> dict:
    """{variant: {layers: {forward, backward, optimizer, tensors}}} measured in this process,
    which must not be in a process group (it makes a 1-rank gloo group, whose in-process store
    needs no port, and destroys it)."""
    import torch
    import torch.distributed as dist

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1,
                            timeout=timedelta(seconds=60))
    try:
        return {v: {d: _probe(v, d, budget_s) for d in DEPTHS} for v in VARIANTS}
    finally:
        dist.destroy_process_group()
        torch.set_num_threads(threads)


def probe_runtime_loaded(processes: int, budget_s: float = 0.3,
                         stall_s: float = 60.0) -> dict:
    """``probe_runtime`` in ``processes`` processes at once (one per core: a trial keeps every
    core busy, and this shared machine runs a lone process faster than a full one), combined
    as the median over the processes of every figure. Supervised and reaped as trials are."""
    def body(rank: int, queue) -> None:
        supervised_rank(rank, queue, lambda phase: queue.put(
            {"type": "probe", "rank": rank, "raw": probe_runtime(budget_s)}))

    def rank_args(port: int) -> list[tuple]:
        return [(r,) for r in range(processes)]      # 1-rank groups: no rendezvous port

    raws = [ev["raw"] for ev in run_processes(body, rank_args, "runtime probe", stall_s)]
    return {v: {d: {k: statistics.median(r[v][d][k] for r in raws) for k in raws[0][v][d]}
                for d in DEPTHS} for v in VARIANTS}


def per_layer(measured: dict) -> dict:
    """Slope (per layer) and intercept (the rest) of every figure of every variant: a
    least-squares line over the probe's depths."""
    import numpy as np

    depths = np.array(DEPTHS, dtype=float)
    out = {}
    for variant, by_depth in measured.items():
        out[variant] = {}
        for key in ("forward", "backward", "optimizer", "tensors"):
            slope, intercept = np.polyfit(depths, [by_depth[d][key] for d in DEPTHS], 1)
            out[variant][key] = (float(slope), float(intercept))
    return out

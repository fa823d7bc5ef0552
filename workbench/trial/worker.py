"""What every trial process runs: join the process group, build the rank (``build.py``), train
K steps (``step.py``), measure them (``measure.py``) and report one event per step to the
supervisor through a queue (``workbench.process_runner``'s protocol)."""
from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from datetime import timedelta

from workbench.process_runner import Phase, inject_fault, supervised_rank

from workbench.rank_devices import rank_environment


@dataclass(frozen=True)
class WorkerArgs:
    rank: int
    world: int
    port: int
    scenario: object          # the trial Scenario (scaled down, or a slice on GPUs)
    steps: int
    backend: str
    timeout_s: float
    seed: int = 1234
    inject: str | None = None  # kill | raise | hang
    inject_rank: int = -1
    inject_step: int = -1
    init_method: str = ""      # "" = tcp://127.0.0.1:<port>; "env://" under torchrun
    measure: bool = True       # False: no saved-tensor hooks or traffic records (overhead runs)


def run(args: WorkerArgs, queue) -> None:
    """Entry point of one rank (forked or spawned; also usable under torchrun)."""
    supervised_rank(args.rank, queue, lambda phase: _train(args, queue, phase))


def _inject(args: WorkerArgs, step: int, phase: Phase) -> None:
    if args.inject is None or args.rank != args.inject_rank or step != args.inject_step:
        return
    phase.value = f"step {step}: injected {args.inject}"
    inject_fault(args.inject, f"rank {args.rank} at step {step}")


def _train(args: WorkerArgs, queue, phase: Phase) -> None:
    import torch
    import torch.distributed as dist

    from workbench.trial.adapters import quant_state_bytes
    from workbench.trial.build import build
    from workbench.trial.device import (
        Clock, compute_for, device_facts, memory_figures, reset_peaks,
    )
    from workbench.trial.measure import (
        BlockTimer, CommRecorder, StepMeter, group_dims, local_bytes, optimizer_bytes,
        recorder_environment, weight_pointers,
    )
    from workbench.trial.step import batch, finish_gradients, forward_backward

    s = args.scenario
    par = s.parallel
    torch.manual_seed(args.seed)
    # before CUDA starts (compute_for sets the device): CUDA in NVML's PCI order, also under
    # torchrun, whose ranks the launcher did not start
    os.environ.update(rank_environment(args.backend))
    compute = compute_for(s, args.backend, args.rank)
    if not compute.cuda:
        torch.set_num_threads(1)           # ranks share this machine's cores
    phase.value = "joining the process group"
    os.environ.update(recorder_environment())   # either name, for every supported PyTorch
    dist.init_process_group(args.backend,
                            init_method=args.init_method or f"tcp://127.0.0.1:{args.port}",
                            rank=args.rank, world_size=args.world,
                            timeout=timedelta(seconds=args.timeout_s),
                            **({"device_id": compute.device} if compute.cuda else {}))
    try:
        rank = build(s, args.seed, phase, compute)
        recorder = CommRecorder(group_dims(rank))
        recorder.collect()                     # set-up traffic (broadcasts, mesh) is not a step
        weights = weight_pointers(rank.params)
        # QLoRA: the quantized base's block constants (absmax, code) belong to the params
        quant_bytes = quant_state_bytes(rank.modules[0]) if s.training.method == "qlora" else 0
        # per-block forward and backward times (CUDA events on a GPU); not under PP, where
        # several microbatches are in flight per block
        blocks = BlockTimer(rank.modules, compute.cuda) if par.pp == 1 else None
        facts = device_facts(compute)
        activations_mb = None                  # known from the counted step on
        p2p: dict = {}                         # point-to-point traffic, from the counted step
        for step in range(args.steps):
            _inject(args, step, phase)
            tokens, labels = batch(rank, step, args.seed)
            # One step is counted (the second when there is one: pipelining's first step runs
            # an extra shape-inference forward), so the other steps' times carry no
            # measurement cost (the saved-tensor hook runs per saved tensor).
            counted = step == min(1, args.steps - 1)
            metered = args.measure and counted
            meter = StepMeter(weights, activations=metered,
                              p2p=metered and (par.pp > 1 or par.cp > 1))
            reset_peaks(compute)
            clock = Clock(compute.cuda)
            phase.value = f"step {step}: forward/backward"
            clock.mark("start")
            with meter.record(), (blocks.timing() if blocks and not metered
                                  else contextlib.nullcontext()):
                losses = forward_backward(rank, tokens, labels)
            finish_gradients(rank, phase, step)
            clock.mark("backward")
            grads = sum(local_bytes(p.grad) for p in rank.params if p.grad is not None)
            phase.value = f"step {step}: optimizer"
            rank.optimizer.step()
            clock.mark("end")
            if meter.count_p2p:
                p2p = meter.p2p
            comm = recorder.collect() if args.measure else {}
            for dim, ops in p2p.items():
                comm.setdefault(dim, {}).update(ops)
            if counted:
                activations_mb = meter.activations / (s.microbatches * len(rank.chunks))
            queue.put({
                "type": "step", "rank": args.rank, "step": step,
                "time": clock.elapsed("start", "end"),
                "at": time.time(),            # wall clock when the step ended (live-view lag)
                # the one step that carried the saved-tensor hooks (and, for PP/CP, the
                # profiler): its time includes the measurement; the others' do not
                "measured": bool(metered),
                "comm": comm,
                **({"comm_note": recorder.note} if args.measure and recorder.note else {}),
                "forward_backward_s": clock.elapsed("start", "backward"),
                "optimizer_s": clock.elapsed("backward", "end"),
                "loss": sum(losses) / len(losses) if losses else None,
                "params": sum(local_bytes(p) for p in rank.params) + quant_bytes,
                "params_frozen": sum(local_bytes(p) for p in rank.params
                                     if not p.requires_grad) + quant_bytes,
                "params_trainable": sum(local_bytes(p) for p in rank.params if p.requires_grad),
                "trainable_numel": sum((p.to_local() if hasattr(p, "to_local") else p).numel()
                                       for p in rank.params if p.requires_grad),
                "grads": grads,
                "optimizer": optimizer_bytes(rank.optimizer),
                "activations_per_microbatch": activations_mb,
                "pp_rank": rank.pp_rank, "chunks": list(rank.chunks),
                "device": str(compute.device), "precision_ran": compute.label,
                **facts, **memory_figures(compute),
                **(blocks.read() if blocks and not metered else {}),
            })
            rank.optimizer.zero_grad(set_to_none=True)
        phase.value = "finishing"
        dist.barrier()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()

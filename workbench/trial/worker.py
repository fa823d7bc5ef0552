"""What every trial process runs: build the mesh, the model chunk(s), parallelize, train K steps,
measure, and report events to the supervisor through a queue."""
from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

HEARTBEAT_S = 0.5


@dataclass(frozen=True)
class WorkerArgs:
    rank: int
    world: int
    port: int
    scenario: object          # the trial Scenario (scaled down)
    steps: int
    backend: str
    timeout_s: float
    seed: int = 1234
    inject: str | None = None  # kill | raise | hang
    inject_rank: int = -1
    inject_step: int = -1
    init_method: str = ""      # "" = tcp://127.0.0.1:<port>; "env://" under torchrun
    measure: bool = True       # False: no saved-tensor hooks or traffic records (overhead runs)


def _local_bytes(t) -> int:
    local = t.to_local() if hasattr(t, "to_local") else t
    return local.numel() * local.element_size()


def _optimizer_bytes(opt) -> int:
    total = 0
    for part in getattr(opt, "parts", [opt]):      # parallelize.Optimizers: ZeRO-1 under EP
        inner = getattr(part, "optim", part)   # ZeroRedundancyOptimizer keeps the local shard
        for state in inner.state.values():
            for v in state.values():
                if hasattr(v, "numel") and v.dim() > 0:
                    total += _local_bytes(v)
    return total


class Phase:
    """What this rank is doing now, as the heartbeat reports it."""

    def __init__(self) -> None:
        self.value = "starting"


def supervised_rank(rank: int, queue, body: Callable[[Phase], None]) -> None:
    """Run one rank's ``body`` under the supervisor's protocol (trials and the collective
    benchmark): a heartbeat with the current phase every HEARTBEAT_S, ``done`` at the end, or an
    ``error`` event with one line and a non-zero exit."""
    phase = Phase()
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            queue.put({"type": "heartbeat", "rank": rank, "phase": phase.value,
                       "time": time.time()})

    threading.Thread(target=beat, daemon=True).start()
    try:
        body(phase)
    except BaseException as exc:   # report, then exit non-zero: the supervisor decides
        queue.put({"type": "error", "rank": rank, "phase": phase.value,
                   "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300],
                   "traceback": traceback.format_exc()[-2000:]})
        stop.set()
        queue.close()
        queue.join_thread()      # the report must leave before the process does
        os._exit(1)
    stop.set()
    queue.put({"type": "done", "rank": rank})
    queue.close()
    queue.join_thread()


def run(args: WorkerArgs, queue) -> None:
    """Entry point of one rank (forked or spawned; also usable under torchrun)."""
    supervised_rank(args.rank, queue, lambda phase: _train(args, queue, phase))


def _inject(args: WorkerArgs, step: int, phase: Phase) -> None:
    if args.inject is None or args.rank != args.inject_rank or step != args.inject_step:
        return
    phase.value = f"step {step}: injected {args.inject}"
    inject_fault(args.inject, f"rank {args.rank} at step {step}")


def inject_fault(kind: str, where: str) -> None:
    """Fault injection for teaching and tests: die (SIGKILL), raise, or hang forever."""
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "raise":
        raise RuntimeError(f"injected failure on {where}")
    if kind == "hang":
        while True:
            time.sleep(1)


def _train(args: WorkerArgs, queue, phase: Phase) -> None:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import loss_parallel

    from workbench.trial import ring_attention as ring
    from workbench.trial.model import Transformer, init_weights
    from workbench.trial.parallelize import finalize_tp_grads, make_optimizer, parallelize
    from workbench.trial.pipeline import (
        build_schedule, chunk_model, make_stage, stage_chunks, sync_tied_grads, tie_across_chunks,
        tied_embedding_group,
    )

    s = args.scenario
    par, tr = s.parallel, s.training
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    phase.value = "joining the process group"
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "20000")   # the flight recorder sees every op
    dist.init_process_group(args.backend,
                            init_method=args.init_method or f"tcp://127.0.0.1:{args.port}",
                            rank=args.rank, world_size=args.world,
                            timeout=timedelta(seconds=args.timeout_s))
    try:
        phase.value = "building the device mesh"
        mesh = init_device_mesh("cpu", (par.pp, par.dp, par.cp, par.tp),
                                mesh_dim_names=("pp", "dp", "cp", "tp"))
        if par.cp > 1:
            mesh["dp", "cp"]._flatten("dp_cp")
        cp_rank = mesh["cp"].get_local_rank()
        pp_rank = mesh["pp"].get_local_rank()
        dp_rank = mesh["dp"].get_local_rank()
        phase.value = "building the model"
        full = Transformer(s.model)
        init_weights(full, args.seed)
        chunks = stage_chunks(par, pp_rank) if par.pp > 1 else (0,)
        modules = [chunk_model(full, par, c) if par.pp > 1 else full for c in chunks]
        phase.value = "parallelizing"
        ep = edp_group = edp_mesh = None
        if par.ep > 1:
            ep, edp_mesh = _expert_groups(mesh, par)
            edp_group = edp_mesh.get_group()
        wrapped = [parallelize(mod, mesh, par, ep, tr.seq_len, edp_mesh) for mod in modules]
        # DualPipeV puts both ends of the model on pipeline rank 0: one tied weight there.
        # The schedule would divide its gradient by the microbatch count once per stage that
        # uses it, so this rank scales its gradients itself.
        shared = s.model.tied_embeddings and len(modules) > 1 and par.zero < 2
        if shared:
            tie_across_chunks(modules)
        params = list(_Joined(modules).parameters())
        opt = make_optimizer(_Joined(modules), par, mesh, tr.optimizer,
                             (_expert_parameters(modules), edp_group) if par.ep > 1 else None)
        mbs = s.microbatches
        loss_fn = (lambda logits, labels: F.cross_entropy(
            logits.flatten(0, 1).float(), labels.flatten()))
        schedule = None
        if par.pp > 1:
            stages = [make_stage(w, c, par, mesh["pp"].get_group()) for w, c in zip(wrapped, chunks)]
            schedule = build_schedule(stages, par, mbs, loss_fn, scale_grads=not shared)
        tied = s.model.tied_embeddings and par.pp > 1
        tied_group = tied_embedding_group(mesh, par) if tied else None
        dims = _group_dims(mesh, par, ep, edp_group, tied_group if tied else None)
        recorder = _CommRecorder(dims)
        recorder.collect()                     # set-up traffic (broadcasts, mesh) is not a step
        param_ptrs = {(p.to_local() if hasattr(p, "to_local") else p).data_ptr() for p in params}
        activations_mb = None                  # known from the counted step on
        p2p: dict = {}                         # point-to-point traffic, from the counted step
        for step in range(args.steps):
            _inject(args, step, phase)
            gen = torch.Generator().manual_seed(args.seed + 1000 * step + dp_rank)
            data = torch.randint(0, s.model.vocab, (tr.micro_batch * mbs, tr.seq_len + 1),
                                 generator=gen)
            tokens, labels = data[:, :-1], data[:, 1:]
            if par.cp > 1:       # each CP rank trains on one contiguous chunk of the sequence
                chunk = tr.seq_len // par.cp
                sl = slice(cp_rank * chunk, (cp_rank + 1) * chunk)
                tokens, labels = tokens[:, sl], labels[:, sl]
            saved = {"bytes": 0, "alive": {}}

            def pack(t):
                # Count each storage once while it is alive: a pointer seen again after the
                # tensor that held it died (an earlier microbatch's graph freed by its
                # backward) is new memory.
                local = t.to_local() if hasattr(t, "to_local") else t
                try:
                    storage = local.untyped_storage()
                    ptr = storage.data_ptr()
                except RuntimeError:      # tensors without real storage (meta, fake)
                    return t
                base = getattr(t, "_base", None)
                if ptr in param_ptrs or isinstance(t, torch.nn.Parameter) or isinstance(
                        base, torch.nn.Parameter):
                    return t        # weights, their views and FSDP2's unsharded copies
                ref = saved["alive"].get(ptr)
                if ref is None or ref() is None:
                    saved["alive"][ptr] = weakref.ref(t)
                    saved["bytes"] += storage.nbytes()
                return t

            phase.value = f"step {step}: forward/backward"
            t0 = time.perf_counter()
            losses = []
            # Saved activations are counted on one step only (the second when there is one:
            # pipelining's first step runs an extra shape-inference forward), so the other
            # steps' times carry no measurement cost (the Python hook runs per saved tensor).
            counted = step == min(1, args.steps - 1)
            hooks = (torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
                     if args.measure and counted else contextlib.nullcontext())
            vocab_parallel = par.tp > 1
            # gloo's send/recv never reach the flight recorder: the profiler sees them
            profiler = (torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                               record_shapes=True)
                        if args.measure and counted and (par.pp > 1 or par.cp > 1)
                        else contextlib.nullcontext())
            ring_before = dict(ring.SENT)
            with hooks, profiler as prof, (loss_parallel() if vocab_parallel
                                           else contextlib.nullcontext()):
                if schedule is not None:
                    out_losses: list = []
                    is_first = 0 in chunks
                    is_last = (par.pp * par.chunks_per_rank - 1) in chunks
                    kwargs = {}
                    if is_last:
                        kwargs.update(target=labels, losses=out_losses)
                    if is_first:
                        schedule.step(tokens, **kwargs)
                    else:
                        schedule.step(**kwargs)
                    losses = [_scalar(x) for x in out_losses]
                    if shared:
                        for p in params:
                            if p.grad is not None:
                                p.grad.div_(mbs)
                else:
                    model = wrapped[0]
                    for i in range(mbs):
                        sl = slice(i * tr.micro_batch, (i + 1) * tr.micro_batch)
                        last = i == mbs - 1
                        ctx = _sync_context(model, last)
                        with ctx:
                            loss = loss_fn(model(tokens[sl]), labels[sl]) / mbs
                            loss.backward()
                        losses.append(_scalar(loss) * mbs)
            if par.tp > 1 and (par.zero < 2 or par.dp * par.cp == 1):   # else FSDP2 does
                phase.value = f"step {step}: tensor-parallel gradient layouts"
                finalize_tp_grads(params)
            if tied:
                phase.value = f"step {step}: tied-embedding gradient sum"
                sync_tied_grads(modules, tied_group)
            if par.ep > 1 and par.zero < 2:      # FSDP2 reduces the experts' itself
                phase.value = f"step {step}: expert gradient reduction"
                _reduce_expert_grads(modules, edp_group, par.dp * par.cp)
            t1 = time.perf_counter()
            grads = sum(_local_bytes(p.grad) for p in params if p.grad is not None)
            phase.value = f"step {step}: optimizer"
            opt.step()
            t2 = time.perf_counter()
            if prof is not None:
                p2p = _p2p_traffic(prof, {k: ring.SENT[k] - ring_before[k] for k in ring.SENT})
            comm = recorder.collect() if args.measure else {}
            for dim, ops in p2p.items():
                comm.setdefault(dim, {}).update(ops)
            if counted:
                activations_mb = saved["bytes"] / (mbs * len(chunks))
            queue.put({
                "type": "step", "rank": args.rank, "step": step, "time": t2 - t0,
                "at": time.time(),            # wall clock when the step ended (live-view lag)
                # the one step that carried the saved-tensor hooks (and, for PP/CP, the
                # profiler): its time includes the measurement; the others' do not
                "measured": bool(args.measure and counted),
                "comm": comm,
                "forward_backward_s": t1 - t0, "optimizer_s": t2 - t1,
                "loss": sum(losses) / len(losses) if losses else None,
                "params": sum(_local_bytes(p) for p in params), "grads": grads,
                "optimizer": _optimizer_bytes(opt),
                "activations_per_microbatch": activations_mb,
                "pp_rank": pp_rank, "chunks": list(chunks),
            })
            opt.zero_grad(set_to_none=True)
        phase.value = "finishing"
        dist.barrier()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _p2p_traffic(prof, ring_sent: dict) -> dict:
    """Bytes and counts of one step's gloo sends, per dimension: what the ring attention sent
    (it counts its own sends) is context-parallel, the rest pipeline-parallel (trial
    activations are fp32: 4 bytes per element)."""
    total = {"bytes": 0, "count": 0}
    for e in prof.events():
        if e.name == "gloo:send":
            n = 1
            for size in (e.input_shapes[0] if e.input_shapes else []):
                n *= size
            total["bytes"] += 4 * n
            total["count"] += 1
    out: dict = {}
    if ring_sent["count"]:
        out["cp"] = {"send_recv": dict(ring_sent)}
    pp = {k: total[k] - ring_sent[k] for k in total}
    if pp["count"]:
        out["pp"] = {"send_recv": pp}
    return out


def _group_dims(mesh, par, ep, edp_group, tied_group) -> dict[str, tuple[str, int]]:
    """Process-group name -> (parallel dimension, group size), for classifying recorded
    collectives."""
    import torch.distributed as dist

    groups = [(mesh[d].get_group(), d) for d in ("pp", "dp", "cp", "tp")]
    if par.cp > 1:
        groups.append((mesh["dp_cp"].get_group(), "dp"))
    if ep is not None and ep[0] is not None:
        groups.append((ep[0], "ep"))
    if edp_group is not None:
        groups.append((edp_group, "dp"))
    if tied_group is not None:
        groups.append((tied_group, "pp"))
    return {g.group_name: (d, dist.get_world_size(g)) for g, d in groups}


class _CommRecorder:
    """Reads the flight recorder (every collective and point-to-point op this rank issued, with
    its process group, sizes and dtypes) and sums bytes and counts per dimension and op since
    the last call. Wrappers around torch.distributed would miss DDP's and DTensor's traffic."""

    SIZES = {"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4,
             "Bool": 1, "Byte": 1, "Char": 1, "Short": 2}

    def __init__(self, dims: dict[str, tuple[str, int]]) -> None:
        self.dims = dims
        self.seen: set = set()

    def collect(self) -> dict:
        import pickle

        import torch

        try:
            trace = pickle.loads(torch._C._distributed_c10d._dump_fr_trace())
        except Exception:      # the recorder is off: report nothing rather than guess
            return {}
        out: dict = {}
        for e in trace.get("entries", []):
            key = (e.get("process_group", ("", ""))[0], e.get("collective_seq_id"),
                   e.get("p2p_seq_id"), e.get("record_id"))
            if key in self.seen:
                continue
            self.seen.add(key)
            dim, size = self.dims.get(e.get("process_group", ("", ""))[0], ("other", 1))
            name = e.get("profiling_name", "").split(":")[-1]
            # nccl-tests' sizes: an all-gather counts its output (input x group size: gloo's
            # functional all-gather records one rank's slice as its output), every other op its
            # input
            nbytes = 0
            for sizes, dtype in zip(e.get("input_sizes", []), e.get("input_dtypes", [])):
                nbytes += math.prod(sizes) * self.SIZES.get(dtype, 4)
            if name.startswith("all_gather"):
                nbytes *= size
            slot = out.setdefault(dim, {}).setdefault(name, {"bytes": 0, "count": 0})
            slot["bytes"] += nbytes
            slot["count"] += 1
        return out


def _expert_groups(mesh, par):
    """EP groups of ``ep`` consecutive ranks of the dp x cp index (EP is drawn from dp x cp,
    contract 1; the index is the flattened ``dp_cp`` mesh's) and the expert-data-parallel
    groups striding across them (ranks holding the same experts), this rank's as a 1-D
    DeviceMesh for FSDP2. Every rank creates every group, in the same order. Both are new groups,
    never the default one, so their traffic is told apart from the dense dp x cp group's."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh

    grid = mesh.mesh.reshape(par.pp, par.dp * par.cp, par.tp)    # (pp, dp x cp, tp)
    me = dist.get_rank()
    mine_ep = mine_edp = None
    ep_rank = 0
    for pp in range(grid.shape[0]):
        for tp in range(grid.shape[2]):
            ranks = grid[pp, :, tp].tolist()
            for g0 in range(0, len(ranks), par.ep):
                members = ranks[g0:g0 + par.ep]
                group = dist.new_group(members)
                if me in members:
                    mine_ep, ep_rank = group, members.index(me)
            for j in range(par.ep):
                members = ranks[j::par.ep]
                group = dist.new_group(members)
                if me in members:
                    mine_edp, edp_ranks = group, members
    edp_mesh = DeviceMesh.from_group(mine_edp, mesh.device_type, mesh=edp_ranks,
                                     mesh_dim_names=("edp",))
    return (mine_ep, ep_rank), edp_mesh


def _expert_parameters(modules) -> list:
    """The rank's routed-expert parameters (every MoE layer's ``experts``)."""
    from workbench.trial.model import MoE

    return [p for m in modules for mod in m.modules() if isinstance(mod, MoE)
            for p in mod.experts.parameters()]


def _reduce_expert_grads(modules, edp_group, dp: int) -> None:
    """Expert gradients arrive summed over the EP group's tokens; summing over the expert-data-
    parallel replicas and dividing by ``dp`` (= dp x cp) gives the mean over every data-parallel
    rank's loss, as DDP gives the dense parameters."""
    import torch
    import torch.distributed as dist

    grads = [p.grad for p in _expert_parameters(modules) if p.grad is not None]
    if not grads:
        return
    if dist.get_world_size(edp_group) > 1:   # one coalesced all-reduce, as a DDP bucket
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat, group=edp_group)
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()
    for g in grads:
        g.div_(dp)


def _scalar(loss) -> float:
    loss = loss.detach()
    return float(loss.full_tensor() if hasattr(loss, "full_tensor") else loss)


class _Joined:
    """All chunks' parameters as one module-like object for the optimizer."""

    def __init__(self, modules) -> None:
        self.modules = modules

    def parameters(self):
        seen = set()
        for m in self.modules:
            for p in m.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield p


def _sync_context(model, last: bool):
    """DDP reduces gradients once per step (``no_sync`` on all but the last microbatch);
    FSDP2 reduce-scatters after every microbatch, as torchtitan's gradient accumulation does
    (the estimator counts the same)."""
    if hasattr(model, "no_sync") and not last:
        return model.no_sync()
    return contextlib.nullcontext()

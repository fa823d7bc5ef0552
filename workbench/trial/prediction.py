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
from workbench.estimate.memory.model_states import model_states
from workbench.estimate.model.params import is_moe_layer
from workbench.estimate.single import estimate_step_time, evaluate_scenario
from workbench.scenario.types import Scenario


def as_run(trial: Scenario) -> Scenario:
    """The scenario whose estimate describes what the trial runs: ZeRO-2 runs as FSDP2 without
    resharding after forward (torchtitan's ZeRO-2; PyTorch has no Megatron/DeepSpeed-style
    ZeRO-2 that keeps whole parameters), so it is predicted as that; adapters run without
    dropout (``trial.adapters.apply_method``: every rank must compute what the single-process
    reference computes), so they are predicted without it."""
    par, tr = trial.parallel, trial.training
    if par.zero == 2 and par.dp * par.cp > 1:
        par = dataclasses.replace(par, zero=3, reshard_after_forward=False)
    if tr.lora is not None and tr.lora.dropout:
        tr = dataclasses.replace(tr, lora=dataclasses.replace(tr.lora, dropout=0.0))
    return dataclasses.replace(trial, parallel=par, training=tr)


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
    zero1 = par.zero == 1 and par.dense_shard > 1 and not by_tensor(run)
    if zero1:      # trials refuse ZeRO-1 with TP or PP: one stage, the whole model
        # under EP two ZeroRedundancyOptimizers: dense tensors over dp x cp, the rank's own
        # experts over the expert-data-parallel group (trial/parallelize.py's make_optimizer)
        sizes = parameter_tensors(m, experts=0 if par.ep > 1 else None)
        owned = zero_redundancy_partition(sizes, par.dense_shard)
        experts = routed_expert_tensors(m, m.moe.experts // par.ep) if par.ep > 1 else []
        expert_owned = zero_redundancy_partition(experts, par.expert_shard)
        state_bytes = model_states(1, 0, tr.precision, tr.optimizer, 0, 1, 1).optimizer
    per_tensor = fine_tuning_states(run) if by_tensor(run) else None
    out = {}
    for rank in range(par.world):
        pp_rank = rank // (par.dp * par.cp * par.tp)
        pred = dict(per_stage[pp_rank])
        if zero1:
            shard_rank = (rank // par.tp) % (par.dp * par.cp)     # rank in the dp x cp group
            pred["optimizer"] = state_bytes * (
                sum(sizes[i] for i in owned[shard_rank])
                + sum(experts[i] for i in expert_owned[shard_rank // par.ep]))
        if per_tensor is not None:      # fine-tuning: model states from the tensor list
            pred.update(per_tensor[rank])
        pred["peak"] = sum(pred[k] for k in ("params", "grads", "optimizer", "activations"))
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
    if par.zero == 1 and par.dense_shard > 1 and not by_tensor(run):   # no ZeRO-1 with TP/PP
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
    if by_tensor(run):
        per_stage = [{**v, **fine_tuning_comm(run, v.get("dp", {}))} for v in per_stage]
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
    (tied output weight once), for the unsharded model (``parameter_shapes``' tensors).
    ``experts``: routed experts listed per MoE layer (all by default; 0 gives the dense tensors
    an expert-parallel rank shares with its whole data-parallel group,
    ``routed_expert_tensors`` its own experts)."""
    return [t.numel for t in parameter_shapes(m, experts=experts)]


def routed_expert_tensors(m: ModelShape, local: int) -> list[int]:
    """Element counts of ``local`` routed experts per MoE layer (an expert-parallel rank's
    ``experts`` modules), in ``Module.parameters()`` order: the bias-free w1, w2 (and w3 for
    SwiGLU) of the ``local`` experts, one tensor each (trial/model.py ``Experts``, torchtitan's
    ``GroupedExperts`` layout), local x hidden x expert_ffn_hidden elements."""
    if m.moe is None or not local:
        return []
    per_layer = [local * m.hidden * m.moe.expert_ffn_hidden] * (3 if m.mlp == "swiglu" else 2)
    moe_layers = sum(is_moe_layer(m, i) for i in range(m.layers))
    return per_layer * moe_layers


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


# -- fine-tuning: frozen base, adapters, low-bit optimizers, from the tensor list -----------
# The estimator's model states assume every weight trains with AdamW or SGD; a trial with a
# frozen base (LoRA, QLoRA) or another optimizer is predicted here tensor by tensor, as the
# trial holds them: ``parameter_shapes`` lists the trial model's parameters after PEFT's
# injection (trial/adapters.py) in ``Module.parameters()`` order, each with its shape, whether
# it trains, its FSDP2 unit and its element size; ``optimizer_states`` gives each tensor's
# state. Trials run these with data and context parallelism only (rules.TRIAL_LIMITS).

ADAPTER_PROJECTIONS = {"swiglu": {"q": ("attention", "wq"), "k": ("attention", "wk"),
                                  "v": ("attention", "wv"), "o": ("attention", "wo"),
                                  "gate": ("mlp", "w1"), "up": ("mlp", "w3"),
                                  "down": ("mlp", "w2")},
                       "gelu": {"q": ("attention", "wq"), "k": ("attention", "wk"),
                                "v": ("attention", "wv"), "o": ("attention", "wo"),
                                "up": ("mlp", "w1"), "down": ("mlp", "w2")}}


@dataclasses.dataclass(frozen=True)
class Tensor:
    """One parameter tensor of the trial model: shape, trains or not, FSDP2 unit (a block
    index, or -1 for the root: embeddings, final norm, head), bytes per element (a QLoRA base
    is stored packed: NF4 two elements per byte, int8 one)."""

    shape: tuple[int, ...]
    trainable: bool
    unit: int
    elem_bytes: float = 4.0
    part: str = ""            # embeddings | norms | head | base | adapter

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


def by_tensor(trial: Scenario) -> bool:
    """Whether the trial's model states are predicted tensor by tensor (fine-tuning methods
    with a frozen base, optimizers other than AdamW and SGD)."""
    tr = trial.training
    return tr.adapters or tr.optimizer not in ("adamw", "sgd")


def parameter_shapes(m: ModelShape, method: str = "pretrain", lora=None,
                     experts: int | None = None) -> list[Tensor]:
    """The trial Transformer's parameters in ``Module.parameters()`` order (tied output weight
    once) after ``method``: pretrain / full every tensor trains; lora / qlora the targeted
    projections of every block gain ``lora_A`` (r x in) and ``lora_B`` (out x r) after their
    base weight (and bias), the base frozen (qlora: packed), and the parts in
    ``lora.trainable`` train (fine-tuning trials run dense models). MoE layers: the router,
    ``experts`` routed experts (all by default) and the shared experts, bias-free."""
    adapters = method in ("lora", "qlora")
    train_all = not adapters
    keep = set(lora.trainable) if adapters else set()
    targets = {ADAPTER_PROJECTIONS[m.mlp][t] for t in (lora.targets if adapters else ())
               if t in ADAPTER_PROJECTIONS[m.mlp]}
    packed = 4.0
    if method == "qlora":
        packed = 0.5 if lora.quant == "nf4" else 1.0
    h, q, kv = m.hidden, m.heads * m.dim_per_head, m.kv_dim
    out: list[Tensor] = []

    def norm(unit: int) -> None:
        out.append(Tensor((h,), train_all or "norms" in keep, unit, part="norms"))
        if m.norm == "layernorm":
            out.append(Tensor((h,), train_all or "norms" in keep, unit, part="norms"))

    def linear(unit: int, group: str, name: str, n_in: int, n_out: int, bias: bool) -> None:
        out.append(Tensor((n_out, n_in), train_all, unit, packed if adapters else 4.0,
                          part="base"))
        if bias:
            out.append(Tensor((n_out,), train_all, unit, part="base"))
        if (group, name) in targets:
            out.append(Tensor((lora.rank, n_in), True, unit, part="adapter"))
            out.append(Tensor((n_out, lora.rank), True, unit, part="adapter"))

    def mlp(unit: int, group: str, ffn: int, bias: bool) -> None:
        linear(unit, group, "w1", h, ffn, bias)
        linear(unit, group, "w2", ffn, h, bias)
        if m.mlp == "swiglu":
            linear(unit, group, "w3", h, ffn, bias)

    out.append(Tensor((m.vocab, h), train_all or "embeddings" in keep
                      or (m.tied_embeddings and "head" in keep), -1, part="embeddings"))
    positions = int(m.extra.get("position_embeddings", 0))
    if positions:
        out.append(Tensor((positions, h), train_all or "embeddings" in keep, -1,
                          part="embeddings"))
    for i in range(m.layers):
        norm(i)
        linear(i, "attention", "wq", h, q, m.bias)
        linear(i, "attention", "wk", h, kv, m.bias)
        linear(i, "attention", "wv", h, kv, m.bias)
        linear(i, "attention", "wo", q, h, m.bias)
        norm(i)
        if is_moe_layer(m, i):
            e = m.moe
            linear(i, "router", "router", h, e.experts, False)
            n = e.experts if experts is None else experts
            if n:   # trial/model.py ``Experts``: w1, w2 (and w3), one tensor for the n experts
                f = e.expert_ffn_hidden
                for shape in ((n, f, h), (n, h, f), (n, f, h))[:3 if m.mlp == "swiglu" else 2]:
                    out.append(Tensor(shape, train_all, i, part="base"))
            if e.shared_experts:
                mlp(i, "shared", e.shared_experts * e.expert_ffn_hidden, False)
        else:
            mlp(i, "mlp", m.ffn_hidden, m.bias)
    norm(-1)
    if not m.tied_embeddings:
        out.append(Tensor((m.vocab, h), train_all or "head" in keep, -1, part="head"))
    return out


def shard_rows(rows: int, world: int, rank: int) -> int:
    """Rows of a dim-0 shard FSDP2 gives ``rank`` (``torch.chunk``: ceil(rows / world) each,
    the last ones fewer or none)."""
    size = -(-rows // world)
    return max(0, min(size, rows - rank * size))


def local_shape(t: Tensor, world: int, rank: int) -> tuple[int, ...]:
    return (shard_rows(t.shape[0], world, rank),) + t.shape[1:]


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def fine_tuning_states(run: Scenario) -> dict[int, dict]:
    """rank -> params, grads, optimizer bytes (and the params' frozen / trainable split, the
    trainable element count) for a data- and context-parallel trial (tp = pp = 1): whole
    tensors under DDP and ZeRO-1 (ZeroRedundancyOptimizer partitions the trainable tensors),
    dim-0 shards over dp x cp under FSDP2; fp32 gradients of the trainable tensors only; the
    optimizer's state per tensor (``optimizer_states``). A QLoRA base's quantization constants
    are counted with the frozen params (``quant_constants``)."""
    from workbench.estimate.memory.optimizer_states import optimizer_bytes

    par, tr, m = run.parallel, run.training, run.model
    tensors = parameter_shapes(m, tr.method, tr.lora)
    ranks = par.dp * par.cp
    fsdp = par.zero >= 2 and ranks > 1
    trainable = [t for t in tensors if t.trainable]
    if par.zero == 1 and ranks > 1:
        owned = zero_redundancy_partition([t.numel for t in trainable], ranks)
    quant = quant_constants(m, tr.lora) if tr.method == "qlora" else 0
    out = {}
    for rank in range(par.world):
        shard = rank % ranks             # rank in dp x cp (tp = pp = 1)

        def shape(t: Tensor) -> tuple[int, ...]:
            return local_shape(t, ranks, shard) if fsdp else t.shape

        frozen = sum(_numel(shape(t)) * t.elem_bytes for t in tensors if not t.trainable)
        train = sum(_numel(shape(t)) * 4 for t in trainable)
        if par.zero == 1 and ranks > 1:
            stepped = [trainable[i].shape for i in owned[shard]]
        else:
            stepped = [shape(t) for t in trainable]
        out[rank] = {"params": float(frozen + quant + train), "grads": float(train),
                     "optimizer": float(optimizer_bytes(tr.optimizer, stepped)),
                     "params_frozen": float(frozen + quant), "params_trainable": float(train),
                     "trainable_numel": float(train // 4)}
    return out


def quant_constants(m: ModelShape, lora) -> int:
    """Bytes of a QLoRA base's quantization constants that are not parameters (bitsandbytes
    0.50, ``functional.quantize_4bit`` / ``int8_vectorwise_quant``): NF4 keeps an fp32 absmax
    per block of 64 and the 16-entry fp32 code per tensor; double quantization
    (``compress_statistics``) stores the absmax as uint8 with an fp32 absmax per 256 of them,
    the 256-entry fp32 dynamic code and a 0-d fp32 offset; int8 keeps an fp32 scale per row."""
    total = 0
    for t in parameter_shapes(m, "qlora", lora):
        if t.part != "base" or len(t.shape) != 2:
            continue
        n = t.numel
        if lora.quant == "int8":
            total += 4 * t.shape[0]
            continue
        blocks = -(-n // 64)
        if lora.double_quant:
            total += blocks + 4 * -(-blocks // 256) + 4 * 256 + 4 + 4 * 16
        else:
            total += 4 * blocks + 4 * 16
    return total


def fine_tuning_comm(run: Scenario, dp: dict) -> dict:
    """The data-parallel traffic of a fine-tuning trial (tp = pp = 1), from the estimator's
    ``dp`` volume for the same layout, tensor by tensor: DDP all-reduces only the
    trainable gradients (one bucket here); ZeRO-1 also broadcasts each trainable tensor from
    its owner; FSDP2 still all-gathers every unit's parameters, frozen base included, as often
    as the estimator says (bytes: each tensor's dim 0 padded to a multiple of the shards), and
    reduce-scatters, per microbatch, only the units that hold trainable tensors,
    each its trainable tensors (dim 0 padded to a multiple of dp x cp)."""
    par, tr, m = run.parallel, run.training, run.model
    ranks = par.dp * par.cp
    if ranks == 1 or not dp:
        return {}
    tensors = parameter_shapes(m, tr.method, tr.lora)
    trainable = [t for t in tensors if t.trainable]
    grad_bytes = 4.0 * sum(t.numel for t in trainable)
    if par.zero < 2:
        new = {"all_reduce": {"bytes": grad_bytes, "count": 1.0}}
        if par.zero == 1:
            new["broadcast"] = {"bytes": grad_bytes, "count": float(len(trainable))}
        return {"dp": new}

    def padded(t: Tensor) -> int:
        return -(-t.shape[0] // ranks) * ranks * (t.numel // t.shape[0])

    new = dict(dp)
    gather = dp.get("all_gather")
    if gather:      # the estimator gathers the same tensors, unpadded
        scale = (sum(padded(t) * t.elem_bytes for t in tensors)
                 / sum(t.numel * t.elem_bytes for t in tensors))
        new["all_gather"] = {"bytes": gather["bytes"] * scale, "count": gather["count"]}
    units: dict[int, int] = {}
    for t in trainable:
        units[t.unit] = units.get(t.unit, 0) + padded(t)
    rs = {"bytes": 4.0 * sum(units.values()) * run.microbatches,
          "count": float(len(units) * run.microbatches)}
    new.pop("reduce_scatter", None)
    if rs["count"]:
        new["reduce_scatter"] = rs
    return {"dp": new}

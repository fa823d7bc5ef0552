"""The scenario's cross-field rules, each written once: the fields it reads, the rule in words
(for docs/scenario.md), whether it is a rule of the parallel layout, and its check.

A *layout* rule constrains the parallel degrees or the options the planner searches with them
(micro-batch, recompute, offload). ``workbench plan`` searches layouts, so a scenario given to it
is refused only by the other rules; the layout rules judge the starting layout it was given.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from workbench.errors import Problem
from workbench.scenario.types import Scenario

Check = Callable[[Scenario], Iterator[Problem]]


@dataclass(frozen=True)
class Rule:
    """One rule that spans fields."""

    name: str
    text: str                 # the rule in words
    fields: tuple[str, ...]   # the fields it reads
    layout: bool              # a rule of the parallel layout (the planner's search space)
    check: Check


RULES: list[Rule] = []


def min_microbatches(schedule: str, pp: int) -> int:
    """Microbatches per step a pipeline schedule needs (measured with
    torch.distributed.pipelining here, docs/platform.md): 1F1B-style schedules at least one per
    stage, DualPipeV two per stage (two chunks per rank), GPipe one."""
    if pp == 1 or schedule == "gpipe":
        return 1
    return 2 * pp if schedule == "dualpipev" else pp


def rule(name: str, text: str, *fields: str, layout: bool = True) -> Callable[[Check], Check]:
    """Register ``check`` as a rule."""
    def register(check: Check) -> Check:
        RULES.append(Rule(name, text, fields, layout, check))
        return check
    return register


def check_rules(s: Scenario, layout: bool | None = None) -> list[Problem]:
    """Every problem the rules find (``layout``: only layout rules, only the others, or all)."""
    return [p for r in RULES if layout is None or r.layout == layout for p in r.check(s)]


# -- model and hardware --------------------------------------------------------------------
@rule("gqa", "model.kv_heads divides model.heads (grouped-query attention groups)",
      "model.kv_heads", "model.heads", layout=False)
def _gqa(s: Scenario):
    m = s.model
    if m.heads % m.kv_heads:
        yield Problem("model.kv_heads", m.kv_heads, f"must divide model.heads = {m.heads} (GQA groups)")


@rule("head_dim", "model.heads divides model.hidden unless model.head_dim is given",
      "model.heads", "model.hidden", "model.head_dim", layout=False)
def _head_dim(s: Scenario):
    m = s.model
    if not m.head_dim and m.hidden % m.heads:
        yield Problem("model.heads", m.heads, f"must divide model.hidden = {m.hidden} "
                                              "(or set model.head_dim)")


@rule("moe_shape", "model.moe.top_k <= model.moe.experts and model.moe.dense_layers <= "
      "model.layers", "model.moe.top_k", "model.moe.experts", "model.moe.dense_layers",
      layout=False)
def _moe_shape(s: Scenario):
    m = s.model
    if m.moe is None:
        return
    if m.moe.top_k > m.moe.experts:
        yield Problem("model.moe.top_k", m.moe.top_k,
                      f"must be <= model.moe.experts = {m.moe.experts}")
    if m.moe.dense_layers > m.layers:
        yield Problem("model.moe.dense_layers", m.moe.dense_layers,
                      f"must be <= model.layers = {m.layers}")


@rule("fp8", "training.precision fp8 needs a GPU with FP8 tensor cores (fp8_tflops > 0)",
      "training.precision", "hardware.gpu", layout=False)
def _fp8(s: Scenario):
    if s.training.precision == "fp8" and s.hardware.gpu.fp8_tflops <= 0:
        yield Problem("training.precision", "fp8", f"{s.hardware.gpu.name} has no FP8 tensor "
                                                   "cores (hardware.gpu.fp8_tflops 0); use bf16 "
                                                   "or fp16")


@rule("nics", "hardware.inter_node.nics_per_node >= 1 when nodes > 1",
      "hardware.inter_node.nics_per_node", "hardware.nodes", layout=False)
def _nics(s: Scenario):
    hw = s.hardware
    if hw.nodes > 1 and hw.inter_node.nics_per_node < 1:
        yield Problem("hardware.inter_node.nics_per_node", 0, "must be >= 1 when nodes > 1")


# -- the parallel layout -------------------------------------------------------------------
@rule("world", "dp x tp x pp x cp equals the GPUs, hardware.gpus_per_node x hardware.nodes",
      "parallel.dp", "parallel.tp", "parallel.pp", "parallel.cp", "hardware.gpus_per_node",
      "hardware.nodes")
def _world(s: Scenario):
    par, hw = s.parallel, s.hardware
    if par.world != hw.world:
        yield Problem("parallel", {"dp": par.dp, "tp": par.tp, "pp": par.pp, "cp": par.cp},
                      f"dp*tp*pp*cp = {par.dp}*{par.tp}*{par.pp}*{par.cp} = {par.world} must "
                      f"equal hardware.gpus_per_node*nodes = {hw.gpus_per_node}*{hw.nodes} = "
                      f"{hw.world}")


@rule("tp_width", "parallel.tp divides model.heads, model.kv_heads, model.ffn_hidden and "
      "model.moe.expert_ffn_hidden (each TP rank holds whole heads and an equal FFN slice)",
      "parallel.tp", "model.heads", "model.kv_heads", "model.ffn_hidden",
      "model.moe.expert_ffn_hidden")
def _tp_width(s: Scenario):
    m, tp = s.model, s.parallel.tp
    if m.heads % tp:
        yield Problem("parallel.tp", tp, f"must divide model.heads = {m.heads}")
    if m.kv_heads % tp:
        yield Problem("parallel.tp", tp, f"must divide model.kv_heads = {m.kv_heads} "
                                         "(each TP rank needs whole key/value heads)")
    if m.ffn_hidden % tp:
        yield Problem("parallel.tp", tp, f"must divide model.ffn_hidden = {m.ffn_hidden}")
    if m.moe is not None and m.moe.expert_ffn_hidden % tp:
        yield Problem("parallel.tp", tp,
                      f"must divide model.moe.expert_ffn_hidden = {m.moe.expert_ffn_hidden}")


@rule("zero2_pp", "ZeRO-2 does not combine with pipeline parallelism over dp x cp > 1",
      "parallel.zero", "parallel.pp")
def _zero2_pp(s: Scenario):
    par = s.parallel
    if par.zero == 2 and par.pp > 1 and par.dp * par.cp > 1:
        yield Problem("parallel.zero", par.zero,
                      "ZeRO-2 does not combine with pipeline parallelism in any engine "
                      "(DeepSpeed's PipelineEngine refuses ZeRO-2/3; Megatron-LM's distributed "
                      "optimizer is ZeRO-1); use zero 1, or zero 3 (FSDP2) with "
                      "reshard_after_forward false")


@rule("virtual_stages", "parallel.virtual_stages >= 2 with interleaved-1f1b and zero-bubble "
      "(pp > 1), and 1 with every other schedule or without pipelining",
      "parallel.virtual_stages", "parallel.pp_schedule", "parallel.pp")
def _virtual_stages(s: Scenario):
    par = s.parallel
    interleaved = par.pp_schedule in ("interleaved-1f1b", "zero-bubble")
    if par.pp > 1 and interleaved and par.virtual_stages < 2:
        yield Problem("parallel.virtual_stages", par.virtual_stages,
                      f"{par.pp_schedule} needs virtual_stages >= 2 (model chunks per pipeline "
                      "rank, as PyTorch's interleaved schedules require); or use 1f1b / "
                      "dualpipev")
    if par.virtual_stages > 1 and not interleaved:
        yield Problem("parallel.virtual_stages", par.virtual_stages,
                      f"must be 1 for pp_schedule {par.pp_schedule}; virtual stages need "
                      "interleaved-1f1b or zero-bubble")
    if par.virtual_stages > 1 and par.pp == 1:
        yield Problem("parallel.virtual_stages", par.virtual_stages, "needs pp > 1")


@rule("stages_hold_layers", "model.layers >= pp x model chunks per rank (every pipeline stage "
      "holds a layer)", "model.layers", "parallel.pp", "parallel.virtual_stages",
      "parallel.pp_schedule")
def _stages_hold_layers(s: Scenario):
    par, m = s.parallel, s.model
    stages = par.pp * par.chunks_per_rank
    if m.layers < stages:
        yield Problem("model.layers", m.layers,
                      f"must be at least pp * chunks per rank = {par.pp} * "
                      f"{par.chunks_per_rank} = {stages} so every pipeline stage holds a layer")


@rule("ep", "parallel.ep > 1 needs an MoE model; ep divides dp x cp and model.moe.experts",
      "parallel.ep", "parallel.dp", "parallel.cp", "model.moe.experts")
def _ep(s: Scenario):
    par, m = s.parallel, s.model
    if par.ep > 1 and m.moe is None:
        yield Problem("parallel.ep", par.ep, "expert parallelism needs an MoE model (model.moe)")
    if (par.dp * par.cp) % par.ep:
        yield Problem("parallel.ep", par.ep, f"must divide dp*cp = {par.dp * par.cp} "
                                             "(EP takes its ranks from the data/context-parallel "
                                             "ranks)")
    if m.moe is not None and m.moe.experts % par.ep:
        yield Problem("parallel.ep", par.ep, f"must divide model.moe.experts = {m.moe.experts}")


@rule("shard_group", "parallel.shard_group (HSDP) needs zero >= 1 and divides dp x cp",
      "parallel.shard_group", "parallel.zero", "parallel.dp", "parallel.cp")
def _shard_group(s: Scenario):
    par = s.parallel
    if par.shard_group is None:
        return
    if par.zero == 0:
        yield Problem("parallel.shard_group", par.shard_group,
                      "needs zero >= 1 (it is the group ZeRO/FSDP shards over; HSDP = zero 3)")
    if (par.dp * par.cp) % par.shard_group:
        yield Problem("parallel.shard_group", par.shard_group,
                      f"must divide dp*cp = {par.dp * par.cp}")


@rule("global_batch", "training.global_batch is a multiple of micro_batch x dp, and gives each "
      "pipeline at least pp microbatches (1F1B-style schedules) or 2 x pp (DualPipeV)",
      "training.global_batch", "training.micro_batch", "parallel.dp", "parallel.pp",
      "parallel.pp_schedule")
def _global_batch(s: Scenario):
    par, tr = s.parallel, s.training
    per_step = tr.micro_batch * par.dp
    if tr.global_batch % per_step:
        yield Problem("training.global_batch", tr.global_batch,
                      f"must be a multiple of micro_batch*dp = {tr.micro_batch}*{par.dp} = "
                      f"{per_step}")
    elif par.pp > 1:
        need = min_microbatches(par.pp_schedule, par.pp)
        if s.microbatches < need:
            yield Problem("training.global_batch", tr.global_batch,
                          f"gives {s.microbatches} microbatches per pipeline "
                          f"(global_batch/(micro_batch*dp)); {par.pp_schedule} with "
                          f"pp={par.pp} needs at least {need}")


@rule("seq_split", "training.seq_len is divisible by tp with sequence parallelism and by 2 x cp "
      "with context parallelism (load-balanced ring attention chunks)",
      "training.seq_len", "parallel.tp", "parallel.sequence_parallel", "parallel.cp")
def _seq_split(s: Scenario):
    par, tr = s.parallel, s.training
    if par.sp and tr.seq_len % par.tp:
        yield Problem("training.seq_len", tr.seq_len,
                      f"must be divisible by tp = {par.tp} with sequence_parallel")
    if par.cp > 1 and tr.seq_len % (2 * par.cp):
        yield Problem("training.seq_len", tr.seq_len,
                      f"must be divisible by 2*cp = {2 * par.cp} (load-balanced ring attention "
                      "chunks)")


@rule("offload", "training.offload needs zero >= 1, and nvme needs hardware.storage.drives >= 1",
      "training.offload", "parallel.zero", "hardware.storage.drives")
def _offload(s: Scenario):
    tr = s.training
    if tr.offload != "none" and s.parallel.zero == 0:
        yield Problem("training.offload", tr.offload,
                      "needs zero >= 1 (ZeRO-Offload / FSDP2 CPUOffloadPolicy offload sharded "
                      "states)")
    if tr.offload == "nvme" and s.hardware.storage.drives == 0:
        yield Problem("training.offload", "nvme", "needs hardware.storage.drives >= 1")

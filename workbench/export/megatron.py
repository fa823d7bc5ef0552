"""Megatron-LM ``pretrain_gpt.py`` arguments for the scenario's layout, model and batch.

Every flag, its type and choices are from NVIDIA/Megatron-LM ``megatron/training/arguments.py``
at commit 000c4ac24f61159c138b0975def722c65245983c (the ``_add_*_args`` groups); what they must
satisfy from the same file's ``validate_args``. The file is not in any PyPI package
(megatron-core ships ``megatron/core`` only), so the tests check the export against the flag
definitions read from that commit, stored in tests/data/megatron_lm_pretrain_args.json.

Mapping (flag <- scenario field):
- ``--tensor-model-parallel-size`` <- tp, ``--sequence-parallel`` <- sequence_parallel (tp > 1),
  ``--pipeline-model-parallel-size`` <- pp, ``--num-virtual-stages-per-pipeline-rank`` <-
  virtual_stages (interleaved-1f1b), or ``--pipeline-model-parallel-layout`` when the layers do
  not split evenly (the estimator's split, first stages longer), ``--context-parallel-size`` <-
  cp (``--cp-comm-type p2p``: ring attention), ``--expert-model-parallel-size`` <- ep (expert
  TP defaults to TP, the workbench's expert split).
- ZeRO-1 -> ``--use-distributed-optimizer`` (HSDP shard groups: plus
  ``--num-distributed-optimizer-instances`` = dp*cp / shard_group); ZeRO-2/3 -> Megatron-FSDP
  (``--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads|optim_grads_params``,
  which validate_args requires with ``--ckpt-format fsdp_dtensor``).
- precision, recompute, optimizer, model shape, batch and sequence: see :func:`megatron_args`.

REFUSED (an :class:`ExportError` naming the field): what the megatron engine record says
Megatron-LM cannot run (workbench/engines/megatron.py, each limit cited there), asked through
the rule table (``scenario.rules.engine_problems``) as the validator and the planner ask it:
gpipe, zero-bubble and dualpipev schedules; ZeRO-2/3 with pp > 1 or with an HSDP shard group;
offload of gradients/parameters or to NVMe; fp16 with EP; TP + EP or async TP without sequence
parallelism; MXFP8 off Blackwell.

Engine switches (contract 1 additions), flags from the megatron engine record's ``flags``
(workbench/engines/megatron.py), checked against arguments.py at the commit above:
``parallel.tp_comm_overlap`` (or another engine's ``parallel.async_tp``) -> ``--tp-comm-overlap``
(tp > 1, with ``--sequence-parallel``);
``parallel.overlap_grad_reduce`` / ``overlap_param_gather`` -> ``--overlap-grad-reduce`` /
``--overlap-param-gather`` (null: on, the published recipes' setting);
``training.fp8_recipe`` -> ``--fp8-recipe`` (:data:`FP8_RECIPE`; null: no flag, Megatron's
default delayed); ``parallel.expert_tp`` -> ``--expert-tensor-parallel-size``. No Megatron
equivalent, so a header comment and a warning in the :class:`Exported` result: training.compile
(no torch.compile argument), recompute op (torchtitan's per-op SAC; exported as selective), and
a scenario estimated for another engine.
"""
from __future__ import annotations

from workbench.estimate.model.params import chunk_layers
from workbench.estimate.time.step_time import dp_overlap
from workbench.export.common import (
    Expand, Exported, Notes, Source, fp8_recipe, layout_summary, model_label,
    refuse_what_engine_cannot_run, shell_command,
    shell_word, spelling, train_samples,
)
from workbench.export.torchrun import MASTER_PORT, master_addr_line, nccl_env
from workbench.scenario.types import Scenario

TARGET = "Megatron-LM"
ENGINE = "megatron"   # the workbench.engines record whose switches this launch carries
MEGATRON_COMMIT = "000c4ac24f61159c138b0975def722c65245983c"

# training.fp8_recipe -> --fp8-recipe (arguments.py _add_transformer_engine_args choices
# tensorwise | delayed | mxfp8 | blockwise | custom). torchao's rowwise (per-row scales) has no
# Megatron recipe; blockwise (Transformer Engine Float8BlockScaling, 1x128 tiles) is the
# closest finer-than-tensor scaling, exported with a note.
FP8_RECIPE = {"tensorwise": "tensorwise", "delayed": "delayed", "mxfp8": "mxfp8",
              "rowwise": "blockwise"}

# training.attention -> --attention-backend (megatron/core/transformer/enums.py AttnBackend)
ATTENTION = {"flash2": "flash", "flash3": "flash", "cudnn": "fused", "eager": "unfused"}


def _notes(s: Scenario) -> Notes:
    """What the launch does not carry over (header comments and the result's warnings)."""
    par, tr = s.parallel, s.training
    n = Notes(s, ENGINE, TARGET)
    if par.async_tp and par.tp == 1:
        n.add("parallel.async_tp", True, "no tensor parallelism to overlap (tp = 1); "
              "--tp-comm-overlap not exported")
    if tr.compile:
        n.add("training.compile", True, "Megatron-LM has no torch.compile argument (its fused "
              "kernels come from Transformer Engine); not exported")
    if fp8_recipe(s) == "rowwise":
        n.add("training.fp8_recipe", "rowwise", "Megatron-LM has no rowwise scaling; exported "
              "--fp8-recipe blockwise (1x128 tiles), the closest")
    if tr.recompute == "layer":
        n.add("training.recompute", "layer", "Megatron-LM checkpoints whole layers only as the "
              "first N of each stage (--recompute-method block); exported with N = the stage's "
              f"layers / {tr.recompute_every}, the same number of recomputed blocks")
    if tr.recompute == "op":
        n.add("training.recompute", "op", "Megatron-LM has no per-op selective checkpointing; "
              "exported --recompute-granularity selective (core attention), which keeps more "
              "activations than torchtitan's op-level SAC")
    sd = tr.state_dtypes
    if sd is not None and sd.master in ("bf16", "none"):
        n.add("training.state_dtypes.master", sd.master, "a bf16 master or none is NeMo 1's "
              "Apex distributed Adam (optim.dtype bf16); Megatron-LM keeps an fp32 master "
              "(or fp16 with --main-params-dtype): not exported")
    elif sd is not None and sd.master == "fp32" and sd.moments != "fp32" \
            and tr.precision == "bf16":
        n.add("training.state_dtypes.master", "fp32", "Megatron-LM's precision-aware optimizer "
              "keeps the master as 16-bit remainders beside bf16 weights and has no flag for "
              "an fp32 one: exported as remainders")
    if par.expert_tp is not None and s.model.moe is None:
        n.add("parallel.expert_tp", par.expert_tp, "no effect on a dense model; not exported")
    return n


def _state_dtype_args(tr) -> list[str]:
    """training.state_dtypes as Megatron-LM's flags (engines/megatron.py cites them):
    --grad-reduce-in-bf16 for bf16 gradients; the precision-aware optimizer for a master kept as
    remainders or in fp16 and for 16-bit moments. A bf16 master or none is NeMo 1's Apex
    optimizer, which Megatron-LM has not (``_notes`` says so)."""
    sd = tr.state_dtypes
    if sd is None:
        return []
    out = ["--grad-reduce-in-bf16"] if sd.grads == "bf16" else []
    if sd.master in ("remainder", "fp16") or sd.moments != "fp32":
        out.append("--use-precision-aware-optimizer")
        if sd.master == "fp16":
            out += ["--main-params-dtype", "fp16"]
        if sd.moments != "fp32":
            out += ["--exp-avg-dtype", sd.moments, "--exp-avg-sq-dtype", sd.moments]
    return out


def _pipeline_layout(s: Scenario) -> str:
    """``--pipeline-model-parallel-layout``: E embedding, t a layer, L the loss, '|' between
    stages (pp x virtual stages of them), split as the estimator splits layers."""
    stages = s.parallel.pp * s.parallel.chunks_per_rank
    runs = chunk_layers(s.model.layers, stages)
    parts = ["t" * len(r) for r in runs]
    parts[0] = "E" + parts[0]
    parts[-1] += "L"
    return "|".join(parts)


def _vocab_divisor(vocab: int, tp: int) -> int:
    """``--make-vocab-size-divisible-by``: Megatron pads the vocab to a multiple of this x tp
    (tokenizer.py _vocab_size_with_padding). The largest power of two <= 128 (the default)
    that keeps the model's vocab unpadded; 128 when padding cannot be avoided."""
    for m in (128, 64, 32, 16, 8, 4, 2, 1):
        if vocab % (m * tp) == 0:
            return m
    return 128


def megatron_args(s: Scenario) -> list[str]:
    """The ``pretrain_gpt.py`` argument list; raises ExportError listing every field
    Megatron-LM cannot express."""
    refuse_what_engine_cannot_run(s, ENGINE, TARGET)
    par, tr, m = s.parallel, s.training, s.model
    a: list[str] = []

    def add(flag: str, *values: object) -> None:
        a.append(flag)
        a.extend(str(v) for v in values)

    # --- parallel layout (_add_distributed_args, _add_moe_args)
    add("--tensor-model-parallel-size", par.tp)
    if par.sp:
        add("--sequence-parallel")
    # TE userbuffers: TP collectives overlap GEMMs (tp > 1, SP); another engine's async TP
    # carries over as Megatron's own TP overlap
    if par.tp_comm_overlap or (par.async_tp and par.tp > 1):
        add(spelling(ENGINE, "tp_comm_overlap"))
    add("--pipeline-model-parallel-size", par.pp)
    if par.pp > 1:
        if m.layers % (par.pp * par.chunks_per_rank):
            # uneven split: the layout string also fixes the virtual stages (validate_args)
            add("--pipeline-model-parallel-layout", _pipeline_layout(s))
        elif par.chunks_per_rank > 1:
            add("--num-virtual-stages-per-pipeline-rank", par.chunks_per_rank)
    if par.cp > 1:
        add("--context-parallel-size", par.cp)
        add("--cp-comm-type", "p2p")   # ring attention, as the estimator and trials do
    if m.moe is not None:
        add("--num-experts", m.moe.experts)
        add("--moe-router-topk", m.moe.top_k)
        add("--moe-ffn-hidden-size", m.moe.expert_ffn_hidden)
        if m.moe.shared_experts:
            # total size of the shared experts (arguments.py help text)
            add("--moe-shared-expert-intermediate-size",
                m.moe.shared_experts * m.moe.expert_ffn_hidden)
        if m.moe.dense_layers:
            moe = m.layers - m.moe.dense_layers
            add("--moe-layer-freq", f"([0]*{m.moe.dense_layers}+[1]*{moe})")
        if m.moe.capacity_factor > 0:
            add("--moe-expert-capacity-factor", m.moe.capacity_factor)
        add("--moe-token-dispatcher-type", "alltoall")   # EP all-to-all, as the estimator
        add("--expert-model-parallel-size", par.ep)
        if par.expert_tp is not None:
            # MoE parallel folding; unset = --tensor-model-parallel-size (validate_args)
            add(spelling(ENGINE, "expert_tp"), par.expert_tp)

    # --- ZeRO (_add_distributed_args): Megatron's distributed optimizer is ZeRO-1
    if par.zero == 1:
        add("--use-distributed-optimizer")
        if par.shard_group:
            add("--num-distributed-optimizer-instances", par.dp * par.cp // par.shard_group)
    elif par.zero >= 2:
        strategy = "optim_grads" if par.zero == 2 else "optim_grads_params"
        # the Megatron-FSDP recipe (docs: features/custom_fsdp) and validate_args' ckpt rule
        add("--use-megatron-fsdp")
        add("--data-parallel-sharding-strategy", strategy)
        add("--use-distributed-optimizer")
        add("--no-gradient-accumulation-fusion")
        add("--ckpt-format", "fsdp_dtensor")
    # DP overlap as estimated (step_time.dp_overlap: the scenario's keys, else the record's)
    grad_overlap, gather_overlap = dp_overlap(s, par.zero)
    if grad_overlap:
        add(spelling(ENGINE, "overlap_grad_reduce"))
    if par.zero >= 1 and gather_overlap:   # validate_args: with the distributed optimizer
        add(spelling(ENGINE, "overlap_param_gather"))
    if tr.offload == "cpu":
        # the engine record allows this for ZeRO-1 only; validate_args requires the precision-aware path
        add("--optimizer-cpu-offload")
        add("--use-precision-aware-optimizer")

    # --- batch and sequence (_add_training_args, _add_data_args)
    add("--micro-batch-size", tr.micro_batch)
    add("--global-batch-size", tr.global_batch)
    add("--seq-length", tr.seq_len)
    add("--max-position-embeddings", max(tr.seq_len, m.max_seq_len,
                                         int(m.extra.get("position_embeddings", 0))))

    # --- model shape (_add_network_size_args, _add_regularization_args)
    add("--num-layers", m.layers)
    add("--hidden-size", m.hidden)
    add("--ffn-hidden-size", m.ffn_hidden)
    add("--num-attention-heads", m.heads)
    if m.head_dim:
        add("--kv-channels", m.head_dim)
    if m.mla:
        # multi-latent attention (_add_network_size_args --multi-latent-attention and
        # _add_mla_args at 000c4ac2): --qk-head-dim is the per-head width without RoPE
        # ("q_head_dim = qk_head_dim + qk_pos_emb_head_dim"); no --q-lora-rank = no query
        # compression
        add("--multi-latent-attention")
        if m.q_lora_rank:
            add("--q-lora-rank", m.q_lora_rank)
        add("--kv-lora-rank", m.kv_lora_rank)
        add("--qk-head-dim", m.qk_nope_head_dim)
        add("--qk-pos-emb-head-dim", m.qk_rope_head_dim)
        add("--v-head-dim", m.v_head_dim)
    elif m.kv_heads < m.heads:
        add("--group-query-attention")
        add("--num-query-groups", m.kv_heads)
    if m.mlp == "swiglu":
        add("--swiglu")
    add("--normalization", "RMSNorm" if m.norm == "rmsnorm" else "LayerNorm")
    if not m.tied_embeddings:
        add("--untie-embeddings-and-output-weights")
    if not m.bias:
        add("--disable-bias-linear")
    if "position_embeddings" in m.extra:
        add("--position-embedding-type", "learned_absolute")
    else:
        add("--position-embedding-type", "rope")
        add("--rotary-base", int(m.extra.get("rope_theta", 10000)))
    if not m.dropout:
        add("--attention-dropout", 0.0)
        add("--hidden-dropout", 0.0)
    add("--attention-backend", ATTENTION[tr.attention])

    # --- precision (_add_mixed_precision_args, _add_transformer_engine_args)
    if tr.precision in ("bf16", "fp8", "nvfp4"):   # the low-precision GEMMs inside bf16 training
        add("--bf16")
    elif tr.precision == "fp16":
        add("--fp16")
    if tr.precision == "fp8":
        add("--fp8-format", "hybrid")   # E4M3 forward, E5M2 gradients (Transformer Engine)
        if fp8_recipe(s):   # null under generic: no flag, Megatron's default (delayed)
            add(spelling(ENGINE, "fp8_recipe"), FP8_RECIPE[fp8_recipe(s)])
        for switch in ("fp8_param_gather", "fp8_attention"):   # training.<switch>: true
            if getattr(tr, switch):
                add(spelling(ENGINE, switch))
    a.extend(_state_dtype_args(tr))
    if tr.precision == "nvfp4":
        # TE's NVFP4BlockScaling in the transformer layers (megatron-core 0.16 megatron/core/
        # transformer/transformer_config.py:510 --fp4-format e2m1, :516 fp4_recipe 'nvfp4')
        add("--fp4-format", "e2m1")
        add("--fp4-recipe", "nvfp4")

    # --- recompute (_add_training_args): selective's default module is core_attn, which is
    # Korthikanti et al.'s selective recompute, the estimator's
    if tr.recompute == "full":
        add("--recompute-granularity", "full")
        add("--recompute-method", "uniform")
        add("--recompute-num-layers", 1)
    elif tr.recompute == "layer":
        stage_layers = m.layers // (par.pp * par.chunks_per_rank)
        add("--recompute-granularity", "full")
        add("--recompute-method", "block")
        add("--recompute-num-layers", max(1, stage_layers // tr.recompute_every))
    elif tr.recompute in ("selective", "op"):   # op: the closest, with a note (_notes)
        add("--recompute-granularity", "selective")
        if tr.recompute_modules:   # nargs="*": the modules, space-separated
            add("--recompute-modules", *tr.recompute_modules)

    # --- optimizer: Megatron's "adam" is AdamW (decoupled weight decay)
    add("--optimizer", "adam" if tr.optimizer == "adamw" else "sgd")

    # --- data, tokenizer and run length: mock data and a NullTokenizer, whose vocab is
    # --vocab-size + 1 (it adds an EOD id), so the model's vocab comes out exact
    add("--mock-data")
    add("--tokenizer-type", "NullTokenizer")
    add("--vocab-size", m.vocab - 1)
    add("--make-vocab-size-divisible-by", _vocab_divisor(m.vocab, par.tp))
    add("--train-samples", train_samples(s))

    # --- hyper-parameters the scenario does not fix (placeholders)
    add("--lr", 3e-4)
    add("--min-lr", 3e-5)
    add("--lr-decay-style", "cosine")
    add("--lr-warmup-fraction", 0.01)
    add("--weight-decay", 0.1)
    add("--clip-grad", 1.0)
    if tr.optimizer == "adamw":
        add("--adam-beta2", 0.95)
    return a


def to_megatron(s: Scenario, source: Source = Source()) -> Exported:
    """A bash launch of ``pretrain_gpt.py`` with the arguments (run from a Megatron-LM checkout
    on every node), with ``.warnings`` for what does not carry over (also comments);
    ``source`` is unused."""
    par, hw = s.parallel, s.hardware
    args = megatron_args(s)
    notes = _notes(s).items
    lines = ["#!/bin/bash",
             f"# Megatron-LM pretrain_gpt.py for {model_label(s)}, {layout_summary(s)}.",
             f"# Flags: NVIDIA/Megatron-LM megatron/training/arguments.py @ {MEGATRON_COMMIT}.",
             "# Run from a Megatron-LM checkout on every node; MASTER_ADDR is the first node.",
             *(f"# NOTE: {w}" for w in notes),
             "set -euo pipefail",
             master_addr_line(s)]
    if (par.tp > 1 or par.cp > 1) and par.zero < 2:
        # validate_args asserts this before Blackwell for TP/CP without FSDP: one hardware
        # queue keeps the TP/CP communication kernels ordered ahead of compute
        lines.append("export CUDA_DEVICE_MAX_CONNECTIONS=1  # required by validate_args "
                     "with TP/CP (pre-Blackwell)")
    lines += [e.line() for e in nccl_env(s)]
    lines.append("MEGATRON_ARGS=(")
    line: list[str] = []
    for word in args:   # one flag and its values a line
        if word.startswith("--") and line:
            lines.append("  " + " ".join(line))
            line = []
        line.append(shell_word(word))
    lines.append("  " + " ".join(line))
    lines.append(")")
    launch = ["torchrun", f"--nnodes={hw.nodes}", f"--nproc-per-node={hw.gpus_per_node}",
              "--rdzv-backend=c10d", Expand(f"--rdzv-endpoint=$MASTER_ADDR:{MASTER_PORT}"),
              "--rdzv-id=megatron", "pretrain_gpt.py"]
    lines.append(shell_command(launch) + ' "${MEGATRON_ARGS[@]}"')
    return Exported("\n".join(lines) + "\n", notes)

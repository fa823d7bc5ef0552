"""The cost model's memory pass: per (layout, pipeline rank) row, the parameters a rank holds,
its model states (``model_states``, with the fine-tuning method's conventions), activations at
the peak (``activations``, the schedule's microbatches in flight), the named buffers
(``buffers.buffer_terms``), the peak over the step's moments (``peak``), the allocator's
reserved bytes and nvidia-smi's device bytes (``memory.device.device_overhead``); and per
layout, the worst rank's figures and whether the layout fits the GPU, host memory and NVMe.

It reads nothing of the step-time model, so the planner runs it first over every valid layout
and the time pass (``time_pass``) only where the memory can fit. The terms no offload changes
(``shared_terms``) are computed once per recompute and each offload's figures from them
(``setting_memory``), the code ``memory`` itself runs: the planner's settings as columns.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.estimate.memory import activations as act
from workbench.estimate.model import finetune as ft
from workbench.estimate.model.params import norm_params
from workbench.estimate.memory import peak as pk
from workbench.estimate.memory.allocator import least_bytes, reserved_bytes
from workbench.estimate.memory.buffers import (
    ALLOCATOR_FRACTION, buffer_terms, compute_dtype_bytes, flat_param_grads, loss_moments,
    zero3_gathered,
)
from workbench.estimate.memory.device import device_overhead
from workbench.estimate.cost_model.rows import Rows, per_row
from workbench.estimate.memory.model_states import (
    bytes_per_param, fp8_gather_bytes, model_states, stage_dtype,
)
from workbench.engines import engine_of
from workbench.scenario.types import Scenario
from workbench.units import TB, capacity_bytes, hbm_bytes

# ZeRO-Infinity's NVMe staging: DeepSpeed's default offload_param/offload_optimizer
# buffer_count 5 x buffer_size 1e8 elements, in the 2-byte compute dtype, pinned in host memory.
NVME_STAGING_BYTES_PER_GPU = 5 * 100_000_000 * 2


@dataclass
class FineTuneStates:
    """What the method changes in one row's model states: the trained (dense, expert)
    parameters, ``model_states``' keyword arguments, ``buffer_terms``' and the largest
    gradient one tensor has."""

    trained: tuple
    kwargs: dict
    buffer_kwargs: dict
    largest_grad: object


def finetune_states(base: Scenario, rows: Rows, pdense, pexpert, head_params_r
                    ) -> FineTuneStates:
    """The method's model-state conventions per row (``estimate/model/finetune.py``): which
    parameters train, the frozen ones' stored bytes, the state dtype of the engine (adapters:
    the engine's adapter dtype), Adafactor's typical matrix, and whether a paged optimizer's
    states are in managed memory (bitsandbytes pages a state of >= 1e5 elements:
    optim/optimizer.py ``get_state_buffer`` L383-389 @ 95f9af30)."""
    m, tr, col = base.model, base.training, rows.col
    nm = rows.moe
    eng = engine_of(tr)
    cd = compute_dtype_bytes(tr.precision)
    head_trained = rows.head_col("head_trained")
    tdense = (rows.layer_sum("tdense") + rows.on_embedding("emb_trained")
              + rows.has_head * head_trained)
    texpert = nm * col("moe", "texpert")
    qd = rows.layer_sum("qdense")
    if tr.method == "qlora" and quantized_head(base):   # its matrix, not the final norm
        qd = qd + rows.has_head * (head_params_r - norm_params(m))
    qe = nm * col("moe", "qexpert")
    qb = ft.quantized_bytes_per_param(tr, m) if tr.method == "qlora" else cd
    frozen = ((pdense - tdense - qd) * cd + qd * qb, (pexpert - texpert - qe) * cd + qe * qb)
    # the engine's state dtype (a tuple where it differs by ZeRO stage: model_states.stage_dtype)
    state_dtype = eng.state_dtype_by_zero or eng.state_dtype
    if tr.state_dtypes is not None:   # the scenario's own (engine megatron)
        state_dtype = tr.state_dtypes
    if tr.adapters and eng.adapter_dtype == "fp32":
        state_dtype = "fp32"
    typical = (tr.lora.rank, m.hidden) if tr.adapters else (m.hidden, m.hidden)
    kwargs = {"trained": (tdense, texpert), "frozen_bytes": frozen, "state_dtype": state_dtype,
              "factored": typical,
              "paged": tr.optimizer == "paged_adamw8bit" and typical[0] * typical[1] >= 1e5}
    # the FSDP buffers below are ZeRO-3's: the stage-3 state dtype
    sd3 = stage_dtype(state_dtype, 3)
    grad_b = bytes_per_param(tr.precision, tr.optimizer, 3, sd3).grads
    buffer_kwargs = {}
    if tr.method != "pretrain" or sd3 != "mixed":
        held = np.maximum(pdense + pexpert, 1)
        buffer_kwargs = {"gather_bytes": (frozen[0] + frozen[1] + (tdense + texpert) * cd)
                         / held,
                         "grad_share": (tdense + texpert) / held,
                         "grad_bytes": cd + 4 if sd3 == "mixed" else grad_b}
    embedding = np.where(rows.has_emb & (col("emb_trained") > 0), col("emb_params"), 0)
    head = np.where(rows.has_head & (head_trained > 0), head_params_r, 0)
    largest = np.maximum(embedding, head)
    # the largest linear's gradient, or an adapter's larger factor
    largest = np.maximum(largest, tr.lora.rank * m.hidden if tr.adapters
                         else ft.largest_linear(m, 1) / rows.grid.tp)
    return FineTuneStates((tdense, texpert), kwargs, buffer_kwargs,
                           largest * (grad_b if sd3 != "mixed" else 4))


def quantized_head(base: Scenario) -> bool:
    """Whether QLoRA stores the output head quantized (``Engine.qlora_head``; an untied head that
    does not train)."""
    tr = base.training
    return bool(engine_of(tr).qlora_head and not base.model.tied_embeddings
                and not ft.edge_trainable(tr, "head"))


def held_params(rows: Rows) -> tuple:
    """Per row: the (dense, expert) parameters the rank holds and the head's parameters (the
    head on its own stage or beside the last layers)."""
    head_params_r = rows.head_col("head_params")
    pdense = (rows.layer_sum("pdense") + rows.on_embedding("emb_params")
              + rows.has_head * head_params_r)
    pexpert = rows.moe * rows.col("moe", "pexpert")
    return pdense, pexpert, head_params_r


def states_on_device(base: Scenario, rows: Rows, pdense, pexpert, fts: FineTuneStates,
                     offload: str):
    """Per row: the model states (``model_states``) under ``offload``."""
    tr, G = base.training, rows.grid
    return model_states(pdense, pexpert, tr.precision, tr.optimizer, G.zero, G.dense_shard,
                        G.expert_shard, offload, **fts.kwargs)


def saved_activations(base: Scenario, rows: Rows) -> tuple:
    """Per row: (the activations on the GPU at the peak, those offloaded to host memory, the
    microbatches in flight per chunk, one microbatch's activations through every chunk of the
    rank) under ``base``'s recompute (the rows bound to its block data)."""
    tr, G = base.training, rows.grid
    sched, p, cpr, mbs = G.schedule, G.pp, G.chunks_per_rank, rows.microbatches
    inflight = sched.inflight(p, mbs, cpr, rows.rank)
    layer_act = rows.layer_sum("act")
    emb_act, head_act = rows.on_embedding("emb_act"), rows.on_head("head_act")
    # one microbatch through every chunk of the rank, embedding and head included
    one_microbatch = layer_act + emb_act + head_act
    activ = layer_act * inflight / cpr
    activ = activ + emb_act * sched.inflight_first_chunk(p, mbs)
    activ = activ + head_act * sched.inflight_last_chunk(p, mbs)
    if tr.recompute in ("full", "op", "layer"):
        activ = activ + rows.layer_max("ws")
    host_activations = 0.0
    if tr.activation_offload:
        # torchtune's OffloadActivations (training/_activation_offloading.py @ v0.6.1) copies
        # each saved tensor to pinned host memory on a side stream and brings it back ahead of
        # its backward; the output head's stay on the GPU (NoOpManager), and a stash of recent
        # tensors until their copies finish: on the GPU, the head's and about two layers' sets
        # (the one being offloaded in forward, the one prefetched in backward).
        kept = np.minimum(activ, 2 * rows.layer_max("act") + head_act)
        host_activations = activ - kept
        activ = kept
    return activ, host_activations, inflight / cpr, one_microbatch


@dataclass
class Shared:
    """What a row's memory holds that offload does not change, under one recompute (the rows
    bound to its block data): the parameters held, the method's states, the activations
    (``saved_activations``), the named buffers and the loss's forward bytes on the rows with
    the head (``buffers.loss_moments``)."""

    pdense: np.ndarray
    pexpert: np.ndarray
    fts: FineTuneStates
    activations: tuple
    bufs: dict
    loss_forward: np.ndarray


def time_inputs(pdense, pexpert, fts: FineTuneStates, offloaded_activations, params_far,
                n: int) -> dict:
    """What the time pass reads of the memory pass, per row of ``n``: the parameters held and
    trained, the method's states, the activations offloaded to host memory, ZeRO-3's
    parameter shard in host memory or on NVMe (``ModelStates.params_far``)."""
    return {"dense_params": pdense, "expert_params": pexpert,
            "trained_dense": fts.trained[0], "trained_expert": fts.trained[1],
            "params_far": per_row(params_far, n),
            "offloaded_activations": per_row(offloaded_activations, n),
            "_finetune": fts}


def shared_terms(base: Scenario, rows: Rows) -> Shared:
    """The ``Shared`` terms of ``rows`` under ``base``'s recompute (its offload unread)."""
    m, tr, G = base.model, base.training, rows.grid
    col, nd, nm = rows.col, rows.dense, rows.moe
    pdense, pexpert, head_params_r = held_params(rows)
    stage_params = pdense + pexpert
    # the largest FSDP unit: a layer (of the kinds the rank holds), the embedding or the head
    unit = np.where(nd > 0, col("dense", "pdense") + col("dense", "pexpert"), 0)
    if rows.layers_total > rows.dense_total:
        unit = np.maximum(unit, np.where(nm > 0, col("moe", "pdense") + col("moe", "pexpert"),
                                         0))
    unit = np.maximum(np.maximum(unit, rows.on_embedding("emb_params")),
                      rows.has_head * head_params_r)
    eng = engine_of(tr)
    cd = compute_dtype_bytes(tr.precision)
    fts = finetune_states(base, rows, pdense, pexpert, head_params_r)
    x = act.with_fields(rows.per[0]["x"], s=tr.seq_len // G.cp, b=G.micro_batch, t=G.tp,
                        et=base.parallel.expert_tp or 0, sp=G.sp)
    loss_kwargs = {"logits_kept": eng.logits_kept_in_backward,
                   "vocab_split": not eng.tp_gathers_logits,
                   "head_trains": ft.edge_trainable(tr, "head"),
                   "loss_style": {"compiled": bool(tr.compile and eng.loss_compiled),
                                  "vocab_parallel": eng.loss_vocab_parallel,
                                  "shift_copy": eng.loss_shift_copy,
                                  "output_fp32": eng.output_fp32}}
    gathered = dict(fts.buffer_kwargs)
    if tr.precision == "fp8" and tr.fp8_param_gather:   # the gathered linear weights in FP8
        gathered["gather_bytes"] = fp8_gather_bytes(
            m, gathered.get("gather_bytes"), nd, nm, stage_params, cd, G)
    # the loss's (forward, backward) bytes: the forward's for the moments (``_phases``), the
    # backward's a named buffer
    loss = loss_moments(m, x, G.tp, eng.loss, cd, **{
        k: v for k, v in loss_kwargs.items() if k != "loss_style"}, **loss_kwargs["loss_style"])
    if eng.zero3_live_parameters is not None:
        # DeepSpeed's per-parameter fetching; its gradients reduce in the compute dtype
        gathered["zero3_live"] = zero3_gathered(stage_params, unit, ft.largest_linear(m, G.tp),
                                              eng.zero3_live_parameters)
        gathered.setdefault("grad_bytes", cd)
    bufs = buffer_terms(m, G, x, tr.precision, stage_params, unit, rows.has_head, nm > 0,
                        eng.loss, **gathered, **loss_kwargs, loss_bytes=loss)
    if tr.method == "qlora":
        # bitsandbytes dequantises one linear's weight at a time into a compute-dtype tensor
        # (MatMul4Bit forward and backward: F.dequantize_4bit(B, state)); where the head is
        # quantized too (``Engine.qlora_head``), its weight is the largest, dequantized at the
        # start of the backward with every activation alive
        largest = ft.largest_linear(m, G.tp)
        if quantized_head(base):
            largest = np.maximum(largest, np.where(rows.has_head,
                                                   head_params_r - norm_params(m), 0))
        bufs["dequantized_weight"] = np.asarray(largest * (eng.qlora_dequant_bytes or cd))
    if eng.fsdp1_flat_params and tr.method == "lora":
        # frozen weights share the blocks' flat parameters with the adapters (a quantized
        # base is no flat parameter of FSDP1's: QLoRA is left out)
        block_frozen = (rows.layer_sum("pdense") - rows.layer_sum("tdense")
                        + nm * (col("moe", "pexpert") - col("moe", "texpert")))
        block = np.maximum(np.where(nd > 0, col("dense", "pdense") - col("dense", "tdense"), 0),
                           np.where(nm > 0, col("moe", "pdense") + col("moe", "pexpert")
                                    - col("moe", "tdense") - col("moe", "texpert"), 0)
                           if rows.layers_total > rows.dense_total else 0)
        root = rows.on_embedding("emb_params") + rows.has_head * head_params_r
        fsdp = (np.asarray(G.zero) == 3) & (np.asarray(G.dense_shard) > 1)
        bufs.update(flat_param_grads(fsdp, block_frozen, block, root, G.dense_shard,
                                     rows.microbatches > 1, cd,
                                     gathered.get("gather_bytes", cd)))
    if tr.optimizer_in_backward:
        # each parameter steps from its gradient hook and frees the gradient: one tensor's
        # gradient alive instead of all (torchtune optimizer_in_bwd)
        bufs["in_backward_gradient"] = np.asarray(fts.largest_grad)
    if eng.unsharded_grad_bytes:
        bufs["engine_grad_buffer"] = eng.unsharded_grad_bytes * stage_params
    if eng.dp_bucket_bytes:
        bufs["dp_buckets"] = np.where(G.dp * G.cp > 1, eng.dp_bucket_bytes, 0.0)
    if any(eng.lp_grad_bytes_by_zero):
        # the engine's 16-bit .grad of every trained parameter beside the table's gradients
        bufs["lp_grads"] = np.choose(np.clip(np.asarray(G.zero), 0, 3),
                                     eng.lp_grad_bytes_by_zero) * (fts.trained[0]
                                                                   + fts.trained[1])
    bufs = {k: rows.full(v) for k, v in bufs.items()}
    return Shared(pdense, pexpert, fts, saved_activations(base, rows), bufs,
                  np.where(rows.has_head, loss[0], 0.0))


def _parts(base: Scenario, rows: Rows, sh: Shared, ms) -> tuple:
    """The gradients alive, the named buffers (with the allocator's allowance where the
    engine counts it in the total), and the bytes alive at each moment of the step by
    category (``_phases``), for the model states ``ms``."""
    grads = ms.grads * 0 if base.training.optimizer_in_backward else ms.grads
    parts = _phases(base, rows, ms, grads, sh.activations[0], sh.bufs, sh.loss_forward,
                    sh.fts.trained)
    bufs = dict(sh.bufs)
    if engine_of(base.training).allowance_in_total:
        bufs["allocator_allowance"] = ALLOCATOR_FRACTION * pk.peak_bytes(pk.phase_totals(parts))
        for moment in parts.values():
            moment["buffers"] = moment["buffers"] + bufs["allocator_allowance"]
    return grads, bufs, parts


# what the moments of the step read of the model states (``_phases``)
DEVICE_STATES = ("params", "grads", "optimizer")


def _totals(base: Scenario, rows: Rows, sh: Shared, offload: str, overhead=None,
            moment: bool = True, known: tuple = ()) -> dict:
    """Per row under ``offload`` and the recompute of ``sh``: the model states, the
    gradients, buffers and moments of ``_parts``, the peak and its moment, the allocator's
    reserved bytes, nvidia-smi's device bytes, and what offload puts in host memory and on
    NVMe. ``known``: other offloads' totals of the same rows; where one holds the same states
    on the device (CPU and NVMe offload move the same ones), its moments are these."""
    tr, G = base.training, rows.grid
    ms = states_on_device(base, rows, sh.pdense, sh.pexpert, sh.fts, offload)
    same = next((t for t in known if all(np.array_equal(getattr(t["ms"], f), getattr(ms, f))
                                         for f in DEVICE_STATES)), None)
    if same is not None:
        out = dict(same)
    else:
        grads, bufs, parts = _parts(base, rows, sh, ms)
        phases = pk.phase_totals(parts)
        # the moment of the peak only where the report reads it
        peak, at = pk.peak_of(phases) if moment else (pk.peak_bytes(phases), None)
        reserved = reserved_bytes(engine_of(tr), phases, parts, grads, G.zero)
        if overhead is None:
            overhead = device_overhead(base.hardware, rows.layouts)
        # nvidia-smi's view: the same context and communicators on every rank of a layout
        device = reserved + per_row(overhead, len(rows.layouts))[rows.layout_of]
        out = {"grads": grads, "bufs": bufs, "parts": parts, "phases": phases,
               "total": peak, "peak_phase": at, "reserved": reserved, "device": device,
               "device_least": least_bytes(peak, reserved, device)}
    out.update(ms=ms, nvme=ms.nvme, host=ms.host + sh.activations[1]
               + (NVME_STAGING_BYTES_PER_GPU if offload == "nvme" else 0.0))
    return out


def setting_memory(base: Scenario, rows: Rows, sh: Shared, offloads: list[str], overhead
                   ) -> dict:
    """Per offload of ``offloads``: the layout figures of ``layout_memory`` (worst rank,
    fits; no breakdown) under it and the recompute of ``sh``, and per row ZeRO-3's
    parameter shard off the GPU (``ModelStates.params_far``, which the time pass reads), from
    terms computed once per recompute (``base``: any scenario of that recompute; its offload
    unread): the planner's memory of every (recompute, offload) setting as columns over the
    same rows."""
    known: list[dict] = []
    out = {}
    for offload in offloads:
        t = _totals(base, rows, sh, offload, overhead, moment=False, known=tuple(known))
        known.append(t)
        out[offload] = (layout_memory(base, rows, t, detail=False),
                        rows.full(t["ms"].params_far))
    return out


def memory(base: Scenario, rows: Rows, detail: bool = True) -> tuple[dict, dict]:
    """Per row: parameters held, model states, activations at the peak, named buffers, total,
    the allocator's reserved bytes and nvidia-smi's device bytes, and what offload puts in
    host memory and on NVMe; and the named buffers. ``detail``: also what each category holds at the peak (the report's; a search reads the
    totals only)."""
    tr = base.training
    sh = shared_terms(base, rows)
    pdense, pexpert, fts = sh.pdense, sh.pexpert, sh.fts
    activ, host_activations, inflight, one_microbatch = sh.activations
    t = _totals(base, rows, sh, tr.offload)
    ms, grads, bufs, parts, phases, peak, at = (t[k] for k in (
        "ms", "grads", "bufs", "parts", "phases", "total", "peak_phase"))
    buffers = sum(bufs.values())
    out = {"inflight_microbatches": inflight, **time_inputs(pdense, pexpert, fts, host_activations,
                                                          ms.params_far, rows.n),
           "params": ms.params, "grads": grads,
           "optimizer": ms.optimizer, "activations": activ,
           "activations_one_microbatch": one_microbatch, "buffers": buffers,
           "total": peak, "peak_phase": at,
           **{f"phase_{name}": rows.full(v) for name, v in phases.items()},
           **({f"at_peak_{c}": rows.full(v)
               for c, v in pk.at_peak(parts, at).items()} if detail else {}),
           "reserved": t["reserved"], "host": t["host"], "nvme": ms.nvme,
           "params_frozen": rows.full(ms.params_frozen),
           "paged": rows.full(ms.paged), "device": t["device"],
           "device_least": t["device_least"]}
    return out, bufs


def layout_memory(base: Scenario, rows: Rows, mem: dict, detail: bool = True) -> dict:
    """Per layout: the worst rank's memory (the peak allocated, the allocator's reserved bytes,
    nvidia-smi's device bytes), host memory and NVMe per node, whether the device bytes fit
    the GPU and the offload fits the node (``host_fits``), and (``detail``) the worst rank."""
    hw = base.hardware
    gpn = hw.gpus_per_node
    total, reserved, device, least, host, nvme = (rows.worst(mem[k]) for k in (
        "total", "reserved", "device", "device_least", "host", "nvme"))
    host_node, nvme_node = gpn * host, gpn * nvme
    return {"memory_per_gpu": total,
            "host_fits": ((host_node <= capacity_bytes(hw.host.memory_gb))
                          & (nvme_node <= hw.storage.drives * hw.storage.drive.capacity_tb
                             * TB)),
            "fits": device <= hbm_bytes(hw.gpu.memory_gb),
            "reserved_per_gpu": reserved, "device_per_gpu": device,
            "device_least_per_gpu": least,
            "host_per_node": host_node, "nvme_per_node": nvme_node,
            **({"worst_memory_rank": rows.argworst(mem["total"], total)} if detail else {})}


def _phases(base: Scenario, rows: Rows, ms, grads, activ, bufs: dict, loss_forward,
            trained_params: tuple) -> dict:
    """Per row: the bytes alive at each moment of the step by category (``peak.phase_parts``);
    ``trained_params``: the (dense, expert) parameters that train, whose gradients ``grads``
    holds (the head's share of them is made first in the backward); ``loss_forward``: the
    loss's forward bytes on the rows with the head."""
    G = rows.grid
    early = pk.grads_before_backward(engine_of(base.training), G.zero, rows.microbatches, G.pp)
    trained = np.asarray(trained_params[0] + trained_params[1], dtype=float)
    share = rows.has_head * rows.head_col("head_trained") / np.maximum(trained, 1)
    return pk.phase_parts(ms.params, grads, ms.optimizer, activ, bufs, early,
                          grads * share, rows.on_head("head_act"), loss_forward)

"""The estimate as text for the terminal: the verdict first, then the tables (memory in GiB =
2^30 bytes, storage in GB/TB = 1e9/1e12 bytes; durations, token counts and memory through the
one formatter, workbench/units.py)."""
from __future__ import annotations

from workbench.estimate.memory.records import MEMORY_KINDS
from workbench.estimate.result import Estimate
from workbench.units import (GB, GiB, MiB, duration_text, memory_text, money_text,
                             percent_text, tokens_text)

_ROWS = ("params", "grads", "optimizer", "activations", "buffers", "total")


def verdict_lines(v) -> list[str]:
    """The verdict as the CLI prints it: ``VERDICT: <sentence>``, one line per part (its
    status and sentence), then the next steps when it fails."""
    lines = [f"VERDICT: {v.says}"]
    lines += [f"  [{p.status.upper():4}] {p.name}: {p.says}" for p in v.parts]
    if v.next:
        lines.append("next steps" + (f" (searched in {duration_text(v.search_s)})"
                                     if v.searched else "") + ":")
        lines += [f"  - {n.says}" for n in v.next]
    if v.unsearched:
        lines.append("not searched in the estimate's time: " + "; ".join(v.unsearched))
    if any("[quick search:" in n.says for n in v.next):
        lines.append("a quick search is narrowed to answer in time; `workbench plan` searches "
                     "every layout")
    return lines


def render_estimate(est: Estimate, verdict=None) -> str:
    """The verdict (``verdict``, default ``est.verdict``), then per-GPU memory of every
    pipeline rank, the worst GPU, capacity and offload use, step time and run, build
    checks."""
    s, m = est.scenario, est.memory
    p, t, hw = s.parallel, s.training, s.hardware
    v = verdict or est.verdict
    lines = [
        *verdict_lines(v),
        "",
        f"{s.model.name} on {hw.nodes} x {hw.gpus_per_node} x {hw.gpu.name} "
        f"({hw.world} GPUs, {hw.gpu.memory_gb:g} GiB each)",
        f"layout: dp={p.dp} zero={p.zero}{f' shard_group={p.shard_group}' if p.shard_group else ''}"
        f" tp={p.tp}{' +sp' if p.sp else ''} pp={p.pp}"
        f"{f' ({p.pp_schedule}, {p.chunks_per_rank} chunk/rank)' if p.pp > 1 else ''}"
        f" cp={p.cp} ep={p.ep}",
        f"training: seq {t.seq_len}, micro-batch {t.micro_batch}, global batch {t.global_batch} "
        f"({s.microbatches} microbatches/step), {t.precision}, recompute {t.recompute}, "
        f"{t.optimizer}, offload {t.offload}",
        f"engine: {engine_text(s)}",
        "",
    ]
    unit, scale = ("GiB (2^30 bytes)", GiB) if m.per_gpu.total >= GiB else ("MiB (2^20 bytes)",
                                                                              MiB)
    lines.append(f"memory per GPU, {unit}")
    shown = m.per_stage if len(m.per_stage) <= 8 else [m.per_stage[0], m.worst, m.per_stage[-1]]
    shown = list({g.rank: g for g in shown}.values())
    head = f"{'':14}" + "".join(f"{'pp rank ' + str(g.rank):>11}" for g in shown)
    lines.append(head)
    for row in _ROWS:
        lines.append(f"{row:14}" + "".join(f"{g.memory.as_dict()[row] / scale:>11,.2f}" for g in shown))
    w = m.per_gpu
    fits = {"pass": "fits", "tight": "TIGHT (within the memory band)",
            "fail": "DOES NOT FIT"}[m.gpu_fit]
    lines += [
        f"{'reserved':14}" + "".join(f"{g.memory.reserved / scale:>11,.2f}" for g in shown),
        f"{'device':14}" + "".join(f"{g.memory.device / scale:>11,.2f}" for g in shown),
        f"{'device least':14}" + "".join(f"{g.memory.device_least / scale:>11,.2f}"
                                         for g in shown),
        *(f"  {k} = {v}" for k, v in MEMORY_KINDS.items()),
        *([f"phases of the worst GPU's step (allocated, {unit.split()[0]}): "
           + ", ".join(f"{k} {v / scale:,.2f}" for k, v in w.phases.items())
           + f"; the peak is the {w.peak_phase}"] if w.phases else []),
        "",
        f"worst GPU: pipeline rank {m.worst.rank}, {memory_text(w.device)} on the device "
        f"({memory_text(w.total)} allocated) of "
        f"{memory_text(m.capacity)} (a \"{hw.gpu.memory_gb:g} GB\" GPU) -> {fits} "
        f"({'+' if m.capacity >= w.device else '-'}"
        f"{memory_text(abs(m.capacity - w.device), 2)} headroom)",
    ]
    if t.offload != "none":
        lines.append(f"offload per node: host {memory_text(m.host_per_node)} of "
                     f"{memory_text(m.host_capacity_per_node, 0)}; NVMe "
                     f"{m.nvme_per_node / GB:,.1f} GB of {m.nvme_capacity_per_node / GB:,.0f} GB")
    lines += ["", *_time_lines(est), "", "build checks (one node):"]
    lines += [f"  [{c.status.upper():4}] {c.name}: {c.reason}" for c in est.checks]
    if not est.checks:
        lines.append("  none: a calibrated machine exists already (power is not measured)")
    for msg in est.warnings:
        lines.append(f"warning: {msg}")
    for msg in est.assumptions:
        lines.append(f"assumed: {msg}")
    return "\n".join(lines)


def engine_text(s) -> str:
    """The engine and the switches in force, in words."""
    tr, par = s.training, s.parallel
    on = [name for name, val in (("torch.compile", tr.compile), ("async TP", par.async_tp))
          if val]
    if tr.precision == "fp8":
        on.append(f"FP8 {tr.fp8_recipe or 'engine default'} scaling")
    elif tr.precision == "nvfp4":
        on.append("NVFP4 (Transformer Engine NVFP4BlockScaling)")
    if par.expert_tp:
        on.append(f"expert TP {par.expert_tp}")
    return tr.engine + (f" ({', '.join(on)})" if on else "") + f", attention {tr.attention}"


_REGIME_WORDS = {"dense": "dense", "moe": "MoE", "fine-tuning": "fine-tuning"}


def band_group_words(group: str) -> str:
    """A band's group in words: "megatron/moe" -> "megatron MoE", "all" -> "" (every run)."""
    return " ".join(_REGIME_WORDS.get(p, p) for p in group.split("/") if p != "all")


def band_text(est: Estimate) -> str:
    """The step-time error measured on published runs like this estimate's, in words: "(typical
    error: half of 157 published megatron dense runs within 13%, nine in ten within 35%;
    in-sample)"."""
    b = est.error_band
    if not b:
        return "(no measured runs to say its error)"
    runs = " ".join(w for w in (f"{b['runs']} published", band_group_words(b["group"]), "runs")
                    if w)
    return (f"(typical error: half of {runs} within {b['median']:.0%}, nine in ten within "
            f"{b['p90']:.0%}; {b['kind']})")


# The widgets and notebooks import it by this name: the shared formatter of workbench/units.py.
human_duration = duration_text


def _time_lines(est: Estimate) -> list[str]:
    t, r, tr = est.time, est.run, est.scenario.training
    comm = ", ".join(f"{k} {v:.3f}" for k, v in t.comm_exposed.items() if v > 0) or "none"
    lines = [
        f"step time {t.step:,.3f} s ({duration_text(t.step)}) {band_text(est)}",
        f"  = compute {t.compute:,.3f} + recompute {t.recompute:,.3f} "
        f"+ bubble {t.bubble:,.3f} + exposed comm ({comm}) + optimizer {t.optimizer:,.3f}"
        f" + offload {t.offload:,.3f}",
        f"throughput {r.tokens_per_s:,.0f} tokens/s ({r.tokens_per_s_per_gpu:,.0f} per GPU), "
        f"{r.model_tflops_per_gpu:,.0f} model TFLOP/s per GPU, MFU {percent_text(r.mfu, 1)}, "
        f"HFU {percent_text(r.hfu, 1)}",
        f"run: {tokens_text(tr.tokens)} in {duration_text(r.time_to_train_s)}; average power "
        f"{r.power_w / 1000:,.1f} kW; energy {r.energy_kwh:,.0f} kWh",
    ]
    if r.cost:
        lines.append(f"cost ({est.scenario.hardware.world * r.time_to_train_s / 3600:,.0f} "
                     "GPU-hours): " + ", ".join(f"{k} {v:,.0f}" for k, v in r.cost.items())
                     + " (currency units)")
    return lines


def settings_text(counts: dict) -> str:
    """' (over 5 engine/switch settings)' when a plan searched more than one setting (its
    candidate and valid counts then count each layout once per setting)."""
    k = counts.get("settings", 1)
    return f" (over {k} engine/switch settings)" if k > 1 else ""


def table_text(columns: dict[str, object], rows: int) -> str:
    """The first ``rows`` entries of column arrays as a plain text table: one header line,
    cells right-aligned, floats with three decimals and thousands separators."""
    def cell(v) -> str:
        if isinstance(v, float) or (hasattr(v, "dtype") and v.dtype.kind == "f"):
            return f"{float(v):,.3f}"
        return str(v.item() if hasattr(v, "item") else v)

    cells = {name: [cell(v) for v in list(col)[:rows]] for name, col in columns.items()}
    widths = {name: max([len(name), *map(len, vals)]) for name, vals in cells.items()}
    lines = [" ".join(name.rjust(widths[name]) for name in cells)]
    lines += [" ".join(cells[name][i].rjust(widths[name]) for name in cells)
              for i in range(min(rows, *(len(v) for v in cells.values())))]
    return "\n".join(lines)

"""Render a memory estimate as an HTML table (per pipeline rank, GiB = 2^30 bytes)."""
from __future__ import annotations

import html

from widgets.charts.labels import band_words
from workbench.estimate.result import Estimate
from workbench.render.text import human_duration
from workbench.units import GiB, MiB, memory_text, tokens_text

# (label, the bytes of one GPUMemory), top to bottom; the weights split into frozen and
# trainable where some GPU holds frozen weights (LoRA/QLoRA), the paged optimizer states
# (bitsandbytes; outside the allocator, so not in the total) only where there are some
ROWS = (("params", lambda g: g.params), ("grads", lambda g: g.grads),
        ("optimizer", lambda g: g.optimizer), ("activations", lambda g: g.activations),
        ("buffers", lambda g: g.buffers), ("total", lambda g: g.total))
SPLIT = (("weights (frozen)", lambda g: g.params_frozen),
         ("weights (trainable)", lambda g: g.params_trainable))
PAGED = ("optimizer (paged, not in the total)", lambda g: g.paged)
# below the components: the allocator's peak reserved and what the device shows (nvidia-smi)
EXTRA = (("reserved", "reserved (torch.cuda.max_memory_reserved)"),
         ("device", "device (nvidia-smi, DCGM)"))


def memory_table_html(est: Estimate) -> str:
    """A table of per-GPU memory by component for each pipeline rank, plus the verdict."""
    m = est.memory
    scale, unit = (GiB, "GiB") if m.per_gpu.total >= GiB else (MiB, "MiB")
    cols = m.per_stage
    head = "".join(f"<th>pp rank {g.rank}</th>" for g in cols)
    body = []
    rows: list = []
    for row in ROWS:
        if row[0] == "params" and any(g.memory.params_frozen > 0 for g in cols):
            rows += SPLIT
            continue
        rows.append(row)
        if row[0] == "optimizer" and any(g.memory.paged > 0 for g in cols):
            rows.append(PAGED)
    for row, part in rows:
        cells = "".join(f"<td style='text-align:right'>{part(g.memory) / scale:,.2f}</td>"
                        for g in cols)
        style = " style='font-weight:bold'" if row == "total" else ""
        label = "total (allocated)" if row == "total" else row
        body.append(f"<tr{style}><td>{label}</td>{cells}</tr>")
    for key, label in EXTRA:
        cells = "".join(f"<td style='text-align:right'>{getattr(g.memory, key) / scale:,.2f}</td>"
                        for g in cols)
        body.append(f"<tr><td>{label}</td>{cells}</tr>")
    verdict = m.fit_words
    color = "#1a7f37" if m.fits else "#cf222e"
    summary = (f"<p class='wb-verdict' style='color:{color}'>Worst GPU (pipeline rank "
               f"{m.worst.rank}): {memory_text(m.per_gpu.device)} on the device "
               f"({memory_text(m.per_gpu.total)} allocated) of {memory_text(m.capacity)} "
               f"&rarr; <b>{verdict}</b></p>")
    t, r = est.time, est.run
    timing = (f"<p class='wb-time'>Step {t.step:,.2f} s ({html.escape(band_words(est))}) "
              f"&middot; {r.tokens_per_s:,.0f} tokens/s "
              f"&middot; MFU {r.mfu:.0%} &middot; {tokens_text(est.scenario.training.tokens)} in "
              f"{html.escape(human_duration(r.time_to_train_s))} &middot; "
              f"{r.power_w / 1000:,.1f} kW, {r.energy_kwh:,.0f} kWh</p>")
    checks = "".join(f"<li class='wb-check-{c.status}'>{c.status.upper()} {html.escape(c.name)}: "
                     f"{html.escape(c.reason)}</li>" for c in est.checks)
    warns = "".join(f"<li>{html.escape(w)}</li>" for w in est.warnings)
    assumed = "".join(f"<li>assumed: {html.escape(a)}</li>" for a in est.assumptions)
    return (f"<table class='wb-memory'><thead><tr><th>per GPU, {unit}</th>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>{summary}{timing}"
            f"<p><b>Build checks (one node)</b></p><ul class='wb-checks'>{checks}</ul>"
            + (f"<ul class='wb-warnings'>{warns}</ul>" if warns else "")
            + (f"<ul class='wb-assumptions'>{assumed}</ul>" if assumed else ""))

"""The verdict at the top of Plan, as the backend gives it (``workbench.estimate.run.verdict``): the
answer in one sentence, green only when no part fails or is tight (amber: the GPU's memory is
within the estimate's band), each part with its status, and the next steps with their figures.
This module only words and colours what the backend decided."""
from __future__ import annotations

import html

GREEN, RED, AMBER = "#1a7f37", "#cf222e", "#9a6700"
MARK = {"pass": ("&#10004;", GREEN), "warn": ("!", AMBER), "tight": ("~", AMBER),
        "fail": ("&#10008;", RED)}


def verdict_html(v, memory_line: str) -> str:
    """``v``: a ``Verdict``; ``memory_line``: the GPU-memory line the page has always shown."""
    # green only when every part passes or warns; amber when the GPU's memory is tight
    tight = any(p.status == "tight" for p in v.parts)
    color = RED if not v.ok else AMBER if tight else GREEN
    parts = "".join(
        f"<li class='wb-part-{p.status}'><span style='color:{MARK[p.status][1]};"
        f"font-weight:bold'>{MARK[p.status][0]}</span> <b>{html.escape(p.name)}</b>: "
        f"{html.escape(p.says)}</li>" for p in v.parts)
    steps = next_steps_html([n for n in v.next])
    if v.unsearched:
        steps += ("<div class='wb-unsearched' style='color:#57606a'>Not searched in the "
                  "estimate's time: " + html.escape("; ".join(v.unsearched)) + "</div>")
    return (f"<div class='wb-app-verdict' style='color:{color}'>"
            f"<div class='wb-verdict-says' style='font-size:15px;font-weight:bold'>"
            f"{html.escape(v.says)}</div>"
            f"<div class='wb-verdict-memory'>{memory_line}</div>"
            f"<ul class='wb-verdict-parts' style='color:#24292f;margin:4px 0;padding-left:18px'>"
            f"{parts}</ul>{steps}</div>")


def next_steps_html(steps: list, searched_s: float | None = None) -> str:
    """The next steps, each a sentence with its figures (empty: nothing to do); those the
    planner found (``searched_s``: its seconds) under their own heading."""
    if not steps:
        return ""
    title = "The planner's options" if searched_s else "What you can do instead"
    took = f" (searched in {searched_s * 1000:,.0f} ms)" if searched_s else ""
    items = "".join(f"<li class='wb-next-{html.escape(n.kind)}'>{html.escape(n.says)}</li>"
                    for n in steps)
    return (f"<div class='wb-next-steps' style='color:#24292f'><b>{title}</b>{took}:<ul style='margin:2px 0;padding-left:18px'>{items}</ul></div>")

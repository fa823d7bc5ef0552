"""Words for what the charts draw."""
from __future__ import annotations

from workbench.render.text import band_text


def layout_text(row) -> str:
    """A planner row as one line: its degrees and switches."""
    text = (" ".join(f"{k} {int(row[k])}" for k in ("dp", "tp", "pp", "cp", "ep"))
            + f", ZeRO {int(row['zero'])}, micro-batch {int(row['micro_batch'])}, "
            f"{row['recompute']} recompute")
    if int(row["pp"]) > 1:
        text += f", {row['pp_schedule']}"
    if row["offload"] != "none":
        text += f", offload {row['offload']}"
    return text


def band_words(est) -> str:
    """The estimate's measured step-time error band in words (``render.text.band_text`` without
    its brackets): "typical error: half of 157 published megatron dense runs within 13%, ..." or
    "no measured runs to say its error"."""
    return band_text(est).strip().removeprefix("(").removesuffix(")")

"""Words for what the charts draw."""
from __future__ import annotations


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

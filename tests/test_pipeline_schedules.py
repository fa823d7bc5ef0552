"""In-flight microbatch counts against PyTorch's own schedule generators (what trials run)."""
from __future__ import annotations

import re

import pytest

from workbench.scenario.schedules import SCHEDULES
from workbench.scenario.types import Parallel


def _peak_per_rank(ops) -> list[int]:
    """Max number of (stage, microbatch) forwards whose backward (B, or W after I) is pending."""
    peaks = []
    for row in ops:
        live, best = set(), 0
        for action in row:
            if action is None:
                continue
            for stage, kind, mb in re.findall(r"(\d+)(F|B|I|W)(\d+)", str(action)):
                if kind == "F":
                    live.add((stage, mb))
                elif kind in ("B", "W"):
                    live.discard((stage, mb))
            best = max(best, len(live))
        peaks.append(best)
    return peaks


@pytest.mark.parametrize("schedule,pp,mbs,v", [
    ("gpipe", 4, 8, 1), ("1f1b", 2, 2, 1), ("1f1b", 4, 8, 1), ("1f1b", 8, 16, 1),
    ("interleaved-1f1b", 4, 8, 2), ("interleaved-1f1b", 2, 8, 3), ("interleaved-1f1b", 4, 16, 2),
    ("zero-bubble", 2, 4, 2), ("zero-bubble", 4, 16, 2), ("zero-bubble", 2, 8, 3),
    ("dualpipev", 2, 4, 2), ("dualpipev", 3, 6, 2), ("dualpipev", 4, 16, 2),
])
def test_inflight_matches_torch_pipelining(schedule, pp, mbs, v):
    vis = pytest.importorskip("torch.distributed.pipelining._schedule_visualizer")
    rec = SCHEDULES[schedule]
    ops = vis.get_schedule_ops(rec.torchtitan, pp, mbs,
                               num_stages_per_rank=v if v > 1 else None, add_spacing=False)
    par = Parallel(pp=pp, pp_schedule=schedule, virtual_stages=1 if schedule == "dualpipev" else v)
    assert [rec.inflight(pp, mbs, par.chunks_per_rank, r) for r in range(pp)] == \
        _peak_per_rank(ops)


def test_the_schedule_records_name_torchs_classes():
    import torch.distributed.pipelining as pipelining
    from torch.distributed.pipelining.schedules import get_schedule_class

    for rec in SCHEDULES.values():
        assert get_schedule_class(rec.torchtitan) is getattr(pipelining, rec.trial_class)

"""Are the layouts experts run in the planner's search space? For every run of
benchmarks/data/published_runs.yaml (its scenario from ``accuracy.to_scenario``): the run's
layout is in the space when the search of its own scenario lists it — a candidate of
``plan.space.candidate_rows`` for its pipeline schedule under one of the engine-and-switch
settings ``plan.search.switch_variants`` searches (its expert TP), with a sequence-parallel,
recompute and offload setting the search tries, passing ``scenario.rules.layout_mask`` — or the
validator refuses the scenario (then its reason is the answer). Only the candidate screen and
the mask run, not the search.

    .venv/bin/python benchmarks/published_space.py          # counts, and every run outside
"""
from __future__ import annotations

import collections
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from accuracy import DATA, to_scenario  # noqa: E402
from workbench.engines import engine_of  # noqa: E402
from workbench.errors import ScenarioError  # noqa: E402
from workbench.plan.constraints import Constraints  # noqa: E402
from workbench.plan.search import with_setting, switch_variants  # noqa: E402
from workbench.plan.space import ROW_FIELDS, candidate_rows  # noqa: E402
from workbench.scenario import parse_scenario  # noqa: E402
from workbench.scenario.layouts import LayoutGrid  # noqa: E402
from workbench.scenario.rules import layout_mask  # noqa: E402
from workbench.scenario.types import OFFLOAD, Parallel  # noqa: E402


def records() -> list[dict]:
    """The published runs."""
    return yaml.safe_load(DATA.read_text())


def place(rec: dict) -> tuple[str, str]:
    """Where a run's layout stands: ("in", ""), ("refused", the validator's line) or
    ("outside", why the search does not list it)."""
    try:
        s = parse_scenario(to_scenario(rec))
    except ScenarioError as exc:
        return "refused", exc.one_line()
    par = s.parallel
    # the search starts from the default layout (plan.search.plan)
    s0 = dataclasses.replace(s, parallel=Parallel(),
                             document={**s.document, "parallel": dataclasses.asdict(Parallel())})
    # expert TP equal to TP is the layout without it (Parallel.etp)
    etp = None if par.expert_tp == par.tp else par.expert_tp
    variants = [v for v in switch_variants(s0, Constraints()) if v.parallel.expert_tp == etp]
    if not variants:
        return "outside", f"expert_tp {par.expert_tp} is not searched"
    eng = engine_of(s.training)
    if s.training.recompute not in eng.recompute:
        return "outside", f"recompute {s.training.recompute} is not searched"
    if s.training.offload not in OFFLOAD:
        return "outside", f"offload {s.training.offload} is not searched"
    if not (par.sequence_parallel or eng.tp_without_sp or par.tp == 1):
        return "outside", "sequence_parallel false is not searched"
    # layouts without pipelining are listed under the first schedule only
    sched = par.pp_schedule if par.pp > 1 else Parallel().pp_schedule
    want = np.array([getattr(par, f) or 0 if f != "micro_batch" else s.training.micro_batch
                     for f in ROW_FIELDS], dtype=np.int64)
    why = "not a candidate"
    for v in variants:
        rows = candidate_rows(v, s.hardware.world, sched, {})
        hit = np.flatnonzero((rows == want[:, None]).all(axis=0))
        if not len(hit):
            missing = [f"{f} {int(x)}" for f, x, col in zip(ROW_FIELDS, want, rows)
                       if int(x) not in set(col.tolist())]
            why = "not a candidate: " + (", ".join(missing) or "the combination")
            continue
        base = with_setting(v, par.sequence_parallel, s.training.recompute, s.training.offload)
        g = LayoutGrid(*rows[:, hit[:1]], pp_schedule=sched,
                       sequence_parallel=par.sequence_parallel, expert_tp=v.parallel.expert_tp)
        if bool(layout_mask(base, g)[0]):
            return "in", ""
        why = "a candidate the rule mask drops"
    return "outside", why


def main() -> int:
    recs = records()
    tally = collections.Counter()
    outside = []
    for rec in recs:
        where, why = place(rec)
        tally[where] += 1
        if where != "in":
            outside.append((where, rec["id"], why))
    print(f"{len(recs)} published runs: {tally['in']} in the space, {tally['refused']} refused "
          f"by the validator, {tally['outside']} outside")
    reasons = collections.Counter(why.split(":")[0] if w == "outside" else "refused"
                                  for w, _, why in outside)
    for why, n in reasons.most_common():
        print(f"  {n:4} {why}")
    for where, rid, why in outside:
        print(f"  {where:8} {rid}: {why}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

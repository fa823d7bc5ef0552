"""The estimates of a fixed set of scenarios, recorded as contract-2 JSON: the oracle that keeps
the estimator's numbers unchanged while its code moves (tests/test_golden_estimates.py).

Regenerate only when a change of figures is intended, and say so in the commit:

    .venv/bin/python -m tests.golden_estimates > tests/data/estimate_golden.json
"""
from __future__ import annotations

import itertools
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROFILE = ROOT / "calibrations/amd-epyc-2core-2026-12-02.json"
SCHEDULES = ("1f1b", "interleaved-1f1b", "zero-bubble", "dualpipev", "gpipe")


def _docs() -> list[dict]:
    """Valid scenario documents spanning the layouts, schedules, ZeRO stages, HSDP, offload,
    recompute, precision and attention options, and a calibrated machine."""
    from workbench.errors import ScenarioError
    from workbench.scenario import parse_scenario, read_document

    docs = [read_document(p) for p in sorted((ROOT / "examples").glob("*.yaml"))]
    rng = random.Random(14)
    variants = [
        ("tiny-dense", 256, {}), ("tiny-moe", 256, {}), ("llama3-8b", 4096, {}),
        ("tiny-moe", 512, {"recompute": "full"}), ("llama3-8b", 4096, {"recompute": "none"}),
        ("tiny-dense", 256, {"precision": "fp8"}), ("tiny-dense", 256, {"attention": "eager"}),
        ("llama3-8b", 4096, {"offload": "cpu"}), ("tiny-moe", 256, {"offload": "nvme"}),
        ("tiny-dense", 512, {"optimizer": "sgd", "precision": "fp16"}),
    ]
    for model, seq, training in variants:
        for sched in SCHEDULES:
            found = []
            for tp, pp, cp, ep, zero, v, mb, sp, sg in itertools.product(
                    (1, 2, 8), (1, 2, 4), (1, 2), (1, 2, 8), (0, 1, 2, 3), (1, 2), (1, 2),
                    (True, False), (None, 2, 4)):
                if 16 % (tp * pp * cp):
                    continue
                par = {"dp": 16 // (tp * pp * cp), "tp": tp, "pp": pp, "cp": cp, "ep": ep,
                       "zero": zero, "virtual_stages": v, "pp_schedule": sched,
                       "sequence_parallel": sp}
                if sg is not None:
                    par["shard_group"] = sg
                doc = {"hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
                       "model": {"preset": model}, "parallel": par,
                       "training": {"seq_len": seq, "global_batch": 64, "micro_batch": mb,
                                    **training}}
                try:
                    parse_scenario(doc)
                except ScenarioError:
                    continue
                found.append(doc)
            docs += rng.sample(found, min(3, len(found)))
    for tp, pp, zero, sched in ((1, 1, 0, "1f1b"), (2, 1, 3, "1f1b"), (1, 2, 1, "1f1b"),
                                (1, 2, 3, "interleaved-1f1b"), (2, 2, 3, "dualpipev")):
        docs.append({"hardware": {"gpu": f"calibration:{PROFILE.relative_to(ROOT)}",
                                  "gpus_per_node": 4},
                     "model": {"preset": "tiny-dense"},
                     "parallel": {"dp": 4 // (tp * pp), "tp": tp, "pp": pp, "zero": zero,
                                  "pp_schedule": sched,
                                  "virtual_stages": 2 if sched == "interleaved-1f1b" else 1},
                     "training": {"seq_len": 256, "global_batch": 8}})
    return docs


def estimates() -> list[dict]:
    """Each document with its estimate's contract-2 JSON."""
    from workbench.estimate import estimate
    from workbench.scenario import parse_scenario

    return [{"doc": d, "estimate": estimate(parse_scenario(d)).to_dict()} for d in _docs()]


if __name__ == "__main__":
    import os
    os.chdir(ROOT)
    json.dump(estimates(), sys.stdout, sort_keys=True, separators=(",", ":"), default=str)
    sys.stdout.write("\n")

"""Does the estimate say that published runs fit the GPUs they ran on? Every run of
benchmarks/data (published_runs.yaml: pre-training runs; published_finetune.yaml and
published_hf.yaml: fine-tuning runs) happened, so each should fit. For each run the scenario the
record describes (``accuracy.to_scenario`` / ``finetune_accuracy.parse``) is estimated, and the
verdict's GPU-memory part (pass, tight or fail: ``estimate.memory.fit``) is counted: a run
said not to fit is one whose part fails. Beside it, the worst GPU's device figure (what
nvidia-smi shows) and the least the run could need (``device_least``, the allocator's cache
freed) against the GPU's memory: how many are above 100 % and above 120 %, overall and per
source, and how many the planner would not rank (above its default share, the memory band's).

    .venv/bin/python benchmarks/fit_on_published.py [--list]
"""
from __future__ import annotations

import argparse
import collections
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import yaml  # noqa: E402

import accuracy  # noqa: E402
import finetune_accuracy  # noqa: E402
from workbench.errors import ScenarioError  # noqa: E402
from workbench.estimate import estimate  # noqa: E402
from workbench.headroom import band_fraction  # noqa: E402
from workbench.scenario import parse_scenario  # noqa: E402


def _scenarios():
    """(id, source, parsed scenario or the reason it is not read) of every published run."""
    for rec in yaml.safe_load(accuracy.DATA.read_text()):
        try:
            yield rec["id"], accuracy.source_of(rec), parse_scenario(accuracy.to_scenario(rec))
        except ScenarioError as exc:
            yield rec["id"], accuracy.source_of(rec), exc.one_line()
    for rec in finetune_accuracy.load("all"):
        try:
            yield rec["id"], rec["id"].split("-")[0], finetune_accuracy.parse(rec)[0]
        except ScenarioError as exc:
            yield rec["id"], rec["id"].split("-")[0], exc.one_line()


def rows() -> list[dict]:
    """One row per published run: its device figure over its GPU's memory, and the verdict's
    GPU-memory status."""
    out = []
    for rid, source, s in _scenarios():
        if isinstance(s, str):
            out.append({"id": rid, "source": source, "skipped": s})
            continue
        est = estimate(s)
        cap = est.memory.capacity
        g = est.memory.per_gpu
        out.append({"id": rid, "source": source, "share": g.device / cap,
                    "least": g.device_least / cap, "status": est.memory.gpu_fit,
                    "ranked": g.device <= band_fraction(est.memory.band) * cap})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="every run said not to fit")
    args = ap.parse_args(argv)
    done = rows()
    read = [r for r in done if "share" in r]
    fail = [r for r in read if r["status"] == "fail"]
    status = collections.Counter(r["status"] for r in read)
    print(f"{len(read)} published runs estimated ({len(done) - len(read)} not read); "
          f"median device share {statistics.median(r['share'] for r in read):.0%}")
    print(f"said not to fit (the verdict's GPU part fails): {len(fail)} "
          f"({len(fail) / len(read):.1%}); " + ", ".join(f"{k} {v}" for k, v in
                                                        sorted(status.items())))
    for key, words in (("share", "device"), ("least", "least need (cache freed)")):
        over = sum(r[key] > 1 for r in read)
        far = sum(r[key] > 1.2 for r in read)
        print(f"{words}: above the GPU {over} ({over / len(read):.1%}), by more than 20 % {far} "
              f"({far / len(read):.1%})")
    unranked = sum(not r["ranked"] for r in read)
    print(f"above the planner's default share (the band's): {unranked} "
          f"({unranked / len(read):.1%})")
    by = collections.defaultdict(list)
    for r in read:
        by[r["source"]].append(r)
    print(f"\n{'source':16} {'runs':>5} {'fail':>5} {'tight':>6} {'least > 120 %':>14} {'max':>6}")
    for src, rs in sorted(by.items()):
        print(f"{src:16} {len(rs):5} {sum(r['status'] == 'fail' for r in rs):5} "
              f"{sum(r['status'] == 'tight' for r in rs):6} "
              f"{sum(r['least'] > 1.2 for r in rs):14} {max(r['least'] for r in rs):6.0%}")
    if args.list:
        print()
        for r in sorted(fail, key=lambda r: -r["least"]):
            print(f"{r['least']:6.0%} {r['share']:6.0%} {r['status']:5} {r['id']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Does the estimate say that published runs fit the GPUs they ran on? Every run of
benchmarks/data (published_runs.yaml: pre-training runs; published_finetune.yaml and
published_hf.yaml: fine-tuning runs) happened, so each should fit. For each run the scenario the
record describes (``accuracy.to_scenario`` / ``finetune_accuracy.parse``) is estimated, and the
worst GPU's device figure (what nvidia-smi shows, what fit is judged on) is put against the
GPU's memory: the share of runs said not to fit (above 100 %), by more than 20 %, and above the
planner's headroom, overall and per source, with the verdict's GPU-memory status.

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
from workbench.headroom import DEFAULT_MEMORY_FRACTION  # noqa: E402
from workbench.scenario import parse_scenario  # noqa: E402
from workbench.units import hbm_bytes  # noqa: E402


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
        cap = hbm_bytes(s.hardware.gpu.memory_gb)
        part = est.verdict.part("gpu memory")
        out.append({"id": rid, "source": source, "share": est.memory.per_gpu.device / cap,
                    "status": part.status if part else "?"})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="every run said not to fit")
    args = ap.parse_args(argv)
    done = rows()
    read = [r for r in done if "share" in r]
    over = [r for r in read if r["share"] > 1]
    far = [r for r in read if r["share"] > 1.2]
    above = [r for r in read if r["share"] > DEFAULT_MEMORY_FRACTION]
    status = collections.Counter(r["status"] for r in read)
    print(f"{len(read)} published runs estimated ({len(done) - len(read)} not read); "
          f"median device share {statistics.median(r['share'] for r in read):.0%}")
    print(f"said not to fit (device > 100 % of the GPU): {len(over)} ({len(over) / len(read):.1%})"
          f"; by more than 20 %: {len(far)} ({len(far) / len(read):.1%}); above the planner's "
          f"{DEFAULT_MEMORY_FRACTION:.0%}: {len(above)} ({len(above) / len(read):.1%})")
    print("verdict's GPU memory part: " + ", ".join(f"{k} {v}" for k, v in sorted(status.items())))
    by = collections.defaultdict(list)
    for r in read:
        by[r["source"]].append(r)
    print(f"\n{'source':16} {'runs':>5} {'> 100 %':>8} {'> 120 %':>8} {'max':>6}")
    for src, rs in sorted(by.items()):
        print(f"{src:16} {len(rs):5} {sum(r['share'] > 1 for r in rs):8} "
              f"{sum(r['share'] > 1.2 for r in rs):8} {max(r['share'] for r in rs):6.0%}")
    if args.list:
        print()
        for r in sorted(over, key=lambda r: -r["share"]):
            print(f"{r['share']:6.0%} {r['status']:5} {r['id']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

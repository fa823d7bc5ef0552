"""Runs that did not fit: does the verdict say so? benchmarks/data/published_ooms.yaml holds 32
published out-of-memory reports of training and fine-tuning runs (GitHub issues of torchtitan,
NeMo Automodel, Megatron-Bridge, Megatron-LM, torchtune, OpenRLHF, open-instruct, TRL, Stanford
Alpaca, llama-recipes, llm-foundry, axolotl, LLaMA-Factory, LLaMA2-Accessory; each cited, with
the sentences that state its configuration and what had to be assumed), each as a workbench
scenario. The verdict's GPU-memory part should fail ("No") or be tight on every one whose cause
was the run's size; reports whose out-of-memory a defect caused (``bug``: a regression, a
launcher setting left out) are counted apart.

    .venv/bin/python benchmarks/oom_reports.py
"""
from __future__ import annotations

import collections
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from workbench.estimate import estimate  # noqa: E402
from workbench.scenario import parse_scenario  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "published_ooms.yaml"


def rows() -> list[dict]:
    """One row per report: its estimate's GPU part (pass, tight, fail), device and least need
    as shares of the GPU, and whether a defect caused it."""
    out = []
    for rep in yaml.safe_load(DATA.read_text())["reports"]:
        bug = rep["bug"]["is_bug"]
        m = estimate(parse_scenario(rep["scenario"])).memory
        g = m.per_gpu
        out.append({"id": rep["id"], "status": m.gpu_fit, "device": g.device / m.capacity,
                    "least": g.device_least / m.capacity,
                    "cause": "size" if bug is False else ("defect" if bug is True else
                                                          "suspected defect")})
    return out


def main() -> int:
    done = rows()
    for r in sorted(done, key=lambda r: (r["cause"], r["status"], -r["device"])):
        print(f"{r['status']:5} {r['device']:6.0%} {r['least']:6.0%}  {r['cause']:16} {r['id']}")
    print()
    by = collections.defaultdict(collections.Counter)
    for r in done:
        by[r["cause"]][r["status"]] += 1
    for cause, c in sorted(by.items()):
        said = c["fail"] + c["tight"]
        total = sum(c.values())
        print(f"{cause:16} {total:3} reports: No {c['fail']}, tight {c['tight']}, fits {c['pass']} "
              f"-> No or tight {said} of {total} ({said / total:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

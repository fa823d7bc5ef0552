"""How fast one estimate is (the widgets call it on every edit; goal: < 10 ms per call).

    .venv/bin/python benchmarks/estimate_speed.py
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.estimate import estimate  # noqa: E402
from workbench.spec import load_scenario, parse_scenario, read_document  # noqa: E402


def timed(fn, repeat: int = 200) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main() -> int:
    print(f"{'example':32} {'validate ms':>12} {'estimate ms':>12} {'p95 total ms':>13}")
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        doc = read_document(path)
        s = load_scenario(path)
        v = timed(lambda: parse_scenario(doc))
        e = timed(lambda: estimate(s))
        both = sorted(a + b for a, b in zip(v, e))
        print(f"{path.stem:32} {statistics.median(v) * 1e3:12.3f} {statistics.median(e) * 1e3:12.3f}"
              f" {both[int(0.95 * len(both))] * 1e3:13.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

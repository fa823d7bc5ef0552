"""What `workbench bench` measures on this machine, and how long its sweeps take.

    .venv/bin/python benchmarks/collectives_here.py [--plot bench.html]

Runs `workbench bench --quick` as a command (wall time from the shell's point of view, Python
and torch start-up included), then the full default sweep (every collective, 1 KiB to 256 MiB
in x4 steps, 2, 4 and 8 ranks, auto backend) in this process, printing each row as it is
measured, the wall time, and a summary: the time of the smallest message (latency) and the
busbw of the largest, per collective and world size. docs/bench.md quotes the figures.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.bench import run_bench  # noqa: E402
from workbench.bench.definitions import human_bytes  # noqa: E402
from workbench.bench.result import format_row, header  # noqa: E402


def quick_command() -> float:
    """Seconds for `python -m workbench bench --quick --json` from start to exit."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "workbench", "bench", "--quick", "--json"],
                   cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plot", default=None, help="also write the default sweep's figure here")
    args = ap.parse_args()

    print(f"workbench bench --quick (command, start-up included): {quick_command():.1f} s")

    def show(ev: dict) -> None:
        if ev["type"] == "start":
            print(header(ev["backend"]) + f"   [{ev['world_size']} ranks, {ev['start_method']}]",
                  flush=True)
        elif ev["type"] == "row":
            print(format_row(ev) + f"   ({ev['iterations']} timed)", flush=True)

    t0 = time.perf_counter()
    df = run_bench(on_event=show)
    wall = time.perf_counter() - t0
    print(f"\ndefault sweep: {len(df)} rows, {wall:.0f} s wall ({df.attrs['backend']})")

    small, large = df.bytes.min(), df.bytes.max()
    print(f"\n{'':16}" + "".join(f"{w:>10} ranks" for w in sorted(df.world_size.unique())))
    for label, size, col, scale, fmt in (
            (f"time at {human_bytes(small)} (us)", small, "time_s", 1e6, "{:>16.0f}"),
            (f"busbw at {human_bytes(large)} (GB/s)", large, "busbw_gb_per_s", 1, "{:>16.3f}")):
        print(label)
        for name in df.collective.unique():
            part = df[(df.collective == name) & (df.bytes == size)].sort_values("world_size")
            print(f"  {name:14}" + "".join(fmt.format(v * scale) for v in part[col]))
    if args.plot:
        from workbench.bench.plot import write_html

        print(f"plot: {write_html(df, args.plot)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

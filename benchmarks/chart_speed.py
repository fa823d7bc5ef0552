"""How fast the timeline, mesh and scaling charts redraw, and how fast ``scaling_curve`` computes.

    .venv/bin/python benchmarks/chart_speed.py

Each chart's ``update`` is timed over 50 calls (p50 and p95; the estimate or the scaling
DataFrame computed beforehand, so only the chart's own work — the timeline simulation included,
it is part of drawing — and plotly's figure update are measured; no browser is attached).
``scaling_curve`` is timed per sweep (median of 3 after one warm-up call; wall and the
process's CPU time, which a machine shared with other jobs inflates less).
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

N = 50


def _times(fn, n: int = N) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def _p(ts: list[float], q: float) -> float:
    ts = sorted(ts)
    return ts[min(len(ts) - 1, int(round(q * (len(ts) - 1))))]


def _row(name: str, ts: list[float]) -> None:
    print(f"{name:66} {_p(ts, 0.5) * 1e3:9.1f} {_p(ts, 0.95) * 1e3:9.1f}")


def main() -> int:
    t0 = time.perf_counter()
    from widgets.charts.mesh import MeshChart
    from widgets.charts.scaling import ScalingChart
    from widgets.charts.timeline import TimelineChart
    from workbench.estimate import estimate
    from workbench.plan.scaling import scaling_curve
    from workbench.scenario import load_scenario
    print(f"imports (plotly, pandas, workbench): {time.perf_counter() - t0:.2f} s")

    ex = ROOT / "examples"
    big = load_scenario(ex / "llama3-405b-h200-cluster.yaml")          # 512 GPUs, pp 16
    pp4 = load_scenario(ex / "llama3-8b-8xh100.yaml", ["parallel.dp=2", "parallel.pp=4"])
    zb = load_scenario(ex / "llama3-8b-8xh100.yaml", [
        "parallel.dp=2", "parallel.pp=4", "parallel.pp_schedule=zero-bubble",
        "parallel.virtual_stages=2"])
    huge = load_scenario(ex / "llama3-405b-h200-cluster.yaml", [
        "hardware.nodes=2048", "parallel.dp=128", "training.global_batch=2048"])
    moe = load_scenario(ex / "mixtral-8x7b-ep.yaml")
    tiny = load_scenario(ex / "tiny-trial-4d.yaml")

    print(f"\n{'chart update (' + str(N) + ' calls)':66} {'p50 ms':>9} {'p95 ms':>9}")
    t = time.perf_counter()
    chart = TimelineChart()
    print(f"{'TimelineChart() creation':66} {(time.perf_counter() - t) * 1e3:9.1f}")
    for label, s in (("1f1b, pp 4, 32 microbatches (llama3-8b)", pp4),
                     ("zero-bubble v2, pp 4, 32 microbatches", zb),
                     (f"interleaved v2, pp 16, {big.microbatches} microbatches (405B)", big)):
        est = estimate(s)
        blocks = len(est.timeline())
        _row(f"timeline: {label} [{blocks} bars]", _times(lambda: chart.update(est)))
    est = estimate(big)
    _row("timeline: same 405B, microbatches=16", _times(lambda: chart.update(est, 16)))

    mesh = MeshChart(tiny)
    for label, s in (("16 GPUs (tiny 4-D)", tiny), ("512 GPUs (405B)", big),
                     ("16,384 GPUs", huge)):
        n = 10 if s is huge else N
        _row(f"mesh update: {label}" + (" [10 calls]" if n < N else ""),
             _times(lambda: mesh.update(s), n))
        _row(f"mesh select: {label}", _times(lambda: mesh.select(s.parallel.world // 3)))

    scale = ScalingChart()
    df = scaling_curve(moe, "tp")
    _row("scaling draw: precomputed tp sweep (mixtral)", _times(lambda: scale.draw(df, "tp")))
    df = scaling_curve(big, "gpus")
    _row(f"scaling draw: precomputed GPU sweep (405B, {len(df)} points)",
         _times(lambda: scale.draw(df, "gpus")))

    print(f"\n{'scaling_curve (median of 3, after 1 warm-up)':66} {'wall s':>9} {'CPU s':>9} "
          f"{'points':>7}")
    for label, s, over in (("llama3-8b, 8 GPUs", load_scenario(ex / "llama3-8b-8xh100.yaml"),
                            "gpus"),
                           ("mixtral-8x7b, 16 GPUs", moe, "gpus"),
                           ("405B, 512 GPUs", big, "gpus"),
                           ("405B, 512 GPUs", big, "tp"), ("405B, 512 GPUs", big, "pp"),
                           ("405B, 512 GPUs", big, "dp"), ("mixtral-8x7b", moe, "ep"),
                           ("tiny 4-D, 16 GPUs", tiny, "cp")):
        n = len(scaling_curve(s, over))
        c0 = time.process_time()
        ts = _times(lambda: scaling_curve(s, over), 3)
        cpu = (time.process_time() - c0) / 3    # this process only: robust to a busy machine
        print(f"{over + ' sweep: ' + label:66} {statistics.median(ts):9.3f} {cpu:9.3f} {n:7d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

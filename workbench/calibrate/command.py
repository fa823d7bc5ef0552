"""The ``workbench calibrate`` verb: measure this machine and write its profile file."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEFAULT_OUT = "calibration.json"


def add_arguments(c: argparse.ArgumentParser) -> None:
    c.add_argument("--out", default=DEFAULT_OUT, metavar="FILE",
                   help=f"where to write the profile (default {DEFAULT_OUT}); use it as "
                        "hardware.gpu: \"calibration:FILE\"")
    c.add_argument("--quick", action="store_true",
                   help="a coarser GEMM grid, fewer sizes and repeats: 38 s instead of 110 s here")
    c.add_argument("--world-size", default="2,4,8", metavar="N[,N...]",
                   help="world sizes for the collectives (default 2,4,8; at most 8)")
    c.set_defaults(run=run)


def summary(p) -> list[str]:
    """What the profile says, in a few lines."""
    lines = [f"{p.host.get('cpu', '?')}: {p.cores} cores, {p.memory_gb:g} GB, torch "
             f"{p.host.get('torch', '?')}, measured {p.date}",
             f"GEMM, one thread: best {p.peak_flops('fp32') / 1e9:.1f} GFLOP/s fp32, "
             f"{p.peak_flops('bf16') / 1e9:.1f} GFLOP/s bf16; copy {p.copy_gb_per_s:.1f} GB/s",
             f"eager runtime: {p.op_forward_s * 1e6:.1f} us per forward op, "
             f"{p.op_backward_s * 1e6:.1f} us per backward node, {p.op_no_grad_s * 1e6:.1f} us "
             "per optimizer op"]
    for name, parts in sorted(p.wrappers.items()):
        f, b = parts["layer"]
        lines.append(f"{name} adds per layer: {f * 1e3:.2f} ms forward, {b * 1e3:.2f} ms "
                     f"backward; {parts['tensor'][0] * 1e6:.0f} us per optimizer tensor")
    for kind, worlds in sorted(p.collectives.get(p.backend, {}).items()):
        lines.append(f"{kind}: " + ", ".join(
            f"{w} ranks {a * 1e6:,.0f} us + {b * 1e9:.2f} ns/B" for w, (a, b) in sorted(
                worlds.items())))
    if p.in_loop_s:
        lines.append("a collective inside a training loop: " + ", ".join(
            f"{w} ranks {p.in_loop(w) * 1e3:.2f} ms" for w in sorted(p.in_loop_s)))
    return lines


def run(args: argparse.Namespace) -> int:
    from workbench.bench.runner import BenchFailed, make_config
    from workbench.calibrate.measure import measure_profile
    from workbench.errors import Problem, ScenarioError

    out = Path(args.out)
    try:
        if not out.resolve().parent.is_dir():
            raise ScenarioError([Problem("--out", args.out, "its folder does not exist")])
        try:
            worlds = tuple(int(w) for w in str(args.world_size).split(","))
        except ValueError:
            raise ScenarioError([Problem("--world-size", args.world_size,
                                         "expected N or a list like 2,4,8")]) from None
        make_config(list(worlds), quick=args.quick)      # names a bad --world-size now
        profile = measure_profile(
            quick=args.quick, world_sizes=worlds,
            on_event=lambda e: print(f"# {e['what']}", flush=True) if e["type"] == "phase"
            else None)
    except ScenarioError as exc:
        print(f"workbench calibrate: {exc.one_line()}", file=sys.stderr)
        return 2
    except (BenchFailed, RuntimeError) as exc:
        print(f"workbench calibrate: failed: {exc}", file=sys.stderr)
        return 1
    profile.save(out)
    print("\n".join(summary(profile)))
    print(f"# written to {out}; use it with hardware.gpu: \"calibration:{out}\"")
    return 0

"""The ``workbench calibrate`` verb: measure this machine and write its profile file.

A machine whose torch has CUDA and whose NVML sees an NVIDIA GPU is measured as a GPU
(``measure_gpu.py``: the kernels in one spawned process, nccl collectives); any other as a CPU
machine (``measure.py``). World size 1 measures no collective: the estimate then times
collectives on the scenario's links.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

DEFAULT_OUT = "calibration.json"
DEFAULT_WORLDS = (2, 4, 8)
SKIPPED = "collectives: skipped (world size 1): the estimate uses the scenario's link catalogue"


def add_arguments(c: argparse.ArgumentParser) -> None:
    c.add_argument("--out", default=DEFAULT_OUT, metavar="FILE",
                   help=f"where to write the profile (default {DEFAULT_OUT}); use it as "
                        "hardware.gpu: \"calibration:NAME\" (the file name without .json) "
                        "when it is in calibrations/ or the working directory")
    c.add_argument("--quick", action="store_true",
                   help="a coarser GEMM grid, fewer sizes and repeats: 38 s instead of 110 s "
                        "on a 2-core CPU machine; on a GPU a 4x4x4 grid and 6 attention points")
    c.add_argument("--world-size", default=None, metavar="N[,N...]",
                   help="world sizes for the collectives (default 2,4,8; on a GPU machine "
                        "those up to its GPU count, with nccl; at most 8); 1 measures none: "
                        "the estimate then uses the scenario's links")
    c.add_argument("--scenario", default=None, metavar="FILE",
                   help="on a GPU, also measure the exact GEMM shapes and attention kernels "
                        "the estimator times for this scenario's layers and layout")
    c.set_defaults(run=run)


def world_sizes(value: str | None, gpus: int) -> tuple[int, ...]:
    """The world sizes asked for (``--world-size``; None: the default) on a machine with
    ``gpus`` CUDA GPUs (0: a CPU machine). Raises ScenarioError naming the option."""
    from workbench.bench.runner import MAX_WORLD
    from workbench.errors import Problem, ScenarioError

    if value is None:
        worlds = tuple(w for w in DEFAULT_WORLDS if not gpus or w <= gpus) or (1,)
        return worlds
    try:
        worlds = tuple(int(w) for w in str(value).split(","))
    except ValueError:
        raise ScenarioError([Problem("--world-size", value,
                                     "expected N or a list like 2,4,8")]) from None
    problems = [Problem("--world-size", w, "must be >= 1") for w in worlds if w < 1]
    if gpus:
        problems += [Problem("--world-size", w, f"nccl needs one GPU per rank: {gpus} GPU(s) "
                                                "here") for w in worlds if w > gpus]
        problems += [Problem("--world-size", w, f"this benchmark runs at most {MAX_WORLD} "
                                                "ranks on one machine")
                     for w in worlds if gpus >= w > MAX_WORLD]
    if problems:
        raise ScenarioError(problems)
    return worlds


def summary(p) -> list[str]:
    """What a CPU machine's profile says, in a few lines."""
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
    kinds = p.collectives.get(p.backend, {})
    for kind, worlds in sorted(kinds.items()):
        lines.append(f"{kind}: " + ", ".join(
            f"{w} ranks {a * 1e6:,.0f} us + {b * 1e9:.2f} ns/B" for w, (a, b) in sorted(
                worlds.items())))
    if not kinds:
        lines.append(SKIPPED)
    if p.in_loop_s:
        lines.append("a collective inside a training loop: " + ", ".join(
            f"{w} ranks {p.in_loop(w) * 1e3:.2f} ms" for w in sorted(p.in_loop_s)))
    return lines


def gpu_summary(p) -> list[str]:
    """What a GPU's profile says, in a few lines."""
    from workbench.hardware.gpu_profile import attention_rates, gemm_flops, gpu_record

    g = p.gpu
    lines = [f"{g.get('name', '?')}: compute capability {'.'.join(map(str, g['capability']))}, "
             f"{g.get('sms')} SMs, {g['memory_bytes'] / 2**30:.1f} GiB; driver "
             f"{g.get('driver') or '?'}, CUDA {g.get('cuda')}, torch {g.get('torch')}; measured "
             f"{p.date} in {p.wall_s:.0f} s"]
    m, n = p.gemm_grid["m"], p.gemm_grid["n"]
    count = len(m) * len(n) * len(p.gemm_grid["k"])
    tables = ", ".join(f"{t} {p.peak_flops(t) / 1e12:.0f}" for t in sorted(p.gemm_seconds))
    lines.append(f"GEMM: best TFLOP/s {tables} over {count} shapes (m {m[0]}..{m[-1]}, n/k "
                 f"{n[0]}..{n[-1]})"
                 + (f"; {len(p.gemm_points)} of the scenario's shapes" if p.gemm_points else ""))
    if p.attention_points:
        rates = [attention_rates(a) for a in p.attention_points]
        lines.append(f"attention (SDPA, causal, bf16), {len(rates)} points: forward "
                     f"{min(r[0] for r in rates) / 1e12:.0f}..{max(r[0] for r in rates) / 1e12:.0f}"
                     f", backward {min(r[1] for r in rates) / 1e12:.0f}.."
                     f"{max(r[1] for r in rates) / 1e12:.0f} TFLOP/s")
    for row in p.grouped_gemm:
        flops = gemm_flops(row["tokens"], row["expert_ffn"], row["hidden"])
        lines.append(f"grouped GEMM, {row['experts']} experts {row['hidden']}x"
                     f"{row['expert_ffn']}: {flops / row['grouped_s'] / 1e12:.0f} TFLOP/s "
                     f"(one dense GEMM of the same FLOPs {flops / row['dense_s'] / 1e12:.0f})")
    lines.append(f"HBM: {p.hbm_gb_per_s:,.0f} GB/s (device copy, bytes read + written)")
    lines.append(f"as hardware.gpu: {gpu_record(p).source.split('; ', 1)[-1]}")
    kinds = p.collectives.get(p.backend, {})
    for kind, worlds in sorted(kinds.items()):   # time = alpha + beta x bytes
        lines.append(f"{kind} (nccl): " + ", ".join(
            f"{w} ranks {a * 1e6:,.1f} us + bytes at {1 / b / 1e9 if b else math.inf:,.0f} GB/s"
            for w, (a, b) in sorted(worlds.items())))
    if not kinds:
        lines.append(SKIPPED)
    lines += [f"not measured: {e}" for e in p.errors]
    return lines


def run(args: argparse.Namespace) -> int:
    from workbench.bench.runner import BenchFailed, make_config
    from workbench import rank_devices
    from workbench.errors import Problem, ScenarioError

    out = Path(args.out)

    def on_event(e: dict) -> None:
        if e["type"] == "phase":
            print(f"# {e['what']}", flush=True)

    try:
        if not out.resolve().parent.is_dir():
            raise ScenarioError([Problem("--out", args.out, "its folder does not exist")])
        gpus = rank_devices.visible_gpus()   # NVML: CUDA stays uninitialised here
        worlds = world_sizes(args.world_size, len(gpus))
        scenario = None
        if args.scenario is not None:
            from workbench.scenario import load_scenario

            scenario = load_scenario(args.scenario)
        if gpus:
            from workbench.calibrate.measure_gpu import measure_gpu_profile

            print(f"# {len(gpus)} CUDA GPU(s): {gpus[0][0]}; measuring the GPU", flush=True)
            profile = measure_gpu_profile(quick=args.quick, world_sizes=worlds,
                                          scenario=scenario, on_event=on_event)
            lines = gpu_summary(profile)
        else:
            from workbench.calibrate.measure import measure_profile

            if scenario is not None:
                print("# --scenario: no CUDA GPU here; a CPU profile measures its own grid",
                      flush=True)
            multi = [w for w in worlds if w >= 2]
            if multi:     # names a bad --world-size now; gloo: no CUDA call in this process
                make_config(multi, backend="gloo", quick=args.quick)
            profile = measure_profile(quick=args.quick, world_sizes=worlds, backend="gloo",
                                      on_event=on_event)
            lines = summary(profile)
    except ScenarioError as exc:
        print(f"workbench calibrate: {exc.one_line()}", file=sys.stderr)
        return 2
    except (BenchFailed, RuntimeError) as exc:
        print(f"workbench calibrate: failed: {exc}", file=sys.stderr)
        return 1
    profile.save(out)
    print("\n".join(lines))
    from workbench.hardware.locate import ENV, inside_folders, reference

    print(f"# written to {out}; use it with hardware.gpu: \"{reference(Path(out))}\"")
    if not inside_folders(Path(out)):     # scenarios read profiles from those folders only
        print(f"# (its folder is not a calibration folder: set {ENV}="
              f"{Path(out).resolve().parent} first)")
    return 0

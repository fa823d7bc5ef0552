"""The GPU path end to end, in one command, for whoever has a CUDA machine (a few minutes):

1. a world-size-1 slice trial of each scenario (`workbench trial SCENARIO --world-size 1 --json`):
   the real widths on the GPU, measured against the estimate of the same slice on the same GPU
   (per block, optimizer, step; allocated / reserved / nvidia-smi memory);
2. a quick calibration (`workbench calibrate --quick --world-size 1 --scenario SCENARIO`: the
   kernel tables plus that scenario's GEMM shapes) and an estimate on the profile it wrote
   (`hardware.gpu: "calibration:FILE"`) beside the catalogue's;
3. `workbench monitor` scraped once (the GPU series NVML gives).
Prints one table; raw outputs go to --out. Each part runs as its own process with a deadline,
so one failure is reported and the rest still run.

    python benchmarks/gpu_check.py --out /tmp/gpu-check
    python benchmarks/gpu_check.py --scenario examples/llama3-8b-8xh100.yaml --skip calibrate
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.proof.slice_compare import cells, from_dict  # noqa: E402
DEFAULT_SCENARIOS = ("examples/llama3-8b-8xh100.yaml",)
PARTS = ("trial", "calibrate", "monitor")


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def _workbench(*args: str, timeout: float, out: Path, name: str) -> tuple[int, str, float]:
    """Run ``python -m workbench ARGS`` from the repository in a session of its own; (exit
    code, stdout, seconds). On the deadline the whole session is stopped (the ranks it
    spawned too, which would otherwise keep their GPU memory). stdout and stderr are kept in
    ``out/name.{out,err}``."""
    t0 = time.time()
    p = subprocess.Popen([sys.executable, "-m", "workbench", *args], cwd=ROOT, env=_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        stdout, stderr = p.communicate(timeout=timeout)
        code = p.returncode
    except subprocess.TimeoutExpired:
        _stop(p)
        stdout, stderr = p.communicate()
        code, stderr = 124, stderr + f"\n(timed out after {timeout:.0f} s)"
    (out / f"{name}.out").write_text(stdout)
    (out / f"{name}.err").write_text(stderr)
    return code, stdout, time.time() - t0


def _stop(p: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL, to the process group ``p`` leads."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""


def trial(scenario: str, steps: int, out: Path) -> list[str]:
    """One slice trial at world size 1; its comparison rows as table lines."""
    name = "trial-" + Path(scenario).stem
    code, stdout, secs = _workbench("trial", scenario, "--world-size", "1", "--steps",
                                    str(steps), "--json", timeout=420, out=out, name=name)
    if code != 0:
        err = (out / f"{name}.err").read_text()
        return [f"trial {scenario}: FAILED (exit {code}, {secs:.0f} s): "
                f"{_last_line(err) or _last_line(stdout)}"]
    doc = json.loads(stdout)
    m = doc["model"]
    lines = [f"trial {scenario} ({secs:.0f} s): {doc.get('device_name', doc.get('device'))}, "
             f"{doc.get('precision_ran', '')}, {m['layers']} layers, hidden {m['hidden']}, "
             f"seq {m['seq_len']}, micro-batch {m['micro_batch']}, steps {steps}",
             f"  {'component':58} {'estimated':>12} {'measured':>12} {'error':>8}"]
    for d in doc.get("comparison", []):
        name, est, got, err = cells(from_dict(d))
        lines.append(f"  {name:58} {est:>12} {got:>12} {err:>8}")
    lines += [f"  note: {n}" for n in doc.get("notes", [])]
    return lines


def calibrate(scenario: str, out: Path) -> list[str]:
    """A quick calibration at world size 1, then an estimate on the profile it wrote."""
    profile = out / "calibration.json"
    code, stdout, secs = _workbench("calibrate", "--quick", "--world-size", "1", "--scenario",
                                    scenario, "--out", str(profile), timeout=300, out=out,
                                    name="calibrate")
    if code != 0:
        err = (out / "calibrate.err").read_text()
        return [f"calibrate: FAILED (exit {code}, {secs:.0f} s): "
                f"{_last_line(err) or _last_line(stdout)}"]
    lines = [f"calibrate --quick --world-size 1 --scenario {scenario} ({secs:.0f} s): wrote "
             f"{profile}"]
    lines += [f"  {ln}" for ln in stdout.strip().splitlines()]
    code, stdout, _ = _workbench("estimate", scenario, "--set",
                                 f"hardware.gpu=calibration:{profile}", "--json", timeout=120,
                                 out=out, name="estimate-on-profile")
    if code != 0:
        return lines + [f"  estimate on the profile: FAILED: "
                        f"{_last_line((out / 'estimate-on-profile.err').read_text())}"]
    est = json.loads(stdout)
    code, stdout, _ = _workbench("estimate", scenario, "--json", timeout=120, out=out,
                                 name="estimate-on-catalog")
    cat = json.loads(stdout) if code == 0 else None
    lines.append(f"  {scenario}: step {est['time']['step']:.3f} s on the profile"
                 + (f", {cat['time']['step']:.3f} s on the catalogue's "
                    f"{cat['scenario']['gpu']}" if cat else ""))
    return lines


def monitor(scenario: str, out: Path) -> list[str]:
    """`workbench monitor` for a few seconds, its /metrics read once."""
    p = subprocess.Popen([sys.executable, "-m", "workbench", "monitor", scenario, "--port", "0",
                          "--duration", "30", "--interval", "1"], cwd=ROOT, env=_env(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(ln) for ln in p.stderr], daemon=True).start()
    url, seen = None, []
    try:
        deadline = time.time() + 60
        while url is None and time.time() < deadline:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.time()))
            except queue.Empty:
                break
            seen.append(line.rstrip())
            hit = re.search(r"metrics: (http\S+)", line)
            url = hit.group(1) if hit else None
        if url is None:
            return [f"monitor: FAILED: no metrics URL (stderr: {' | '.join(seen)[-200:]})"]
        time.sleep(3)                                   # a few telemetry samples
        text = urllib.request.urlopen(url, timeout=10).read().decode()
    finally:
        _stop(p)
    (out / "monitor.txt").write_text(text)
    gpu = [ln for ln in text.splitlines() if ln.startswith("workbench_gpu_")]
    return [f"monitor: {url}: {len(gpu)} GPU samples, e.g."] + [f"  {ln}" for ln in gpu[:6]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", action="append", default=None,
                    help=f"scenario(s) for the slice trial (default {DEFAULT_SCENARIOS[0]})")
    ap.add_argument("--steps", type=int, default=8, help="trial steps (default 8)")
    ap.add_argument("--out", default="gpu-check", help="folder for the raw outputs")
    ap.add_argument("--skip", action="append", default=[], choices=PARTS)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scenarios = args.scenario or list(DEFAULT_SCENARIOS)
    report: list[str] = []
    if "trial" not in args.skip:
        for sc in scenarios:
            report += trial(sc, args.steps, out)
    if "calibrate" not in args.skip:
        report += calibrate(scenarios[0], out)
    if "monitor" not in args.skip:
        report += monitor(scenarios[0], out)
    text = "\n".join(report)
    print(text, flush=True)
    (out / "gpu_check.txt").write_text(text + "\n")
    return 1 if "FAILED" in text else 0


if __name__ == "__main__":
    sys.exit(main())

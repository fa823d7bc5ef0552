"""Contract 2: `workbench estimate` text and JSON."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from tests.conftest import EXAMPLES, ROOT

VERDICT_KEYS = ("ok", "says", "parts", "next")
MEMORY_KEYS = {"params", "grads", "optimizer", "activations", "buffers", "total", "reserved",
               "device", "params_frozen", "paged", "device_least"}


def run(*args):
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True,
                          text=True, cwd=ROOT)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_estimate_json_has_contract_memory_keys(path):
    r = run("estimate", str(path), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    mem = out["memory"]
    assert set(mem["per_gpu"]) == MEMORY_KEYS
    for key in ("capacity", "fits", "gpu_fits", "host_per_node", "nvme_per_node"):
        assert key in mem
    assert isinstance(mem["fits"], bool) and isinstance(out["warnings"], list)
    per = mem["per_gpu"]
    # params_frozen is a share of params; paged states are outside the allocator's total
    parts = MEMORY_KEYS - {"total", "reserved", "device", "params_frozen", "paged"}
    # total is the peak: the largest phase of the step (estimate/memory/peak.py), at most the sum of
    # what each category holds
    assert per["total"] == max(mem["phases"].values())
    assert per["total"] <= sum(per[k] for k in parts) * (1 + 1e-12)
    assert mem["peak_phase"] in mem["phases"]
    assert all(math.isfinite(v) and v >= 0 for v in per.values())
    assert per["total"] <= per["reserved"] < per["device"]
    assert mem["gpu_fits"] == (per["device"] <= mem["capacity"])
    # fits counts host DDR and NVMe for offload, as the planner does
    assert mem["fits"] == (mem["gpu_fits"] and mem["host_fits"] and mem["nvme_fits"])
    v = out["verdict"]                     # contract 2, added 2026-12-07
    assert set(VERDICT_KEYS) <= set(v) and isinstance(v["ok"], bool) and v["says"]
    assert v["parts"] and all({"name", "ok", "says"} <= set(p) for p in v["parts"])
    assert all("says" in n for n in v["next"])
    assert v["ok"] == all(p["ok"] for p in v["parts"])
    assert v["ok"] <= mem["fits"]          # never ok while memory does not fit
    for key in ("step", "compute", "recompute", "bubble", "offload"):
        assert out["time"][key] >= 0
    assert set(out["time"]["comm_exposed"]) == {"dp", "tp", "pp", "cp", "ep"}
    for key in ("tokens_per_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu", "mfu", "hfu"):
        assert out["throughput"][key] > 0
    for key in ("time_to_train_s", "energy_kwh", "power_w"):
        assert out["run"][key] > 0
    assert {c["status"] for c in out["build_checks"]} <= {"pass", "warn", "fail"}


def test_estimate_text_table_names_components_and_verdict():
    r = run("estimate", str(ROOT / "examples" / "brief-8xh200-70b.yaml"))
    assert r.returncode == 0
    assert r.stdout.startswith("VERDICT: No: Llama 3.1 70B")      # the verdict comes first
    assert "\n  [FAIL] gpu memory: " in r.stdout and "\nnext steps" in r.stdout
    for word in ("params", "grads", "optimizer", "activations", "buffers", "total",
                 "DOES NOT FIT", "GiB (2^30 bytes)"):
        assert word in r.stdout


def test_set_override_changes_the_estimate():
    base = json.loads(run("estimate", str(ROOT / "examples/llama3-8b-8xh100.yaml"), "--json").stdout)
    tp = json.loads(run("estimate", str(ROOT / "examples/llama3-8b-8xh100.yaml"), "--json",
                        "--set", "parallel.tp=8", "--set", "parallel.dp=1").stdout)
    assert tp["scenario"]["layout"]["tp"] == 8
    assert tp["memory"]["per_gpu"]["params"] != base["memory"]["per_gpu"]["params"]


def test_catalog_listing():
    r = run("catalog", "gpu")
    assert r.returncode == 0 and "h200-sxm" in r.stdout
    r = run("catalog", "nonsense")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_trial_metrics_options_are_checked_with_one_line_errors():
    import socket

    base = [sys.executable, "-m", "workbench", "trial", str(ROOT / "examples/llama3-8b-8xh100.yaml"),
            "--world-size", "2", "--steps", "1"]
    bad = subprocess.run(base + ["--metrics-port", "70000"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and "--metrics-port" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        busy = subprocess.run(base + ["--metrics-port", str(held.getsockname()[1])], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
    assert busy.returncode == 2 and "is already in use" in busy.stderr
    assert len(busy.stderr.strip().splitlines()) == 1


def test_a_reader_that_closes_the_pipe_early_gets_no_traceback():
    """`workbench plan ... | head -1`: the ranked table is longer than the pipe buffer."""
    cmd = [sys.executable, "-m", "workbench", "plan", str(ROOT / "examples/llama3-8b-8xh100.yaml"),
           "--top", "2000"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    first = proc.stdout.readline()
    proc.stdout.close()                      # what `head -1` does after its line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert first.startswith(b"Llama 3.1 8B") and "Traceback" not in err and err == ""

"""The monitoring artefacts (``workbench export --to grafana`` / ``--to prometheus-rules``)
checked against the metric contract (``workbench.monitor.metrics.METRICS``) and Prometheus's
own ``promtool``: the dashboard queries only contract series and documented DCGM fields, and
every query parses as PromQL; the rules pass ``promtool check rules`` and fire (and stay quiet)
where the thresholds say, under ``promtool test rules``; the exposition of a filled
``MetricSet`` passes ``promtool check metrics``.

promtool comes with Debian's ``prometheus`` package (``./dev.sh test`` installs it); the
promtool tests install it when missing and they can (root, apt-get), else skip saying so.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from workbench.export import TARGETS, export
from workbench.export import prometheus_rules as rules
from workbench.export.grafana import DCGM_EXPORTER, GPU_SOURCES, NVML
from workbench.monitor.metrics import BY_NAME, METRICS, MetricSet
from workbench.scenario import load_scenario

EXAMPLE = ROOT / "examples" / "llama3-8b-8xh100.yaml"
NAME = re.compile(r"\b(?:workbench|DCGM_FI)_[A-Za-z0-9_]+")
# The DCGM exporter fields the GPU panels may read (the list; metrics.py pairs each
# with the workbench series it stands in for)
DCGM_FIELDS = {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_FB_USED",
               "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES",
               "DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_PROF_NVLINK_RX_BYTES"}
UNITS = {"s", "bytes", "percentunit", "celsius", "watt", "Bps", "short", "none"}
PROMTOOL = "/usr/bin/promtool"


# ---------------------------------------------------------------- promtool
@pytest.fixture(scope="session")
def promtool() -> str:
    """promtool's path, installing Debian's prometheus package once when it is missing and
    this user can (root with apt-get); otherwise skip, saying why."""
    found = shutil.which("promtool") or (PROMTOOL if os.access(PROMTOOL, os.X_OK) else None)
    if found:
        return found
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        pytest.skip("promtool is missing and cannot be installed here (needs root and apt-get: "
                    "apt-get install prometheus, or run ./dev.sh test)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"],
                ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "prometheus"]):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode:
            pytest.skip(f"promtool is missing and `{' '.join(cmd)}` failed: "
                        f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    # the package starts its service where the init system allows; these tests need none
    subprocess.run(["invoke-rc.d", "prometheus", "stop"], capture_output=True)
    if not os.access(PROMTOOL, os.X_OK):
        pytest.skip("the prometheus package installed no /usr/bin/promtool")
    return PROMTOOL


def run_promtool(promtool: str, *args: str, stdin: str | None = None,
                 cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([promtool, *args], input=stdin, capture_output=True, text=True,
                          cwd=cwd, timeout=120)


# ---------------------------------------------------------------- the dashboard
@pytest.fixture(scope="module")
def board() -> dict:
    return json.loads(export(load_scenario(EXAMPLE), "grafana"))


def panels(board: dict) -> list[dict]:
    """Every panel but rows (and the panels of collapsed rows)."""
    out = []
    for p in board["panels"]:
        if p["type"] == "row":
            out += p.get("panels", [])
        else:
            out.append(p)
    return out


def expressions(board: dict) -> list[str]:
    return [t["expr"] for p in panels(board) for t in p["targets"]]


def substituted(expr: str, gpu_source: str) -> str:
    """The PromQL Grafana sends for ``expr`` with example variable values."""
    for var, value in (("$__rate_interval", "1m"), ("$job", "run"), ("$dcgm_hostname", ".+"),
                       ("$gpu_source", gpu_source)):
        expr = expr.replace(var, value)
    assert "$" not in expr, expr
    return expr


def test_dashboard_title_names_the_model_and_the_gpus(board):
    s = load_scenario(EXAMPLE)
    assert s.model.name in board["title"] and f"{s.hardware.world} GPUs" in board["title"]
    assert board["uid"] and len(board["uid"]) <= 40


def test_dashboard_queries_only_contract_series_and_dcgm_fields(board):
    names = {n for e in expressions(board) for n in NAME.findall(e)}
    unknown = {n for n in names if not (n in BY_NAME or n in DCGM_FIELDS)}
    assert not unknown, f"not in METRICS nor a DCGM field: {sorted(unknown)}"
    # every GPU series has its DCGM stand-in on the dashboard, and every run/plan series shows
    gpu = {m.name for m in METRICS if m.name.startswith("workbench_gpu_")}
    assert gpu <= names and DCGM_FIELDS <= names
    unshown = {m.name for m in METRICS} - names
    assert not unshown, f"contract series no panel shows: {sorted(unshown)}"


def test_every_panel_has_a_title_a_unit_and_the_datasource_variable(board):
    for p in panels(board):
        assert p.get("title"), p
        assert p["fieldConfig"]["defaults"].get("unit") in UNITS, p["title"]
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}" and t["refId"], p["title"]
    ids = [p["id"] for p in board["panels"]] + [q["id"] for p in board["panels"]
                                                  for q in p.get("panels", [])]
    assert len(ids) == len(set(ids)), "panel ids repeat"


def test_datasource_and_gpu_source_variables(board):
    variables = {v["name"]: v for v in board["templating"]["list"]}
    ds = variables["datasource"]
    assert (ds["type"], ds["query"]) == ("datasource", "prometheus")
    src = variables["gpu_source"]
    assert src["type"] == "custom"
    assert [(o["text"], o["value"]) for o in src["options"]] == list(GPU_SOURCES)
    # Grafana rebuilds a custom variable's options from its query: "text : value, ..."
    assert [tuple(x.strip() for x in o.split(" : ")) for o in src["query"].split(",")] \
        == list(GPU_SOURCES)
    # every query that names a GPU series is gated to its source, and only those are
    for e in expressions(board):
        names = NAME.findall(e)
        if any(n.startswith("DCGM_FI_") for n in names):
            assert e.endswith(f"and on() (vector($gpu_source) == {DCGM_EXPORTER})"), e
        elif any(n.startswith("workbench_gpu_") and n != "workbench_gpu_capacity_bytes"
                 for n in names):
            assert e.endswith(f"and on() (vector($gpu_source) == {NVML})"), e
        else:
            assert "$gpu_source" not in e, e


def test_every_dashboard_query_is_valid_promql(board, promtool, tmp_path):
    """promtool parses each query (as a recording rule) with either GPU source selected."""
    exprs = expressions(board)
    doc = {"groups": [{"name": f"dashboard-{src}", "rules": [
        {"record": f"dashboard:q{i}", "expr": substituted(e, src)} for i, e in enumerate(exprs)]}
        for src in (NVML, DCGM_EXPORTER)]}
    path = tmp_path / "dashboard_queries.yml"
    path.write_text(yaml.safe_dump(doc, width=10_000))
    done = run_promtool(promtool, "check", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


# ---------------------------------------------------------------- the alert rules
@pytest.fixture(scope="module")
def rules_text() -> str:
    return export(load_scenario(EXAMPLE), "prometheus-rules")


def test_rules_names_thresholds_labels_and_annotations(rules_text):
    (group,) = yaml.safe_load(rules_text)["groups"]
    by_name = {r["alert"]: r for r in group["rules"]}
    assert set(by_name) == {"WorkbenchMemoryAbovePlan", "WorkbenchStepTimeAbovePlan",
                            "WorkbenchGPUTemperatureHigh", "WorkbenchNoStep"}
    # the thresholds the issue sets, written into the expressions
    assert (rules.MEMORY_OVER_PLAN, rules.STEP_TIME_OVER_PLAN, rules.GPU_TEMPERATURE_CELSIUS,
            rules.NO_STEP_SECONDS) == (1.10, 1.25, 85, 300)
    assert "1.1 * " in by_name["WorkbenchMemoryAbovePlan"]["expr"]
    assert 'workbench_memory_bytes{kind="peak"}' in by_name["WorkbenchMemoryAbovePlan"]["expr"]
    assert "1.25 * " in by_name["WorkbenchStepTimeAbovePlan"]["expr"]
    assert by_name["WorkbenchGPUTemperatureHigh"]["expr"].endswith("> 85")
    assert by_name["WorkbenchNoStep"]["expr"] == \
        "time() - workbench_last_step_timestamp_seconds > 300"
    for r in group["rules"]:
        names = set(NAME.findall(r["expr"]))
        assert names and names <= set(BY_NAME), r["alert"]
        assert r["labels"]["severity"] in {"warning", "critical"}
        ann = r["annotations"]
        assert "{{ $labels." in ann["summary"] and "{{ $value" in ann["description"], r["alert"]
    # the memory alert says what it compares, and why not the plan's total
    assert "buffers" in by_name["WorkbenchMemoryAbovePlan"]["annotations"]["description"]


def test_promtool_checks_the_rules(rules_text, promtool, tmp_path):
    path = tmp_path / "workbench.rules.yml"
    path.write_text(rules_text)
    done = run_promtool(promtool, "check", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 4 rules found" in done.stdout


def _series(name: str, labels: dict, values: str) -> dict:
    inner = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


def test_promtool_alerts_fire_above_the_thresholds_only(rules_text, promtool, tmp_path):
    """``promtool test rules`` on synthetic series: each alert fires for the series above its
    threshold and not for the one at or below it. Annotations are dropped from the rules under
    test (promtool would compare their rendered text; the expressions are what is tested)."""
    doc = yaml.safe_load(rules_text)
    for r in doc["groups"][0]["rules"]:
        r.pop("annotations")
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(doc, width=10_000))
    run = {"job": "run", "instance": "a"}
    plan = {"params": 40, "grads": 20, "optimizer": 20, "activations": 20, "buffers": 50,
            "total": 150}
    flat = "+0x15"
    series = [_series("workbench_planned_memory_bytes", {**run, "kind": k}, f"{v}{flat}")
              for k, v in plan.items()]
    over_mem = 100 * rules.MEMORY_OVER_PLAN      # the plan without buffers is 100
    series += [_series("workbench_memory_bytes", {**run, "rank": "0", "kind": "peak"},
                       f"{over_mem + 5}{flat}"),
               _series("workbench_memory_bytes", {**run, "rank": "1", "kind": "peak"},
                       f"{over_mem - 5}{flat}")]
    step = 10
    series += [_series("workbench_planned_step_seconds", run, f"{step}{flat}"),
               _series("workbench_step_seconds", {**run, "rank": "0"},
                       f"{step * rules.STEP_TIME_OVER_PLAN + 0.5}{flat}"),
               _series("workbench_step_seconds", {**run, "rank": "1"},
                       f"{step * rules.STEP_TIME_OVER_PLAN}{flat}"),
               # a plan of 0 is an unset plan (a CPU trial): never an alert
               _series("workbench_planned_step_seconds", {"job": "trial", "instance": "b"},
                       f"0{flat}"),
               _series("workbench_step_seconds", {"job": "trial", "instance": "b", "rank": "0"},
                       f"5{flat}")]
    hot = rules.GPU_TEMPERATURE_CELSIUS
    series += [_series("workbench_gpu_temperature_celsius", {**run, "gpu": g}, f"{v}{flat}")
               for g, v in (("0", hot + 1), ("1", hot))]
    # rank 0 steps every minute; rank 1 stopped at t = 60 s. At 10 m: 0 s and 540 s ago.
    series += [_series("workbench_last_step_timestamp_seconds", {**run, "rank": "0"},
                       "0+60x15"),
               _series("workbench_last_step_timestamp_seconds", {**run, "rank": "1"},
                       f"60{flat}")]
    at = "10m"
    tests = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "alert_rule_test": [
            {"eval_time": at, "alertname": "WorkbenchMemoryAbovePlan", "exp_alerts": [
                {"exp_labels": {**run, "rank": "0", "kind": "peak", "severity": "warning"}}]},
            {"eval_time": at, "alertname": "WorkbenchStepTimeAbovePlan", "exp_alerts": [
                {"exp_labels": {**run, "rank": "0", "severity": "warning"}}]},
            {"eval_time": at, "alertname": "WorkbenchGPUTemperatureHigh", "exp_alerts": [
                {"exp_labels": {**run, "gpu": "0", "severity": "warning"}}]},
            {"eval_time": at, "alertname": "WorkbenchNoStep", "exp_alerts": [
                {"exp_labels": {**run, "rank": "1", "severity": "critical"}}]},
        ]}]}
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, width=10_000))
    done = run_promtool(promtool, "test", "rules", "tests.yml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


# ---------------------------------------------------------------- the exposition
def test_promtool_checks_the_metrics_exposition(promtool):
    from workbench.estimate import estimate

    est = estimate(load_scenario(EXAMPLE))
    m = MetricSet()
    m.set_plan(est)
    per_gpu = est.memory.per_gpu
    memory = {"params": per_gpu.params, "grads": per_gpu.grads, "optimizer": per_gpu.optimizer,
              "activations": per_gpu.activations}
    memory["peak"] = sum(memory.values())
    for rank in range(2):
        m.record_step(rank, est.time.step, 1_700_000_000.0 + rank, memory, est.time.volume,
                      loss=2.5)
    m.set_throughput(est.run.tokens_per_s, est.run.mfu)
    m["workbench_gpu_temperature_celsius"].labels("0").set(60)
    m["workbench_gpu_nvlink_bytes_total"].labels("0", "tx").inc(1e9)
    text = m.exposition().decode()
    assert "workbench_planned_comm_bytes_per_step" in text and "workbench_steps_total" in text
    done = run_promtool(promtool, "check", "metrics", stdin=text)
    assert done.returncode == 0, done.stdout + done.stderr


# ---------------------------------------------------------------- the CLI
@pytest.mark.parametrize("target", ["grafana", "prometheus-rules"])
def test_cli_exports_the_monitoring_targets(target):
    assert target in TARGETS
    done = subprocess.run([sys.executable, "-m", "workbench", "export", str(EXAMPLE),
                           "--to", target], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    parsed = json.loads(done.stdout) if target == "grafana" else yaml.safe_load(done.stdout)
    assert parsed and done.stderr == ""

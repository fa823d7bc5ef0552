"""`workbench monitor`, the NVML telemetry mapping and the step reporter.

Without a GPU: the monitor runs for real (a subprocess: it warns once, serves the plan, stops on
SIGINT and SIGTERM, refuses a port in use, binds 127.0.0.1 only); its endpoint serves GET/HEAD
/metrics only and drops silent, trickling and surplus connections; the NVML mapping is checked
against a fake ``pynvml`` module, and the real "library not found" path on this machine. No
test asserts a duration: step times are read back from the registry and compared with what
was derived from them.
"""
from __future__ import annotations

import ctypes
import gzip
import http.client
import io
import signal
import socket
import subprocess
import sys
import threading
import time
import types
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from workbench.monitor.metrics import METRICS, MetricSet

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "examples" / "llama3-8b-8xh100.yaml"
WAIT_S = 120          # generous limits for a shared 2-core machine; never asserted


def _plan():
    from workbench.estimate import estimate
    from workbench.scenario import load_scenario

    return estimate(load_scenario(SCENARIO))


def _nvml_library_loads() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")     # what pynvml's nvmlInit loads on Linux
    except OSError:
        return False
    return True


def _scrape(url: str) -> dict:
    """{(name, sorted labels): value} of one scrape."""
    with urllib.request.urlopen(url, timeout=30) as r:
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


class _Monitor:
    """`workbench monitor` in a subprocess, its stderr read line by line in a thread."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "workbench", "monitor", str(SCENARIO), *args], cwd=ROOT,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("metrics: "):
                self.ready.set()
        self.ready.set()           # ended without a URL: let the test fail on the lines

    @property
    def url(self) -> str:
        assert self.ready.wait(WAIT_S), self.lines
        urls = [ln.removeprefix("metrics: ") for ln in self.lines if ln.startswith("metrics: ")]
        assert urls, f"no URL printed; stderr: {self.lines}"
        return urls[0]

    def finish(self) -> int:
        rc = self.proc.wait(timeout=WAIT_S)
        self._reader.join(timeout=WAIT_S)
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_monitor_serves_the_plan_and_stops_on_signal(sig):
    plan = _plan()
    m = _Monitor("--port", "0", "--interval", "0.05")
    try:
        url = m.url
        metrics = _scrape(url)
        assert metrics[("workbench_planned_step_seconds", ())] == pytest.approx(
            plan.time.step, rel=1e-9)
        assert metrics[("workbench_gpu_capacity_bytes", ())] == pytest.approx(
            plan.memory.capacity, rel=1e-9)
        assert metrics[("workbench_planned_memory_bytes", (("kind", "total"),))] == \
            pytest.approx(plan.memory.per_gpu.as_dict()["total"], rel=1e-9)
        _scrape(url)               # a second scrape: the sampling loop has gone round meanwhile

        # 127.0.0.1 only, on the port it printed
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        listening = [c for c in psutil.Process(m.proc.pid).net_connections(kind="inet")
                     if c.status == psutil.CONN_LISTEN]
        assert [(c.laddr.ip, c.laddr.port) for c in listening] == [("127.0.0.1", port)]
        assert psutil.Process(m.proc.pid).children(recursive=True) == []

        m.proc.send_signal(sig)
        assert m.finish() == 0, m.lines
    finally:
        m.kill()
    assert m.proc.pid not in {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(urllib.error.URLError):      # the endpoint is gone with it
        urllib.request.urlopen(url, timeout=5)
    warnings = [ln for ln in m.lines if ln.startswith("GPU telemetry off")]
    if _nvml_library_loads():
        assert warnings == [] or len(warnings) == 1
    else:          # this machine: no NVIDIA driver -> exactly one line, the exact text
        assert warnings == ["GPU telemetry off: NVML library not found"]
    assert not any("Traceback" in ln for ln in m.lines), m.lines


@pytest.mark.slow
def test_monitor_port_in_use_is_one_line_exit_2():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        m = _Monitor("--port", str(port), "--duration", "5")
        try:
            rc = m.finish()
        finally:
            m.kill()
    assert rc == 2
    assert len(m.lines) == 1, m.lines
    assert m.lines[0].startswith("workbench: ")
    assert "--port" in m.lines[0] and f"127.0.0.1:{port} is already in use" in m.lines[0]


@pytest.mark.parametrize("args, option", [(["--interval", "0"], "--interval"),
                                          (["--duration", "-1"], "--duration"),
                                          (["--port", "70000"], "--port"),
                                          (["--host", ""], "--host"),
                                          (["--host", "  "], "--host")])
def test_monitor_bad_option_is_one_line_exit_2(capsys, args, option):
    from workbench.cli import main

    try:
        rc = main(["monitor", str(SCENARIO), *args])
    except SystemExit as exc:      # refused by the parser's own range check (argparse exits)
        rc = exc.code
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    # "workbench: ..." from the command, "workbench monitor: error: ..." from the parser
    assert len(err) == 1 and err[0].startswith("workbench") and option in err[0]
    assert "Traceback" not in err[0]


def test_run_monitor_leaves_no_thread_and_restores_signals():
    from workbench.monitor.monitor import run_monitor
    from workbench.scenario import load_scenario

    scenario = load_scenario(SCENARIO)
    before = set(threading.enumerate())
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    err = io.StringIO()
    assert run_monitor(scenario, port=0, interval=0.05, duration=0.2, err=err) == 0
    assert set(threading.enumerate()) == before
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers
    url = [ln for ln in err.getvalue().splitlines() if ln.startswith("metrics: ")][0]
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url.removeprefix("metrics: "), timeout=5)


# -- the endpoint against hostile clients ----------------------------------------------------

def _endpoint():
    from workbench.monitor.exporter import Endpoint

    metrics = MetricSet()
    metrics.set_plan(_plan())
    return Endpoint(metrics)


def _request(port: int, method: str, path: str) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path)
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def _read_until_closed(sock: socket.socket, within: float) -> bytes | None:
    """What the server sent before it closed ``sock`` (EOF or a reset), or None if it had not
    closed it within ``within`` seconds of silence."""
    sock.settimeout(within)
    got = b""
    try:
        while chunk := sock.recv(4096):
            got += chunk
    except ConnectionResetError:
        pass
    except TimeoutError:
        return None
    return got


@pytest.mark.slow
def test_endpoint_drops_silent_connections_and_keeps_serving(monkeypatch):
    from workbench.monitor import exporter

    # the per-read timeout shortened from its 10 s: the behaviour, not the figure, is tested
    timeout_s = 3.0
    monkeypatch.setattr(exporter._Handler, "timeout", timeout_s)
    with _endpoint() as ep:
        silent = socket.create_connection(("127.0.0.1", ep.port), timeout=30)
        partial = socket.create_connection(("127.0.0.1", ep.port), timeout=30)
        try:
            partial.sendall(b"GET /metr")               # half a request line, then nothing
            # while both hold a server thread, a scrape still answers
            assert "workbench_planned_step_seconds" in {n for n, _ in _scrape(ep.url)}
            for sock in (silent, partial):          # dropped without an answer
                assert _read_until_closed(sock, timeout_s + 20) == b""
        finally:
            silent.close()
            partial.close()
        assert "workbench_planned_step_seconds" in {n for n, _ in _scrape(ep.url)}


def test_endpoint_cuts_a_trickling_connection(monkeypatch):
    from workbench.monitor import exporter

    # a byte every 0.2 s never trips the per-read timeout; the whole-connection limit cuts it
    monkeypatch.setattr(exporter, "CONNECTION_LIMIT_S", 1.0)
    with _endpoint() as ep, socket.create_connection(("127.0.0.1", ep.port), timeout=30) as s:
        cut = False
        for byte in b"GET /metrics" * WAIT_S:
            try:
                s.sendall(bytes([byte]))
                s.settimeout(0.2)
                cut = s.recv(4096) == b""    # EOF: cut (no answer to half a request line)
            except TimeoutError:
                continue
            except ConnectionError:
                cut = True
            break
        assert cut
        assert "workbench_planned_step_seconds" in {n for n, _ in _scrape(ep.url)}


def test_endpoint_serves_only_get_and_head_of_metrics():
    with _endpoint() as ep:
        status, headers, body = _request(ep.port, "GET", "/metrics?x=1")
        assert status == 200
        names = {f.name for f in text_string_to_metric_families(body.decode())}
        assert {"workbench_planned_step_seconds", "workbench_gpu_capacity_bytes"} <= names
        status, headers, body = _request(ep.port, "HEAD", "/metrics")
        assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0
        for path in ("/other", "/", "/metrics/", "/favicon.ico", "/metricsx?y=2"):
            status, _, body = _request(ep.port, "GET", path)
            assert (status, body) == (404, b"not found; the metrics are at /metrics\n"), path
        for method in ("POST", "PUT", "DELETE", "OPTIONS"):
            status, headers, body = _request(ep.port, method, "/metrics")
            assert status == 405 and headers["Allow"] == "GET, HEAD", method
            assert body == b"method not allowed; use GET /metrics\n"
        # prometheus_client's content negotiation is kept: gzip, and OpenMetrics on request
        req = urllib.request.Request(ep.url, headers={
            "Accept-Encoding": "gzip", "Accept": "application/openmetrics-text; version=1.0.0"})
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.headers["Content-Encoding"] == "gzip"
            assert r.headers["Content-Type"].startswith("application/openmetrics-text")
            assert gzip.decompress(r.read()).endswith(b"# EOF\n")


def test_endpoint_caps_connections_and_close_cuts_them():
    from workbench.monitor.exporter import MAX_CONNECTIONS

    before = set(threading.enumerate())
    ep = _endpoint()
    idle = [socket.create_connection(("127.0.0.1", ep.port), timeout=30)
            for _ in range(MAX_CONNECTIONS)]
    try:
        # every slot is held: the next connection is closed unanswered, not given a thread
        with socket.create_connection(("127.0.0.1", ep.port), timeout=30) as extra:
            try:
                extra.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            except ConnectionError:         # closed before the request went out: refused too
                pass
            assert _read_until_closed(extra, WAIT_S) == b""
        idle.pop().close()          # a slot frees once the server has seen that EOF
        status = None
        for _ in range(WAIT_S * 10):
            try:
                status, _, _ = _request(ep.port, "GET", "/metrics")
                break
            except ConnectionError:            # still full: http.client.RemoteDisconnected
                time.sleep(0.1)
        assert status == 200
        ep.close()                  # cuts the idle connections still open, ends their threads
        assert all(_read_until_closed(sock, WAIT_S) == b"" for sock in idle)
        assert set(threading.enumerate()) == before
    finally:
        for sock in idle:
            sock.close()
        ep.close()


@pytest.mark.parametrize("host, says", [
    ("", "an address to listen on is needed"),
    (" \t", "an address to listen on is needed"),
    ("192.0.2.1", "is not an address of this machine"),        # TEST-NET-1: never local
    ("x" * 70, "is not a valid host name"),
])
def test_endpoint_bad_host_is_one_clear_problem(host, says):
    from workbench.errors import ScenarioError
    from workbench.monitor.exporter import Endpoint

    with pytest.raises(ScenarioError) as exc:
        Endpoint(MetricSet(), host, 0)
    line = exc.value.one_line()
    assert line.startswith("--host: ") and says in line
    assert "127.0.0.1 for this machine only, or 0.0.0.0 for every interface" in line


def test_check_options_refuses_an_empty_host():
    from workbench.errors import ScenarioError
    from workbench.monitor.monitor import check_options

    check_options(0, 1.0, None, "127.0.0.1")
    with pytest.raises(ScenarioError) as exc:
        check_options(0, 1.0, None, "")
    assert exc.value.problems[0].path == "--host"
    assert "give 127.0.0.1 for this machine only, or 0.0.0.0 for every interface" in str(exc.value)


def test_run_monitor_non_local_host_is_one_line_exit_2():
    from workbench.monitor.monitor import run_monitor
    from workbench.scenario import load_scenario

    err = io.StringIO()
    assert run_monitor(load_scenario(SCENARIO), host="192.0.2.1", port=0, duration=0,
                       err=err) == 2
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("workbench: cannot serve metrics: --host: ")


# -- NVML --------------------------------------------------------------------------------------

def test_open_telemetry_without_the_driver_says_library_not_found():
    from workbench.monitor.nvml import open_telemetry

    if _nvml_library_loads():
        pytest.skip("libnvidia-ml.so.1 loads here: not the no-driver case")
    assert open_telemetry() == (None, "NVML library not found")


class _FakeNVML(types.ModuleType):
    """The parts of pynvml the telemetry uses, over a mutable table of readings. GPU 0 has two
    NVLinks, GPU 1 none and no power sensor; utilisation of GPU 1 fails with another error."""

    NVML_SUCCESS = 0
    NVML_TEMPERATURE_GPU = 0
    NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES = 0, 1
    NVML_FI_DEV_NVLINK_LINK_COUNT = 91
    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 138, 139

    class NVMLError(Exception):
        pass

    class NVMLError_LibraryNotFound(NVMLError):
        pass

    class NVMLError_NotSupported(NVMLError):
        pass

    def __init__(self, init_error: Exception | None = None) -> None:
        super().__init__("pynvml")
        self.init_error = init_error
        self.shutdowns = 0
        self.gpus = [
            {"temp": 61, "mw": 412_345, "used": 70 * 2**30, "util": 87, "pcie": (2_000, 3_000),
             "links": 2, "nvlink": {("tx", 0): 1_000, ("tx", 1): 2_000, ("rx", 0): 5_000,
                                    ("rx", 1): 7_000}, "uuid": "GPU-aaaa"},
            {"temp": 40, "mw": None, "used": 2**30, "util": None, "pcie": (10, 20),
             "links": None, "nvlink": {}, "uuid": "GPU-bbbb"},
        ]
        self.down_link = None          # (gpu, link) whose field reads report an error

    def nvmlInit(self):
        if self.init_error is not None:
            raise self.init_error

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return [g["uuid"] for g in self.gpus].index(uuid)

    def nvmlDeviceGetTemperature(self, h, sensor):
        assert sensor == self.NVML_TEMPERATURE_GPU
        return self.gpus[h]["temp"]

    def nvmlDeviceGetPowerUsage(self, h):
        if self.gpus[h]["mw"] is None:
            raise self.NVMLError_NotSupported()
        return self.gpus[h]["mw"]

    def nvmlDeviceGetMemoryInfo(self, h):
        return types.SimpleNamespace(used=self.gpus[h]["used"], total=141 * 10**9)

    def nvmlDeviceGetUtilizationRates(self, h):
        if self.gpus[h]["util"] is None:
            raise self.NVMLError("GPU is lost")
        return types.SimpleNamespace(gpu=self.gpus[h]["util"], memory=0)

    def nvmlDeviceGetPcieThroughput(self, h, counter):
        return self.gpus[h]["pcie"][counter]

    def nvmlDeviceGetFieldValues(self, h, fields):
        g = self.gpus[h]
        if g["links"] is None:
            raise self.NVMLError_NotSupported()
        out = []
        for f in fields:
            if f == self.NVML_FI_DEV_NVLINK_LINK_COUNT:          # unsigned int
                out.append(types.SimpleNamespace(nvmlReturn=0, valueType=1,
                                                 value=types.SimpleNamespace(uiVal=g["links"])))
                continue
            fid, link = f
            d = "tx" if fid == self.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX else "rx"
            ok = (h, link) != self.down_link
            out.append(types.SimpleNamespace(
                nvmlReturn=0 if ok else 3, valueType=3,
                value=types.SimpleNamespace(ullVal=g["nvlink"][(d, link)])))
        return out


def _value(metrics: MetricSet, name: str, **labels) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_fake_nvml_maps_every_series(monkeypatch):
    from workbench.monitor.nvml import open_telemetry

    fake = _FakeNVML()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    said: list[str] = []
    tel, reason = open_telemetry(warn=said.append)
    assert reason == "" and tel.count == 2
    m = MetricSet()
    tel.sample(m)
    assert _value(m, "workbench_gpu_temperature_celsius", gpu="0") == 61
    assert _value(m, "workbench_gpu_power_watts", gpu="0") == pytest.approx(412.345)
    assert _value(m, "workbench_gpu_memory_used_bytes", gpu="0") == 70 * 2**30
    assert _value(m, "workbench_gpu_utilization_ratio", gpu="0") == pytest.approx(0.87)
    assert _value(m, "workbench_gpu_pcie_bytes_per_second", gpu="0", direction="tx") == 2_000 * 1024
    assert _value(m, "workbench_gpu_pcie_bytes_per_second", gpu="0", direction="rx") == 3_000 * 1024
    # the first NVLink reading is the base: counters count since driver load
    for d in ("tx", "rx"):
        assert _value(m, "workbench_gpu_nvlink_bytes_total", gpu="0", direction=d) == 0
    # GPU 1: no power sensor, no NVLink -> no series, silently; a lost GPU is said once
    assert _value(m, "workbench_gpu_temperature_celsius", gpu="1") == 40
    assert _value(m, "workbench_gpu_power_watts", gpu="1") is None
    assert _value(m, "workbench_gpu_utilization_ratio", gpu="1") is None
    assert _value(m, "workbench_gpu_nvlink_bytes_total", gpu="1", direction="tx") is None

    g = fake.gpus[0]["nvlink"]
    g[("tx", 0)] += 100
    g[("tx", 1)] += 50
    g[("rx", 1)] += 10
    tel.sample(m)
    tx = _value(m, "workbench_gpu_nvlink_bytes_total", gpu="0", direction="tx")
    assert tx == 150 * 1024
    assert _value(m, "workbench_gpu_nvlink_bytes_total", gpu="0", direction="rx") == 10 * 1024

    g[("tx", 0)] = 7            # a counter reset (driver reload): no negative traffic
    fake.down_link = (0, 1)     # a link whose reading fails is skipped in that sample ...
    g[("tx", 1)] += 1_000
    tel.sample(m)
    assert _value(m, "workbench_gpu_nvlink_bytes_total", gpu="0", direction="tx") == tx
    fake.down_link = None       # ... and its traffic counted once it reads again (cumulative)
    g[("tx", 0)] += 3           # after the reset, growth counts again from the new base
    tel.sample(m)
    assert _value(m, "workbench_gpu_nvlink_bytes_total", gpu="0", direction="tx") == (
        tx + (3 + 1_000) * 1024)

    assert said == ["GPU telemetry: GPU 1 utilization: GPU is lost"]    # once in 4 samples
    assert tel.memory_used(uuid="GPU-bbbb") == 2**30
    tel.close()
    assert fake.shutdowns == 1


@pytest.mark.parametrize("error, reason", [
    (_FakeNVML.NVMLError_LibraryNotFound("NVML Shared Library Not Found"),
     "NVML library not found"),
    (_FakeNVML.NVMLError("Driver Not Loaded"), "Driver Not Loaded"),
])
def test_fake_nvml_init_errors_turn_telemetry_off(monkeypatch, error, reason):
    from workbench.monitor.monitor import run_monitor
    from workbench.monitor.nvml import open_telemetry
    from workbench.scenario import load_scenario

    monkeypatch.setitem(sys.modules, "pynvml", _FakeNVML(init_error=error))
    assert open_telemetry() == (None, reason)
    err = io.StringIO()
    assert run_monitor(load_scenario(SCENARIO), port=0, interval=0.05, duration=0.1, err=err) == 0
    lines = err.getvalue().splitlines()
    said = [ln for ln in lines if ln.startswith("GPU telemetry")]
    assert said == [f"GPU telemetry off: {reason}"]


# -- the step reporter -------------------------------------------------------------------------

def test_reporter_does_not_import_torch():
    code = "import sys, workbench.monitor.reporter; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=WAIT_S)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_reporter_in_a_cpu_loop():
    import time

    from workbench.estimate.time.kernels import peak_flops
    from workbench.estimate.model.flops import model_flops_per_step
    from workbench.monitor.reporter import StepReporter

    plan = _plan()
    s = plan.scenario
    r = StepReporter(SCENARIO, rank=3, port=0)
    try:
        assert r.step(tokens=r.tokens_per_step) is None      # the first call starts the clock
        tokens = [r.tokens_per_step, r.tokens_per_step // 2, 1000]
        for i, n in enumerate(tokens):
            time.sleep(0.01)
            rec = r.step(tokens=n, loss=2.5 - i)
        m = r.metrics
        assert _value(m, "workbench_steps_total", rank="3") == len(tokens)
        seconds = _value(m, "workbench_step_seconds", rank="3")
        assert seconds == rec.seconds
        assert _value(m, "workbench_tokens_per_second") == pytest.approx(tokens[-1] / seconds,
                                                                          rel=1e-12)
        tr, hw = s.training, s.hardware
        flops = model_flops_per_step(s.model, tr.seq_len, tr.global_batch) * tokens[-1] / (
            tr.seq_len * tr.global_batch)
        assert _value(m, "workbench_mfu_ratio") == pytest.approx(
            flops / (seconds * hw.world * peak_flops(hw.gpu, tr.precision)), rel=1e-9)
        assert _value(m, "workbench_loss") == 2.5 - (len(tokens) - 1)
        assert _value(m, "workbench_last_step_timestamp_seconds", rank="3") is not None
        assert _value(m, "workbench_planned_step_seconds") == pytest.approx(plan.time.step,
                                                                           rel=1e-9)
        # on CPU: no GPU memory kinds at all
        assert not [x for fam in m.registry.collect() if fam.name == "workbench_memory_bytes"
                    for x in fam.samples]
        scraped = _scrape(r.url)          # the same figures over HTTP
        assert scraped[("workbench_steps_total", (("rank", "3"),))] == len(tokens)
        url = r.url
    finally:
        r.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=5)


def test_reporter_exports_gpu_memory_kinds_with_fake_cuda_and_nvml(monkeypatch):
    from workbench.monitor.reporter import StepReporter

    cuda = types.SimpleNamespace(
        is_available=lambda: True, current_device=lambda: 0, synchronize=lambda: None,
        max_memory_allocated=lambda dev: 11 * 2**30, max_memory_reserved=lambda dev: 13 * 2**30,
        get_device_properties=lambda dev: types.SimpleNamespace(uuid="bbbb"))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    monkeypatch.setitem(sys.modules, "pynvml", _FakeNVML())
    r = StepReporter(SCENARIO, rank=0)
    try:
        r.start()
        rec = r.step(tokens=r.tokens_per_step)
        assert rec.memory == {"allocated": 11 * 2**30, "reserved": 13 * 2**30, "device": 2**30}
        for kind, v in rec.memory.items():
            assert _value(r.metrics, "workbench_memory_bytes", rank="0", kind=kind) == v
    finally:
        r.close()


def test_reporter_without_cuda_exports_no_memory_kinds(monkeypatch):
    from workbench.monitor.reporter import StepReporter

    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: False))
    monkeypatch.setitem(sys.modules, "torch", torch)
    with StepReporter(SCENARIO) as r:
        r.start()
        assert r.step(tokens=10).memory == {}


# -- docs --------------------------------------------------------------------------------------

def test_docs_list_every_metric():
    text = (ROOT / "docs" / "monitoring.md").read_text()
    missing = [m.name for m in METRICS if f"`{m.name}`" not in text]
    assert missing == []
    assert "monitoring-artefacts.md" in text

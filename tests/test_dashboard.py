"""The dashboard notebook: runs headless, is served by Voila, and works in a real browser."""
from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT
from workbench.estimate import estimate
from workbench.process_runner import free_port
from workbench.serve import DASHBOARD, voila_command
from workbench.scenario import load_scenario

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = ROOT / "tests" / "artifacts"


def _isolated_env(tmp: Path) -> dict:
    """Keep Jupyter and Chromium out of ~ (docs/platform.md)."""
    env = dict(os.environ)
    for var, sub in [("JUPYTER_CONFIG_DIR", "jcfg"), ("JUPYTER_DATA_DIR", "jdata"),
                     ("JUPYTER_RUNTIME_DIR", "jrun"), ("IPYTHONDIR", "ipy"),
                     ("XDG_CONFIG_HOME", "xcfg"), ("XDG_CACHE_HOME", "xcache")]:
        env[var] = str(tmp / sub)
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    return env


@pytest.mark.slow
def test_dashboard_notebook_executes_with_nbclient(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(DASHBOARD, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(
        "app.picker.value = 'llama3-8b-8xh100'\n"
        "print(app.state.valid, round(app.state.estimate.memory.per_gpu.total))"))
    old = dict(os.environ)
    os.environ.update(_isolated_env(tmp_path))
    try:
        NotebookClient(nb, timeout=120, kernel_name="python3",
                       resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    expected = estimate(load_scenario(ROOT / "examples/llama3-8b-8xh100.yaml"))
    out = nb.cells[-1].outputs[0]["text"].split()
    assert out == ["True", str(round(expected.memory.per_gpu.total))]


@pytest.fixture
def voila(tmp_path):
    """A Voila server on a free 127.0.0.1 port, stopped (with its kernels) at the end."""
    port = free_port()
    proc = subprocess.Popen(voila_command(port, cull_idle_s=120), cwd=ROOT,
                            env=_isolated_env(tmp_path), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/voila/static/voila.js", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("Voila did not start")
                time.sleep(0.3)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.slow
def test_voila_keeps_sources_private(voila):
    page = urllib.request.urlopen(voila + "/", timeout=60).read().decode()
    assert "Distributed Training Workbench" in page
    assert "App()" not in page                     # sources are stripped
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(voila + "/voila/files/notebooks/dashboard.ipynb", timeout=10)


def _require_chromium():
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("Debian's chromium is missing: ./dev.sh test installs it")
        pytest.skip("Debian's chromium is not installed")


def _chart_data(page, cls: str) -> list:
    """The plotly traces the browser is drawing in the chart with DOM class ``cls``."""
    return page.evaluate(
        "c => { const d = document.querySelector('.js-plotly-plot.' + c);"
        " return d ? d.data.map(t => ({x: Array.from(t.x || []), y: Array.from(t.y || [])}))"
        " : null; }", cls)


def _wait_chart(page, cls: str, js_test: str, arg, timeout: int = 60_000) -> None:
    page.wait_for_function(
        "([c, a]) => { const d = document.querySelector('.js-plotly-plot.' + c);"
        f" if (!d || !d.data) return false; const data = d.data; return ({js_test}); }}",
        arg=[cls, arg], timeout=timeout)


@pytest.mark.slow
def test_dashboard_in_a_real_browser(voila, tmp_path):
    """Load the page; change the GPU count and TP and see the backend's new memory and
    throughput in the charts; run a 2-rank trial and watch it arrive live, then the comparison;
    an invalid combination shows the inline message; a screenshot is saved."""
    _require_chromium()
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    brief = estimate(load_scenario(ROOT / "examples/brief-8xh200-70b.yaml"))
    four = estimate(load_scenario(ROOT / "examples/brief-8xh200-70b.yaml",
                                  ["hardware.gpus_per_node=4", "parallel.dp=4"]))
    four_tp2 = estimate(load_scenario(ROOT / "examples/brief-8xh200-70b.yaml",
                                      ["hardware.gpus_per_node=4", "parallel.dp=2",
                                       "parallel.tp=2"]))
    gib = 2 ** 30
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            # Offline: nothing outside loopback may be needed (a CDN font is aborted).
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(
                ("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:")) else r.abort())
            page.goto(voila + "/", timeout=90_000)
            page.locator(".wb-app-verdict").wait_for(timeout=90_000)
            total = "data => Math.abs(data.slice(0, 5).reduce((s, t) => s + t.y[0], 0) - a) < 1e-6"
            _wait_chart(page, "wb-memory-chart", total, brief.memory.per_gpu.total / gib)

            # GPU count: 8 -> 4 per node (dp follows), then TP 2
            box = page.locator(".wb-gpus-per-node input")
            box.fill("4")
            box.press("Enter")
            _wait_chart(page, "wb-memory-chart", total, four.memory.per_gpu.total / gib)
            step = "data => Math.abs(data[0].y[data[0].y.length - 1] - a) < 1e-9 * a"
            _wait_chart(page, "wb-step-chart", step, four.time.step)
            page.locator(".wb-tp select").select_option("2")
            _wait_chart(page, "wb-memory-chart", total, four_tp2.memory.per_gpu.total / gib)
            _wait_chart(page, "wb-step-chart", step, four_tp2.time.step)
            page.wait_for_function(
                "t => document.querySelector('.wb-app-verdict').innerText.includes(t)",
                arg=f"{four_tp2.run.tokens_per_s:,.0f} tokens/s", timeout=30_000)

            # a real 2-rank trial, streamed live, then the comparison
            page.get_by_role("tab", name="Trial", exact=True).click()
            page.locator(".wb-trial-world select").select_option("2")
            page.locator(".wb-run-trial").click()
            _wait_chart(page, "wb-trial-chart", "data[0].x.length >= 1",
                        None, 120_000)
            page.locator(".wb-compare-box table.wb-compare").wait_for(timeout=120_000)
            assert "exact" in page.locator(".wb-compare-box").inner_text()
            page.screenshot(path=str(ARTIFACTS / "dashboard-trial.png"), full_page=True)

            # an invalid combination: 6 GPUs per node cannot hold tp 2 x pp ... x dp evenly? use
            # a global batch that is not a multiple of micro-batch x dp
            page.get_by_role("tab", name="Plan", exact=True).click()
            gb = page.locator(".wb-global-batch input")
            gb.fill("3")
            gb.press("Enter")
            err = page.locator(".wb-error").first
            err.wait_for(timeout=30_000)
            assert "must be a multiple of micro_batch*dp" in err.inner_text()
            _wait_chart(page, "wb-memory-chart", total, four_tp2.memory.per_gpu.total / gib)
            page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
            assert "Traceback" not in page.content()
        finally:
            browser.close()

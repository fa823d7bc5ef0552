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
from workbench.serve import DASHBOARD, free_port, voila_command
from workbench.spec import load_scenario
from workbench.units import GB

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = ROOT / "tests" / "artifacts"


def _isolated_env(tmp: Path) -> dict:
    """Keep Jupyter and Chromium out of ~ (../shared/notes/jupyter.md)."""
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
        "editor.picker.value = 'llama3-8b-8xh100'\n"
        "print(editor.error, round(editor.estimate.memory.per_gpu.total))"))
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
    assert out == ["None", str(round(expected.memory.per_gpu.total))]


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
    assert "ScenarioEditor()" not in page          # sources are stripped
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(voila + "/voila/files/notebooks/dashboard.ipynb", timeout=10)


def _require_chromium():
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("Debian's chromium is missing: ./dev.sh test installs it")
        pytest.skip("Debian's chromium is not installed")


@pytest.mark.slow
def test_dashboard_in_a_real_browser(voila, tmp_path):
    _require_chromium()
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    brief = estimate(load_scenario(ROOT / "examples/brief-8xh200-70b.yaml"))
    h100 = estimate(load_scenario(ROOT / "examples/llama3-8b-8xh100.yaml"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            # Offline: nothing outside loopback may be needed (a CDN font is aborted).
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(
                ("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:")) else r.abort())
            page.goto(voila + "/", timeout=90_000)
            table = page.locator("table.wb-memory")
            table.wait_for(timeout=90_000)
            verdict = page.locator(".wb-verdict")
            assert f"{brief.memory.per_gpu.total / GB:,.2f} GB" in verdict.inner_text()

            page.locator(".widget-dropdown select").select_option("llama3-8b-8xh100")
            page.wait_for_function(
                "t => document.querySelector('.wb-verdict').innerText.includes(t)",
                arg=f"{h100.memory.per_gpu.total / GB:,.2f} GB", timeout=30_000)

            area = page.locator("textarea")
            area.fill(area.input_value().replace("dp: 8", "dp: 3"))
            area.press("Tab")                     # continuous_update=False syncs on blur
            err = page.locator(".wb-error")
            err.wait_for(timeout=30_000)
            assert "must equal hardware.gpus_per_node*nodes" in err.inner_text()
            assert f"{h100.memory.per_gpu.total / GB:,.2f} GB" in verdict.inner_text()
            page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
            assert "Traceback" not in page.content()
        finally:
            browser.close()

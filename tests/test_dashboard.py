"""The dashboard notebook: runs headless, is served by Voila, and works in a real browser."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.conftest import ROOT
from workbench.estimate import estimate
from workbench.process_runner import free_port
from workbench.serve import DASHBOARD, isolated_env, voila_command, wait_until_serving
from workbench.scenario import load_scenario
from workbench.units import duration_text, memory_text

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = ROOT / "tests" / "artifacts"


@pytest.mark.slow
def test_dashboard_notebook_executes_with_nbclient(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(DASHBOARD, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(
        "app.files.picker.value = 'llama3-8b-8xh100'\n"
        "print(app.state.valid, round(app.state.estimate.memory.per_gpu.total))"))
    old = dict(os.environ)
    os.environ.update(isolated_env(tmp_path))
    try:
        NotebookClient(nb, timeout=120, kernel_name="python3",
                       resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    expected = estimate(load_scenario(ROOT / "examples/llama3-8b-8xh100.yaml"))
    out = nb.cells[-1].outputs[0]["text"].split()
    assert out == ["True", str(round(expected.memory.per_gpu.total))]


@contextlib.contextmanager
def _voila_server(tmp: Path, cull_idle_s: int = 120, cull_interval_s: int = 60):
    """A Voila server on a free 127.0.0.1 port: yields (url, process); stopped (with its
    kernels) at the end."""
    port = free_port()
    proc = subprocess.Popen(voila_command(port, cull_idle_s=cull_idle_s,
                                          cull_interval_s=cull_interval_s), cwd=ROOT,
                            env=isolated_env(tmp), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(url, proc)
        yield url, proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture
def voila(tmp_path):
    with _voila_server(tmp_path) as (url, _proc):
        yield url


@pytest.mark.slow
def test_voila_keeps_sources_private(voila):
    page = urllib.request.urlopen(voila + "/", timeout=60).read().decode()
    assert "Distributed Training Workbench" in page
    assert "App()" not in page                     # sources are stripped
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(voila + "/voila/files/notebooks/dashboard.ipynb", timeout=10)


def test_a_page_takes_a_refilling_pool_entry_without_sitting_out_its_delay():
    """The pool's refill waits its delay unless a page takes the entry first
    (workbench/voila_server.py): a woken entry with an hour's delay starts its kernel now."""
    import asyncio

    from workbench.voila_server import wait_before, wake_pool_entry

    async def start_kernel():
        return "kernel started"

    async def a_page_arrives():
        entry = asyncio.ensure_future(wait_before(3600, start_kernel()))
        await asyncio.sleep(0)                 # the entry begins its delay
        assert wake_pool_entry(entry)
        # a deadline, not a timing: without the wake this entry would wait an hour
        return await asyncio.wait_for(entry, 60)

    async def nobody_arrives():
        return await wait_before(0.01, start_kernel())

    async def not_a_pool_entry():
        return wake_pool_entry(asyncio.get_running_loop().create_future())

    assert asyncio.run(a_page_arrives()) == "kernel started"
    assert asyncio.run(nobody_arrives()) == "kernel started"
    assert asyncio.run(not_a_pool_entry()) is False


def test_the_served_voila_uses_the_prompt_pool():
    """``workbench dashboard`` (serve.voila_command) runs Voila through workbench.voila_server,
    whose kernel manager wakes the pool entry a page takes; without preheating Voila's own."""
    assert voila_command(8866)[1:3] == ["-m", "workbench.voila_server"]
    code = ("from workbench import voila_server as v; v._install()\n"
            "import voila.app, voila.voila_kernel_manager as k\n"
            "from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager"
            " as M\n"
            "print(voila.app.voila_kernel_manager_factory(M, True, 1).__name__,"
            " voila.app.voila_kernel_manager_factory(M, False, 1).__name__,"
            " k.wait_before is v.wait_before)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert run.stdout.split() == ["PromptPoolKernelManager", "NormalKernelManager", "True"], (
        run.stderr)


def _require_chromium():
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("Debian's chromium is missing: ./dev.sh test installs it")
        pytest.skip("Debian's chromium is not installed")


# What a person sees in one chart (the element with DOM class ``cls``): its empty-state sentence
# if shown, the drawn marks (bars, markers: ``.point``; lines with a path), tick labels, legend
# entries and title, read from the rendered SVG, not from the figure's data.
SEEN = """c => {
  const el = document.querySelector('.' + c);
  if (!el) return null;
  const msg = el.querySelector('.wb-plot-message');
  const plot = el.matches('.js-plotly-plot') ? el : el.querySelector('.js-plotly-plot');
  const texts = sel => plot ? Array.from(plot.querySelectorAll(sel)).map(t => t.textContent) : [];
  return {
    revision: el.dataset.revision || null,
    message: msg && msg.style.display !== 'none' ? msg.textContent : '',
    shown: !!plot && plot.style.display !== 'none' && plot.offsetWidth > 0,
    points: plot ? plot.querySelectorAll('.point').length : 0,
    gl_points: plot ? plot.querySelectorAll('.gl-canvas').length : 0,
    lines: plot ? Array.from(plot.querySelectorAll('.scatterlayer .js-line'))
      .filter(p => (p.getAttribute('d') || '').length > 4).length : 0,
    xticks: texts('.xaxislayer-above text'),
    yticks: texts('.yaxislayer-above text'),
    legend: texts('.legendtext'),
    title: texts('.gtitle').join(' '),
  };
}"""


def _seen(page, cls: str) -> dict | None:
    return page.evaluate(SEEN, cls)


def _wait_seen(page, cls: str, test, what: str, timeout: float = 60.0) -> dict:
    """Poll what the chart shows until ``test(seen)`` holds; fail with what it showed."""
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        seen = _seen(page, cls)
        if seen is not None and test(seen):
            return seen
        time.sleep(0.2)
    pytest.fail(f"{cls}: {what} not shown within {timeout:.0f} s; the page showed {seen}")


def _empty_state(page, cls: str, starts: str, name: str) -> None:
    """The chart ``cls`` shows its sentence (starting with ``starts``) instead of blank axes;
    screenshot ``<name>-empty``."""
    seen = _wait_seen(page, cls, lambda s: bool(s["message"]), "the empty state")
    assert seen["message"].startswith(starts) and not seen["shown"], seen
    _shot(page, f"{name}-empty", cls)


def _open_tab(page, name: str) -> None:
    page.get_by_role("tab", name=name, exact=True).click()


def _shot(page, name: str, *charts: str) -> None:
    """``tests/artifacts/dashboard-<name>.png`` of the page, and one of each chart in
    ``charts`` (Voila scrolls inside the page, so a full-page shot stops at the window)."""
    page.screenshot(path=str(ARTIFACTS / f"dashboard-{name}.png"), full_page=True)
    for cls in charts:
        page.locator("." + cls).screenshot(
            path=str(ARTIFACTS / f"dashboard-{name}-{cls.removeprefix('wb-')}.png"))


def _launch(p):
    return p.chromium.launch(executable_path=CHROMIUM, args=[
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"])


def _offline_page(browser):
    """A 1500 x 1100 page in its own browser session (its own cookies and storage) that may
    reach nothing outside loopback (a CDN font is aborted)."""
    page = browser.new_context(viewport={"width": 1500, "height": 1100}).new_page()
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(
        ("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:")) else r.abort())
    return page


@contextlib.contextmanager
def _dashboard_page(voila: str):
    """The dashboard in a fresh offline page of a headless Chromium: yields (page, errors), the
    page's uncaught JavaScript errors collected as they happen; the browser closes at the
    end."""
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as p:
        browser = _launch(p)
        try:
            page = _offline_page(browser)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(voila + "/", timeout=90_000)
            yield page, errors
        finally:
            browser.close()


MEMORY_LEGEND = {"parameters", "gradients", "optimizer states", "activations", "buffers",
                 "reserved (allocator)", "device (nvidia-smi)", "capacity", "out of memory"}


@pytest.mark.slow
def test_dashboard_in_a_real_browser(voila, tmp_path):
    """Every chart as a person sees it: drawn with named categories, legends and titles at
    first sight without any interaction, and after each edit; the empty charts say what to do;
    a trial, a planner search, a scaling curve and a collective benchmark fill theirs; a click
    on the mesh selects a GPU; choosing an engine shows only its switches and its words for the
    error band; an invalid edit shows the message and keeps the charts; one screenshot per tab
    in tests/artifacts/."""
    _require_chromium()
    from widgets.charts.labels import band_words
    from workbench.engines import ENGINES
    from widgets.charts.step_time import step_terms

    ARTIFACTS.mkdir(exist_ok=True)
    brief_path = ROOT / "examples/brief-8xh200-70b.yaml"
    brief = estimate(load_scenario(brief_path))
    four = estimate(load_scenario(brief_path, ["hardware.gpus_per_node=4", "parallel.dp=4"]))
    four_tp2 = estimate(load_scenario(brief_path, ["hardware.gpus_per_node=4", "parallel.dp=2",
                                                   "parallel.tp=2"]))
    four_tp2_pp2 = estimate(load_scenario(brief_path, [
        "hardware.gpus_per_node=4", "parallel.dp=1", "parallel.tp=2", "parallel.pp=2"]))
    titan = estimate(load_scenario(brief_path, [
        "hardware.gpus_per_node=4", "parallel.dp=1", "parallel.tp=2", "parallel.pp=2",
        "training.engine=torchtitan"]))
    steps = [k for k, _ in step_terms(brief)] + ["step"]
    with _dashboard_page(voila) as (page, errors):

        # -- first sight: no click, no edit ---------------------------------------------
        mem = _wait_seen(page, "wb-memory-chart", lambda s: s["points"] >= 5,
                         "the memory bars", 90)
        assert mem["message"] == "" and mem["shown"]
        assert mem["xticks"] == ["pp rank 0"]
        assert MEMORY_LEGEND <= set(mem["legend"])
        assert f"{memory_text(brief.memory.per_gpu.device)} on the device of" in mem["title"]
        assert "does NOT fit" in mem["title"]
        assert "nvidia-smi / DCGM report the device figure" in mem["title"]
        step = _wait_seen(page, "wb-step-chart", lambda s: s["points"] == len(steps),
                          "the step-time waterfall")
        assert step["xticks"] == steps
        assert f"{brief.run.tokens_per_s:,.0f} tokens/s" in step["title"]
        assert band_words(brief) in step["title"]
        band = brief.error_band
        assert (f"typical error: half of {band['runs']} published dense runs within "
                f"{band['median']:.0%}, nine in ten within {band['p90']:.0%}; in-sample"
                in step["title"])
        tl = _wait_seen(page, "wb-timeline-chart", lambda s: s["points"] > 0,
                        "the pipeline timeline")
        assert {"forward", "backward"} <= set(tl["legend"]) and tl["yticks"] == ["rank 0"]
        assert "no pipeline (pp = 1)" in tl["title"]
        verdict = page.locator(".wb-app-verdict").inner_text()
        assert memory_text(brief.memory.per_gpu.total) in verdict
        _shot(page, "plan", "wb-memory-chart", "wb-step-chart", "wb-timeline-chart")

        # -- edits: GPUs per node 8 -> 4 (dp follows), TP 2, PP 2 -------------------------
        box = page.locator(".wb-gpus-per-node input")
        box.fill("4")
        box.press("Enter")
        title = f"{memory_text(four.memory.per_gpu.device)} on the device of"
        mem = _wait_seen(page, "wb-memory-chart", lambda s: title in s["title"],
                         "the 4-GPU memory")
        assert mem["xticks"] == ["pp rank 0"] and MEMORY_LEGEND <= set(mem["legend"])
        page.locator(".wb-tp select").select_option("2")
        title = f"{memory_text(four_tp2.memory.per_gpu.device)} on the device of"
        _wait_seen(page, "wb-memory-chart", lambda s: title in s["title"], "TP 2's memory")
        _wait_seen(page, "wb-step-chart",
                   lambda s: f"{four_tp2.run.tokens_per_s:,.0f} tokens/s" in s["title"],
                   "TP 2's step time")
        page.locator(".wb-pp select").select_option("2")
        mem = _wait_seen(page, "wb-memory-chart",
                         lambda s: s["xticks"] == ["pp rank 0", "pp rank 1"],
                         "one bar per pipeline rank")
        assert MEMORY_LEGEND - {"out of memory"} <= set(mem["legend"])
        step = _wait_seen(page, "wb-step-chart",
                          lambda s: f"{four_tp2_pp2.run.tokens_per_s:,.0f} tokens/s"
                          in s["title"], "PP 2's step time")
        assert step["xticks"] == steps
        tl = _wait_seen(page, "wb-timeline-chart",
                        lambda s: s["yticks"] == ["rank 0", "rank 1"], "two pipeline rows")
        assert "1f1b schedule, pp = 2" in tl["title"] and tl["points"] > 0

        # -- the engine: torchtitan offers torch.compile and per-op recompute -------------
        compile_box = page.locator(".wb-compile input")
        recompute = page.locator(".wb-recompute select option")
        assert not compile_box.is_visible()              # generic has no switches
        assert "op" not in recompute.all_text_contents()
        page.locator(".wb-engine select").select_option(label=ENGINES["torchtitan"].label)
        compile_box.wait_for(state="visible", timeout=30_000)
        step = _wait_seen(page, "wb-step-chart",
                          lambda s: f"{titan.run.tokens_per_s:,.0f} tokens/s" in s["title"],
                          "torchtitan's step time")
        assert band_words(titan) in step["title"]
        assert "op" in recompute.all_text_contents()
        title = f"{memory_text(titan.memory.per_gpu.device)} on the device of"
        mem = _wait_seen(page, "wb-memory-chart", lambda s: title in s["title"],
                         "torchtitan's memory")
        assert {"reserved (allocator)", "device (nvidia-smi)"} <= set(mem["legend"])
        _shot(page, "engine-torchtitan", "wb-training-panel", "wb-memory-chart",
              "wb-step-chart")
        page.locator(".wb-engine select").select_option(label=ENGINES["generic"].label)
        compile_box.wait_for(state="hidden", timeout=30_000)
        step = _wait_seen(page, "wb-step-chart",
                          lambda s: f"{four_tp2_pp2.run.tokens_per_s:,.0f} tokens/s"
                          in s["title"], "generic's step time again")
        assert band_words(four_tp2_pp2) in step["title"]
        assert "op" not in recompute.all_text_contents()
        assert not page.locator(".wb-engine-switches").is_visible()
        _shot(page, "engine-generic", "wb-training-panel")

        # -- the GPU mesh: drawn when its tab opens; a click selects a GPU ----------------
        # "what would fit instead" lands above the charts when its search ends: wait for it,
        # or the page moves under the pointer between the hover and the click (seen on a
        # loaded machine: the click selected nothing)
        page.locator(".wb-fit-searching").wait_for(state="detached", timeout=120_000)
        _open_tab(page, "GPU mesh")
        mesh = _wait_seen(page, "wb-mesh-chart", lambda s: s["shown"] and s["points"] >= 4,
                          "the GPU cells")
        assert {"TP group (2 GPUs)", "PP group (2 GPUs)"} <= set(mesh["legend"])
        # point at rank 3's cell as a person does, until plotly's hover names it (the
        # chart may still be settling to its tab's width), then click
        cell = page.locator(".wb-mesh-chart .scatterlayer .trace").first.locator(
            ".point").nth(3)
        hover = page.locator(".wb-mesh-chart .hoverlayer")
        for _ in range(50):
            cell.scroll_into_view_if_needed()
            box3 = cell.bounding_box()
            page.mouse.move(box3["x"] + box3["width"] / 2, box3["y"] + box3["height"] / 2)
            time.sleep(0.2)
            if "rank 3:" in (hover.text_content() or ""):
                break
            page.mouse.move(0, 0)
        assert "rank 3:" in hover.text_content()
        box3 = cell.bounding_box()          # where the cell is now, not where it was hovered
        page.mouse.click(box3["x"] + box3["width"] / 2, box3["y"] + box3["height"] / 2)
        _wait_seen(page, "wb-mesh-chart", lambda s: s["title"].startswith("rank 3 "),
                   "rank 3 selected by a click")
        _shot(page, "mesh", "wb-mesh-chart")

        # -- scaling: says what to do, then draws on request ----------------------------
        _open_tab(page, "Scaling")
        _empty_state(page, "wb-scaling-chart", "Press \u201cDraw scaling curve\u201d",
                     "scaling")
        page.get_by_role("button", name="Draw scaling curve").click()
        sc = _wait_seen(page, "wb-scaling-chart", lambda s: s["lines"] >= 2, "the curves",
                        120)
        assert {"tokens/s", "memory per GPU", "GPU capacity"} <= set(sc["legend"])
        assert sc["points"] > 0 and "scaling with the GPU count" in sc["title"]
        assert {"1", "2", "4"} <= set(sc["xticks"])
        _shot(page, "scaling", "wb-scaling-chart")

        # -- a real 2-rank trial, streamed live, then the comparison --------------------
        _open_tab(page, "Trial")
        _empty_state(page, "wb-trial-chart", "Run a trial to see step time", "trial")
        page.locator(".wb-trial-world select").select_option("2")
        page.locator(".wb-run-trial").click()
        tr = _wait_seen(page, "wb-trial-chart", lambda s: s["shown"] and s["lines"] >= 3
                        and {"rank 0", "rank 1", "loss"} <= set(s["legend"]),
                        "step-time lines of both ranks and the loss", 180)
        page.locator(".wb-compare-box table.wb-compare").wait_for(timeout=120_000)
        assert "exact" in page.locator(".wb-compare-box").inner_text()
        tr = _wait_seen(page, "wb-trial-chart", lambda s: "r0 params" in s["xticks"],
                        "memory bars per rank and component")
        assert {"memory measured", "memory predicted", "comm measured"} <= set(tr["legend"])
        _shot(page, "trial", "wb-trial-chart")
        _open_tab(page, "Compare")
        page.locator(".wb-compare-b select").select_option(index=1)
        assert "trial" in page.locator(".wb-compare-tab").inner_text()
        _shot(page, "compare")

        # -- the planner: says what to do, then the Pareto chart and the table ----------
        _open_tab(page, "Planner")
        _empty_state(page, "wb-pareto-chart", "Search layouts to see", "planner")
        page.get_by_role("button", name="Search layouts").click()
        pa = _wait_seen(page, "wb-pareto-chart", lambda s: s["shown"] and s["lines"] >= 1,
                        "the Pareto front", 120)
        assert {"layouts that fit", "Pareto front (fastest for its memory)",
                "top of the table (#1-#5 numbered)"} <= set(pa["legend"])
        assert "layouts fit" in pa["title"] and pa["points"] > 0
        assert page.locator("table.wb-plan tr").count() > 1
        _shot(page, "planner", "wb-pareto-chart")

        # -- collectives: says what to do, then busbw against size ----------------------
        _open_tab(page, "Collectives")
        _empty_state(page, "wb-bench-chart", "Run the benchmark", "collectives")
        page.get_by_role("button", name="Run benchmark").click()
        be = _wait_seen(page, "wb-bench-chart", lambda s: s["shown"] and s["lines"] >= 1,
                        "the busbw lines", 120)
        assert any("all_reduce" in t for t in be["legend"])
        _shot(page, "collectives", "wb-bench-chart")

        _open_tab(page, "Build check")
        assert "pipeline rank" in page.locator(".wb-build-check").inner_text()
        _shot(page, "build-check")
        _open_tab(page, "YAML")
        assert "gpus_per_node: 4" in page.locator(".wb-yaml textarea").input_value()
        _shot(page, "yaml")

        # -- an invalid edit: the message, and the charts keep the last valid scenario --
        _open_tab(page, "Plan")
        gb = page.locator(".wb-global-batch input")
        gb.fill("1")
        gb.press("Enter")
        err = page.locator(".wb-field-message .wb-error").first
        err.wait_for(timeout=30_000)
        assert "1f1b with pp=2 needs at least 2 (you gave 1)" in err.inner_text()
        mem = _seen(page, "wb-memory-chart")
        assert mem["xticks"] == ["pp rank 0", "pp rank 1"] and mem["points"] >= 5
        _shot(page, "invalid", "wb-memory-chart")
        assert "Traceback" not in page.content()
        assert errors == []


def _kernels(server: psutil.Process) -> list[psutil.Process]:
    """The server's live kernel processes. A kernel being culled exits between the listing and
    the read of its command line (a zombie until the server reaps it, or gone): it is no
    longer a kernel."""
    out = []
    for p in server.children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and "ipykernel" in " ".join(p.cmdline()):
                out.append(p)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return out


@pytest.mark.slow
def test_four_students_at_once(tmp_path):
    """A class: four browser sessions open the page at once and each starts a 2-rank trial.
    All four complete (the machine runs them in turn, the others see their place in the
    queue), no port clashes, the kernels of closed pages are culled, and once the server
    stops no process it started is left."""
    _require_chromium()
    from playwright.sync_api import sync_playwright

    started: set[psutil.Process] = set()
    queued: set[int] = set()
    with _voila_server(tmp_path, cull_idle_s=10, cull_interval_s=2) as (url, proc):
        server = psutil.Process(proc.pid)
        with sync_playwright() as p:
            browser = _launch(p)
            try:
                pages = [_offline_page(browser) for _ in range(4)]
                # Each page is opened once the previous one's kernel is connected (its memory
                # chart drawn): the server culls a kernel idle for 10 s, and on a loaded 2-core
                # machine a page opened beside three others can take longer than that to
                # connect its websocket (seen: "The model for kernel id ... does not exist").
                for page in pages:
                    page.goto(url + "/", wait_until="commit", timeout=90_000)
                    _wait_seen(page, "wb-memory-chart", lambda s: s["points"] >= 5,
                               "the memory bars", 180)
                for page in pages:
                    _open_tab(page, "Trial")
                    page.locator(".wb-trial-world select").select_option("2")
                for page in pages:
                    page.locator(".wb-run-trial").click()
                done: set[int] = set()
                deadline = time.monotonic() + 300
                while len(done) < 4 and time.monotonic() < deadline:
                    started.update(server.children(recursive=True))
                    for i, page in enumerate(pages):
                        status = page.locator(".wb-trial-status").inner_text()
                        if status.startswith("Queued:"):
                            queued.add(i)
                        if page.locator(".wb-compare-box table.wb-compare").count():
                            done.add(i)
                    time.sleep(0.25)
                assert done == {0, 1, 2, 3}, f"finished: {sorted(done)}"
                for i, page in enumerate(pages):
                    text = page.locator(".wb-compare-box").inner_text()
                    assert "exact" in text and "failed" not in text, f"session {i}: {text}"
                    assert "Address already in use" not in page.content()
                assert queued, "no session saw its place in the trial queue"
                assert len(_kernels(server)) >= 4
                for page in pages:
                    page.context.close()
            finally:
                browser.close()
        # closed pages: their kernels go within the cull time (the preheated one stays)
        deadline = time.monotonic() + 60
        while len(_kernels(server)) > 1 and time.monotonic() < deadline:
            time.sleep(1)
        assert len(_kernels(server)) <= 1, [k.cmdline() for k in _kernels(server)]
        started.update(server.children(recursive=True))
    alive = [p for p in started if _alive(p)]
    assert alive == [], [p.pid for p in alive]


def _alive(p: psutil.Process) -> bool:
    """Running and not a zombie (a process that exits while being asked is not alive)."""
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# Every dropdown of the page as a person sees it: its label and the text of the selected
# option ('' when the field shows nothing).
DROPDOWNS = """() => Array.from(document.querySelectorAll('.widget-dropdown select')).map(s => ({
  label: (s.closest('.widget-dropdown').querySelector('label') || {}).textContent || '',
  shown: s.selectedIndex >= 0 ? s.options[s.selectedIndex].text : ''}))"""


# Whether the timeline's title lies within the chart and its microbatch labels overlap.
TIMELINE_FIT = """() => {
  const el = document.querySelector('.wb-timeline-chart .js-plotly-plot');
  const svg = el.querySelector('.main-svg').getBoundingClientRect();
  const title = el.querySelector('.gtitle').getBoundingClientRect();
  const boxes = Array.from(el.querySelectorAll('.bartext')).map(t => t.getBoundingClientRect())
    .filter(r => r.width > 0 && r.height > 0);
  let overlaps = 0;
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
    const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    if (w > 1 && h > 1) overlaps++;
  }
  return {svg_left: svg.left, svg_right: svg.right, title_left: title.left,
          title_right: title.right, labels: boxes.length, overlaps};
}"""


# Shown choices whose text is wider than their dropdown's box (cut off on the page): the
# selected option of every visible dropdown, measured in the select's own font, with room for
# the arrow.
CUT_OFF = """() => {
  const ctx = document.createElement('canvas').getContext('2d');
  const out = [];
  for (const s of document.querySelectorAll('.widget-dropdown select')) {
    if (s.offsetWidth === 0 || s.selectedIndex < 0) continue;
    ctx.font = getComputedStyle(s).font;
    const text = s.options[s.selectedIndex].text;
    const need = ctx.measureText(text).width + 26;
    if (need > s.clientWidth) out.push(text + ' (' + Math.round(need) + ' > ' + s.clientWidth
                                       + ' px)');
  }
  return out;
}"""


def _shown(page, cls: str) -> str:
    """The text of the option the dropdown with DOM class ``cls`` shows (ipywidgets writes its
    spaces as no-break spaces)."""
    return page.evaluate("c => { const s = document.querySelector('.' + c + ' select');"
                         " return s && s.selectedIndex >= 0 ? s.options[s.selectedIndex].text"
                         " : ''; }", cls).replace("\xa0", " ")


@pytest.mark.slow
def test_the_page_under_a_persons_hands(voila):
    """Defects a person found: dropdowns blank for their default, a YAML edit outside a
    dropdown's choices said nothing, the planner's Layout blank after a search, the Compare tab
    empty without a word; and the fine-tuning method (LoRA: its fields, the memory chart's
    weights, what would fit instead). Read from the page: the selected option's text, the
    messages, the chart's legend."""
    _require_chromium()
    ARTIFACTS.mkdir(exist_ok=True)
    with _dashboard_page(voila) as (page, errors):
        _wait_seen(page, "wb-memory-chart", lambda s: s["points"] >= 5, "the memory bars",
                   90)
        blank = [d["label"] for d in page.evaluate(DROPDOWNS) if not d["shown"]]
        assert blank == [], f"dropdowns showing nothing: {blank}"
        assert _shown(page, "wb-reshard") == "torchtitan default"
        assert _shown(page, "wb-shard-group") == "none (full sharding)"
        assert _shown(page, "wb-trial-inject") == "none"
        assert _shown(page, "wb-plan-pick") == "search first"
        cut = page.evaluate(CUT_OFF)
        assert cut == [], f"choices cut off: {cut}"

        # fine-tuning: LoRA shows the adapters' fields; the memory chart splits the weights
        # where the estimate freezes some; the brief's 70B does not fit, so the Plan tab says
        # what would fit instead, per method
        brief = ROOT / "examples/brief-8xh200-70b.yaml"
        lora = estimate(load_scenario(brief, ["training.method=lora"]))
        fit = page.locator(".wb-fit-instead")
        fit.get_by_text("What would fit instead of pre-training").wait_for(timeout=60_000)
        said = fit.inner_text()
        assert "full fine-tuning" in said and "LoRA" in said and "QLoRA" in said, said
        assert "tokens/s" in said and "time for 1.4 T tokens" in said, said
        _shot(page, "fit-instead", "wb-fit-instead")
        page.locator(".wb-method select").select_option(
            label="LoRA (frozen model + small adapters)")
        page.locator(".wb-lora-rank input").wait_for(state="visible", timeout=30_000)
        if lora.memory.per_gpu.params_frozen > 0:
            mem = _wait_seen(page, "wb-memory-chart",
                             lambda s: "weights (frozen)" in s["legend"], "the frozen weights")
            assert "weights (trainable)" in mem["legend"] and "parameters" not in mem["legend"]
        else:      # the estimator freezes nothing yet: one weights bar
            mem = _wait_seen(page, "wb-memory-chart", lambda s: s["points"] >= 5,
                             "the memory bars")
            assert "parameters" in mem["legend"]
        title = f"{memory_text(lora.memory.per_gpu.device)} on the device of"
        _wait_seen(page, "wb-memory-chart", lambda s: title in s["title"], "LoRA's memory")
        if lora.memory.fits:       # where it fits: how to go faster, the planner's answer
            from workbench.plan.next_steps import faster_step
            step = faster_step(lora.scenario, lora)
            wanted = "How to go faster" if step else "Your layout is the planner's fastest"
            fit.get_by_text(wanted).first.wait_for(timeout=60_000)
            if step:
                assert f"(yours: {duration_text(lora.run.time_to_train_s)})" in \
                    fit.inner_text()
            assert "(fits)" in page.locator(".wb-app-verdict").inner_text()
            _shot(page, "faster", "wb-fit-instead")
        else:
            fit.get_by_text("What would fit instead of LoRA").wait_for(timeout=60_000)
        assert "tokens/s" in said and ("fits" in said or "nothing fits" in said), said
        _shot(page, "lora", "wb-training-panel", "wb-memory-chart")
        # "within a day?": tokens typed as people write them, a deadline, the verdict's answer
        # and, when it misses, what this layout trains in the time
        assert page.locator(".wb-tokens input").input_value() == "1.4 T"
        for cls, text in (("wb-tokens", "100M"), ("wb-deadline", "24h")):
            page.locator(f".{cls} input").fill(text)
            page.locator(f".{cls} input").press("Enter")
        within = estimate(load_scenario(brief, ["training.method=lora", "training.tokens=100M",
                                                "training.deadline=24"]))
        assert within.verdict.part("time to train").status == "pass"
        verdict = page.locator(".wb-app-verdict")
        verdict.get_by_text("within your 24 h").first.wait_for(timeout=60_000)
        assert f"100 M tokens in {duration_text(within.run.time_to_train_s)}" in \
            verdict.inner_text()
        assert page.locator(".wb-tokens input").input_value() == "100 M"
        page.locator(".wb-deadline input").fill("1h")
        page.locator(".wb-deadline input").press("Enter")
        verdict.get_by_text("longer than your 1 h").first.wait_for(timeout=60_000)
        said = verdict.inner_text()
        assert said.startswith("No:") and "Train " in said and "within your limit" in said, said
        _shot(page, "deadline", "wb-training-panel", "wb-app-verdict")
        page.locator(".wb-deadline input").fill("")
        page.locator(".wb-deadline input").press("Enter")
        verdict.get_by_text("longer than your 1 h").first.wait_for(state="detached",
                                                                    timeout=60_000)
        page.locator(".wb-tokens input").fill("1.4T")
        page.locator(".wb-tokens input").press("Enter")
        verdict.get_by_text("1.4 T tokens in").first.wait_for(timeout=60_000)
        # the box exists: its build check is advice, and the LoRA that fits is a Yes
        assert verdict.inner_text().startswith("No:")
        page.locator(".wb-owned input").check()
        verdict.get_by_text("Your machine exists, so these are advice").first.wait_for(
            timeout=60_000)
        assert verdict.inner_text().startswith("Yes, with care")
        _shot(page, "owned", "wb-app-verdict")
        page.locator(".wb-owned input").uncheck()
        verdict.get_by_text("One node cannot be built").first.wait_for(timeout=60_000)
        # a model found by typing part of its name (the browser lists the labels holding it)
        find = page.locator(".wb-find-model input")
        for label, name in (("Qwen2.5 72B (qwen2.5-72b)", "Qwen2.5 72B"),
                            ("Llama 3.1 70B (llama3-70b)", "Llama 3.1 70B")):
            find.fill(label)
            find.press("Enter")
            verdict.get_by_text(f"{name} on 8 x").first.wait_for(timeout=60_000)
            if name.startswith("Qwen"):
                assert page.locator(".wb-find-model datalist option").count() >= 60
                _shot(page, "find-model", "wb-app-verdict")
        page.locator(".wb-method select").select_option(label="pre-training (from scratch)")
        page.locator(".wb-lora-rank input").wait_for(state="hidden", timeout=30_000)

        _open_tab(page, "Compare")
        assert "run a trial on the Trial tab" in page.locator(".wb-compare-tab").inner_text()

        # the planner: after a search its Layout shows #1, and Load puts it in
        _open_tab(page, "Planner")
        page.get_by_role("button", name="Search layouts").click()
        _wait_seen(page, "wb-pareto-chart", lambda s: s["shown"] and s["lines"] >= 1,
                   "the Pareto front", 120)
        deadline = time.monotonic() + 30
        while _shown(page, "wb-plan-pick") != "#1" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _shown(page, "wb-plan-pick") == "#1"
        _shot(page, "planner-searched")

        # the YAML tab: tp 3 is named beside the YAML and beside the TP field
        _open_tab(page, "YAML")
        box = page.locator(".wb-yaml textarea")
        text = box.input_value()
        assert "  tp: 1\n" in text
        box.fill(text.replace("  tp: 1\n", "  tp: 3\n"))
        box.blur()
        status = page.locator(".wb-yaml-status")
        deadline = time.monotonic() + 30
        while "Tensor (tp)" not in status.inner_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        said = status.inner_text()
        assert "the charts show the last valid scenario" in said, said
        assert "Tensor (tp) must divide Heads = 64 (you gave 3)" in said, said
        _shot(page, "yaml-invalid")
        _open_tab(page, "Plan")
        assert _shown(page, "wb-tp") == "3"
        tp_texts = page.locator(".wb-tp select option").all_text_contents()
        assert tp_texts.count("3") == 1 and all("(" not in t for t in tp_texts), tp_texts
        assert "must divide Heads = 64" in page.locator(".wb-field-message .wb-error").first.inner_text()
        _shot(page, "tp3-invalid")

        # the 405B example: the timeline's title fits the chart, its labels do not pile up
        page.locator(".wb-example select").select_option("llama3-405b-h200-cluster")
        tl = _wait_seen(page, "wb-timeline-chart", lambda s: len(s["yticks"]) == 16,
                        "16 pipeline rows", 90)
        assert "interleaved-1f1b schedule, pp = 16" in tl["title"], tl["title"]
        fit = page.evaluate(TIMELINE_FIT)
        assert fit["title_left"] >= fit["svg_left"] and fit["title_right"] <= fit[
            "svg_right"], fit
        assert fit["overlaps"] == 0, fit      # narrow blocks go unlabelled (hover names them)
        _shot(page, "timeline-405b", "wb-timeline-chart")

        # an MoE model: the planner offers "Fix ep", and "Fix expert TP" once the engine
        # folds experts (Megatron-LM); a dense model shows neither
        from workbench.engines import ENGINES
        _open_tab(page, "Planner")
        assert not page.locator(".wb-plan-fix-ep").is_visible()
        page.locator(".wb-example select").select_option("mixtral-8x7b-ep")
        page.locator(".wb-plan-fix-ep").wait_for(state="visible", timeout=60_000)
        assert not page.locator(".wb-plan-fix-expert-tp").is_visible()
        # the table still holds the 70B search: the page says so
        assert page.get_by_text("the scenario has changed since: search again").is_visible()
        _open_tab(page, "Plan")
        page.locator(".wb-engine select").select_option(label=ENGINES["megatron"].label)
        _open_tab(page, "Planner")
        page.locator(".wb-plan-fix-expert-tp").wait_for(state="visible", timeout=60_000)
        assert _shown(page, "wb-plan-fix-expert-tp") == "any"
        _shot(page, "planner-moe")

        # near the limit the verdict is tight: amber, the band said, what settles it
        tight = estimate(load_scenario(ROOT / "examples/llama3-8b-8xh100.yaml",
                                       ["training.seq_len=9216"]))
        assert tight.memory.gpu_fit == "tight"
        page.locator(".wb-example select").select_option("llama3-8b-8xh100")
        _open_tab(page, "YAML")
        box = page.locator(".wb-yaml textarea")
        deadline = time.monotonic() + 60
        while "Llama 3.1 8B" not in box.input_value() and time.monotonic() < deadline:
            time.sleep(0.2)
        box.fill(box.input_value().replace("seq_len: 8192", "seq_len: 9216"))
        box.blur()
        _open_tab(page, "Plan")
        part = page.locator(".wb-part-tight")
        part.wait_for(timeout=60_000)
        verdict = page.locator(".wb-app-verdict")
        assert verdict.inner_text().startswith("Tight: Llama 3.1 8B"), verdict.inner_text()
        assert "workbench trial --shape slice" in part.inner_text()
        assert f"{tight.memory.band['runs']} published runs like it" in part.inner_text()
        assert "#9a6700" in verdict.evaluate("e => e.getAttribute('style')")   # amber
        _shot(page, "tight")
        assert "Traceback" not in page.content()
        assert errors == []


# Everything under the page's charts and fields that a person reads as text
PAGE_TEXT = "() => document.body.innerText"
# a chart's SVG text cut by its own box: tick labels and titles whose right or left edge lies
# outside the chart's SVG (the waterfall cut "exposed DP comm" to "xposed DP comm")
CUT = """c => {
  const el = document.querySelector('.' + c + ' .js-plotly-plot');
  if (!el) return null;
  const box = el.getBoundingClientRect();
  return Array.from(el.querySelectorAll('.xtick text, .ytick text, .g-xtitle text, '
                                        + '.g-ytitle text, .gtitle, .legendtext'))
    .filter(t => { const r = t.getBoundingClientRect();
                   return r.width > 0 && (r.left < box.left - 1 || r.right > box.right + 1
                          || r.top < box.top - 1 || r.bottom > box.bottom + 1); })
    .map(t => t.textContent);
}"""
# two boxes of text that overlap (the timeline's legend sat on its axis title; the Pareto
# chart's #1-#5 piled into one blob)
OVERLAP = """([c, a, b]) => {
  const el = document.querySelector('.' + c + ' .js-plotly-plot');
  const boxes = sel => Array.from(el.querySelectorAll(sel)).map(t => t.getBoundingClientRect())
    .filter(r => r.width > 0);
  const hit = (p, q) => p.left < q.right && q.left < p.right && p.top < q.bottom
                        && q.top < p.bottom;
  const A = boxes(a), B = boxes(b);
  let n = 0;
  A.forEach((p, i) => B.forEach((q, j) => { if ((a !== b || i < j) && hit(p, q)) n++; }));
  return n;
}"""
PLAN_CHARTS = ("wb-memory-chart", "wb-step-chart", "wb-timeline-chart")


def _plan_charts_drawn(page) -> dict:
    seen = {c: _seen(page, c) for c in PLAN_CHARTS}
    for c, s in seen.items():
        assert s is not None and s["shown"] and s["points"] > 0 and not s["message"], (c, s)
    return seen


@pytest.mark.slow
def test_a_person_walks_the_page(tmp_path):
    """Issue 41's walk, as a non-coder reads it: open the brief's box, offload to CPU, type a
    bad value (the field keeps it, the sentence is in words, every chart stays drawn and says
    it shows the last valid scenario), the planner and its #1, a trial that says what ran,
    Compare of two things, save and reopen by name, a YAML edit, the download, a reload.
    Screenshots: tests/artifacts/dashboard-walk-*.png."""
    _require_chromium()
    ARTIFACTS.mkdir(exist_ok=True)
    with _voila_server(tmp_path) as (url, _proc), _dashboard_page(url) as (page, errors):
        _wait_seen(page, "wb-memory-chart", lambda s: s["points"] >= 5, "the memory bars", 120)
        assert "Llama 3.1 70B on 8 x NVIDIA H200" in page.locator(".wb-app-verdict").inner_text()
        for c in PLAN_CHARTS:
            assert page.evaluate(CUT, c) == [], c                      # no label cut
        assert page.evaluate(OVERLAP, ["wb-timeline-chart", ".legendtext",
                                       ".g-xtitle text"]) == 0
        _shot(page, "walk-open", "wb-step-chart", "wb-timeline-chart")

        # offload to the CPU: the verdict follows
        rev = _seen(page, "wb-memory-chart")["revision"]
        page.locator(".wb-offload select").select_option("cpu")
        _wait_seen(page, "wb-memory-chart", lambda s: s["revision"] != rev, "offload's memory")

        # a bad value: kept as typed, said in words, the charts drawn and marked
        box = page.locator(".wb-gpus-per-node input")
        box.fill("0")
        box.press("Enter")
        msg = page.locator(".wb-field-message .wb-error").first
        msg.wait_for(timeout=30_000)
        assert "GPUs per node must be between 1 and 1024 (you gave 0)" in msg.inner_text()
        time.sleep(1.0)
        assert box.input_value() == "0"                                  # never silently 1
        for c in PLAN_CHARTS:
            _wait_seen(page, c, lambda s: "last valid scenario" in s["title"], "the mark")
        _plan_charts_drawn(page)
        verdict = page.locator(".wb-not-valid").first.inner_text()
        assert "the charts show the last valid scenario" in verdict
        assert not re.search(r"[{}]|got '|\(got ", verdict)
        dl = page.locator(".wb-download").inner_text()
        assert "scenario-not-valid.yaml" in dl and "scenario-last-valid.yaml" in dl
        _shot(page, "walk-bad-value", *PLAN_CHARTS)
        box.fill("")
        box.press("Enter")
        page.get_by_text("GPUs per node is empty: type a whole number").first.wait_for(
            timeout=30_000)
        assert box.input_value() == ""                                   # never the old value
        box.fill("8")
        box.press("Enter")
        _wait_seen(page, "wb-memory-chart", lambda s: "last valid" not in s["title"], "valid")

        # the planner and its #1
        _open_tab(page, "Planner")
        page.get_by_role("button", name="Search layouts").click()
        _wait_seen(page, "wb-pareto-chart", lambda s: s["shown"] and s["lines"] >= 1,
                   "the Pareto front", 180)
        notes = page.locator(".wb-pareto-chart .annotation-text")
        assert notes.count() == 5
        assert page.evaluate(OVERLAP, ["wb-pareto-chart", ".annotation-text",
                                       ".annotation-text"]) == 0           # #1-#5 apart
        fix = page.locator(".wb-plan-fix-tp select")      # "any" shown whole, not "an"
        assert fix.evaluate("e => e.scrollWidth <= e.clientWidth && e.clientWidth > 100")
        _shot(page, "walk-planner", "wb-pareto-chart")
        page.locator(".wb-plan-pick select").select_option(label="#1")
        page.get_by_role("button", name="Load into scenario").click()
        time.sleep(2.0)

        # a trial that says what ran
        _open_tab(page, "Trial")
        page.locator(".wb-trial-world select").select_option("2")
        page.locator(".wb-run-trial").click()
        time.sleep(3)
        _shot(page, "walk-trial-started")
        what = page.locator("div.wb-trial-what div.wb-trial-what")
        what.wait_for(timeout=60_000)
        assert "scaled down to" in what.inner_text() and "What runs" in what.inner_text()
        page.locator(".wb-compare-box table.wb-compare").wait_for(timeout=240_000)
        _wait_seen(page, "wb-trial-chart", lambda s: "r0 params" in s["xticks"],
                   "memory bars per rank and component")
        _shot(page, "walk-trial", "wb-trial-chart")

        # save by name, then Compare any two
        page.locator(".wb-save-name input").fill("planner #1")
        page.locator(".wb-save").click()
        # '#' is not allowed in a name: said in words, nothing saved
        page.get_by_text("a scenario name is 1 to 64 letters").first.wait_for(timeout=30_000)
        page.locator(".wb-save-name input").fill("planner best")
        page.locator(".wb-save").click()
        page.get_by_text("saved as \u201cplanner best\u201d").first.wait_for(timeout=30_000)
        _open_tab(page, "Compare")
        page.locator(".wb-compare-a select").select_option("saved: planner best")
        page.locator(".wb-compare-b select").select_option(index=2)
        table = page.locator(".wb-side-by-side", has_text="A: saved: planner best")
        table.wait_for(timeout=30_000)
        text = table.inner_text()
        assert "A: saved: planner best" in text and "B: trial 1" in text and "step time" in text
        _shot(page, "walk-compare")

        # a YAML edit the validator refuses, and the download
        _open_tab(page, "YAML")
        area = page.locator(".wb-yaml textarea")
        area.fill(re.sub(r"gpus_per_node: \d+", "gpus_per_node: 6", area.input_value()))
        area.blur()
        page.locator(".wb-yaml-status .wb-not-valid").first.wait_for(timeout=30_000)
        assert "{" not in page.locator(".wb-yaml-status").inner_text()
        link = page.locator(".wb-download a", has_text="scenario-not-valid.yaml")
        with page.expect_download() as d:
            link.click()
        body = Path(d.value.path()).read_text()
        assert body.startswith("# NOT VALID") and "gpus_per_node: 6" in body
        _open_tab(page, "Plan")
        _plan_charts_drawn(page)
        _shot(page, "walk-yaml-invalid", *PLAN_CHARTS)

        # open my own configs: an Accelerate FSDP2 config (the keys `accelerate config` writes)
        # and my SFT arguments
        accelerate = tmp_path / "accelerate_config.yaml"
        accelerate.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\n"
                              "fsdp_config:\n  fsdp_version: 2\n"
                              "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
                              "  fsdp_reshard_after_forward: true\nmixed_precision: bf16\n"
                              "num_machines: 1\nnum_processes: 8\n")
        args = tmp_path / "sft_config.yaml"
        args.write_text("model_name_or_path: meta-llama/Llama-3.2-1B\n"
                        "per_device_train_batch_size: 2\ngradient_accumulation_steps: 4\n"
                        "max_length: 2048\nbf16: true\ngradient_checkpointing: true\n")
        with page.expect_file_chooser() as chooser:
            page.locator(".wb-open-scenario").click()
        chooser.value.set_files([str(accelerate), str(args)])
        said = page.locator(".wb-imported")
        said.wait_for(timeout=60_000)
        assert "fields from the files" in said.inner_text() and "defaulted" in said.inner_text()
        page.locator(".wb-defaulted summary").click()
        # the GPU no file names is the page's, kept (issue 54: never swapped for a default)
        assert "hardware.gpu = " in said.inner_text()
        assert "kept from the page: no file states it" in said.inner_text()
        page.get_by_text("Llama 3.2 1B on 8 x").first.wait_for(timeout=60_000)
        _plan_charts_drawn(page)
        _shot(page, "walk-imported", "wb-memory-chart")
        # a config with a key the library does not have: one line naming it
        bad = tmp_path / "ds_config.json"
        bad.write_text('{"zero_optimization": {"stage": 3}, "train_micro_batch_size": 2}')
        with page.expect_file_chooser() as chooser:
            page.locator(".wb-open-scenario").click()
        chooser.value.set_files([str(bad)])
        page.locator(".wb-import-status .wb-error").wait_for(timeout=60_000)
        assert "train_micro_batch_size" in page.locator(".wb-import-status").inner_text()

        # reload: a fresh page, and the saved scenario opens by name
        page.reload(timeout=90_000)
        _wait_seen(page, "wb-memory-chart", lambda s: s["points"] >= 5, "the memory bars", 120)
        page.locator(".wb-saved select").select_option("planner best")
        page.locator(".wb-open-saved").click()
        page.get_by_text("opened \u201cplanner best\u201d").first.wait_for(timeout=30_000)
        _plan_charts_drawn(page)
        _shot(page, "walk-reloaded")
        assert "Traceback" not in page.content()
        assert errors == []

"""How soon a person sees the dashboard's charts, and how soon an edit shows, in Chromium.

    .venv/bin/python benchmarks/dashboard_first_chart.py [--runs 3] [--edits 20]
    .venv/bin/python benchmarks/dashboard_first_chart.py --root /tmp/old-checkout   # another tree

Serves notebooks/dashboard.ipynb with Voila as ``workbench dashboard`` does (a preheated
kernel), lets the pool settle, then opens the page ``--runs`` times, each in a fresh browser
session, and measures from navigation:
- first chart: the memory chart's first bar drawn (``.wb-memory-chart .point`` in the SVG);
- all Plan charts: memory bars, the step-time waterfall and the pipeline timeline drawn;
- bytes the page received over the kernel's websocket until the first chart.
Goal: first chart < 5 s on a preheated kernel. Then, on the last page, ``--edits`` edits of TP
(1 <-> 2): from the select's ``change`` event to the memory chart redrawn with the new figure
(``data-revision`` is set once ``Plotly.react`` has drawn it). Goal: < 0.5 s.

``--root`` serves another checkout's notebook and widgets (e.g. a ``git worktree`` of the commit
before the charts moved off plotly's FigureWidget) to compare; a chart not drawn within
``--wait`` seconds is reported as such.
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.process_runner import free_port  # noqa: E402
from workbench.serve import isolated_env, wait_until_serving  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
DRAWN = """() => {
  const marks = c => { const e = document.querySelector('.' + c);
                       return e ? e.querySelectorAll('.point').length : 0; };
  return [marks('wb-memory-chart'), marks('wb-step-chart'), marks('wb-timeline-chart')];
}"""
EDIT_PROBE = """() => {
  window.__edits = [];
  const sel = document.querySelector('.wb-tp select');
  const chart = document.querySelector('.wb-memory-chart');
  sel.addEventListener('change', () => { window.__t0 = performance.now(); });
  new MutationObserver(() => {
    if (window.__t0 !== undefined) { window.__edits.push(performance.now() - window.__t0);
                                     window.__t0 = undefined; }
  }).observe(chart, { attributes: true, attributeFilter: ['data-revision'] });
}"""


def _env(tmp: Path, root: Path) -> dict:
    env = isolated_env(tmp)
    env["PYTHONPATH"] = str(root)        # the kernel imports this tree's widgets/ and workbench/
    return env


def _one_page(browser, url: str, wait: float) -> tuple[dict, object]:
    page = browser.new_context(viewport={"width": 1500, "height": 1100}).new_page()
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(
        ("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:")) else r.abort())
    received = [0]
    first_bytes = [None]

    def on_ws(ws):
        ws.on("framereceived", lambda payload: received.__setitem__(
            0, received[0] + len(payload)))

    page.on("websocket", on_ws)
    t0 = time.monotonic()
    page.goto(url + "/", wait_until="commit", timeout=120_000)
    first = every = None
    while time.monotonic() - t0 < wait:
        mem, step, tl = page.evaluate(DRAWN)
        now = time.monotonic() - t0
        if first is None and mem > 0:
            first, first_bytes[0] = now, received[0]
        if mem > 0 and step > 0 and tl > 0:
            every = now
            break
        time.sleep(0.05)
    return {"first": first, "every": every, "bytes": first_bytes[0] or received[0]}, page


def _fmt(x: float | None, wait: float) -> str:
    return f"{x:6.2f} s" if x is not None else f"not drawn in {wait:.0f} s"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--settle", type=float, default=30.0,
                    help="seconds for the kernel pool to (re)fill before each page")
    ap.add_argument("--wait", type=float, default=60.0)
    ap.add_argument("--root", type=Path, default=ROOT)
    args = ap.parse_args()
    if not Path(CHROMIUM).exists():
        print("Debian's chromium is needed (/usr/bin/chromium)")
        return 2
    from playwright.sync_api import sync_playwright

    root = args.root.resolve()
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
               "from workbench.serve import voila_command; import os; "
               "os.execv(sys.executable, voila_command(int(sys.argv[2])))",
               str(root), str(port)]
        proc = subprocess.Popen(cmd, cwd=root, env=_env(Path(tmp), root), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            try:
                wait_until_serving(url, proc)
            except RuntimeError as exc:
                print(exc)
                return 1
            print(f"serving {root / 'notebooks/dashboard.ipynb'}")
            runs, page = [], None
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=[
                    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--disable-background-networking"])
                try:
                    for i in range(args.runs):
                        time.sleep(args.settle)          # the preheated kernel is ready
                        if page is not None:
                            page.context.close()
                        r, page = _one_page(browser, url, args.wait)
                        runs.append(r)
                        print(f"page {i + 1}: first chart {_fmt(r['first'], args.wait)}; "
                              f"all Plan charts {_fmt(r['every'], args.wait)}; "
                              f"{r['bytes'] / 2**20:,.1f} MiB over the websocket")
                    firsts = [r["first"] for r in runs if r["first"] is not None]
                    if firsts:
                        print(f"first chart: median {statistics.median(firsts):.2f} s, worst "
                              f"{max(firsts):.2f} s over {len(firsts)} of {len(runs)} pages "
                              f"(goal < 5 s: {'met' if max(firsts) < 5 else 'missed'})")
                    if args.edits and runs and runs[-1]["every"] is not None:
                        page.evaluate(EDIT_PROBE)
                        sel = page.locator(".wb-tp select")
                        for k in range(args.edits):
                            n = len(page.evaluate("() => window.__edits"))
                            sel.select_option("2" if k % 2 == 0 else "1")
                            page.wait_for_function("n => window.__edits.length > n", arg=n,
                                                   timeout=30_000)
                        ms = sorted(page.evaluate("() => window.__edits"))
                        p95 = ms[int(0.95 * (len(ms) - 1))]
                        print(f"edit -> memory chart redrawn on the page: median "
                              f"{statistics.median(ms):.0f} ms, p95 {p95:.0f} ms over "
                              f"{len(ms)} edits (goal < 500 ms: "
                              f"{'met' if p95 < 500 else 'missed'})")
                finally:
                    browser.close()
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

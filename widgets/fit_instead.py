""""What would fit instead": the planner's best layout per fine-tuning method
(``workbench.plan.methods.compare_methods``) as a short HTML table, and the verdict's next steps
that need the planner, for the Plan tab when the scenario does not fit, searched in a thread
(``FitInstead``). Every number is the backend's; this module only words them."""
from __future__ import annotations

import html
import threading
import time

import ipywidgets as w

from widgets.panels.base import error_html
from widgets.verdict_view import next_steps_html
from workbench.plan.methods import MethodFit
from workbench.render.text import human_duration
from workbench.units import memory_text, tokens_text

# compact rows: numbers on one line, the layout's words wrap
STYLE = ("<style>.wb-fit-table th, .wb-fit-table td {padding: 1px 6px; line-height: 1.3; "
         "white-space: nowrap; vertical-align: top} .wb-fit-table td.wb-fit-layout, "
         ".wb-fit-table td.wb-fit-reason {white-space: normal}</style>")
SEARCHING = ("<p class='wb-fit-searching' style='color:#57606a'><i>Does not fit: searching "
             "what would fit instead (full fine-tuning, LoRA, QLoRA)&hellip;</i></p>")
FASTER_SEARCHING = ("<p class='wb-fit-searching' style='color:#57606a'><i>It fits: searching "
                    "the planner's fastest layout on this hardware&hellip;</i></p>")


def fit_instead_html(fits: list[MethodFit], world: int, gpu: str, current: str = "") -> str:
    """One row per method: its fastest fitting layout's memory per GPU, step time, tokens/s
    and time to train the scenario's tokens, or why nothing fits (``current``: the scenario's
    own method, in words)."""
    if not fits:
        return ("<p class='wb-fit-instead-none'>What would fit instead: this engine trains with "
                "no fine-tuning method.</p>")
    tokens = tokens_text(fits[0].tokens)
    rows = []
    for f in fits:
        name = html.escape(f.label)
        note = f"<br><small>{html.escape(f.note)}</small>" if f.note else ""
        if f.fits:
            rows.append(
                f"<tr class='wb-fit-yes'><td><b>{name}</b></td>"
                f"<td style='color:#1a7f37'>fits</td>"
                f"<td style='text-align:right'>{memory_text(f.device_per_gpu)} of "
                f"{memory_text(f.capacity)}</td>"
                f"<td style='text-align:right'>{f.step_s:,.2f} s</td>"
                f"<td style='text-align:right'>{f.tokens_per_s:,.0f}</td>"
                f"<td style='text-align:right'>{html.escape(human_duration(f.time_to_train_s))}"
                f"</td><td class='wb-fit-layout'><small>{html.escape(f.layout)}</small>{note}</td></tr>")
        else:
            rows.append(
                f"<tr class='wb-fit-no'><td><b>{name}</b></td>"
                f"<td style='color:#cf222e'>nothing fits</td>"
                f"<td colspan='5' class='wb-fit-reason'><small>{html.escape(f.reason)}</small>{note}"
                f"</td></tr>")
    head = ("<tr><th>method</th><th></th><th>memory per GPU (nvidia-smi)</th><th>step</th>"
            f"<th>tokens/s</th><th>time for {tokens}</th><th>fastest layout that fits"
            "</th></tr>")
    of = f" of {html.escape(current)}" if current else ""
    return (f"{STYLE}<div class='wb-fit-instead-box'><p style='margin:4px 0'><b>What would fit instead"
            f"{of}</b> on {world} &times; {html.escape(gpu)} (the planner's fastest layout per "
            f"method):</p><table class='wb-fit-table' style='border-collapse:collapse;"
            f"font-size:12px'><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
            "</div>")


# "what would fit instead" starts this long after the last edit (rapid edits start one search)
DELAY_S = 0.3


class FitInstead:
    """The Plan tab's "what would fit instead" (``widget``): searched in a thread for an
    estimate that does not fit; each ``search`` supersedes the one before it."""

    def __init__(self) -> None:
        self.widget = w.HTML()
        self.widget.add_class("wb-fit-instead")
        self._generation = 0
        self._thread: threading.Thread | None = None
        # While the app is being built (the notebook's cell) a search waits for the page
        # (``start_pending``, from the page's first render): Voila sends the page the widgets'
        # state as the cell left it, and a thread's update before the page has connected never
        # reaches it (seen: the page kept "searching" for good); searching in the cell instead
        # made the page wait for it.
        self.deferred = False
        self._pending = None

    def search(self, est) -> None:
        """For an estimate whose memory does not fit or that misses its deadline or budget
        (None: nothing to show), search
        the best layout per fine-tuning method (``compare_methods``: ~0.6 s for the brief's
        70B on 8 H200) and the verdict's next steps that need the planner (the fastest layout
        that fits this hardware, more nodes; the methods reused), and show them; a later
        search cancels it."""
        from workbench.plan.methods import METHOD_LABELS, compare_methods
        from workbench.plan.next_steps import faster_step, searched_verdict
        from workbench.plan.search import Cancelled
        from workbench.estimate.run.verdict import limit_fails

        self._generation += 1
        mine = self._generation
        if est is None:
            self.widget.value = ""
            return
        scenario = est.scenario
        # a scenario that fits and meets its limits: only how to go faster is searched
        fits = est.memory.fits and not limit_fails(est.verdict)
        self.widget.value = FASTER_SEARCHING if fits else SEARCHING

        def current(*_args) -> bool:
            return mine == self._generation

        def work(delay: float = DELAY_S) -> None:
            time.sleep(delay)
            if not current():
                return
            if fits:
                try:
                    step = faster_step(scenario, est)
                    text = (next_steps_html([step], None).replace(
                        "What you can do instead", "How to go faster") if step else
                        "<p class='wb-faster-none' style='color:#57606a'>Your layout is the "
                        "planner's fastest on this hardware (within 5 %).</p>")
                except Exception as exc:   # never a traceback on the page
                    text = error_html(f"how to go faster: {exc}")
                if current():
                    self.widget.value = text
                return
            try:
                fits_m = compare_methods(scenario, progress=current)
                if not current():
                    return
                v = searched_verdict(scenario, est, methods=fits_m, budget_s=None)
                steps = [n for n in v.next if n.kind in ("layout", "nodes")]
                text = (next_steps_html(steps, v.search_s)
                        + fit_instead_html(fits_m, scenario.hardware.world,
                                           scenario.hardware.gpu.name,
                                           METHOD_LABELS.get(scenario.training.method, "")))
            except Cancelled:
                return
            except Exception as exc:   # never a traceback on the page
                text = error_html(f"what would fit instead: {exc}")
            if current():
                self.widget.value = text

        if self.deferred:
            self._pending = lambda: work(delay=0.0)
            return
        self._pending = None
        self._thread = threading.Thread(target=work, daemon=True, name="fit-instead")
        self._thread.start()

    def start_pending(self) -> None:
        """Start the search that waited for the page (the page has drawn: its updates reach
        it now); nothing when none waits."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self._thread = threading.Thread(target=pending, daemon=True, name="fit-instead")
            self._thread.start()

    def wait(self, timeout: float = 60.0) -> None:
        """Wait for the search in flight (tests, notebooks)."""
        if self._thread is not None:
            self._thread.join(timeout)

"""Trial: world size (sub-layouts of the scenario's layout), steps, backend and fault injection;
runs the trial in a child process and streams it into the live charts; cancellable."""
from __future__ import annotations

import html

import threading
import time

import ipywidgets as w

from widgets.charts.trial import TrialCharts
from widgets.panels.base import (
    FIELD_LAYOUT, STYLE, chosen, dropdown, error_html, bounded_int_box, run_controls, set_options,
)
from widgets.state import ScenarioState
from widgets.words import problem_words, tip_html
from workbench.errors import ScenarioError

# what a trial may run differently from the scenario, and the words for it
_FIELDS = (("training", "offload", "offload {0}: the trial keeps the optimizer states on the "
            "device (no CPU or NVMe copies are tested)"),
           ("training", "activation_offload", "activation offload: not tested"),
           ("training", "precision", "precision {0}: the trial computes in {1}"),
           ("training", "recompute", "recompute {0}: the trial runs recompute {1}"),
           ("training", "attention", "attention kernel {0}: the trial uses {1}"),
           ("training", "engine", "engine {0}: the trial runs plain PyTorch ({1})"),
           ("training", "compile", "torch.compile: not tested"),
           ("parallel", "sequence_parallel", "sequence parallel {0}: the trial runs {1}"),
           ("parallel", "pp_schedule", "schedule {0}: the trial runs {1}"))


def untested(full, trial) -> list[str]:
    """What of ``full`` the trial scenario does not run, in words."""
    out = []
    for section, key, words in _FIELDS:
        a = getattr(getattr(full, section), key)
        b = getattr(getattr(trial, section), key)
        if a != b and a not in (None, False, "none"):
            if section == "parallel" and key == "pp_schedule" and full.parallel.pp == 1:
                continue
            out.append(words.format(a, b))
    if full.hardware.gpu.name != trial.hardware.gpu.name:
        out.append(f"the {full.hardware.gpu.name}: the trial runs on this machine")
    return out


def _method_words(tr) -> str:
    """What trains in the trial, in words (LoRA / QLoRA: the adapters on their projections,
    the base frozen, QLoRA's stored format; full fine-tuning: every weight)."""
    if tr.adapters:
        lora = tr.lora
        stored = (f", stored {lora.quant}" + (" with double quantisation"
                                             if lora.double_quant else "")
                  if tr.method == "qlora" else "")
        return (f"; {'QLoRA' if tr.method == 'qlora' else 'LoRA'}: "
                f"adapters of rank {lora.rank} on {html.escape(', '.join(lora.targets))} "
                f"train, the base is frozen{html.escape(stored)}")
    return "; full fine-tuning: every weight trains" if tr.method == "full" else ""


def what_ran_html(full, trial, untested_words: list[str], notes: list[str]) -> str:
    """The trial's model shape, layout, and what it does not test."""
    m, par, tr = trial.model, trial.parallel, trial.training
    layout = ", ".join(f"{tip_html(k.upper())} {getattr(par, k)}"
                       for k in ("dp", "tp", "pp", "cp", "ep") if getattr(par, k) > 1) \
        or "one process"
    items = "".join(f"<li>{html.escape(n)}</li>" for n in [*untested_words, *notes])
    return (f"<div class='wb-trial-what' style='font-size:12px;line-height:1.4'>"
            f"<b>What runs</b>: {html.escape(full.model.name)} scaled down to {m.layers} "
            f"layers, hidden {m.hidden}, {m.heads} heads ({m.kv_heads} key/value), FFN "
            f"{m.ffn_hidden}, vocabulary {m.vocab}; sequence {tr.seq_len}, "
            f"{tip_html('micro-batch')} {tr.micro_batch}, {tr.precision}; layout {layout}, "
            f"{tip_html('ZeRO')} {par.zero}, {par.world} processes{_method_words(tr)}."
            + (f"<br><b>Not tested here</b>:<ul style='margin:2px 0'>{items}</ul>"
               if items else "") + "</div>")


class TrialPanel:
    """The trial's settings, a Run and a Cancel button, a progress bar and the live charts."""

    def __init__(self, state: ScenarioState, charts: TrialCharts | None = None) -> None:
        self.state = state
        self.charts = charts        # the app hands them in when its Trial tab opens
        self.world = dropdown("Processes", [("the layout's", None)])
        self.steps = w.IntSlider(value=3, min=1, max=20, description="Steps", style=STYLE,
                                 layout=FIELD_LAYOUT, continuous_update=False)
        self.backend = dropdown("Backend", ["auto", "gloo", "nccl"])
        self.inject = dropdown("Fault injection", [("none", None), ("kill a rank", "kill"),
                                                   ("raise in a rank", "raise"),
                                                   ("hang a rank", "hang")])
        self.rank = bounded_int_box("Faulty rank", 0, 15)
        self.rank.value = 0
        self.at_step = bounded_int_box("At step", 0, 19)
        self.at_step.value = 1
        self.run_button, self.cancel_button, self.progress = run_controls(
            "Run trial", "play", "Progress", integer=True)
        self.status = w.HTML()
        self.status.add_class("wb-trial-status")
        self.metrics = w.HTML()         # the running trial's Prometheus endpoint
        self.compare = w.HTML()
        # what the trial runs: the scaled-down model, the layout, what it cannot test
        self.what_ran = w.HTML()
        self.what_ran.add_class("wb-trial-what")
        self.untested: list[str] = []
        self.on_result = None     # the app's hook: (result, model name, untested) per trial
        self.result: dict | None = None
        self.lags: list[float] = []      # seconds from a step's end to its point on the chart
        self._clicked = time.monotonic()  # when Run was pressed (the status counts from it)
        self._process = None
        self._queued = threading.Event()     # set: stop waiting in the trial queue
        self._thread: threading.Thread | None = None
        self.run_button.on_click(lambda _b: self.run())
        self.cancel_button.on_click(lambda _b: self.cancel())
        state.on_change(lambda _s: self._offer_sizes())
        self._offer_sizes()
        self.box = w.VBox([
            w.HTML("<b>Trial</b>: the layout on a scaled-down model, in real processes"),
            self.world, self.steps, self.backend, self.inject, self.rank, self.at_step,
            w.HBox([self.run_button, self.cancel_button]), self.progress, self.status,
            self.metrics, self.what_ran], layout=w.Layout(width="380px", flex="0 0 auto"))

    def _offer_sizes(self) -> None:
        """Process counts the layout (or a sub-layout of it) can run with, up to 16."""
        from workbench.trial import sub_layout

        s = self.state.scenario
        if s is None:
            return
        sizes = []
        for n in range(1, 17):
            try:
                sub_layout(s, n)
                sizes.append(n)
            except ScenarioError:
                pass
        default = [("the layout's", None)] if s.parallel.world <= 16 else []
        set_options(self.world, default + [(str(n), n) for n in sizes])

    def run(self) -> None:
        """Start the trial (returns at once; events arrive from a background thread)."""
        from workbench.trial import prepare_trial
        from workbench.trial.in_subprocess import TrialProcess, run_in_background
        from workbench.rank_devices import choose_backend
        from workbench.private_folder import PrivateFolderError
        from workbench.trial.slots import slots_for

        if self._thread is not None and self._thread.is_alive():
            return
        self._clicked = time.monotonic()
        s = self.state.scenario
        if s is None or not self.state.valid:
            self.status.value = error_html("fix the scenario first: " + "; ".join(
                problem_words(p, self.state.labels) for p in self.state.problems))
            return
        try:
            trial, notes = prepare_trial(s, chosen(self.world), "gloo")
        except ScenarioError as exc:
            self.status.value = error_html("; ".join(problem_words(p) for p in exc.problems))
            return
        self.untested = untested(s, trial)
        self.what_ran.value = what_ran_html(s, trial, self.untested, notes)
        world = trial.parallel.world
        if self.charts is None:
            self.charts = TrialCharts()
        self.charts.reset(world)
        self.result = None
        self.lags = []
        self.compare.value = ""
        self.progress.max = world * self.steps.value + 2
        self.progress.value = 0
        self.run_button.disabled, self.cancel_button.disabled = True, False
        self.metrics.value = ""
        self._process = None
        self._queued.clear()
        args = (s, chosen(self.world), self.steps.value, self.backend.value,
                chosen(self.inject), self.rank.value, self.at_step.value)

        def start() -> TrialProcess:
            self.charts.reset(world)        # out of the queue: drop its message
            self.status.value = f"starting {world} processes ..."
            self._process = TrialProcess(*args, metrics_port=0)
            if self._queued.is_set():       # cancelled while it was starting
                self._process.cancel()
            return self._process

        def on_wait(ahead: int, running: int) -> None:
            if slots.gpu:          # a GPU trial waits for GPUs, not for cores
                text = (f"Queued: this trial needs {slots.need} of this machine's {slots.n} "
                        f"GPUs; {running} in use now, {ahead} trials waiting before yours")
            else:
                at_once = f"{slots.n} trials" if slots.n > 1 else "one trial"
                text = (f"Queued: this machine runs {at_once} at a time; {running} running "
                        f"now, {ahead} waiting before yours")
            self.status.value = text
            self.charts.widget.show_message(text)

        try:
            # GPU (nccl) trials are admitted by the GPUs free, CPU ones by the cores
            slots = slots_for(choose_backend(self.backend.value, world), world)
        except (PrivateFolderError, ValueError) as exc:   # an unsafe queue folder, a bad
            self.status.value = error_html(str(exc))         # WORKBENCH_TRIAL_SLOTS
            return
        self._thread = run_in_background(start, self._on_event, slots,
                                         keep_waiting=lambda: not self._queued.is_set(),
                                         on_wait=on_wait)

    def _on_event(self, ev: dict) -> None:
        try:
            if ev["type"] == "metrics":
                url = html.escape(ev["url"])
                self.metrics.value = (f"Prometheus metrics while the trial runs: <a href='{url}' "
                                      f"target='_blank'>{url}</a> (docs/monitoring.md)")
                return
            self.charts.on_event(ev)
            if "at" in ev:   # how long after the step ended it reached the charts
                self.lags.append(time.time() - ev["at"])
            self.progress.value = min(self.progress.max, self.progress.value + 1)
            if ev["type"] == "start":
                self.status.value = (f"{ev['world_size']} processes, {ev['backend']} "
                                     f"({ev['start_method']})")
            elif ev["type"] == "step":
                self.status.value = f"rank {ev['rank']} finished step {ev['step']}"
            elif ev["type"] == "end":
                # the endpoint closes with the trial
                self.metrics.value = self.metrics.value.replace(" while the trial runs:",
                                                                " were served at")
                if ev.get("error"):
                    self.status.value = error_html(f"trial failed: {ev['error']}")
                else:
                    # from the click, as the person waited: queueing, starting the processes
                    # and importing torch included
                    total = time.monotonic() - self._clicked
                    self.status.value = (f"done in {total:.1f} s from the click (the processes "
                                         f"ran {ev.get('wall_s', 0):.1f} s of it)")
                self._finish()
            elif ev["type"] == "result":
                self.result = ev["result"]
                self.compare.value = self.charts.table
                if self.on_result is not None and self.state.scenario is not None:
                    self.on_result(self.result, self.state.scenario.model.name,
                                   self.untested)
        except Exception as exc:   # never a traceback on the page
            self.status.value = error_html(f"internal error ({type(exc).__name__}): {exc}")
            self._finish()

    def _finish(self) -> None:
        self.run_button.disabled, self.cancel_button.disabled = False, True
        self.progress.value = self.progress.max

    def cancel(self) -> None:
        self._queued.set()
        if self._process is not None:
            self._process.cancel()
            self.status.value = "cancelled"

    def wait(self, timeout: float = 120.0) -> bool:
        """Block until the running trial's events are all in (tests, scripts)."""
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

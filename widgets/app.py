"""The workbench app: panels and charts in tabs (Plan, Trial, Compare, Build check, Planner,
YAML), scenario import/export, progress bars and cancellation for long actions.

Data flow: a panel writes a field -> ``ScenarioState`` validates and estimates with the backend
-> every chart redraws from the new ``Estimate`` (or keeps the last valid one and the panels show
the validator's messages). Sliders and number boxes send their value on release
(``continuous_update=False``), so rapid moves cost one update.
"""
from __future__ import annotations

import html
import threading
import time
from pathlib import Path

import ipywidgets as w
import yaml

from workbench.documents.text import DocumentError, load_text

from widgets.charts.labels import band_words
from widgets.charts.memory import MemoryChart
from widgets.charts.mesh import MeshChart
from widgets.charts.scaling import ScalingChart
from widgets.charts.step_time import StepTimeChart
from widgets.charts.timeline import TimelineChart
from widgets.charts.trial import TrialCharts
from widgets.compare import ComparePanel
from widgets.fit_instead import SEARCHING, fit_instead_html
from widgets.import_view import import_problems_html, imported_html
from widgets.verdict_view import next_steps_html, verdict_html
from widgets.memory_table import memory_table_html
from widgets.panels.base import add_tip, error_html, set_options
from widgets.words import tip_html
from widgets.words import problem_words
from widgets.panels.bench import BenchPanel
from widgets.panels.hardware import HardwarePanel
from widgets.panels.model import ModelPanel
from widgets.panels.parallel import ParallelPanel
from widgets.panels.trial import TrialPanel
from widgets.panels.training import TrainingPanel
from widgets.planner import PlannerPanel, download_link
from widgets.state import ScenarioState
from workbench.errors import ScenarioError
from workbench.imports import detect, import_uploads
from workbench.plan.next_steps import searched_verdict
from workbench.glossary import GLOSSARY
from workbench.scenario import dump_scenario
from workbench.scenario.store import ScenarioStore
from workbench.units import memory_text

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DEFAULT_EXAMPLE = "brief-8xh200-70b"
TIMELINE_MICROBATCHES = 16
# "what would fit instead" starts this long after the last edit (rapid edits start one search)
FIT_INSTEAD_DELAY_S = 0.3


class App:
    """Compose everything; ``app.widget`` is what a notebook displays."""

    def __init__(self, example: str = DEFAULT_EXAMPLE, examples_dir: Path = EXAMPLES,
                 store_dir: Path | None = None) -> None:
        self.examples = {p.stem: p for p in sorted(examples_dir.glob("*.yaml"))}
        first = example if example in self.examples else next(iter(self.examples))
        self.state = ScenarioState(yaml.safe_load(self.examples[first].read_text()))
        s = self.state
        self.panels = {"Hardware": HardwarePanel(s), "Model": ModelPanel(s),
                       "Parallelism": ParallelPanel(s), "Training": TrainingPanel(s)}
        for panel in self.panels.values():   # messages name fields as the page labels them
            s.labels.update(panel.labels())
        self.memory = MemoryChart()
        self.step = StepTimeChart()
        self.timeline = TimelineChart()
        self.mesh = MeshChart()
        self.scaling = ScalingChart()
        self.trial_charts = TrialCharts()
        self.trial_charts.widget.add_class("wb-trial-chart")
        self.trial = TrialPanel(s, charts=self.trial_charts)
        self.planner = PlannerPanel(s)
        self.bench = BenchPanel()

        self.picker = w.Dropdown(options=list(self.examples), value=first,
                                 description="Example", layout=w.Layout(width="360px"))
        self.picker.observe(self._pick, names="value")
        # a scenario file, or the configs a person already has (Accelerate YAML,
        # TrainingArguments, DeepSpeed JSON, torchtitan TOML, Megatron script, torchtune recipe,
        # config.json): those go through workbench import
        self.upload = w.FileUpload(accept=".yaml,.yml,.json,.toml,.sh,.sbatch,.slurm,.txt",
                                   multiple=True, description="Open scenario")
        self.upload.observe(self._upload, names="value")
        self.upload.add_class("wb-open-scenario")
        self.import_status = w.HTML()
        self.import_status.add_class("wb-import-status")
        self.download = w.HTML()
        # saved scenarios by name (a folder the server's user owns: workbench.scenario.store)
        self.store = ScenarioStore(store_dir)
        self.save_name = w.Text(placeholder="name to save as", layout=w.Layout(width="180px"))
        self.save_button = w.Button(description="Save", icon="save",
                                    layout=w.Layout(width="80px"))
        self.saved = w.Dropdown(description="Saved", layout=w.Layout(width="240px"),
                                style={"description_width": "44px"})
        self.open_button = w.Button(description="Open", icon="folder-open",
                                    layout=w.Layout(width="80px"))
        self.store_status = w.HTML()
        self.save_button.on_click(lambda _b: self.save_scenario(self.save_name.value))
        self.open_button.on_click(lambda _b: self.open_scenario(self.saved.value))
        for widget, cls in ((self.save_name, "wb-save-name"), (self.save_button, "wb-save"),
                            (self.saved, "wb-saved"), (self.open_button, "wb-open-saved"),
                            (self.store_status, "wb-store-status")):
            widget.add_class(cls)
        self.verdict = w.HTML()
        # when the scenario does not fit: the planner's best layout per fine-tuning method,
        # searched in a thread (each edit supersedes the search before it)
        self.fit_instead = w.HTML()
        self.fit_instead.add_class("wb-fit-instead")
        self._fit_generation = 0
        self._fit_thread: threading.Thread | None = None
        self._fit_in_cell = False
        self.checks = w.HTML()
        self.yaml_text = w.Textarea(layout=w.Layout(width="100%", height="480px"),
                                    continuous_update=False)
        self.yaml_text.observe(self._yaml_edit, names="value")
        # the validator's messages beside the YAML (the verdict is on another tab)
        self.yaml_status = w.HTML()
        self.scaling_over = w.Dropdown(options=["gpus", "dp", "tp", "pp", "cp", "ep"],
                                       description="Scale over", layout=w.Layout(width="220px"))
        self.scaling_button = w.Button(description="Draw scaling curve", icon="line-chart")
        self.scaling_button.on_click(lambda _b: self.draw_scaling())
        self.scaling_cancel = w.Button(description="Cancel", icon="stop", disabled=True)
        self.scaling_progress = w.FloatProgress(value=0, min=0, max=1,
                                                layout=w.Layout(width="200px"))
        self.scaling_status = w.HTML()
        self._scaling_cancel = threading.Event()
        self._scaling_thread = None
        self.scaling_cancel.on_click(lambda _b: self._scaling_cancel.set())
        self._editing_yaml = False

        # DOM classes: stable hooks for the browser test and for classroom CSS
        for widget, cls in ((self.panels["Hardware"].gpus_per_node, "wb-gpus-per-node"),
                            (self.panels["Hardware"].nodes, "wb-nodes"),
                            (self.panels["Parallelism"].tp, "wb-tp"),
                            (self.panels["Parallelism"].pp, "wb-pp"),
                            (self.picker, "wb-example"),
                            (self.panels["Parallelism"].reshard, "wb-reshard"),
                            (self.panels["Parallelism"].shard, "wb-shard-group"),
                            (self.planner.pick, "wb-plan-pick"),
                            (self.trial.inject, "wb-trial-inject"),
                            (self.panels["Training"].global_batch, "wb-global-batch"),
                            (self.panels["Training"].box, "wb-training-panel"),
                            (self.panels["Training"].engine, "wb-engine"),
                            (self.panels["Training"].method, "wb-method"),
                            (self.panels["Training"].lora_rank, "wb-lora-rank"),
                            (self.panels["Training"].optimizer, "wb-optimizer"),
                            (self.panels["Training"].compile, "wb-compile"),
                            (self.panels["Training"].recompute, "wb-recompute"),
                            (self.panels["Training"].offload, "wb-offload"),
                            (self.planner.fix["tp"], "wb-plan-fix-tp"),
                            (self.planner.fix["ep"], "wb-plan-fix-ep"),
                            (self.planner.fix["expert_tp"], "wb-plan-fix-expert-tp"),
                            (self.panels["Training"].switches, "wb-engine-switches"),
                            (self.memory.widget, "wb-memory-chart"),
                            (self.step.widget, "wb-step-chart"),
                            (self.timeline.widget, "wb-timeline-chart"),
                            (self.mesh.widget, "wb-mesh-chart"),
                            (self.scaling.widget, "wb-scaling-chart"),
                            (self.planner.chart.widget, "wb-pareto-chart"),
                            (self.bench.chart.widget, "wb-bench-chart"),
                            (self.trial.run_button, "wb-run-trial"),
                            (self.trial.world, "wb-trial-world"),
                            (self.trial.compare, "wb-compare-box"),
                            (self.checks, "wb-build-check"),
                            (self.yaml_text, "wb-yaml"),
                            (self.yaml_status, "wb-yaml-status")):
            widget.add_class(cls)
        # the glossary's words as tooltips on the fields a non-coder meets
        par, tr = self.panels["Parallelism"], self.panels["Training"]
        for widget, word in ((par.tp, "TP"), (par.pp, "PP"), (par.cp, "CP"), (par.ep, "EP"),
                             (par.zero, "ZeRO"), (par.sp, "SP"), (par.schedule, "bubble"),
                             (par.virtual, "bubble"), (tr.micro_batch, "micro-batch"),
                             (tr.recompute, "recompute"), (tr.expert_tp, "Expert TP"),
                             (self.planner.fix["tp"], "TP"),
                             (self.planner.fix["pp"], "PP"), (self.planner.fix["cp"], "CP"),
                             (self.planner.fix["zero"], "ZeRO"),
                             (self.planner.fix["ep"], "EP"),
                             (self.planner.fix["expert_tp"], "Expert TP"),
                             (self.planner.fix["recompute"], "recompute"),
                             (self.planner.fix["offload"], "offload")):
            add_tip(widget, word)
        panels = w.VBox([p.box for p in self.panels.values()],
                        layout=w.Layout(border="1px solid #ddd", padding="6px"))
        self.more = w.Tab(children=[self.timeline.widget, self.mesh.widget, w.VBox([
            w.HBox([self.scaling_over, self.scaling_button, self.scaling_cancel,
                    self.scaling_progress]), self.scaling_status, self.scaling.widget])])
        for i, name in enumerate(("Pipeline timeline", "GPU mesh", "Scaling")):
            self.more.set_title(i, name)
        self.more.selected_index = 0
        plan_tab = w.HBox([
            # the fields' choices name products ("NVLink 4 (H100/H200 SXM via NVSwitch; H200 NVL
            # bridge)"): a column wide enough to show them whole at 1500 px
            w.VBox([panels], layout=w.Layout(width="42%")),
            w.VBox([self.verdict, self.fit_instead, self.memory.widget, self.step.widget,
                    w.HTML("<div class='wb-terms' style='font-size:12px;color:#57606a'>"
                           "Words on these charts (hover for their meaning): "
                           + " · ".join(tip_html(t) for t in ("MFU", "DP", "TP", "PP", "CP",
                                                             "EP", "bubble", "recompute",
                                                             "offload")) + "</div>"),
                    self.more],
                   layout=w.Layout(width="58%")),
        ])
        trial_tab = w.VBox([w.HBox([self.trial.box, self.trial_charts.widget]),
                            w.HTML("<b>Estimate against measurement</b>"), self.trial.compare])
        self.comparer = ComparePanel(s, self.store)
        self.compare = self.comparer.table
        self.trial.on_result = lambda res, model, untested: self.comparer.add_trial(
            res, model, untested)
        compare_tab = self.comparer.box
        self.tabs = w.Tab(children=[plan_tab, trial_tab, compare_tab, self.checks,
                                    self.planner.box, self.bench.box,
                                    w.VBox([self.yaml_status, self.yaml_text])])
        for i, name in enumerate(("Plan", "Trial", "Compare", "Build check", "Planner",
                                  "Collectives", "YAML")):
            self.tabs.set_title(i, name)
        glossary = "".join(
            f"<dt style='font-weight:bold'>{html.escape(t.name)} ({html.escape(t.long)})</dt>"
            f"<dd style='margin:0 0 4px 16px'>{html.escape(t.meaning)}</dd>"
            for t in GLOSSARY.values())
        self.glossary = w.HTML(
            "<details class='wb-glossary'><summary style='cursor:pointer'>What the words mean "
            "(TP, PP, DP, ZeRO, MFU, bubble ...)</summary><dl style='font-size:12px'>"
            f"{glossary}</dl></details>")
        self.widget = w.VBox([
            w.HBox([self.picker, self.upload, self.download]), self.import_status,
            w.HBox([self.save_name, self.save_button, self.saved, self.open_button,
                    self.store_status]),
            self.glossary, self.tabs])
        self._refresh_saved()
        # a kernel from Voila's preheated pool ran this before the page came: the page's
        # first chart asks for the saved list as it is now
        self.memory.widget.on_render(self._refresh_saved)
        s.on_change(lambda _s: self.redraw())
        # the Compare tab reads the page's scenario when it is opened
        self.tabs.observe(lambda c: self.comparer.show() if c["new"] == 2 else None,
                          names="selected_index")
        # the first "what would fit instead" is searched in the notebook's cell, not in a
        # thread: Voila sends the page the widgets' state as the cell left it, and a thread's
        # update before the page has connected never reaches it (seen: the page kept
        # "searching" for good)
        self._fit_in_cell = True
        try:
            self.redraw()
        finally:
            self._fit_in_cell = False

    def redraw(self) -> None:
        """Every view from the state's last valid estimate (charts keep it while invalid)."""
        s = self.state
        est = s.estimate
        if not s.valid:
            items = "".join(f"<li>{html.escape(problem_words(p, s.labels))}</li>"
                            for p in s.problems)
            shown = (f"the charts show the last valid scenario ({html.escape(self._name(est))})"
                     if est is not None else "no valid scenario yet: the charts wait for one")
            self.verdict.value = (f"<div class='wb-error wb-not-valid' style='color:#cf222e'>"
                                  f"This edit is not valid, so {shown}:<ul>{items}</ul></div>")
        elif est is not None:
            m = est.memory
            memory_line = (
                f"{html.escape(est.scenario.model.name)}"
                f" on {est.scenario.hardware.world} x {html.escape(est.scenario.hardware.gpu.name)}"
                f": {memory_text(m.per_gpu.device)} on the device ({memory_text(m.per_gpu.total)}"
                f" allocated) of {memory_text(m.capacity)} per GPU "
                f"({m.fit_words}); {est.run.tokens_per_s:,.0f} "
                f"tokens/s ({html.escape(band_words(est))})")
            # the steps that need no search now; the planner's, when memory fails, in a thread
            self.verdict.value = verdict_html(est.verdict, memory_line)
        self.yaml_status.value = "" if s.valid else self.verdict.value
        drawn = self.scaling.drawn_for
        if drawn is not None and s.valid and s.scenario != drawn:
            self.scaling.stale(f"drawn for {drawn.model.name} on {drawn.hardware.world} x "
                               f"{drawn.hardware.gpu.name}; the scenario changed since")
        self._show_download()
        if est is None:
            return
        if s.valid:
            self._search_fit_instead(None if est.memory.fits else est)
        # a refused edit leaves every chart drawn, each saying which scenario it shows
        note = "" if s.valid else f"last valid scenario ({self._name(est)}): your edit was refused"
        for plot in (self.memory.widget, self.step.widget, self.timeline.widget,
                     self.mesh.widget):
            plot.set_note(note, push=False)
        self.memory.update(est)
        self.step.update(est)
        # the timeline draws 16 microbatches: enough for every schedule's pattern, < 50 ms
        self.timeline.update(est, microbatches=TIMELINE_MICROBATCHES)
        self.mesh.update(est.scenario)
        self.checks.value = memory_table_html(est)
        if not self._editing_yaml:
            # the YAML shows the scenario as edited: the refused edit included (the message
            # above it says what is wrong), never silently the last valid one
            self._editing_yaml = True
            self.yaml_text.value = (dump_scenario(s.scenario) if s.valid
                                    else _doc_text(s.doc) or self.yaml_text.value)
            self._editing_yaml = False

    @staticmethod
    def _name(est) -> str:
        if est is None:
            return ""
        sc = est.scenario
        return f"{sc.model.name} on {sc.hardware.world} x {sc.hardware.gpu.name}"

    def _show_download(self) -> None:
        """The download: the scenario as shown; while an edit is refused, the edited
        document (with a warning that it is not valid) and the last valid scenario, each
        named for what it is."""
        s = self.state
        if s.valid:
            self.download.value = download_link(dump_scenario(s.scenario), "scenario.yaml")
            return
        text = _doc_text(s.doc)
        edited = ("# NOT VALID: the workbench refused this scenario:\n" + "".join(
            f"#   {problem_words(p, s.labels)}\n" for p in s.problems) + (text or ""))
        links = [download_link(edited, "scenario-not-valid.yaml")
                 + " <span class='wb-error' style='color:#cf222e'>(your edits, not valid)</span>"
                 if text is not None else
                 "<span class='wb-error' style='color:#cf222e'>your edits cannot be written "
                 "back as YAML</span>"]
        if s.scenario is not None:
            links.append(download_link(dump_scenario(s.scenario), "scenario-last-valid.yaml")
                         + " (the last valid scenario, which the charts show)")
        self.download.value = "<span class='wb-download'>" + " &middot; ".join(links) + "</span>"

    def _search_fit_instead(self, est) -> None:
        """For an estimate whose memory does not fit (None: it fits, nothing to show), search
        in a thread the best layout per fine-tuning method (``compare_methods``: ~0.6 s for
        the brief's 70B on 8 H200) and the verdict's next steps that need the planner (the
        fastest layout that fits this hardware, more nodes; the methods reused), and show
        them; a later edit cancels it. While the app is being built (the notebook's cell) the
        search runs at once, in the cell."""
        from workbench.plan.methods import METHOD_LABELS, compare_methods
        from workbench.plan.search import Cancelled

        self._fit_generation += 1
        mine = self._fit_generation
        if est is None:
            self.fit_instead.value = ""
            return
        scenario = est.scenario
        self.fit_instead.value = SEARCHING

        def current(*_args) -> bool:
            return mine == self._fit_generation

        def work(delay: float = FIT_INSTEAD_DELAY_S) -> None:
            time.sleep(delay)
            if not current():
                return
            try:
                fits = compare_methods(scenario, progress=current)
                if not current():
                    return
                v = searched_verdict(scenario, est, methods=fits)
                steps = [n for n in v.next if n.kind in ("layout", "nodes")]
                text = (next_steps_html(steps, v.search_s)
                        + fit_instead_html(fits, scenario.hardware.world,
                                           scenario.hardware.gpu.name,
                                           METHOD_LABELS.get(scenario.training.method, "")))
            except Cancelled:
                return
            except Exception as exc:   # never a traceback on the page
                text = error_html(f"what would fit instead: {exc}")
            if current():
                self.fit_instead.value = text

        if self._fit_in_cell:
            work(delay=0.0)
            return
        self._fit_thread = threading.Thread(target=work, daemon=True, name="fit-instead")
        self._fit_thread.start()

    def wait_fit_instead(self, timeout: float = 60.0) -> None:
        """Wait for the "what would fit instead" search (tests, notebooks)."""
        if self._fit_thread is not None:
            self._fit_thread.join(timeout)

    def draw_scaling(self, wait: bool = False) -> None:
        """Scaling curves search many layouts (a full planner search per GPU count): drawn on
        request, in a thread, with a progress bar and a Cancel button."""
        from workbench.plan.search import Cancelled

        scenario = self.state.scenario
        if scenario is None or (self._scaling_thread and self._scaling_thread.is_alive()):
            return
        chart = self.scaling
        self._scaling_cancel.clear()
        self.scaling_button.disabled, self.scaling_cancel.disabled = True, False

        def progress(fraction: float, what: str):
            self.scaling_progress.value = fraction
            return not self._scaling_cancel.is_set()

        def work() -> None:
            try:
                chart.update(scenario, over=self.scaling_over.value, progress=progress)
                self.scaling_status.value = ""
            except Cancelled:
                self.scaling_status.value = "cancelled"
            except Exception as exc:   # never a traceback on the page
                self.scaling_status.value = error_html(str(exc))
            finally:
                self.scaling_progress.value = 1.0
                self.scaling_button.disabled, self.scaling_cancel.disabled = False, True

        self._scaling_thread = threading.Thread(target=work, daemon=True, name="scaling")
        self._scaling_thread.start()
        if wait:
            self._scaling_thread.join()

    def _refresh_saved(self) -> None:
        try:
            names = self.store.names()
        except (ScenarioError, OSError) as exc:
            self.store_status.value = error_html(_store_words(exc))
            names = []
        if self.saved.index is None or list(self.saved.options) != names:
            set_options(self.saved, names or [("nothing saved yet", "")])
        self.comparer.refresh()

    def save_scenario(self, name: str) -> None:
        """Save the scenario as edited under ``name`` (a refused edit is saved with it, and
        the status says so)."""
        s = self.state
        text = dump_scenario(s.scenario) if s.valid else _doc_text(s.doc)
        if text is None:
            self.store_status.value = error_html("this document cannot be saved as YAML")
            return
        try:
            saved = self.store.save(name, text)
        except (ScenarioError, OSError) as exc:
            self.store_status.value = error_html(_store_words(exc))
            return
        self._refresh_saved()
        self.saved.value = saved
        self.store_status.value = html.escape(f"saved as \u201c{saved}\u201d" + (
            "" if s.valid else " (with the edit the validator refused)"))

    def open_scenario(self, name: str | None) -> None:
        if not name:
            self.store_status.value = error_html("nothing saved yet: type a name and Save")
            return
        try:
            doc = self.store.load(name)
        except (ScenarioError, OSError) as exc:
            self.store_status.value = error_html(_store_words(exc))
            return
        self.state.load(doc)
        self.store_status.value = html.escape(f"opened \u201c{name}\u201d")

    def _pick(self, change: dict) -> None:
        if change["new"] is None:      # cleared: the scenario is no longer an example's
            return
        self.import_status.value = ""
        self.state.load(yaml.safe_load(self.examples[change["new"]].read_text()))

    def _upload(self, change: dict) -> None:
        files = change["new"]
        if not files:
            return
        items = list(files) if isinstance(files, (list, tuple)) else list(files.values())
        self.open_files([(str(i["name"]), bytes(i["content"])) for i in items])

    def open_files(self, files: list[tuple[str, bytes]]) -> None:
        """"Open scenario": one scenario file loads as it is; anything else — an Accelerate
        config with its TrainingArguments, a DeepSpeed JSON, ... — is read by ``workbench
        import``, and the page says what no file stated."""
        self.import_status.value = ""
        if len(files) == 1:
            name, data = files[0]
            text = data.decode("utf-8", errors="replace")
            if detect(name, text) is None:     # no config format claims it: a scenario
                self.load_text(text)
                return
        try:
            out = import_uploads(files)
        except ScenarioError as exc:        # unreadable: too large, not UTF-8, unknown format
            self.import_status.value = import_problems_html(exc.problems)
            return
        if out.problems:
            self.import_status.value = import_problems_html(out.problems)
            return
        self.state.load(out.scenario)
        self.picker.value = None            # the page no longer shows an example
        self.import_status.value = imported_html(out)

    def _yaml_edit(self, change: dict) -> None:
        if not self._editing_yaml:
            self._editing_yaml = True
            try:
                self.load_text(change["new"])
            finally:
                self._editing_yaml = False

    def load_text(self, text: str) -> None:
        """A YAML/JSON scenario from text (upload or the YAML tab); bad text shows a message."""
        try:
            doc = load_text(text, "The scenario")
        except DocumentError as exc:
            p = exc.problems[0]
            self.verdict.value = self.yaml_status.value = (
                f"<div class='wb-error' style='color:#cf222e'>"
                f"{html.escape(p.path)} {html.escape(p.message)}.</div>")
            return
        if not isinstance(doc, dict):
            self.verdict.value = self.yaml_status.value = (
                "<div class='wb-error' style='color:#cf222e'>A scenario is a "
                "table with hardware, model, parallel and training.</div>")
            return
        self.state.load(doc)


def _store_words(exc: Exception) -> str:
    problems = getattr(exc, "problems", None)
    if problems:
        return "; ".join(p.message for p in problems)
    return f"the scenario folder cannot be used: {getattr(exc, 'strerror', None) or exc}"


def _doc_text(doc) -> str | None:
    """A document as edited (refused or not) as YAML, or None when it cannot be written back
    (the document limits have read it, but a hostile one may still not dump: too deep, too
    large)."""
    try:
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    except (yaml.YAMLError, RecursionError, ValueError, TypeError):
        return None
    return text if len(text) <= 1_000_000 else None

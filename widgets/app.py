"""The workbench app: panels and charts in tabs (Plan, Trial, Compare, Build check, Planner,
Collectives, YAML) under the scenario's file bar (``scenario_files``), with progress bars and
cancellation for long actions (``panels.scaling``, ``fit_instead``, the trial and the planner).

Data flow: a panel writes a field -> ``ScenarioState`` validates and estimates with the backend
-> every chart redraws from the new ``Estimate`` (or keeps the last valid one and the panels show
the validator's messages). Sliders and number boxes send their value on release
(``continuous_update=False``), so rapid moves cost one update.
"""
from __future__ import annotations

import html
from pathlib import Path

import ipywidgets as w

from widgets.charts.labels import band_words
from widgets.charts.memory import MemoryChart
from widgets.charts.mesh import MeshChart
from widgets.charts.step_time import StepTimeChart
from widgets.charts.timeline import TimelineChart
from widgets.charts.trial import TrialCharts
from widgets.compare import ComparePanel
from widgets.fit_instead import FitInstead
from widgets.memory_table import memory_table_html
from widgets.panels.base import add_tip
from widgets.panels.bench import BenchPanel
from widgets.panels.hardware import HardwarePanel
from widgets.panels.model import ModelPanel
from widgets.panels.parallel import ParallelPanel
from widgets.panels.scaling import ScalingPanel
from widgets.panels.trial import TrialPanel
from widgets.panels.training import TrainingPanel
from widgets.planner import PlannerPanel
from widgets.scenario_files import ScenarioFiles, example_files, read_example
from widgets.state import ScenarioState
from widgets.verdict_view import verdict_html
from widgets.words import problem_words, tip_html
from workbench.glossary import GLOSSARY
from workbench.units import memory_text

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DEFAULT_EXAMPLE = "brief-8xh200-70b"
TIMELINE_MICROBATCHES = 16


class App:
    """Compose everything; ``app.widget`` is what a notebook displays."""

    def __init__(self, example: str = DEFAULT_EXAMPLE, examples_dir: Path = EXAMPLES,
                 store_dir: Path | None = None) -> None:
        examples = example_files(examples_dir)
        first = example if example in examples else next(iter(examples))
        self.state = ScenarioState(read_example(examples[first]))
        s = self.state
        self.panels = {"Hardware": HardwarePanel(s), "Model": ModelPanel(s),
                       "Parallelism": ParallelPanel(s), "Training": TrainingPanel(s)}
        for panel in self.panels.values():   # messages name fields as the page labels them
            s.labels.update(panel.labels())
        self.memory = MemoryChart()
        self.step = StepTimeChart()
        self.timeline = TimelineChart()
        self.mesh = MeshChart()
        self.scaling = ScalingPanel(s)
        self.trial_charts = TrialCharts()
        self.trial_charts.widget.add_class("wb-trial-chart")
        self.trial = TrialPanel(s, charts=self.trial_charts)
        self.planner = PlannerPanel(s)
        self.bench = BenchPanel()

        self.verdict = w.HTML()
        self.files = ScenarioFiles(s, examples, first, store_dir, self.verdict)
        # when the scenario does not fit: the planner's best layout per fine-tuning method,
        # searched in a thread (each edit supersedes the search before it)
        self.fit_instead = FitInstead()
        self.checks = w.HTML()
        # DOM classes: stable hooks for the browser test and for classroom CSS
        for widget, cls in ((self.panels["Hardware"].gpus_per_node, "wb-gpus-per-node"),
                            (self.panels["Hardware"].nodes, "wb-nodes"),
                            (self.panels["Parallelism"].tp, "wb-tp"),
                            (self.panels["Parallelism"].pp, "wb-pp"),
                            (self.panels["Parallelism"].reshard, "wb-reshard"),
                            (self.panels["Parallelism"].shard, "wb-shard-group"),
                            (self.planner.pick, "wb-plan-pick"),
                            (self.trial.inject, "wb-trial-inject"),
                            (self.panels["Training"].global_batch, "wb-global-batch"),
                            (self.panels["Training"].box, "wb-training-panel"),
                            (self.panels["Training"].engine, "wb-engine"),
                            (self.panels["Training"].method, "wb-method"),
                            (self.panels["Training"].lora_rank, "wb-lora-rank"),
                            (self.panels["Training"].tokens, "wb-tokens"),
                            (self.panels["Training"].deadline, "wb-deadline"),
                            (self.panels["Model"].find, "wb-find-model"),
                            (self.panels["Hardware"].owned, "wb-owned"),
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
                            (self.scaling.chart.widget, "wb-scaling-chart"),
                            (self.planner.chart.widget, "wb-pareto-chart"),
                            (self.bench.chart.widget, "wb-bench-chart"),
                            (self.trial.run_button, "wb-run-trial"),
                            (self.trial.world, "wb-trial-world"),
                            (self.trial.compare, "wb-compare-box"),
                            (self.checks, "wb-build-check")):
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
        self.more = w.Tab(children=[self.timeline.widget, self.mesh.widget, self.scaling.box])
        for i, name in enumerate(("Pipeline timeline", "GPU mesh", "Scaling")):
            self.more.set_title(i, name)
        self.more.selected_index = 0
        plan_tab = w.HBox([
            # the fields' choices name products ("NVLink 4 (H100/H200 SXM via NVSwitch; H200 NVL
            # bridge)"): a column wide enough to show them whole at 1500 px
            w.VBox([panels], layout=w.Layout(width="42%")),
            w.VBox([self.verdict, self.fit_instead.widget, self.memory.widget, self.step.widget,
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
        self.comparer = ComparePanel(s, self.files.store)
        self.files.on_saved = self.comparer.refresh
        self.compare = self.comparer.table
        self.trial.on_result = lambda res, model, untested: self.comparer.add_trial(
            res, model, untested)
        compare_tab = self.comparer.box
        self.tabs = w.Tab(children=[plan_tab, trial_tab, compare_tab, self.checks,
                                    self.planner.box, self.bench.box, self.files.yaml_tab])
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
        self.widget = w.VBox([self.files.bar, self.glossary, self.tabs])
        self.files.refresh_saved()
        # a kernel from Voila's preheated pool ran this before the page came: the page's
        # first chart asks for the saved list as it is now
        self.memory.widget.on_render(self.files.refresh_saved)
        s.on_change(lambda _s: self.redraw())
        # the Compare tab reads the page's scenario when it is opened
        self.tabs.observe(lambda c: self.comparer.show() if c["new"] == 2 else None,
                          names="selected_index")
        # the first "what would fit instead" waits for the page to draw (FitInstead.deferred)
        self.fit_instead.deferred = True
        try:
            self.redraw()
        finally:
            self.fit_instead.deferred = False
        self.memory.widget.on_render(self.fit_instead.start_pending)

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
        self.files.show()
        self.scaling.mark_stale()
        if est is None:
            return
        if s.valid:
            # the planner's options when memory does not fit or the run misses its deadline;
            # where it fits, the planner's faster layout
            self.fit_instead.search(est)
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

    @staticmethod
    def _name(est) -> str:
        if est is None:
            return ""
        sc = est.scenario
        return f"{sc.model.name} on {sc.hardware.world} x {sc.hardware.gpu.name}"

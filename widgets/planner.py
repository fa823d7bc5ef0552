"""Planner tab: constraints, the ranked table of layouts, loading a row into the scenario, and
exports of the chosen layout. The search runs in a thread with a progress bar and can be
cancelled."""
from __future__ import annotations

import base64
import dataclasses
import html
import threading

import ipywidgets as w

from widgets.charts.pareto import ParetoChart
from widgets.panels.base import (
    FIELD_LAYOUT, STYLE, chosen, dropdown, error_html, run_controls, select, set_options,
)
from widgets.state import ScenarioState
from workbench.engines import engine_of
from workbench.errors import ScenarioError
from workbench.headroom import DEFAULT_MEMORY_FRACTION, MEMORY_FRACTION_WHY
from workbench.plan.summary import limit_sentence, switch_words
from workbench.scenario import parse_scenario
from workbench.scenario.types import OFFLOAD, RECOMPUTE, SCHEDULES

ANY = ("any", None)
NO_ROWS = [("search first", None)]   # the Layout choice before a search has ranked any
TARGETS = ("torchrun", "slurm", "torchtitan", "deepspeed", "megatron", "trial")


class PlannerPanel:
    """Search every layout of the current scenario's hardware and model."""

    def __init__(self, state: ScenarioState) -> None:
        self.state = state
        opts = [ANY] + [(str(v), v) for v in (1, 2, 4, 8, 16, 32, 64)]
        self.fix = {
            "tp": dropdown("Fix tp", opts), "pp": dropdown("Fix pp", opts),
            "cp": dropdown("Fix cp", opts),
            "zero": dropdown("Fix ZeRO", [ANY] + [(str(z), z) for z in range(4)]),
            # MoE models only (``_show_moe_fields``): the expert-parallel width and the TP of
            # the experts (MoE parallel folding), where the engine offers it
            "ep": dropdown("Fix ep", opts),
            "pp_schedule": dropdown("Fix schedule", [ANY] + [(s, s) for s in SCHEDULES]),
            "recompute": dropdown("Fix recompute", [ANY] + [(r, r) for r in RECOMPUTE]),
            "offload": dropdown("Fix offload", [ANY] + [(o, o) for o in OFFLOAD]),
            "expert_tp": dropdown("Fix expert TP", opts),
        }
        for d in self.fix.values():   # two columns of fields: "any" and "interleaved" whole
            d.layout = w.Layout(width="300px")
        # the share of the GPU a layout may use: the memory band's by default (the slider shows
        # the share the last search used), the slider's once the box is cleared
        self.memory_from_band = w.Checkbox(value=True, description="Memory share from the band",
                                           style=STYLE, layout=w.Layout(width="300px"),
                                           tooltip=MEMORY_FRACTION_WHY)
        self.memory = w.FloatSlider(value=DEFAULT_MEMORY_FRACTION, min=0.5, max=1.0, step=0.01,
                                    description="Max memory share", style=STYLE,
                                    layout=w.Layout(width="300px"), continuous_update=False,
                                    disabled=True, tooltip=MEMORY_FRACTION_WHY)
        self.memory_from_band.observe(
            lambda c: setattr(self.memory, "disabled", bool(c["new"])), names="value")
        self.search_button, self.cancel_button, self.progress = run_controls(
            "Search layouts", "search", "Search")
        self.status = w.HTML()
        self.table = w.HTML()
        self.why = w.HTML()
        self.chart = ParetoChart()
        self.pick = dropdown("Layout", NO_ROWS)
        self.load_button = w.Button(description="Load into scenario", icon="upload")
        self.target = dropdown("Export to", list(TARGETS))
        self.export_button = w.Button(description="Export", icon="download")
        self.export_text = w.Textarea(layout=w.Layout(width="100%", height="220px"))
        self.download = w.HTML()
        self.result = None
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None
        self.search_button.on_click(lambda _b: self.search())
        self.cancel_button.on_click(lambda _b: self._cancel.set())
        self.load_button.on_click(lambda _b: self.load(chosen(self.pick)))
        self.export_button.on_click(lambda _b: self.export())
        self.box = w.VBox([
            w.HTML("<b>Planner</b>: every layout of this hardware and model, fastest first"),
            w.HBox([w.VBox(list(self.fix.values())[:5]), w.VBox(list(self.fix.values())[5:]
                                                                 + [self.memory_from_band,
                                                                    self.memory])]),
            w.HBox([self.search_button, self.cancel_button]), self.progress, self.status,
            self.table, self.why, self.chart.widget, w.HBox([self.pick, self.load_button]),
            w.HBox([self.target, self.export_button]), self.download, self.export_text])
        self._searched = ""           # the status line of the result shown
        self._show_moe_fields(state)
        state.on_change(self._show_moe_fields)
        state.on_change(self._mark_stale)

    def _mark_stale(self, state: ScenarioState) -> None:
        """Say so above the table when the model, hardware or training changed since the search
        it shows (``_same_question``: its rows answer that scenario, and Load would bring its
        model back)."""
        r, s = self.result, state.scenario
        if r is None or not self._searched:
            return
        was = r.scenario
        if s is None or _same_question(was, s):
            self.status.value = self._searched
            return
        self.status.value = error_html(
            f"these layouts were searched for {was.model.name} on {was.hardware.world} x "
            f"{was.hardware.gpu.name}; the scenario has changed since: search again"
        ) + "<br>" + self._searched

    def _show_moe_fields(self, state: ScenarioState) -> None:
        """Show "Fix ep" for an MoE model and "Fix expert TP" where its engine also offers
        expert TP; hidden, they are reset to "any" so a search never applies a constraint the
        page does not show."""
        s = state.scenario
        moe = s is not None and s.model.moe is not None
        shown = {"ep": moe,
                 "expert_tp": moe and engine_of(s.training).offers("expert_tp")}
        for key, visible in shown.items():
            field = self.fix[key]
            field.layout.display = "" if visible else "none"
            if not visible:
                select(field, None)

    def search(self, wait: bool = False) -> None:
        """Start the search in a thread (``wait``: block until it is done, for tests)."""
        from workbench.plan import Constraints, plan
        from workbench.plan.search import Cancelled

        if self._thread is not None and self._thread.is_alive():
            return
        try:   # the current layout is only a starting point: an invalid one is planned too
            scenario = parse_scenario(self.state.doc, layout_required=False,
                                      calibration_names_only=True)
        except ScenarioError as exc:
            self._refuse("fix the scenario first: " + exc.one_line())
            return
        fixed = {k: chosen(d) for k, d in self.fix.items() if chosen(d) is not None}
        try:
            c = Constraints(fixed=fixed, max_memory_fraction=None if self.memory_from_band.value
                            else self.memory.value)
        except ScenarioError as exc:
            self._refuse("; ".join(str(p) for p in exc.problems))
            return
        self._cancel.clear()
        self.search_button.disabled, self.cancel_button.disabled = True, False
        self.status.value, self._searched = "searching ...", ""

        def progress(fraction: float, what: str):
            self.progress.value = fraction
            return not self._cancel.is_set()

        def work() -> None:
            try:
                self.result = plan(scenario, c, progress)
                self._show()
            except Cancelled:
                self.status.value = "search cancelled"
            except ScenarioError as exc:
                self._refuse("; ".join(str(p) for p in exc.problems))
            except Exception as exc:   # never a traceback on the page
                self.status.value = error_html(
                    f"internal error ({type(exc).__name__}): {exc}")
            finally:
                self.search_button.disabled, self.cancel_button.disabled = False, True

        self._thread = threading.Thread(target=work, daemon=True, name="planner")
        self._thread.start()
        if wait:
            self._thread.join()

    def _refuse(self, why: str) -> None:
        """No search result: say why, and leave no earlier result on the page."""
        self.result, self._searched = None, ""
        self.table.value = self.why.value = ""
        set_options(self.pick, NO_ROWS)
        self.status.value = error_html(why)
        self.chart.widget.show_message("No layouts to draw: " + why)

    def _show(self, top: int = 15) -> None:
        from workbench.plan.explain import describe_start, explain
        from workbench.render.text import settings_text

        r = self.result
        n = r.counts
        if self.memory_from_band.value:        # the share this search used
            self.memory.value = round(r.fraction, 2)
        self.status.value = self._searched = (
                             html.escape(f"{r.scenario.model.name} on "
                                         f"{r.scenario.hardware.world} x "
                                         f"{r.scenario.hardware.gpu.name}: ")
                             + f"{n['candidates']:,} candidate layouts{settings_text(n)}, "
                             f"{n['valid']:,} valid, "
                             f"{n['fit']:,} fit; searched in {r.seconds:.2f} s<br>"
                             + html.escape(limit_sentence(r)))
        # the engine's switches get a column once the engine has any (generic has none)
        switched = r.scenario.training.engine != "generic"
        moe = r.scenario.model.moe is not None     # the experts' own TP: an MoE column
        head = ("rank", "dp", "tp", "pp", "cp", "ep", *(("expert TP",) if moe else ()), "zero",
                "sp", "schedule", "v", "mb",
                "recompute", "offload", *(("switches",) if switched else ()), "step s",
                "tokens/s", "MFU", "GiB/GPU allocated", "GiB/GPU nvidia-smi", "fit", "Pareto")
        rows = []
        for _, x in r.table.head(top).iterrows():
            switches = ", ".join(switch_words(x)) or "-"
            etp = x["expert_tp"]
            vals = (x["rank"], x["dp"], x["tp"], x["pp"], x["cp"], x["ep"],
                    *((x["tp"] if etp is None or etp != etp else etp,) if moe else ()),
                    x["zero"],
                    "on" if x["sequence_parallel"] else "off", x["pp_schedule"],
                    x["virtual_stages"], x["micro_batch"], x["recompute"], x["offload"],
                    *((switches,) if switched else ()),
                    f"{x['step']:.3f}", f"{x['tokens_per_s']:,.0f}", f"{x['mfu']:.1%}",
                    f"{x['memory_gib']:.1f}", f"{x['device_gib']:.1f}", x["fit"],
                    "yes" if x["pareto_memory"] else "")
            rows.append("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in vals)
                        + "</tr>")
        self.table.value = ("<table class='wb-plan'><tr>" + "".join(f"<th>{h}</th>" for h in head)
                            + "</tr>" + "".join(rows) + "</table>")
        lines = explain(r) + ([describe_start(r)] if r.start is not None else [])
        self.why.value = "<br>".join(html.escape(line) for line in lines)
        self.chart.update(r)
        set_options(self.pick, [(f"#{i}", i) for i in range(1, min(top, len(r)) + 1)])

    def load(self, rank: int | None) -> None:
        """Put the layout ranked ``rank`` into the scenario (panels and charts follow)."""
        if self.result is None or rank is None:
            return
        self.state.load(self.result.scenario_of(rank).to_dict())

    def export(self) -> None:
        """The chosen layout as the selected engine's artefact, shown and downloadable."""
        from workbench.export import export

        if self.result is not None and chosen(self.pick) is not None:
            scenario = self.result.scenario_of(chosen(self.pick))
        else:
            scenario = self.state.scenario
        if scenario is None:
            return
        try:
            text = export(scenario, self.target.value)
        except ScenarioError as exc:
            self.export_text.value = ""
            self.download.value = error_html("; ".join(str(p) for p in exc.problems))
            return
        self.export_text.value = text
        self.download.value = download_link(text, f"layout-{self.target.value}.txt")


# the training fields a search chooses (a loaded row sets them): not a change of question
SEARCHED_TRAINING = ("micro_batch", "recompute", "offload", "compile", "fp8_recipe")


def _same_question(was, now) -> bool:
    """Whether a search of ``was`` answers ``now`` too: the same model, hardware and training
    but for the fields the search chooses (the layout is only its starting point)."""
    kept = {f: getattr(was.training, f) for f in SEARCHED_TRAINING}
    return (was.model == now.model and was.hardware == now.hardware
            and dataclasses.replace(now.training, **kept) == was.training)


def download_link(text: str, filename: str) -> str:
    """An offline download link (a data: URI; nothing leaves the page)."""
    data = base64.b64encode(text.encode()).decode()
    return (f"<a download='{html.escape(filename)}' href='data:text/plain;base64,{data}'>"
            f"download {html.escape(filename)}</a>")

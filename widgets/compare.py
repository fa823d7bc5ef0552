"""The Compare tab: any two things side by side — the scenario on the page, a saved scenario,
or a trial that ran in this page — one row per figure, a column each.

Scenarios are estimated by the backend (``workbench.estimate``); trials show what their
processes measured and what the estimate predicted for the same scaled-down run."""
from __future__ import annotations

import html
import statistics

import ipywidgets as w

from widgets.panels.base import STYLE, dropdown, set_options
from widgets.words import problem_words, tip_html
from workbench.units import duration_text, memory_text

CURRENT = "the scenario on the page"
KIB = 1024


def _layout_words(par) -> str:
    get = (lambda k: par[k]) if isinstance(par, dict) else (lambda k: getattr(par, k))
    return (" ".join(f"{k} {get(k)}" for k in ("dp", "tp", "pp", "cp", "ep"))
            + f", ZeRO {get('zero')}")


def scenario_rows(doc: dict) -> dict[str, str]:
    """A scenario document's figures in words (its problems, if it is not valid)."""
    from workbench.errors import ScenarioError
    from workbench.estimate import estimate
    from workbench.scenario import parse_scenario

    try:
        s = parse_scenario(doc, calibration_names_only=True)
        est = estimate(s)
    except ScenarioError as exc:
        return {"status": "not valid: " + "; ".join(problem_words(p) for p in exc.problems)}
    except Exception as exc:   # never a traceback on the page
        return {"status": f"cannot be estimated ({type(exc).__name__})"}
    from workbench.engines import engine_of
    from workbench.plan.methods import METHOD_LABELS

    m, r, t, tr = est.memory, est.run, est.time, s.training
    return {
        "kind": "estimate",
        "model": s.model.name,
        "GPUs": f"{s.hardware.world} x {s.hardware.gpu.name}",
        "method": METHOD_LABELS.get(tr.method, tr.method) + (
            f" (rank {tr.lora.rank}, {len(tr.lora.targets)} projections)" if tr.adapters
            else ""),
        "quantisation": (f"{tr.lora.quant}" + (" with double quantisation"
                                               if tr.lora.double_quant else "")
                         if tr.method == "qlora" else "none (weights in " + tr.precision + ")"),
        "engine": engine_of(tr).label,
        "optimizer": tr.optimizer,
        "layout": _layout_words(s.parallel),
        "batch": f"micro-batch {tr.micro_batch}, global batch {tr.global_batch}, "
                 f"sequence {tr.seq_len}",
        "recompute / offload": f"{tr.recompute} / {tr.offload}",
        "memory per GPU": f"{memory_text(m.per_gpu.device)} of {memory_text(m.capacity)} "
                          f"({m.fit_words})",
        "step time": duration_text(t.step),
        "tokens/s": f"{r.tokens_per_s:,.0f}",
        "MFU": f"{r.mfu:.0%}",
        "pipeline bubble": f"{t.bubble / t.step:.1%} of the step" if t.step else "-",
        "time to train": duration_text(r.time_to_train_s),
        "status": "valid",
    }


def trial_rows(entry: dict) -> dict[str, str]:
    """A trial's figures: what ran, what it measured, what the estimate predicted."""
    res = entry["result"]
    m = res.get("model", {})
    ranks = res.get("ranks", [])
    steps = [x for r in ranks for x in r.get("step_time_s", [])[1:]] or [
        x for r in ranks for x in r.get("step_time_s", [])]
    r0 = ranks[0] if ranks else {"measured": {}, "predicted": {}}
    meas = r0["measured"].get("allocated")
    pred = sum(v for k, v in r0["predicted"].items()
               if isinstance(v, (int, float)) and k in ("params", "grads", "optimizer",
                                                      "activations", "buffers"))
    return {
        "kind": f"trial ({res.get('backend', '')}, {res.get('world_size', '?')} processes)",
        "model": (f"{entry['model']} scaled down: {m.get('layers')} layers, hidden "
                  f"{m.get('hidden')}, {m.get('heads')} heads, sequence {m.get('seq_len')}"),
        "GPUs": f"{res.get('world_size', '?')} processes on {res.get('device_name') or 'this CPU'}",
        "layout": _layout_words(res.get("layout", {})) if res.get("layout") else "-",
        "batch": f"micro-batch {m.get('micro_batch')}, {m.get('microbatches')} micro-batches",
        "memory per GPU": (f"rank 0 measured {meas / KIB:,.1f} KiB, predicted "
                           f"{pred / KIB:,.1f} KiB" if meas else "-"),
        "step time": (f"{statistics.median(steps) * 1e3:,.1f} ms measured (median)"
                      if steps else "-"),
        "not tested": "; ".join(entry.get("untested", [])) or "-",
        "status": "failed: " + str(res["error"]) if res.get("error") else "ran",
    }


ROW_ORDER = ("kind", "model", "GPUs", "method", "quantisation", "engine", "optimizer", "layout",
             "batch", "recompute / offload",
             "memory per GPU", "step time", "tokens/s", "MFU", "pipeline bubble",
             "time to train", "not tested", "status")
TERMS = {"MFU": "MFU", "pipeline bubble": "bubble", "batch": "micro-batch"}


def side_by_side_html(a_name: str, a: dict, b_name: str, b: dict) -> str:
    rows = []
    for key in ROW_ORDER:
        if key not in a and key not in b:
            continue
        va, vb = a.get(key, "-"), b.get(key, "-")
        differ = " style='background:#fff8c5'" if va != vb else ""
        label = tip_html(TERMS[key], key) if key in TERMS else html.escape(key)
        rows.append(f"<tr{differ}><th style='text-align:left'>{label}</th>"
                    f"<td>{html.escape(va)}</td><td>{html.escape(vb)}</td></tr>")
    return ("<table class='wb-side-by-side'><tr><th></th>"
            f"<th>A: {html.escape(a_name)}</th><th>B: {html.escape(b_name)}</th></tr>"
            + "".join(rows) + "</table><div style='color:#57606a;font-size:12px'>"
            "Rows that differ are highlighted.</div>")


class ComparePanel:
    """Two choosers (A, B) over the page's scenario, the saved scenarios and this page's
    trials; the table updates when either changes (or on Refresh)."""

    def __init__(self, state, store) -> None:
        self.state = state
        self.store = store
        self.trials: dict[str, dict] = {}
        self.a = dropdown("A", [CURRENT])
        self.b = dropdown("B", [CURRENT])
        for d in (self.a, self.b):
            d.layout = w.Layout(width="480px")
            d.style = STYLE
            d.observe(lambda _c: self.show(), names="value")
        self.a.add_class("wb-compare-a")
        self.b.add_class("wb-compare-b")
        self.refresh_button = w.Button(description="Refresh", icon="refresh")
        self.refresh_button.on_click(lambda _b: self.refresh())
        self.table = w.HTML()
        self.table.add_class("wb-compare-tab")
        self.box = w.VBox([
            w.HTML("<b>Compare</b> any two: the scenario on the page, a saved scenario, or a "
                   "trial run on this page"),
            w.HBox([w.VBox([self.a, self.b]), self.refresh_button]), self.table])
        self._showing = False
        self.refresh()

    def choices(self) -> list[str]:
        try:
            saved = [f"saved: {n}" for n in self.store.names()]
        except Exception:      # an unusable folder: the page still compares the rest
            saved = []
        return [CURRENT, *saved, *self.trials]

    def add_trial(self, result: dict, model: str, untested: list[str]) -> str:
        name = (f"trial {len(self.trials) + 1}: {result.get('world_size', '?')} processes, "
                + _layout_words(result.get("layout", {})) if result.get("layout")
                else f"trial {len(self.trials) + 1}")
        self.trials[name] = {"result": result, "model": model, "untested": untested}
        self.refresh()
        return name

    def refresh(self) -> None:
        opts = self.choices()
        self._showing = True
        try:
            set_options(self.a, opts)
            set_options(self.b, opts)
            if self.b.value == self.a.value and len(opts) > 1:
                self.b.value = opts[-1]
        finally:
            self._showing = False
        self.show()

    def rows(self, name: str) -> dict[str, str]:
        if name == CURRENT:
            return scenario_rows(self.state.doc)
        if name.startswith("saved: "):
            try:
                return scenario_rows(self.store.load(name.removeprefix("saved: ")))
            except Exception as exc:
                problems = getattr(exc, "problems", None)
                return {"status": "; ".join(problem_words(p) for p in problems)
                        if problems else f"cannot be read ({type(exc).__name__})"}
        return trial_rows(self.trials[name])

    def show(self) -> None:
        if self._showing:
            return
        a, b = self.a.value, self.b.value
        if len(self.a.options) < 2:
            self.table.value = (
                "<p class='wb-compare-empty'>Only the scenario on the page so far: save a "
                "scenario by name (top of the page) or run a trial on the Trial tab, then "
                "choose any two here.</p>" + side_by_side_html(a, self.rows(a), b, self.rows(b)))
            return
        self.table.value = side_by_side_html(a, self.rows(a), b, self.rows(b))

"""Training: sequence length, micro and global batch, tokens, precision, recompute (and, for
layer-wise checkpointing, one block in how many), optimizer,
offload, attention kernel; the engine that runs the layout and its switches (torch.compile,
FP8 recipe, async TP, expert TP), only those the chosen engine offers."""
from __future__ import annotations

import dataclasses
import html

import ipywidgets as w

from widgets.panels.base import (
    FIELD_LAYOUT, Panel, check, dropdown, float_box, int_box, select, set_options,
)
from workbench.engines import ENGINES
from workbench.scenario.rules import allowed_values, check_rules, engine_allows
from workbench.scenario.types import ATTENTION_KERNELS, OFFLOAD, OPTIMIZERS, PRECISIONS, RECOMPUTE

ZERO_STAGES = (0, 1, 2, 3)
# the document paths of each engine switch (``Engine.switches``)
SWITCH_PATHS = {"compile": "training.compile", "fp8_recipe": "training.fp8_recipe",
                "async_tp": "parallel.async_tp", "expert_tp": "parallel.expert_tp"}


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


class TrainingPanel(Panel):
    title = "Training"

    def __init__(self, state) -> None:
        super().__init__(state)
        self.seq_len = int_box("Sequence length", 1, 10_000_000)
        self.micro_batch = int_box("Micro-batch", 1, 100_000)
        self.global_batch = int_box("Global batch", 1, 100_000_000)
        self.tokens = float_box("Tokens to train", 1, 1e16)
        self.precision = dropdown("Precision", list(PRECISIONS))
        self.recompute = dropdown("Recompute", list(RECOMPUTE))
        self.recompute_every = int_box("Checkpoint 1 block in every", 1, 1_000_000)
        self.optimizer = dropdown("Optimizer", list(OPTIMIZERS))
        self.offload = dropdown("Offload", list(OFFLOAD))
        self.attention = dropdown("Attention kernel", list(ATTENTION_KERNELS))
        self.engine = dropdown("Engine", [(e.label, name) for name, e in ENGINES.items()])
        self.engine.layout = FIELD_LAYOUT   # labels name products
        self.compile = check("torch.compile")
        self.fp8_recipe = dropdown("FP8 recipe", [("engine default", None)])
        self.async_tp = check("Async TP (overlap TP comm)")
        self.expert_tp = dropdown("Expert TP", [("same as tp", None)])
        # each switch's row (the widget and its message), hidden when the engine lacks it
        self.rows = {
            "compile": self.bind("training.compile", self.compile, to_doc=lambda v: v or None),
            "fp8_recipe": self.bind("training.fp8_recipe", self.fp8_recipe),
            "async_tp": self.bind("parallel.async_tp", self.async_tp,
                                  to_doc=lambda v: v or None),
            "expert_tp": self.bind("parallel.expert_tp", self.expert_tp),
        }
        # only with recompute "layer" (torchtitan's every-k-th-block checkpointing)
        self.recompute_every_row = self.bind("training.recompute_every", self.recompute_every)
        self.about = w.HTML(layout=w.Layout(width="400px", max_width="100%"))
        self.switches = w.VBox([w.HTML("<i>Engine switches</i>"), *self.rows.values()])
        self.box = w.VBox([
            w.HTML("<b>Training</b>"),
            self.bind("training.seq_len", self.seq_len),
            self.bind("training.micro_batch", self.micro_batch),
            self.bind("training.global_batch", self.global_batch),
            self.bind("training.tokens", self.tokens, to_doc=float),
            self.bind("training.precision", self.precision, on_set=self._precision_set),
            self.bind("training.engine", self.engine, on_set=self._engine_set),
            self.about,
            self.switches,
            self.bind("training.recompute", self.recompute),
            self.recompute_every_row,
            self.bind("training.optimizer", self.optimizer),
            self.bind("training.offload", self.offload),
            self.bind("training.attention", self.attention),
        ])
        self.refresh()

    def _engine(self):
        return ENGINES.get(self.current("training.engine", "generic"), ENGINES["generic"])

    def _engine_set(self, name: str) -> dict:
        """Choosing an engine drops the switches it lacks and moves recompute and ZeRO to
        values it offers, so the panel never causes a validator message of its own."""
        eng = ENGINES[name]
        changes = {path: None for switch, path in SWITCH_PATHS.items()
                   if not eng.offers(switch) and self.current(path) not in (None, False)}
        if self.current("training.fp8_recipe") not in (None, *eng.fp8_recipes):
            changes["training.fp8_recipe"] = None
        if self.current("training.recompute") not in eng.recompute:
            changes["training.recompute"] = (eng.recompute_default
                                             if eng.recompute_default in eng.recompute
                                             else eng.recompute[0])
        zero = self.current("parallel.zero", 0)
        s = self.state.scenario
        if s is not None:
            stages = allowed_values(dataclasses.replace(
                s, training=dataclasses.replace(s.training, engine=name)), "zero", ZERO_STAGES)
        else:
            stages = list(eng.zero)
        stages = stages or list(eng.zero)
        if zero not in stages:   # the next stage up that the engine offers, else its highest
            changes["parallel.zero"] = next((z for z in stages if z >= zero), stages[-1])
        return changes

    def _precision_set(self, precision: str) -> dict:
        """A recipe only goes with fp8."""
        if precision != "fp8" and self.current("training.fp8_recipe") is not None:
            return {"training.fp8_recipe": None}
        return {}

    def before_refresh(self) -> None:
        """Offer the engine's recompute policies and recipes; show only its switches (the FP8
        recipe with precision fp8, expert TP for MoE models)."""
        eng = self._engine()
        self.about.value = (f"<div style='color:#57606a;font-size:12px;line-height:1.35;"
                            f"margin:0 0 4px 8px'>"
                            f"{html.escape(eng.about)}</div>")
        set_options(self.recompute, list(eng.recompute))
        self.recompute_every_row.layout.display = (
            "" if self.current("training.recompute") == "layer" else "none")
        default = f"engine default ({eng.fp8_default})" if eng.fp8_default else "engine default"
        recipes = list(eng.fp8_recipes)
        if self.state.scenario is not None:   # the recipes this GPU runs (MXFP8: Blackwell)
            recipes = engine_allows(self.state.scenario, "training.fp8_recipe", recipes)
        set_options(self.fp8_recipe, [(default, None)] + [(r, r) for r in recipes])
        s = self.state.scenario
        moe = s is not None and s.model.moe is not None
        set_options(self.expert_tp, [("same as tp", None)] + [
            (str(d), d) for d in self._expert_tp_values()])
        fp8 = self.current("training.precision") == "fp8"
        shown = {"compile": eng.offers("compile"),
                 "fp8_recipe": eng.offers("fp8_recipe") and fp8,
                 "async_tp": eng.offers("async_tp"),
                 "expert_tp": eng.offers("expert_tp") and moe}
        # a switch the document sets stays visible (with the validator's message) until reset
        for switch, path in SWITCH_PATHS.items():
            on = self.current(path) not in (None, False)
            self.rows[switch].layout.display = "" if shown[switch] or on else "none"
        self.switches.layout.display = "" if any(
            r.layout.display == "" for r in self.rows.values()) else "none"
        self.async_tp.disabled = (self.current("parallel.tp", 1) or 1) == 1 \
            and not self.current("parallel.async_tp")
        # the refresh sets only values the document has: show "default" for a null field
        for path, widget in (("training.fp8_recipe", self.fp8_recipe),
                             ("parallel.expert_tp", self.expert_tp)):
            if self.current(path) is None:
                select(widget, None)
        if not self.current("training.compile"):
            self.compile.value = False
        if not self.current("parallel.async_tp"):
            self.async_tp.value = False

    def _expert_tp_values(self) -> list[int]:
        """Expert-TP degrees (> 1) the rule table allows with the scenario's other settings."""
        s = self.state.scenario
        if s is None or s.model.moe is None:
            return []
        par = s.parallel
        out = []
        for d in _divisors(par.dp * par.cp * par.tp)[1:]:
            trial = dataclasses.replace(s, parallel=dataclasses.replace(par, expert_tp=d))
            if not any(p.path.startswith(("parallel.expert_tp", "parallel.ep", "parallel.tp"))
                       for p in check_rules(trial, layout=True)):
                out.append(d)
        return out

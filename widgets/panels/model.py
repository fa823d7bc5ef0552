"""Model: a preset from the catalog, or its fields edited (custom), MoE fields included."""
from __future__ import annotations

import ipywidgets as w

from widgets.panels.base import (FIELD_LAYOUT, STYLE, Panel, check, dropdown, int_box,
                                 show_value)
from workbench.catalog import CATALOGS

MODEL_FIELDS = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab")
MOE_FIELDS = ("experts", "top_k", "expert_ffn_hidden", "shared_experts", "dense_layers")


class ModelPanel(Panel):
    title = "Model"

    def __init__(self, state) -> None:
        super().__init__(state)
        labels = [(f"{r.name} ({k})", k) for k, r in CATALOGS["model"].items()]
        self.preset = dropdown("Preset", labels)
        # choosing a preset replaces the whole model section (no stale custom fields)
        self.preset.observe(self._pick, names="value")
        # the catalog's models found by typing part of a name ("qwen 7b", "gemma"): the
        # browser lists the labels holding what is typed; picking one picks its preset
        self._by_label = dict(labels)
        self.find = w.Combobox(description="Find a model", options=[lbl for lbl, _ in labels],
                               placeholder="type part of a name: qwen, gemma, 70b",
                               ensure_option=False, style=STYLE, layout=FIELD_LAYOUT)
        self.find.observe(self._found, names="value")
        rows = [w.HTML("<b>Model</b>"), self.find, self.preset,
                w.HTML("<i>Edit a field to customise the preset:</i>")]
        self.inputs = {}
        for f in MODEL_FIELDS:
            box = int_box(f.replace("_", " ").capitalize(), 1, 100_000_000)
            self.inputs[f] = box
            rows.append(self.bind(f"model.{f}", box))
        self.mlp = dropdown("MLP", ["swiglu", "gelu"])
        self.norm = dropdown("Norm", ["rmsnorm", "layernorm"])
        self.tied = check("Tied embeddings")
        rows += [self.bind("model.mlp", self.mlp), self.bind("model.norm", self.norm),
                 self.bind("model.tied_embeddings", self.tied)]
        self.moe_box = w.VBox()
        self.moe_inputs = {}
        moe_rows = [w.HTML("<b>Mixture of experts</b>")]
        for f in MOE_FIELDS:
            box = int_box(f.replace("_", " ").capitalize(), 0, 100_000_000)
            self.moe_inputs[f] = box
            moe_rows.append(self.bind(f"model.moe.{f}", box))
        self.moe_box.children = moe_rows
        self.message = w.HTML()
        self.box = w.VBox(rows + [self.moe_box, self.message])
        self.refresh()

    def _pick(self, change: dict) -> None:
        if not self._syncing:
            self.state.set("model", {"preset": change["new"]})

    def _found(self, change: dict) -> None:
        key = self._by_label.get(str(change["new"]).strip())
        if key is not None and not self._syncing:
            self.state.set("model", {"preset": key})

    def before_refresh(self) -> None:
        preset = self.current("model.preset")
        if preset is not None:
            show_value(self.preset, preset)
        s = self.state.scenario
        moe = s is not None and s.model.moe is not None
        self.moe_box.layout.display = "" if moe else "none"
        msgs = [m for m in self.state.messages("model")
                if not any(m.startswith(f"model.{f}") for f in (*MODEL_FIELDS, "moe", "mlp",
                                                                 "norm", "tied_embeddings"))]
        self.message.value = "".join(f"<div class='wb-error' style='color:#cf222e'>{m}</div>"
                                     for m in msgs)

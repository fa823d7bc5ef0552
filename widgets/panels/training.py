"""Training: the method (pre-training, full fine-tuning, LoRA, QLoRA, and the adapters' rank,
scale, target layers, QLoRA's storage and the parts trained in full), sequence length, micro
and global batch, tokens, precision, recompute (and, for layer-wise checkpointing, one block in
how many), optimizer (and, where the engine offers them, the step inside backward and
activation offload), offload, attention kernel; the engine that runs the layout and its
switches (torch.compile, FP8 recipe, async TP, expert TP), only those the chosen engine offers.
Every choice is one the rule table allows with the engine (``engine_allows``), and every field
has a one-line tooltip."""
from __future__ import annotations

import dataclasses
import html

import ipywidgets as w

from widgets.panels.base import (
    FIELD_LAYOUT, STYLE, Panel, check, count_box, dropdown, float_box, int_box, select,
    set_options, shown_count, shown_hours,
)
from widgets.state import get_path
from workbench.engines import ENGINES
from workbench.scenario.rules import (
    CLASSIC_OPTIMIZERS, allowed_values, check_rules, engine_allows,
)
from workbench.scenario.types import (
    ATTENTION_KERNELS, LORA_TARGET_GROUPS, LORA_TRAINABLE, METHODS, OFFLOAD, OPTIMIZERS,
    PRECISIONS, RECOMPUTE,
)

ZERO_STAGES = (0, 1, 2, 3)
# the document paths of each engine switch (``Engine.switches``)
SWITCH_PATHS = {"compile": "training.compile", "fp8_recipe": "training.fp8_recipe",
                "async_tp": "parallel.async_tp", "tp_comm_overlap": "parallel.tp_comm_overlap",
                "expert_tp": "parallel.expert_tp"}
# the switches an imported config or the YAML tab sets, with no field of their own here:
# dropped with the others when the chosen engine lacks them
DOCUMENT_SWITCH_PATHS = {"fp8_param_gather": "training.fp8_param_gather",
                         "fp8_attention": "training.fp8_attention",
                         "state_dtypes": "training.state_dtypes",
                         "recompute_modules": "training.recompute_modules"}


# what a person calls each choice
METHOD_LABELS = {"pretrain": "pre-training (from scratch)",
                 "full": "full fine-tuning (every weight trains)",
                 "lora": "LoRA (frozen model + small adapters)",
                 "qlora": "QLoRA (4/8-bit frozen model + adapters)"}
OPTIMIZER_LABELS = {"adamw": "AdamW (PyTorch)", "sgd": "SGD with momentum (PyTorch)",
                    "adamw8bit": "AdamW 8-bit (bitsandbytes)",
                    "paged_adamw8bit": "Paged AdamW 8-bit (bitsandbytes)",
                    "adamw4bit": "AdamW 4-bit (torchao)",
                    "adafactor": "Adafactor (factored, little state)"}
TARGET_LABELS = {"attention": "attention (q, k, v, o)", "mlp": "MLP",
                 "all-linear": "all linear layers (attention + MLP)"}
QUANT_LABELS = (("4-bit NF4 (QLoRA paper)", "nf4"), ("8-bit int8 (LLM.int8)", "int8"))
TRAINABLE_LABELS = {"embeddings": "embeddings", "norms": "norms", "head": "output head"}
QLORA_PRECISIONS = ("bf16", "fp16", "fp32")   # QLoRA dequantises to a 16/32-bit dtype
TIPS = {
    "method": "What trains: every weight (pre-training, full fine-tuning) or small low-rank "
              "adapters beside a frozen model (LoRA, QLoRA)",
    "rank": "The adapters' width r: larger learns more and costs more memory (typical: 8-64)",
    "alpha": "The adapters' output is scaled by alpha / rank; no effect on memory or speed",
    "targets": "Which weight matrices get adapters: more layers, more weights to train",
    "quant": "How QLoRA stores the frozen model: 4-bit NF4 (about half a byte per weight) "
             "or 8-bit (one byte)",
    "double_quant": "Also quantise NF4's scaling constants: about 0.37 bit less per weight "
                    "(QLoRA paper, section 3)",
    "trainable": "Parts trained in full beside the adapters (e.g. new tokens need the "
                 "embeddings)",
    "optimizer": "The update rule, and how many bytes of state it keeps per trained weight",
    "optimizer_in_backward": "Update each weight as soon as its gradient is ready, so the "
                             "gradients are never all held at once (full fine-tuning, no "
                             "gradient accumulation)",
    "activation_offload": "Keep the activations saved for the backward pass in CPU memory: "
                          "less GPU memory, some time for the copies",
    "offload": "Keep the optimizer states in CPU memory or on NVMe (ZeRO-Offload / "
               "ZeRO-Infinity; needs ZeRO 1 or more)",
}


def _targets(value) -> tuple | None:
    """A document's ``training.lora.targets`` (a group name or a list) as a tuple."""
    if isinstance(value, str):
        return LORA_TARGET_GROUPS.get(value.strip().lower(), (value,))
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return None


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


class TrainingPanel(Panel):
    title = "Training"

    def __init__(self, state) -> None:
        super().__init__(state)
        self.seq_len = int_box("Sequence length", 1, 10_000_000)
        self.micro_batch = int_box("Micro-batch", 1, 100_000)
        self.global_batch = int_box("Global batch", 1, 100_000_000)
        self.tokens = count_box("Tokens to train")
        # "within a day?": the verdict's time part answers it (empty: no deadline)
        self.deadline = w.Text(description="Deadline", placeholder="e.g. 24h, 2 days (optional)",
                               continuous_update=False, style=STYLE, layout=FIELD_LAYOUT)
        self.precision = dropdown("Precision", list(PRECISIONS))
        self.recompute = dropdown("Recompute", list(RECOMPUTE))
        self.recompute_every = int_box("Checkpoint 1 block in every", 1, 1_000_000)
        self.optimizer = dropdown("Optimizer", [(OPTIMIZER_LABELS.get(o, o), o)
                                                for o in OPTIMIZERS],
                                  tooltip=TIPS["optimizer"])
        self.offload = dropdown("Offload", list(OFFLOAD), tooltip=TIPS["offload"])
        # the method and, for LoRA / QLoRA, the adapters
        self.method = dropdown("Training method", [(METHOD_LABELS[m], m) for m in METHODS],
                               tooltip=TIPS["method"])
        self.lora_rank = int_box("Adapter rank", 1, 65_536)
        self.lora_alpha = float_box("Adapter scale", 0.0, 1e6)
        self.lora_targets = dropdown("Adapt which layers", [
            (TARGET_LABELS[g], LORA_TARGET_GROUPS[g]) for g in LORA_TARGET_GROUPS])
        self.lora_quant = dropdown("Frozen model in", list(QUANT_LABELS))
        self.lora_double_quant = check("Double quantisation (quantise the scales too)")
        self.trainable = {part: check(TRAINABLE_LABELS[part]) for part in LORA_TRAINABLE}
        for part, box in self.trainable.items():
            box.layout = w.Layout(width="auto", margin="0 12px 0 0")
            box.tooltip = TIPS["trainable"]
            box.observe(self._trainable_changed, names="value")
        for widget, tip in ((self.lora_rank, "rank"), (self.lora_alpha, "alpha"),
                            (self.lora_targets, "targets"), (self.lora_quant, "quant"),
                            (self.lora_double_quant, "double_quant")):
            widget.tooltip = TIPS[tip]
        self.optimizer_in_backward = check("Optimizer step inside backward")
        self.optimizer_in_backward.tooltip = TIPS["optimizer_in_backward"]
        self.activation_offload = check("Offload activations to CPU memory")
        self.activation_offload.tooltip = TIPS["activation_offload"]
        self.attention = dropdown("Attention kernel", list(ATTENTION_KERNELS))
        self.engine = dropdown("Engine", [(e.label, name) for name, e in ENGINES.items()])
        self.engine.layout = FIELD_LAYOUT   # labels name products
        self.compile = check("torch.compile")
        self.fp8_recipe = dropdown("FP8 recipe", [("engine default", None)])
        self.async_tp = check("Async TP (overlap TP comm)")
        self.tp_comm_overlap = check("TP comm overlap (TE userbuffers)")
        self.expert_tp = dropdown("Expert TP", [("same as tp", None)])
        # each switch's row (the widget and its message), hidden when the engine lacks it
        self.rows = {
            "compile": self.bind("training.compile", self.compile, to_doc=lambda v: v or None),
            "fp8_recipe": self.bind("training.fp8_recipe", self.fp8_recipe),
            "async_tp": self.bind("parallel.async_tp", self.async_tp,
                                  to_doc=lambda v: v or None),
            "tp_comm_overlap": self.bind("parallel.tp_comm_overlap", self.tp_comm_overlap,
                                         to_doc=lambda v: v or None),
            "expert_tp": self.bind("parallel.expert_tp", self.expert_tp),
        }
        # the adapters' fields, shown for LoRA / QLoRA (quantisation for QLoRA only)
        self.lora_rows = {
            "quant": self.bind("training.lora.quant", self.lora_quant),
            "double_quant": self.bind("training.lora.double_quant", self.lora_double_quant),
        }
        self.trainable_message = w.HTML(layout=w.Layout(margin="0 0 0 8px"))
        self.lora_message = w.HTML(layout=w.Layout(margin="0 0 0 8px"))
        trainable_label = w.HTML("Also train in full:", layout=w.Layout(width="128px"))
        trainable_label.add_class("wb-trainable-label")
        self.lora_box = w.VBox([
            self.lora_message,
            self.bind("training.lora.rank", self.lora_rank),
            self.bind("training.lora.alpha", self.lora_alpha, to_doc=float),
            self.bind("training.lora.targets", self.lora_targets, to_doc=list,
                      from_doc=_targets),
            *self.lora_rows.values(),
            w.HBox([trainable_label, *self.trainable.values()]),
            self.trainable_message,
        ], layout=w.Layout(border="1px solid #d0d7de", padding="2px 0 2px 8px",
                           margin="0 0 4px 24px"))
        self.lora_box.add_class("wb-lora-box")
        # shown where the engine offers them (Engine.optimizer_in_backward, .activation_offload)
        self.ft_rows = {
            "optimizer_in_backward": self.bind("training.optimizer_in_backward",
                                               self.optimizer_in_backward,
                                               to_doc=lambda v: v or None),
            "activation_offload": self.bind("training.activation_offload",
                                            self.activation_offload,
                                            to_doc=lambda v: v or None),
        }
        # only with recompute "layer" (torchtitan's every-k-th-block checkpointing)
        self.recompute_every_row = self.bind("training.recompute_every", self.recompute_every)
        self.about = w.HTML(layout=w.Layout(width="400px", max_width="100%"))
        self.switches = w.VBox([w.HTML("<i>Engine switches</i>"), *self.rows.values()])
        self.box = w.VBox([
            w.HTML("<b>Training</b>"),
            self.bind("training.method", self.method, on_set=self._method_set),
            self.lora_box,
            self.bind("training.seq_len", self.seq_len),
            self.bind("training.micro_batch", self.micro_batch),
            self.bind("training.global_batch", self.global_batch),
            self.bind("training.tokens", self.tokens, to_doc=float, from_doc=shown_count),
            self.bind("training.deadline", self.deadline,
                      to_doc=lambda v: (v or "").strip() or None, from_doc=shown_hours),
            self.bind("training.precision", self.precision, on_set=self._precision_set),
            self.bind("training.engine", self.engine, on_set=self._engine_set),
            self.about,
            self.switches,
            # Megatron's recomputed modules apply under selective only: another policy drops them
            self.bind("training.recompute", self.recompute, on_set=lambda v: (
                {"training.recompute_modules": None} if v != "selective"
                and self.current("training.recompute_modules") else {})),
            self.recompute_every_row,
            self.bind("training.optimizer", self.optimizer),
            *self.ft_rows.values(),
            self.bind("training.offload", self.offload),
            self.bind("training.attention", self.attention),
        ])
        self.refresh()

    def _engine(self):
        return ENGINES.get(self.current("training.engine", "generic"), ENGINES["generic"])

    def _engine_set(self, name: str) -> dict:
        """Choosing an engine drops the switches it lacks and moves recompute and ZeRO to
        values it offers; the method is the person's choice and stays (an engine that cannot
        train it is refused by the validator, in words, naming the engines that do)."""
        eng = ENGINES[name]
        changes = {path: None for switch, path in {**SWITCH_PATHS,
                                                   **DOCUMENT_SWITCH_PATHS}.items()
                   if not eng.offers(switch) and self.current(path) not in (None, False)}
        if self.current("training.fp8_recipe") not in (None, *eng.fp8_recipes):
            changes["training.fp8_recipe"] = None
        if self.current("training.recompute") not in eng.recompute:
            changes["training.recompute"] = (eng.recompute_default
                                             if eng.recompute_default in eng.recompute
                                             else eng.recompute[0])
        # the method stays what the person chose: an engine that cannot train it is refused
        # in words under the method field, naming the engines that do (never changed silently)
        if self.current("training.optimizer") not in (eng.optimizers or CLASSIC_OPTIMIZERS):
            changes["training.optimizer"] = "adamw"
        if eng.precisions and self.current("training.precision") not in eng.precisions:
            changes["training.precision"] = ("bf16" if "bf16" in eng.precisions
                                             else eng.precisions[0])
            changes["training.fp8_recipe"] = None
        if name != "generic":     # generic costs every mechanism
            for key in ("optimizer_in_backward", "activation_offload"):
                if self.current(f"training.{key}") and not getattr(eng, key):
                    changes[f"training.{key}"] = None
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

    def _method_set(self, method: str) -> dict:
        """LoRA/QLoRA get their adapters' table (the validator fills the defaults; a GELU MLP
        has no gate to adapt), the other methods lose it; QLoRA's quantisation goes with QLoRA
        only, and QLoRA computes in a 16/32-bit dtype; the optimizer step inside backward goes
        with full fine-tuning only (where the rule table says so)."""
        doc = self.state.doc
        changes: dict = {}
        if method in ("lora", "qlora"):
            if method == "lora":
                for key in ("quant", "double_quant"):
                    if get_path(doc, f"training.lora.{key}") is not None:
                        changes[f"training.lora.{key}"] = None
            s = self.state.scenario
            if (s is not None and s.model.mlp != "swiglu"
                    and get_path(doc, "training.lora.targets") is None):
                changes["training.lora.targets"] = [
                    p for p in LORA_TARGET_GROUPS["all-linear"] if p != "gate"]
            if method == "qlora" and self.current("training.precision") not in QLORA_PRECISIONS:
                changes["training.precision"] = "bf16"
                changes["training.fp8_recipe"] = None
        elif get_path(doc, "training.lora") is not None:
            changes["training.lora"] = None
        if self.current("training.optimizer_in_backward") and method != "full" \
                and self.current("training.engine", "generic") != "generic":
            changes["training.optimizer_in_backward"] = None
        return changes

    def _trainable_changed(self, _change: dict) -> None:
        """The "also train in full" boxes write one list (``training.lora.trainable``)."""
        if self._syncing:
            return
        parts = [p for p, box in self.trainable.items() if box.value]
        self.state.update({"training.lora.trainable": parts or None})

    def _precision_set(self, precision: str) -> dict:
        """A recipe only goes with fp8."""
        if precision != "fp8" and self.current("training.fp8_recipe") is not None:
            return {"training.fp8_recipe": None}
        return {}

    def before_refresh(self) -> None:
        """Offer the engine's recompute policies and recipes; show only its switches (the FP8
        recipe with precision fp8, expert TP for MoE models)."""
        eng = self._engine()
        self._fine_tuning_refresh(eng)
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
                 "tp_comm_overlap": eng.offers("tp_comm_overlap"),
                 "expert_tp": eng.offers("expert_tp") and moe}
        # a switch the document sets stays visible (with the validator's message) until reset
        for switch, path in SWITCH_PATHS.items():
            on = self.current(path) not in (None, False)
            self.rows[switch].layout.display = "" if shown[switch] or on else "none"
        self.switches.layout.display = "" if any(
            r.layout.display == "" for r in self.rows.values()) else "none"
        for switch in ("async_tp", "tp_comm_overlap"):    # TP overlaps need TP
            getattr(self, switch).disabled = (self.current("parallel.tp", 1) or 1) == 1 \
                and not self.current(SWITCH_PATHS[switch])
        # the refresh sets only values the document has: show "default" for a null field
        for path, widget in (("training.fp8_recipe", self.fp8_recipe),
                             ("parallel.expert_tp", self.expert_tp)):
            if self.current(path) is None:
                select(widget, None)
        if not self.current("training.compile"):
            self.compile.value = False
        for switch in ("async_tp", "tp_comm_overlap"):
            if not self.current(SWITCH_PATHS[switch]):
                getattr(self, switch).value = False

    def _fine_tuning_refresh(self, eng) -> None:
        """The methods and optimizers the rule table allows with this engine; the adapters'
        box for LoRA/QLoRA (quantisation for QLoRA); the engine's fine-tuning switches."""
        s = self.state.scenario
        methods, optimizers = list(METHODS), list(OPTIMIZERS)
        if s is not None:
            # a method is offered when the engine trains with it; what else would need
            # changing with it (tp 1 for some engines' adapters, the optimizer step inside
            # backward) is changed with it or named by the validator
            free = dataclasses.replace(
                s, parallel=dataclasses.replace(s.parallel, tp=1),
                training=dataclasses.replace(s.training, engine=eng.name,
                                             optimizer_in_backward=False))
            methods = engine_allows(free, "training.method", methods) or list(eng.methods)
            optimizers = engine_allows(dataclasses.replace(s, training=dataclasses.replace(
                s.training, engine=eng.name)), "training.optimizer", optimizers)
        # the method the document holds stays listed when the engine cannot train it: the
        # field shows it beside the validator's words (which engines do), never another
        held = get_path(self.state.doc, "training.method", None) or "pretrain"
        if held in METHODS and held not in methods:
            methods = [*methods, held]
        set_options(self.method, [(METHOD_LABELS[m], m) for m in methods])
        set_options(self.optimizer, [(OPTIMIZER_LABELS.get(o, o), o) for o in optimizers])
        method = self.current("training.method", "pretrain")
        adapters = method in ("lora", "qlora")
        self.lora_box.layout.display = "" if adapters else "none"
        self.lora_rows["quant"].layout.display = "" if method == "qlora" else "none"
        self.lora_rows["double_quant"].layout.display = (
            "" if method == "qlora" and self.current("training.lora.quant", "nf4") == "nf4"
            else "none")
        # the target groups this model has (a GELU MLP: up and down, no gate)
        gate = s is None or s.model.mlp == "swiglu"
        groups = [(TARGET_LABELS[g], tuple(p for p in LORA_TARGET_GROUPS[g]
                                           if gate or p != "gate"))
                  for g in LORA_TARGET_GROUPS]
        groups = [(f"MLP ({', '.join(v)})" if lbl == "MLP" else lbl, v) for lbl, v in groups]
        mine = _targets(get_path(self.state.doc, "training.lora.targets")
                        or self.current("training.lora.targets"))
        if mine and mine not in [v for _, v in groups]:
            groups.append((", ".join(mine), mine))
        set_options(self.lora_targets, groups)
        trainable = self.current("training.lora.trainable") or []
        for part, box in self.trainable.items():
            box.value = part in trainable
        self.trainable_message.value = self._messages("training.lora.trainable")
        self.lora_message.value = self._messages("training.lora", exact=True)
        if not self.current("training.lora.double_quant", True):
            self.lora_double_quant.value = False
        # the engine's fine-tuning switches: shown where it offers them, or set
        for key, row in self.ft_rows.items():
            on = bool(self.current(f"training.{key}"))
            row.layout.display = "" if getattr(eng, key) or on else "none"
            if not on:
                getattr(self, key).value = False
        self.optimizer_in_backward.disabled = not (
            self.current("training.optimizer_in_backward") or s is None
            or engine_allows(s, "training.optimizer_in_backward", [True]))

    def _messages(self, path: str, exact: bool = False) -> str:
        lines = ([str(p) for p in self.state.problems if p.path == path] if exact
                 else self.state.messages(path))
        return "".join(f"<div class='wb-error' style='color:#cf222e;font-size:12px'>"
                       f"{html.escape(m)}</div>" for m in lines)

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

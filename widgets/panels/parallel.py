"""Parallelism: degrees offered as valid divisors only (dp fills the rest of the GPUs), ZeRO
stage / FSDP2 / HSDP, sequence parallelism, pipeline schedule and virtual stages."""
from __future__ import annotations

import dataclasses

import ipywidgets as w

from widgets.panels.base import Panel, check, dropdown, int_box, set_options
from widgets.words import tip_html
from workbench.scenario.rules import allowed_values, engine_allows
from workbench.scenario.types import SCHEDULES

ZERO_LABELS = [("0: DDP (replicated)", 0), ("1: ZeRO-1 / distributed optimizer", 1),
               ("2: ZeRO-2 (+ gradients)", 2), ("3: ZeRO-3 / FSDP2 (+ parameters)", 3)]
RESHARD = [("torchtitan default", None), ("yes", True), ("no", False)]


def dp_words(par: dict, world: int) -> str:
    """The data-parallel line: dp fills the GPUs the other degrees leave, or says why it
    cannot (tp x pp x cp does not divide the GPU count)."""
    rest = par["tp"] * par["pp"] * par["cp"]
    style = "<div class='wb-dp' style='margin:4px 0'>"
    if world % rest == 0 and par["dp"] * rest == world:
        return (f"{style}Data parallel ({tip_html('DP', 'dp')}): <b>{par['dp']}</b> "
                f"(fills the {world} GPUs: {world} / (tp {par['tp']} \u00d7 pp {par['pp']} "
                f"\u00d7 cp {par['cp']}))</div>")
    return (f"{style}<span style='color:#cf222e'>Data parallel (dp) cannot fill the {world} "
            f"GPUs: tp {par['tp']} \u00d7 pp {par['pp']} \u00d7 cp {par['cp']} = {rest} "
            + (f"does not divide {world}" if world % rest else f"needs dp {world // rest}")
            + "; choose degrees that divide the GPU count</span></div>")


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


class ParallelPanel(Panel):
    title = "Parallelism"

    def __init__(self, state) -> None:
        super().__init__(state)
        self.dp = w.HTML()
        self.tp = dropdown("Tensor (tp)", [1])
        self.pp = dropdown("Pipeline (pp)", [1])
        self.cp = dropdown("Context (cp)", [1])
        self.ep = dropdown("Expert (ep)", [1])
        self.zero = dropdown("ZeRO / FSDP", ZERO_LABELS)
        self.shard = dropdown("HSDP shard group", [("none (full sharding)", None)])
        self.reshard = dropdown("Reshard after fwd", RESHARD)
        self.sp = check("Sequence parallel (with TP)")
        self.schedule = dropdown("PP schedule", list(SCHEDULES))
        self.virtual = int_box("Virtual stages", 1, 64)

        def with_dp(name):
            def fill(v):
                par = dict(self._par(), **{name: v})
                rest = par["tp"] * par["pp"] * par["cp"]
                world = self._world()
                return {"parallel.dp": world // rest} if world % rest == 0 else {}
            return fill

        self.box = w.VBox([
            w.HTML("<b>Parallelism</b>"), self.dp,
            self.bind("parallel.tp", self.tp, on_set=with_dp("tp")),
            self.bind("parallel.pp", self.pp, on_set=with_dp("pp")),
            self.bind("parallel.cp", self.cp, on_set=with_dp("cp")),
            self.bind("parallel.ep", self.ep),
            self.bind("parallel.zero", self.zero),
            self.bind("parallel.shard_group", self.shard),
            self.bind("parallel.reshard_after_forward", self.reshard),
            self.bind("parallel.sequence_parallel", self.sp),
            self.bind("parallel.pp_schedule", self.schedule),
            self.bind("parallel.virtual_stages", self.virtual),
            self.bind("parallel.dp", w.IntText(layout=w.Layout(display="none"))),
        ])
        self.refresh()

    def _par(self) -> dict:
        # int(): the validator takes a whole number written as 8.0
        return {k: int(self.current(f"parallel.{k}", 1)) for k in ("dp", "tp", "pp", "cp", "ep")}

    def _world(self) -> int:
        return int(self.current("hardware.gpus_per_node", 1) or 1) * int(self.current(
            "hardware.nodes", 1) or 1)

    def before_refresh(self) -> None:
        """Offer the degrees that divide the GPUs and pass the rule table's conditions on that
        degree (``scenario.rules.allowed_values``: TP divides the heads and FFN widths, a stage
        holds a layer, CP splits the sequence, EP divides dp x cp and the experts, an HSDP group
        divides dp x cp under ZeRO, the ZeRO stage is one the engine offers); dp fills the GPUs
        as tp, pp and cp change."""
        world, par = self._world(), self._par()
        s = self.state.scenario
        div = _divisors(world)
        shard = par["dp"] * par["cp"]
        groups = [d for d in _divisors(shard) if 1 < d < shard]
        stages = [z for _, z in ZERO_LABELS]
        if s is None:     # the document does not validate yet: offer the GPUs' divisors
            offer = {"tp": div, "pp": div, "cp": div, "ep": [1], "shard_group": groups,
                     "zero": stages}
        else:
            # the degrees as edited; pipeline settings follow pp, so pp is offered as with one
            # chunk per rank (the most permissive), and dp fills the GPUs for tp, pp and cp
            now = dataclasses.replace(s, parallel=dataclasses.replace(
                s.parallel, shard_group=None, **par))
            flat = dataclasses.replace(now, parallel=dataclasses.replace(
                now.parallel, pp_schedule="1f1b", virtual_stages=1))
            experts = s.model.moe.experts if s.model.moe else 1
            offer = {"tp": allowed_values(now, "tp", div, ("dp",)),
                     "pp": allowed_values(flat, "pp", div, ("dp",)),
                     "cp": allowed_values(now, "cp", div, ("dp",)),
                     "ep": allowed_values(now, "ep", _divisors(experts)),
                     "shard_group": allowed_values(now, "shard_group", groups),
                     # the engine's stages (torchtitan has no ZeRO-1), none ZeRO-2 with pp
                     "zero": allowed_values(now, "zero", stages)}
        set_options(self.tp, offer["tp"] or [1])
        set_options(self.pp, offer["pp"] or [1])
        set_options(self.cp, offer["cp"] or [1])
        set_options(self.ep, offer["ep"] or [1])
        set_options(self.zero, [(label, z) for label, z in ZERO_LABELS
                             if z in offer["zero"]] or ZERO_LABELS)
        set_options(self.shard, [("none (full sharding)", None)] + [
            (str(d), d) for d in offer["shard_group"]])
        self.dp.value = dp_words(par, world)
        pipelined = par["pp"] > 1
        if s is not None and pipelined:   # the schedules the engine runs
            set_options(self.schedule, engine_allows(now, "parallel.pp_schedule", SCHEDULES)
                        or [s.parallel.pp_schedule])
        else:
            set_options(self.schedule, list(SCHEDULES))
        self.schedule.disabled = self.virtual.disabled = not pipelined
        self.sp.disabled = par["tp"] == 1

"""The verdict: the one answer a person reads first (contract 2's ``verdict``; the CLI prints it
above the table, the page shows it at the top of Plan).

It is made of parts, each ``pass``, ``warn`` or ``fail`` (the GPU's also ``tight``) with one
sentence:

- ``gpu memory``: the worst GPU against its capacity with the memory estimate's band
  (``estimate.memory.fit``): ``pass`` where nine in ten runs like it needed no more than the
  GPU holds; ``fail`` where even the least it could need (the allocator's cache freed, at the
  band's other end) is above it; ``tight`` in between, saying the band and what settles it (a
  trial on the GPU). Tight is not a failure: the verdict is ok, and says "Tight".
- ``host memory`` and ``nvme``: what optimizer and activation offload put in host DDR and on
  the drives per node (``MemoryEstimate.host_fits`` / ``nvme_fits``, the planner's rule); the
  NVMe part is there only when something goes to NVMe.
- ``build``: the build checks of one node (``estimate.run.build_checks``): a FAIL fails the
  verdict, a WARN is said.
- ``time to train``: fails only where the scenario gives a deadline (``training.deadline``) and
  the run takes longer; ``cost`` (only when the scenario gives a price): fails only where it
  gives a budget (``training.budget``) and the run costs more. Either failure says what this
  layout does within the limit (the tokens it trains in the time, or for the money), and the
  next steps what would meet it.

The verdict is ``ok`` only when no part fails (warnings and tight allowed). When it is not ok, ``next``
lists steps the product can take, each with the figures it would give: for a failed build check
what to change (a CPU from the catalog with enough PCIe lanes, the host memory or drive space
needed), and, when a memory part fails, the planner's answers, which
``workbench.plan.next_steps.searched_verdict`` adds (the planner sits above the estimate).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from workbench.estimate.memory.fit import band_words
from workbench.scenario.types import KEY_INPUTS, Scenario
from workbench.units import (HOUR, TB, duration_text, hours_text, memory_text, money_text,
                             percent_text, tokens_text)

NODE_FACTORS = (2, 4)       # more nodes the next steps try, in this order
# the methods tried instead of each, and how the step says it
INSTEAD = {
    "pretrain": (("lora", "qlora"), "If you adapt a trained model rather than pre-training"),
    "full": (("lora", "qlora"), "If you train adapters rather than every weight"),
    "lora": (("qlora",), "With the frozen base quantised"),
}
MEMORY_PARTS = ("gpu memory", "host memory", "nvme")
LIMIT_PARTS = ("time to train", "cost")
CHECK_WORDS = {"power": "power", "pcie_lanes": "PCIe lanes", "host_memory": "host memory",
               "drives": "drives", "cooling": "cooling"}
OFFLOAD_WORDS = {"cpu": "CPU offload", "nvme": "NVMe offload"}


@dataclass(frozen=True)
class Part:
    """One question of the verdict: ``status`` pass | warn | tight | fail, ``says`` one
    sentence."""

    name: str
    status: str
    says: str

    @property
    def ok(self) -> bool:
        return self.status != "fail"

    def as_dict(self) -> dict:
        return {"name": self.name, "ok": self.ok, "status": self.status, "says": self.says}


@dataclass(frozen=True)
class NextStep:
    """What to do instead, with what it would give. ``kind``: layout (another layout on this
    hardware), nodes (more nodes), method (a fine-tuning method), build (a part of the node);
    ``set``: the scenario fields to change, as ``--set`` key paths (empty for build steps that
    name a part to buy); ``figures``: bytes, seconds and counts of the result."""

    says: str
    kind: str
    set: dict = field(default_factory=dict)
    figures: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"says": self.says, "kind": self.kind, "set": dict(self.set),
                "figures": dict(self.figures)}


@dataclass(frozen=True)
class Verdict:
    ok: bool
    says: str
    parts: list[Part]
    next: list[NextStep]
    searched: bool = False      # whether the next steps ran the planner
    search_s: float = 0.0       # seconds those searches took
    # what the searches' time budget left unsearched, each with the command that searches it
    # (workbench.plan.next_steps)
    unsearched: list[str] = field(default_factory=list)

    def part(self, name: str) -> Part | None:
        return next((p for p in self.parts if p.name == name), None)

    def as_dict(self) -> dict:
        return {"ok": self.ok, "says": self.says, "parts": [p.as_dict() for p in self.parts],
                "next": [n.as_dict() for n in self.next], "searched": self.searched,
                "search_s": self.search_s, "unsearched": list(self.unsearched)}


def verdict(s: Scenario, est, found: list | None = None, search_s: float = 0.0,
            unsearched: list[str] | None = None) -> Verdict:
    """The verdict on ``est`` (the ``Estimate`` of ``s``), with the steps that need no search.
    ``found``: the planner's steps when a memory part fails (``workbench.plan.next_steps``,
    which runs the searches: the planner is above the estimate, so this module never calls
    it), ``search_s`` the seconds they took, ``unsearched`` what their time budget left."""
    parts = [_gpu_part(s, est), _host_part(s, est)]
    nvme = _nvme_part(est)
    if nvme is not None:
        parts.append(nvme)
    parts += [_build_part(est, s.hardware), _time_part(s, est)]
    cost = _cost_part(s, est)
    if cost is not None:
        parts.append(cost)
    ok = all(p.ok for p in parts)
    steps: list[NextStep] = []
    if not ok:
        steps += limit_steps(s, est)
        steps += list(found or ())
        steps += build_steps(s, est)
    return Verdict(ok=ok, says=_sentence(s, est, parts, ok), parts=parts, next=steps,
                   searched=found is not None, search_s=search_s,
                   unsearched=list(unsearched or ()) if not ok else [])


def memory_fails(v: Verdict) -> bool:
    """Whether a memory part (GPU, host, NVMe) fails: then the planner's steps are wanted."""
    return any(not p.ok for p in v.parts if p.name in MEMORY_PARTS)


def limit_fails(v: Verdict) -> bool:
    """Whether the run misses the scenario's deadline or budget: then the planner's faster
    layouts, methods and nodes are wanted too."""
    return any(not p.ok for p in v.parts if p.name in LIMIT_PARTS)


def meets_limits(s: Scenario, time_to_train_s: float, cost: float | None) -> str:
    """Whether a run of ``time_to_train_s`` (costing ``cost``) meets the scenario's deadline and
    budget, in words for a next step ("" where the scenario sets neither)."""
    tr = s.training
    bits = []
    if tr.deadline is not None:
        bits.append(f"within your {hours_text(tr.deadline)}"
                    if time_to_train_s <= tr.deadline * HOUR
                    else f"still longer than your {hours_text(tr.deadline)}")
    if tr.budget is not None and cost is not None:
        bits.append("within your budget" if cost <= tr.budget else "still over your budget")
    return f" ({', '.join(bits)})" if bits else ""


def limit_steps(s: Scenario, est) -> list[NextStep]:
    """Where the run misses its deadline or budget, the step that needs no search: the tokens
    this layout trains within both."""
    tr, r = s.training, est.run
    shares = []
    if tr.deadline is not None and r.time_to_train_s > tr.deadline * HOUR:
        shares.append(tr.deadline * HOUR / r.time_to_train_s)
    if tr.budget is not None and r.cost and r.cost["total"] > tr.budget:
        shares.append(tr.budget / r.cost["total"])
    if not shares:
        return []
    tokens = tr.tokens * min(shares)
    # a count people write back (three significant digits, rounded down so it stays within)
    digits = 10 ** (len(str(int(tokens))) - 3) if tokens >= 1000 else 1
    tokens = max(1.0, float(int(tokens // digits) * digits))
    return [NextStep(f"Train {tokens_text(tokens)} instead of {tokens_text(tr.tokens)}: this "
                     f"layout does that within your limit.", "tokens",
                     {"training.tokens": tokens}, {"tokens": tokens})]


# ---- the parts ----------------------------------------------------------------------------

def _gpu_part(s: Scenario, est) -> Part:
    m = est.memory
    g = m.per_gpu
    dev, least, cap = g.device, g.device_least, m.capacity
    share = dev / cap if cap else float("inf")
    status = m.gpu_fit
    band = f" ({band_words(m.band)})" if m.band else ""
    if status == "fail":
        text = (f"The worst GPU needs {memory_text(dev)} as nvidia-smi counts it, "
                f"{memory_text(dev - cap)} more than the {memory_text(cap)} of a "
                f"{s.hardware.gpu.name}")
        if m.band:
            cache = (f", and at least {memory_text(least)} with the allocator's cache freed"
                     if least < dev else "")
            text += (f"{cache}: more than the GPU even at the memory estimate's low end{band}")
        return Part("gpu memory", "fail", text + ".")
    if status == "tight":
        cache = (f" (at least {memory_text(least)} with the allocator's cache freed)"
                 if least < dev else "")
        return Part("gpu memory", "tight",
                    f"{memory_text(dev)} of {memory_text(cap)} per GPU ({percent_text(share)})"
                    f"{cache}: within the memory estimate's error{band}, so it may or may not "
                    f"fit. A trial on this GPU settles it (workbench trial --shape slice), or "
                    f"a layout with more room.")
    return Part("gpu memory", "pass",
                f"{memory_text(dev)} of {memory_text(cap)} per GPU ({percent_text(share)}), "
                f"{memory_text(cap - dev)} to spare" + (
                    f": it fits even where the estimate is low{band}" if m.band else "") + ".")


def _host_use(s: Scenario) -> str:
    tr = s.training
    what = [OFFLOAD_WORDS[tr.offload]] if tr.offload in OFFLOAD_WORDS else []
    if tr.activation_offload:
        what.append("activation offload")
    return " and ".join(what) or "pinned staging"


def _host_part(s: Scenario, est) -> Part:
    m = est.memory
    need, have = m.host_per_node, m.host_capacity_per_node
    if need <= 0:
        return Part("host memory", "pass", "Nothing is offloaded to host memory.")
    use = _host_use(s)
    if not m.host_fits:
        return Part("host memory", "fail",
                    f"{use[0].upper() + use[1:]} needs {memory_text(need)} of host memory per "
                    f"node; the node has {memory_text(have, 0)} (hardware.host.memory_gb).")
    # no warning threshold here: unlike the GPU's (module docstring) no source gives one
    return Part("host memory", "pass",
                f"{use[0].upper() + use[1:]} uses {memory_text(need)} of the node's "
                f"{memory_text(have, 0)} of host memory ({percent_text(need / have)}).")


def _nvme_part(est) -> Part | None:
    m = est.memory
    need, have = m.nvme_per_node, m.nvme_capacity_per_node
    if need <= 0 and m.nvme_fits:
        return None
    if not m.nvme_fits:
        return Part("nvme", "fail", f"NVMe offload needs {need / TB:,.2f} TB per node; the "
                    f"drives hold {have / TB:,.2f} TB.")
    return Part("nvme", "pass", f"NVMe offload uses {need / TB:,.2f} TB of the drives' "
                f"{have / TB:,.2f} TB per node.")


def _build_part(est, hardware=None) -> Part:
    """The build checks of one node; on a machine that exists (``hardware.owned``) a failed
    check is advice (warn), never the answer."""
    checks = est.checks
    owned = bool(hardware is not None and hardware.owned)
    s_intra = hardware.intra_node.name if hardware is not None else ""
    if not checks:
        return Part("build", "pass", "Nothing to build: a calibrated machine exists already.")
    fails = [c for c in checks if c.status == "fail"]
    warns = [c for c in checks if c.status == "warn"]
    skips = [c for c in checks if c.status == "skip"]

    def said(cs) -> str:
        return "; ".join(f"{CHECK_WORDS.get(c.name, c.name)}: {c.reason}" for c in cs)

    if fails and owned:
        # the machine exists: what a plan would fail is advice about the box as it runs
        text = ("Your machine exists, so these are advice, not the answer: " + said(fails)
                + "." + (" The GPUs then share the CPU's lanes through PCIe switches or run at "
                         "reduced width; the step time assumes the intra-node link as given "
                         f"({s_intra})." if any(c.name == "pcie_lanes" for c in fails)
                         else ""))
        status = "warn"
    elif fails:
        text = "One node cannot be built as given: " + said(fails) + "."
        status = "fail"
    elif warns:
        text = "One node can be built, with care: " + said(warns) + "."
        status = "warn"
    else:
        text = "One node can be built: " + ", ".join(
            CHECK_WORDS.get(c.name, c.name) for c in checks if c.status == "pass") + " pass."
        status = "pass"
    if fails and warns:
        text += " Also to check: " + said(warns) + "."
    if skips:
        text += " Not checked: " + ", ".join(CHECK_WORDS.get(c.name, c.name) for c in skips) + "."
    return Part("build", status, text)


def _time_part(s: Scenario, est) -> Part:
    r, t, tr = est.run, est.time, s.training
    took = f"{tokens_text(tr.tokens)} in {duration_text(r.time_to_train_s)}"
    rate = (f"{r.tokens_per_s:,.0f} tokens/s ({duration_text(t.step)} per step, MFU "
            f"{percent_text(r.mfu)})")
    if tr.deadline is None:
        return Part("time to train", "pass", f"{took} at {rate}.")
    limit = tr.deadline * HOUR
    if r.time_to_train_s <= limit:
        return Part("time to train", "pass",
                    f"{took}: within your {hours_text(tr.deadline)}, at {rate}.")
    return Part("time to train", "fail",
                f"{took}, longer than your {hours_text(tr.deadline)}, at {rate}; in "
                f"{hours_text(tr.deadline)} this layout trains "
                f"{tokens_text(r.tokens_per_s * limit)}.")


def _cost_part(s: Scenario, est) -> Part | None:
    r, tr = est.run, s.training
    if not r.cost:
        return None
    bits = []
    if "gpus" in r.cost:
        hours = s.hardware.world * r.time_to_train_s / 3600
        bits.append(f"GPUs {r.cost['gpus']:,.0f} ({hours:,.0f} GPU-hours at "
                    f"{tr.price_per_gpu_hour:g} per GPU-hour)")
    if "energy" in r.cost:
        bits.append(f"energy {r.cost['energy']:,.0f} ({r.energy_kwh:,.0f} kWh at "
                    f"{tr.price_per_kwh:g} per kWh)")
    text = f"{money_text(r.cost['total'])}: " + ", ".join(bits)
    if tr.budget is None:
        return Part("cost", "pass", text + ".")
    if r.cost["total"] <= tr.budget:
        return Part("cost", "pass", text + f"; within your budget of {money_text(tr.budget)}.")
    # the cost grows with the tokens (GPU-hours and kWh both scale with the run's length)
    affordable = tr.tokens * tr.budget / r.cost["total"]
    return Part("cost", "fail", text + f"; more than your budget of {money_text(tr.budget)}: "
                f"it pays for {tokens_text(affordable)} with this layout.")


def _sentence(s: Scenario, est, parts: list[Part], ok: bool) -> str:
    """The verdict in one sentence."""
    m, r, hw = est.memory, est.run, s.hardware
    if ok:
        text = (f"Yes: {s.model.name} trains on {hw.world} x {hw.gpu.name} with this layout, "
                f"{memory_text(m.per_gpu.device)} of {memory_text(m.capacity)} per GPU; "
                f"{tokens_text(s.training.tokens)} take {duration_text(r.time_to_train_s)}")
        if s.training.deadline is not None:
            text += f", within your {hours_text(s.training.deadline)}"
        if r.cost:
            text += f" and cost {money_text(r.cost['total'])}"
        warned = [p.name for p in parts if p.status == "warn"]
        if warned:
            text = "Yes, with care" + text[3:] + f"; check {', '.join(warned)}"
        if any(p.status == "tight" for p in parts):
            text = (f"Tight: {s.model.name} on {hw.world} x {hw.gpu.name} with this layout needs "
                    f"{memory_text(m.per_gpu.device)} of {memory_text(m.capacity)} per GPU, "
                    "within the memory estimate's error: a trial on the GPU says whether it "
                    f"fits; {tokens_text(s.training.tokens)} would take "
                    f"{duration_text(r.time_to_train_s)}")
            if warned:
                text += f"; check {', '.join(warned)}"
        return text + "."
    why = []
    for p in parts:
        if p.ok:
            continue
        if p.name == "gpu memory":
            why.append(f"the worst GPU needs {memory_text(m.per_gpu.device)} and has "
                       f"{memory_text(m.capacity)}")
        elif p.name == "host memory":
            why.append(f"{_host_use(s)} needs {memory_text(m.host_per_node)} of host memory "
                       f"per node and the node has {memory_text(m.host_capacity_per_node, 0)}")
        elif p.name == "nvme":
            why.append(f"NVMe offload needs {m.nvme_per_node / TB:,.2f} TB per node and the "
                       f"drives hold {m.nvme_capacity_per_node / TB:,.2f} TB")
        elif p.name == "build":
            names = [CHECK_WORDS.get(c.name, c.name) for c in est.checks if c.status == "fail"]
            why.append(f"one node cannot be built ({', '.join(names)})")
        else:
            why.append(p.says.rstrip("."))
    text = f"No: {s.model.name} on {hw.world} x {hw.gpu.name}: " + "; ".join(why) + "."
    shaping = [p for p in parts if not p.ok and p.name in (*MEMORY_PARTS, *LIMIT_PARTS)]
    if shaping and s.defaulted:
        text += (" Not given, so defaulted: " + ", ".join(
            f"{KEY_INPUTS[path]} {_value_words(s, path)}" for path in s.defaulted)
            + " (set them if your run differs).")
    return text


def _value_words(s: Scenario, path: str) -> str:
    """A scenario field's value as the verdict names a default ("1", "selective")."""
    section, name = path.split(".")
    value = getattr(getattr(s, section), name)
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


# ---- next steps ---------------------------------------------------------------------------

def _lanes_needed(s: Scenario) -> int:
    from workbench.estimate.run.build_checks import NVME_LANES

    hw = s.hardware
    return (hw.gpu.pcie_lanes * hw.gpus_per_node
            + hw.inter_node.link.pcie_lanes * hw.inter_node.nics_per_node
            + NVME_LANES * hw.storage.drives)


def build_steps(s: Scenario, est) -> list[NextStep]:
    """For each failed build check, what to change, with the figure it needs."""
    from workbench.catalog import CATALOGS
    from workbench.estimate.run.build_checks import checkpoint_bytes

    hw = s.hardware
    out = []
    for c in est.checks:
        if c.status != "fail":
            continue
        if c.name == "pcie_lanes":
            need = _lanes_needed(s)
            offers = []
            for key, cpu in CATALOGS["cpu"].items():
                for sockets in (1, 2):
                    if sockets == 2 and not cpu.pcie_lanes_2p:   # a one-socket part
                        continue
                    lanes = cpu.usable_pcie_lanes(sockets)
                    if lanes >= need:
                        offers.append((sockets, lanes, key, cpu.name))
                        break
            offers.sort()
            if offers:
                named = ", ".join(f"{'2 x ' if k == 2 else ''}{name} ({lanes} lanes; "
                                  f"hardware.host.cpu: {key}"
                                  + (", sockets: 2" if k == 2 else "") + ")"
                                  for k, lanes, key, name in offers[:2])
                says = (f"Use a host CPU with at least {need} usable PCIe lanes: {named}.")
            else:
                says = (f"No CPU in the catalog gives {need} PCIe lanes: put the GPUs behind "
                        "PCIe switches (an HGX baseboard) or fewer GPUs in a node.")
            out.append(NextStep(says, "build", {}, {"pcie_lanes": need}))
        elif c.name == "host_memory":
            need = est.memory.host_per_node
            out.append(NextStep(
                f"Install at least {memory_text(need, 0)} of host memory per node "
                f"(hardware.host.memory_gb; now {memory_text(est.memory.host_capacity_per_node, 0)}"
                f"), on a CPU that supports it, or take a layout that offloads less.", "build",
                {}, {"host_per_node": need}))
        elif c.name == "drives":
            need = sum(checkpoint_bytes(s)) + est.memory.nvme_per_node
            have = hw.storage.drives * hw.storage.drive.capacity_tb * TB
            out.append(NextStep(
                f"Give each node at least {need / TB:,.1f} TB of drives for a checkpoint"
                + (" and the NVMe offload" if est.memory.nvme_per_node else "")
                + f" (now {have / TB:,.1f} TB; hardware.storage).", "build", {},
                {"drive_bytes_per_node": need}))
    return out


__all__ = ["NextStep", "Part", "Verdict", "build_steps", "limit_steps", "meets_limits",
           "verdict"]

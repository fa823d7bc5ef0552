"""A finished trial: per-rank measurements next to the estimator's prediction (contract 3)."""
from __future__ import annotations

from dataclasses import dataclass, field

from workbench.scenario.types import Scenario


def steady(steps: list[dict]) -> list[dict]:
    """The steady steps among ``steps``: not the first (warm-up, allocator growth, lazy
    optimizer state) and not the one that carried the measurement hooks; all unhooked steps, or
    all steps, when a trial is too short to have any."""
    unhooked = [e for e in steps if not e.get("measured")]
    return [e for e in unhooked if e["step"] >= 1] or unhooked or steps


def memory_steps(steps: list[dict]) -> list[dict]:
    """The steps a trial's memory figures come from: every step after the first, hooked or not.
    The first step's forward and backward run before the optimizer has any state (AdamW creates
    its two moments in that step's ``optimizer.step``), so its peak lacks up to 8 bytes per
    sharded parameter; the saved-tensor hooks of the metered step keep no tensor alive (they
    return what they are given), so they do not change its peak. A one-step trial has only
    the first step."""
    return [e for e in steps if e["step"] >= 1] or steps


@dataclass
class TrialResult:
    scenario: Scenario                 # the scaled-down scenario that ran
    backend: str
    world_size: int
    steps: list[dict] = field(default_factory=list)      # one event per rank and step
    predicted: dict = field(default_factory=dict)        # rank -> bytes by category
    predicted_comm: dict = field(default_factory=dict)   # rank -> dim -> op -> {bytes, count}
    error: str | None = None
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)      # what the trial does not cover
    shape: str = "small"               # small (scaled down) | slice (real widths, fewer layers)

    def ranks(self) -> list[dict]:
        """Contract 3's ``ranks[]``."""
        out = []
        for r in range(self.world_size):
            mine = sorted((e for e in self.steps if e["rank"] == r), key=lambda e: e["step"])
            last = mine[-1] if mine else {}
            measured = {k: last.get(k) for k in ("params", "grads", "optimizer")}
            measured["activations"] = last.get("activations_per_microbatch")
            measured["peak"] = (sum(v for v in measured.values() if v) if last else None)
            if "allocated" in last:   # a GPU rank: the three memory figures, peak with state
                calm = memory_steps(mine)
                for k, key in (("allocated", "allocated"), ("reserved", "reserved"),
                               ("device", "device_memory")):
                    values = [e[key] for e in calm if e.get(key) is not None]
                    measured[k] = max(values) if values else None
                measured["memory_steps"] = [e["step"] for e in calm]
                measured["device_scope"] = last.get("device_scope")
            for k in ("params_frozen", "params_trainable", "trainable_numel"):
                if k in last:           # not part of the peak: params already counts them
                    measured[k] = last[k]
            pred = self.predicted.get(r, {}) if last else {}
            out.append({"rank": r, "pp_rank": last.get("pp_rank"),
                        "step_time_s": [e["time"] for e in mine],
                        "measured": measured, "predicted": dict(pred),
                        "comm": {"measured": last.get("comm", {}),
                                 "predicted": self.predicted_comm.get(r, {}) if last else {},
                                 **({"note": last["comm_note"]} if last.get("comm_note")
                                    else {})}})
        return out

    def loss(self) -> list[float]:
        """Loss per step, from the ranks that compute it (the last pipeline stage)."""
        by_step: dict[int, list[float]] = {}
        for e in self.steps:
            if e.get("loss") is not None:
                by_step.setdefault(e["step"], []).append(e["loss"])
        return [sum(v) / len(v) for _, v in sorted(by_step.items())]

    def to_dict(self) -> dict:
        par = self.scenario.parallel
        m = self.scenario.model
        return {
            "backend": self.backend, "world_size": self.world_size,
            "layout": {"dp": par.dp, "tp": par.tp, "pp": par.pp, "cp": par.cp, "ep": par.ep,
                       "zero": par.zero, "sequence_parallel": par.sequence_parallel,
                       "pp_schedule": par.pp_schedule, "virtual_stages": par.virtual_stages},
            "model": {"layers": m.layers, "hidden": m.hidden, "heads": m.heads,
                      "kv_heads": m.kv_heads, "ffn_hidden": m.ffn_hidden, "vocab": m.vocab,
                      "mlp": m.mlp, "tied_embeddings": m.tied_embeddings,
                      "moe": None if m.moe is None else vars(m.moe).copy(),
                      "seq_len": self.scenario.training.seq_len,
                      "micro_batch": self.scenario.training.micro_batch,
                      "microbatches": self.scenario.microbatches},
            "fine_tuning": self.fine_tuning(),
            "ranks": self.ranks(), "loss": self.loss(), "error": self.error,
            "wall_s": self.wall_s, "notes": self.all_notes(), "shape": self.shape,
            **self.ran_on(),
        }

    def all_notes(self) -> list[str]:
        """What the trial does not cover, then each distinct line on traffic that could not be
        measured (a rank's ``comm_note``)."""
        out = list(self.notes)
        for e in self.steps:
            note = e.get("comm_note")
            if note and note not in out:
                out.append(note)
        return out

    def fine_tuning(self) -> dict:
        """The training method, optimizer and (LoRA / QLoRA) adapters the trial ran, with the
        trainable and total parameter counts (rank 0's trainable elements; the model's total
        from its tensor list)."""
        from workbench.trial.prediction import parameter_shapes

        tr = self.scenario.training
        out: dict = {"method": tr.method, "optimizer": tr.optimizer}
        if tr.lora is not None and tr.adapters:
            out["lora"] = {"rank": tr.lora.rank, "alpha": tr.lora.alpha,
                           "targets": list(tr.lora.targets),
                           "trainable": list(tr.lora.trainable)}
            if tr.method == "qlora":
                out["lora"].update(quant=tr.lora.quant, double_quant=tr.lora.double_quant)
        if self.scenario.model.moe is None:
            tensors = parameter_shapes(self.scenario.model, tr.method, tr.lora)
            out["parameters"] = sum(t.numel for t in tensors)
            out["trainable_parameters"] = sum(t.numel for t in tensors if t.trainable)
        first = next((e for e in self.steps if e["rank"] == 0 and "trainable_numel" in e), None)
        if first is not None:
            out["trainable_measured_rank0"] = first["trainable_numel"]
        return out

    def ran_on(self) -> dict:
        """Where the ranks computed and in what precision (``device``: cpu or cuda:N of rank
        0; on GPUs also ``device_name``, ``precision_ran``, ``torch``)."""
        first = next((e for e in self.steps if e["rank"] == 0), None) or {}
        keys = ("device", "device_name", "precision_ran", "torch", "capability", "sm_count",
                "driver")
        return {k: first[k] for k in keys if k in first}

    def frames(self):
        """pandas DataFrames: per rank, per step."""
        import pandas as pd

        steps = pd.DataFrame(self.steps)
        ranks = pd.DataFrame([{"rank": r["rank"], **{f"measured_{k}": v for k, v in
                                                    r["measured"].items()},
                               **{f"predicted_{k}": v for k, v in r["predicted"].items()}}
                              for r in self.ranks()])
        return {"steps": steps, "ranks": ranks}

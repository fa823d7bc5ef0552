"""The estimate as one record, and its JSON form (``workbench estimate --json``; docs/json.md)."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from workbench.estimate.run.build_checks import Check
from workbench.engines.accuracy import error_band
from workbench.estimate.memory.records import MEMORY_KINDS, MemoryEstimate
from workbench.estimate.memory.model_states import bytes_per_param
from workbench.estimate.model.params import active_params, total_params
from workbench.estimate.run.run_level import RunEstimate
from workbench.estimate.time.step_time import StepTime
from workbench.scenario.schedules import schedule
from workbench.scenario.types import Scenario


@dataclass(frozen=True)
class Estimate:
    """What the estimator says about one scenario."""

    scenario: Scenario
    memory: MemoryEstimate
    time: StepTime
    run: RunEstimate
    checks: list[Check] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def error_band(self) -> dict | None:
        """The step-time error measured on published runs like this one (``engine_terms.
        error_band``: the narrowest of engine and regime, engine, regime, all runs that holds
        20): {"group", "runs", "median", "p90", "kind"} from workbench/engines/accuracy.json
        (benchmarks/accuracy.py --write)."""
        tr = self.scenario.training
        return error_band(tr.engine, self.scenario.model.moe is not None, tr.method)

    @property
    def assumptions(self) -> list[str]:
        """Defaults the scenario left to the validator that change a figure, in words."""
        return list(self.scenario.assumptions)

    @cached_property
    def verdict(self):
        """The one answer a person reads first (``estimate.run.verdict.Verdict``): GPU memory,
        host memory / NVMe, the build check, time to train and cost, and the next steps that
        need no search (``workbench.plan.next_steps.searched_verdict`` adds the planner's)."""
        from workbench.estimate.run.verdict import verdict

        return verdict(self.scenario, self)

    def timeline(self, microbatches: int | None = None) -> list:
        """Per-rank F/B/W blocks of one step's pipeline (``timeline.Block``), from this
        estimate's per-stage times; ``microbatches`` caps the count for drawing."""
        from workbench.estimate.time.timeline import simulate

        t, par = self.time, self.scenario.parallel
        m = min(self.scenario.microbatches, microbatches or self.scenario.microbatches)
        split = schedule(par.pp_schedule).split_backward
        return simulate(par, m, [g.f for g in t.stages], [g.b for g in t.stages],
                        [g.wgrad for g in t.stages] if split else None)

    def to_dict(self, verdict=None) -> dict:
        """Contract-2 keys (bytes and seconds). ``verdict``: the one to carry (the CLI's, with
        the planner's steps); default ``self.verdict``."""
        s, m, t, r = self.scenario, self.memory, self.time, self.run
        v = verdict or self.verdict
        b = bytes_per_param(s.training.precision, s.training.optimizer, s.parallel.zero)
        return {
            "scenario": {"model": s.model.name, "gpu": s.hardware.gpu.name,
                         "engine": s.training.engine,
                         "gpus": s.hardware.world, "layout": dict(s.document["parallel"])},
            "model": {"params": total_params(s.model), "active_params": active_params(s.model),
                      "microbatches": s.microbatches},
            "memory": {
                "per_gpu": m.per_gpu.as_dict(),
                # bytes alive at each moment of the worst GPU's step; total is the largest
                "phases": dict(m.per_gpu.phases),
                "peak_phase": m.per_gpu.peak_phase,
                # what is alive at that moment, by category (its sum is per_gpu.total)
                "at_peak": dict(m.per_gpu.at_peak),
                "worst_pipeline_rank": m.worst.rank,
                "capacity": m.capacity,
                "fits": m.fits,
                "gpu_fits": m.gpu_fits,
                # pass | tight | fail: the device figure against the capacity with the band
                "gpu_fit": m.gpu_fit,
                "band": dict(m.band) if m.band else None,
                "headroom": m.capacity - m.per_gpu.device,
                "kinds": dict(MEMORY_KINDS),
                "host_per_node": m.host_per_node,
                "host_capacity_per_node": m.host_capacity_per_node,
                "host_fits": m.host_fits,
                "nvme_per_node": m.nvme_per_node,
                "nvme_capacity_per_node": m.nvme_capacity_per_node,
                "nvme_fits": m.nvme_fits,
                "per_stage": [
                    {"pipeline_rank": g.rank, "layers": g.layers,
                     "has_embedding": g.has_embedding, "has_head": g.has_head,
                     "inflight_microbatches": g.inflight_microbatches,
                     **g.memory.as_dict(), "buffers_detail": dict(g.buffers),
                     "phases": dict(g.memory.phases), "at_peak": dict(g.memory.at_peak),
                     "host": g.host, "nvme": g.nvme}
                    for g in m.per_stage],
                "activation_terms_per_layer": dict(m.layer_terms),
                "bytes_per_param": {"params": b.params, "grads": b.grads,
                                    "optimizer": b.optimizer},
            },
            "time": {
                "step": t.step, "compute": t.compute, "recompute": t.recompute,
                "bubble": t.bubble, "offload": t.offload, "optimizer": t.optimizer,
                "comm_exposed": dict(t.comm_exposed),
                "error_band": self.error_band,
                "per_stage": [{"pipeline_rank": g.rank, "forward": g.fwd, "backward": g.bwd,
                               "weight_grad": g.wgrad, "recompute": g.recompute,
                               "comm_exposed": dict(g.comm)} for g in t.stages],
                "per_microbatch_note": "per_stage figures are per microbatch",
            },
            "comm": {"volume_per_gpu_per_step": t.volume,
                     "volume_per_stage": [dict(v) for v in t.volume_per_stage]},
            "throughput": {"tokens_per_s": r.tokens_per_s,
                           "tokens_per_s_per_gpu": r.tokens_per_s_per_gpu,
                           "model_tflops_per_gpu": r.model_tflops_per_gpu,
                           "mfu": r.mfu, "hfu": r.hfu},
            "run": {"time_to_train_s": r.time_to_train_s, "energy_kwh": r.energy_kwh,
                    "power_w": r.power_w, "gpu_power_w": r.gpu_power_w,
                    "host_power_w_per_node": r.host_power_w, "cost": dict(r.cost)},
            "build_checks": [{"name": c.name, "status": c.status, "reason": c.reason}
                             for c in self.checks],
            "warnings": list(self.warnings),
            "assumptions": self.assumptions,
            "verdict": v.as_dict(),
        }

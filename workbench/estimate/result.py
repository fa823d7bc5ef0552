"""The estimate as one record, and its contract-2 JSON form (../shared/design.md)."""
from __future__ import annotations

from dataclasses import dataclass, field

from workbench.estimate.memory import MemoryEstimate
from workbench.estimate.model_states import bytes_per_param
from workbench.estimate.params import active_params, total_params
from workbench.spec.scenario import Scenario


@dataclass(frozen=True)
class Estimate:
    """What the estimator says about one scenario."""

    scenario: Scenario
    memory: MemoryEstimate
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """Contract-2 keys (bytes and seconds). Time and throughput keys arrive with the step-time
        model; until then they are absent rather than made up."""
        s, m = self.scenario, self.memory
        b = bytes_per_param(s.training.precision, s.training.optimizer, s.parallel.zero)
        return {
            "scenario": {"model": s.model.name, "gpu": s.hardware.gpu.name,
                         "gpus": s.hardware.world, "layout": dict(s.document["parallel"])},
            "model": {"params": total_params(s.model), "active_params": active_params(s.model),
                      "microbatches": s.microbatches},
            "memory": {
                "per_gpu": m.per_gpu.as_dict(),
                "worst_pipeline_rank": m.worst.rank,
                "capacity": m.capacity,
                "fits": m.fits,
                "headroom": m.capacity - m.per_gpu.total,
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
                     "host": g.host, "nvme": g.nvme}
                    for g in m.per_stage],
                "activation_terms_per_layer": dict(m.layer_terms),
                "bytes_per_param": {"params": b.params, "grads": b.grads,
                                    "optimizer": b.optimizer},
            },
            "warnings": list(self.warnings),
        }

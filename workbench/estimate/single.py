"""One scenario's estimate: its layout as a grid of one row, every pipeline rank evaluated by
``cost_model.compose.evaluate``, read into the records the report, the JSON and the widgets show."""
from __future__ import annotations

from workbench.engines.accuracy import memory_band
from workbench.estimate.cost_model.compose import Evaluation, evaluate
from workbench.estimate.memory import activations as act
from workbench.estimate.memory.peak import CATEGORIES, PHASES
from workbench.estimate.memory.records import GPUMemory, MemoryEstimate, StageMemory, memory_warnings
from workbench.estimate.model.params import is_moe_layer
from workbench.estimate.time.step_time import DIMS, StageTime, StepTime
from workbench.scenario.layouts import LayoutGrid
from workbench.scenario.types import Scenario
from workbench.units import TB, capacity_bytes, hbm_bytes


def evaluate_scenario(s: Scenario, pytorch_eager: bool = False) -> Evaluation:
    """Every pipeline rank of the scenario's layout, with its traffic."""
    return evaluate(s, LayoutGrid.of(s), every_rank=True, volume=True,
                    pytorch_eager=pytorch_eager)


def _ranks(ev: Evaluation) -> range:
    return range(len(ev.rank_index))


def memory_of(s: Scenario, ev: Evaluation) -> MemoryEstimate:
    """The memory records of a one-row evaluation."""
    hw, rk = s.hardware, ev.rank
    stages = []
    for i in _ranks(ev):
        mem = GPUMemory(*(float(rk[k][i]) for k in ("params", "grads", "optimizer",
                                                     "activations", "buffers", "reserved",
                                                     "device", "params_frozen",
                                                     "paged", "device_least")),
                        phases={k: float(rk[f"phase_{k}"][i]) for k in PHASES},
                        at_peak={c: float(rk[f"at_peak_{c}"][i]) for c in CATEGORIES})
        bufs = {k: float(v[i]) for k, v in ev.buffers.items() if v[i]}
        stages.append(StageMemory(
            rank=i, layers=int(rk["layers"][i]), has_embedding=bool(rk["has_embedding"][i]),
            has_head=bool(rk["has_head"][i]),
            inflight_microbatches=float(rk["inflight_microbatches"][i]), memory=mem,
            host=float(rk["host"][i]), nvme=float(rk["nvme"][i]), buffers=bufs,
            dense_params=float(rk["dense_params"][i]),
            expert_params=float(rk["expert_params"][i])))
    x = act.activation_shape(s.training, s.parallel, ev.pytorch_eager)
    est = MemoryEstimate(
        per_stage=stages, worst=stages[int(ev.layout["worst_memory_rank"][0])],
        capacity=hbm_bytes(hw.gpu.memory_gb),
        host_per_node=float(ev.layout["host_per_node"][0]),
        nvme_per_node=float(ev.layout["nvme_per_node"][0]),
        host_capacity_per_node=capacity_bytes(hw.host.memory_gb),
        nvme_capacity_per_node=hw.storage.drives * hw.storage.drive.capacity_tb * TB,
        layer_terms=act.layer_terms(s.model, x.__class__(**{**x.__dict__, "recompute": "none"}),
                                    is_moe_layer(s.model, s.model.layers - 1)),
        warnings=[], band=memory_band(s.training.engine, s.model.moe is not None,
                                      s.training.method))
    est.warnings.extend(memory_warnings(s, est))
    return est


def step_time_of(s: Scenario, ev: Evaluation) -> StepTime:
    """The step-time records of a one-row evaluation."""
    rk, lay = ev.rank, ev.layout
    stages = [StageTime(rank=i, fwd=float(rk["fwd"][i]), bwd=float(rk["bwd"][i]),
                        wgrad=float(rk["wgrad"][i]), recompute=float(rk["recompute"][i]),
                        comm={d: float(rk[f"comm_{d}"][i]) if f"comm_{d}" in rk else 0.0
                              for d in DIMS})
              for i in _ranks(ev)]
    volumes = [ev.volume.row(i) for i in _ranks(ev)]
    mbs = s.microbatches
    worst = int(lay["worst_time_rank"][0])      # the rank that sets the steady state
    if "worst_comm_rank" in lay:                # nothing overlaps: every collective in turn
        w = int(lay["worst_comm_rank"][0])
        exposed = {d: float(rk[f"serial_{d}"][w]) for d in volumes[w]}
    else:
        exposed = {d: mbs * stages[worst].comm[d] for d in DIMS}
        exposed["dp"] = float(lay["dp_exposed"][0])
        exposed["pp"] = float(lay["pp_exposed"][0])
        exposed["tp"] += float(lay["sp_grads"][0])
    g = stages[worst]
    return StepTime(step=float(lay["step"][0]), compute=mbs * (g.fwd + g.bwd),
                    recompute=mbs * g.recompute, bubble=float(lay["bubble"][0]),
                    optimizer=float(lay["optimizer"][0]), offload=float(lay["offload"][0]),
                    comm_exposed=exposed, stages=stages, volume=volumes[0],
                    volume_per_stage=volumes)


def estimate_memory(s: Scenario) -> MemoryEstimate:
    """Per-GPU memory of every pipeline rank, the worst GPU, and host/NVMe use per node."""
    return memory_of(s, evaluate_scenario(s))


def estimate_step_time(s: Scenario) -> StepTime:
    """Seconds per optimizer step and its breakdown."""
    return step_time_of(s, evaluate_scenario(s))

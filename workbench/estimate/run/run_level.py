"""Throughput, MFU/HFU, time to train, power, energy and cost of a whole run.

- tokens/s = global_batch x seq_len / step time.
- MFU (PaLM, Chowdhery et al. 2022, App. B): model FLOPs per step (3 x forward, no recompute,
  full attention — workbench.estimate.model.flops) / (step x GPUs x dense peak of the precision).
  HFU adds the recomputed forward (Korthikanti et al. 2022 Sec. 6).
- Power: GPU board power x utilisation (the busy fraction of the step: compute and recompute
  over step time) plus the host (CPU TDP per socket, NICs, drives), per node; a host given
  without its CPU counts no CPU (the scenario's assumptions say so). Idle draw of a
  waiting GPU, fans, DIMMs, PSU losses and facility overhead (PUE) are not counted: the figure
  is the IT load of the parts named in the scenario.
- Energy = power x time to train. Cost = GPU-hours x price + kWh x price, when prices are given.
"""
from __future__ import annotations

from dataclasses import dataclass

from workbench.estimate.time.kernels import peak_flops
from workbench.estimate.model.flops import step_flops
from workbench.estimate.time.step_time import StepTime
from workbench.scenario.types import Scenario


@dataclass(frozen=True)
class RunEstimate:
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    model_tflops_per_gpu: float
    mfu: float
    hfu: float
    time_to_train_s: float
    power_w: float            # whole job, all nodes
    gpu_power_w: float        # per GPU, average
    host_power_w: float       # per node
    energy_kwh: float
    cost: dict


def host_power_w(s: Scenario) -> float:
    """CPU sockets + NICs + drives of one node, at their rated power (0 for a calibrated CPU
    machine: its power is not measured, and the scenario's host parts are not its own; a
    calibrated GPU sits in the scenario's node like a catalog one)."""
    hw = s.hardware
    if hw.gpu.profile is not None and hw.gpu.profile.whole_machine:
        return 0.0
    nic = hw.inter_node.link.power_w * hw.inter_node.nics_per_node
    cpu = hw.host.cpu.tdp_w * hw.host.sockets if hw.host.cpu is not None else 0.0
    return cpu + nic + hw.storage.drive.power_w * hw.storage.drives


def estimate_run(s: Scenario, t: StepTime) -> RunEstimate:
    hw, tr = s.hardware, s.training
    world = hw.world
    tokens_step = tr.seq_len * tr.global_batch
    tps = tokens_step / t.step
    forward, model_flops = step_flops(s.model, tr.seq_len, tr.global_batch, tr)
    peak = peak_flops(hw.gpu, tr.precision)
    mfu = model_flops / (t.step * world * peak)
    recompute_flops = 0.0
    if tr.recompute == "full":
        recompute_flops = forward
    elif tr.recompute == "layer":
        from workbench.estimate.memory.activations import checkpointed_fraction
        recompute_flops = forward * checkpointed_fraction(s.model, tr.recompute_every)
    elif tr.recompute == "selective" and not tr.flash:
        from workbench.estimate.model.flops import layer_flops
        recompute_flops = s.model.layers * layer_flops(
            s.model, tokens_step, tr.seq_len, False).attention
    elif tr.recompute == "op":   # every second matmul and the routed experts (step_time)
        from workbench.estimate.model.flops import layer_flops
        from workbench.estimate.model.params import layer_kinds
        for moe, n in layer_kinds(s.model):
            lf = layer_flops(s.model, tokens_step, tr.seq_len, moe)
            recompute_flops += n * ((lf.gemm - lf.expert_gemm) / 2 + lf.expert_gemm)
    hfu = (model_flops + recompute_flops) / (t.step * world * peak)
    busy = min(1.0, (t.compute + t.recompute) / t.step) if t.step else 0.0
    gpu_w = hw.gpu.running_power_w * busy
    host_w = host_power_w(s)
    power = gpu_w * world + host_w * hw.nodes
    ttt = tr.tokens / tps
    energy = power * ttt / 3.6e6
    cost = {}
    if tr.price_per_gpu_hour is not None:
        cost["gpus"] = world * ttt / 3600 * tr.price_per_gpu_hour
    if tr.price_per_kwh is not None:
        cost["energy"] = energy * tr.price_per_kwh
    if cost:
        cost["total"] = sum(cost.values())
    return RunEstimate(tokens_per_s=tps, tokens_per_s_per_gpu=tps / world,
                       model_tflops_per_gpu=model_flops / t.step / world / 1e12, mfu=mfu,
                       hfu=hfu, time_to_train_s=ttt, power_w=power, gpu_power_w=gpu_w,
                       host_power_w=host_w, energy_kwh=energy, cost=cost)

"""A slice of the scenario's model for a trial on GPUs: the real widths, fewer layers.

A CPU trial shrinks the model (``shrink.py``): it proves bytes, not time. On GPUs a trial runs
the scenario's hidden size, heads, key/value heads, FFN width, vocabulary, sequence length and
micro-batch, with the layout's per-rank shards, and as many layers as the GPU holds (at least
one block per pipeline chunk, at most the model's): the time of each block, the optimizer and
the three memory figures can then be held against the estimate of the same slice on the same
GPU (``proof.slice_compare``).

What a slice does not cover is said in ``Slice.notes`` (the dimensions the sub-layout dropped,
recompute, FP8, offload, compile), so a one-GPU user knows what world size 1 leaves out.
This module imports no torch: the parent reads the GPUs through NVML
(``rank_devices.visible_gpus``: no CUDA context, so the ranks it spawns have the GPUs to
themselves).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from workbench.catalog import CATALOGS
from workbench.catalog.gpus import catalog_key_for_device
from workbench.catalog.types import GPU
from workbench.errors import Problem, ScenarioError
from workbench.scenario.schedules import schedule
from workbench.scenario.types import Scenario
from workbench.trial.shrink import eager_parallel

# Share of the GPU's memory the slice may plan to use on nvidia-smi's figure: the estimate's
# own error and the allocator's fragmentation need room. On an H200 (docs/gpu-check.md) the
# three slices planned at 0.72-0.78 of the GPU used 0.82-0.87 (NVML): the estimate's
# nvidia-smi figure was 9-13 % under.
FILL = 0.8


@dataclass(frozen=True)
class Slice:
    """The slice scenario that runs and what it leaves out."""

    scenario: Scenario
    notes: tuple[str, ...]


def device_gpu(s: Scenario, name: str) -> tuple[GPU, str | None]:
    """The GPU record to estimate the slice on: a calibrated GPU profile given as
    ``hardware.gpu`` (it measured this machine), else the catalog entry the driver's name
    matches, else the scenario's GPU with a note that says so."""
    gpu = s.hardware.gpu
    if gpu.profile is not None and getattr(gpu.profile, "device", "cpu") == "cuda":
        measured = gpu.profile.gpu.get("name", "")
        if catalog_key_for_device(measured) != catalog_key_for_device(name) or not measured:
            return gpu, (f"the calibration in hardware.gpu measured {measured or 'another GPU'},"
                         f" not this {name}: the slice is estimated on that profile")
        return gpu, None
    key = catalog_key_for_device(name)
    if key is not None:
        return CATALOGS["gpu"][key], None
    return gpu, (f"{name} is not in the GPU catalogue: the slice is estimated as the "
                 f"scenario's {gpu.name}")


def mig_gpu(gpu: GPU, device_name: str, capacity_bytes: float,
            share: tuple[float, float]) -> tuple[GPU, str]:
    """``gpu`` cut to a MIG slice holding ``share`` = (its fraction of the GPU's SMs, of its
    memory): compute peaks scale with the SMs, memory bandwidth with the memory slices, the
    capacity is the slice's; and the note that says so."""
    sm, mem = share
    cut = dataclasses.replace(
        gpu, name=f"{gpu.name} ({device_name})", memory_gb=capacity_bytes / 1e9,
        bf16_tflops=gpu.bf16_tflops * sm, fp8_tflops=gpu.fp8_tflops * sm,
        fp32_tflops=gpu.fp32_tflops * sm, tf32_tflops=gpu.tf32_tflops * sm,
        hbm_gb_per_s=gpu.hbm_gb_per_s * mem)
    return cut, (f"{device_name} is a MIG slice: the estimate's {gpu.name} is cut to "
                 f"{sm:.0%} of its SMs and {mem:.0%} of its memory")


def slice_scenario(s: Scenario, device_name: str, capacity_bytes: float,
                   share: tuple[float, float] | None = None) -> Slice:
    """The sub-layout ``s`` (``trial.sub_layout``) on a slice of its model at real widths, for
    GPUs called ``device_name`` with ``capacity_bytes`` each; ``share``: a MIG slice's fraction
    of its GPU's SMs and memory (``rank_devices.VisibleGPU.share``)."""
    from workbench.estimate.model.params import total_params
    from workbench.estimate.single import estimate_memory

    par, tr, m = s.parallel, s.training, s.model
    if m.mla:
        raise ScenarioError([Problem("model", m.name, "GPU trials run multi-head attention; "
                                     "multi-head latent attention (MLA) is estimated but not "
                                     "run: trial a model without MLA")])
    gpu, note = device_gpu(s, device_name)
    notes = [note] if note else []
    if share is not None:
        gpu, mig_note = mig_gpu(gpu, device_name, capacity_bytes, share)
        notes.append(mig_note)
    precision = tr.precision
    if precision in ("fp16", "fp8", "nvfp4"):
        notes.append(f"precision {precision} runs as bf16 (the trial has no loss scaling and no "
                     "FP8 / FP4 recipe)")
        precision = "bf16"
    if tr.recompute != "none":
        notes.append(f"recompute {tr.recompute} is not run: the slice keeps every activation")
    if tr.offload != "none":
        notes.append(f"offload {tr.offload} is not run")
    if tr.compile or par.async_tp or par.tp_comm_overlap:
        notes.append("torch.compile and async TP are not run (eager PyTorch)")
    # What the trial runs is PyTorch-native training: torchtitan's conventions (eager
    # elementwise kernels, FSDP2 MixedPrecisionPolicy), SDPA's default kernel; ZeRO-1 runs as
    # PyTorch's ZeroRedundancyOptimizer, which torchtitan does not offer. SDPA's default on
    # Hopper is what the H200 table measured (torch 2.11: 598 TFLOP/s forward at 8k tokens,
    # the kernel model's "flash3" figures, efficiency.ATTENTION_C); elsewhere its flash kernel
    # (FlashAttention-2 code).
    engine = "torchtitan" if par.zero in (0, 2, 3) else "generic"
    attention = "flash3" if gpu.arch == "hopper" else "flash2"
    microbatches = max(1, par.pp, int(schedule(par.pp_schedule).min_microbatches(par.pp)))
    training = dataclasses.replace(
        tr, precision=precision, recompute="none", offload="none", engine=engine,
        compile=False, fp8_recipe=None, attention=attention,
        global_batch=tr.micro_batch * par.dp * microbatches)
    parallel, _ = eager_parallel(par, {})
    hardware = dataclasses.replace(s.hardware, gpu=gpu, gpus_per_node=par.world, nodes=1)
    chunks = par.pp * parallel.chunks_per_rank
    dense = m.moe.dense_layers if m.moe is not None else 0

    def at(layers: int) -> Scenario:
        moe = (None if m.moe is None else
               dataclasses.replace(m.moe, dense_layers=min(dense, max(0, layers - chunks))))
        model = dataclasses.replace(m, layers=layers, moe=moe, name=f"{m.name} ({layers} of "
                                    f"{m.layers} layers)")
        doc = s.to_dict()
        doc["training"] = {**doc.get("training", {}), **dataclasses.asdict(training)}
        _, doc["parallel"] = eager_parallel(par, doc.get("parallel", {}))
        return dataclasses.replace(s, model=model, parallel=parallel, training=training,
                                   hardware=hardware, document=doc)

    limit = FILL * capacity_bytes

    def need(sc: Scenario) -> float:
        # every rank builds the whole slice in fp32 before it cuts its pipeline chunks and
        # shards (trial/build.py): with TP or PP that, not the sharded run, can be the peak
        return max(estimate_memory(sc).per_gpu.device, 4.0 * total_params(sc.model))

    layers = chunks
    if need(at(layers)) > limit:
        needed = need(at(layers))
        raise ScenarioError([Problem("trial.world_size", par.world,
                                     f"one block per pipeline chunk at these widths needs about "
                                     f"{needed / 2**30:.1f} GiB per GPU, more than {FILL:.0%} of "
                                     f"the {capacity_bytes / 2**30:.1f} GiB here; use a "
                                     f"shorter sequence, a smaller micro-batch or more TP")])
    step = chunks
    while layers + step <= m.layers and need(at(layers + step)) <= limit:
        layers += step
    if layers < m.layers:
        notes.append(f"{layers} of the model's {m.layers} layers fit this GPU with room to "
                     "spare; time and memory per block scale to the rest")
    return Slice(scenario=at(layers), notes=tuple(notes))


def dropped_dimensions(full: Scenario, ran: Scenario) -> list[str]:
    """What the sub-layout left out of the user's layout, in words."""
    a, b = full.parallel, ran.parallel
    out = []
    for dim in ("dp", "tp", "pp", "cp", "ep"):
        if getattr(a, dim) != getattr(b, dim):
            out.append(f"{dim} {getattr(a, dim)} -> {getattr(b, dim)}")
    if not out:
        return []
    return [f"the trial runs {b.world} of the layout's {a.world} GPUs ({', '.join(out)}): "
            "sharding over, and communication between, the ranks left out is estimated, not "
            "measured"]

"""Real multi-process training trials of a scenario's layout on a scaled-down model: refuse
what cannot run here (``prepare``), run the ranks (``launcher``, ``worker``) and put their
measurements next to the estimator's prediction (``workbench.trial.prediction``).

Importing this package does not import torch; the ranks do.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from workbench.errors import Problem, ScenarioError
from workbench.trial import prediction as trial_prediction
from workbench.rank_devices import available_memory, check_backend, visible_devices
from workbench.trial import slice as slice_mod
from workbench.scenario.rules import trial_problems
from workbench.scenario.types import Scenario
from workbench.trial.launcher import MAX_PROCESSES, stream
from workbench.trial.result import TrialResult
from workbench.trial.shrink import trial_scenario
from workbench.units import memory_text


def sub_layout(s: Scenario, world_size: int | None) -> Scenario:
    """The scenario's layout, or a sub-layout of ``world_size`` processes: data parallelism is
    reduced first, then context, pipeline and tensor parallelism, each to the largest divisor
    of its degree that fits."""
    par = s.parallel
    target = world_size or par.world
    if target > MAX_PROCESSES:
        raise ScenarioError([Problem("trial.world_size", target,
                                     f"this machine runs at most {MAX_PROCESSES} trial processes")])
    dims = {"dp": par.dp, "pp": par.pp, "tp": par.tp, "cp": par.cp}
    for name in ("dp", "cp", "pp", "tp"):
        others = dims["dp"] * dims["pp"] * dims["tp"] * dims["cp"] // dims[name]
        if others * dims[name] <= target:
            break
        # the largest divisor that brings the total to the target, or at least under it
        divisors = [d for d in range(1, dims[name] + 1) if dims[name] % d == 0]
        exact = [d for d in divisors if others * d == target]
        under = [d for d in divisors if others * d <= target]
        dims[name] = max(exact or under or [1])
    world = dims["dp"] * dims["pp"] * dims["tp"] * dims["cp"]
    if world != target:
        raise ScenarioError([Problem("trial.world_size", target,
                                     f"no sub-layout of dp={par.dp} tp={par.tp} pp={par.pp} "
                                     f"cp={par.cp} has exactly {target} ranks; try {world}")])
    ep = par.ep if (dims["dp"] * dims["cp"]) % par.ep == 0 else 1
    new_par = dataclasses.replace(par, ep=ep, shard_group=None, **dims)
    hw = dataclasses.replace(s.hardware, gpus_per_node=world, nodes=1)
    return dataclasses.replace(s, parallel=new_par, hardware=hw)


def prepare(s: Scenario, world_size: int | None = None) -> Scenario:
    """Validate that the layout can run here and return the scaled-down (CPU) trial scenario."""
    return prepare_trial(s, world_size, "gloo")[0]


SHAPES = ("auto", "slice", "small")


def sliced(shape: str, backend: str) -> bool:
    """Whether a trial of ``shape`` on ``backend`` runs a slice at real widths."""
    return shape == "slice" or (shape == "auto" and backend == "nccl")


def prepare_trial(s: Scenario, world_size: int | None = None, backend: str = "gloo",
                  shape: str = "auto") -> tuple[Scenario, list[str]]:
    """Validate that the layout can run here with ``backend`` (resolved: gloo or nccl) and
    return the trial scenario and what it does not cover, in words. ``shape``: ``small`` the
    scaled-down model (``shrink.py``: proves bytes), ``slice`` the model at its real widths
    with as many layers as fit (``slice.py``: proves time too), ``auto`` a slice on GPUs (nccl)
    and the small model on the CPU."""
    if shape not in SHAPES:
        raise ScenarioError([Problem("--shape", shape, "choose " + ", ".join(SHAPES))])
    full = s
    s = sub_layout(s, world_size)
    par = s.parallel
    problems = trial_problems(s)   # the trial runtime's limits, from the rule table
    if problems:
        raise ScenarioError(problems)
    notes = slice_mod.dropped_dimensions(full, s)
    if sliced(shape, backend):
        if backend == "nccl":
            gpus = visible_devices()
            if not gpus:
                raise ScenarioError([Problem("--backend", "nccl", "NVML cannot read this "
                                             "machine's GPUs (nvidia-ml-py installed? driver "
                                             "loaded?)")])
            name, capacity = gpus[0].name, min(g.memory for g in gpus[:par.world])
            share = gpus[0].share()        # a MIG slice: its part of the GPU's SMs and memory
        else:     # the same slice on the CPU (tests, or a small model on a laptop)
            name, capacity = "cpu", (available_memory() or 0.0) / par.world
            share = None
        cut = slice_mod.slice_scenario(s, name, capacity, share=share)
        return cut.scenario, notes + list(cut.notes)
    trial = trial_scenario(s)
    need = trial.parallel.world * PER_PROCESS_BYTES
    have = available_memory()
    if have is not None and need > have:
        raise ScenarioError([Problem("trial.world_size", trial.parallel.world,
                                     f"{trial.parallel.world} processes need about "
                                     f"{memory_text(need)}; this machine has "
                                     f"{memory_text(have)} available")])
    return trial, notes + ["the model is scaled down (shrink.py): bytes are proven, time is "
                           "this CPU's"]


# Resident memory of one trial process: torch and its distributed packages imported, the tiny
# model and its buffers. Measured here with psutil: 0.28e9 bytes peak RSS per rank at 4 ranks
# (DDP, 5 steps); 0.5e9 leaves room for larger layouts.
PER_PROCESS_BYTES = 0.5e9


@dataclasses.dataclass(frozen=True)
class PreparedTrial:
    """What a trial will run: the resolved backend, the trial scenario, what it does not cover
    and whether it is a slice."""

    backend: str
    scenario: Scenario
    notes: list[str]
    sliced: bool


def prepare_for(s: Scenario, world_size: int | None = None, backend: str = "auto",
                shape: str = "auto") -> PreparedTrial:
    """Resolve the backend for the sub-layout's ranks (``check_backend``) and prepare the trial
    (``prepare_trial``), once: the CLI's live metrics and the run share it."""
    layout = sub_layout(s, world_size)
    backend = check_backend(backend, layout.parallel.world)
    trial, notes = prepare_trial(s, world_size, backend, shape)
    return PreparedTrial(backend, trial, notes, sliced(shape, backend))


def stream_trial(s: Scenario, world_size: int | None = None, steps: int = 3,
                 backend: str = "auto", shape: str = "auto", **kw) -> Iterator[dict]:
    """Yield the trial's events while it runs (for live charts)."""
    ready = prepare_for(s, world_size, backend, shape)
    yield from stream(ready.scenario, steps=steps, backend=ready.backend, **kw)


def run_trial(s: Scenario, world_size: int | None = None, steps: int = 3,
              backend: str = "auto", on_event=None, shape: str = "auto",
              prepared: PreparedTrial | None = None, **kw) -> TrialResult:
    """Run a trial to the end and return its result (``on_event`` sees every event);
    ``shape`` as ``prepare_trial``; ``prepared``: ``prepare_for``'s answer when the caller
    already has it."""
    ready = prepared or prepare_for(s, world_size, backend, shape)
    trial = ready.scenario
    if kw.get("inject") and not 0 <= kw.get("inject_rank", -1) < trial.parallel.world:
        raise ScenarioError([Problem("--rank", kw.get("inject_rank"),
                                     f"must be a rank of the trial (0..{trial.parallel.world - 1})")])
    result = TrialResult(scenario=trial, backend="", world_size=trial.parallel.world,
                         predicted=trial_prediction.predicted_bytes(trial), notes=ready.notes,
                         shape="slice" if ready.sliced else "small")
    for ev in stream(trial, steps=steps, backend=ready.backend, **kw):
        if on_event is not None:
            on_event(ev)
        if ev["type"] == "start":
            result.backend = ev["backend"]
            result.predicted_comm = trial_prediction.predicted_comm(trial, ev["backend"])
        elif ev["type"] == "step":
            result.steps.append(ev)
        elif ev["type"] == "end":
            result.error = ev["error"]
            result.wall_s = ev["wall_s"]
    return result


__all__ = ["PreparedTrial", "TrialResult", "prepare", "prepare_for", "prepare_trial",
           "run_trial", "stream_trial", "sub_layout"]

"""Issue 45, on the CPU: the GPU paths of trials against a fake NVML (nvidia-ml-py's calls and
answers) and a fake ``torch.cuda`` (PyTorch's ``_parse_visible_devices`` as it is, NVML's UUIDs
as the driver lists them): memory from a step with optimizer state, a queue that counts GPUs,
the CUDA order the ranks get, MIG slices, and a note when NCCL traffic cannot be read."""
from __future__ import annotations

import dataclasses
import os
import types

import pytest
import torch

from workbench.scenario import parse_scenario


def _scenario(**parallel):
    world = parallel.get("dp", 1) * parallel.get("tp", 1) * parallel.get("pp", 1)
    return parse_scenario({"hardware": {"gpu": "h200-sxm", "gpus_per_node": world},
                           "model": "tiny-dense", "parallel": parallel,
                           "training": {"seq_len": 256, "global_batch": 16}})


# --- 1. memory from a step that has optimizer state -------------------------------------------

def _gpu_step(step: int, measured: bool, n_params: int) -> dict:
    """A GPU rank's step event as the worker reports it: the trial's own counters (params,
    grads, AdamW's two fp32 moments) and the allocator's peak of that step's forward and
    backward, which holds the optimizer state only once an earlier step created it."""
    params, grads, optimizer, acts = 4 * n_params, 4 * n_params, 8 * n_params, 1000
    state_in_peak = optimizer if step >= 1 else 0
    peak = params + grads + acts + state_in_peak
    return {"type": "step", "rank": 0, "step": step, "time": 0.1, "measured": measured,
            "params": params, "grads": grads, "optimizer": optimizer,
            "activations_per_microbatch": acts, "allocated": peak, "reserved": peak + 512,
            "device_memory": peak + 4096, "device_scope": "process"}


@pytest.mark.parametrize("steps", [2, 3, 5])
def test_memory_comes_from_a_step_with_optimizer_state_whatever_the_step_count(steps):
    from workbench.proof.slice_compare import _peak
    from workbench.trial.result import TrialResult, memory_steps

    n = 10_000
    counted = min(1, steps - 1)          # the worker's metered step
    events = [_gpu_step(i, i == counted, n) for i in range(steps)]
    result = TrialResult(scenario=_scenario(dp=1), backend="nccl", world_size=1, steps=events)
    m = result.ranks()[0]["measured"]
    assert m["optimizer"] == 8 * n                    # AdamW's state, the trial's own counter
    with_state = 4 * n + 4 * n + 8 * n + 1000
    assert m["allocated"] == with_state and m["reserved"] == with_state + 512
    assert m["device"] == with_state + 4096
    assert 0 not in m["memory_steps"] and m["memory_steps"] == list(range(1, steps))
    assert _peak(memory_steps(events), "allocated") == with_state


def test_a_one_step_trial_reports_its_only_step():
    from workbench.trial.result import TrialResult

    events = [_gpu_step(0, True, 10)]
    m = TrialResult(scenario=_scenario(dp=1), backend="nccl", world_size=1,
                    steps=events).ranks()[0]["measured"]
    assert m["memory_steps"] == [0] and m["allocated"] == events[0]["allocated"]

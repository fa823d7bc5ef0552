"""An ``sbatch`` script that runs the scenario's trial with one ``torchrun`` per node.

Sources: sbatch options (``--nodes``, ``--ntasks-per-node``, ``--gpus-per-node``,
``--cpus-per-task``, ``--exclusive``, ``--time``): https://slurm.schedmd.com/sbatch.html;
the first node's name from ``scontrol show hostnames``: https://slurm.schedmd.com/scontrol.html;
the torchrun command and environment: :mod:`workbench.export.torchrun`.
"""
from __future__ import annotations

import re

from workbench.export.common import Expand, Source, layout_summary, model_label, shell_command
from workbench.export.torchrun import nccl_env, torchrun_args
from workbench.scenario.types import Scenario

DEFAULT_TIME = "00:30:00"   # a trial is a few steps of a small model; start-up dominates


def sbatch_options(s: Scenario, *, time: str = DEFAULT_TIME) -> list[tuple[str, str | None]]:
    """``(option, value)`` pairs of the ``#SBATCH`` lines (value None for a bare switch)."""
    hw = s.hardware
    slug = re.sub(r"[^a-z0-9]+", "-", s.model.name.lower()).strip("-") or "model"
    opts = [
        ("job-name", f"workbench-{slug}"),
        ("nodes", str(hw.nodes)),
        # one task per node: that task is torchrun, which starts one worker per GPU itself
        ("ntasks-per-node", "1"),
        ("gpus-per-node", str(hw.gpus_per_node)),
    ]
    if hw.host.cpu is not None:
        # every core of the node goes to torchrun's workers (data loading, NCCL proxy threads);
        # without a known CPU, --exclusive alone gives the task the whole node
        opts.append(("cpus-per-task", str(hw.host.cpu.cores * hw.host.sockets)))
    return opts + [("exclusive", None), ("time", time)]


def to_slurm(s: Scenario, source: Source = Source(), *, time: str = DEFAULT_TIME) -> str:
    """The sbatch script: ``#SBATCH`` lines, MASTER_ADDR from the allocation, the NCCL
    environment and ``srun torchrun ... -m workbench.trial.torchrun_main``."""
    lines = ["#!/bin/bash",
             f"# Slurm job: the workbench trial of {model_label(s)}, {layout_summary(s)}.",
             "# Submit from the directory that holds the scenario file: sbatch this.sh"]
    for opt, val in sbatch_options(s, time=time):
        lines.append(f"#SBATCH --{opt}" + (f"={val}" if val is not None else ""))
    lines += [
        "set -euo pipefail",
        "# The rendezvous host: the first node of the allocation.",
        'MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',
        "export MASTER_ADDR",
    ]
    lines += [e.line() for e in nccl_env(s)]
    # the job id makes the rendezvous id unique per job (torchrun's --rdzv-id)
    lines.append("srun " + shell_command(torchrun_args(s, source, rdzv_id=Expand("$SLURM_JOB_ID"))))
    return "\n".join(lines) + "\n"

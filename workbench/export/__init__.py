"""Exporters: a scenario's layout as the artefact an engine runs at scale (contract 4).

``export(scenario, target)`` returns the text ``workbench export SCENARIO --to TARGET`` prints:

- ``torchrun``   the environment and torchrun command of the workbench trial (:mod:`.torchrun`)
- ``slurm``      an sbatch script running that command on every node (:mod:`.slurm`)
- ``torchtitan`` a torchtitan TOML job config (:mod:`.torchtitan`)
- ``deepspeed``  a DeepSpeed JSON config (:mod:`.deepspeed`)
- ``megatron``   a Megatron-LM ``pretrain_gpt.py`` launch with its arguments (:mod:`.megatron`)
- ``torchtune``  a torchtune recipe config (YAML) for full, LoRA or QLoRA fine-tuning
  (:mod:`.torchtune`)
- ``accelerate`` the Accelerate config, ``TrainingArguments`` / TRL ``SFTConfig`` fields and for
  LoRA the PEFT config, as one YAML stream (:mod:`.accelerate`)
- ``peft``       PEFT's ``LoraConfig`` (adapter_config.json form) and, for QLoRA, the
  ``BitsAndBytesConfig``, as JSON (:mod:`.peft`)
- ``trial``      the ``workbench trial`` command line (:mod:`.trial`)
- ``grafana``    a Grafana dashboard JSON of the run against its plan (:mod:`.grafana`)
- ``prometheus-rules`` Prometheus alerting rules against the plan (:mod:`.prometheus_rules`)

A layout a target cannot express raises :class:`ExportError` (a ScenarioError) naming each
field and why; nothing is dropped silently. Submodules are imported on use, so importing this
package (the CLI does, for the target names) stays light.
"""
from __future__ import annotations

from importlib import import_module

from workbench.export.common import ExportError, Source
from workbench.scenario.types import Scenario

# target -> (module, function); the order is the CLI's --to choices
TARGETS: dict[str, tuple[str, str]] = {
    "torchrun": ("torchrun", "to_torchrun"),
    "slurm": ("slurm", "to_slurm"),
    "torchtitan": ("torchtitan", "to_torchtitan"),
    "deepspeed": ("deepspeed", "to_deepspeed"),
    "megatron": ("megatron", "to_megatron"),
    "torchtune": ("torchtune", "to_torchtune"),
    "accelerate": ("accelerate", "to_accelerate"),
    "peft": ("peft", "to_peft"),
    "trial": ("trial", "to_trial"),
    "grafana": ("grafana", "to_grafana"),
    "prometheus-rules": ("prometheus_rules", "to_prometheus_rules"),
}


def export(scenario: Scenario, target: str, source: Source = Source()) -> str:
    """The artefact for ``target`` (a key of TARGETS). ``source`` names the scenario file and
    ``--set`` overrides that launch commands pass on. Raises ExportError when the target cannot
    express the layout, KeyError for an unknown target."""
    module, func = TARGETS[target]
    return getattr(import_module(f"workbench.export.{module}"), func)(scenario, source)


__all__ = ["TARGETS", "ExportError", "Source", "export"]

"""Parse and validate a scenario document (contract 1: docs/scenario.md).

Every problem is collected, each naming the field path, the value and what is allowed; the
caller gets one :class:`~workbench.errors.ScenarioError` carrying all of them. Unknown keys are
errors. Each section has its reader: ``hardware.resolve`` (catalog keys, inline tables and
calibration profiles: the scenario does not know where a GPU's figures come from),
``scenario.model``, the ``parallel`` block below and ``scenario.training``; then the rule table
(``scenario.rules``) judges the fields together.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from workbench.documents.fields import MISSING, Fields
from workbench.errors import Problem, ScenarioError
from workbench.hardware.resolve import read_hardware
from workbench.scenario.model import read_model
from workbench.scenario.rules import check_rules
from workbench.scenario.training import read_training
from workbench.scenario.types import KEY_INPUTS, SCHEDULES, ZERO_STAGES, Parallel, Scenario


def parse_scenario(doc: Any, *, layout_required: bool = True,
                   calibration_names_only: bool = False) -> Scenario:
    """Validate a scenario document (a dict from YAML/JSON) and return the resolved Scenario.

    Raises ScenarioError listing every problem found. With ``layout_required=False`` (what the
    planner reads) the ``parallel`` block is optional and only a starting point: its problems
    and those of the layout rules (``scenario.rules``) are kept in ``Scenario.layout_problems``
    instead of raised, and an unreadable block leaves the default layout. With
    ``calibration_names_only`` (the dashboard) a ``calibration:`` GPU must name a profile of the
    calibration folders, not a path.
    """
    c = Fields()
    top = c.table(doc, "", ("hardware", "model", "parallel", "training"))
    if not isinstance(doc, dict):
        raise ScenarioError(c.problems or [Problem("scenario", doc, "must be a table")])
    for section in ("hardware", "model"):
        if top.get(section) is None:     # absent, or given as null
            c.add(section, None, "is required")
    hardware, hw_doc = read_hardware(c, top.get("hardware", MISSING),
                                     names_only=calibration_names_only)
    model, model_doc = read_model(c, top.get("model", MISSING))
    lc = c if layout_required else Fields()
    parallel, par_doc = read_parallel(lc, top.get("parallel", {}))
    if parallel is None and not layout_required:    # unreadable: kept as given, for reports
        parallel = Parallel()
    training, train_doc = read_training(c, top.get("training", {}))
    if c.problems:
        raise ScenarioError(c.problems)
    training, train_doc = _groups_on_the_model(model, training, train_doc, top)
    given = {f"{section}.{k}" for section in ("training", "parallel")
             if isinstance(top.get(section), dict) for k in top[section]}
    scenario = Scenario(hardware, model, parallel, training,
                        document={"hardware": hw_doc, "model": model_doc,
                                  "parallel": par_doc, "training": train_doc},
                        assumptions=tuple(c.assumptions),
                        defaulted=tuple(p for p in KEY_INPUTS if p not in given))
    c.problems += check_rules(scenario, layout=False)
    lc.problems += check_rules(scenario, layout=True)
    if c.problems:
        raise ScenarioError(c.problems)
    if not layout_required:
        scenario = dataclasses.replace(scenario, layout_problems=tuple(lc.problems),
                                       layout_given="parallel" in top)
    return scenario


def _groups_on_the_model(model, training, train_doc: dict, top: dict):
    """LoRA targets named by a group ("all-linear", "mlp", or left to the default) stand for
    the projections the model has: a GELU MLP has no gate (PEFT's "all-linear" adapts every
    linear layer there is). A gate named on its own stays the validator's to refuse."""
    lora = training.lora
    raw = ((top.get("training") or {}).get("lora") or {})
    named = raw.get("targets", "all-linear") if isinstance(raw, dict) else None
    if (lora is None or model.mlp == "swiglu" or "gate" not in lora.targets
            or not isinstance(named, str)):
        return training, train_doc
    targets = tuple(t for t in lora.targets if t != "gate")
    training = dataclasses.replace(training, lora=dataclasses.replace(lora, targets=targets))
    train_doc = {**train_doc, "lora": {**train_doc["lora"], "targets": list(targets)}}
    return training, train_doc


PARALLEL_FIELDS = ("dp", "zero", "shard_group", "tp", "sequence_parallel", "pp", "pp_schedule",
                    "virtual_stages", "cp", "ep", "reshard_after_forward", "async_tp",
                    "tp_comm_overlap", "overlap_grad_reduce", "overlap_param_gather",
                    "expert_tp")


def read_parallel(c: Fields, raw: Any) -> tuple[Parallel | None, dict]:
    p = "parallel"
    d = c.table(raw, p, PARALLEL_FIELDS)
    dfl = Parallel()
    vals = {
        "dp": c.integer(d, "dp", p, dfl.dp, hi=10_000_000),
        "zero": c.choice(d, "zero", p, ZERO_STAGES, dfl.zero),
        "tp": c.integer(d, "tp", p, dfl.tp, hi=1024),
        "sequence_parallel": c.boolean(d, "sequence_parallel", p, dfl.sequence_parallel),
        "pp": c.integer(d, "pp", p, dfl.pp, hi=1024),
        "pp_schedule": c.choice(d, "pp_schedule", p, SCHEDULES, dfl.pp_schedule),
        "virtual_stages": c.integer(d, "virtual_stages", p, dfl.virtual_stages, hi=1024),
        "cp": c.integer(d, "cp", p, dfl.cp, hi=1024),
        "ep": c.integer(d, "ep", p, dfl.ep, hi=100_000),
        "async_tp": c.boolean(d, "async_tp", p, dfl.async_tp),
        "tp_comm_overlap": c.boolean(d, "tp_comm_overlap", p, dfl.tp_comm_overlap),
    }
    # the true / false / null keys, each with what its null means
    by_engine = "what the training.engine does by default"
    nullable = {"reshard_after_forward": "true unless pp > 1, as torchtitan",
                "overlap_grad_reduce": by_engine, "overlap_param_gather": by_engine}
    flags = {}
    for key, null in nullable.items():
        v = d.get(key)
        if v is not None and not isinstance(v, bool):
            c.add(f"parallel.{key}", v, f"must be true, false, or null (null: {null})")
            v = None
        flags[key] = v
    sg = c.integer(d, "shard_group", p, None, hi=10_000_000)
    etp = c.integer(d, "expert_tp", p, None, hi=1024)
    if any(v is None for v in vals.values()) or any(
            k in d and d[k] is not None and v is None
            for k, v in (("shard_group", sg), ("expert_tp", etp))):
        return None, dict(d)
    par = Parallel(shard_group=sg, expert_tp=etp, **flags, **vals)
    return par, dataclasses.asdict(par)

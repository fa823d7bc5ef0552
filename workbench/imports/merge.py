"""The readings of several files merged into one scenario document.

A value a file states beats a value a reader filled from its library's default; two files that
state different values are a problem naming both files and the key. What no file says comes
from the library of the engine the files describe (the Hugging Face Trainer's arguments when
the engine is hf) or else the workbench's own defaults, each listed with its reason. Two
helper keys a reader may put in ``training`` are resolved here, once the data-parallel degree
is known: ``grad_accum`` (gradient-accumulation steps: global_batch = micro_batch x grad_accum
x dp, DeepSpeed's batch identity and the Trainer's) and ``steps`` (optimizer steps:
tokens = steps x global_batch x seq_len).
"""
from __future__ import annotations

import copy

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import Problem, printable, shown
from workbench.imports.common import get, put
from workbench.imports.types import Reading

# Subtrees merged whole: a model is one file's (a preset, or a config.json's fields), a GPU one
# catalog key or inline table, LoRA one reader's table.
ATOMIC = ("model", "hardware.gpu", "training.lora")
HELPERS = ("training.grad_accum", "training.steps")

# The workbench's defaults where no file names the hardware or the model (contract 1 makes
# both required; Accelerate and Trainer configs name neither).
DEFAULT_GPU = "h100-sxm"
DEFAULT_MODEL = {"preset": "llama3-8b"}
# The keys by which a file names a model the catalog lacks (its reader's problem asks for the
# model's config.json, which answers it): Trainer's model_name_or_path, torchtune's builder,
# torchtitan's flavor.
MODEL_NAMING_KEYS = (":model_name_or_path", ":model._component_", ":model.flavor")


@dataclass
class Imported:
    """The scenario the files make, and where each of its values came from."""

    scenario: dict
    # dotted path -> {"value", "by": "library" | "workbench", "why", "source" (file or null)}
    defaulted: dict[str, dict] = field(default_factory=dict)
    stated: dict[str, str] = field(default_factory=dict)   # dotted path -> the file it came from
    notes: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def to_dict(self) -> dict:
        """The ``--json`` form: {scenario, defaulted, stated, notes}."""
        return {"scenario": self.scenario, "defaulted": self.defaulted, "stated": self.stated,
                "notes": self.notes}


def _flatten(doc: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in doc.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict) and path not in ATOMIC:
            out.update(_flatten(v, path + "."))
        else:
            out[path] = v
    return out


def merge(readings: list[Reading]) -> Imported:
    """One document from the readings: stated values, then library defaults; conflicts are
    problems. Helper keys stay in the document for :func:`complete`."""
    from workbench.imports.accelerate import ASK_FOR_DEEPSPEED

    out = Imported(scenario={})
    seen: dict[str, list[tuple[Any, str, str | None]]] = {}
    has_ds = any(r.format == "deepspeed" for r in readings)
    for r in readings:
        out.notes += [f"{r.source}: {n}" for n in r.notes
                      if not (has_ds and n.endswith(ASK_FOR_DEEPSPEED))]
        out.problems += r.problems
        for path, value in _flatten(r.document).items():
            seen.setdefault(path, []).append((value, r.source, r.defaulted.get(path)))
    # a config.json gives the shape an unknown model id could not
    if any(r.format == "hf_model" and "model" in r.document and "layers" in r.document["model"]
           for r in readings):
        dropped = [p for p in out.problems if p.path.endswith(MODEL_NAMING_KEYS)]
        out.problems = [p for p in out.problems if p not in dropped]
        out.notes += [f"{p.path.split(':')[0]}: {p.path.split(':')[-1]} {p.value}: shaped by "
                      "the config.json given" for p in dropped]
        seen["model"] = [c for c in seen.get("model", []) if c[2] is None and
                         isinstance(c[0], dict) and "layers" in c[0]] or seen.get("model", [])
    for path, cands in seen.items():
        stated = [c for c in cands if c[2] is None]
        if stated:
            first = stated[0]
            for other in stated[1:]:
                if other[0] != first[0]:
                    # the files' names and values as a problem line quotes them: control
                    # characters escaped, a long value cut (workbench/errors.py)
                    out.problems.append(Problem(path, None, f"{printable(first[1])} says "
                                                f"{shown(first[0])}, {printable(other[1])} "
                                                f"says {shown(other[0])}; expected one value "
                                                "(edit one of them)"))
            put(out.scenario, path, first[0])
            out.stated[path] = first[1]
            _inner_defaults(out, path, first[1], readings)
        else:
            value, source, why = cands[0]
            put(out.scenario, path, value)
            out.defaulted[path] = {"value": value, "by": "library", "why": why,
                                   "source": source}
    return out


def _inner_defaults(out: Imported, path: str, source: str, readings: list[Reading]) -> None:
    """A table taken whole (a model, LoRA) keeps its reader's defaulted fields inside it."""
    if path not in ATOMIC:
        return
    for r in readings:
        if r.source == source:
            for inner, why in r.defaulted.items():
                if inner.startswith(path + "."):
                    out.defaulted[inner] = {"value": get(r.document, inner), "by": "library",
                                            "why": why, "source": source}


def _fill(out: Imported, path: str, value: Any, why: str, by: str = "workbench") -> None:
    if get(out.scenario, path) is None:
        put(out.scenario, path, value)
        out.defaulted[path] = {"value": value, "by": by, "why": why, "source": None}


def complete(out: Imported, hardware: dict | None = None) -> Imported:
    """Fill what no file said, and derive dp, global_batch and tokens. ``hardware``: the
    hardware section already in use (the page's box): each of its fields no file states is
    kept, before any workbench default."""
    from workbench.engines import ENGINES
    from workbench.imports import training_args as ta
    from workbench.scenario.types import Parallel, Training
    from workbench.hardware.resolve import HARDWARE_DEFAULTS

    doc = out.scenario
    for section in ("hardware", "parallel", "training"):
        # a --set in a launch script may make a section a value ("parallel="): nothing can
        # be filled into it, and the scenario's validator would refuse it the same way
        if section in doc and not isinstance(doc[section], dict):
            out.problems.append(Problem(section, doc[section], "expected a table of keys"))
            return out
    for key, value in (hardware or {}).items():
        _fill(out, f"hardware.{key}", copy.deepcopy(value), "kept from the page: no file "
              "states it", by="page")
    _fill(out, "hardware.gpu", DEFAULT_GPU, "no file names the GPU (Accelerate and Trainer "
          "configs do not); set hardware.gpu")
    for key in ("gpus_per_node", "nodes"):
        _fill(out, f"hardware.{key}", HARDWARE_DEFAULTS[key], f"no file gives {key}")
    _fill(out, "model", dict(DEFAULT_MODEL), "no file names the model; pass its config.json "
          "or a Hub id the catalog has")
    engine = get(doc, "training.engine") or Training.engine
    _fill(out, "training.engine", engine, "no file names the software that runs it")
    if engine == "hf":
        # no TrainingArguments file: the Trainer's own defaults (training_args.py)
        lib = "TrainingArguments (no arguments file given)"
        _fill(out, "training.micro_batch", 8, f"{lib}: per_device_train_batch_size "
              "defaults to 8", "library")
        _fill(out, "training.grad_accum", 1, f"{lib}: gradient_accumulation_steps defaults "
              "to 1", "library")
        _fill(out, "training.precision", "fp32", f"{lib}: bf16 and fp16 default to false",
              "library")
        _fill(out, "training.recompute", "none", f"{lib}: gradient_checkpointing defaults to "
              "false", "library")
        _fill(out, "training.optimizer", ta.OPTIM["adamw_torch_fused"], f"{lib}: optim "
              "defaults to adamw_torch_fused", "library")
        tp = get(doc, "parallel.tp")
        if isinstance(tp, int) and tp > 1:      # (not a number: the validator names it)
            # Transformers' tp_plan: colwise q/k/v/gate/up, rowwise o/down, replicated norms
            # (models/llama/configuration_llama.py base_model_tp_plan): no sequence sharding
            _fill(out, "parallel.sequence_parallel", False, "Transformers' tensor-parallel "
                  "plan shards no norm along the sequence", "library")
    else:
        for key in ("backend", "liger"):
            if key in doc.get("training", {}):
                out.problems.append(Problem(f"training.{key}", doc["training"][key],
                                            f"applies to engine hf only (the files describe "
                                            f"engine {shown(engine)})"))
    # an engine a --set in a launch script made a list or a table: the validator names it
    rec = ENGINES[engine].recompute_default if isinstance(engine, str) and engine in ENGINES \
        else Training.recompute
    for key, value in (("seq_len", Training.seq_len), ("micro_batch", Training.micro_batch),
                       ("precision", Training.precision), ("recompute", rec),
                       ("optimizer", Training.optimizer)):
        _fill(out, f"training.{key}", value, f"no file gives training.{key}")
    for key in ("tp", "pp", "cp", "zero"):
        _fill(out, f"parallel.{key}", getattr(Parallel, key), f"no file gives parallel.{key}")
    _derive(out)
    out.scenario = _ordered(doc)
    return out


def _derive(out: Imported) -> None:
    from workbench.scenario.types import Training

    doc = out.scenario
    hw, par, tr = doc["hardware"], doc["parallel"], doc["training"]
    ints = [v for v in (hw.get("gpus_per_node"), hw.get("nodes"), par.get("tp"),
                        par.get("pp"), par.get("cp"), tr.get("micro_batch"))
            if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    if len(ints) < 6:
        return      # the validator names the bad value
    for value in (par.get("dp", 1), tr.get("grad_accum", 1), tr.get("steps", 1),
                  tr.get("global_batch", 1)):
        if not isinstance(value, int) or isinstance(value, bool):
            return  # (a text or a list is never multiplied: "x" * 10**12 fills the memory)
    model_par = par["tp"] * par["pp"] * par["cp"]
    _world_from_batch(out, model_par)
    world = hw["gpus_per_node"] * hw["nodes"]
    if "dp" not in par:
        if world % model_par:
            out.problems.append(Problem("parallel", model_par, f"tp x pp x cp does not divide "
                                        f"the {world} GPUs"))
            return
        par["dp"] = world // model_par
        out.stated["parallel.dp"] = "derived: the GPUs / (tp x pp x cp)"
    accum = tr.pop("grad_accum", None)
    steps = tr.pop("steps", None)
    acc_why = out.defaulted.pop("training.grad_accum", None)
    out.stated.pop("training.grad_accum", None)
    out.defaulted.pop("training.steps", None)
    out.stated.pop("training.steps", None)
    if accum is not None:
        want = tr["micro_batch"] * accum * par["dp"]
        if "global_batch" in tr and tr["global_batch"] != want:
            out.problems.append(Problem("training.global_batch", tr["global_batch"], (
                f"expected micro_batch x gradient accumulation x dp = {tr['micro_batch']} x "
                f"{accum} x {par['dp']} = {want} (DeepSpeed's batch identity)")))
        elif "global_batch" not in tr:
            tr["global_batch"] = want
            out.stated["training.global_batch"] = (
                f"derived: micro_batch x gradient accumulation ({accum}"
                + (", defaulted" if acc_why else "") + f") x dp ({par['dp']})")
    _fill(out, "training.global_batch", tr["micro_batch"] * par["dp"],
          "no file gives the batch: micro_batch x dp (no gradient accumulation)")
    if steps is not None and isinstance(tr.get("seq_len"), int):
        tr["tokens"] = steps * tr["global_batch"] * tr["seq_len"]
        out.stated["training.tokens"] = (f"derived: the steps the file gives ({steps}) x "
                                         "global_batch x seq_len")
    _fill(out, "training.tokens", Training.tokens, "no file gives the steps to train "
          "(max_steps)")


def _world_from_batch(out: Imported, model_par: int) -> None:
    """No file gives the GPU count but one gives the whole batch identity (a DeepSpeed JSON
    with train_batch_size, micro-batch and accumulation): the data-parallel world is
    train_batch_size / (micro x accumulation), as DeepSpeed computes it (runtime/config.py
    _set_batch_related_parameters)."""
    doc = out.scenario
    hw, par, tr = doc["hardware"], doc["parallel"], doc["training"]
    accum = tr.get("grad_accum")
    if (out.defaulted.get("hardware.gpus_per_node", {}).get("by") != "workbench"
            or "dp" in par or not isinstance(tr.get("global_batch"), int)
            or not isinstance(accum, int) or "training.global_batch" not in out.stated):
        return
    dp, rem = divmod(tr["global_batch"], tr["micro_batch"] * accum)
    if rem or dp < 1 or (dp * model_par) % hw["nodes"]:
        return      # the identity check in _derive names the mismatch
    hw["gpus_per_node"] = dp * model_par // hw["nodes"]
    del out.defaulted["hardware.gpus_per_node"]
    out.stated["hardware.gpus_per_node"] = (
        "derived: train_batch_size / (micro x gradient accumulation) x tp x pp x cp / nodes")


def _ordered(doc: dict) -> dict:
    """Sections and keys in the order docs/scenario.md lists them."""
    from workbench.scenario import types as sc
    from workbench.hardware.resolve import HARDWARE_FIELDS

    order = {"hardware": HARDWARE_FIELDS,
             "parallel": tuple(f.name for f in dataclasses.fields(sc.Parallel)),
             "training": tuple(f.name for f in dataclasses.fields(sc.Training))}
    out = {}
    for section in ("hardware", "model", "parallel", "training"):
        if section not in doc:
            continue
        part = doc[section]
        keys = order.get(section)
        if keys and isinstance(part, dict):
            part = {k: part[k] for k in sorted(part, key=lambda k: (
                keys.index(k) if k in keys else len(keys), k))}
        out[section] = part
    out.update({k: v for k, v in doc.items() if k not in out})
    return out

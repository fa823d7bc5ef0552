"""Pieces every exporter shares: the scenario file a launch command points at, the refusal
for a layout a target cannot express, shell quoting and a one-line layout summary."""
from __future__ import annotations

import shlex
from dataclasses import dataclass

from workbench.engines import ENGINES
from workbench.errors import Problem, ScenarioError
from workbench.scenario.types import Scenario


@dataclass(frozen=True)
class Source:
    """Where the exported launch commands find the scenario: the file and the ``--set``
    overrides the exported scenario was loaded with (they are passed on, so the trial that
    runs is the one that was exported)."""

    path: str = "scenario.yaml"
    overrides: tuple[str, ...] = ()

    def args(self) -> list[str]:
        """``PATH [--set KEY=VALUE ...]`` as ``workbench trial`` and ``torchrun_main`` take it."""
        out = [self.path]
        for item in self.overrides:
            out += ["--set", item]
        return out


class ExportError(ScenarioError):
    """A valid scenario that a target cannot express. Carries every such problem (like
    validation), each naming the field, its value and why the target cannot take it: the
    same problems, word for word, the validator reports for a scenario of the target's
    engine."""

    def __init__(self, target: str, problems: list[Problem]):
        self.target = target
        super().__init__(problems)


def refuse_what_engine_cannot_run(s: Scenario, engine: str, target: str) -> None:
    """Raise ExportError with every limit of engine ``engine`` (its record, through the rule
    table: ``scenario.rules.engine_problems``) that ``s`` breaks. The exporters state no limit
    of their own: the planner and the validator ask the same table."""
    from workbench.scenario.rules import engine_problems
    problems = engine_problems(s, engine)
    if problems:
        raise ExportError(target, problems)


def switch_problems(s: Scenario, engine: str) -> list[Problem]:
    """The engine-switch rule (``scenario.rules`` ``engine_switches``: switches and the
    training.recompute policy) judged with engine ``engine``'s record, for targets that have no
    setting for a policy their engine does not offer (torchtune and the Hugging Face Trainer
    checkpoint whole blocks or nothing). Word for word what the validator says for a scenario
    of that engine."""
    from dataclasses import replace

    from workbench.scenario.rules import engine_switches
    return list(engine_switches(replace(s, training=replace(s.training, engine=engine))))


class Expand(str):
    """A word of an exported command whose ``$NAME`` references the script means to expand:
    the launcher's own variables (``$MASTER_ADDR``, ``$SLURM_JOB_ID``), written by the
    exporter, never by a scenario. Double-quoted; every other word is data."""


def shell_word(arg: str) -> str:
    """Quote one argument for bash. Data (scenario paths, ``--set`` values, names) is
    single-quoted with ``shlex.quote``, so ``$(...)``, backticks or ``;`` in it never run;
    only an :class:`Expand` word keeps its ``$`` expansion."""
    if isinstance(arg, Expand):
        return '"' + "".join("\\" + c if c in '"\\`' else c for c in arg) + '"'
    return shlex.quote(arg)


def one_line(text: object) -> str:
    """``text`` for a comment or a one-line field of an exported file: control characters
    (a newline above all, which would start a line of its own in a script) written as
    escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def shell_command(args: list[str], indent: str = "  ") -> str:
    """A command split over lines with ``\\`` continuations: one flag (and its value) a line."""
    words = [shell_word(a) for a in args]
    lines: list[str] = [words[0]]
    for w, raw in zip(words[1:], args[1:]):
        # a value goes on its flag's line; a new flag starts a line
        if raw.startswith("-") or len(lines) == 1:
            lines.append(w)
        else:
            lines[-1] += " " + w
    return (" \\\n" + indent).join(lines)


def layout_summary(s: Scenario) -> str:
    """``dp=8 zero=3 tp=1 pp=1 cp=1 ep=1 on 1 node x 8 GPUs (H100 SXM)`` for comments."""
    p, hw = s.parallel, s.hardware
    extra = ""
    if p.shard_group:
        extra += f" shard_group={p.shard_group}"
    if p.pp > 1:
        extra += f" schedule={p.pp_schedule}"
        if p.virtual_stages > 1:
            extra += f" v={p.virtual_stages}"
    nodes = f"{hw.nodes} node{'s' if hw.nodes > 1 else ''}"
    return (f"dp={p.dp} zero={p.zero}{extra} tp={p.tp} pp={p.pp} cp={p.cp} ep={p.ep} "
            f"on {nodes} x {hw.gpus_per_node} GPUs ({hw.gpu.name})")


def model_label(s: Scenario) -> str:
    """The model's name with its catalog key when it came from a preset."""
    preset = s.document.get("model", {}).get("preset")
    name = one_line(s.model.name)
    return f"{name} (preset {one_line(preset)})" if preset else name


def preset_key(s: Scenario) -> str | None:
    """The catalog key of an unmodified preset model, else None (a modified preset is no
    longer the published model, so exporters must not name the published one)."""
    preset = s.document.get("model", {}).get("preset")
    if preset and not s.model.name.endswith("(modified)"):
        return str(preset)
    return None


def train_samples(s: Scenario) -> int:
    """Sequences in the run: ``training.tokens / seq_len``, rounded up to whole steps."""
    per_step = s.training.global_batch * s.training.seq_len
    steps = max(1, -(-int(s.training.tokens) // per_step))
    return steps * s.training.global_batch


def train_steps(s: Scenario) -> int:
    """Optimizer steps in the run (``training.tokens`` over tokens per step, rounded up)."""
    return train_samples(s) // s.training.global_batch


# ---------------------------------------------------------------- engines and their switches
class Exported(str):
    """An export's text, plus ``.warnings``: what the file says, in comments, the target does
    not carry over (the estimate's engine, switches it has no setting for, approximations).
    A ``str``, so whatever prints or parses an export is unchanged."""

    warnings: tuple[str, ...] = ()

    def __new__(cls, text: str, warnings: list[str] | tuple[str, ...] = ()) -> Exported:
        obj = super().__new__(cls, text)
        obj.warnings = tuple(warnings)
        return obj


def spelling(engine: str, switch: str) -> str:
    """The engine's own flag / config key for ``switch``: the first word of its
    ``workbench.engines.ENGINES[engine].flags`` entry, where it is cited (one place per
    spelling; the rest of the entry describes values)."""
    from workbench.engines import ENGINES
    return ENGINES[engine].flags[switch].split()[0]


def fp8_recipe(s: Scenario) -> str | None:
    """The FP8 recipe the estimate ran with: ``training.fp8_recipe``, else the scenario
    engine's default (None for generic and without fp8 precision)."""
    from workbench.engines import engine_of
    if s.training.precision != "fp8":
        return None
    return s.training.fp8_recipe or engine_of(s.training).fp8_default


def _word(value: object) -> str:
    """A scenario value as the YAML file writes it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class Notes:
    """What a target does not carry over, collected as one line each: a comment in the file
    and a warning in the :class:`Exported` result. Starts with the engine mismatch: a scenario
    estimated for engine X (other than generic) exported to engine Y's format."""

    def __init__(self, s: Scenario, engine: str, target: str) -> None:
        self.items: list[str] = []
        name = s.training.engine
        if name not in ("generic", engine):
            self.items.append(
                f"training.engine = {name}: the estimate was for {name}, this export is for "
                f"{target}, whose memory and step time differ (estimate it with --set "
                f"training.engine={engine})")
            # the scenario's engine-only settings the target has no switch for: said, not
            # silently dropped (a scenario's own engine validated them)
            tr = s.training
            for key in ("fp8_param_gather", "fp8_attention", "state_dtypes", "recompute_modules"):
                value = getattr(tr, key)
                if value and engine in ENGINES and not ENGINES[engine].offers(key):
                    shown = (", ".join(f"{k} {v}" for k, v in vars(value).items())
                             if key == "state_dtypes" else ", ".join(value)
                             if key == "recompute_modules" else value)
                    self.add(f"training.{key}", shown, f"{target} has no such switch; not "
                             "exported")

    def add(self, path: str, value: object, why: str) -> None:
        self.items.append(one_line(f"{path} = {_word(value)}: {why}"))

"""What the user fixes or requires of a layout search, checked with clear messages."""
from __future__ import annotations

from dataclasses import dataclass, field

from workbench.engines import ENGINE_NAMES, FP8_RECIPES
from workbench.errors import Problem, ScenarioError
from workbench.scenario.types import OFFLOAD, OPTIMIZERS, RECOMPUTE, SCHEDULES, ZERO_STAGES

# The engines "all" stands for: every record but the idealised ``generic`` stack.
REAL_ENGINES = tuple(e for e in ENGINE_NAMES if e != "generic")

# Layout fields a constraint may fix, with the values each allows (None: a positive integer;
# shard_group also 0, no HSDP group).
FIELDS = {
    "dp": None, "tp": None, "pp": None, "cp": None, "ep": None, "shard_group": None,
    "expert_tp": None,
    "virtual_stages": None,
    "micro_batch": None, "zero": ZERO_STAGES, "pp_schedule": SCHEDULES,
    "sequence_parallel": (True, False), "recompute": RECOMPUTE, "offload": OFFLOAD,
    "engine": ENGINE_NAMES, "compile": (True, False), "async_tp": (True, False),
    "tp_comm_overlap": (True, False),
    "fp8_recipe": FP8_RECIPES,
}


@dataclass(frozen=True)
class Constraints:
    """``fixed``: field -> the one value every layout must have (e.g. {"tp": 8});
    ``max_memory_fraction``: the share of GPU memory a layout may use (0 < f <= 1; None, the
    default: the memory band's, ``workbench.headroom.band_fraction``, which says why);
    ``gpu_counts``: also search these smaller GPU counts for the throughput-vs-GPUs front;
    ``engines``: search these engines instead of the scenario's own (empty: its own);
    ``optimizers``: search these optimizers, each where the engine builds it (empty: the
    scenario's own) — the memory-saving ones a fine-tune may allow."""

    fixed: dict = field(default_factory=dict)
    max_memory_fraction: float | None = None
    gpu_counts: tuple[int, ...] = ()
    engines: tuple[str, ...] = ()
    optimizers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        problems = []
        for key, value in self.fixed.items():
            if key not in FIELDS:
                problems.append(Problem(f"fixed.{key}", value,
                                        f"one of: {', '.join(FIELDS)}"))
                continue
            allowed = FIELDS[key]
            if allowed is None:
                least = 0 if key == "shard_group" else 1
                if isinstance(value, bool) or not isinstance(value, int) or value < least:
                    problems.append(Problem(f"fixed.{key}", value, "a positive integer" + (
                        " or 0 (no HSDP group)" if least == 0 else "")))
            elif value not in allowed:
                problems.append(Problem(f"fixed.{key}", value,
                                        f"one of: {', '.join(map(str, allowed))}"))
        f = self.max_memory_fraction
        if f is not None and (isinstance(f, bool) or not isinstance(f, (int, float))
                              or not 0 < f <= 1):
            problems.append(Problem("max_memory_fraction", f, "a number in (0, 1]"))
        for e in self.engines:
            if e not in ENGINE_NAMES:
                problems.append(Problem("engines", e, f"one of: {', '.join(ENGINE_NAMES)}"))
        for o in self.optimizers:
            if o not in OPTIMIZERS:
                problems.append(Problem("optimizers", o, f"one of: {', '.join(OPTIMIZERS)}"))
        for n in self.gpu_counts:
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                problems.append(Problem("gpu_counts", n, "positive integers"))
        if problems:
            raise ScenarioError(problems)

    @classmethod
    def parse(cls, fixed: list[str] = (), max_memory_fraction: float | None = None,
              engines: str | None = None, optimizers: str | None = None) -> "Constraints":
        """From ``KEY=VALUE`` strings (the CLI's --fix), values read as YAML scalars;
        ``engines``: a comma-separated list, or "all" = every engine but ``generic``
        (``REAL_ENGINES``; the CLI's --engines); ``optimizers`` likewise, "all" = every one
        (each searched where the engine builds it; the CLI's --optimizers)."""
        from workbench.scenario.io import parse_value

        out = {}
        for item in fixed:
            key, sep, value = item.partition("=")
            if not sep:
                raise ScenarioError([Problem("--fix", item, "KEY=VALUE, e.g. tp=8")])
            out[key.strip()] = parse_value(value.strip())
        names: tuple[str, ...] = ()
        if engines:
            # "all" means the stacks people run: generic is the idealised reference that every
            # engine's fitted factors make slower, so it would win every comparison
            names = REAL_ENGINES if engines.strip() == "all" else tuple(
                e.strip() for e in engines.split(",") if e.strip())
        opts: tuple[str, ...] = ()
        if optimizers:
            opts = OPTIMIZERS if optimizers.strip() == "all" else tuple(
                o.strip() for o in optimizers.split(",") if o.strip())
        return cls(fixed=out, max_memory_fraction=max_memory_fraction, engines=names,
                   optimizers=opts)

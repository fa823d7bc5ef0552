"""Hostile inputs for the command line, and a runner that says how each one ended.

Shared by the property test (tests/test_fuzz_cli.py, hypothesis) and the fuzz benchmark
(benchmarks/hostile_fuzz.py, thousands of cases). A case is an argv for ``workbench`` plus files
it reads. ``run_case`` runs it in a forked child of this (already imported) process, in its own
session with a memory limit and a deadline, and classifies the end:

- ``ok`` (exit 0) or ``refused`` (exit 2 with exactly one line on stderr; ``import``: one
  ``workbench: import:`` line per problem, ``IMPORT_LINE``): what the product promises;
- ``traceback`` (an exception escaped ``main``), ``hang`` (past the deadline: killed),
  ``messy`` (exit 2 but not one line, or raw control characters printed to a terminal),
  ``crash`` (any other exit status or a signal), ``leftover`` (a process of the case outlived
  it), ``injected`` (a hostile value ran a command: the MARK file appeared, also when an
  exported script is run with stub launchers), ``broken`` (an exported script bash cannot
  parse, or the scenario ``import`` printed is not one ``load_scenario`` reads): each a defect.
The ``import`` cases are in tests/hostile_imports.py.

Forking costs milliseconds where a fresh interpreter costs most of a second, so thousands of
cases fit in minutes; the benchmark also runs a sample through real ``python -m workbench``
processes to show the two agree.
"""
from __future__ import annotations

import copy
import json
import os
import random
import re
import resource
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
MARK = "INJECTED"                 # a file hostile values try to create
MEMORY_LIMIT = 6 << 30            # address space of one case: a runaway ends as MemoryError
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")   # printed to a terminal: never (\t, \n ok)

# Values a field may be given, hostile to a parser, a validator, an estimator or a shell.
HOSTILE_VALUES: list[object] = [
    0, -1, 1, 2, 3, 7, 10 ** 6, 10 ** 12, 10 ** 40, -(10 ** 40), 2 ** 63, 2 ** 64 + 1,
    0.0, -0.0, 0.5, 1e-320, 5e-324, 1e308, -1e308, 3.0, float("nan"), float("inf"),
    float("-inf"), True, False, None, "", " ", "0", "3", "1e3", "0x10", "８０", "٣", "1_000",
    "nan", "inf", "-1", "true", "null", "none", "auto", "any", "default",
    "\x1b[31mred\x1b[0m", "a\nb", "a\rb", "tab\there", "\x00", "\u202e", "é" * 3, "x" * 5000,
    f"$(touch {MARK})", f"`touch {MARK}`", f"; touch {MARK}", f"' ; touch {MARK} ; '",
    f"\"; touch {MARK}; \"", "../../../../etc/passwd", "/dev/zero", "calibration:/dev/zero",
    "calibration:../x", "calibration:", "calibration:nope", "h100-sxm", "b200", "llama3-8b",
    "megatron", "torchtitan", "deepspeed", "fsdp", "nanotron", "zero-bubble", "dualpipev",
    "mxfp8", "tensorwise", "selective", "layer", "full", "op", "cpu", "nvme",
    [], [1, 2], [[[]]], {}, {"a": 1}, {"gpu": "h100-sxm"}, {"$(touch x)": 1},
]

# Values a field may well hold, at the edges of their ranges: they reach the estimator and
# the planner rather than the validator.
EDGE_VALUES: list[object] = [1, 2, 4, 8, 16, 32, 64, 96, 128, 512, 1024, 4096, 65536, 131072,
                             10 ** 6, 10 ** 9, 10 ** 13, 0.01, 0.1, 0.9, 1.5, 100.0, 1e5, 1e12]

# Raw YAML the dumper cannot write: dates, tags, anchors, merge keys, huge literals.
RAW_YAML: list[str] = [
    "2024-01-01", "2024-01-01 10:00:00", "!!binary aGVsbG8=", "!!python/object/apply:os.system "
    f"['touch {MARK}']", "!!set {a, b}", "!!omap [a: 1]", "&x [*x]", "*undefined", "<<: {a: 1}",
    "9" * 5000, "0o777", "0b101", "1:20", ".inf", ".nan", "~", "[" * 200 + "]" * 200,
    "{" * 40 + "}" * 40, "!!str 8", "!!int '8'", "!!float 8", "? [1, 2]\n  : 3",
]
# Tagged scalars PyYAML's own constructors cannot read (``!!bool x``: a KeyError inside
# PyYAML, ``!!int ''``: an IndexError): the reader must call them malformed YAML.
BAD_TAGS: list[str] = ["!!bool x", "!!bool ''", "!!int ''", "!!int +", "!!int 0x", "!!float x",
                       "!!float ''", "!!float :", "!!set [1]", "!!omap 1", "!!pairs [1]",
                       "[1, !!bool maybe]", "{a: !!int -}"]
RAW_YAML += BAD_TAGS

# Floats at the far ends of the float range (subnormal, tiny, huge): they pass a "finite and
# > 0" check and then divide, multiply and underflow in the estimator's arithmetic.
EXTREME_FLOATS: list[float] = [5e-324, 1e-320, 2.2e-308, 1e-300, 1e-30, 1e-9, 1e-3, 1e3, 1e9,
                               1e30, 1e300, 1.7e308]
# An inline GPU's figures and the MoE capacity factor, where EXTREME_FLOATS go.
INLINE_GPU = {"memory_gb": 80, "hbm_gb_per_s": 3350, "bf16_tflops": 989, "fp8_tflops": 1979,
              "power_w": 700}

VERB_CASES = ("estimate", "plan", "export")
# Verbs that read a scenario and would then start processes or a server: a case sends them only
# a scenario the reader refuses (``refused_by_reader``).
STARTING_VERBS = ("trial", "monitor")
EXPORT_TARGETS = ("torchrun", "slurm", "torchtitan", "deepspeed", "megatron", "trial",
                  "grafana", "prometheus-rules", "torchtune", "peft", "accelerate")
SHELL_TARGETS = ("torchrun", "slurm", "megatron", "trial")

# Numeric and text options of the verbs that would start processes, servers or long runs:
# only values their parser refuses are sent (``refused_by_parser``), so a case never starts
# a trial or a server; what a valid value does is the other tests' business.
OPTIONS = {
    "trial": ("--steps", "--world-size", "--rank", "--step", "--metrics-port",
              "--metrics-linger", "--backend", "--shape", "--inject"),
    "monitor": ("--port", "--interval", "--duration"),
    "dashboard": ("--port",),
    "report": ("--steps",),
    "plan": ("--top", "--max-memory-fraction", "--gpu-counts", "--fix", "--engines"),
    "bench": ("--world-size", "--min-bytes", "--max-bytes", "--step-factor", "--warmup",
              "--iters", "--collectives", "--backend"),
    "calibrate": ("--world-size",),
}
OPTION_TEXTS = ["", " ", "-1", "0", "1e23", "10" + "0" * 30, "nan", "inf", "-inf", "1e-300",
                "70000", "65536", "0x10", "３", "١", "1_0", "3.5", "abc", "\x00", "\x1b[2J",
                "a\nb", "9" * 5000, "--", "-", "all", "tp=", "=", "tp=3.5", "zero=true"]


@dataclass
class Case:
    """One invocation: ``argv`` after ``workbench``; ``files``: name -> text written to the
    case's folder first (``{dir}`` in argv is that folder)."""

    kind: str
    argv: list[str]
    files: dict[str, str] = field(default_factory=dict)
    fifo: str | None = None       # a name to create as a FIFO instead of a file
    env: dict[str, str] = field(default_factory=dict)   # set in the case's process; "{dir}"
    #                                                   in a value is the case's folder
    links: dict[str, str] = field(default_factory=dict)  # name -> symlink target ("{dir}" ok)

    def describe(self) -> str:
        return " ".join(a if len(a) < 60 else a[:57] + "..." for a in self.argv)


@dataclass
class Outcome:
    verdict: str        # ok | refused | traceback | hang | messy | crash
    code: int | None
    seconds: float
    stderr: str
    stdout: str
    pid: int = 0        # the case's process, leader of its session


def _dump(doc: object) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=10 ** 6)


def key_paths(doc: object, prefix: tuple = ()) -> list[tuple]:
    """Every key path of a nested mapping (lists are leaves)."""
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append(prefix + (k,))
            out += key_paths(v, prefix + (k,))
    return out


def _set(doc: dict, path: tuple, value: object) -> None:
    node = doc
    for k in path[:-1]:
        if not isinstance(node.get(k), dict):
            node[k] = {}
        node = node[k]
    node[path[-1]] = value


def example_docs() -> list[dict]:
    return [yaml.safe_load(p.read_text()) for p in EXAMPLES]


def mutated_document(rng: random.Random, docs: list[dict]) -> str:
    """An example scenario with one or two fields (existing or new) given edge or hostile
    values, as YAML text; one time in five a value is raw YAML (a date, a tag, an alias)."""
    doc = copy.deepcopy(rng.choice(docs))
    raw = None
    for _ in range(rng.randint(1, 2)):
        paths = key_paths(doc) or [("hardware",)]
        path = rng.choice(paths)
        if rng.random() < 0.15:       # a new key beside or below an existing one
            path = path[:-1] + (rng.choice(["extra", "gpu", "tp", "x" * 300, "\x1b[2J", "1"]),)
        if rng.random() < 0.2 and raw is None:
            raw = (path, rng.choice(RAW_YAML))
            _set(doc, path, "__RAW__")
        else:
            _set(doc, path, rng.choice(EDGE_VALUES if rng.random() < 0.5 else HOSTILE_VALUES))
    text = _dump(doc)
    if raw is not None:
        text = text.replace("__RAW__", raw[1].replace("\n", "\n" + " " * 4), 1)
    return text


def edge_case(rng: random.Random, docs: list[dict]) -> Case:
    """One or two numeric fields of an example at the edges of what they may hold: mostly
    valid scenarios, so the estimator, planner and exporters (not the validator) meet them."""
    doc = copy.deepcopy(rng.choice(docs))
    numeric = [p for p in key_paths(doc) if isinstance(_get(doc, p), (int, float))
               and not isinstance(_get(doc, p), bool)]
    for path in rng.sample(numeric, min(len(numeric), rng.randint(1, 2))):
        _set(doc, path, rng.choice(EDGE_VALUES))
    verb = rng.choice(VERB_CASES)
    return Case("edge", verb_args(rng, verb), {"scenario.yaml": _dump(doc)})


def _get(doc: dict, path: tuple) -> object:
    for k in path:
        doc = doc[k]
    return doc


def set_value(rng: random.Random, docs: list[dict]) -> str:
    """A ``--set KEY=VALUE`` argument: a real or invented key path, a hostile value as YAML."""
    paths = [".".join(map(str, p)) for p in key_paths(rng.choice(docs))]
    key = rng.choice(paths + ["", "a.b.c.d.e.f.g", "hardware", "model", ".", "..", "=",
                              "parallel.tp.x", "hardware.gpu.memory_gb", "training.tokens"])
    if rng.random() < 0.3:
        value = rng.choice(RAW_YAML)
    else:
        v = rng.choice(HOSTILE_VALUES)
        value = v if isinstance(v, str) and rng.random() < 0.5 else json.dumps(v) \
            if not isinstance(v, float) or v == v and abs(v) != float("inf") else str(v)
    return f"{key}={value}" if rng.random() < 0.95 else key


def verb_args(rng: random.Random, verb: str) -> list[str]:
    if verb == "plan":
        return ["plan", "{dir}/scenario.yaml", "--top", "3"]
    if verb == "export":
        return ["export", "{dir}/scenario.yaml", "--to", rng.choice(EXPORT_TARGETS)]
    return ["estimate", "{dir}/scenario.yaml"] + (["--json"] if rng.random() < 0.3 else [])


def document_case(rng: random.Random, docs: list[dict]) -> Case:
    verb = rng.choice(VERB_CASES)
    return Case("document", verb_args(rng, verb), {"scenario.yaml": mutated_document(rng, docs)})


def override_case(rng: random.Random, docs: list[dict]) -> Case:
    verb = rng.choice(VERB_CASES)
    argv = verb_args(rng, verb)
    for _ in range(rng.randint(1, 3)):
        argv += ["--set", set_value(rng, docs)]
    return Case("override", argv, {"scenario.yaml": _dump(rng.choice(docs))})


def extreme_case(rng: random.Random, docs: list[dict]) -> Case:
    """An example whose GPU is an inline table with one figure at a far end of the float range
    (``EXTREME_FLOATS``: subnormal, tiny, huge), or whose MoE model has such a capacity factor,
    or with any numeric field at such a value."""
    doc = copy.deepcopy(rng.choice(docs))
    draw = rng.random()
    if draw < 0.5:
        gpu = dict(INLINE_GPU)
        gpu[rng.choice(sorted(gpu))] = rng.choice(EXTREME_FLOATS)
        doc["hardware"]["gpu"] = gpu
    elif draw < 0.7:
        doc["model"] = {"preset": "mixtral-8x7b",
                        "moe": {"capacity_factor": rng.choice(EXTREME_FLOATS)}}
        doc["parallel"] = {"dp": doc["hardware"].get("gpus_per_node", 8)
                           * doc["hardware"].get("nodes", 1), "zero": 3, "ep": 8}
    else:
        numeric = [p for p in key_paths(doc) if isinstance(_get(doc, p), (int, float))
                   and not isinstance(_get(doc, p), bool)]
        _set(doc, rng.choice(numeric), rng.choice(EXTREME_FLOATS))
    return Case("extreme", verb_args(rng, rng.choice(VERB_CASES)),
                {"scenario.yaml": _dump(doc)})


def refused_by_reader(doc: dict, overrides: list[str]) -> bool:
    """Whether the scenario reader refuses ``doc`` with ``overrides`` (before any verb would
    start a process or a server)."""
    from workbench.errors import ScenarioError
    from workbench.scenario import apply_overrides, parse_scenario

    try:
        parse_scenario(apply_overrides(doc, overrides))
    except ScenarioError:
        return True
    except Exception:              # a defect the case itself will show
        return True
    return False


def tag_override_case(rng: random.Random, docs: list[dict]) -> Case:
    """``--set FIELD=TAG`` with a YAML tag its constructor cannot read (``BAD_TAGS``) on a
    numeric or boolean field, for every verb that reads a scenario; trial and monitor only
    where the reader refuses the result, so no case starts a trial or a server."""
    doc = rng.choice(docs)
    fields = [".".join(map(str, p)) for p in key_paths(doc)
              if isinstance(_get(doc, p), (int, float, bool))]
    sets = [f"{rng.choice(fields)}={rng.choice(BAD_TAGS)}" for _ in range(rng.randint(1, 2))]
    verb = rng.choice(VERB_CASES + STARTING_VERBS)
    if verb in STARTING_VERBS and not refused_by_reader(doc, sets):
        verb = "estimate"
    argv = verb_args(rng, verb) if verb in VERB_CASES else [verb, "{dir}/scenario.yaml"]
    for item in sets:
        argv += ["--set", item]
    return Case("tag", argv, {"scenario.yaml": _dump(doc)})


# Sizes for bench --min-bytes / --max-bytes past every range: more digits than a float holds,
# past 2**63, fractions, units on huge counts.
BENCH_SIZES = ["9" * 400, "9" * 400 + "G", "1" + "0" * 320 + "K", "99999999999999999999G",
               "9223372036854775808", "18446744073709551617", "8589934592G", "1.5", "0.5K",
               "1" + "0" * 30, "1e400", "1e308G", "4300" * 1200, "0", "3"]


def refused_before_work(argv: list[str]) -> bool:
    """Whether ``workbench bench ARGV`` stops before measuring: its parser or its request
    check (``bench.runner.make_config``) refuses it (or fails: a defect the case will show)."""
    import contextlib
    import io

    from workbench.bench.runner import make_config
    from workbench.cli.parser import build_parser

    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            args = build_parser().parse_args(argv)
            make_config(args.world_size, min_bytes=args.min_bytes, max_bytes=args.max_bytes,
                        step_factor=args.step_factor, warmup=args.warmup, iters=args.iters,
                        quick=args.quick, _available=1e18)
        except SystemExit:
            return True
        except Exception:
            return True
    return False


def bench_size_case(rng: random.Random, docs: list[dict]) -> Case:
    """``bench`` with message sizes past every range (``BENCH_SIZES``), only those refused
    before any rank starts."""
    while True:
        argv = ["bench", "--world-size", "2"]
        for option in rng.sample(["--min-bytes", "--max-bytes"], rng.randint(1, 2)):
            argv += [option, rng.choice(BENCH_SIZES)]
        if refused_before_work(argv):
            return Case("bench", argv)


CALIBRATIONS = sorted((ROOT / "calibrations").glob("*.json"))
# JSON values a calibration profile's measurement tables may be given: a list where a number
# belongs, a table where a list does, empty tables, numbers past the float range.
PROFILE_VALUES: list[object] = [[1, 2], [[1e-5, 1e-9]], [1e-5], [], {}, {"2": [0, 0]},
                                {"2": [[1, 2], 3]}, 10 ** 400, 1e308, 5e-324, -1, 0, "x", None,
                                True, [None, None], {"all_reduce": []}]
# The tables of a profile the estimator reads.
PROFILE_TABLES = ("collectives", "in_loop_s", "wrappers", "gemm_grid", "gemm_seconds",
                  "hbm_gb_per_s", "copy_gb_per_s", "cores", "memory_gb", "op_forward_s",
                  "gemm_points", "attention_points", "backend", "format", "device")


def json_paths(doc: object, prefix: tuple = (), entries: int = 3) -> list[tuple]:
    """Key paths into a JSON object, lists included (their first ``entries`` items)."""
    out = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc[:entries]) \
        if isinstance(doc, list) else ()
    for k, v in items:
        out.append(prefix + (k,))
        out += json_paths(v, prefix + (k,), entries)
    return out


def calibration_case(rng: random.Random, docs: list[dict]) -> Case:
    """A scenario whose GPU is ``calibration:fuzzed``: a copy of one of the project's profiles
    in the case's folder (made a calibration folder) with one or two fields of its measurement
    tables given ``PROFILE_VALUES``."""
    profile = json.loads(rng.choice(CALIBRATIONS).read_text())
    if profile.get("device") == "cuda" and rng.random() < 0.5:   # a GPU profile's collectives
        profile["collectives"] = {"nccl": {"all_reduce": {"2": [2e-5, 1e-11]},
                                           "all_gather": {"2": [2e-5, 1e-11]}}}
        profile["backend"] = "nccl"
    paths = [p for p in json_paths(profile) if p[0] in PROFILE_TABLES]
    for path in rng.sample(paths, min(len(paths), rng.randint(1, 2))):
        node = profile
        for k in path[:-1]:       # a first change may have replaced a table the second is in
            node = node[k] if isinstance(node, (dict, list)) and (
                k in node if isinstance(node, dict) else k < len(node)) else None
        if isinstance(node, (dict, list)):
            node[path[-1]] = copy.deepcopy(rng.choice(PROFILE_VALUES))
    doc = {"hardware": {"gpu": "calibration:fuzzed", "gpus_per_node": 2},
           "model": {"layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 128, "vocab": 256},
           "parallel": {"dp": 2}, "training": {"seq_len": 64, "global_batch": 2}}
    return Case("profile", verb_args(rng, rng.choice(VERB_CASES)),
                {"scenario.yaml": _dump(doc), "fuzzed.json": json.dumps(profile)},
                env={"WORKBENCH_CALIBRATIONS": "{dir}"})


def refused_by_parser(argv: list[str]) -> bool:
    """Whether ``workbench``'s argument parser refuses ``argv`` (exit 2) before any work."""
    import contextlib
    import io

    from workbench.cli.parser import build_parser

    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            build_parser().parse_args(argv)
        except SystemExit as exc:
            return exc.code == 2
    return False


def option_case(rng: random.Random, docs: list[dict]) -> Case:
    """A hostile value for one option; for the verbs that would start a trial, a server or a
    measurement, only a value the parser refuses (drawn again until it does)."""
    while True:
        verb = rng.choice(sorted(OPTIONS))
        option = rng.choice(OPTIONS[verb])
        argv = [verb] + (["{dir}/scenario.yaml"] if verb in ("trial", "monitor", "plan") else [])
        argv += [option, rng.choice(OPTION_TEXTS)]
        if verb == "plan" or refused_by_parser(argv):
            return Case("option", argv, {"scenario.yaml": _dump(rng.choice(docs))})


def special_file_cases() -> list[Case]:
    """A scenario that is not a small regular text file, for every verb that reads one."""
    bomb = ('a: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
        f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi"))
        + "hardware: *i\n")
    files = {"bomb.yaml": bomb, "deep.yaml": "a: " + "[" * 5000 + "]" * 5000,
             "huge.yaml": "# " + "x" * 3_000_000, "binary.yaml": "\udcff\x00\x80",
             "empty.yaml": "", "list.yaml": "- 1\n- 2\n", "scalar.yaml": "42\n",
             "dup.yaml": "hardware: {gpu: b200}\nhardware: {gpu: b200}\n",
             "json.json": '{"hardware": ' * 1000}
    cases = []
    for verb in ("estimate", "plan", "export", "trial", "monitor"):
        extra = ["--to", "torchrun"] if verb == "export" else []
        for name, text in files.items():
            cases.append(Case("special", [verb, "{dir}/" + name, *extra], {name: text}))
        for path in ("/dev/zero", "/dev/null", "/dev/urandom", "/proc/self/mem", "{dir}",
                     "{dir}/missing.yaml", "/", "{dir}/loop.yaml"):
            cases.append(Case("special", [verb, path, *extra]))
        cases.append(Case("special", [verb, "{dir}/fifo.yaml", *extra], fifo="fifo.yaml"))
    return cases


def prepare(case: Case, folder: Path) -> list[str]:
    """Write the case's files into ``folder``; its argv with ``{dir}`` filled in."""
    for name, text in case.files.items():
        (folder / name).write_bytes(text.encode("utf-8", "surrogateescape"))
    if case.fifo:
        os.mkfifo(folder / case.fifo)
    for name, target in case.links.items():
        (folder / name).symlink_to(target.replace("{dir}", str(folder)))
    loop = folder / "loop.yaml"
    if not loop.exists() and not loop.is_symlink():
        loop.symlink_to(loop)
    return [a.replace("{dir}", str(folder)) for a in case.argv]


# ``workbench import`` refuses with one line per problem (design.md, contract 1 additions:
# "Unknown or contradictory keys: one line each"): each line one of these (workbench/cli/:
# _import's problems, main's ScenarioError, _Parser.error), none over LINE_MAX characters.
IMPORT_LINE = re.compile(r"^(workbench: import: |workbench: invalid (option|scenario): "
                         r"|workbench import: error: )")
LINE_MAX = 1000


def classify(code: int | None, stderr: str, stdout: str, timed_out: bool,
             verb: str | None = None) -> str:
    if timed_out:
        return "hang"
    if "Traceback (most recent call last)" in stderr or code == 99:
        return "traceback"
    if code == 2:
        lines = stderr.strip("\n").split("\n")
        if verb == "import":
            clean = all(IMPORT_LINE.match(ln) and len(ln) <= LINE_MAX for ln in lines)
            return "refused" if clean and not CONTROL.search(stderr) else "messy"
        return "refused" if len(lines) == 1 and not CONTROL.search(stderr) else "messy"
    if code == 0:
        return "messy" if CONTROL.search(stdout) or CONTROL.search(stderr) else "ok"
    return "crash"


def run_case(case: Case, timeout_s: float = 30.0, subprocess_cli: bool = False) -> Outcome:
    """Run ``case`` (in a fork of this process; ``subprocess_cli``: a fresh ``python -m
    workbench``) in a fresh folder that is also its working directory."""
    with tempfile.TemporaryDirectory(prefix="wb-hostile-") as tmp:
        folder = Path(tmp)
        argv = prepare(case, folder)
        out, err = folder / ".stdout", folder / ".stderr"
        started = time.monotonic()
        env = {k: v.replace("{dir}", str(folder)) for k, v in case.env.items()}
        if subprocess_cli:
            pid = _spawn_cli(argv, folder, out, err, env)
        else:
            pid = _fork_main(argv, folder, out, err, env)
        code, timed_out = _wait(pid, started + timeout_s)
        seconds = time.monotonic() - started
        left = session_leftovers(pid)
        for p in left:                    # reaped here so one case cannot spoil the next
            _kill(p)
        stderr = err.read_text(errors="replace") if err.exists() else ""
        stdout = out.read_text(errors="replace") if out.exists() else ""
        verdict = classify(code, stderr, stdout, timed_out, case.argv[0] if case.argv else None)
        if verdict == "ok" and case.argv[0] == "export" and case.argv[-1] in SHELL_TARGETS:
            verdict = run_exported_script(stdout, folder) or verdict
        if verdict == "ok" and case.argv[0] == "import":
            from tests.hostile_imports import check_imported
            verdict = check_imported(argv, stdout, folder) or verdict
        if (folder / MARK).exists():
            verdict = "injected"
        elif left:
            verdict = "leftover"
    return Outcome(verdict, code, seconds, stderr, stdout, pid)


def run_exported_script(text: str, folder: Path) -> str | None:
    """Run an exported launch script with stub launchers (they only record their arguments);
    "broken" when bash cannot parse it, else None (whether a hostile value ran a command is
    seen by the MARK file it would create)."""
    import subprocess

    script = folder / "exported.sh"
    script.write_text(text)
    if subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode:
        return "broken"
    stubs = folder / "bin"
    stubs.mkdir(exist_ok=True)
    for name in ("torchrun", "srun", "scontrol", "workbench", "python", "python3", "sbatch"):
        (stubs / name).write_text("#!/bin/sh\nexit 0\n")
        (stubs / name).chmod(0o755)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "MASTER_ADDR": "node0", "SLURM_JOB_ID": "1",
           "SLURM_JOB_NODELIST": "node0", "HOME": str(folder)}
    subprocess.run(["bash", str(script)], cwd=folder, env=env, capture_output=True, timeout=30)
    return None


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _fork_main(argv: list[str], folder: Path, out: Path, err: Path,
               env: dict[str, str] | None = None) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 98
    try:    # the child: never returns into the caller's code
        os.setsid()
        os.chdir(folder)
        os.environ.update(env or {})
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
        for fd, path in ((1, out), (2, err)):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(f, fd)
            os.close(f)
        from workbench.cli import main
        try:
            code = main(argv)
        except SystemExit as exc:       # argparse's exit
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:           # what a user would see as a traceback
            traceback.print_exc()
            code = 99
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code if isinstance(code, int) else 98)


def _spawn_cli(argv: list[str], folder: Path, out: Path, err: Path,
               env: dict[str, str] | None = None) -> int:
    import subprocess

    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen([sys.executable, "-m", "workbench", *argv], cwd=folder, stdout=o,
                                stderr=e, stdin=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, **(env or {}), "PYTHONPATH": str(ROOT)},
                                preexec_fn=lambda: resource.setrlimit(
                                    resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT)))
    return proc.pid


def _wait(pid: int, deadline: float) -> tuple[int | None, bool]:
    """(exit status or -signal, timed out); a case past its deadline is killed with its whole
    session, so nothing it started outlives it."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            return None, True
        time.sleep(0.005)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status), False
    return -os.WTERMSIG(status), False


def session_leftovers(*sessions: int) -> list[int]:
    """Processes still in the cases' sessions (a session's id is its case's pid): what they
    left behind."""
    import psutil

    wanted, left = set(sessions), []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getsid(p.pid) in wanted:
                left.append(p.pid)
        except (ProcessLookupError, PermissionError):
            continue
    return left

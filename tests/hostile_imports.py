"""Hostile inputs for ``workbench import`` (tests/hostile.py runs them and judges how they end).

The inputs start from real configs of every format the verb reads: the copies of Accelerate's,
TRL's, torchtitan's, Megatron-LM's and torchtune's own examples (``tests.conftest.IMPORTS``,
beside the project; left out, with the groups built on them, where absent), a
Llama ``config.json`` (:data:`LLAMA_CONFIG`) and the workbench's own exports of the example
scenarios (``--to accelerate`` split into its two files, deepspeed, torchtitan, megatron,
torchtune, torchrun, slurm). Each case mutates them hostilely, in the file's own syntax: type
swaps, numbers at and past every range (NaN, inf, subnormal, 10^400), deep nesting, alias bombs,
duplicated keys, binary junk, control characters and ANSI escapes in keys and values, shell
metacharacters and ``$(...)`` in the scripts, shell-variable doubling bombs, unknown keys;
several files that contradict each other; ``--format`` wrong or hostile; ``-o`` into hostile
paths; special files as inputs.

A case's kind says which: ``import`` (mutated files), ``imp-pair`` (two or three files of
different runs together), ``imp-opt`` (``--format`` / ``-o``), ``imp-file`` (special inputs).
"""
from __future__ import annotations

import copy
import functools
import json
import random
import re
from pathlib import Path

import yaml

from tests.hostile import (
    EDGE_VALUES, EXAMPLES, EXTREME_FLOATS, HOSTILE_VALUES, MARK, RAW_YAML, Case, _dump,
    key_paths, _set,
)
from tests.conftest import IMPORTS

# A Llama config.json as the Hub serves it: the figures of huggingface.co/meta-llama/
# Llama-3.1-8B config.json, the file workbench/catalog/models.py ("llama3-8b") cites; keys
# as transformers 5.25 models/llama/configuration_llama.py names them.
LLAMA_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 131072,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 128256,
}
EXPORTED = ("accelerate", "deepspeed", "torchtitan", "megatron", "torchtune", "torchrun",
            "slurm")
EXPORT_NAMES = {"deepspeed": "ds_config.json", "torchtitan": "torchtitan.toml",
                "torchtune": "torchtune.yaml", "megatron": "megatron.sh",
                "torchrun": "torchrun.sh", "slurm": "slurm.sbatch.sh"}

BIG = [10 ** 400, -(10 ** 400), 2 ** 1023 * 3, 10 ** 41, 10 ** 4000]
# Counts a scenario file still holds (40 digits, workbench/documents/text.py MAX_DIGITS) whose
# products (max_steps x global batch x seq_len) it does not, and 64-bit edges.
LONG = [10 ** 39, 10 ** 40 - 1]
EDGE_IMPORT = EDGE_VALUES + EXTREME_FLOATS + [2 ** 63, 2 ** 64 + 1]


def _edge(rng: random.Random) -> object:
    """A number at an edge; one time in six one of 40 digits (``LONG``)."""
    return rng.choice(LONG) if rng.random() < 1 / 6 else rng.choice(EDGE_IMPORT)
NEW_KEYS = ["extra", "\x1b[2J", "a\rb", "\x00", f"$(touch {MARK})", "x" * 300, "\u202e", "1",
            "per_device_train_batch_size", "zero_stage", "tp", "num_processes", "fsdp_config",
            "zero_optimization", "bf16", "fp16", "deepspeed", "\udcff"]
# JSON text no dumper writes: NaN and Infinity (Python's json reads them), numbers past the
# float and the int-conversion ranges, lone surrogates, deep nesting.
RAW_JSON = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1E-400", "1" + "0" * 400,
            "1" + "0" * 4000, "9" * 40, "1" + "0" * 39,
            "9" * 5000, "[" * 5000 + "]" * 5000, '{"a":' * 40 + "1" + "}" * 40, '"\\u0000"',
            '"\\ud800"', '"\\u001b[31mred"', "{}", "[]", "true", "null", '"auto"', "-0",
            '"' + "x" * 5000 + '"', '"$(touch ' + MARK + ')"', "0.0", '"8"', "[1, 2]"]
RAW_YAML_IMPORT = RAW_YAML + ['"\\ud800"', '"\\x1b[2J"', "*i", "! x", "!!binary aGVsbG8="]
BOMB_ANCHORS = ('a0: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
    f"{n}0: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi")))
TOML_VALUES = ["nan", "inf", "-inf", "+inf", "1e400", "1" + "0" * 400, "-" + "9" * 30,
               "5e-324", "0", "-1", "true", '""', '"\\u001b[31mred"', f'"$(touch {MARK})"',
               "[]", "[1, 2]", "{}", "{a = 1}", "1979-05-27T07:32:00Z", "07:32:00", "1979-05-27",
               "0x7fffffffffffffff", "1_000", '"' + "x" * 5000 + '"', "[" * 600 + "]" * 600,
               "{a = " * 100 + "1" + "}" * 100, '"8"', "8.5", "'multi'", "1e-320", "9" * 5000,
               '"²"', '"9999999999999999999999999999999999999999999"', "[{a = 1}]",
               '"' + "9" * 5000 + '"', "1" + "0" * 4000, "9" * 40]
SHELL_WORDS = [f"$(touch {MARK})", f"`touch {MARK}`", f";touch {MARK}", f"'$(touch {MARK})'",
               f'"$(touch {MARK})"', f"${{X:-$(touch {MARK})}}", "$((1<<62))", "nan", "inf",
               "-inf", "1e400", "1" + "0" * 400, "9" * 5000, "-1", "0", "5e-324", "0x10", "'",
               '"', "\\", "\x1b[31m8\x1b[0m", "8\r", "８", "$UNSET", "${UNSET:-4}", "()", "&&",
               "|", "#", "--", "-", "${1:-8}", "$(($GPUS*2))", "3.5", "²", "٣", "x" * 5000,
               "\x1b]0;title\x07", "1" + "0" * 4000, "9" * 40]
JUNK = ["\udcff\udcfe", "\x00", "\x1b[2J", "\x07", "\ufeff", "\r", "\x85", "\u2028", "\x7f",
        "\udcc0\udc80", "\t\t"]
FORMAT_NAMES = ["accelerate", "deepspeed", "hf_model", "torchtitan", "megatron", "launch",
                "torchtune", "training_args"]
HOSTILE_FORMATS = ["", " ", "ACCELERATE", "accelerate ", "hf-model", f"$(touch {MARK})",
                   "\x1b[2J", "../accelerate", "x" * 5000, "yaml", "json", "auto", "-", "\x00"]


def _export_files(target: str, text: str) -> list[tuple[str, str]]:
    """An export as the files a person would save: ``--to accelerate`` is two documents
    split at its ``--- `` lines (workbench/export/accelerate.py)."""
    if target != "accelerate":
        return [(EXPORT_NAMES[target], text)]
    parts = text.split("\n--- ")
    return [("accelerate_config.yaml", parts[1]), ("sft_config.yaml", parts[2])]


@functools.lru_cache(maxsize=1)
def import_bases() -> tuple[tuple[tuple[str, str], ...], ...]:
    """Groups of (file name, text) that make one run: each real example alone, the pairs the
    examples come in, the Llama config.json (alone and with TRL's SFT example), and the
    workbench's exports of the example scenarios to every target ``import`` reads."""
    from workbench.errors import ScenarioError
    from workbench.export import Source, export
    from workbench.scenario import load_scenario

    real = ({p.name: p.read_text() for p in sorted(IMPORTS.iterdir()) if p.name != "SOURCES.md"}
            if IMPORTS.is_dir() else {})
    cfg = ("config.json", json.dumps(LLAMA_CONFIG, indent=2))
    groups = [((n, t),) for n, t in real.items()] + [(cfg,)]
    # the pairs the real examples come in, where the shared folder holds them
    pairs = [("accelerate-config_yaml_templates-deepspeed.yaml",
              "accelerate-zero_stage1_config.json"),
             ("trl-examples-cli_configs-example_config.yaml", None),
             ("trl-trl-accelerate_configs-fsdp2.yaml",
              "trl-examples-cli_configs-example_config.yaml", None)]
    for names in pairs:
        if all(n is None or n in real for n in names):
            groups.append(tuple(cfg if n is None else (n, real[n]) for n in names))
    seen = set()
    for path in EXAMPLES:
        # the examples as they are, and with the recompute Accelerate's Trainer offers
        for sets in ([], ["training.recompute=full"]):
            for target in EXPORTED:
                try:
                    text = export(load_scenario(path, sets), target, Source(path.name))
                except ScenarioError:           # the target cannot run this layout
                    continue
                if text not in seen:
                    seen.add(text)
                    groups.append(tuple(_export_files(target, text)))
    return tuple(groups)


def _kind(name: str) -> str:
    low = name.lower()
    if low.endswith(".json"):
        return "json"
    if low.endswith(".toml"):
        return "toml"
    if low.endswith(".sh"):
        return "shell"
    return "yaml"


def _value(rng: random.Random) -> object:
    pool = rng.random()
    if pool < 0.35:
        return rng.choice(EDGE_VALUES)
    if pool < 0.5:
        return rng.choice(EXTREME_FLOATS + BIG)
    return copy.deepcopy(rng.choice(HOSTILE_VALUES))


def mutate_table(rng: random.Random, name: str, text: str, edge: bool = False) -> str:
    """A YAML or JSON config with one to three fields (existing or new, keys hostile too) given
    hostile values, written back in its own syntax; sometimes a raw literal no dumper writes,
    an alias bomb, a duplicated key. ``edge``: numeric fields only, at the edges of ranges."""
    is_json = _kind(name) == "json"
    doc = json.loads(text) if is_json else yaml.safe_load(text)
    if not isinstance(doc, dict):
        doc = {}
    if edge:
        numeric = [p for p in key_paths(doc) if isinstance(_lookup(doc, p), (int, float))
                   and not isinstance(_lookup(doc, p), bool)]
        # one or two fields; one time in three a run-length field (max_steps, epochs) at 40
        # digits, which a scenario holds but its product with the batch and length does not
        runs = [p for p in numeric if re.search(r"step|epoch", str(p[-1]))]
        if runs and rng.random() < 1 / 2:
            _set(doc, rng.choice(runs), rng.choice(LONG))
        else:
            for path in rng.sample(numeric, min(len(numeric), rng.randint(1, 2))):
                _set(doc, path, _edge(rng))
        return json.dumps(doc, indent=2) if is_json else _dump(doc)
    raw = None
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(key_paths(doc) or [("x",)])
        if rng.random() < 0.2:
            path = path[:-1] + (rng.choice(NEW_KEYS),)
        if raw is None and rng.random() < 0.25:
            raw = rng.choice(RAW_JSON if is_json else RAW_YAML_IMPORT)
            _set(doc, path, "__RAW__")
        else:
            _set(doc, path, _value(rng))
    if is_json:
        out = json.dumps(doc, indent=2, ensure_ascii=rng.random() < 0.5)
    else:
        out = _dump(doc)
    if raw is not None:
        out = out.replace('"__RAW__"' if is_json else "__RAW__", raw, 1)
    if not is_json and raw == "*i":
        out = BOMB_ANCHORS + out
    if rng.random() < 0.1 and doc:          # a key given twice
        key = rng.choice(list(doc))
        out = out.replace("{", "{" + json.dumps(str(key)) + ": 1, ", 1) if is_json \
            else out + "\n" + _dump({key: 1})
    return out


def _lookup(doc: dict, path: tuple) -> object:
    for k in path:
        doc = doc[k]
    return doc


_TOML_LINE = re.compile(r"^(\s*[\w.\"-]+\s*=\s*)(.+)$", re.M)


def mutate_toml(rng: random.Random, text: str, edge: bool = False) -> str:
    """A torchtitan TOML with values replaced by hostile TOML literals, or keys, tables and
    lines added (unknown, duplicated, ANSI-escaped, deeply nested)."""
    for _ in range(rng.randint(1, 3)):
        lines = list(_TOML_LINE.finditer(text))
        op = rng.random()
        if lines and (edge or op < 0.6):
            runs = [m for m in lines if re.match(r"\s*steps\b", m.group(1))]
            m = rng.choice(runs if edge and runs and rng.random() < 1 / 3 else lines)
            value = str(_edge(rng)) if edge else rng.choice(TOML_VALUES)
            text = text[:m.start(2)] + value + text[m.end(2):]
        elif op < 0.7 and lines:             # a key given twice
            m = rng.choice(lines)
            text = text[:m.end()] + "\n" + m.group(0).strip() + text[m.end():]
        elif op < 0.8:
            text += rng.choice(["\n[parallelism]\nfoo = 1\n", '\n"\\u001b[2J" = 1\n',
                                "\n[" + ".".join(["a"] * 500) + "]\nx = 1\n",
                                "\n[training]\n", f'\n[job]\ndescription = "$(touch {MARK})"\n',
                                "\n[[training]]\nx = 1\n", "\nwhat = \n"])
        else:
            text = text.replace("[parallelism]", rng.choice(
                ["[parallelism]\nunknown_degree = 4", "[parallelism.x]", "[[parallelism]]",
                 "[paral\x1b[2Jlelism]"]), 1)
    return text


_FLAG = re.compile(r"(--[\w-]+)([ =])([^\s\\]+)")
_ASSIGN = re.compile(r"^(\s*(?:export\s+)?[A-Za-z_]\w*=)(\S*)", re.M)


def mutate_shell(rng: random.Random, text: str, edge: bool = False) -> str:
    """A Megatron-LM or torchrun/Slurm script with flag values, assignments, the layout
    comment or ``--set`` overrides made hostile; injection lines, doubling variables (each
    twice the last: 2^k bytes once expanded), duplicated and unknown flags."""
    for _ in range(rng.randint(1, 3)):
        op = rng.random()
        flags = list(_FLAG.finditer(text))
        if flags and (edge or op < 0.35):
            m = rng.choice(flags)
            word = str(_edge(rng)) if edge else rng.choice(SHELL_WORDS)
            text = text[:m.start(3)] + word + text[m.end(3):]
        elif op < 0.45:
            assigns = list(_ASSIGN.finditer(text))
            if assigns:
                m = rng.choice(assigns)
                text = text[:m.start(2)] + rng.choice(SHELL_WORDS) + text[m.end(2):]
        elif op < 0.55:
            k = rng.randint(20, 60)
            bomb = "A0=xxxxxxxxxxxxxxxx\n" + "".join(f'A{i}="$A{i - 1}$A{i - 1}"\n'
                                                     for i in range(1, k + 1))
            text = bomb + text.replace("--num-layers", f"--num-layers $A{k} --num-layers", 1) \
                + f"\n--hidden-size ${{A{k}}}\n"
        elif op < 0.65:         # the layout comment of our launch scripts
            text = re.sub(r"\b(dp|zero|tp|pp|cp|ep)=(\d+)", lambda m: m.group(1) + "=" + rng.choice(
                ["9" * 5000, "0", "99999999999999999999999", "1" + "0" * 400]), text, count=2)
            text = text.replace("GPUs (", rng.choice(["GPUs (\x1b[2J", "GPUs ($(touch x)",
                                                      "GPUs (" + "x" * 5000]), 1)
        elif op < 0.75:
            hostile = rng.choice(["training.seq_len=!!bool x", "parallel.tp=1e400",
                                  "parallel.tp=" + "9" * 5000, "a=&x [*x]",
                                  f"training.engine=$(touch {MARK})", "hardware.gpu=/dev/zero",
                                  "parallel=", "=", "model.preset=\x1b[2J", "training={a: 1}",
                                  "training.engine=[1]", "training.engine=\x1b[2J",
                                  "parallel.dp=" + "x" * 3000, "training.global_batch=abc",
                                  "parallel.tp=[1]", "training.micro_batch=" + "9" * 40,
                                  "hardware.gpus_per_node=" + "9" * 39])
            # into the trial's command, where the launch reader reads its --set overrides
            text = text.replace(" --steps", f" --set '{hostile}' --steps", 1) \
                if " --steps" in text else text + f"\n--set '{hostile}'\n"
        elif op < 0.85:
            text += rng.choice([f"\nX=$(touch {MARK})\n", f'\neval "touch {MARK}"\n',
                                f"\n--tensor-model-parallel-size $(touch {MARK})\n",
                                "\n--micro-batch-size 3 --micro-batch-size 5\n",
                                "\n--frobnicate-size 3\n", "\n--\x1b[2J 1\n",
                                "\n--seq-length 'unbalanced\n", "\n--num-layers\n",
                                "\n" + "--x " * 20000 + "\n"])
        else:
            m = rng.choice(flags) if flags else None
            if m:
                text = text[:m.end()] + f" {m.group(1)} 7" + text[m.end():]
    return text


def junk(rng: random.Random, text: str) -> str:
    """``text`` with binary junk or control characters put at a random place."""
    at = rng.randint(0, len(text))
    return text[:at] + rng.choice(JUNK) * rng.randint(1, 3) + text[at:]


def hostile_file(rng: random.Random, name: str, text: str, edge: bool = False) -> str:
    """One config mutated hostilely in its own syntax (``edge``: numbers at range edges)."""
    kind = _kind(name)
    if kind == "shell":
        out = mutate_shell(rng, text, edge)
    elif kind == "toml":
        out = mutate_toml(rng, text, edge)
    else:
        try:
            out = mutate_table(rng, name, text, edge)
        except (ValueError, yaml.YAMLError):
            out = text
    return junk(rng, out) if not edge and rng.random() < 0.15 else out


def _files(group, prefix: str = "") -> dict[str, str]:
    return {prefix + name: text for name, text in group}


def import_argv(rng: random.Random, names: list[str]) -> list[str]:
    """``import FILES`` with, now and then, --json, -o into the case's folder, or the right
    --format (every file of one format)."""
    argv = ["import", *("{dir}/" + n for n in names)]
    if rng.random() < 0.3:
        argv.append("--json")
    if rng.random() < 0.2:
        argv += ["-o", "{dir}/imported-out.yaml"]
    return argv


def import_case(rng: random.Random, docs: list[dict]) -> Case:
    """A group of real configs with one (or every) file mutated hostilely; one case in four
    only moves numbers to the edges of their ranges, so the merge, the validator and the
    printed scenario meet them rather than the readers."""
    group = rng.choice(import_bases())
    files = _files(group)
    edge = rng.random() < 0.25
    for name in rng.sample(sorted(files), rng.randint(1, len(files))):
        files[name] = hostile_file(rng, name, files[name], edge)
    return Case("import", import_argv(rng, sorted(files)), files)


def import_pair_case(rng: random.Random, docs: list[dict]) -> Case:
    """Two or three runs' files imported together (they contradict each other: precision,
    ZeRO stage, GPUs, model), now and then one file twice or one mutated."""
    groups = rng.sample(import_bases(), rng.randint(2, 3))
    files: dict[str, str] = {}
    for i, group in enumerate(groups):
        # file names are quoted in the problem lines: now and then hostile ones
        mark = rng.choice(["", "", "", "\x1b[2J", f"$(touch {MARK})", "\u202e", "y" * 150])
        files.update(_files(group, prefix=f"{'abc'[i]}{mark}-"))
    if rng.random() < 0.3:
        name = rng.choice(sorted(files))
        files[name] = hostile_file(rng, name, files[name], edge=rng.random() < 0.5)
    names = sorted(files)
    if rng.random() < 0.15:
        names.append(rng.choice(names))      # the same file twice
    return Case("imp-pair", import_argv(rng, names), files)


# -o targets: a directory, a full device, a symlink loop, a dangling symlink, a symlink to an
# input, a FIFO nobody reads, a missing folder, a name too long, control characters, the input
# itself (also by another spelling), an existing file.
OUTPUTS = ["{dir}", "{dir}/", "", ".", "/dev/full", "/dev/null", "{dir}/loop.yaml",
           "{dir}/dangling.yaml", "{dir}/link-to-input.yaml", "{dir}/fifo-out.yaml",
           "{dir}/missing/out.yaml", "{dir}/" + "x" * 300, "{dir}/\x1b[2J.yaml", "/proc/version",
           "/", "{dir}/existing.yaml", "INPUT", "./INPUT", "{dir}/./INPUT", "-", "/proc/self/mem"]


def import_option_case(rng: random.Random, docs: list[dict]) -> Case:
    """A real group imported with ``--format`` naming another format (each reader reads a
    foreign file) or a hostile name, or with ``-o`` into a hostile path."""
    group = rng.choice(import_bases())
    files = _files(group)
    names = sorted(files)
    argv = ["import", *("{dir}/" + n for n in names)]
    links: dict[str, str] = {}
    fifo = None
    if rng.random() < 0.5:
        argv += ["--format", rng.choice(FORMAT_NAMES if rng.random() < 0.7 else HOSTILE_FORMATS)]
    else:
        target = rng.choice(OUTPUTS).replace("INPUT", names[0])
        if target.endswith("dangling.yaml"):
            links["dangling.yaml"] = "{dir}/nowhere/x.yaml"
        elif target.endswith("link-to-input.yaml"):
            links["link-to-input.yaml"] = "{dir}/" + names[0]
        elif target.endswith("fifo-out.yaml"):
            fifo = "fifo-out.yaml"
        elif target.endswith("existing.yaml"):
            files["existing.yaml"] = "keep: me\n"
        argv += ["-o", target]
        if rng.random() < 0.3:
            argv.append("--json")
    return Case("imp-opt", argv, files, fifo=fifo, links=links)


def import_special_cases() -> list[Case]:
    """Inputs that are not small regular config files: devices, FIFOs, directories, a symlink
    loop, bombs, Hub-id look-alikes; each alone and beside a real config."""
    from tests.hostile import special_file_cases

    texts = {}
    for case in special_file_cases():
        texts.update(case.files)
    real = ("ds.json", json.dumps(LLAMA_CONFIG))
    cases = []
    for name, text in texts.items():
        cases.append(Case("imp-file", ["import", "{dir}/" + name], {name: text}))
        cases.append(Case("imp-file", ["import", "{dir}/" + real[0], "{dir}/" + name],
                          {name: text, real[0]: real[1]}))
    for path in ("/dev/zero", "/dev/null", "/dev/urandom", "/proc/self/mem", "/proc/self/status",
                 "/proc/self/environ", "/etc/passwd", "{dir}", "/", "{dir}/missing.yaml",
                 "{dir}/loop.yaml", "meta-llama/Llama-3.1-8B", "META-LLAMA/llama-3.1-8b",
                 "a/b", f"org/$(touch {MARK})", "\x1b[31m/x", "x" * 5000 + "/y",
                 "../../../../etc/passwd", "org/" + "x" * 300, "-", "", "config.json"):
        cases.append(Case("imp-file", ["import", path]))
        cases.append(Case("imp-file", ["import", "{dir}/" + real[0], path], {real[0]: real[1]}))
    cases.append(Case("imp-file", ["import", "{dir}/fifo.yaml"], fifo="fifo.yaml"))
    for fmt in FORMAT_NAMES:
        cases.append(Case("imp-file", ["import", "--format", fmt, "{dir}/" + "bomb.yaml"],
                          {"bomb.yaml": texts["bomb.yaml"]}))
    return cases


def check_imported(argv: list[str], stdout: str, folder: Path) -> str | None:
    """For an ``import`` that exited 0: "broken" unless the scenario it printed (or wrote with
    ``-o``) loads with ``workbench.scenario.load_scenario`` (with ``--json``: the ``scenario``
    of the object, through ``parse_scenario``); None when it does or nothing can be read back
    (``-o`` into a device)."""
    from workbench.scenario import load_scenario, parse_scenario

    text = stdout
    if "-o" in argv:
        target = Path(argv[argv.index("-o") + 1])
        if not target.is_absolute():
            target = folder / target
        if not target.is_file():
            return None
        text = target.read_text(errors="surrogateescape")
    try:
        if "--json" in argv:
            parse_scenario(json.loads(text)["scenario"])
        else:
            path = folder / ".imported-check.yaml"
            path.write_text(text, errors="surrogateescape")
            load_scenario(path)
    except Exception:       # ScenarioError included: what import printed is not a scenario
        return "broken"
    return None

"""The torchrun and Slurm scripts ``workbench export --to torchrun|slurm`` writes, read back into
scenario keys.

Those scripts run the workbench trial (``-m workbench.trial.torchrun_main SCENARIO [--set
KEY=VALUE ...]``, :mod:`workbench.export.torchrun`, :mod:`workbench.export.slurm`): the
scenario itself is the file they name, so what they carry is
- the layout, in the header comment :func:`workbench.export.common.layout_summary` writes
  (``dp=8 zero=3 [shard_group=4] [schedule=1f1b [v=2]] tp=1 pp=1 cp=1 ep=1 on 1 node x 8 GPUs
  (GPU name)``);
- the machines: torchrun's ``--nnodes`` / ``--nproc-per-node`` (``torch.distributed.run``), or
  ``#SBATCH --nodes`` / ``--gpus-per-node``; the GPU by its catalog name;
- the ``--set`` overrides, read as ``--set`` reads them (``workbench.scenario.io``).
The scenario file named there is not opened (a reader reads one text); the notes name it, to be
imported beside the script.
"""
from __future__ import annotations

import re
import shlex

from workbench.errors import Problem, ScenarioError
from workbench.imports.common import decimal_count
from workbench.imports.torchtitan import put
from workbench.imports.types import Reading
from workbench.documents.text import MAX_BYTES, MAX_DIGITS, DocumentError

FORMAT = "launch"
TRIAL = "workbench.trial.torchrun_main"
_LAYOUT = re.compile(
    r"dp=(?P<dp>\d+) zero=(?P<zero>\d+)(?: shard_group=(?P<sg>\d+))?"
    r"(?: schedule=(?P<sched>\S+)(?: v=(?P<v>\d+))?)? tp=(?P<tp>\d+) pp=(?P<pp>\d+) "
    r"cp=(?P<cp>\d+) ep=(?P<ep>\d+) on (?P<nodes>\d+) nodes? x (?P<gpus>\d+) GPUs \((?P<gpu>.*)\)")
_SBATCH = re.compile(r"^#SBATCH\s+--(nodes|gpus-per-node)=(\d+)\s*$", re.M)


def looks_like(name: str, text: str) -> bool:
    """A script that launches the workbench trial."""
    return TRIAL in text


def _command(text: str) -> list[str]:
    """The words of the torchrun command (continuation lines joined)."""
    for line in text.replace("\\\n", " ").splitlines():
        if TRIAL in line and not line.lstrip().startswith("#"):
            try:
                words = shlex.split(line)
            except ValueError as err:
                raise DocumentError("launch", f"unreadable command line: {err}",
                                    syntax=True) from None
            if TRIAL in words:
                return words
    return []


def read(name: str, text: str) -> Reading:
    """The script read into a :class:`Reading`."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise DocumentError(name, f"more than {MAX_BYTES} bytes")
    r = Reading(source=name, format=FORMAT)
    words = _command(text)
    if not words:
        raise DocumentError(name, f"no command running {TRIAL}")
    m = _LAYOUT.search(text)
    counts = {k: decimal_count(v) for k, v in m.groupdict().items()
              if k not in ("sched", "gpu") and v is not None} if m else {}
    if m is None:
        r.problems.append(Problem(f"{name}:layout", None, "the header comment with the layout "
                                  "(dp=... zero=... tp=... pp=... cp=... ep=... on N nodes x G "
                                  "GPUs) is missing"))
    elif None in counts.values():
        bad = next(k for k, v in counts.items() if v is None)
        r.problems.append(Problem(f"{name}:layout", m.group(bad), f"{bad}: expected a count of "
                                  f"at most {MAX_DIGITS} decimal digits"))
    else:
        for key in ("dp", "zero", "tp", "pp", "cp", "ep"):
            put(r.document, f"parallel.{key}", counts[key])
        if m.group("sg"):
            put(r.document, "parallel.shard_group", counts["sg"])
        if m.group("sched"):
            put(r.document, "parallel.pp_schedule", m.group("sched"))
            put(r.document, "parallel.virtual_stages", counts.get("v", 1))
        put(r.document, "hardware.nodes", counts["nodes"])
        put(r.document, "hardware.gpus_per_node", counts["gpus"])
        from workbench.catalog import GPUS
        keys = [k for k, g in GPUS.items() if g.name == m.group("gpu")]
        if keys:
            put(r.document, "hardware.gpu", keys[0])
        else:
            r.notes.append(f"GPU {m.group('gpu')!r}: not a catalog name; give hardware.gpu")
    _machines(r, words, text)
    _trial_args(r, words[words.index(TRIAL) + 1:])
    return r


def _machines(r: Reading, words: list[str], text: str) -> None:
    """torchrun's --nnodes / --nproc-per-node and #SBATCH lines; a contradiction with the
    layout comment is a problem."""
    found: dict[str, int] = {}
    for w in words[:words.index(TRIAL)]:
        flag, _, value = w.partition("=")
        path = {"--nnodes": "hardware.nodes", "--nproc-per-node": "hardware.gpus_per_node",
                "--nproc_per_node": "hardware.gpus_per_node"}.get(flag)
        if path and decimal_count(value) is not None:
            found[path] = decimal_count(value)
    for opt, value in _SBATCH.findall(text):
        if decimal_count(value) is not None:
            found["hardware.nodes" if opt == "nodes" else "hardware.gpus_per_node"] = \
                decimal_count(value)
    hw = r.document.setdefault("hardware", {})
    for path, value in found.items():
        key = path.split(".")[1]
        if key in hw and hw[key] != value:
            r.problems.append(Problem(f"{r.source}:{path}", value, f"the layout comment says "
                                      f"{hw[key]}; expected the same"))
        hw[key] = value


def _trial_args(r: Reading, args: list[str]) -> None:
    """``SCENARIO [--set KEY=VALUE ...] --steps K --backend B`` of torchrun_main."""
    from workbench.scenario.io import apply_overrides
    sets, i = [], 0
    if args and not args[0].startswith("-"):
        r.notes.append(f"the scenario file {args[0]!r} holds the rest of the run: import it "
                       "beside this script")
        i = 1
    while i < len(args):
        flag = args[i]
        value = args[i + 1] if i + 1 < len(args) else None
        if flag == "--set" and value is not None:
            sets.append(value)
        elif flag in ("--steps", "--backend") and value is not None:
            pass   # the trial's run length and process-group backend: not the scenario's
        else:
            r.problems.append(Problem(f"{r.source}:{flag}", value, "expected --set, --steps or "
                                      "--backend after the scenario file"))
            i += 1
            continue
        i += 2
    try:
        over = apply_overrides({}, sets)
    except ScenarioError as err:
        r.problems += [Problem(f"{r.source}:--set {p.path}", p.value, p.message)
                       for p in err.problems]
        return
    except (KeyError, TypeError, ValueError):
        # parse_value still raises these for a YAML tag in a value ('!!bool x': issue #42's
        # hostile-input list); a reading reports it as one line instead
        r.problems.append(Problem(f"{r.source}:--set", " ".join(sets), "a value --set cannot "
                                  "read (YAML tags are not values)"))
        return
    _merge(r.document, over)


def _merge(into: dict, over: dict) -> None:
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value

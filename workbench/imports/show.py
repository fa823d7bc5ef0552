"""``workbench import``'s text output: the scenario YAML, then what was defaulted and why, and
the notes, as YAML comments so the output is itself a scenario file."""
from __future__ import annotations

import os
from pathlib import Path

from workbench.errors import Problem, ScenarioError, printable
from workbench.imports.merge import Imported
from workbench.scenario.io import dump_scenario


def value_text(v: object) -> str:
    """A value as the scenario YAML writes it, on one line (a large round number such as the
    default 1e12 tokens in exponent form, not as thirteen digits and ".0")."""
    if isinstance(v, float) and v.is_integer() and abs(v) >= 1e6:
        return f"{v:g}"
    text = dump_scenario({"v": v}).strip()[3:].strip() if isinstance(v, (dict, list)) else \
        ("null" if v is None else str(v).lower() if isinstance(v, bool) else str(v))
    return text.replace("\n", " ")


def imported_text(out: Imported) -> str:
    """The scenario as YAML followed by a comment block: each defaulted field with its value,
    who chose it (the library the files use, or the workbench) and why; then the notes."""
    lines = ["# Scenario read by `workbench import` from: "
             + ", ".join(sorted({printable(s) for s in out.stated.values()
                                 if not s.startswith("derived")}
                                | {printable(d["source"]) for d in out.defaulted.values()
                                   if d["source"]})), ""]
    body = dump_scenario(out.scenario).rstrip("\n").splitlines()
    lines = lines[:1] + body + [""]
    if out.defaulted:
        lines.append("# Defaulted (no file says them):")
        for path, d in out.defaulted.items():
            src = f", {printable(d['source'])}" if d["source"] else ""
            lines.append(f"#   {path} = {printable(value_text(d['value']))}  ({d['by']} default"
                         f"{src}: {printable(d['why'], 300)})")
    derived = {p: s for p, s in out.stated.items() if s.startswith("derived")}
    if derived:
        lines.append("# Derived:")
        lines += [f"#   {p}: {printable(s, 300)}" for p, s in derived.items()]
    if out.notes:
        lines.append("# Notes:")
        lines += [f"#   {printable(n, 400)}" for n in out.notes]
    return "\n".join(lines) + "\n"


def write_output(target: str, text: str, inputs: list[str]) -> Path:
    """Write ``text`` to ``-o``'s ``target``: never over one of the ``inputs``, never into a
    folder, and a target that cannot take it (a full device, a FIFO nobody reads, a symlink
    loop, a name too long) is one problem line, not a traceback or a wait. Returns the path."""
    path = Path(target)

    def refuse(message: str) -> ScenarioError:
        return ScenarioError([Problem("-o", target, message)])

    try:
        if path.is_dir() or not target.strip():
            problem = "is a folder; name a file"
        elif path.exists() and any(Path(f).exists() and path.samefile(f) for f in inputs):
            problem = "is one of the files imported; write the scenario elsewhere"
        elif not path.resolve().parent.is_dir():
            problem = "its folder does not exist"
        else:
            problem = None
    except OSError as exc:            # a name too long, a folder that cannot be read
        problem = f"cannot write there: {exc.strerror or exc}"
    except RuntimeError:              # Path.resolve: "Symlink loop from ..." (Python 3.11)
        problem = "cannot write there: a symlink loop"
    except ValueError:                # a NUL byte in the name
        problem = "is not a file name"
    if problem:
        raise refuse(problem)
    try:
        # O_NONBLOCK: a FIFO nobody reads refuses at once (ENXIO) rather than waiting for a
        # reader (open(2)); cleared before writing, so a pipe that is read takes it all
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK, 0o666)
        try:
            os.set_blocking(fd, True)
            with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
                fd = -1
                f.write(text)
        finally:
            if fd >= 0:
                os.close(fd)
    except OSError as exc:
        raise refuse(f"cannot write there: {exc.strerror or exc}") from None
    return path

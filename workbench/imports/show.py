"""``workbench import``'s text output: the scenario YAML, then what was defaulted and why, and
the notes, as YAML comments so the output is itself a scenario file."""
from __future__ import annotations

from workbench.errors import printable
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

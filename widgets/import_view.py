"""What the page says after "Open scenario" read a person's own configs (``workbench import``):
which files it read, the fields no file stated (with the default each took and whose default it
is), and the notes; or, when the files cannot make a scenario, one line per problem."""
from __future__ import annotations

import html

from workbench.errors import Problem, printable
from workbench.imports.merge import Imported
from workbench.imports.show import value_text


def imported_html(out: Imported) -> str:
    """A short report of an import that made a valid scenario: the files, then the defaulted
    fields in a list a person can open (they are many for a single Accelerate file)."""
    files = sorted({printable(s) for s in out.stated.values() if not s.startswith("derived")})
    head = (f"<div class='wb-imported'>Read {html.escape(', '.join(files))}: "
            f"{len(out.stated)} fields from the files, {len(out.defaulted)} defaulted.")
    rows = "".join(
        f"<li><code>{html.escape(path)}</code> = {html.escape(printable(value_text(d['value'])))}"
        f" <span style='color:#57606a'>({_whose(d)}{html.escape(printable(d['why'], 300))})"
        "</span></li>"
        for path, d in out.defaulted.items())
    notes = "".join(f"<li>{html.escape(printable(n, 400))}</li>" for n in out.notes)
    body = ""
    if rows:
        body += ("<details class='wb-defaulted'><summary style='cursor:pointer'>What no file "
                 f"says, and the default it took</summary><ul style='font-size:12px'>{rows}"
                 "</ul></details>")
    if notes:
        body += ("<details class='wb-import-notes'><summary style='cursor:pointer'>Notes"
                 f"</summary><ul style='font-size:12px'>{notes}</ul></details>")
    return head + body + "</div>"


def _whose(d: dict) -> str:
    """Whose default a field took, in words ("library default: "); the page's own values
    (kept where no file states them) say so in their reason."""
    return "" if d["by"] == "page" else f"{html.escape(d['by'])} default: "


def import_problems_html(problems: list[Problem]) -> str:
    """The problems that kept the files from making a scenario, one line each."""
    lines = "".join(f"<li>{html.escape(str(p))}</li>" for p in problems[:12])
    more = len(problems) - 12
    tail = f"<li>and {more} more</li>" if more > 0 else ""
    return ("<div class='wb-error' style='color:#cf222e'>These files do not make a scenario "
            f"yet:<ul>{lines}{tail}</ul></div>")

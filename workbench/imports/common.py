"""What every config reader needs: the file's table within the scenario limits, dotted paths
into a document, and values checked one at a time into one-line problems."""
from __future__ import annotations

import math
from typing import Any

from workbench.errors import Problem, printable
from workbench.imports.types import Reading
from workbench.documents.text import MAX_DIGITS, DocumentError, load_text

JSON_SUFFIXES = (".json",)


def parse_table(name: str, text: str) -> dict:
    """The top-level table of ``text`` (JSON when ``name`` ends in .json or the text opens with
    ``{``, else YAML), read through the scenario's limit-checked reader; anything else raises
    ``DocumentError`` naming the file."""
    json_text = name.lower().endswith(JSON_SUFFIXES) or text.lstrip().startswith("{")
    doc = load_text(text, name, json_text=json_text)
    check_digits(doc, name)
    if not isinstance(doc, dict):
        raise DocumentError(name, "must hold a table of keys (got "
                                  f"{type(doc).__name__})")
    return doc


def read_table(name: str, text: str, fmt: str, keys, what: str) -> tuple[dict, "Collector"]:
    """The file's top-level table and a Collector for it, with one problem for each top-level
    key not in ``keys`` (``what``: the format the keys should be of)."""
    table = parse_table(name, text)
    c = Collector(name, fmt)
    for key in table:
        if key not in keys:
            c.unknown(key, table[key], what)
    return table, c


def long_integers(doc: Any, prefix: str = "") -> list[str]:
    """Dotted paths of the integers in ``doc`` with more than ``MAX_DIGITS`` digits."""
    out, stack = [], [(prefix, doc)]
    while stack:              # no recursion: a TOML table may nest hundreds deep
        path, node = stack.pop()
        if isinstance(node, dict):
            stack += [(f"{path}.{k}" if path else str(k), v) for k, v in node.items()]
        elif isinstance(node, list):
            stack += [(f"{path}[{i}]", v) for i, v in enumerate(node)]
        elif isinstance(node, int) and not isinstance(node, bool) and \
                abs(node) >= 10 ** MAX_DIGITS:
            out.append(path)
    return sorted(out)


def check_digits(doc: Any, name: str) -> None:
    """Refuse a document holding an integer of more than ``MAX_DIGITS`` digits, the bound the
    YAML reader keeps (workbench/documents/text.py) and JSON and TOML readers lack: such a
    number reaches no scenario field, and products of a few of them pass what ``int`` can even
    print (4,300 digits)."""
    paths = long_integers(doc)
    if paths:
        raise DocumentError(name, f"{printable(paths[0], 80)}: a number of more than "
                                  f"{MAX_DIGITS} digits")


def decimal_count(text: Any) -> int | None:
    """A count a script or a command line writes in decimal digits, at most ``MAX_DIGITS`` of
    them (the scenario reader's bound, workbench/documents/text.py), else None. ``isdecimal``,
    not ``isdigit``: ``int()`` refuses ``"²"``, which isdigit accepts, and any text past 4,300
    digits (sys.get_int_max_str_digits) with a ValueError."""
    if isinstance(text, str) and text.isdecimal() and len(text) <= MAX_DIGITS:
        return int(text)
    return None


def put(doc: dict, path: str, value: Any) -> None:
    """Set the dotted ``path`` (``training.micro_batch``) in ``doc``, creating tables."""
    *parents, last = path.split(".")
    node = doc
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value


def get(doc: dict, path: str, missing: Any = None) -> Any:
    """The value at the dotted ``path`` of ``doc``, or ``missing``."""
    node: Any = doc
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return missing
        node = node[part]
    return node


class Collector:
    """A :class:`Reading` being filled, with checked conversions that record problems."""

    def __init__(self, name: str, fmt: str):
        self.reading = Reading(source=name, format=fmt)
        self.name = name

    def state(self, path: str, value: Any) -> None:
        """A value the file states (or its library derives from what it states)."""
        put(self.reading.document, path, value)
        self.reading.defaulted.pop(path, None)

    def default(self, path: str, value: Any, why: str) -> None:
        """A value the file leaves to its library's default ``why`` names."""
        put(self.reading.document, path, value)
        self.reading.defaulted[path] = why

    def problem(self, key: str, value: Any, message: str) -> None:
        self.reading.problems.append(Problem(f"{self.name}:{key}", value, message))

    def note(self, text: str) -> None:
        self.reading.notes.append(text)

    # -- checked values ------------------------------------------------------------------
    def integer(self, key: str, value: Any, lo: int = 1) -> int | None:
        """A whole number >= ``lo`` (``"8"`` as the launchers' string form is accepted)."""
        if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
            value = int(value.strip())
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < lo:
            self.problem(key, value, f"expected a whole number >= {lo}")
            return None
        return value

    def number(self, key: str, value: Any) -> float | None:
        """A finite number (``"1e9"`` as text is accepted)."""
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(value):
            self.problem(key, value, "expected a number")
            return None
        return value

    def boolean(self, key: str, value: Any) -> bool | None:
        """true/false; also the strings Accelerate's launcher accepts (accelerate 1.16
        utils/environment.py str_to_bool: y yes t true on 1 / n no f false off 0)."""
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("y", "yes", "t", "true", "on",
                                                                 "1", "n", "no", "f", "false",
                                                                 "off", "0"):
            return value.strip().lower() in ("y", "yes", "t", "true", "on", "1")
        self.problem(key, value, "expected true or false")
        return None

    def choice(self, key: str, value: Any, allowed: dict[str, Any]) -> Any:
        """``allowed[value]`` (case-insensitive keys), or a problem naming the allowed ones."""
        k = str(value).strip().lower() if isinstance(value, (str, int)) and \
            not isinstance(value, bool) else None
        if k is None or k not in allowed:
            self.problem(key, value, "expected one of " + ", ".join(allowed))
            return None
        return allowed[k]

    def unknown(self, key: str, value: Any, what: str) -> None:
        """A key the format does not have."""
        self.problem(key, value, f"is not a key of {what}")

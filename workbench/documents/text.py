"""Documents from text, within limits: one reader for scenario files, ``--set`` values, the
dashboard's YAML tab and uploads, calibration profiles and the configs ``workbench import``
reads. It knows no scenario: it turns text into plain values or refuses it.

A document here is a small table of numbers and names, so anything far outside that shape is refused
with one line naming what was wrong, before it can cost memory or time:
- text over ``MAX_BYTES``;
- nesting deeper than ``MAX_DEPTH`` (checked while the YAML is composed, so a 500-deep document
  never reaches Python's recursion limit);
- more than ``MAX_ALIASES`` aliases, or more than ``MAX_VALUES`` values once the aliases are
  expanded (a 519-byte "billion laughs" document expands to billions);
- a key given twice in one table (YAML and JSON would silently keep the last);
- integers longer than ``MAX_DIGITS`` digits.
Dates stay text (YAML 1.1 would make ``2024-01-01`` a date object no field takes), and the
reader is PyYAML's safe one: no tag ever builds a Python object.
"""
from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import yaml

from workbench.errors import Problem, ScenarioError

MAX_BYTES = 1_000_000
MAX_DEPTH = 32
MAX_ALIASES = 100
MAX_VALUES = 100_000
MAX_DIGITS = 40


class DocumentError(ScenarioError):
    """A document that is not one the workbench reads (too large, too deep, ...)."""

    def __init__(self, where: str, message: str, syntax: bool = False):
        super().__init__([Problem(where, None, message)])
        self.syntax = syntax      # malformed text, as opposed to a limit


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with the limits above."""

    def __init__(self, stream: str, where: str):
        super().__init__(stream)
        self._where = where
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise DocumentError(self._where, f"more than {MAX_ALIASES} YAML aliases")
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise DocumentError(self._where, f"nested deeper than {MAX_DEPTH} levels")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep=deep)
        except (DocumentError, yaml.YAMLError):
            raise
        except (KeyError, IndexError, TypeError, ValueError):
            # PyYAML's constructors read a tagged scalar's text without checking it first
            # (pyyaml 6.0.4 yaml/constructor.py: ``!!bool x`` -> bool_values[...] KeyError,
            # ``!!int ""`` -> value[0] IndexError, ``!!float x`` -> float() ValueError)
            tag = str(node.tag).rsplit(":", 1)[-1]
            raise DocumentError(self._where, f"is not valid YAML at line "
                                             f"{node.start_mark.line + 1}: !!{tag} cannot read "
                                             f"{_short(node.value)}", syntax=True) from None

    def construct_mapping(self, node, deep=False):
        if not isinstance(node, yaml.MappingNode):   # ``!!set [1]``: PyYAML says what is wrong
            return super().construct_mapping(node, deep=deep)
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                dup = key in seen
            except TypeError:         # an unhashable key: PyYAML says so itself
                break
            if dup:
                raise DocumentError(self._where, f"key {_short(key)} is given twice in one "
                                                 f"table (line {key_node.start_mark.line + 1})")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node):
        digits = sum(ch.isdigit() for ch in str(node.value))
        if digits > MAX_DIGITS:
            raise DocumentError(self._where, f"a number of {digits} digits (at most "
                                             f"{MAX_DIGITS})")
        return super().construct_yaml_int(node)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
# dates and times stay text: no scenario field takes a date object
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _Loader.construct_yaml_str)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _count(value: Any, budget: list[int], where: str, depth: int = 0) -> None:
    """Count the values of ``value`` as if aliases were copies, stopping at the budget (and
    at ``MAX_DEPTH``, for JSON, which is not composed by the YAML loader)."""
    if depth > MAX_DEPTH:
        raise DocumentError(where, f"nested deeper than {MAX_DEPTH} levels")
    budget[0] -= 1
    if budget[0] < 0:
        raise DocumentError(where, f"more than {MAX_VALUES} values once its YAML aliases are "
                                   "expanded")
    if isinstance(value, dict):
        for k, v in value.items():
            _count(k, budget, where, depth + 1)
            _count(v, budget, where, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _count(v, budget, where, depth + 1)


def _json_pairs(where: str):
    def hook(pairs: list) -> dict:
        out: dict = {}
        for key, value in pairs:
            if key in out:
                raise DocumentError(where, f"key {_short(key)} is given twice in one table")
            out[key] = value
        return out
    return hook


def load_text(text: str, where: str = "scenario", *, json_text: bool = False) -> Any:
    """The document ``text`` holds (YAML, or JSON when ``json_text``), within the limits.
    Malformed text raises ``DocumentError`` naming ``where`` (and the line, where known)."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise DocumentError(where, f"is larger than {MAX_BYTES:,} bytes; a scenario is a few "
                                   "hundred")
    try:
        if json_text:
            doc = json.loads(text, object_pairs_hook=_json_pairs(where))
        else:
            loader = _Loader(text, where)
            try:
                doc = loader.get_single_data()
            finally:
                loader.dispose()
    except DocumentError:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise DocumentError(where, f"is not valid YAML{at}", syntax=True) from None
    except RecursionError:
        raise DocumentError(where, f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:      # JSON syntax, or a number Python will not convert
        line = getattr(exc, "lineno", None)
        at = f" at line {line}" if line else ""
        raise DocumentError(where, f"is not valid JSON/YAML{at}", syntax=True) from None
    _count(doc, [MAX_VALUES], where)
    return doc


def read_text_file(path: str | Path, what: str = "scenario") -> str:
    """The UTF-8 text of a regular file no larger than ``MAX_BYTES``: a FIFO, a device
    (``/dev/zero``) or a directory is refused before it is opened for reading; ``what`` names
    the kind of file in the one-line refusal."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as exc:
        raise ScenarioError([Problem(what, str(p), f"cannot read file: {exc.strerror}")])
    except ValueError:            # a NUL byte in the name
        raise ScenarioError([Problem(what, str(p), "is not a file name")]) from None
    if not stat.S_ISREG(st.st_mode):
        raise ScenarioError([Problem(what, str(p), "is not a regular file")])
    if st.st_size > MAX_BYTES:
        raise ScenarioError([Problem(what, str(p), f"is larger than {MAX_BYTES:,} bytes")])
    try:
        with open(p, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ScenarioError([Problem(what, str(p), f"cannot read file: {exc.strerror}")])
    if len(data) > MAX_BYTES:
        raise ScenarioError([Problem(what, str(p), f"is larger than {MAX_BYTES:,} bytes")])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError([Problem(what, str(p), "is not UTF-8 text")]) from None

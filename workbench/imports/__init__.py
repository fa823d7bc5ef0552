"""``workbench import``: the configs people already have, read into one scenario.

Each format has a reader module (``FORMATS``, imported on first use) with ``looks_like`` and
``read`` (workbench/imports/types.py). :func:`import_configs` reads every file through the
scenario's limit-checked reader, finds each one's format (or takes the one named), merges the
readings (workbench/imports/merge.py: conflicts between files are problems naming both files
and the key; what no file says comes from the library's or the workbench's defaults, each
listed with its reason) and validates the result with the scenario parser, so its problems read
like any scenario's. :func:`import_uploads` does the same for a page's uploaded bytes.
"""
from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Iterable, Union

from workbench.errors import Problem, ScenarioError
from workbench.imports.merge import Imported, complete, merge
from workbench.imports.types import Reading

# format name -> reader module, in the order detection asks them (the most specific first:
# a TrainingArguments file has the broadest keys). torchtitan, megatron, launch and torchtune
# are another helper's readers.
FORMATS: dict[str, str] = {
    "accelerate": "workbench.imports.accelerate",
    "deepspeed": "workbench.imports.deepspeed",
    "hf_model": "workbench.imports.hf_model",
    "torchtitan": "workbench.imports.torchtitan",
    "megatron": "workbench.imports.megatron",
    "launch": "workbench.imports.launch",
    "torchtune": "workbench.imports.torchtune",
    "training_args": "workbench.imports.training_args",
}

Source = Union[str, Path, tuple[str, str]]


def reader(fmt: str) -> ModuleType | None:
    """The reader module of ``fmt``, or None when this install has none."""
    try:
        return importlib.import_module(FORMATS[fmt])
    except ModuleNotFoundError as exc:
        if exc.name == FORMATS[fmt]:
            return None
        raise


def detect(name: str, text: str) -> str | None:
    """The first format whose reader says the text is its own."""
    for fmt in FORMATS:
        mod = reader(fmt)
        if mod is not None and mod.looks_like(name, text):
            return fmt
    return None


def _text(item: Source) -> tuple[str, str | None]:
    """(name, text) of a source; text None for a Hub model id (not a file)."""
    from workbench.imports.hf_model import is_model_id
    from workbench.documents.text import read_text_file

    if isinstance(item, tuple):
        return item
    p = Path(item)
    try:
        exists = p.exists()
    except (OSError, ValueError):    # a name too long, a NUL byte: the file reader says so
        exists = True
    if not exists and is_model_id(str(item)):
        return str(item), None
    return str(item), read_text_file(p, what="import")


def read_one(name: str, text: str | None, fmt: str | None = None) -> Reading:
    """One file's reading (``fmt``: the format named on the command line, else detected)."""
    if text is None:
        from workbench.imports.hf_model import read_id

        return read_id(name)
    if fmt is None:
        fmt = detect(name, text)
        if fmt is None:
            raise ScenarioError([Problem(name, None, "is not a config workbench import reads ("
                                         + ", ".join(FORMATS) + "); name its format with "
                                         "--format")])
    if fmt not in FORMATS:
        raise ScenarioError([Problem("--format", fmt, "expected one of " + ", ".join(FORMATS))])
    mod = reader(fmt)
    if mod is None:
        raise ScenarioError([Problem("--format", fmt, "this install has no reader for it")])
    return mod.read(name, text)


def import_configs(sources: Iterable[Source], fmt: str | None = None,
                   hardware: dict | None = None) -> Imported:
    """The scenario the files make. ``sources``: paths (or Hub model ids), or (name, text)
    pairs; ``hardware``: a hardware section whose fields the files do not state are kept (the
    page's box), before the workbench's defaults. Unreadable files raise ScenarioError; the
    readers' and the merge's problems, then the validator's, are in ``Imported.problems`` (the
    document is still returned, so a page can show it with its problems)."""
    sources = list(sources)
    if not sources:
        raise ScenarioError([Problem("import", None, "needs at least one file")])
    readings, problems = [], []
    for item in sources:
        try:
            name, text = _text(item)
            readings.append(read_one(name, text, fmt))
        except ScenarioError as exc:     # DocumentError too: one line naming the file
            problems += exc.problems
    out = complete(merge(readings), hardware)
    out.problems = problems + out.problems
    if not out.problems:
        out.problems = validate(out.scenario)
    return out


def validate(doc: dict) -> list[Problem]:
    """The scenario parser's problems with ``doc`` (none: it is a valid scenario), and any
    integer past the digits a scenario file may hold (a product such as max_steps x
    global_batch x seq_len can be): what ``import`` prints must read back as a scenario."""
    from workbench.documents.text import MAX_DIGITS
    from workbench.imports.common import long_integers
    from workbench.scenario import parse_scenario

    try:
        parse_scenario(doc)
    except ScenarioError as exc:
        return list(exc.problems)
    return [Problem(path, None, f"comes to a number of more than {MAX_DIGITS} digits, which "
                    "no scenario file holds") for path in long_integers(doc)]


def import_uploads(files: Iterable[tuple[str, bytes]], fmt: str | None = None,
                   hardware: dict | None = None) -> Imported:
    """:func:`import_configs` for uploaded files (the dashboard's "Open scenario"): each a
    (file name, bytes) pair, held to the scenario's size limit and UTF-8 like a file;
    ``hardware``: the page's, kept where no file states it."""
    from workbench.documents.text import MAX_BYTES

    texts, problems = [], []
    for name, data in files:
        if len(data) > MAX_BYTES:
            problems.append(Problem(name, None, f"is larger than {MAX_BYTES:,} bytes"))
            continue
        try:
            texts.append((name, bytes(data).decode("utf-8")))
        except UnicodeDecodeError:
            problems.append(Problem(name, None, "is not UTF-8 text"))
    if problems:
        raise ScenarioError(problems)
    return import_configs(texts, fmt, hardware)


__all__ = ["FORMATS", "Imported", "Reading", "detect", "import_configs", "import_uploads",
           "read_one", "reader", "validate"]

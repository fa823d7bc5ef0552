"""Saved scenarios by name: a small store of YAML files in a folder the server's user owns.

Names are validated (letters, digits, space, ``-``, ``_``, ``.``; 1-64 characters; no leading
dot, no path), files are written whole (a temporary file renamed over) and read back with the
document limits of ``documents.text.load_text``. The folder is ``WORKBENCH_SCENARIOS_DIR``
when set, else ``$XDG_DATA_HOME/workbench/scenarios`` (``~/.local/share/...``); it is created
with mode 0700 and refused when it is a symlink, not owned by this user, or open to others
(``workbench.private_folder``)."""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from workbench.errors import Problem, ScenarioError
from workbench.private_folder import PrivateFolderError, private_directory

DIR_ENV = "WORKBENCH_SCENARIOS_DIR"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.\-]{0,63}")
MAX_FILES = 500
SUFFIX = ".yaml"


def default_directory() -> Path:
    env = os.environ.get(DIR_ENV)
    if env:
        return Path(env)
    data = os.environ.get("XDG_DATA_HOME")
    base = Path(data) if data and os.path.isabs(data) else Path.home() / ".local" / "share"
    return base / "workbench" / "scenarios"


def check_name(name: object) -> str:
    """``name`` stripped if it is a valid scenario name, else ScenarioError in words."""
    text = name.strip() if isinstance(name, str) else ""
    if not NAME.fullmatch(text) or ".." in text:
        raise ScenarioError([Problem(
            "name", None, "a scenario name is 1 to 64 letters, digits, spaces, '-', '_' or "
            "'.', starting with a letter or digit")])
    return text


class ScenarioStore:
    """``save(name, text)``, ``load(name)`` (the document), ``names()``, ``delete(name)``."""

    def __init__(self, directory: Path | None = None) -> None:
        self._given = directory

    @property
    def directory(self) -> Path:
        path = self._given or default_directory()
        try:
            return private_directory(path, "scenario folder", DIR_ENV)
        except PrivateFolderError as exc:
            raise ScenarioError([Problem("store", None, str(exc))]) from None

    def _path(self, name: str) -> Path:
        return self.directory / (check_name(name) + SUFFIX)

    def names(self) -> list[str]:
        """The saved names, sorted (case-insensitively); none while the folder does not exist
        (it is created by the first ``save``)."""
        if not os.path.lexists(self._given or default_directory()):
            return []
        out = [p.name[:-len(SUFFIX)] for p in self.directory.iterdir()
               if p.name.endswith(SUFFIX) and p.is_file() and not p.is_symlink()
               and NAME.fullmatch(p.name[:-len(SUFFIX)])]
        return sorted(out, key=str.lower)

    def save(self, name: str, text: str) -> str:
        """Write ``text`` (a scenario's YAML) under ``name``; returns the checked name."""
        from workbench.documents.text import load_text

        path = self._path(name)
        load_text(text, "The scenario")          # only a readable document is stored
        if not path.exists() and len(self.names()) >= MAX_FILES:
            raise ScenarioError([Problem("store", None, f"the store holds {MAX_FILES} "
                                         "scenarios already; delete some first")])
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".saving-", suffix=SUFFIX)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path.name[:-len(SUFFIX)]

    def load(self, name: str):
        """The document saved under ``name`` (ScenarioError if there is none)."""
        from workbench.documents.text import load_text

        check_name(name)
        if not os.path.lexists(self._given or default_directory()):
            raise ScenarioError([Problem("name", None, f"no scenario is saved as “{name}”")])
        path = self._path(name)
        if not path.is_file() or path.is_symlink():
            raise ScenarioError([Problem("name", None, f"no scenario is saved as “{name}”")])
        return load_text(path.read_text(encoding="utf-8"), f"The saved scenario {name}")

    def delete(self, name: str) -> None:
        self._path(name).unlink(missing_ok=True)

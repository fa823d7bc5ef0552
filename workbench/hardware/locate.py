"""Where ``hardware.gpu: "calibration:NAME"`` finds its profile: only in the calibration folders.

A scenario comes from a file, a ``--set`` value, the dashboard's YAML tab or an upload, so the
text after ``calibration:`` is not trusted to name any path on the machine (``/dev/zero``, a
FIFO, another user's file; and whether an error says "missing" or "malformed" would tell one
file from another). The folders are ``WORKBENCH_CALIBRATIONS`` (``os.pathsep``-separated), else
the project's ``calibrations/`` and the working directory. A name (``nvidia-h200-2026-12-04``,
with or without ``.json``) is looked up in them in that order; a path is accepted only where it
lies inside one of them once links are resolved, and the dashboard takes names only.
"""
from __future__ import annotations

import os
from pathlib import Path

from workbench.errors import shown

ENV = "WORKBENCH_CALIBRATIONS"
PROJECT_FOLDER = Path(__file__).resolve().parents[2] / "calibrations"
SUFFIX = ".json"


class NotAllowed(ValueError):
    """The profile named cannot be used; the message says why and what can."""


def folders() -> tuple[Path, ...]:
    """The calibration folders, in lookup order (resolved; missing ones kept: a name there is
    simply not found)."""
    env = os.environ.get(ENV, "").strip()
    given = [Path(p) for p in env.split(os.pathsep) if p.strip()] if env else \
        [PROJECT_FOLDER, Path.cwd()]
    return tuple(dict.fromkeys(p.expanduser().resolve() for p in given))


def available() -> dict[str, Path]:
    """Profiles by name (file name without ``.json``): regular ``*.json`` files directly in a
    calibration folder; the first folder wins a name found twice."""
    found: dict[str, Path] = {}
    for folder in folders():
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue
        for p in entries:
            if p.suffix == SUFFIX and p.stem not in found and p.is_file():
                found[p.stem] = p
    return found


def inside_folders(path: Path) -> bool:
    """Whether ``path`` (links resolved, relative to the working directory) lies in one of the
    calibration folders."""
    try:
        real = (Path.cwd() / Path(path).expanduser()).resolve()
    except (OSError, ValueError, RuntimeError):   # a NUL byte, a name too long, a link loop
        return False
    return any(real.is_relative_to(f) for f in folders())


def _is_name(spec: str) -> bool:
    return bool(spec) and "/" not in spec and os.sep not in spec and spec not in (".", "..")


def locate(spec: str, *, names_only: bool = False) -> Path:
    """The profile file that ``spec`` (the text after ``calibration:``) names. Raises
    ``NotAllowed`` saying which names exist (for a name) or which folders are allowed (for a
    path outside them, before anything about that path is looked at)."""
    spec = spec.strip()
    where = ", ".join(str(f) for f in folders())
    if _is_name(spec):
        stem = spec[:-len(SUFFIX)] if spec.endswith(SUFFIX) else spec
        known = available()
        if stem in known:
            return known[stem]
        names = ", ".join(sorted(known)) or "none yet"
        raise NotAllowed(f"no calibration named {shown(stem)} in {where}; available: {names} "
                         "(write one with `workbench calibrate --out calibrations/NAME.json`)")
    if names_only:
        raise NotAllowed("the dashboard takes a calibration by its name, not a path: one of "
                         + (", ".join(sorted(available())) or "none yet (run `workbench "
                                                              "calibrate`)"))
    if not inside_folders(Path(spec)):
        raise NotAllowed(f"{shown(spec)} is outside the calibration folders ({where}); move it "
                         f"there or add its folder to {ENV}")
    real = (Path.cwd() / Path(spec).expanduser()).resolve()   # inside_folders resolved it
    if not real.exists():       # a FIFO or device is refused by the reader, by name
        raise NotAllowed(f"no calibration file at {shown(spec)}; write one with `workbench "
                         "calibrate --out FILE`")
    return real


def reference(path: Path) -> str:
    """How a scenario names the profile written to ``path``: its name when the lookup finds it
    there, else the path itself (then outside the folders: say how to allow it)."""
    real = path.resolve()
    if real.parent in folders() and real.suffix == SUFFIX and available().get(real.stem) == real:
        return f"calibration:{real.stem}"
    return f"calibration:{path}"

"""A folder only this user can use: the trial queue's lock files (``trial.slots``) and the saved
scenarios (``scenario.store``) live in one. A folder another local user could create, replace or
write first would let them hold every trial slot or plant a scenario; so the folder is created
with mode 0700 and refused when it is a symlink, not a directory, owned by someone else, or open
to group or others.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path


class PrivateFolderError(RuntimeError):
    """The folder is not private to this user, or cannot be made; the message names it and
    what is wrong."""


def unsafe(st: os.stat_result) -> str | None:
    """What makes a directory with this ``lstat`` unsafe to keep private files in, or None."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symlink"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != os.getuid():
        return f"is owned by uid {st.st_uid}, not you (uid {os.getuid()})"
    if st.st_mode & 0o077:
        return (f"has mode {stat.S_IMODE(st.st_mode):04o}; it must not be readable or writable "
                "by others (mode 0700)")
    return None


def private_directory(path: Path, what: str, env: str) -> Path:
    """``path``, created with mode 0700 if missing, once it is known to be a real directory
    (not a symlink) owned by this user with no access for group or others; else
    PrivateFolderError naming ``what`` (the folder's job, "trial queue directory"), the path,
    what is wrong and the environment variable ``env`` that chooses another. Nobody else can
    then replace it or plant files in it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise PrivateFolderError(f"cannot create the {what} {path}: {exc.strerror}") from None
    problem = unsafe(os.lstat(path))     # lstat: a symlink is judged, not its target
    if problem:
        raise PrivateFolderError(f"{what} {path} {problem}; remove it, or set {env} to a "
                                 "private directory")
    return path

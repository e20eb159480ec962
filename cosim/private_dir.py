"""Folders cosim loads code from: private to the user who runs cosim.

The compile cache (numba's cache and the generated entry modules next to it, its
fallback in the system temp folder) and the cached FMU binary hold code that a
later run imports or bundles.  Whoever can write such a folder can run code as the
user, so :func:`private_dir` creates each missing folder with mode 0700 and refuses
an existing one that

* is not a directory, or is a symbolic link another user owns,
* is owned by another user (root may own nothing of a user's cache: refused too),
* is writable by group or others,
* or sits below a folder that another user (not root) owns or that group or others
  may write without the sticky bit (they could rename it and put theirs in place).

A refusal is an :class:`UnsafeDirectoryError` naming the folder, what is wrong and
the fix: set ``COSIM_CACHE_DIR`` to a folder of one's own (or remove that one).
Nothing is changed on disk when a folder is refused (no chmod of a folder someone
else could have prepared).
"""
from __future__ import annotations

import os
import stat
import tempfile

from .errors import CosimError

FIX = "set COSIM_CACHE_DIR to a folder of your own (created with mode 0700 if missing)"


class UnsafeDirectoryError(CosimError, PermissionError):
    """A folder cosim would load code from could hold another user's code."""


def _uid():
    return os.geteuid() if hasattr(os, "geteuid") else None


def _refuse(path, what, problem):
    raise UnsafeDirectoryError(f"{what} {path!r} {problem}: cosim loads code from it and refuses "
                               f"it; {FIX}")


def _check_ancestors(path, what):
    """Every existing folder above ``path``: owned by this user or root, and not writable
    by group/others unless sticky (like /tmp)."""
    uid = _uid()
    parent = os.path.dirname(path)
    while True:
        try:
            st = os.stat(parent)
        except OSError:
            st = None
        if st is not None:
            if st.st_uid not in (uid, 0):
                _refuse(path, what, f"lies in {parent!r}, owned by uid {st.st_uid} (not you, uid {uid}), "
                                    f"who could replace it")
            if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
                _refuse(path, what, f"lies in {parent!r}, writable by "
                                    f"{'group and others' if st.st_mode & 0o002 else 'its group'} "
                                    f"(mode {stat.S_IMODE(st.st_mode):04o}, no sticky bit), who could "
                                    f"replace it")
        up = os.path.dirname(parent)
        if up == parent:
            return
        parent = up


def check_private(path, what="folder"):
    """``path`` (absolute) if it is a directory fit to load code from (see the module
    docstring), else :class:`UnsafeDirectoryError`.  ``OSError`` if it cannot be read."""
    path = os.path.abspath(path)
    uid = _uid()
    if uid is None:  # no POSIX owners (Windows): nothing to check
        return path
    lst = os.lstat(path)
    if stat.S_ISLNK(lst.st_mode):
        if lst.st_uid not in (uid, 0):
            _refuse(path, what, f"is a symbolic link made by uid {lst.st_uid} (not you, uid {uid})")
        real = os.path.realpath(path)
        check_private(real, what)
        _check_ancestors(path, what)
        return path
    if not stat.S_ISDIR(lst.st_mode):
        _refuse(path, what, "exists and is not a directory")
    if lst.st_uid != uid:
        _refuse(path, what, f"is owned by uid {lst.st_uid}, not by you (uid {uid})")
    if lst.st_mode & 0o022:
        who = "group and others" if lst.st_mode & 0o002 else "its group"
        _refuse(path, what, f"is writable by {who} (mode {stat.S_IMODE(lst.st_mode):04o})")
    _check_ancestors(path, what)
    return path


def private_dir(path, what="folder"):
    """``path`` created (mode 0700, missing parents too) or checked (:func:`check_private`);
    returns the absolute path.  ``OSError`` when it cannot be created (read-only, no
    permission): the caller may try another place."""
    path = os.path.abspath(path)
    missing = []
    probe = path
    while not os.path.lexists(probe):
        missing.append(probe)
        up = os.path.dirname(probe)
        if up == probe:
            break
        probe = up
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:  # made by a concurrent cosim process: checked below
            pass
    return check_private(path, what)


def cache_candidates():
    """Where the compile cache may live, in order: ``$COSIM_CACHE_DIR``,
    ``$XDG_CACHE_HOME/cosim/numba`` (default ``~/.cache/cosim/numba``), and a per-user
    folder in the system temp folder (a read-only home, a service user)."""
    candidates = []
    if os.environ.get("COSIM_CACHE_DIR"):
        candidates.append(os.environ["COSIM_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    candidates.append(os.path.join(base, "cosim", "numba"))
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    candidates.append(os.path.join(tempfile.gettempdir(), f"cosim-numba-{uid}"))
    return candidates


CACHE_SUBFOLDERS = ("entries", os.path.join("entries", "__pycache__"), "kernel_checks")


def compile_cache_dir():
    """The first candidate that can be created or used (:func:`private_dir`), with its
    subfolders that hold code (``entries`` and numba's ``__pycache__`` there,
    ``kernel_checks``) checked too; None when none can be created.  A folder that
    exists but is unsafe is an :class:`UnsafeDirectoryError`, never skipped: a planted
    folder is reported, not worked around silently."""
    for path in cache_candidates():
        try:
            path = private_dir(path, "compile cache folder")
        except UnsafeDirectoryError:
            raise
        except OSError:
            continue
        if not os.access(path, os.W_OK | os.X_OK):
            continue
        for sub in CACHE_SUBFOLDERS:
            full = os.path.join(path, sub)
            if os.path.lexists(full):
                check_private(full, "compile cache folder")
        return path
    return None


__all__ = ["FIX", "UnsafeDirectoryError", "cache_candidates", "check_private", "compile_cache_dir",
           "private_dir"]

"""Saved simulation states in one directory fixed at start-up.

The operator names the directory (read-only parameter ``state_directory``);
peers only choose a file *name* inside it (parameter ``state_name``).  The
directory is opened once (a file descriptor), so renaming or replacing the
path later changes nothing, and every access is relative to it:

* names: 1..100 characters of ``[A-Za-z0-9._-]``, not starting with a dot
  (no path separators, no ``..``, no hidden or temporary files);
* load: ``O_NOFOLLOW`` (a symbolic link is refused, not followed),
  ``O_NONBLOCK`` (a FIFO cannot block the simulation thread), then ``fstat``:
  only a regular file whose size is within ``state_max_bytes`` is read, and
  the read is bounded by that size;
* save: written to a new temporary file (``O_CREAT | O_EXCL | O_NOFOLLOW``)
  and renamed over the name, which replaces a link instead of writing through
  it; an existing entry that is not a regular file or link is refused;
* quota (fixed at start-up): a save that would leave more than ``max_files``
  state files (entries with an allowed name) or more than ``max_total_bytes``
  bytes of them in the directory is refused before anything is written.

Errors name the state file (as given) and the reason; they never contain
another path, and a refused name says nothing about the file system.
"""
from __future__ import annotations

import errno
import itertools
import os
import re
import stat

NAME_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")
_tmp_counter = itertools.count()


class StateFileError(Exception):
    """A state file request refused (message safe to send to a peer)."""


def _shown(value, limit=80):
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value)} characters)"
    return repr(value)[:limit]


def check_name(name):
    """The name if it is a plain file name allowed in the state directory."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name) or ".." in name:
        raise StateFileError(
            f"state name {_shown(name)} is not allowed: use 1-100 characters A-Z a-z 0-9 . _ -, "
            f"not starting with '.', without '..' or path separators")
    return name


class StateDirectory:
    """Save/load state blobs by name in the directory given at start-up."""

    def __init__(self, directory, max_bytes, max_files=64, max_total_bytes=256 << 20):
        self.max_bytes = int(max_bytes)
        self.max_files, self.max_total_bytes = int(max_files), int(max_total_bytes)
        self._fd = None
        if directory:
            try:
                self._fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError as exc:
                raise ValueError(f"parameter 'state_directory': cannot open {directory!r} as a "
                                 f"directory: {exc.strerror}") from None

    @property
    def enabled(self):
        return self._fd is not None

    def close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _require(self):
        if self._fd is None:
            raise StateFileError("saving and loading states is off: the node was started "
                                 "without a state_directory")

    def load(self, name):
        self._require()
        check_name(name)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=self._fd)
        except OSError as exc:
            raise StateFileError(f"cannot load state {name!r}: {_reason(exc)}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise StateFileError(f"cannot load state {name!r}: not a regular file")
            if st.st_size > self.max_bytes:
                raise StateFileError(f"cannot load state {name!r}: {st.st_size} bytes exceed "
                                     f"state_max_bytes = {self.max_bytes}")
            chunks, total = [], 0
            while True:  # bounded even if the file grows after fstat
                chunk = os.read(fd, min(1 << 20, self.max_bytes + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
                if total > self.max_bytes:
                    raise StateFileError(f"cannot load state {name!r}: more than "
                                         f"state_max_bytes = {self.max_bytes} bytes")
            return b"".join(chunks)
        except OSError as exc:
            raise StateFileError(f"cannot load state {name!r}: {_reason(exc)}") from None
        finally:
            os.close(fd)

    def save(self, name, blob):
        self._require()
        check_name(name)
        if len(blob) > self.max_bytes:
            raise StateFileError(f"cannot save state {name!r}: {len(blob)} bytes exceed "
                                 f"state_max_bytes = {self.max_bytes}")
        try:
            st = os.stat(name, dir_fd=self._fd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise StateFileError(f"cannot save state {name!r}: {_reason(exc)}") from None
        if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            raise StateFileError(f"cannot save state {name!r}: exists and is not a regular file")
        self._check_quota(name, len(blob), st)
        tmp = f".{name}.{os.getpid()}.{next(_tmp_counter)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600, dir_fd=self._fd)
            try:
                view = memoryview(blob)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=self._fd, dst_dir_fd=self._fd)
        except OSError as exc:
            try:
                os.unlink(tmp, dir_fd=self._fd)
            except OSError:
                pass
            raise StateFileError(f"cannot save state {name!r}: {_reason(exc)}") from None
        return len(blob)


    def usage(self):
        """(number of state files, their bytes) in the directory: the entries a
        ``save`` could have made (names that pass :func:`check_name`, not followed)."""
        count = total = 0
        with os.scandir(self._fd) as entries:
            for entry in entries:
                if NAME_RE.fullmatch(entry.name) and ".." not in entry.name:
                    count += 1
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.S_ISREG(st.st_mode):
                        total += st.st_size
        return count, total

    def _check_quota(self, name, size, existing):
        """StateFileError when saving ``size`` bytes as ``name`` (``existing``: the lstat
        of that name or None) would leave more than ``max_files`` state files or
        ``max_total_bytes`` bytes of them in the directory."""
        try:
            count, total = self.usage()
        except OSError as exc:
            raise StateFileError(f"cannot save state {name!r}: {_reason(exc)}") from None
        if existing is None and count + 1 > self.max_files:
            raise StateFileError(f"cannot save state {name!r}: the state directory holds {count} "
                                 f"states (state_max_files = {self.max_files}); save over an "
                                 f"existing name or have one removed")
        if existing is not None and stat.S_ISREG(existing.st_mode):
            total -= existing.st_size  # replaced
        if total + size > self.max_total_bytes:
            raise StateFileError(f"cannot save state {name!r}: {size} bytes with the {total} "
                                 f"bytes of the other states exceed state_max_total_bytes = "
                                 f"{self.max_total_bytes}")


def _reason(exc):
    """An OS error as a reason without any path (strerror only)."""
    if exc.errno == errno.ELOOP:
        return "is a symbolic link (links are not followed)"
    if exc.errno == errno.ENOENT:
        return "no such state in the state directory"
    return exc.strerror or type(exc).__name__

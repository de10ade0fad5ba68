"""Writing a file so that a reader sees the old file or the whole new one.

Why not ``<path>.tmp-<pid>``: a predictable name in a shared directory can be
planted beforehand (a symlink there would make the write land on the link's
target). The temporary file is created by ``tempfile.mkstemp`` -- exclusively
(``O_CREAT | O_EXCL``, which never follows a link) under a random name in the
target's own directory, so the final ``os.replace`` is a rename within one file
system. ``os.replace`` swaps the directory entry: a symlink at ``path`` is
replaced, its target is never written.
"""

from __future__ import annotations

import os
import tempfile
from typing import BinaryIO, Callable

__all__ = ["write_atomically"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomically(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> None:
    """Calls ``write(f)`` on a fresh exclusive temporary file next to ``path``, then
    renames it over ``path``; on any failure the temporary file is removed and
    ``path`` is left as it was."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a plain file's mode instead
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except FileNotFoundError:
            pass
        raise

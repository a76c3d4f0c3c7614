"""The disk under MODEL_DIR: whether an error says it is full, how much room it has, how much a
directory holds. A training checks the room before it starts; what a full disk does not take is
kept in memory (:mod:`backend.store.unwritten`)."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

# The errors of a full disk or an exhausted quota: what is not written is kept in memory.
NO_SPACE = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})


def no_space(err: BaseException) -> bool:
    """Whether ``err`` says the disk (or the quota) is full."""
    return isinstance(err, OSError) and err.errno in NO_SPACE


def free_mb(path: Path) -> float:
    """Free megabytes for this user on the filesystem of ``path`` (its nearest existing parent)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize / 2**20


def directory_mb(directory: Path) -> float:
    """Megabytes the files under ``directory`` hold (0 when it does not exist)."""
    total = 0
    for f in directory.rglob("*"):
        with contextlib.suppress(OSError):
            if f.is_file():
                total += f.stat().st_size
    return total / 2**20

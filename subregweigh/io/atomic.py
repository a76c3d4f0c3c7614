"""Atomic writes: a file is replaced only once its new content is complete and on disk.

Every writer of the package (outputs of the command line, and the ML backend's store) goes
through :func:`atomic_open`, so a crash, a full disk or an exception half-way never leaves a
half-written file where a reader would take it, and never damages the file that was there.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from subregweigh.example import DataError

PathLike = str | os.PathLike


def _fsync_dir(directory: Path) -> None:
    # Makes the rename durable; not possible on every platform, hence best effort.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def check_writable(path: PathLike, suffixes: Sequence[str] | None = None) -> None:
    """Fail early, naming ``path``, if it cannot be written: no such directory, a directory
    itself, or (with ``suffixes``) an extension we do not write. Call before long work."""
    path = Path(path)
    if suffixes is not None and path.suffix.lower() not in suffixes:
        raise DataError(
            f"{path}: unknown output extension {path.suffix!r}; use {', '.join(suffixes)}"
        )
    if path.is_dir():
        raise DataError(f"{path}: is a directory, not a file")
    if not path.parent.is_dir():
        raise DataError(f"{path}: the directory {path.parent} does not exist")


@contextmanager
def atomic_open(path: PathLike, mode: str = "w", *, encoding: str = "utf-8") -> Iterator[IO[Any]]:
    """Open ``path`` for writing so that it is replaced only if the block succeeds.

    Writes go to a temporary file in the same directory, which on success is flushed,
    fsynced and moved over ``path`` with :func:`os.replace`; then the directory is fsynced, so
    the rename survives a power cut. If the block raises, the temporary file is removed and an
    existing file at ``path`` is left untouched.

    Parameters
    ----------
    path : str or path-like
    mode : {"w", "wt", "wb"}, default "w"
        Text mode writes ``encoding`` with no newline translation (``"\\n"`` stays ``"\\n"``).
    encoding : str, default "utf-8"
    """
    if mode not in ("w", "wt", "wb"):
        raise ValueError(f"mode must be 'w', 'wt' or 'wb', got {mode!r}")
    path = Path(path)
    check_writable(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if mode == "wb":
            f = os.fdopen(fd, "wb")
        else:
            f = os.fdopen(fd, "w", encoding=encoding, newline="")
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        # mkstemp creates 0600; give the file the permissions a plain open() would have.
        try:
            st_mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            st_mode = 0o666 & ~umask
        os.chmod(tmp, st_mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)


def atomic_write_text(path: PathLike, text: str, *, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_open`)."""
    with atomic_open(path, "w", encoding=encoding) as f:
        f.write(text)


def atomic_write_json(path: PathLike, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically (see :func:`atomic_open`).

    ASCII-escaped (``json.dumps``' default), so any ``str`` is written, lone surrogates included.
    """
    atomic_write_text(path, json.dumps(data))


@contextmanager
def atomic_directory(path: PathLike) -> Iterator[Path]:
    """Build a directory that replaces ``path`` only if the block succeeds.

    The block fills the staging directory it is given, made beside ``path``; on success the
    staging directory is swapped in (the old ``path``, if any, moved aside first and then
    removed), so a crash never leaves a half-written directory where a complete one was. If the
    block raises, the staging directory is removed and ``path`` is left untouched.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        yield staging
        previous = target.with_name(f".{target.name}.old")
        if target.exists():
            shutil.rmtree(previous, ignore_errors=True)
            os.replace(target, previous)
        os.replace(staging, target)
        shutil.rmtree(previous, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise

"""A project's version directories (``MODEL_DIR/<project>/versions/``) as files: a new version's
name, the staging directory it is built in, owned by its process through a ``flock``, the
manifest its COMPLETE marker records, a removal that never shows a version half-removed, and the
leftovers of killed processes. :class:`backend.store.store.ProjectStore` decides which versions
these are."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

STAGING, TRASH = ".staging-", ".trash-"


def new_version_name() -> str:
    """Sortable to the millisecond and unique: ``srw-20261121-164301123-1a2b3c``."""
    now = time.time()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"srw-{stamp}{int(now % 1 * 1000):03d}-{uuid.uuid4().hex[:6]}"


def manifest(directory: Path) -> dict[str, int]:
    """The size of every file under ``directory`` but scores.json, by its relative path."""
    # scores.json grows as /predict stores new tasks (atomically); it is checked when parsed.
    return {
        str(f.relative_to(directory)): f.stat().st_size
        for f in sorted(directory.rglob("*"))
        if f.is_file() and f.name != "scores.json"
    }


def make_staging(versions: Path) -> tuple[Path, int]:
    """A new empty staging directory in ``versions`` and the descriptor of its ``<dir>.lock``,
    on which this process holds an exclusive ``flock`` (see
    :meth:`backend.store.store.ProjectStore.staging_dir`)."""
    versions.mkdir(parents=True, exist_ok=True)
    # The lock first, then the directory named after it: no moment where the directory
    # exists unowned.
    fd, lock_name = tempfile.mkstemp(prefix=STAGING, suffix=".lock", dir=versions)
    fcntl.flock(fd, fcntl.LOCK_EX)
    staging = Path(lock_name).with_suffix("")
    staging.mkdir()
    return staging, fd


def trash(versions: Path, directory: Path) -> None:
    """Remove ``directory`` so that no moment shows a version half-removed: it is renamed
    out of the listing first (one atomic step), then deleted."""
    trash = versions / f"{TRASH}{directory.name}-{uuid.uuid4().hex[:6]}"
    try:
        os.replace(directory, trash)
    except FileNotFoundError:
        return  # another process pruned it
    shutil.rmtree(trash, ignore_errors=True)


def leftovers(versions: Path) -> list[str]:
    """Remove from ``versions`` (which exists) what killed processes left: staging directories
    no live process owns (and their lock files, after a minute), versions being removed
    (``.trash-*``), and version directories without their ``COMPLETE`` marker. Returns the
    names removed."""
    removed = []
    for entry in sorted(versions.iterdir()):
        name = entry.name
        if name.startswith(TRASH) and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        elif name.startswith(STAGING) and entry.is_dir():
            if not _remove_unowned(entry):
                continue
        elif name.startswith("srw-") and entry.is_dir() and not (entry / "COMPLETE").exists():
            trash(versions, entry)
        elif name.startswith(STAGING) and name.endswith(".lock"):
            if entry.with_suffix("").exists() or time.time() - _mtime(entry) < 60:
                continue
            entry.unlink(missing_ok=True)
        else:
            continue
        removed.append(name)
    return removed


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return time.time()


def _remove_unowned(staging: Path) -> bool:
    lock = staging.with_name(staging.name + ".lock")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a live training builds it
        shutil.rmtree(staging, ignore_errors=True)
        lock.unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)

"""Per-project state on disk: model versions, stored scores, training status.

    MODEL_DIR/<project>/
        CURRENT                     name of the version being served
        status.json                 state, last error, event counter, tasks changed since the
                                    last scores (see ProjectStore.status, note_event)
        versions/<version>/
            COMPLETE                written last: the size of every file; without it, never served
            BROKEN                  why a complete version failed to load; never served again
            scout/                  the saved scout
            scores.json             task id -> stored prediction (result, score, fingerprint,
                                    and every annotation's scores, for the report)
            meta.json               when it trained, on what, with which settings (the report)

Every file is written with the engine's atomic write (:mod:`subregweigh.io.atomic`: a
temporary name, fsync, rename, fsync of the directory) and every version is built in a staging
directory renamed into place, so a crash or a killed worker never leaves a half-written version
where the server would load it, and every process sharing MODEL_DIR (gunicorn workers, rq
workers) sees the same state. A version damaged afterwards (a
truncated file, a disk error) fails :meth:`ProjectStore.verify` or its load, is marked BROKEN,
and the newest good version serves instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from subregweigh.io.atomic import atomic_write_json, atomic_write_text

logger = logging.getLogger(__name__)

_PROJECT = re.compile(r"[0-9]+")
STAGING, TRASH = ".staging-", ".trash-"
# Project directories are made on the first event of a project; this bounds what any number of
# made-up project ids can make (a real deployment serves far fewer projects).
MAX_PROJECTS = 10_000


class TooManyProjects(RuntimeError):
    """The model directory holds :data:`MAX_PROJECTS` projects: no new one is made."""


KEEP_VERSIONS = 3


def project_id(value) -> str:
    """The project id in what Label Studio sends: ``"12.1700000000"`` (id.created) or
    ``{"id": 12}`` -> ``"12"``, canonical (``"012"`` -> ``"12"``: one project, one name).
    ValueError, naming the value, for anything else."""
    if isinstance(value, dict):
        value = value.get("id")
    text = str(value if value is not None else "").split(".", 1)[0]
    # It names a directory: ASCII digits only ("١".isdigit() is True), and short.
    if not (text.isascii() and text.isdigit() and len(text) <= 20):
        raise ValueError(f"no valid project id in {str(value)[:40]!r}")
    return str(int(text))


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return time.time()


def new_version_name() -> str:
    """Sortable to the millisecond and unique: ``srw-20261121-164301123-1a2b3c``."""
    now = time.time()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"srw-{stamp}{int(now % 1 * 1000):03d}-{uuid.uuid4().hex[:6]}"


class CorruptVersion(RuntimeError):
    """A published version's files are missing, truncated or unreadable."""

    def __init__(self, version: str, problem: str):
        super().__init__(f"version {version}: {problem}")
        self.version = version


def _manifest(directory: Path) -> dict[str, int]:
    # scores.json grows as /predict stores new tasks (atomically); it is checked when parsed.
    return {
        str(f.relative_to(directory)): f.stat().st_size
        for f in sorted(directory.rglob("*"))
        if f.is_file() and f.name != "scores.json"
    }


class ProjectStore:
    """The files of one Label Studio project under ``model_dir``."""

    def __init__(self, model_dir: str | os.PathLike, project: int | str):
        project = str(project)
        if not _PROJECT.fullmatch(project):  # the id becomes a path: digits only
            raise ValueError(f"invalid project id {project!r}")
        project = str(int(project))  # "04" and "4" are one project, one directory
        self.project = project
        self.root = Path(model_dir) / project
        self.versions = self.root / "versions"
        self._staging: dict[Path, int] = {}  # staging directories this object owns -> lock fd

    # -- versions -----------------------------------------------------------------------------
    def is_complete(self, version: str) -> bool:
        """Published and not known to be broken: a version that may be served."""
        directory = self.versions / version
        return (
            bool(version)
            and (directory / "COMPLETE").is_file()
            and not (directory / "BROKEN").exists()
        )

    def verify(self, version: str) -> None:
        """Raise :class:`CorruptVersion` unless every file of ``version`` has its published size."""
        directory = self.versions / version
        try:
            marker = (directory / "COMPLETE").read_text()
        except OSError as err:
            raise CorruptVersion(version, f"unreadable COMPLETE marker ({err})") from None
        try:
            manifest = json.loads(marker)["files"]
        except (ValueError, KeyError, TypeError):
            return  # a marker from before manifests: nothing to compare
        for name, size in manifest.items():
            path = directory / name
            actual = path.stat().st_size if path.is_file() else None
            if actual != size:
                found = "missing" if actual is None else f"{actual} bytes"
                raise CorruptVersion(version, f"{name} is {found}, published with {size} bytes")

    def mark_broken(self, version: str, reason: str) -> None:
        """Never serve ``version`` again (every process sees the marker)."""
        logger.error(
            "project %s: version %s is broken and will not be served: %s",
            self.project,
            version,
            reason,
        )
        directory = self.versions / version
        if directory.is_dir():
            atomic_write_json(directory / "BROKEN", {"reason": reason, "at": time.time()})

    def current_version(self) -> str | None:
        """The version to serve: CURRENT if complete, else the newest complete one."""
        with contextlib.suppress(FileNotFoundError):
            name = (self.root / "CURRENT").read_text().strip()
            if self.is_complete(name):
                return name
        complete = sorted(v.name for v in self.versions.glob("srw-*") if self.is_complete(v.name))
        return complete[-1] if complete else None

    def staging_dir(self) -> Path:
        """An empty directory to build a new version in (same filesystem as the versions),
        owned by this process until :meth:`publish` or :meth:`discard`: it holds an exclusive
        ``flock`` on ``<dir>.lock``, which the kernel lets go when the process dies, so
        :meth:`clean_debris` knows a killed training's directory from a running one's."""
        self.versions.mkdir(parents=True, exist_ok=True)
        # The lock first, then the directory named after it: no moment where the directory
        # exists unowned.
        fd, lock_name = tempfile.mkstemp(prefix=STAGING, suffix=".lock", dir=self.versions)
        fcntl.flock(fd, fcntl.LOCK_EX)
        staging = Path(lock_name).with_suffix("")
        staging.mkdir()
        self._staging[staging] = fd
        return staging

    def _release(self, staging: Path) -> None:
        fd = self._staging.pop(staging, None)
        if fd is not None:
            staging.with_name(staging.name + ".lock").unlink(missing_ok=True)
            os.close(fd)

    def discard(self, staging: Path) -> None:
        """Remove a staging directory that will not be published."""
        shutil.rmtree(staging, ignore_errors=True)
        self._release(staging)

    def publish(self, staging: Path, version: str) -> Path:
        """Mark ``staging`` complete, move it to ``versions/<version>`` and serve it."""
        manifest = _manifest(staging)
        atomic_write_json(staging / "COMPLETE", {"version": version, "files": manifest})
        target = self.versions / version
        os.replace(staging, target)
        self._release(staging)
        atomic_write_text(self.root / "CURRENT", version)
        self._prune(keep=version)
        return target

    def _prune(self, keep: str) -> None:
        for old in self._complete_versions()[:-KEEP_VERSIONS]:
            if old != keep:
                self._trash(self.versions / old)
        self.clean_debris()

    def _trash(self, directory: Path) -> None:
        """Remove ``directory`` so that no moment shows a version half-removed: it is renamed
        out of the listing first (one atomic step), then deleted."""
        trash = self.versions / f"{TRASH}{directory.name}-{uuid.uuid4().hex[:6]}"
        try:
            os.replace(directory, trash)
        except FileNotFoundError:
            return  # another process pruned it
        shutil.rmtree(trash, ignore_errors=True)

    def clean_debris(self) -> list[str]:
        """Remove what killed processes left in ``versions/``: staging directories no live
        process owns, versions being removed (``.trash-*``), and version directories without
        their ``COMPLETE`` marker (never published: a rename publishes a whole version). Safe
        while other processes train. Returns the names removed."""
        removed = []
        if not self.versions.is_dir():
            return removed
        for entry in sorted(self.versions.iterdir()):
            name = entry.name
            if name.startswith(TRASH) and entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            elif name.startswith(STAGING) and entry.is_dir():
                if not self._remove_unowned(entry):
                    continue
            elif name.startswith("srw-") and entry.is_dir() and not (entry / "COMPLETE").exists():
                self._trash(entry)
            elif name.startswith(STAGING) and name.endswith(".lock"):
                if entry.with_suffix("").exists() or time.time() - _mtime(entry) < 3600:
                    continue
                entry.unlink(missing_ok=True)
            else:
                continue
            removed.append(name)
        if removed:
            logger.info(
                "project %s: removed %d leftovers of killed trainings: %s",
                self.project,
                len(removed),
                ", ".join(removed[:10]),
            )
        return removed

    def _remove_unowned(self, staging: Path) -> bool:
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

    def all_versions(self) -> list[str]:
        """The versions that may be served, oldest first: complete, not broken, every file of
        their manifest in place."""
        return [v for v in self._complete_versions() if self._intact(v)]

    def _complete_versions(self) -> list[str]:
        return sorted(v.name for v in self.versions.glob("srw-*") if self.is_complete(v.name))

    def _intact(self, version: str) -> bool:
        try:
            self.verify(version)
        except CorruptVersion:
            return False
        return True

    def scout_dir(self, version: str, member: int = 0) -> Path:
        """Where ``version``'s scout is: the first (``member`` 0), or another of an ensemble."""
        return self.versions / version / ("scout" if member == 0 else f"scout-{member}")

    def n_scouts(self, version: str) -> int:
        """How many scouts ``version`` holds (an ensemble's, or one)."""
        n = 1
        while self.scout_dir(version, n).is_dir():
            n += 1
        return n

    def _json(self, version: str, name: str, what: str) -> dict:
        """``versions/<version>/<name>`` as a dict ({} if missing); CorruptVersion if it is
        unreadable or holds no object (``what`` it should hold)."""
        try:
            value = json.loads((self.versions / version / name).read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as err:
            raise CorruptVersion(version, f"{name} is unreadable ({err})") from None
        if not isinstance(value, dict):
            raise CorruptVersion(version, f"{name} holds no {what}")
        return value

    def scores(self, version: str) -> dict:
        """Stored predictions of ``version``: task id (str) -> entry."""
        return self._json(version, "scores.json", "task table")

    def meta(self, version: str) -> dict:
        """``meta.json`` of ``version`` (when it trained, on what); {} for older versions."""
        return self._json(version, "meta.json", "description")

    # -- status -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(self, name: str = "status"):
        """An exclusive lock across processes sharing MODEL_DIR: ``"status"`` (status.json and
        a version's scores.json), or ``"writing"`` (a version's predictions in Label Studio)."""
        if not self.root.is_dir():
            self._make_root()
        with open(self.root / (".lock" if name == "status" else f".{name}.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _make_root(self) -> None:
        model_dir = self.root.parent
        if model_dir.is_dir():
            with os.scandir(model_dir) as entries:
                n = sum(1 for e in entries if e.is_dir() and _PROJECT.fullmatch(e.name))
            if n >= MAX_PROJECTS:
                raise TooManyProjects(
                    f"the backend already keeps {n} projects in {model_dir} (at most "
                    f"{MAX_PROJECTS}); project {self.project} is not made: remove the "
                    "directories of projects that no longer exist"
                )
        self.root.mkdir(parents=True, exist_ok=True)

    def status(self) -> dict:
        """``{state, message, last_error, events_since_training, ...}``; read-only snapshot."""
        try:
            status = json.loads((self.root / "status.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            status = {}
        status.setdefault("state", "idle")
        status.setdefault("events_since_training", 0)
        status.setdefault("last_error", None)
        status["project"] = self.project
        status["current_version"] = self.current_version()
        return status

    def update_status(self, when=None, **changes) -> dict:
        """Merge ``changes`` into status.json under an exclusive lock; returns the result.

        A callable value is applied to the old value (``events_since_training=lambda n: n+1``).
        With ``when``, a predicate on the current status, nothing changes unless it holds: the
        check and the write happen under one lock.
        """
        with self.locked():
            status = self.status()
            if when is not None and not when(status):
                return status
            for key, value in changes.items():
                status[key] = value(status.get(key)) if callable(value) else value
            status["updated_at"] = time.time()
            atomic_write_json(self.root / "status.json", status)
            return status

    def take_status(self, *keys: str) -> dict:
        """Remove ``keys`` (dicts) from status.json and return the first one's value ({} if
        absent), under one lock: what one job takes, no other job takes too."""
        with self.locked():
            status = self.status()
            taken = [status.pop(key, None) or {} for key in keys]
            if any(taken):
                status["updated_at"] = time.time()
                atomic_write_json(self.root / "status.json", status)
            return taken[0]

    def note_event(self, task: str | None = None) -> dict:
        """Count an annotation event (``events_since_training``) and, when it names the task
        whose annotations changed, record that ``task`` waits to be rescored with the version
        serving now (``rescore_pending``) and with the version of a training that read the
        annotations before the change (``changed_since_fetch``, cleared when a training
        starts). Both map the task to when its change arrived. One write of the status."""
        changes = {"events_since_training": lambda n: (n or 0) + 1}
        if task is not None:
            now = time.time()
            changes["rescore_pending"] = lambda old: {**(old or {}), task: now}
            changes["changed_since_fetch"] = lambda old: {**(old or {}), task: now}
        return self.update_status(**changes)

"""Per-project state on disk: model versions, stored scores, training status.

    MODEL_DIR/<project>/
        CURRENT                     name of the version being served
        status.json                 state, last error, event counter, tasks changed since the
                                    last scores (see ProjectStore.status, note_event)
        settings.json               the settings the project overrides (its Label Studio
                                    connection's extra parameters, backend.project_settings)
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

A full disk (ENOSPC, EDQUOT) loses nothing this process was told: a status change that cannot be
written (an annotation event, a job's state) and a prediction /predict computed but could not
store are kept in this process's memory, shown by its :meth:`ProjectStore.status` and
:meth:`ProjectStore.scores`, and written with the next successful write of the project or by a
retry every :data:`RETRY_SECONDS` (see :class:`_Unwritten`). A process that exits before the
disk has room again loses what it kept (docs/operating.md).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from subregweigh.crf import crf_path
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

# The errors of a full disk or an exhausted quota: what is not written is kept in memory.
NO_SPACE = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})
RETRY_SECONDS = 5.0  # how often kept changes are tried again while the disk is full
MAX_UNSAVED_SCORES = 20_000  # predictions kept per project; beyond, computed again when asked


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


# Tasks a project's status keeps waiting for a rescore, the newest: beyond them, the next
# training scores the changes (annotation events still count towards it).
MAX_PENDING = 5_000


def _bounded(pending: dict) -> dict:
    if len(pending) <= MAX_PENDING:
        return pending
    newest = sorted(pending.items(), key=lambda item: item[1])[-MAX_PENDING:]
    return dict(newest)


class _Events:
    """``n`` annotation events (:meth:`ProjectStore.note_event`), ``tasks`` the tasks they changed
    -> when: one status change however many events a full disk keeps back. The tasks are kept
    only where something will read them: ``rescore_pending`` while a version serves
    (``serving``), ``changed_since_fetch`` while a training runs; each at most
    :data:`MAX_PENDING`."""

    def __init__(self, n: int = 0, tasks: dict | None = None, serving: bool = True):
        self.n, self.tasks, self.serving = n, dict(tasks or {}), serving

    def apply(self, status: dict) -> None:
        status["events_since_training"] = (status.get("events_since_training") or 0) + self.n
        if not self.tasks:
            return
        keys = ["rescore_pending"] if self.serving else []
        if status.get("state") == "running":
            keys.append("changed_since_fetch")
        for key in keys:
            status[key] = _bounded({**(status.get(key) or {}), **self.tasks})


def _apply(status: dict, change) -> None:
    """Apply one status change: an :class:`_Events`, or ``{key: value or function of the old}``."""
    if isinstance(change, _Events):
        change.apply(status)
        return
    for key, value in change.items():
        status[key] = value(status.get(key)) if callable(value) else value


@dataclass
class _Unwritten:
    """What a full disk kept from one project's files, in this process: status changes in the
    order they were made (applied over status.json when read, and written with it as soon as a
    write succeeds), and predictions per version (merged into scores.json the same way)."""

    model_dir: str
    project: str
    since: float
    error: str
    changes: list = field(default_factory=list)
    scores: dict = field(default_factory=dict)  # version -> task id -> entry
    broken: dict = field(default_factory=dict)  # version -> why (its BROKEN marker unwritten)

    def add(self, change) -> None:
        last = self.changes[-1] if self.changes else None
        if isinstance(change, _Events) and isinstance(last, _Events):
            last.n += change.n  # a storm of events stays one change
            last.tasks = _bounded({**last.tasks, **change.tasks})
            last.serving = last.serving or change.serving
        else:
            self.changes.append(change)

    def events(self) -> int:
        return sum(c.n for c in self.changes if isinstance(c, _Events))

    def n_scores(self) -> int:
        return sum(len(v) for v in self.scores.values())

    def summary(self) -> dict:
        """What /status shows of it."""
        return {
            "since": self.since,
            "error": self.error,
            "status_changes": len(self.changes),
            "annotation_events": self.events(),
            "predictions": self.n_scores(),
            "message": (
                "the disk of MODEL_DIR is full: these are kept in the memory of process "
                f"{os.getpid()} and written when space returns (retried every "
                f"{RETRY_SECONDS:g} s)"
            ),
        }

    def empty(self) -> bool:
        return not (self.changes or any(self.scores.values()) or self.broken)


_unwritten: dict[str, _Unwritten] = {}  # project directory -> what its files lack
_unwritten_lock = threading.RLock()
_retrying: threading.Thread | None = None


def _retry_unwritten() -> None:
    """The retry thread: while anything is kept, try to write it every RETRY_SECONDS."""
    global _retrying
    while True:
        time.sleep(RETRY_SECONDS)
        with _unwritten_lock:
            pending = [(u.model_dir, u.project) for u in _unwritten.values()]
            if not pending:
                _retrying = None
                return
        for model_dir, project in pending:
            try:
                ProjectStore(model_dir, project).write_unwritten()
            except Exception as err:  # keep retrying the others; this one next round
                logger.warning("project %s: kept changes not written yet: %s", project, err)


def _at_exit() -> None:
    """A last try when the process exits; what still does not fit is lost: say what."""
    with _unwritten_lock:
        pending = list(_unwritten.values())
    for kept in pending:
        with contextlib.suppress(Exception):
            if ProjectStore(kept.model_dir, kept.project).write_unwritten():
                continue
        logger.error(
            "project %s: exiting while the disk is full: %d annotation events, %d status "
            "changes and %d predictions kept since %s are lost (the next training reads every "
            "annotation again)",
            kept.project,
            kept.events(),
            len(kept.changes),
            kept.n_scores(),
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(kept.since)),
        )


atexit.register(_at_exit)


def unwritten_projects() -> list[str]:
    """Project directories of which this process keeps changes a full disk did not take."""
    with _unwritten_lock:
        return sorted(_unwritten)


class ScoresView:
    """What ``build(scores)`` makes of a version's stored scores, kept per process until its
    scores.json changes (the ``limit`` most recently used versions): a project of 14,000 NER
    tasks stores 17 MiB of scores, which take about a second to parse, and a webhook or a
    rescore should not pay that every time. While a full disk keeps the project's writes in
    this process's memory, the view is built afresh on each call."""

    def __init__(self, build: Callable[[dict], Any], limit: int):
        self.build, self.limit = build, limit
        self._cache: OrderedDict[str, tuple[tuple, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, store: ProjectStore, version: str):
        path = store.versions / version / "scores.json"
        held = os.path.abspath(store.root) in unwritten_projects()
        try:
            st = path.stat()
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            hit = self._cache.get(str(path))
            if hit is not None and hit[0] == stamp and not held:
                self._cache.move_to_end(str(path))
                return hit[1]
        value = self.build(store.scores(version))
        if stamp is not None and not held:  # read after the stat: a newer file only reloads
            with self._lock:
                self._cache[str(path)] = (stamp, value)
                while len(self._cache) > self.limit:
                    self._cache.popitem(last=False)
        return value


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
            and not self._broken_in_memory(version)
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
            try:
                atomic_write_json(directory / "BROKEN", {"reason": reason, "at": time.time()})
            except OSError as err:
                if not no_space(err):
                    raise
                with _unwritten_lock:  # this process serves it no more; the marker comes later
                    self._keep(err).broken[version] = reason

    def _broken_in_memory(self, version: str) -> bool:
        with _unwritten_lock:
            kept = _unwritten.get(self._key)
            return kept is not None and version in kept.broken

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
                if entry.with_suffix("").exists() or time.time() - _mtime(entry) < 60:
                    continue
                entry.unlink(missing_ok=True)
            else:
                continue
            removed.append(name)
        # a process killed between publishing a version and pruning the old ones
        current = self.current_version()
        for old in self._complete_versions()[:-KEEP_VERSIONS]:
            if old != current:
                self._trash(self.versions / old)
                removed.append(old)
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

    def crf_file(self, version: str) -> Path:
        """Where ``version``'s CRF is (NER with SRW_CRF; absent otherwise; :func:`crf_path`)."""
        return crf_path(self.versions / version)

    def n_scouts(self, version: str) -> int:
        """How many scouts ``version`` holds: an ensemble's, one, or none (the early scores of
        a NER project's CRF alone)."""
        n = 0
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
        """Stored predictions of ``version``: task id (str) -> entry (with those a full disk
        kept in this process's memory, see :meth:`store_scores`)."""
        scores = self._json(version, "scores.json", "task table")
        with _unwritten_lock:
            kept = _unwritten.get(self._key)
            if kept is not None and version in kept.scores:
                scores.update(kept.scores[version])
        return scores

    def meta(self, version: str) -> dict:
        """``meta.json`` of ``version`` (when it trained, on what); {} for older versions."""
        return self._json(version, "meta.json", "description")

    # -- the project's settings ---------------------------------------------------------------
    def overrides(self) -> dict:
        """The settings this project overrides, field -> value, as
        :meth:`replace_overrides` stored them ({} when none, or when the file is unreadable:
        a WARNING says so, and the server's settings apply)."""
        try:
            stored = json.loads((self.root / "settings.json").read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as err:
            logger.warning(
                "project %s: settings.json is unreadable (%s); the server's settings apply "
                "until Label Studio's next /setup stores the project's again",
                self.project,
                err,
            )
            return {}
        overrides = stored.get("overrides") if isinstance(stored, dict) else None
        return overrides if isinstance(overrides, dict) else {}

    def replace_overrides(self, overrides: dict) -> dict:
        """Make ``overrides`` (field -> plain value) the project's settings, written atomically
        and only when they differ; returns the ones they replace. Label Studio repeats the same
        ones with every /setup: those take no lock, write nothing and make no directory."""
        if self.overrides() == overrides:
            return overrides
        with self.locked():
            old = self.overrides()
            if old != overrides:
                atomic_write_json(
                    self.root / "settings.json", {"overrides": overrides, "updated_at": time.time()}
                )
            return old

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

    def _read_status(self) -> tuple[dict, int]:
        """status.json as written with what this process keeps of it applied (a copy), and how
        many kept changes that applied."""
        try:
            status = json.loads((self.root / "status.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            status = {}
        if not isinstance(status, dict):
            status = {}
        with _unwritten_lock:
            kept = _unwritten.get(self._key)
            changes = list(kept.changes) if kept else []
        for change in changes:
            _apply(status, change)
        self._show_unwritten(status)
        return status, len(changes)

    def _show_unwritten(self, status: dict) -> dict:
        with _unwritten_lock:
            kept = _unwritten.get(self._key)
            if kept is None:
                status.pop("unwritten", None)
            else:
                status["unwritten"] = kept.summary()
        return status

    def status(self) -> dict:
        """``{state, message, last_error, events_since_training, ...}``; read-only snapshot.

        With ``unwritten`` when this process keeps changes a full disk did not take (they are
        applied here already)."""
        return self._status()[0]

    def _status(self) -> tuple[dict, int]:
        status, n_kept = self._read_status()
        status.setdefault("state", "idle")
        status.setdefault("events_since_training", 0)
        status.setdefault("last_error", None)
        status["project"] = self.project
        status["current_version"] = self.current_version()
        return status, n_kept

    def _write_status(self, status: dict, n_kept: int) -> bool:
        """Write ``status`` (which has the first ``n_kept`` kept changes applied); on success
        forget those. False when the disk is full (the caller keeps its change)."""
        try:
            atomic_write_json(
                self.root / "status.json", {k: v for k, v in status.items() if k != "unwritten"}
            )
        except OSError as err:
            if not no_space(err):
                raise
            self._keep(err)
            return False
        if n_kept:
            self._written(n_kept)
        return True

    def update_status(self, when=None, **changes) -> dict:
        """Merge ``changes`` into status.json under an exclusive lock; returns the result.

        A callable value is applied to the old value (``events_since_training=lambda n: n+1``).
        With ``when``, a predicate on the current status, nothing changes unless it holds: the
        check and the write happen under one lock. When the disk is full the change is kept in
        this process (see :class:`_Unwritten`) and the result says so (``unwritten``).
        """
        return self._change(changes, when)

    def _change(self, change, when=None) -> dict:
        try:
            with self.locked():
                status, n_kept = self._status()
                if when is not None and not when(status):
                    return status
                _apply(status, change)
                status["updated_at"] = time.time()
                if not self._write_status(status, n_kept) and change:
                    self._keep_change(change)
                return self._show_unwritten(status)
        except OSError as err:  # no room even for the project's directory or its lock
            if not no_space(err):
                raise
            status = self.status()
            if when is not None and not when(status):
                return status
            self._keep(err)
            if change:
                self._keep_change(change)
            return self.status()

    def take_status(self, *keys: str) -> dict:
        """Remove ``keys`` (dicts) from status.json and return the first one's value ({} if
        absent), under one lock: what one job takes, no other job takes too. On a full disk
        they are returned and stay where they were too (a task may be rescored twice; none is
        lost)."""
        with self.locked():
            status, n_kept = self._status()
            taken = [status.pop(key, None) or {} for key in keys]
            if any(taken):
                status["updated_at"] = time.time()
                self._write_status(status, n_kept)
            return taken[0]

    def note_event(self, task: str | None = None, serving: bool = True) -> dict:
        """Count an annotation event (``events_since_training``) and, when it names the task
        whose annotations changed, record that ``task`` waits to be rescored with the version
        serving now (``rescore_pending``) and with the version of a training that read the
        annotations before the change (``changed_since_fetch``, cleared when a training
        starts). Both map the task to when its change arrived. One write of the status; on a
        full disk the event is kept in this process and written when space returns (the result
        has ``unwritten``). ``serving``: whether a version serves the project (else nothing
        would rescore the task: only the count is kept)."""
        return self._change(
            _Events(1, {task: time.time()} if task is not None else {}, serving=serving)
        )

    # -- what a full disk keeps back ----------------------------------------------------------
    @property
    def _key(self) -> str:
        return os.path.abspath(self.root)

    def _keep(self, err: OSError) -> _Unwritten:
        """The record of what this project's files lack (made, and the retry started, on the
        first failed write; the first failure of an outage is logged as a WARNING)."""
        global _retrying
        with _unwritten_lock:
            kept = _unwritten.get(self._key)
            if kept is None:
                kept = _unwritten[self._key] = _Unwritten(
                    str(self.root.parent), self.project, time.time(), f"{err.strerror or err}"
                )
                logger.warning(
                    "project %s: cannot write to %s: %s; annotation events, status changes and "
                    "new predictions are kept in this process's memory (pid %d) and written "
                    "when space returns",
                    self.project,
                    self.root,
                    err.strerror or err,
                    os.getpid(),
                )
            if _retrying is None:
                _retrying = threading.Thread(
                    target=_retry_unwritten, name="subregweigh-unwritten", daemon=True
                )
                _retrying.start()
            return kept

    def _keep_change(self, change) -> None:
        with _unwritten_lock:
            _unwritten[self._key].add(change)

    def _written(self, n_changes: int = 0, version: str | None = None) -> None:
        """The first ``n_changes`` kept status changes (or the predictions kept for
        ``version``) are on disk now: forget them, and say so when nothing is left."""
        with _unwritten_lock:
            kept = _unwritten.get(self._key)
            if kept is None:
                return
            events = sum(c.n for c in kept.changes[:n_changes] if isinstance(c, _Events))
            del kept.changes[:n_changes]
            scores = len(kept.scores.pop(version, {})) if version is not None else 0
            done = kept.empty()
            if done:
                del _unwritten[self._key]
        if n_changes or scores:
            logger.info(
                "project %s: wrote %d status changes (%d annotation events) and %d predictions "
                "kept in memory while the disk was full",
                self.project,
                n_changes,
                events,
                scores,
            )
        if done:
            logger.warning(
                "project %s: the disk has room again: everything kept in memory since %s is "
                "written",
                self.project,
                time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(kept.since)),
            )

    def write_unwritten(self) -> bool:
        """Try to write what this process keeps of this project: status changes, predictions,
        BROKEN markers. True when nothing is kept any more."""
        with _unwritten_lock:
            kept = _unwritten.get(self._key)
            if kept is None:
                return True
            broken = dict(kept.broken)
            versions = list(kept.scores)
            has_changes = bool(kept.changes)
        for version, reason in broken.items():
            directory = self.versions / version
            try:
                if directory.is_dir():
                    atomic_write_json(directory / "BROKEN", {"reason": reason, "at": time.time()})
            except OSError as err:
                if not no_space(err):
                    raise
                return False
            with _unwritten_lock:
                kept.broken.pop(version, None)
        if has_changes:
            self._change({})
        for version in versions:
            self.store_scores(version, {})
        self._written()  # says so if this emptied it
        with _unwritten_lock:
            return self._key not in _unwritten

    # -- stored predictions -------------------------------------------------------------------
    def store_scores(self, version: str, fresh: dict) -> bool:
        """Add ``fresh`` (task id -> entry) to ``version``'s scores.json, under the status lock.
        On a full disk they are kept in this process (at most :data:`MAX_UNSAVED_SCORES` per
        project) and :meth:`scores` serves them: False. A version no longer on disk (pruned)
        takes nothing: True."""
        path = self.versions / version / "scores.json"
        try:
            with self.locked():
                with _unwritten_lock:
                    kept = _unwritten.get(self._key)
                    held = dict(kept.scores.get(version, {})) if kept else {}
                if path.parent.is_dir():  # else pruned: nothing to add to
                    scores = self._json(version, "scores.json", "task table")
                    scores.update(held)
                    scores.update(fresh)
                    atomic_write_json(path, scores)
        except OSError as err:
            if not no_space(err):
                raise
            with _unwritten_lock:
                kept = self._keep(err)
                room = MAX_UNSAVED_SCORES - kept.n_scores()
                table = kept.scores.setdefault(version, {}) if fresh else {}
                for task, entry in fresh.items():
                    if task in table or room > 0:
                        room -= task not in table
                        table[task] = entry
            return False
        with _unwritten_lock:
            kept = _unwritten.get(self._key)
            written = kept is not None and version in kept.scores
        if written:
            self._written(version=version)
        return True

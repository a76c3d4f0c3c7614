"""Per-project state on disk: model versions, stored scores, training status.

    MODEL_DIR/
        .webhook-secret             the webhook secret, when generated (backend.labelstudio.client.
                                    webhook_auth)
        references/                 the reference corpora SRW_REFERENCE names
                                    (backend.serving.reference)
        <project>/
            CURRENT                 name of the version being served
            status.json             the status the UI reads: state, last error, event
                                    counter, each job's last run (ProjectStore.status)
            inbox.json              what waits to be done: tasks changed since the last scores,
                                    slips to rewrite, a self-test's request (backend.store.inbox;
                                    ProjectStore.inbox, note_event)
            ledger.json             the versions whose predictions this backend wrote to Label
                                    Studio (backend.store.ledger; ProjectStore.ledger)
            settings.json           the settings the project overrides (its Label Studio
                                    connection's extra parameters, backend.config.project_settings)
            reviews.json            reviewers' decisions (backend.review.reviews)
            tasks.json              the annotated tasks as last read, which a refresh trains on
                                    (NER, up to CRF_FIRST_EXAMPLES annotations;
                                    backend.store.snapshot)
            .lock, .<name>.lock     the locks of ProjectStore.locked ("writing", "publishing",
                                    "snapshot") and of the in-process job runners
                                    (.training.lock, ..., backend.queue.runners)
            versions/
                .staging-*          a version being built, owned through its .lock's flock
                                    (backend.store.versions); .trash-*: one being removed
                <version>/
                    COMPLETE        written last: the size of every file; without it, never
                                    served
                    BROKEN          why a complete version failed to load; never served again
                    scout/          the saved scout (scout-1/, scout-2/...: an ensemble's
                                    others; subregweigh.parts)
                    crf.npz         the CRF (NER with SRW_CRF)
                    scout_proba.npz the scouts' tag distributions of every annotated task, which
                                    a refresh mixes its CRF with (NER;
                                    backend.serving.scout_proba)
                    scores.json     task id -> stored prediction (result, score, fingerprint,
                                    and every annotation's scores, for the report)
                    meta.json       when it trained, on what, with which settings (the report)

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
retry every :data:`~backend.store.unwritten.RETRY_SECONDS` (see :mod:`backend.store.unwritten`). A
process that exits before the disk has room again loses what it kept (docs/operating.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import math
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from backend.store import inbox as job_inbox
from backend.store import ledger as written_ledger
from backend.store import unwritten
from backend.store.disk import directory_mb, free_mb, no_space
from backend.store.unwritten import Events, apply_change
from backend.store.versions import leftovers, make_staging, manifest, trash
from subregweigh.io.atomic import atomic_write_json, atomic_write_text

logger = logging.getLogger(__name__)

_PROJECT = re.compile(r"[0-9]+")
# What a server or worker process leaves of MODEL_DIR's files to others: nothing to the world
# (files 0640, directories 0750): they hold the projects' texts, annotators and decisions.
DATA_UMASK = 0o027


def keep_files_private() -> None:
    """Make this process's new files and directories under MODEL_DIR unreadable to other users
    (:data:`DATA_UMASK`): what the server and the rq worker call as they start."""
    os.umask(DATA_UMASK)


# Project directories are made on the first event of a project; this bounds what any number of
# made-up project ids can make (a real deployment serves far fewer projects).
MAX_PROJECTS = 10_000


class TooManyProjects(RuntimeError):
    """The model directory holds :data:`MAX_PROJECTS` projects: no new one is made."""


KEEP_VERSIONS = 3


def retrain_due(status: dict, retrain_after: int) -> bool:
    """Whether the annotation changes counted in ``status`` (:meth:`ProjectStore.status`) since
    the last training call for the next: ``retrain_after`` of them (``SRW_RETRAIN_AFTER``)."""
    return status.get("events_since_training", 0) >= retrain_after


# A new version takes about the last one's size (scores.json grows with the project), and at
# least this many MB (a MiniLM version takes about 90 MB).
VERSION_GROWTH = 1.2
MIN_FREE_MB = 100


def disk_space(store: ProjectStore) -> dict:
    """Free megabytes in MODEL_DIR against what a new version of the project needs: the last
    version's size plus 20%, at least :data:`MIN_FREE_MB`. What /status shows (``disk``), and
    what a training checks before it starts."""
    current = store.current_version()
    last = directory_mb(store.versions / current) if current else 0.0
    needed = max(MIN_FREE_MB, math.ceil(last * VERSION_GROWTH))
    free = free_mb(store.root)
    return {"free_mb": math.floor(free), "needed_mb": needed, "enough": free >= needed}


def disk_full_message(space: dict) -> str:
    """Why a training does not start: ``disk full: N MB free in MODEL_DIR, ...``."""
    return (
        f"disk full: {space['free_mb']} MB free in MODEL_DIR, a version "
        f"needs about {space['needed_mb']} MB (the last version's size plus 20%, at least "
        f"{MIN_FREE_MB} MB); free space there, or enlarge the volume"
    )


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


_APART = (job_inbox.FILE, written_ledger.FILE)  # files written before status.json, keys apart


def _status_only(state: dict) -> dict:
    """``state`` (a status as read, the inbox's and the ledger's keys with it) without them."""
    return {k: v for k, v in state.items() if not any(k in part.keys for part in _APART)}


class CorruptVersion(RuntimeError):
    """A published version's files are missing, truncated or unreadable."""

    def __init__(self, version: str, problem: str):
        super().__init__(f"version {version}: {problem}")
        self.version = version


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
            and not unwritten.broken_in_memory(self, version)
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
                unwritten.keep_broken(self, err, version, reason)  # this process serves it no more

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
        staging, fd = make_staging(self.versions)
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
        atomic_write_json(staging / "COMPLETE", {"version": version, "files": manifest(staging)})
        target = self.versions / version
        os.replace(staging, target)
        self._release(staging)
        atomic_write_text(self.root / "CURRENT", version)
        self._prune(keep=version)
        return target

    def _prune(self, keep: str) -> None:
        for old in self._complete_versions()[:-KEEP_VERSIONS]:
            if old != keep:
                trash(self.versions, self.versions / old)
        self.clean_debris()

    def clean_debris(self) -> list[str]:
        """Remove what killed processes left in ``versions/``: staging directories no live
        process owns, versions being removed (``.trash-*``), and version directories without
        their ``COMPLETE`` marker (never published: a rename publishes a whole version). Safe
        while other processes train. Returns the names removed."""
        if not self.versions.is_dir():
            return []
        removed = leftovers(self.versions)
        # a process killed between publishing a version and pruning the old ones
        current = self.current_version()
        for old in self._complete_versions()[:-KEEP_VERSIONS]:
            if old != current:
                trash(self.versions, self.versions / old)
                removed.append(old)
        if removed:
            logger.info(
                "project %s: removed %d leftovers of killed trainings: %s",
                self.project,
                len(removed),
                ", ".join(removed[:10]),
            )
        return removed

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
        """Where ``version``'s scout is: the first (``member`` 0), or another of an ensemble
        (the engine's layout, :mod:`subregweigh.parts`)."""
        from subregweigh.parts import scout_folder

        return scout_folder(self.versions / version, member)

    def crf_file(self, version: str) -> Path:
        """Where ``version``'s CRF is (NER with SRW_CRF; absent otherwise; the engine's layout,
        :func:`subregweigh.crf.crf_path`)."""
        from subregweigh.crf import crf_path

        return crf_path(self.versions / version)

    def n_scouts(self, version: str) -> int:
        """How many scouts ``version`` holds: an ensemble's, one, or none (the early scores of
        a NER project's CRF alone)."""
        from subregweigh.parts import saved_scouts

        return saved_scouts(self.versions / version)

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
        scores.update(unwritten.kept_scores(self, version))
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
        a version's scores.json), ``"writing"`` (a version's predictions in Label Studio), or
        ``"publishing"`` (which version serves: a refresh's look at it and its publish, a
        training's publish; taken inside ``"writing"``, never around it)."""
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
        for part in _APART:  # read over status.json: one written before them holds their keys
            status.update(part.read(self.root))
        changes = unwritten.kept_changes(self)
        for change in changes:
            apply_change(status, change)
        unwritten.show_unwritten(self, status)
        return status, len(changes)

    def status(self) -> dict:
        """``{state, message, last_error, events_since_training, ...}``: the status the UI
        reads, a read-only snapshot; what waits (:meth:`inbox`) and the versions written
        (:meth:`ledger`) are read apart.

        With ``unwritten`` when this process keeps changes a full disk did not take (they are
        applied here already)."""
        return _status_only(self._status()[0])

    def _status(self) -> tuple[dict, int]:
        status, n_kept = self._read_status()
        status.setdefault("state", "idle")
        status.setdefault("events_since_training", 0)
        status.setdefault("last_error", None)
        status["project"] = self.project
        status["current_version"] = self.current_version()
        return status, n_kept

    def inbox(self) -> job_inbox.Inbox:
        """What waits to be done for the project (:class:`backend.store.inbox.Inbox`, from
        inbox.json, with what a full disk kept in this process applied)."""
        return job_inbox.Inbox.of(self._status()[0])

    def ledger(self) -> written_ledger.Ledger:
        """The versions whose predictions this backend wrote to Label Studio
        (:class:`backend.store.ledger.Ledger`, from ledger.json, with what a full disk kept in
        this process applied)."""
        return written_ledger.Ledger.of(self._status()[0])

    def _write_status(self, status: dict, n_kept: int) -> bool:
        """Write ``status`` (which has the first ``n_kept`` kept changes applied): the inbox's
        keys to inbox.json and the ledger's to ledger.json first, the rest to status.json; on
        success forget those. False when the disk is full (the caller keeps its change)."""
        rest = {k: v for k, v in status.items() if k != "unwritten"}
        apart = [(part, part.take(rest)) for part in _APART]
        try:
            for part, values in apart:
                part.write(self.root, values)
            atomic_write_json(self.root / "status.json", rest)
        except OSError as err:
            if not no_space(err):
                raise
            unwritten.keep(self, err)
            return False
        if n_kept:
            unwritten.written(self, n_kept)
        return True

    def update_status(self, when=None, **changes) -> dict:
        """Merge ``changes`` into status.json (and an inbox key's into inbox.json: one write
        that starts a training and clears what waits for it) under an exclusive lock; returns
        the status (:meth:`status`).

        A callable value is applied to the old value (``events_since_training=lambda n: n+1``).
        With ``when``, a predicate on the current status, nothing changes unless it holds: the
        check and the write happen under one lock. When the disk is full the change is kept in
        this process (see :mod:`backend.store.unwritten`) and the result says so (``unwritten``).
        The ledger is not changed here (:meth:`update_ledger`).
        """
        if written_ledger.KEYS & set(changes):
            raise ValueError("the ledger of written versions changes through update_ledger")
        return self._change(changes, when)

    def update_ledger(
        self, change: Callable[[written_ledger.Ledger], written_ledger.Ledger]
    ) -> written_ledger.Ledger:
        """Make ``change(ledger)`` the ledger of written versions (:meth:`ledger`), under the
        status's lock and full-disk buffer; returns it. Its one caller is
        :mod:`backend.serving.publish`."""

        def changed(old):
            return list(
                change(written_ledger.Ledger.of({"written_versions": old})).written_versions
            )

        self._change({"written_versions": changed})
        return self.ledger()

    def _change(self, change, when=None) -> dict:
        try:
            with self.locked():
                status, n_kept = self._status()
                if when is not None and not when(_status_only(status)):
                    return _status_only(status)
                apply_change(status, change)
                status["updated_at"] = time.time()
                if not self._write_status(status, n_kept) and change:
                    unwritten.keep_change(self, change)
                return _status_only(unwritten.show_unwritten(self, status))
        except OSError as err:  # no room even for the project's directory or its lock
            if not no_space(err):
                raise
            status = self.status()
            if when is not None and not when(status):
                return status
            unwritten.keep(self, err)
            if change:
                unwritten.keep_change(self, change)
            return self.status()

    def take_inbox(self, *keys: str) -> dict:
        """Remove ``keys`` (the inbox's, :class:`backend.store.inbox.Inbox`) from the inbox and
        return the first one's value ({} if absent), under one lock: what one job takes, no
        other job takes too. On a full disk they are returned and stay where they were too (a
        task may be rescored twice; none is lost)."""
        if not set(keys) <= job_inbox.KEYS:
            raise ValueError(f"not the inbox's: {', '.join(sorted(set(keys) - job_inbox.KEYS))}")
        with self.locked():
            status, n_kept = self._status()
            taken = [status.pop(key, None) or {} for key in keys]
            if any(taken):
                status["updated_at"] = time.time()
                self._write_status(status, n_kept)
            return taken[0]

    def note_event(self, task: str | None = None, serving: bool = True) -> dict:
        """Count an annotation event (``events_since_training``) and, when it names the task
        whose annotations changed, record in the inbox (:meth:`inbox`) that ``task`` waits to be
        rescored with the version serving now (``rescore_pending``) and with the version of a
        training that read the annotations before the change (``changed_since_fetch``, cleared
        when a training starts). Both map the task to when its change arrived. One write of the
        status and the inbox; on a full disk the event is kept in this process and written when
        space returns (the result has ``unwritten``). ``serving``: whether a version serves the
        project (else nothing would rescore the task: only the count is kept)."""
        return self._change(
            Events(1, {task: time.time()} if task is not None else {}, serving=serving)
        )

    # -- what a full disk keeps back ----------------------------------------------------------
    def write_unwritten(self) -> bool:
        """Try to write what this process keeps of this project: status changes, predictions,
        BROKEN markers. True when nothing is kept any more (:mod:`backend.store.unwritten`)."""
        return unwritten.write_unwritten(self)

    # -- stored predictions -------------------------------------------------------------------
    def drop_scores(self, version: str, tasks) -> None:
        """Remove ``tasks`` (ids) from ``version``'s scores.json, under the status lock: tasks
        Label Studio no longer holds (deleted), whose predictions it refuses. A version no
        longer on disk, or a full disk, keeps them (the next write leaves them out again)."""
        gone = {str(task) for task in tasks}
        path = self.versions / version / "scores.json"
        try:
            with self.locked():
                if path.parent.is_dir():
                    scores = self._json(version, "scores.json", "task table")
                    if gone & set(scores):
                        atomic_write_json(path, {t: e for t, e in scores.items() if t not in gone})
        except OSError as err:
            if not no_space(err):
                raise

    def store_scores(self, version: str, fresh: dict) -> bool:
        """Add ``fresh`` (task id -> entry) to ``version``'s scores.json, under the status lock.
        On a full disk they are kept in this process (at most
        :data:`~backend.store.unwritten.MAX_UNSAVED_SCORES` per project) and :meth:`scores` serves
        them: False. A version no longer on disk (pruned) takes nothing: True."""
        path = self.versions / version / "scores.json"
        try:
            with self.locked():
                held = unwritten.kept_scores(self, version)
                if path.parent.is_dir():  # else pruned: nothing to add to
                    scores = self._json(version, "scores.json", "task table")
                    scores.update(held)
                    scores.update(fresh)
                    atomic_write_json(path, scores)
        except OSError as err:
            if not no_space(err):
                raise
            unwritten.keep_scores(self, err, version, fresh)
            return False
        if unwritten.holds_scores(self, version):
            unwritten.written(self, version=version)
        return True

"""A project's status changes, and what a full disk keeps of them in this process.

A status change is an :class:`Events` (annotation events, however many) or a dict of keys to
values (or to functions of the old value), applied by :func:`apply_change`. When the disk of
MODEL_DIR is full (ENOSPC, EDQUOT: :func:`backend.store.disk.no_space`), the changes
:class:`backend.store.store.ProjectStore` cannot write, the predictions it cannot store and the
BROKEN markers it cannot write are kept here, one :class:`Unwritten` per project directory: the
store applies them to what it reads, and writes them with its next successful write of the
project, or a thread started with the first of them retries every :data:`RETRY_SECONDS`, with
the writer the store handed in (its ``write_unwritten``: this module never imports the store).
At exit a last try is made, and what still does not fit is logged as lost (docs/operating.md).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from backend.store.disk import no_space
from subregweigh.io.atomic import atomic_write_json

logger = logging.getLogger(__name__)


class Store(Protocol):
    """What this buffer needs of the :class:`backend.store.store.ProjectStore` that hands itself
    in (the store imports this module, never the other way): where its files are, and how to
    write what is kept (:meth:`write_unwritten`, the writer the retry thread calls)."""

    root: Path
    versions: Path
    project: str

    def update_status(self, when=None, **changes) -> dict: ...

    def store_scores(self, version: str, fresh: dict) -> bool: ...

    def write_unwritten(self) -> bool: ...


RETRY_SECONDS = 5.0  # how often kept changes are tried again while the disk is full
MAX_UNSAVED_SCORES = 20_000  # predictions kept per project; beyond, computed again when asked

# Tasks a project's status keeps waiting for a rescore, the newest: beyond them, the next
# training scores the changes (annotation events still count towards it).
MAX_PENDING = 5_000


def _bounded(pending: dict) -> dict:
    if len(pending) <= MAX_PENDING:
        return pending
    newest = sorted(pending.items(), key=lambda item: item[1])[-MAX_PENDING:]
    return dict(newest)


class Events:
    """``n`` annotation events (:meth:`ProjectStore.note_event`), ``tasks`` the tasks they changed
    -> when: one status change however many events a full disk keeps back. The tasks are kept
    only where something will read them, in the job inbox's keys (:mod:`backend.store.inbox`,
    which the store writes to ``inbox.json``): ``rescore_pending`` while a version serves
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


def apply_change(status: dict, change) -> None:
    """Apply one status change: an :class:`Events`, or ``{key: value or function of the old}``."""
    if isinstance(change, Events):
        change.apply(status)
        return
    for key, value in change.items():
        status[key] = value(status.get(key)) if callable(value) else value


@dataclass
class Unwritten:
    """What a full disk kept from one project's files, in this process: status changes in the
    order they were made (applied over status.json when read, and written with it as soon as a
    write succeeds), and predictions per version (merged into scores.json the same way)."""

    writer: Callable[[], bool]  # the store's write_unwritten: True once nothing is kept
    project: str
    since: float
    error: str
    changes: list = field(default_factory=list)
    scores: dict = field(default_factory=dict)  # version -> task id -> entry
    broken: dict = field(default_factory=dict)  # version -> why (its BROKEN marker unwritten)

    def add(self, change) -> None:
        last = self.changes[-1] if self.changes else None
        if isinstance(change, Events) and isinstance(last, Events):
            last.n += change.n  # a storm of events stays one change
            last.tasks = _bounded({**last.tasks, **change.tasks})
            last.serving = last.serving or change.serving
        else:
            self.changes.append(change)

    def events(self) -> int:
        return sum(c.n for c in self.changes if isinstance(c, Events))

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


_kept: dict[str, Unwritten] = {}  # project directory -> what its files lack
_lock = threading.RLock()
_retrying: threading.Thread | None = None


def _retry() -> None:
    """The retry thread: while anything is kept, try to write it every RETRY_SECONDS (each
    project's with the writer its store handed in)."""
    global _retrying
    while True:
        time.sleep(RETRY_SECONDS)
        with _lock:
            pending = [(u.writer, u.project) for u in _kept.values()]
            if not pending:
                _retrying = None
                return
        for writer, project in pending:
            try:
                writer()
            except Exception as err:  # keep retrying the others; this one next round
                logger.warning("project %s: kept changes not written yet: %s", project, err)


def _at_exit() -> None:
    """A last try when the process exits; what still does not fit is lost: say what."""
    with _lock:
        pending = list(_kept.values())
    for kept in pending:
        with contextlib.suppress(Exception):
            if kept.writer():
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
    with _lock:
        return sorted(_kept)


def _key(store: Store) -> str:
    return os.path.abspath(store.root)


# -- what the store reads of it ---------------------------------------------------------------
def kept_changes(store: Store) -> list:
    """The status changes kept for ``store``'s project, in the order they were made (a copy)."""
    with _lock:
        kept = _kept.get(_key(store))
        return list(kept.changes) if kept else []


def kept_scores(store: Store, version: str) -> dict:
    """The predictions of ``version`` kept in memory, task id -> entry (a copy; {} if none)."""
    with _lock:
        kept = _kept.get(_key(store))
        return dict(kept.scores.get(version, {})) if kept else {}


def holds_scores(store: Store, version: str) -> bool:
    """Whether predictions of ``version`` are kept in memory."""
    with _lock:
        kept = _kept.get(_key(store))
        return kept is not None and version in kept.scores


def broken_in_memory(store: Store, version: str) -> bool:
    """Whether ``version`` is broken and its BROKEN marker not written yet."""
    with _lock:
        kept = _kept.get(_key(store))
        return kept is not None and version in kept.broken


def show_unwritten(store: Store, status: dict) -> dict:
    """``status`` with ``unwritten`` (:meth:`Unwritten.summary`) when something is kept for the
    project, without it otherwise."""
    with _lock:
        kept = _kept.get(_key(store))
        if kept is None:
            status.pop("unwritten", None)
        else:
            status["unwritten"] = kept.summary()
    return status


# -- what the store keeps in it ---------------------------------------------------------------
def keep(store: Store, err: OSError) -> Unwritten:
    """The record of what ``store``'s project files lack (made, and the retry started, on the
    first failed write; the first failure of an outage is logged as a WARNING)."""
    global _retrying
    with _lock:
        kept = _kept.get(_key(store))
        if kept is None:
            kept = _kept[_key(store)] = Unwritten(
                store.write_unwritten, store.project, time.time(), f"{err.strerror or err}"
            )
            logger.warning(
                "project %s: cannot write to %s: %s; annotation events, status changes and "
                "new predictions are kept in this process's memory (pid %d) and written "
                "when space returns",
                store.project,
                store.root,
                err.strerror or err,
                os.getpid(),
            )
        if _retrying is None:
            _retrying = threading.Thread(target=_retry, name="subregweigh-unwritten", daemon=True)
            _retrying.start()
        return kept


def keep_change(store: Store, change) -> None:
    """Keep a status change (after :func:`keep`)."""
    with _lock:
        _kept[_key(store)].add(change)


def keep_broken(store: Store, err: OSError, version: str, reason: str) -> None:
    """Keep the BROKEN marker of ``version`` that ``err`` did not let the store write."""
    with _lock:  # this process serves it no more; the marker comes later
        keep(store, err).broken[version] = reason


def keep_scores(store: Store, err: OSError, version: str, fresh: dict) -> None:
    """Keep the predictions ``fresh`` of ``version`` that ``err`` did not let the store write
    (at most :data:`MAX_UNSAVED_SCORES` per project; those it already keeps are replaced)."""
    with _lock:
        kept = keep(store, err)
        room = MAX_UNSAVED_SCORES - kept.n_scores()
        table = kept.scores.setdefault(version, {}) if fresh else {}
        for task, entry in fresh.items():
            if task in table or room > 0:
                room -= task not in table
                table[task] = entry


# -- written at last --------------------------------------------------------------------------
def written(store: Store, n_changes: int = 0, version: str | None = None) -> None:
    """The first ``n_changes`` kept status changes (or the predictions kept for
    ``version``) are on disk now: forget them, and say so when nothing is left."""
    with _lock:
        kept = _kept.get(_key(store))
        if kept is None:
            return
        events = sum(c.n for c in kept.changes[:n_changes] if isinstance(c, Events))
        del kept.changes[:n_changes]
        scores = len(kept.scores.pop(version, {})) if version is not None else 0
        done = kept.empty()
        if done:
            del _kept[_key(store)]
    if n_changes or scores:
        logger.info(
            "project %s: wrote %d status changes (%d annotation events) and %d predictions "
            "kept in memory while the disk was full",
            store.project,
            n_changes,
            events,
            scores,
        )
    if done:
        logger.warning(
            "project %s: the disk has room again: everything kept in memory since %s is written",
            store.project,
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(kept.since)),
        )


def write_unwritten(store: Store) -> bool:
    """Try to write what this process keeps of ``store``'s project: status changes,
    predictions, BROKEN markers. True when nothing is kept any more."""
    with _lock:
        kept = _kept.get(_key(store))
        if kept is None:
            return True
        broken = dict(kept.broken)
        versions = list(kept.scores)
        has_changes = bool(kept.changes)
    for version, reason in broken.items():
        directory = store.versions / version
        try:
            if directory.is_dir():
                atomic_write_json(directory / "BROKEN", {"reason": reason, "at": time.time()})
        except OSError as err:
            if not no_space(err):
                raise
            return False
        with _lock:
            kept.broken.pop(version, None)
    if has_changes:
        store.update_status()  # no change of its own: writes the kept ones
    for version in versions:
        store.store_scores(version, {})
    written(store)  # says so if this emptied it
    with _lock:
        return _key(store) not in _kept

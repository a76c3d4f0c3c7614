"""The project's annotated tasks as last read from Label Studio, kept beside its versions: what
a refresh (:mod:`backend.jobs.refresh`) trains the CRF on and scores, without reading the whole
project from Label Studio again (about 1.5 s at 1,000 tasks; docs/evaluation.md, "The refresh
without reading the project").

A training's read of the project replaces it (:func:`keep_project`); each rescore's read of the
changed tasks updates them (:func:`keep_tasks`); a deletion of annotations, whose webhook names
no task, drops it (:func:`forget`), and the next refresh reads the project. Per task the newest
read wins: a training whose read started before a rescore's keeps the rescore's task. Kept only
while the project's annotations are few enough to refresh
(:data:`~subregweigh.crf.CRF_FIRST_EXAMPLES`): beyond that no refresh reads it, and each
rescore would rewrite it. What Label Studio changed without a webhook (the backend down) is
seen by the next training.

A project weighing several labeling controls (issue 62) keeps each NER control's reading of its
tasks apart (``control``: its name; :func:`path`), what the refresh of that control's CRF reads;
a classification control keeps none (its scores are kept as they are).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

from backend.store.store import ProjectStore
from subregweigh.example import Example
from subregweigh.io.atomic import atomic_write_json
from subregweigh.io.labelstudio import LabelStudioTask

logger = logging.getLogger(__name__)

FILE = "tasks.json"


def path(store: ProjectStore, control: str | None = None) -> Path:
    """Where the tasks are kept: :data:`FILE`, or for ``control`` (of a project weighing several
    labeling controls) ``tasks.<hash of its name>.json`` (a name may hold any character)."""
    if control is None:
        return store.root / FILE
    return store.root / f"tasks.{hashlib.sha1(control.encode()).hexdigest()[:12]}.json"


def keep_project(
    store: ProjectStore,
    items: Sequence[LabelStudioTask],
    read_at: float,
    control: str | None = None,
) -> None:
    """Keep ``items``, the whole project read from Label Studio from ``read_at`` (``time.time()``
    before the read), in place of what is kept (``control``'s reading, of several): a task read
    later (a rescore's) stays."""
    _update(store, items, read_at, control, replace_all=True)


def keep_tasks(
    store: ProjectStore,
    asked: Iterable,
    items: Sequence[LabelStudioTask],
    read_at: float,
    control: str | None = None,
) -> None:
    """Update the tasks ``asked`` (ids) to ``items``, as read from ``read_at`` (``control``'s
    reading, of several): an asked task not among ``items`` (deleted, or no longer the
    project's) or without annotations is dropped. Nothing is kept before a project's read
    (:func:`keep_project`)."""
    _update(store, items, read_at, control, asked={str(task) for task in asked})


def forget(store: ProjectStore, control: str | None = None) -> None:
    """Drop what is kept (of ``control`` alone; None: every control's too): the next refresh
    reads the project from Label Studio."""
    if control is not None:
        path(store, control).unlink(missing_ok=True)
        return
    for kept in [store.root / FILE, *store.root.glob("tasks.*.json")]:
        kept.unlink(missing_ok=True)


def load(store: ProjectStore, control: str | None = None) -> list[LabelStudioTask] | None:
    """The annotated tasks kept (``control``'s reading, of several), in task order; None where
    nothing is kept (or it cannot be read: the caller reads the project)."""
    kept = _read(store, control)
    try:
        return None if kept is None else [_task(task_id, e) for task_id, e in kept.items()]
    except (KeyError, TypeError, ValueError) as err:
        _damaged(store, err)
        return None


def _read(store: ProjectStore, control: str | None = None) -> dict | None:
    """What is kept, task id -> :func:`_entry`; None where nothing is, or it is damaged (the
    next project read replaces it)."""
    try:
        kept = json.loads(path(store, control).read_text())["tasks"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as err:
        _damaged(store, err)
        return None
    if isinstance(kept, dict) and all(
        isinstance(e, dict) and isinstance(e.get("read_at"), (int, float)) for e in kept.values()
    ):
        return kept
    _damaged(store, "not a mapping of task ids to their reads")
    return None


def _damaged(store: ProjectStore, why) -> None:
    logger.warning("project %s: the tasks kept cannot be read (%s): read again", store.project, why)


def _update(
    store: ProjectStore,
    items: Sequence[LabelStudioTask],
    read_at: float,
    control: str | None = None,
    replace_all: bool = False,
    asked: set[str] = frozenset(),
) -> None:
    from subregweigh.crf import CRF_FIRST_EXAMPLES

    with store.locked("snapshot"):
        kept = _read(store, control)
        if kept is None and not replace_all:
            return  # no project read to update
        newer = {t: e for t, e in (kept or {}).items() if e["read_at"] > read_at}
        if replace_all:
            kept = {}
        for task in asked:
            kept.pop(task, None)
        kept.update((item.id, _entry(item, read_at)) for item in items if item.examples)
        kept.update(newer)
        kept = dict(sorted(kept.items(), key=lambda pair: _order(pair[0])))
        if sum(len(e["examples"]) for e in kept.values()) > CRF_FIRST_EXAMPLES:
            path(store, control).unlink(missing_ok=True)
            return
        try:
            atomic_write_json(path(store, control), {"tasks": kept})
        except OSError as err:  # a full disk: the refresh reads the project instead
            path(store, control).unlink(missing_ok=True)
            logger.warning("project %s: the tasks read are not kept: %s", store.project, err)


def _order(task_id: str):
    return (0, int(task_id), "") if task_id.isdigit() else (1, 0, task_id)


def _entry(item: LabelStudioTask, read_at: float) -> dict:
    return {
        "read_at": read_at,
        "text": item.text,
        "words": [list(w) for w in item.words],
        "examples": [
            {
                "id": ex.id,
                "words": list(ex.words),
                "label": list(ex.label),
                "source": ex.source,
                "annotator": ex.annotator,
            }
            for ex in item.examples
        ],
    }


def _task(task_id: str, entry: dict) -> LabelStudioTask:
    return LabelStudioTask(
        task_id,
        entry["text"],
        tuple((w, int(s), int(e)) for w, s, e in entry["words"]),
        tuple(
            Example(
                ex["id"],
                tuple(ex["words"]),
                tuple(ex["label"]),
                source=ex["source"],
                annotator=ex["annotator"],
            )
            for ex in entry["examples"]
        ),
    )

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
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence

from backend.store.store import ProjectStore
from subregweigh.example import Example
from subregweigh.io.atomic import atomic_write_json
from subregweigh.io.labelstudio import LabelStudioTask

logger = logging.getLogger(__name__)

FILE = "tasks.json"


def keep_project(store: ProjectStore, items: Sequence[LabelStudioTask], read_at: float) -> None:
    """Keep ``items``, the whole project read from Label Studio from ``read_at`` (``time.time()``
    before the read), in place of what is kept: a task read later (a rescore's) stays."""
    _update(store, items, read_at, replace_all=True)


def keep_tasks(
    store: ProjectStore, asked: Iterable, items: Sequence[LabelStudioTask], read_at: float
) -> None:
    """Update the tasks ``asked`` (ids) to ``items``, as read from ``read_at``: an asked task
    not among ``items`` (deleted, or no longer the project's) or without annotations is
    dropped. Nothing is kept before a project's read (:func:`keep_project`)."""
    _update(store, items, read_at, asked={str(task) for task in asked})


def forget(store: ProjectStore) -> None:
    """Drop what is kept: the next refresh reads the project from Label Studio."""
    (store.root / FILE).unlink(missing_ok=True)


def load(store: ProjectStore) -> list[LabelStudioTask] | None:
    """The annotated tasks kept, in task order; None where nothing is kept (or it cannot be
    read: the caller reads the project)."""
    kept = _read(store)
    try:
        return None if kept is None else [_task(task_id, e) for task_id, e in kept.items()]
    except (KeyError, TypeError, ValueError) as err:
        _damaged(store, err)
        return None


def _read(store: ProjectStore) -> dict | None:
    """What is kept, task id -> :func:`_entry`; None where nothing is, or it is damaged (the
    next project read replaces it)."""
    try:
        kept = json.loads((store.root / FILE).read_text())["tasks"]
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
    replace_all: bool = False,
    asked: set[str] = frozenset(),
) -> None:
    from subregweigh.crf import CRF_FIRST_EXAMPLES

    path = store.root / FILE
    with store.locked("snapshot"):
        kept = _read(store)
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
            forget(store)
            return
        try:
            atomic_write_json(path, {"tasks": kept})
        except OSError as err:  # a full disk: the refresh reads the project instead
            forget(store)
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

"""The changed tasks' scores: a task whose annotations changed, read again from Label Studio
within its project, the reviewers' decisions it shows kept, scored with the version serving now
and written as that version's one prediction of it. What the rescore job does with the tasks
its webhooks named (:mod:`backend.jobs.rescore`), and a training with those changed while it
trained (:mod:`backend.jobs.training`)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from backend.config.settings import Settings
from backend.labelstudio.client import LabelStudioAPI, annotator_names
from backend.labelstudio.tasks import TaskRead, name_annotators
from backend.review import reviews
from backend.serving.controls import read_each
from backend.serving.predictions import predict
from backend.store import snapshot
from backend.store.store import ProjectStore
from subregweigh.io.labelstudio import LabelingSpec

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChangedTasks:
    """The changed tasks of one job, read from Label Studio and parsed once, with what the job
    reads them with: what its steps (the snapshot, the decisions, the changed-labels check, the
    scores) share, so that none parses the tasks or derives the settings again.

    Attributes
    ----------
    settings : Settings
        The project's settings (:func:`backend.config.project_settings.effective`), derived
        once by the job.
    spec : LabelingSpec
        The project's labeling config, parsed with ``settings.controls_to_weigh``.
    read : TaskRead
        The tasks as Label Studio listed them (annotators named) and as parsed.
    slips : frozenset of str
        The slips whose weight the decisions these tasks show changed
        (:attr:`backend.review.reviews.Judged.slips`): the rescore rewrites their repeats.
    reads : tuple of TaskRead
        The tasks as each control weighed reads them (:meth:`LabelingSpec.each`; the first is
        ``read``): of one control, ``(read,)``.
    """

    settings: Settings
    spec: LabelingSpec
    read: TaskRead
    slips: frozenset = frozenset()
    reads: tuple = ()


def rescore_tasks(
    api: LabelStudioAPI, store: ProjectStore, settings: Settings, spec: LabelingSpec, tasks
) -> int:
    """Read ``tasks`` (ids) from Label Studio, within the project only, keep the reviewers'
    decisions they show (:func:`read_changed`), score them with the current version (only
    what changed is computed, see :func:`predict`) and make each score the task's one
    prediction of that version (:func:`write_scores`). Returns how many were written; a task
    the project does not hold (gone, or another project's) is skipped and logged.
    ``settings``: the project's (:func:`backend.config.project_settings.effective`)."""
    changed = read_changed(api, store, settings, spec, tasks)
    written = write_scores(api, store, changed)
    if changed.slips:  # their repeats are rewritten by the next rescore (a training's caller)
        moved = dict.fromkeys(sorted(changed.slips), 1)
        store.update_status(slips_pending=lambda pending: {**moved, **(pending or {})})
    return written


def read_changed(
    api: LabelStudioAPI, store: ProjectStore, settings: Settings, spec: LabelingSpec, tasks
) -> ChangedTasks:
    """``tasks`` (ids) as Label Studio lists them within the project, annotators named, parsed
    once; the reviewers' decisions they show are kept (:func:`backend.review.reviews.decide`,
    with the project's ``self_review``), and for NER the tasks as they now stand
    (:mod:`backend.store.snapshot`). ``settings``: the project's, as the job derived them
    (:func:`backend.config.project_settings.effective`)."""
    wanted = sorted({int(task) for task in tasks})
    read_at = time.time()
    read = api.project_tasks(int(store.project), wanted)
    missing = sorted(set(wanted) - {task["id"] for task in read})
    if missing:
        logger.warning(
            "project %s: %d tasks not rescored: Label Studio does not list them in project %s "
            "(deleted, or another project's): %s",
            store.project,
            len(missing),
            store.project,
            ", ".join(map(str, missing[:10])),
        )
    read = TaskRead.of(
        name_annotators(read, annotator_names(api, store.project)) if read else [], spec
    )
    reads = tuple(read_each(read.raw, spec, first=read)) if spec.several else (read,)
    keep_as_they_stand(store, spec, wanted, reads, read_at)
    version = store.current_version()
    slips: frozenset = frozenset()
    if read.raw and version is not None:
        slips = reviews.judge(
            store, version, spec, read, allow_self=settings.self_review, reads=reads
        ).slips
    return ChangedTasks(settings, spec, read, slips, reads)


def keep_as_they_stand(
    store: ProjectStore, spec: LabelingSpec, wanted, reads, read_at: float
) -> None:
    """Keep the tasks ``wanted`` (ids) as each NER control read them (``reads``, one per
    control of ``spec.each()``), from ``read_at``: the refresh after this rescore trains on
    them as they stand (:mod:`backend.store.snapshot`; of several controls, each its own)."""
    for control, read in zip(spec.each(), reads, strict=True):
        if control.task == "ner":
            name = control.from_name if spec.several else None
            snapshot.keep_tasks(store, wanted, read.items, read_at, control=name)


def write_scores(api: LabelStudioAPI, store: ProjectStore, changed: ChangedTasks) -> int:
    """Score the tasks ``changed`` (:func:`read_changed`) with the current version and make each
    score the task's one prediction of that version; how many were written."""
    read = changed.read
    with store.locked("writing"):  # not between a training's writes: one prediction per task
        results = predict(
            changed.settings,
            store.project,
            changed.spec,
            read,
            from_label_studio=True,
            reads=changed.reads or None,
        )
        written = [
            {"task": int(task["id"]), **result}
            for task, result in zip(read.raw, results, strict=True)
            if "score" in result
        ]
        api.replace_predictions(int(store.project), written)
    if written:
        logger.info(
            "project %s: rescored %d changed tasks with version %s: %s",
            store.project,
            len(written),
            written[0]["model_version"],
            ", ".join(f"task {w['task']} {w['score']:.3f}" for w in written[:10]),
        )
    return len(written)

"""Predictions of a project's tasks: per task, the stored prediction of the version serving now;
only tasks missing there (or changed since) are computed, and stored for the next call."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from backend.config.redact import printable
from backend.config.settings import Settings
from backend.labelstudio.tasks import TaskRead, fingerprint, score_tasks
from backend.review import copies, reviews
from backend.serving.controls import fingerprints, read_each, read_subset, score_several
from backend.serving.weighers import control_weighers, weigher
from backend.store.store import CorruptVersion, ProjectStore
from subregweigh.io.labelstudio import LabelingSpec
from subregweigh.learned import learned_in

logger = logging.getLogger(__name__)


UNTRAINED = "subregweigh-untrained"


def serving(store: ProjectStore, training: bool) -> dict:
    """What /status says serves ``store``'s project: the version, whether it is an early
    version (its ``early``: what it is) left by a training that did not finish (``training``:
    whether one runs now), and what its scouts learned of the annotations (``learned``,
    :meth:`subregweigh.learned.Learned.to_json`, or None): where too little, the message says
    so and on what the scores rest."""
    version = store.current_version()
    if version is None:
        return {"version": None, "message": "nothing yet: the first training publishes one"}
    early = store.meta(version).get("early")
    try:
        learned = learned_in(store.versions / version)
    except ValueError as err:  # a damaged file says nothing; the scores still serve
        logger.warning("project %s: %s", store.project, err)
        learned = None
    if not early:
        message = "a training's full version"
    elif training:
        message = f"an early version of the training running now ({early})"
    else:
        message = (
            f"an early version ({early}) of a training that did not finish: weaker than a full "
            "version; the next training replaces it"
        )
    if learned is not None and learned.too_little:
        message += f"; beware: {learned.message()}"
    meta = store.meta(version)
    for part in meta.get("weighers") or ():  # several labeling controls
        said = part.get("learned") or {}
        if said.get("too_little"):
            message += f"; beware, {part['control']!r}: {said.get('message')}"
    scale = meta.get("scale") or {}
    if scale:
        message += f"; {_scale_said(scale)}"
    return {
        "version": version,
        "early": early or None,
        "learned": learned.to_json() if learned is not None else None,
        "scale": scale or None,
        "message": message,
    }


def _scale_said(scale: dict) -> str:
    """The version's one scale (its meta's ``scale``, :mod:`backend.review.served`) in words:
    what a filter *score < 0.5* lists."""
    shares = []
    for control, kept in scale.items():
        whose = f"{control!r}'s annotations" if control else "the annotations"
        shares.append(f"{kept['share']:.1%} of {whose}")
    return (
        f"scores on one scale: {' and '.join(shares)} serve under 0.5, the share the version's "
        "suggestions label otherwise (its estimate of the error rate)"
    )


def controls(store: ProjectStore) -> dict:
    """What /status says of the labeling config's controls: those the serving version weighs
    and those it leaves alone (its meta's ``controls``,
    :meth:`~subregweigh.io.labelstudio.LabelingSpec.controls`), else a ``summary`` saying why
    they are not known yet."""
    version = store.current_version()
    known = store.meta(version).get("controls") if version is not None else None
    if known:
        return known
    return {
        "weighed": None,
        "summary": "known once a training has read the labeling config"
        if version is None
        else f"version {version} predates this record: the next training writes it",
    }


def model_version(settings: Settings, project: str | None) -> str:
    """The version ``project`` is served from, or :data:`UNTRAINED`."""
    version = ProjectStore(settings.model_dir, project).current_version() if project else None
    return version or UNTRAINED


def predict(
    settings: Settings,
    project: str | None,
    spec: LabelingSpec,
    tasks: TaskRead,
    from_label_studio: bool = False,
    reads: Sequence[TaskRead] | None = None,
) -> list[dict]:
    """One ``{"result", "score", "model_version"}`` per task of ``tasks`` (read once, by the
    caller: :meth:`TaskRead.of`; ``reads``: of several controls, each control's reading of
    them where the caller has it, :func:`~backend.serving.controls.read_each`), in order (no
    score, empty result for a task that cannot be read, and for every task before the first
    training). ``settings``: the project's
    (:func:`backend.config.project_settings.effective`), derived once by the caller.

    ``tasks`` come from a caller (``/predict``) unless ``from_label_studio`` (read from the
    project by the backend itself). A caller's tasks are scored and served, never stored: only
    tasks read from Label Studio change what the version holds (a made-up text or annotator
    sent to ``/predict`` must not replace a task's score, nor the regions a refresh writes), and
    only they set the baseline reviewers' decisions are judged against
    (:func:`backend.review.reviews.stamp_saved`). A task Label Studio changes reaches the store
    through its webhook's rescore."""
    store = ProjectStore(settings.model_dir, project) if project else None
    broken: set[str] = set()
    while True:  # a version found corrupt is marked BROKEN; then the next newest serves
        try:
            return _predict(settings, store, spec, tasks, from_label_studio, reads)
        except CorruptVersion as err:
            if err.version in broken:  # the marker did not take: do not loop
                raise
            broken.add(err.version)
            store.mark_broken(err.version, str(err))


def _predict(
    settings: Settings,
    store: ProjectStore | None,
    spec: LabelingSpec,
    tasks: TaskRead,
    from_label_studio: bool = False,
    reads: Sequence[TaskRead] | None = None,
) -> list[dict]:
    version = store.current_version() if store else None
    if version is None:
        logger.info(
            "project %s: no trained scout yet; returning empty predictions for %d tasks "
            "(train from the project's Model settings, or annotate %d tasks)",
            store.project if store else None,
            len(tasks.raw),
            settings.min_annotations,
        )
        return [{"result": [], "model_version": UNTRAINED} for _ in tasks.raw]
    stored = store.scores(version)
    parsed = tasks.parsed
    several = spec.several or bool(store.meta(version).get("weighers"))
    if several:  # one weigher per control (backend.serving.controls)
        if reads is None or len(reads) != len(spec.each()):
            reads = read_each(tasks.raw, spec, first=tasks)
        prints = fingerprints(reads)
        stale_at = [
            i
            for i, (item, now) in enumerate(zip(parsed.tasks, prints, strict=True))
            if item is not None and stored.get(item.id, {}).get("fingerprint") != now
        ]
        stale = [parsed.tasks[i] for i in stale_at]
    else:
        stale = [
            item
            for item in parsed.tasks
            if item is not None and stored.get(item.id, {}).get("fingerprint") != fingerprint(item)
        ]
    if stale:
        start = time.perf_counter()
        if several:
            only = [read_subset(read, stale_at) for read in reads]
            fresh = score_several(control_weighers(settings, store, version), spec, only)
        else:
            fresh = score_tasks(weigher(settings, store, version), spec, stale)
        note = "; a caller's tasks: served, not stored"
        if from_label_studio:
            reviews.stamp_saved(fresh, reviews.saved_times(tasks.raw), before=stored)
            saved = store.store_scores(version, _within_bound(store, version, stored, fresh))
            note = "" if saved else "; the disk is full: kept in memory, not stored"
        stored = {**stored, **fresh}  # served, whoever sent them
        logger.info(
            "project %s: computed %d of %d tasks in %.1f s (the rest served from storage)%s",
            store.project,
            len(fresh),
            len(tasks.raw),
            time.perf_counter() - start,
            note,
        )
    log_warnings(store.project, parsed.warnings)
    # a reviewer's confirmation serves score 1; the repeats of a fixed slip move up, and so do
    # the copies that contradict a decided one (their notes name each other)
    scales = reviews.version_scales(store, version)
    state = reviews.serving(store, stored, scales, copies.copies_view(store, version))
    out = []
    for item in parsed.tasks:
        entry = stored.get(item.id) if item is not None else None
        if entry is None:
            out.append({"result": [], "model_version": version})
        else:
            entry = reviews.serve(item.id, entry, state)
            out.append(
                {"result": entry["result"], "score": entry["score"], "model_version": version}
            )
    return out


# A version stores the scores of at most this many tasks beyond those it was trained with (new
# tasks a rescore read from Label Studio): what a project growing between trainings can make
# the backend keep is bounded.
MAX_NEW_TASKS = 50_000

_bound_warned: set[tuple[str, str]] = set()


def _within_bound(store: ProjectStore, version: str, stored: dict, fresh: dict) -> dict:
    """The part of ``fresh`` to store: every task ``version`` already holds, and new ones while
    it holds fewer than its trained tasks plus :data:`MAX_NEW_TASKS` (the rest is served, not
    stored; one WARNING per version)."""
    new = [task for task in fresh if task not in stored]
    limit = int(store.meta(version).get("n_tasks") or 0) + MAX_NEW_TASKS
    room = max(0, limit - len(stored))
    if len(new) <= room:
        return fresh
    kept = set(new[:room])
    if (store.project, version) not in _bound_warned:
        _bound_warned.add((store.project, version))
        logger.warning(
            "project %s: version %s already stores %d tasks (at most %d); scores of tasks "
            "beyond that are served but not stored",
            store.project,
            version,
            len(stored),
            limit,
        )
    return {task: e for task, e in fresh.items() if task in stored or task in kept}


# A request of 100,000 unreadable tasks logs this many of its warnings, then one line of the rest.
WARNINGS_SHOWN = 5


def log_warnings(project: str, warnings: Sequence[str]) -> None:
    """Log the first :data:`WARNINGS_SHOWN` of ``warnings`` and count the rest in one line."""
    for warning in warnings[:WARNINGS_SHOWN]:
        # Task data may hold lone surrogates (Label Studio stores what it is sent): escaped,
        # so that no log handler fails to encode the line.
        logger.warning("project %s: %s", project, printable(warning))
    if len(warnings) > WARNINGS_SHOWN:
        logger.warning(
            "project %s: and %d more warnings like these (%d in all)",
            project,
            len(warnings) - WARNINGS_SHOWN,
            len(warnings),
        )

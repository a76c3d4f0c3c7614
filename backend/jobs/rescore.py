"""Rescoring between trainings: a changed annotation's score follows it within seconds, and a
reviewer's fix moves the repeats of its slip up the queue."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from functools import partial

from backend.config import project_settings
from backend.config.settings import Settings
from backend.labelstudio.client import (
    LabelStudioAPI,
    until_reachable,
)
from backend.labelstudio.tasks import fingerprint, parse_label_config
from backend.queue import budget
from backend.review import copies, reviews, served
from backend.serving.changed import ChangedTasks, read_changed, write_scores
from backend.serving.controls import fingerprints
from backend.serving.publish import drop_superseded_predictions, serve_in_label_studio
from backend.serving.reasons import write_reasons
from backend.store.store import ProjectStore, retrain_due

logger = logging.getLogger(__name__)


# What a rescore runs after the changes when their labels changed: the refresh
# (backend.jobs.refresh.refresh_project), called as refresh(api, store, settings, spec,
# meanwhile=...). Given by whoever binds the job to its runner (backend.web.server): one job
# triggers another through it, never by importing it.
Refresh = Callable[..., dict]


def rescore_project(project: str, settings: Settings, refresh: Refresh | None = None) -> dict:
    """Score the tasks whose annotations changed (:meth:`ProjectStore.note_event`) with the
    version serving now, and replace their predictions in Label Studio: a changed annotation's
    score follows it within seconds instead of waiting for the next training.

    What every rescore job runs (:func:`run_queued_rescore` on rq workers). The tasks are taken
    from the status when the job starts; if it fails they are put back, and while Label Studio
    does not answer the job tries again (:func:`backend.labelstudio.client.until_reachable`), so
    they reach it once it is back. A version Label Studio was never given (a training's writes
    failed after it was published here) is written first: the queue and the backend serve one
    version. It runs within a training's wall time (``SRW_TRAINING_SECONDS``; past it, it fails as a
    training does); its memory is not watched: a rescore shares its process with trainings.

    ``refresh``: what refreshes the serving version when the changes' labels changed
    (:data:`Refresh`, the refresh job's ``refresh_project``; None: no refresh, the changed
    tasks alone are rescored).
    """
    with budget.within(settings.training_seconds, float("inf"), "the rescore"):
        return until_reachable(  # the log says it waits; the queue shows the old scores
            f"project {project}: the rescore of its changed tasks",
            lambda: _rescore(project, settings, refresh),
        )


def _rescore(project: str, settings: Settings, refresh: Refresh | None) -> dict:
    store = ProjectStore(settings.model_dir, project)
    version = store.current_version()
    if version is None:  # the first training scores them
        return {"rescored": 0}
    pending = store.take_inbox("rescore_pending")
    slips: dict = {}
    judged: dict = {}  # the slips this job's decisions moved, handed back by read_changed
    refreshed: dict = {}
    start = time.perf_counter()
    try:
        api = LabelStudioAPI(settings.label_studio_url, settings.label_studio_api_key)
        _catch_up(api, store, version)
        written = 0
        if pending:  # the decisions these tasks show add their fixes' slips
            ours = project_settings.effective(settings, store)  # once per job
            spec = parse_label_config(api.label_config(int(project)), ours.controls_to_weigh)
            linked_before = copies.copies_view(store, version)  # the copies before the changes
            changed = read_changed(api, store, ours, spec, pending)  # parsed once
            judged = dict.fromkeys(sorted(changed.slips), 1)
            write = _Once(partial(write_scores, api, store, changed))
            # a save that changed no label refreshes nothing; a refresh trains its CRF while
            # the changed tasks' own scores are computed and written
            if (
                refresh is not None
                and _labels_changed(store, version, changed)
                and not _training_due(store, ours)
            ):
                refreshed = _refresh(api, store, ours, spec, meanwhile=write, refresh=refresh)
            written = write()
        slips = {**judged, **store.take_inbox("slips_pending")}  # + a training's
        if not (pending or slips):
            return {"rescored": 0}
        if slips and not refreshed.get("refreshed"):  # a refresh wrote every task as served
            _move_up_repeats(api, store, version, slips, skip=pending)
        if pending and not refreshed.get("refreshed"):
            _rewrite_copies(api, store, version, pending, linked_before)
    except Exception as err:
        store.update_status(
            rescore_pending=lambda old: {**pending, **(old or {})},
            slips_pending=lambda old: {**judged, **slips, **(old or {})},
            # a refresh that served before the failure is still the version serving
            **({"last_refresh": refreshed} if refreshed.get("refreshed") else {}),
        )
        logger.error(
            "project %s: could not rescore %d changed tasks (kept for the next change): %s: %s",
            project,
            len(pending),
            type(err).__name__,
            err,
        )
        raise
    seconds = round(time.perf_counter() - start, 3)
    now = time.time()
    # What an annotator waits for: from the webhook of the oldest change to its new score.
    since_change = round(now - min(pending.values()), 3) if pending else None
    last = {
        "tasks": written,
        "version": version,
        "seconds": seconds,
        "since_change_seconds": since_change,
        "finished_at": now,
    }
    done = {"last_rescore": last}
    if pending and refreshed.get("refreshed"):  # until it served, its cleanup not counted
        since_change = round(refreshed["finished_at"] - min(pending.values()), 3)
        done["last_refresh"] = {**refreshed, "since_change_seconds": since_change}
    store.update_status(**done)  # one write: a reader never sees the refresh without its rescore
    if refreshed.get("refreshed"):
        _clean_up_after(api, store, refreshed["version"])
    if pending:  # why each changed task is flagged, in its data (write_reason; bounded)
        write_reasons(api, store, ours, first=pending)
    logger.info(
        "project %s: %d changed tasks rescored in %.1f s%s",
        project,
        written,
        seconds,
        f", {since_change:.1f} s after the oldest change" if pending else "",
    )
    return {"rescored": written, "seconds": seconds}


def _change_waits(store: ProjectStore) -> bool:
    """Whether a change waits for its rescore: the cleanup after a refresh stops for it (the
    next one deletes the rest), so that an edit waits for one delete at most (Label Studio 1.23
    takes some 4 s to delete a version's predictions of 1,000 tasks)."""
    return bool(store.inbox().rescore_pending)


def _clean_up_after(api: LabelStudioAPI, store: ProjectStore, version: str) -> None:
    """Delete the predictions of the versions the refreshed ``version`` supersedes (the one it
    replaced, at once: a task shows one prediction of this backend), once the status says the
    rescore and the refresh are done: the next change need not wait for the cleanup, and stops
    it after one delete (:func:`_change_waits`)."""
    drop_superseded_predictions(
        api, store, store.project, version, stop=partial(_change_waits, store)
    )


def _catch_up(api: LabelStudioAPI, store: ProjectStore, version: str) -> None:
    """Give Label Studio ``version`` (the one serving here) where a training published it but
    could not write it there (``scores_in_label_studio`` is another): its predictions, unless
    some are there already, and the project's model version. Not while a training runs: it
    writes its own."""
    status = store.status()
    if status.get("state") == "running" or status.get("scores_in_label_studio") in (None, version):
        return
    if api.model_versions(int(store.project)).get(version):
        api.set_model_version(int(store.project), version)
    else:
        scores, scales = store.scores(version), reviews.version_scales(store, version)
        serve_in_label_studio(api, store, store.project, version, scores, scales)
    store.update_status(scores_in_label_studio=version)
    logger.info(
        "project %s: version %s, serving here, is now Label Studio's too (it had %s)",
        store.project,
        version,
        status["scores_in_label_studio"],
    )


def _labels_changed(store: ProjectStore, version: str, changed: ChangedTasks) -> int:
    """How many of the ``changed`` tasks (as Label Studio lists them) hold other annotations
    than ``version`` stores for them: those its rescore will store anew (of several controls,
    under any control: :func:`backend.serving.controls.fingerprints`)."""
    stored = store.scores(version)
    if len(changed.reads) > 1:
        prints = fingerprints(changed.reads)
        return sum(
            item is not None and stored.get(item.id, {}).get("fingerprint") != now
            for item, now in zip(changed.read.parsed.tasks, prints, strict=True)
        )
    return sum(
        stored.get(item.id, {}).get("fingerprint") != fingerprint(item)
        for item in changed.read.items
    )


class _Once:
    """``fn()`` run at its first call; later calls return its result, or raise its error,
    again."""

    def __init__(self, fn: Callable[[], object]):
        self.fn, self.ran, self.error, self.result = fn, False, None, None

    def __call__(self):
        if not self.ran:
            self.ran = True
            try:
                self.result = self.fn()
            except BaseException as err:
                self.error = err
        if self.error is not None:
            raise self.error
        return self.result


def _training_due(store: ProjectStore, settings: Settings) -> bool:
    """Whether a training runs whose versions replace the one a refresh would make, or the
    changes counted so far start one (it needs the cores). ``settings``: the project's. A
    retrain lets the refresh run until it publishes its own version (its status's
    ``refresh_while_training``): a retrain publishes no early version, so the version serving
    until the retrain's is ready is refreshed after each change. A first training's early
    versions are not refreshable (:func:`backend.jobs.refresh._not_refreshable`), nor is a
    training's own version while it weighs its K candidates: they would complete the version
    the refresh replaced."""
    status = store.status()
    if status.get("state") == "running" and not status.get("refresh_while_training"):
        return True
    return retrain_due(status, settings.retrain_after)


def _refresh(
    api: LabelStudioAPI,
    store: ProjectStore,
    settings: Settings,
    spec,
    meanwhile: _Once,
    refresh: Refresh,
) -> dict:
    """``refresh`` (:func:`backend.jobs.refresh.refresh_project`), with the project's
    ``settings`` as this job derived them and its rescore as its ``meanwhile``: a failure of
    the refresh is logged and leaves the rescored version serving (the next change tries
    again); one of the rescore fails the job, as without a refresh."""
    try:
        return refresh(api, store, settings, spec, meanwhile=meanwhile)
    except Exception as err:
        if meanwhile.error is err:
            raise
        logger.warning(
            "project %s: the refresh after the changes failed (the version before it serves): "
            "%s: %s",
            store.project,
            type(err).__name__,
            err,
        )
        return {"refreshed": False, "reason": f"{type(err).__name__}: {err}"}


def run_queued_rescore(project: str, training: dict, refresh: Refresh | None = None) -> dict:
    """The rq job of a rescore, as :func:`backend.jobs.training.run_queued_training` is of a
    training (``refresh``, a module-level function, travels pickled by reference)."""
    return rescore_project(project, Settings.from_env(**training), refresh)


def _replace_served(api: LabelStudioAPI, store: ProjectStore, version: str, shown: Mapping) -> None:
    """Make each of ``shown`` (task id -> served entry) its task's one prediction of
    ``version``."""
    with store.locked("writing"):  # one prediction per task and version, as a rescore's
        api.replace_predictions(
            int(store.project),
            [
                {
                    "task": int(task),
                    "result": e["result"],
                    "score": e["score"],
                    "model_version": version,
                }
                for task, e in shown.items()
            ],
        )


def _move_up_repeats(
    api: LabelStudioAPI, store: ProjectStore, version: str, slips: Mapping, skip: Mapping
) -> int:
    """Rewrite, as served (:func:`backend.review.reviews.served_scores`), the predictions of the
    tasks whose stored annotation repeats one of the ``slips`` (``"word\\0type"`` keys) that a fix
    just made or that stopped counting (a fix reverted or withdrawn), but not those in
    ``skip`` (just rescored): a fix moves its slip's repeats up the queue at once,
    not at the next training. Returns how many were written."""
    new = Counter(tuple(key.split(served.SLIP_SEP, 1)) for key in slips)
    scores = store.scores(version)
    repeats = {
        task: entry
        for task, entry in scores.items()
        if task not in skip
        and any(served.slip_repeats(r, new) for r in entry.get("annotations") or ())
    }
    if not repeats:
        return 0
    shown = reviews.served_scores(store, repeats, reviews.version_scales(store, version))
    _replace_served(api, store, version, shown)
    logger.info(
        "project %s: %d tasks repeat a slip whose fix was made or undone (%s): rewritten as served",
        store.project,
        len(repeats),
        ", ".join(f"{w} as {t}" for w, t in sorted(new)[:5]),
    )
    return len(repeats)


def _by_id(task: str):
    return (len(task), task)  # Label Studio's ids are numbers: in their order


# A rescore rewrites the copies of its changed tasks, at most this many (an entity string in
# thousands of tasks): the rest take their notes and scores at the next refresh or training.
MAX_COPIES_REWRITTEN = 1_000


def _rewrite_copies(
    api: LabelStudioAPI,
    store: ProjectStore,
    version: str,
    changed: Mapping,
    before: copies.Copies,
) -> int:
    """Rewrite, as served, the predictions of the tasks linked to the ``changed`` ones (the
    same text, or an entity string: :func:`backend.review.copies.linked_tasks`), before the
    changes (``before``) or after them: a decision on one copy moves those that contradict it
    up the queue at once, and their notes name what the changed task now says (a fix
    suggested). At most :data:`MAX_COPIES_REWRITTEN`; how many were written."""
    after = copies.copies_view(store, version)
    targets = copies.linked_tasks(before, changed) | copies.linked_tasks(after, changed)
    if not targets:
        return 0
    whole = store.scores(version)
    chosen = sorted((t for t in targets if t in whole and t not in changed), key=_by_id)
    if len(chosen) > MAX_COPIES_REWRITTEN:
        logger.info(
            "project %s: %d copies of the changed tasks; the first %d rewritten now",
            store.project,
            len(chosen),
            MAX_COPIES_REWRITTEN,
        )
        chosen = chosen[:MAX_COPIES_REWRITTEN]
    if not chosen:
        return 0
    shown = reviews.served_scores(
        store,
        {t: whole[t] for t in chosen},
        reviews.version_scales(store, version),
        whole=whole,
        index=after,
    )
    _replace_served(api, store, version, shown)
    logger.info(
        "project %s: %d copies of the changed tasks rewritten as served: %s",
        store.project,
        len(chosen),
        ", ".join(f"task {t} {shown[t]['score']:.3f}" for t in chosen[:10]),
    )
    return len(chosen)

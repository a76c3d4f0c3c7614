"""What proves that a project and a task are this backend's to act on.

A request names a project and tasks; only Label Studio knows which project a task is in, and
whether a project exists and is connected to an ML backend. So before anything is read,
stored, scored, written or decided for them:

* a project gets a directory under MODEL_DIR only once Label Studio shows it exists (``/setup``
  storing its settings) or is connected to an ML backend (a webhook): made-up project ids make
  nothing (:func:`require_connected`, :func:`require_exists`);
* a task an event names must be one the serving version scored (read from the project's own
  export by a training, or from its own task list by a rescore), else Label Studio must list it
  in the project (:func:`require_task_of`). A task of another project is refused and logged
  with both project ids.

The other paths that take task ids ask Label Studio through the project's own task list
(:meth:`backend.labelstudio.LabelStudioAPI.project_tasks`): a rescore reads only the project's
tasks, predictions are written only to them, and ``/predict`` stores scores only of them.
"""

from __future__ import annotations

import logging

from backend.errors import Forbidden, NotConnected
from backend.labelstudio import LabelStudioAPI, LabelStudioUnavailable
from backend.scores_view import ScoresView
from backend.settings import Settings
from backend.store import ProjectStore

logger = logging.getLogger(__name__)

# A webhook waits on this (Label Studio gives a webhook 1 s): one attempt, a short timeout.
ASK_TIMEOUT = 5.0

# The task ids a version holds scores of (each proven the project's when stored), kept per
# process until its scores.json changes.
_scored_tasks = ScoresView(frozenset, 16)


def _api(settings: Settings) -> LabelStudioAPI:
    return LabelStudioAPI(
        settings.label_studio_url, settings.label_studio_api_key, retries=0, timeout=ASK_TIMEOUT
    )


def known_tasks(store: ProjectStore, version: str | None) -> frozenset:
    """The task ids ``version`` holds scores of (none without a version)."""
    return _scored_tasks(store, version) if version is not None else frozenset()


def require_connected(settings: Settings, store: ProjectStore) -> None:
    """:class:`NotConnected` unless ``store``'s project has a directory already or Label Studio
    shows it with an ML backend connected (one request, only for a project new here)."""
    if store.root.is_dir():
        return
    if not _api(settings).project_connected(int(store.project)):
        logger.warning(
            "project %s: refused: Label Studio has no such project with an ML backend connected",
            store.project,
        )
        raise NotConnected(
            f"project {store.project} is not connected to an ML backend in Label Studio; "
            "nothing is kept for it"
        )


def require_exists(settings: Settings, store: ProjectStore) -> None:
    """:class:`NotConnected` unless ``store``'s project has a directory already or Label Studio
    has it (``/setup`` runs while Label Studio connects, before the connection is listed)."""
    if store.root.is_dir():
        return
    try:
        _api(settings).label_config(int(store.project))
    except LabelStudioUnavailable as err:
        if "HTTP 404" not in str(err):
            raise
        logger.warning("project %s: refused: Label Studio has no such project", store.project)
        raise NotConnected(f"Label Studio has no project {store.project}") from None


def tasks_of(settings: Settings, store: ProjectStore, tasks) -> set[str]:
    """Which of ``tasks`` (ids) Label Studio lists in ``store``'s project (nothing of another
    project is read)."""
    listed = _api(settings).tasks_in_project(int(store.project), [int(t) for t in tasks])
    return {str(task) for task in listed}


def require_task_of(
    settings: Settings, store: ProjectStore, task: str, claimed: str | None = None
) -> None:
    """:class:`Forbidden` unless ``task`` is a task of ``store``'s project: one the serving
    version scored, or one Label Studio lists in the project. ``claimed``: the project the
    request said the task is in, for the log."""
    if task in known_tasks(store, store.current_version()):
        return
    if tasks_of(settings, store, [task]):
        return
    logger.warning(
        "project %s: refused an event naming task %s, which Label Studio does not list in "
        "project %s (the event says it is project %s's)",
        store.project,
        task,
        store.project,
        claimed or "unknown",
    )
    raise Forbidden(f"task {task} is not a task of project {store.project}")

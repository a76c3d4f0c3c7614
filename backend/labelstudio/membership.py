"""What proves that a project and a task are this backend's to act on.

A request names a project and tasks; only Label Studio knows which project a task is in, and
whether a project exists and is connected to an ML backend. So before anything is read,
stored, scored, written or decided for them:

* a project gets a directory under MODEL_DIR only once Label Studio shows it exists (``/setup``
  storing its settings) or is connected to an ML backend (a webhook): made-up project ids make
  nothing (:func:`require_connected`, :func:`require_exists`);
* a task an event names is one the serving version scored (read from the project's own export
  by a training, or from its own task list by a rescore), or it waits for the rescore, which
  reads the project's own task list with it as the selection: a task of another project is
  never read, and is logged there as not in the project
  (:func:`backend.serving.changed.read_changed`). No request thread waits on Label Studio for an
  event.

The other paths that take task ids ask Label Studio through the project's own task list
(:meth:`backend.labelstudio.client.LabelStudioAPI.project_tasks`): a rescore reads only the
project's tasks, predictions are written only to them, and ``/predict`` stores nothing.
"""

from __future__ import annotations

import logging

from backend.config.settings import Settings
from backend.labelstudio.client import LabelStudioAPI, LabelStudioUnavailable
from backend.store.store import ProjectStore

logger = logging.getLogger(__name__)


class NotConnected(LookupError):
    """A project this backend does not serve (not in Label Studio, or not connected to an ML
    backend there); becomes a 404 with this message, and nothing is stored for it."""


# What a request thread may wait on Label Studio, in all (one attempt; Label Studio gives a
# webhook 1 s and /setup 3 s): asked only for a project new here.
ASK_TIMEOUT = 2.0


def _api(settings: Settings) -> LabelStudioAPI:
    return LabelStudioAPI(
        settings.label_studio_url,
        settings.label_studio_api_key,
        retries=0,
        timeout=ASK_TIMEOUT,
        deadline=ASK_TIMEOUT,
    )


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

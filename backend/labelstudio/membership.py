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

import hashlib
import logging
import threading
import time

from backend.config.redact import redact
from backend.config.settings import Settings
from backend.labelstudio.client import (
    LabelStudioAPI,
    LabelStudioUnavailable,
    LabelStudioUnreachable,
)
from backend.store.store import ProjectStore

logger = logging.getLogger(__name__)


class NotConnected(LookupError):
    """A project this backend does not serve (not in Label Studio, or not connected to an ML
    backend there); becomes a 404 with this message, and nothing is stored for it."""


class LabelStudioRefused(RuntimeError):
    """The backend's own Label Studio address or token does not work (a 401/403, or no answer):
    becomes a 502 whose reason phrase is this sentence, the part Label Studio 1.23 shows."""


# Seconds a credentials check of one project is remembered: Label Studio calls /setup on every
# view of a project's connection, within its 3 s.
CHECK_SECONDS = 60.0
_checked: dict[tuple, tuple[float, str | None, dict | None]] = {}
_checked_lock = threading.Lock()


# What a request thread may wait on Label Studio, in all (one attempt; Label Studio gives a
# webhook 1 s and /setup 3 s): asked only for a project new here.
ASK_TIMEOUT = 2.0


def request_api(settings: Settings) -> LabelStudioAPI:
    """A client a request thread may use: one attempt, :data:`ASK_TIMEOUT` in all."""
    return _api(settings)


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
    try:
        connected = _api(settings).project_connected(int(store.project))
    except LabelStudioUnavailable as err:
        _refuse_credentials(settings, err)
        raise
    if not connected:
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
            _refuse_credentials(settings, err)
            raise
        logger.warning("project %s: refused: Label Studio has no such project", store.project)
        raise NotConnected(f"Label Studio has no project {store.project}") from None


def credentials_problem(settings: Settings, err: Exception) -> str | None:
    """The sentence that says what is wrong with the backend's Label Studio address or token,
    from ``err`` raised by a call to it; None when ``err`` says they work (a 404: the token was
    accepted). Never holds the token, nor a password in the URL."""
    url = redact(settings.label_studio_url)
    status = getattr(err, "status", None)
    if status in (401, 403):
        return (
            f"Label Studio at {url} refused the backend's token (HTTP {status}): set "
            "LABEL_STUDIO_API_KEY to a token of this Label Studio"
        )
    if isinstance(err, LabelStudioUnreachable):
        why = f"HTTP {status}" if status is not None else str(err).split("attempts: ", 1)[-1]
        return (
            f"Label Studio at {url} did not answer the backend ({why}): set LABEL_STUDIO_URL to "
            "the address where the backend reaches this Label Studio"
        )
    if not url or not settings.label_studio_api_key:
        return str(err)
    return None


def check_credentials(settings: Settings, project: int) -> str | None:
    """One ``GET /api/projects/P`` with the backend's own address and token (one attempt, at
    most :data:`ASK_TIMEOUT` s): None when they work, else the sentence saying what is wrong.
    The answer is remembered :data:`CHECK_SECONDS` s per address, token and project, with the
    project's counts (:func:`checked_counts`)."""
    key = _check_key(settings, project)
    now = time.monotonic()
    with _checked_lock:
        seen = _checked.get(key)
        if seen is not None and now - seen[0] < CHECK_SECONDS:
            return seen[1]
    counts = None
    try:
        counts = _api(settings).project_counts(int(project))
        problem = None
    except LabelStudioUnavailable as err:
        problem = credentials_problem(settings, err)
    with _checked_lock:
        if len(_checked) > 10_000:  # one entry per project and token: bounded all the same
            _checked.clear()
        _checked[key] = (now, problem, counts)
    if problem:
        logger.warning("project %s: %s", project, problem)
    return problem


def _check_key(settings: Settings, project: int) -> tuple:
    key_hash = hashlib.sha256(settings.label_studio_api_key.encode()).hexdigest()
    return (settings.label_studio_url, key_hash, int(project))


def checked_counts(settings: Settings, project: int) -> dict | None:
    """The counts :func:`check_credentials` read of ``project`` within :data:`CHECK_SECONDS` s
    (:meth:`LabelStudioAPI.project_counts`), or None; asks nothing."""
    with _checked_lock:
        seen = _checked.get(_check_key(settings, project))
    if seen is None or time.monotonic() - seen[0] >= CHECK_SECONDS:
        return None
    return seen[2]


def require_credentials(settings: Settings, project: int) -> None:
    """:class:`LabelStudioRefused` when :func:`check_credentials` finds a problem."""
    problem = check_credentials(settings, project)
    if problem:
        raise LabelStudioRefused(problem)


def _refuse_credentials(settings: Settings, err: Exception) -> None:
    """:class:`LabelStudioRefused` when ``err`` says the backend's address or token does not
    work; else nothing (the caller raises ``err``)."""
    problem = credentials_problem(settings, err)
    if problem:
        raise LabelStudioRefused(problem) from None


def project_counts(settings: Settings, project: int) -> dict:
    """``project``'s config and counts as :meth:`LabelStudioAPI.project_counts` reads them, with
    ``annotated``: how many tasks hold an annotation, ground truth included (a second request
    only when the project has annotations Label Studio's own count leaves out). One attempt of
    at most :data:`ASK_TIMEOUT` s each; :class:`LabelStudioRefused` when the backend's address or
    token does not work, :class:`NotConnected` for a project Label Studio does not have."""
    api = _api(settings)
    try:
        counts = api.project_counts(project)
        annotated = counts["num_tasks_with_annotations"]
        if counts["total_annotations_number"] > annotated:  # ground truth, or several per task
            annotated = api.annotated_tasks(project)
    except LabelStudioUnavailable as err:
        if err.status == 404:
            raise NotConnected(f"Label Studio has no project {project}") from None
        _refuse_credentials(settings, err)
        raise
    return {**counts, "annotated": annotated}


def startup_check(settings: Settings) -> str:
    """At start-up: whether Label Studio at the backend's address takes its token (one
    ``whoami`` request, at most :data:`ASK_TIMEOUT` s), as one line for the log, logged at INFO
    when it does and at ERROR (with what to set) when it does not. Never holds the token."""
    try:
        user = _api(settings).whoami()
    except LabelStudioUnavailable as err:
        problem = credentials_problem(settings, err) or str(err)
        line = f"Label Studio credentials do not work: {problem}"
        logger.error("%s", line)
        return line
    line = f"Label Studio at {settings.label_studio_url} takes the backend's token (user {user})"
    logger.info("%s", line)
    return line

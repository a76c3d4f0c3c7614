"""Every call the backend makes to Label Studio, through label-studio-sdk, with retries.

A training job runs long after the webhook that started it, so it talks to Label Studio with
LABEL_STUDIO_URL / LABEL_STUDIO_API_KEY from the environment, not the request's credentials.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from backend.labelstudio.deadline import deadline_client

logger = logging.getLogger(__name__)

T = TypeVar("T")
# Label Studio 1.23's import view (its default, legacy path) reloads every task id of the project
# and recounts every task's annotations and predictions once per request, whatever the request
# carries (one import of 100 predictions: 0.90 s in a 1,000-task project, 40.08 s in a 50,000-task
# one): k requests cost k times the project, so batches of a fixed count grow with the square of
# the project. One request per write is linear (benchmarks/prediction_writes.py, 50,000 tasks
# back to back: 48.8 s in one request, 406.6 s in 10 of 5,000). A write is
# cut only where its body would pass this many bytes (Label Studio's own limit,
# DATA_UPLOAD_MAX_MEMORY_SIZE, is 250 MiB by default; 50,000 NER predictions are 15.7 MiB), or
# where a proxy answers 413.
PREDICTION_REQUEST_BYTES = 64 * 2**20
# The SDK would retry on its own inside each of our attempts; one layer of backoff, ours.
ONCE = {"max_retries": 0}
# A timed-out import may still land, and its retry would then add a second prediction per task
# (which blurs the score Label Studio averages), so imports get time to finish.
IMPORT_ONCE = {"max_retries": 0, "timeout": 600.0}
# The export of a large project is one long request (14,000 tasks: about a minute here).
EXPORT_ONCE = {"max_retries": 0, "timeout": 600.0}
# Task ids per request when reading chosen tasks of a project (they travel in the URL's query).
SELECTED_PER_REQUEST = 200


class LabelStudioUnavailable(RuntimeError):
    """Label Studio could not be reached or refused a call, after retries. ``status``: the HTTP
    status of Label Studio's last answer (None when it did not answer)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class LabelStudioUnreachable(LabelStudioUnavailable):
    """Label Studio did not answer, or answered with a server error, after retries: worth
    trying again later (a refusal, 4xx, is not)."""


# While Label Studio does not answer, a job that holds changes for it (a rescore's scores, a
# training's version) tries again after these seconds, some 8 minutes in all: what it holds
# reaches Label Studio once it is back, not at the next change.
UNREACHABLE_RETRY_SECONDS = (15, 30, 60, 120, 240)


def until_reachable(
    what: str, fn: Callable[[], T], on_wait: Callable[[str], object] | None = None
) -> T:
    """``fn()``, called again after each of :data:`UNREACHABLE_RETRY_SECONDS` while it raises
    :class:`LabelStudioUnreachable` (then that error); the log, and ``on_wait(message)`` where
    given, say so first."""
    for wait in (*UNREACHABLE_RETRY_SECONDS, None):
        try:
            return fn()
        except LabelStudioUnreachable as err:
            if wait is None:
                raise
            message = f"{what}: Label Studio is unreachable; tried again in {wait} s ({err})"
            logger.warning("%s", message)
            if on_wait is not None:
                on_wait(message)
            time.sleep(wait)
    raise AssertionError("the loop returns or raises")


def _describe(err: Exception, body: bool = True) -> str:
    """``err`` in a line; ``body=False`` leaves out what Label Studio answered (it may repeat
    what was sent, a credential say)."""
    status = getattr(err, "status_code", None)
    if status is not None:
        return (
            f"HTTP {status}: {str(getattr(err, 'body', None))[:300]}" if body else f"HTTP {status}"
        )
    return f"{type(err).__name__}: {str(err)[:300]}"


def _field(task, name: str):
    return task.get(name) if isinstance(task, dict) else getattr(task, name, None)


def _plain_task(task) -> dict:
    """A task, exported (a dict) or read through the SDK (a model), as the plain dict the
    backend reads: ``id``, ``data``, ``annotations``."""
    if not isinstance(task, dict):
        task = {"id": task.id, "data": task.data, "annotations": task.annotations}
    return {
        "id": task["id"],
        "data": task.get("data") or {},
        "annotations": [
            a if isinstance(a, dict) else a.dict() for a in (task.get("annotations") or [])
        ],
    }


def _batches(predictions: Sequence[dict], limit: int) -> list[list[dict]]:
    """``predictions`` in order, cut where a batch's JSON body would pass ``limit`` bytes."""
    batches, batch, size = [], [], 2  # the list's brackets
    for prediction in predictions:
        more = len(json.dumps(prediction, default=str)) + 2  # its comma and space
        if batch and size + more > limit:
            batches.append(batch)
            batch, size = [], 2
        batch.append(prediction)
        size += more
    return [*batches, batch] if batch else batches


_REFUSED = "refused"  # an import Label Studio refused whole as invalid (HTTP 400)
# Seconds one request to Label Studio may take in all (a job's: an export of a large project
# is one request); a request thread's asks have their own, shorter (backend.labelstudio.membership).
REQUEST_DEADLINE = 300.0


class LabelStudioAPI:
    """A thin, retrying client.

    Parameters
    ----------
    url, api_key : str
        Label Studio's address and a legacy token or personal access token.
    retries : int, default=4
        Attempts after the first, with exponential backoff starting at ``backoff`` seconds.
    timeout : float, default=60.0
        Seconds each read may wait.
    deadline : float, default=:data:`REQUEST_DEADLINE`
        Seconds one request may take in all, body included (:mod:`backend.labelstudio.deadline`): a
        Label Studio that trickles its answer cannot hold a thread longer.
    """

    def __init__(
        self,
        url: str,
        api_key: str,
        retries: int = 4,
        backoff: float = 1.0,
        timeout: float = 60.0,
        deadline: float | None = None,
    ):
        if not url or not api_key:
            raise LabelStudioUnavailable(
                "LABEL_STUDIO_URL and LABEL_STUDIO_API_KEY must be set for the backend to read "
                "annotations and write predictions"
            )
        from label_studio_sdk.client import LabelStudio

        self.url = url
        deadline = REQUEST_DEADLINE if deadline is None else deadline
        timeout = min(timeout, deadline)
        self.client = LabelStudio(
            base_url=url,
            api_key=api_key,
            timeout=timeout,
            httpx_client=deadline_client(deadline, timeout),
        )
        self.retries = retries
        self.backoff = backoff

    def _call(self, what: str, fn: Callable[[], T], bodies: bool = True) -> T:
        """``fn()``, retried; ``bodies=False``: errors say the status, not Label Studio's answer
        (for calls that send a credential)."""
        from label_studio_sdk.core.api_error import ApiError

        for attempt in range(self.retries + 1):
            try:
                return fn()
            except ApiError as err:
                # 4xx other than 429 will not improve by retrying.
                if (
                    err.status_code is not None
                    and 400 <= err.status_code < 500
                    and err.status_code != 429
                ):
                    raise LabelStudioUnavailable(
                        f"Label Studio refused to {what}: {_describe(err, bodies)}",
                        status=err.status_code,
                    ) from None
                last = err
            except Exception as err:  # connection refused, timeouts, DNS...
                last = err
            if attempt < self.retries:
                delay = self.backoff * 2**attempt
                logger.warning(
                    "could not %s (%s); retrying in %.0f s", what, _describe(last, bodies), delay
                )
                time.sleep(delay)
        raise LabelStudioUnreachable(
            f"could not {what} at {self.url} after {self.retries + 1} attempts: "
            f"{_describe(last, bodies)}",
            status=getattr(last, "status_code", None),
        )

    def label_config(self, project: int) -> str:
        project_ = self._call(
            f"read project {project}",
            lambda: self.client.projects.get(id=project, request_options=ONCE),
        )
        return project_.label_config

    def project_counts(self, project: int) -> dict:
        """``project``'s labeling config and Label Studio's counts (``GET /api/projects/P``):
        ``label_config``, ``task_number``, ``num_tasks_with_annotations`` (tasks with an
        annotation that is not ground truth) and ``total_annotations_number`` (ground truth
        included). Errors name the status only (the call carries the token)."""
        project_ = self._call(
            f"read project {project}",
            lambda: self.client.projects.get(id=project, request_options=ONCE),
            bodies=False,
        )
        return {
            "label_config": project_.label_config,
            "task_number": project_.task_number or 0,
            "num_tasks_with_annotations": project_.num_tasks_with_annotations or 0,
            "total_annotations_number": project_.total_annotations_number or 0,
        }

    def annotated_tasks(self, project: int) -> int:
        """How many tasks of ``project`` hold an annotation that is not cancelled, ground truth
        included (imported annotations are ground truth, which ``num_tasks_with_annotations``
        leaves out): one Data Manager query with a filter, the tasks themselves not read."""
        query = {
            "filters": {
                "conjunction": "and",
                "items": [
                    {
                        "filter": "filter:tasks:total_annotations",
                        "operator": "greater",
                        "type": "Number",
                        "value": 0,
                    }
                ],
            }
        }
        found = self._call(
            f"count the annotated tasks of project {project}",
            lambda: self._raw(
                "GET",
                "api/tasks",
                params={
                    "project": project,
                    "page_size": 1,
                    "fields": "task_only",
                    "query": json.dumps(query),
                },
            ),
            bodies=False,
        )
        return int(found.get("total") or 0)

    def whoami(self) -> str:
        """The email (or username) of the token's user (``GET /api/current-user/whoami``);
        errors name the status only."""
        user = self._call(
            "read the token's user",
            lambda: self.client.users.whoami(request_options=ONCE),
            bodies=False,
        )
        return user.email or user.username or str(user.id)

    def set_label_config(self, project: int, config: str) -> None:
        """Save ``config`` as ``project``'s labeling config (``PATCH /api/projects/P``). Only
        :mod:`backend.labelstudio.review_control` calls it, on the lead's ``--apply``: the backend
        itself never changes a config."""
        self._call(
            f"change the labeling config of project {project}",
            lambda: self.client.projects.update(
                id=project, label_config=config, request_options=ONCE
            ),
        )

    def tasks(self, project: int) -> list[dict]:
        """All tasks of ``project`` with their annotations, as plain dicts, in task id order.

        Read with Label Studio's JSON export of all tasks: annotations come prefetched, where
        the task list's ``fields=all`` computes every Data Manager column of every task
        (benchmarks/fetch.py, 14,000 tasks: 56.2 s against 137.9 s). Label Studio Enterprise
        answers the export with 404; then the task list.
        """
        from label_studio_sdk.core.api_error import ApiError

        def export():
            try:
                chunks = self.client.projects.exports.download_sync(
                    id=project,
                    download_all_tasks=True,
                    export_type="JSON",
                    request_options=EXPORT_ONCE,
                )
                return json.loads(b"".join(chunks))
            except ApiError as err:
                if err.status_code == 404:
                    return None
                raise

        def listed():
            pages = self.client.tasks.list(
                project=project, fields="all", page_size=500, request_options=ONCE
            )
            return list(pages)

        found = self._call(f"export the tasks of project {project}", export)
        if found is None:
            logger.info("project %s: no export here (404); reading the task list", project)
            found = self._call(f"list the tasks of project {project}", listed)
        return sorted((_plain_task(task) for task in found), key=lambda task: task["id"])

    def project_tasks(self, project: int, ids: Iterable[int], fields: str = "all") -> list[dict]:
        """The tasks of ``project`` among ``ids``, as :meth:`tasks` lists them, in id order.

        Asked of ``project``'s own task list with ``ids`` as its selection (the Data Manager's
        ``selectedItems``), so a task of another project is never read: it is simply not in the
        answer. ``fields="task_only"`` leaves out what the Data Manager computes (annotations
        included), for when only membership matters."""
        wanted = sorted({int(task) for task in ids})
        found: list = []
        for start in range(0, len(wanted), SELECTED_PER_REQUEST):
            chunk = wanted[start : start + SELECTED_PER_REQUEST]
            query = json.dumps({"selectedItems": {"all": False, "included": chunk}})

            def listed(query=query, size=len(chunk)):
                pages = self.client.tasks.list(
                    project=project,
                    query=query,
                    fields=fields,
                    page_size=size,
                    request_options=ONCE,
                )
                return list(pages)

            found += self._call(f"read {len(chunk)} tasks of project {project}", listed)
        mine = [
            _plain_task(task)
            for task in found
            if _field(task, "project") in (None, project) and _field(task, "id") in wanted
        ]
        return sorted(mine, key=lambda task: task["id"])

    def tasks_in_project(self, project: int, ids: Iterable[int]) -> set[int]:
        """Which of ``ids`` are tasks of ``project`` (one request per
        :data:`SELECTED_PER_REQUEST` ids; nothing of another project is read)."""
        return {task["id"] for task in self.project_tasks(project, ids, fields="task_only")}

    def project_connected(self, project: int) -> bool:
        """Whether ``project`` exists in Label Studio with at least one ML backend connected
        (False for a project Label Studio does not have)."""
        try:
            return bool(self.ml_backends(project))
        except LabelStudioUnavailable as err:
            if "HTTP 404" in str(err):
                return False
            raise

    def users(self) -> dict[int, str]:
        """User id -> email, for naming annotators (an annotation's ``completed_by`` is an id)."""
        listed = self._call("list the users", lambda: self.client.users.list(request_options=ONCE))
        return {user.id: user.email for user in listed if user.id is not None and user.email}

    def write_predictions(self, project: int, predictions: Sequence[dict]) -> set[int]:
        """Import ``{task, result, score, model_version}`` dicts in as few requests as Label
        Studio takes (one, up to :data:`PREDICTION_REQUEST_BYTES`; a batch refused with 413 is
        halved), idempotently: an attempt after a failed one first drops the tasks that already
        have a prediction of that model version (a timed-out import may have landed), so a
        retry never adds a second prediction of one version to a task.

        Label Studio refuses a whole import (HTTP 400) for one task it no longer holds (deleted
        since it was scored): then the batch's tasks the project no longer lists are left out
        (a WARNING names them) and the others written. Returns the ids left out, for the caller
        to drop from its store."""
        todo = _batches(predictions, PREDICTION_REQUEST_BYTES)
        gone: set[int] = set()
        while todo:
            batch = todo.pop(0)
            sent = self._import(project, batch)
            if sent == _REFUSED:
                listed = self.tasks_in_project(project, [p["task"] for p in batch])
                missing = {p["task"] for p in batch} - listed
                if not missing:
                    raise LabelStudioUnavailable(
                        f"Label Studio refused to write {len(batch)} predictions to project "
                        f"{project} (HTTP 400), and every one of their tasks is in the project"
                    )
                logger.warning(
                    "project %s: %d tasks are no longer in the project (deleted): their "
                    "predictions are left out, the other %d written: %s",
                    project,
                    len(missing),
                    len(batch) - len(missing),
                    ", ".join(map(str, sorted(missing)[:10])),
                )
                gone |= missing
                rest = [p for p in batch if p["task"] not in missing]
                if rest:
                    todo.insert(0, rest)
                continue
            if sent:
                continue
            if len(batch) == 1:
                raise LabelStudioUnavailable(
                    f"Label Studio (or a proxy before it) refused to write a prediction of task "
                    f"{batch[0]['task']} to project {project} as too large (HTTP 413)"
                )
            half = len(batch) // 2
            logger.warning(
                "project %s: an import of %d predictions was refused as too large (HTTP 413); "
                "sending them in two",
                project,
                len(batch),
            )
            todo[:0] = [batch[:half], batch[half:]]
        return gone

    def _import(self, project: int, batch: list[dict]):
        """One import of ``batch``, retried idempotently; False if refused as too large,
        :data:`_REFUSED` if refused as invalid (HTTP 400: nothing landed)."""
        from label_studio_sdk.core.api_error import ApiError

        attempts = 0

        def send():
            nonlocal attempts
            attempts += 1
            todo = batch if attempts == 1 else self._not_yet_written(project, batch)
            if todo:
                try:
                    self.client.projects.import_predictions(
                        id=project, request=todo, request_options=IMPORT_ONCE
                    )
                except ApiError as err:
                    if err.status_code == 413:  # refused before reading: nothing landed
                        return False
                    if err.status_code == 400:  # refused whole: a task it does not hold?
                        return _REFUSED
                    raise
            if len(todo) < len(batch):
                logger.info(
                    "project %s: %d of %d predictions had landed before the retry; "
                    "imported the other %d",
                    project,
                    len(batch) - len(todo),
                    len(batch),
                    len(todo),
                )
            return True

        return self._call(f"write {len(batch)} predictions to project {project}", send)

    def _not_yet_written(self, project: int, batch: Sequence[dict]) -> list[dict]:
        """The predictions of ``batch`` whose task has none of their model version yet."""
        versions = {p["model_version"] for p in batch}
        written = {
            (p.task, p.model_version)
            for p in self.client.predictions.list(project=project, request_options=EXPORT_ONCE)
            if p.model_version in versions
        }
        return [p for p in batch if (p["task"], p["model_version"]) not in written]

    def replace_predictions(self, project: int, predictions: Sequence[dict]) -> None:
        """Make each ``{task, result, score, model_version}`` the task's one prediction of its
        model version: the existing one is updated (extras deleted), or one is created. Label
        Studio's prediction score averages every prediction of the project's version, so an
        added second one would blur the new score with the old. Only tasks of ``project`` are
        written: the others are skipped with a WARNING."""
        if not predictions:
            return
        in_project = self.tasks_in_project(project, [p["task"] for p in predictions])
        foreign = sorted({p["task"] for p in predictions} - in_project)
        if foreign:
            logger.warning(
                "project %s: %d predictions not written: their tasks are not in project %s: %s",
                project,
                len(foreign),
                project,
                ", ".join(map(str, foreign[:10])),
            )
        for new in [p for p in predictions if p["task"] in in_project]:
            task, version = new["task"], new["model_version"]
            mine = [
                p
                for p in self._call(
                    f"list the predictions of task {task}",
                    lambda task=task: self.client.predictions.list(task=task, request_options=ONCE),
                )
                if p.model_version == version
            ]
            for extra in mine[1:]:
                self._call(
                    f"delete prediction {extra.id} of task {task}",
                    lambda extra=extra: self.client.predictions.delete(
                        id=extra.id, request_options=ONCE
                    ),
                )
            if mine:
                self._call(
                    f"update prediction {mine[0].id} of task {task}",
                    lambda first=mine[0], new=new: self.client.predictions.update(
                        id=first.id,
                        result=new["result"],
                        score=new["score"],
                        request_options=ONCE,
                    ),
                )
            else:
                self._call(
                    f"create a prediction of task {task}",
                    lambda new=new: self.client.predictions.create(
                        task=new["task"],
                        result=new["result"],
                        score=new["score"],
                        model_version=version,
                        request_options=ONCE,
                    ),
                )

    def set_model_version(self, project: int, version: str) -> None:
        """Make ``version`` the project's model version, so the Data Manager's prediction score
        (which counts only that version's predictions) sorts by our scores."""
        self._call(
            f"set the model version of project {project}",
            lambda: self.client.projects.update(
                id=project, model_version=version, request_options=ONCE
            ),
        )

    def set_task_data(self, task: int, data: Mapping) -> None:
        """Save ``data`` as task ``task``'s data (``PATCH /api/tasks/ID``; Label Studio 1.23
        replaces the data whole, and keeps the task's annotations and predictions)."""
        self._call(
            f"write the data of task {task}",
            lambda: self._raw("PATCH", f"api/tasks/{task}", json={"data": dict(data)}),
        )

    def _raw(self, method: str, path: str, **kwargs):
        """A request the SDK has no method for, through its own client (auth, base URL); the
        answer's JSON, or ApiError as the SDK raises it."""
        from label_studio_sdk.core.api_error import ApiError

        response = self.client._client_wrapper.httpx_client.request(
            path, method=method, request_options=ONCE, **kwargs
        )
        if not 200 <= response.status_code < 300:
            raise ApiError(status_code=response.status_code, body=response.text)
        return response.json()

    def model_versions(self, project: int) -> dict[str, int]:
        """Each model version of ``project``'s predictions and how many it has
        (``GET /api/projects/P/model-versions/``)."""
        return self._call(
            f"list the model versions of project {project}",
            lambda: self._raw("GET", f"api/projects/{project}/model-versions/"),
        )

    def delete_model_version(self, project: int, version: str) -> None:
        """Delete every prediction of ``version`` in ``project``, in one request
        (``DELETE /api/projects/P/model-versions/``)."""
        self._call(
            f"delete the predictions of version {version} in project {project}",
            lambda: self._raw(
                "DELETE",
                f"api/projects/{project}/model-versions/",
                json={"model_version": version},
            ),
        )

    def ml_backends(self, project: int) -> list[dict]:
        """The ML backends connected to ``project`` (``GET /api/ml?project=P``): ``url``,
        ``auth_method`` (``NONE``, ``BASIC_AUTH``), ``basic_auth_user``."""
        listed = self._call(
            f"list the ML backends of project {project}",
            lambda: self.client.ml.list(project=project, request_options=ONCE),
        )
        return [
            {
                "url": backend.url,
                "auth_method": backend.auth_method,
                "basic_auth_user": backend.basic_auth_user,
            }
            for backend in listed
            if backend.url
        ]

    def ml_connections(self, project: int) -> list[dict]:
        """The ML connections of ``project`` as Label Studio keeps them (``GET /api/ml?project=P``:
        ``id``, ``url``, ``title``, ``auth_method``, ``basic_auth_user``, ``extra_params``, ...)."""
        listed = self._call(
            f"list the ML connections of project {project}",
            lambda: self._raw("GET", "api/ml", params={"project": project}),
        )
        return [c for c in listed if isinstance(c, dict)] if isinstance(listed, list) else []

    def ml_connection(self, connection: int) -> dict:
        """One ML connection as Label Studio keeps it (``GET /api/ml/{id}``; Label Studio calls
        its ``/setup`` first)."""
        return self._call(
            f"read ML connection {connection}",
            lambda: self._raw("GET", f"api/ml/{connection}"),
        )

    def update_ml_connection(self, connection: int, body: Mapping) -> dict:
        """``PATCH /api/ml/{id}`` with ``body``, which must carry the connection's ``url`` and
        ``project`` (Label Studio 1.23 answers 500 without them) and its credentials: Label
        Studio checks ``/health`` and ``/setup`` again before it saves. Errors name the status
        only (the body may hold the basic-auth password)."""
        return self._call(
            f"update ML connection {connection}",
            lambda: self._raw("PATCH", f"api/ml/{connection}", json=dict(body)),
            bodies=False,
        )

    def webhooks(self, project: int) -> list[dict]:
        """The webhooks of ``project`` (``GET /api/webhooks?project=P``): ``id``, ``url``,
        ``headers``, ``actions``."""
        listed = self._call(
            f"list the webhooks of project {project}",
            lambda: self.client.webhooks.list(project=str(project), request_options=ONCE),
        )
        return [
            {
                "id": hook.id,
                "url": hook.url,
                "headers": hook.headers if isinstance(hook.headers, dict) else {},
                "actions": list(hook.actions or []),
            }
            for hook in listed
        ]

    def set_webhook_headers(self, webhook: Mapping, headers: Mapping[str, str]) -> None:
        """Replace ``webhook``'s (from :meth:`webhooks`) headers with ``headers``
        (``PATCH /api/webhooks/{id}``). Its actions are sent again: Label Studio clears those a
        PATCH leaves out. Errors name the status only (the headers hold a credential)."""
        self._call(
            f"update the headers of webhook {webhook['id']} ({webhook['url']})",
            lambda: self.client.webhooks.update(
                id=webhook["id"],
                headers=dict(headers),
                actions=list(webhook["actions"]),
                request_options=ONCE,
            ),
            bodies=False,
        )


def annotator_names(api: LabelStudioAPI, project: str) -> dict[int, str]:
    """User id -> email, to name annotators; {} (annotators named by id) if Label Studio will
    not list its users to this token."""
    try:
        return api.users()
    except LabelStudioUnavailable as err:
        logger.warning("project %s: annotators are named by id: %s", project, err)
        return {}

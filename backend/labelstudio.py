"""Every call the backend makes to Label Studio, through label-studio-sdk, with retries.

A training job runs long after the webhook that started it, so it talks to Label Studio with
LABEL_STUDIO_URL / LABEL_STUDIO_API_KEY from the environment, not the request's credentials.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")
PREDICTION_BATCH = 500
# The SDK would retry on its own inside each of our attempts; one layer of backoff, ours.
ONCE = {"max_retries": 0}


class LabelStudioUnavailable(RuntimeError):
    """Label Studio could not be reached or refused a call, after retries."""


def _describe(err: Exception) -> str:
    status = getattr(err, "status_code", None)
    body = getattr(err, "body", None)
    if status is not None:
        return f"HTTP {status}: {str(body)[:300]}"
    return f"{type(err).__name__}: {str(err)[:300]}"


class LabelStudioAPI:
    """A thin, retrying client.

    Parameters
    ----------
    url, api_key : str
        Label Studio's address and a legacy token or personal access token.
    retries : int, default=4
        Attempts after the first, with exponential backoff starting at ``backoff`` seconds.
    """

    def __init__(
        self, url: str, api_key: str, retries: int = 4, backoff: float = 1.0, timeout: float = 60.0
    ):
        if not url or not api_key:
            raise LabelStudioUnavailable(
                "LABEL_STUDIO_URL and LABEL_STUDIO_API_KEY must be set for the backend to read "
                "annotations and write predictions"
            )
        from label_studio_sdk.client import LabelStudio

        self.url = url
        self.client = LabelStudio(base_url=url, api_key=api_key, timeout=timeout)
        self.retries = retries
        self.backoff = backoff

    def _call(self, what: str, fn: Callable[[], T]) -> T:
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
                        f"Label Studio refused to {what}: {_describe(err)}"
                    ) from None
                last = err
            except Exception as err:  # connection refused, timeouts, DNS...
                last = err
            if attempt < self.retries:
                delay = self.backoff * 2**attempt
                logger.warning(
                    "could not %s (%s); retrying in %.0f s", what, _describe(last), delay
                )
                time.sleep(delay)
        raise LabelStudioUnavailable(
            f"could not {what} at {self.url} after {self.retries + 1} attempts: {_describe(last)}"
        )

    def label_config(self, project: int) -> str:
        project_ = self._call(
            f"read project {project}",
            lambda: self.client.projects.get(id=project, request_options=ONCE),
        )
        return project_.label_config

    def tasks(self, project: int) -> list[dict]:
        """All tasks of ``project`` with their annotations, as plain dicts."""

        def fetch():
            out = []
            for task in self.client.tasks.list(
                project=project, fields="all", page_size=500, request_options=ONCE
            ):
                out.append(
                    {
                        "id": task.id,
                        "data": task.data or {},
                        "annotations": [
                            a if isinstance(a, dict) else a.dict() for a in (task.annotations or [])
                        ],
                    }
                )
            return out

        return self._call(f"list the tasks of project {project}", fetch)

    def users(self) -> dict[int, str]:
        """User id -> email, for naming annotators (an annotation's ``completed_by`` is an id)."""
        listed = self._call("list the users", lambda: self.client.users.list(request_options=ONCE))
        return {user.id: user.email for user in listed if user.id is not None and user.email}

    def write_predictions(self, project: int, predictions: Sequence[dict]) -> None:
        """Import ``{task, result, score, model_version}`` dicts in batches."""
        for start in range(0, len(predictions), PREDICTION_BATCH):
            batch = list(predictions[start : start + PREDICTION_BATCH])
            self._call(
                f"write {len(batch)} predictions to project {project}",
                lambda batch=batch: self.client.projects.import_predictions(
                    id=project, request=batch, request_options=ONCE
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

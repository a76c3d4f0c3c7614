"""A training's progress where the lead looks in Label Studio: the title of the project's ML
connection.

Label Studio 1.23 shows a connection's ``title`` and ``state`` on its model card (*Settings →
Model*) and its title in the model list of *Settings → Predictions*; it has no field for a
backend's progress (its ``state`` *Training* is set by *Start Training* and cleared by the next
``/setup``, which Label Studio calls on every view of the connection). So while a project
trains, the title of each of its connections to this backend carries the stage and when scores
are expected, e.g. ``subregweigh [training 2/4: scout; scores ~12:31:05 UTC]``, at most
:data:`TITLE_MAX` characters, and the title before it comes back when the training ends, fails
or is refused. ``/status`` says the same in ``progress``.

A connection is this backend's when its URL answers this backend's challenge
(:func:`backend.labelstudio.webhook_auth.proves_self`): another backend's connection to the
same project keeps its title. The title is changed with ``PATCH /api/ml/{id}``, which Label
Studio 1.23 takes only with the connection's ``url``, ``project``, credentials and extra
parameters beside it (it calls ``/health`` and ``/setup`` again before it saves). Progress is a
courtesy: where Label Studio refuses it, a warning says why and the training goes on.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

from backend.config.settings import Settings
from backend.labelstudio.client import LabelStudioAPI, LabelStudioUnavailable
from backend.labelstudio.webhook_auth import proves_self, webhook_secret
from backend.store.store import ProjectStore

logger = logging.getLogger(__name__)

TITLE_MAX = 100  # characters of a title with its progress; the lead's own part is cut first
STAGES = 4  # reading, training, scoring (the queue sorted after it), weighing K candidates
_SHOWN = re.compile(r" \[training [^\]]*\]$")  # what this module adds to a title
# Seconds after the title comes back before it is read again: Label Studio saves a whole
# connection after each /setup it calls, and one that read the connection before the restore
# writes the training's title back.
RECHECK_SECONDS = 4.0


def base_title(title: str | None) -> str:
    """``title`` without the progress this module added (a killed training's included)."""
    return _SHOWN.sub("", title or "")


def progress_title(title: str | None, stage: str) -> str:
    """``title`` (its own part, :func:`base_title`) with ``stage`` in brackets, cut to
    :data:`TITLE_MAX` characters: the stage stays whole, the title is shortened first."""
    suffix = f" [training {stage}]"[:TITLE_MAX]
    room = TITLE_MAX - len(suffix)
    base = base_title(title)
    if len(base) > room:
        base = base[: max(room - 1, 0)] + "…" if room > 1 else ""
    return base + suffix


def stage_text(step: int, what: str, due_at: float | None) -> str:
    """``"2/4: scout; scores ~12:31:05 UTC"``: the ``step`` of :data:`STAGES`, ``what`` it
    does, and when scores are expected (``due_at``, seconds since the epoch; None: not
    known)."""
    due = ""
    if due_at is not None:
        due = f"; scores ~{time.strftime('%H:%M:%S', time.gmtime(due_at))} UTC"
    return f"{step}/{STAGES}: {what}{due}"


class ConnectionTitles:
    """The titles of ``project``'s connections to this backend, shown with a training's stage
    (:meth:`show`) and given back (:meth:`restore`). Found at the first :meth:`show`."""

    def __init__(self, settings: Settings, store: ProjectStore):
        self.settings, self.store = settings, store
        self.connections: list[dict] | None = None  # ours, as Label Studio listed them
        self.api: LabelStudioAPI | None = None

    def _ours(self) -> list[dict]:
        if self.connections is None:
            self.connections = []
            self.api = LabelStudioAPI(
                self.settings.label_studio_url,
                self.settings.label_studio_api_key,
                retries=0,
                timeout=10.0,
                deadline=15.0,
            )
            listed = self.api.ml_connections(int(self.store.project))
            if not listed:
                return self.connections
            secret = webhook_secret(self.settings)  # made where none is: only once it is asked
            self.connections = [
                c for c in listed if c.get("url") and proves_self(c["url"], secret)[0]
            ]
        return self.connections

    def _retitle(self, connection: int, title: Callable[[str], str]) -> None:
        """Set ``connection``'s title to ``title(its title now)``, read just before with the
        rest of it: what Label Studio saves with the title (extra parameters, credentials, a
        title the lead changed meanwhile) is what it holds, not what it held when the training
        started."""
        assert self.api is not None
        now = self.api.ml_connection(connection)
        new = title(now.get("title") or "")
        if new == now.get("title"):
            return
        body = {
            "url": now["url"],
            "project": int(self.store.project),
            "title": new,
            "extra_params": now.get("extra_params"),
            "auth_method": now.get("auth_method") or "NONE",
        }
        if body["auth_method"] == "BASIC_AUTH":  # Label Studio checks /health with them again
            body["basic_auth_user"] = now.get("basic_auth_user")
            body["basic_auth_pass"] = self.settings.basic_auth_pass
        self.api.update_ml_connection(connection, body)

    def show(self, stage: str) -> None:
        """Each connection's own title with ``stage``; ``stage`` in ``/status``'s ``progress``.
        Never raises: a warning says why Label Studio did not take it."""
        self.store.update_status(progress=stage)
        try:
            for connection in self._ours():
                self._retitle(connection["id"], lambda title: progress_title(title, stage))
        except (LabelStudioUnavailable, OSError) as err:
            logger.warning(
                "project %s: the training's progress is not shown in Label Studio: %s",
                self.store.project,
                err,
            )

    def restore(self, recheck: bool = True) -> None:
        """Each connection's own title back, and ``progress`` out of ``/status``; with
        ``recheck``, read again after :data:`RECHECK_SECONDS` and set again where Label Studio
        wrote a stale copy back. Never raises."""
        self.store.update_status(progress=None)
        if not self.connections:
            return
        try:
            for connection in self.connections:
                self._retitle(connection["id"], base_title)
            if recheck:
                time.sleep(RECHECK_SECONDS)
                for connection in self.connections:
                    self._retitle(connection["id"], base_title)
        except (LabelStudioUnavailable, OSError) as err:
            logger.warning(
                "project %s: the connection's title keeps the training's progress: %s",
                self.store.project,
                err,
            )

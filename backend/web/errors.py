"""How the backend's errors become replies: one map from exception to HTTP status, in one place.

400 for a request the backend cannot act on (:class:`~backend.web.inputs.BadRequest`, an unsupported
labeling config, a project's settings that do not work), with the message in the status line's
reason phrase too: Label Studio shows a refused ``/setup`` only as ``400 Client Error: <reason> for
url: ...``, never the body (see the Label Studio facts). 404 for a report that does not exist
yet, 502 when the backend's own Label Studio address or token does not work
(:class:`~backend.labelstudio.membership.LabelStudioRefused`: the sentence in the reason phrase,
its ``<`` and ``>`` made brackets, since Label Studio strips what looks like a tag), 503 for
what a retry later may fix (the job queue, the bound on projects, the webhook secret),
werkzeug's own statuses (413, 405...) as they are, and 500 for anything else: logged with its
traceback, answered with its type only.

Only the map lives here. Each exception class lives where it is raised, in its own layer
(:class:`~backend.web.inputs.BadRequest`, :class:`~backend.web.auth.Forbidden`,
:class:`~backend.labelstudio.membership.NotConnected`,
:class:`~backend.labelstudio.client.LabelStudioUnavailable`,
:class:`~backend.config.settings.SettingsError`, :class:`~backend.store.store.TooManyProjects`,
...), so the code below the web layer raises them without knowing of Flask or HTTP.
"""

from __future__ import annotations

import logging

from flask import Flask, jsonify, request
from werkzeug.exceptions import HTTPException

from backend.config.settings import SettingsError
from backend.labelstudio import webhook_auth
from backend.labelstudio.client import LabelStudioUnavailable
from backend.labelstudio.membership import LabelStudioRefused, NotConnected
from backend.labelstudio.tasks import ConfigError
from backend.queue.runners import JobQueueUnavailable
from backend.serving.report import ReportUnavailable
from backend.store.store import TooManyProjects
from backend.web.auth import Forbidden
from backend.web.inputs import BadRequest

logger = logging.getLogger(__name__)


REASON_CHARS = 400  # of a message put in the status line


def reason_phrase(message: str) -> str:
    """``message`` as an HTTP reason phrase: one line of printable ASCII (the status line is
    Latin-1, and a line break would end it), at most :data:`REASON_CHARS` characters."""
    text = " ".join(message.split())
    text = "".join(c if " " <= c <= "~" else "?" for c in text)
    return text[: REASON_CHARS - 3] + "..." if len(text) > REASON_CHARS else text


def refusal(code: int, sentence: str, **body):
    """A JSON reply ``{"error": sentence, **body}`` with status ``code``, whose reason phrase is
    ``sentence`` (what Label Studio 1.23 shows of a refused ``/setup`` or *Start Training*), with
    ``<`` and ``>`` made brackets so that Label Studio's tag stripping keeps every word."""
    response = jsonify(error=sentence, **body)
    phrase = reason_phrase(sentence.replace("<", "(").replace(">", ")"))
    response.status = f"{code} {phrase}"
    return response


def install(app: Flask) -> None:
    """Register the error map on ``app``."""

    @app.errorhandler(BadRequest)
    @app.errorhandler(ConfigError)
    @app.errorhandler(SettingsError)
    def bad_request(err):
        logger.warning("%s %s: 400: %s", request.method, request.path, err)
        response = jsonify(error=str(err))
        response.status = f"400 {reason_phrase(str(err)) or 'BAD REQUEST'}"
        return response

    @app.errorhandler(LabelStudioRefused)
    def bad_gateway(err):
        logger.error("%s %s: 502: %s", request.method, request.path, err)
        return refusal(502, str(err))

    @app.errorhandler(Forbidden)
    def forbidden(err):
        return jsonify(error=str(err)), 403

    @app.errorhandler(ReportUnavailable)
    @app.errorhandler(NotConnected)
    def no_report(err):
        return jsonify(error=str(err)), 404

    @app.errorhandler(JobQueueUnavailable)
    @app.errorhandler(LabelStudioUnavailable)
    @app.errorhandler(TooManyProjects)
    @app.errorhandler(webhook_auth.WebhookSecretUnavailable)
    def unavailable(err):
        logger.error("%s %s: 503: %s", request.method, request.path, err)
        return jsonify(error=str(err)), 503

    @app.errorhandler(HTTPException)
    def http_error(err):
        return jsonify(error=err.description or err.name), err.code

    @app.errorhandler(Exception)
    def server_error(err):
        logger.exception("%s %s failed", request.method, request.path)
        return jsonify(error=f"internal error: {type(err).__name__}; see the backend's log"), 500

"""Who may call the backend, and what its replies may never carry.

With ``BASIC_AUTH_USER``/``BASIC_AUTH_PASS`` set, every route but ``/health`` needs them, except
``POST /webhook`` with the webhook token of the project its body names
(:mod:`backend.labelstudio.webhook_auth`). Every JSON or HTML reply passes through the credential
net of
:mod:`backend.config.redact` on its way out.
"""

from __future__ import annotations

import hmac
import logging
import os

from flask import Flask, g, jsonify, request

from backend.config import redact
from backend.config.settings import Settings, secrets_of
from backend.labelstudio import webhook_auth

logger = logging.getLogger("backend.web.server")


class Forbidden(PermissionError):
    """A request whose credentials do not reach what it names (another project, a task of
    another project); becomes a 403 with this message."""


TEXT_REPLIES = {"application/json", "text/html"}
OPEN_PATHS = {"/health"}
# The report page: its own inline style and the histogram as a data: image, nothing else (no
# script, frame, form, or request to anywhere).
HTML_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
# What a request body may hold, checked before it is read. A webhook carries the task's data,
# the annotation and the project with its labeling config: WEBHOOK_BODY is sized from what
# Label Studio 1.23 sends for a long task (docs/security.md, tests/labelstudio/
# test_trust_boundaries.py); /predict's batches are bounded by MAX_REQUEST_MB.
WEBHOOK_BODY = 16 * 2**20
SMALL_BODY = 64 * 2**10  # a route that takes a small JSON object, or none
BODY_CAPS = {"/webhook": WEBHOOK_BODY, "/setup": 2**20}


def install(app: Flask, settings: Settings) -> None:
    """Guard ``app``'s routes with ``settings``' basic auth and mask credentials in replies."""
    secrets = secrets_of(settings)
    # Where the model directory is stays on the server: a reply names it MODEL_DIR.
    model_dirs = sorted(
        {os.path.abspath(settings.model_dir), os.path.realpath(settings.model_dir)},
        key=len,
        reverse=True,
    )

    @app.before_request
    def authenticate_then_bound():
        """Credentials first, from the headers alone; then the route's body cap, from the
        declared length (413), and as a limit on what is read of a body without one."""
        if not authenticated(settings):
            response = jsonify(error="authentication required")
            response.status_code = 401
            response.headers["WWW-Authenticate"] = 'Basic realm="subregweigh"'
            return response
        cap = body_cap(settings, request.path)
        request.max_content_length = cap
        if request.content_length is not None and request.content_length > cap:
            response = jsonify(
                error=f"{request.method} {request.path[:40]} takes a body of at most "
                f"{cap} bytes; this one declares {request.content_length}"
            )
            response.status_code = 413
            return response
        return None

    @app.after_request
    def no_credential_in_a_reply(response):
        response.headers["X-Content-Type-Options"] = "nosniff"
        # a project's texts, annotators and scores: no browser or proxy keeps a copy
        response.headers["Cache-Control"] = "no-store"
        if response.mimetype == "text/html":
            response.headers["Content-Security-Policy"] = HTML_POLICY
        status = redact.redact(response.status, secrets)  # a 400's reason phrase: its message
        for path in model_dirs:
            status = status.replace(path, "MODEL_DIR")
        if status != response.status:
            response.status = status
        if response.direct_passthrough or response.mimetype not in TEXT_REPLIES:
            return response
        body = response.get_data(as_text=True)
        clean = redact.redact(body, secrets)
        if clean != body:
            logger.warning(
                "%s %s: a credential was masked in the reply", request.method, request.path
            )
        for path in model_dirs:
            clean = clean.replace(path, "MODEL_DIR")
        if clean != body:
            response.set_data(clean)
        return response


def authenticated(settings: Settings) -> bool:
    """Whether the request may go on to its route: always without basic auth configured; else
    ``/health``, the basic-auth user, or on ``POST /webhook`` a project's webhook token (that
    project is remembered for :func:`require_project`)."""
    if not settings.basic_auth_user or request.path in OPEN_PATHS:
        return True
    if request.path == "/webhook":
        project = webhook_token_project(settings)
        if project is not None:
            g.webhook_project = project
            return True
    return basic_auth_ok(settings)


def body_cap(settings: Settings, path: str) -> int:
    """The most bytes a request body to ``path`` may have (:data:`BODY_CAPS`; ``/predict``:
    ``MAX_REQUEST_MB``)."""
    if path == "/predict":
        return settings.max_request_mb * 2**20
    return BODY_CAPS.get(path, SMALL_BODY)


def basic_auth_ok(settings: Settings) -> bool:
    """Whether the request authenticates as ``settings``' basic-auth user (constant time)."""
    try:
        auth = request.authorization
    except ValueError:  # werkzeug raises on a non-ASCII Basic token instead of returning None
        return False
    # Bytes: compare_digest refuses non-ASCII str.
    return (
        auth is not None
        and auth.type == "basic"
        and hmac.compare_digest((auth.username or "").encode(), settings.basic_auth_user.encode())
        and hmac.compare_digest((auth.password or "").encode(), settings.basic_auth_pass.encode())
    )


def webhook_token_project(settings: Settings) -> str | None:
    """The project whose webhook token the request's header carries (it opens ``POST /webhook``
    of that project, nothing else), else None. Read from the headers alone: no body is read
    before the caller is known."""
    token = request.headers.get(webhook_auth.TOKEN_HEADER)
    if request.method != "POST" or not token or len(token) > 200:
        return None
    try:
        secret = webhook_auth.webhook_secret(settings)
    except webhook_auth.WebhookSecretUnavailable:
        return None
    return webhook_auth.token_project(secret, token)


def token_project() -> str | None:
    """The project the request's webhook token opened (None: it came in with basic auth, or
    with no auth configured): :func:`require_project` holds a body to it."""
    return g.get("webhook_project")


def require_project(project: str) -> None:
    """A 403 unless the request may act on ``project``: a webhook token opens its own project
    only, whatever the body claims."""
    opened = token_project()
    if opened is not None and opened != project:
        logger.warning(
            "%s %s: refused: the webhook token of project %s was sent for project %s",
            request.method,
            request.path,
            opened,
            project,
        )
        raise Forbidden(
            f"this webhook token is project {opened}'s; the body names project {project}"
        )

"""Who may call the backend, and what its replies may never carry.

With ``BASIC_AUTH_USER``/``BASIC_AUTH_PASS`` set, every route but ``/health`` needs them, except
``POST /webhook`` with the webhook token of the project its body names
(:mod:`backend.webhook_auth`). Every JSON or HTML reply passes through the credential net of
:mod:`backend.redact` on its way out.
"""

from __future__ import annotations

import hmac
import logging

from flask import Flask, jsonify, request

from backend import redact, webhook_auth
from backend.inputs import request_json
from backend.settings import Settings
from backend.store import project_id

logger = logging.getLogger("backend.server")
TEXT_REPLIES = {"application/json", "text/html"}


def install(app: Flask, settings: Settings) -> None:
    """Guard ``app``'s routes with ``settings``' basic auth and mask credentials in replies."""
    secrets = redact.secrets_of(settings)

    @app.before_request
    def basic_auth():
        if not settings.basic_auth_user or request.path == "/health":
            return None
        if request.path == "/webhook" and webhook_token_ok(settings):
            return None
        if basic_auth_ok(settings):
            return None
        response = jsonify(error="authentication required")
        response.status_code = 401
        response.headers["WWW-Authenticate"] = 'Basic realm="subregweigh"'
        return response

    @app.after_request
    def no_credential_in_a_reply(response):
        status = redact.redact(response.status, secrets)  # a 400's reason phrase: its message
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
            response.set_data(clean)
        return response


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


def webhook_token_ok(settings: Settings) -> bool:
    """Whether the request carries the webhook token of the project its body names: it opens
    ``POST /webhook`` of that project, nothing else."""
    token = request.headers.get(webhook_auth.TOKEN_HEADER)
    body = request_json()
    if request.method != "POST" or not token or not isinstance(body, dict):
        return False
    try:
        project = project_id(body.get("project"))
        secret = webhook_auth.webhook_secret(settings)
    except (ValueError, webhook_auth.WebhookSecretUnavailable):
        return False
    return webhook_auth.valid_token(secret, project, token)

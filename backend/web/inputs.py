"""What a request carries, read defensively: its JSON body, a project id, a numeric query
parameter. Anything else is a :class:`BadRequest` naming what was wrong."""

from __future__ import annotations

from flask import request

from backend.config.echo import shown
from backend.store.store import project_id


class BadRequest(ValueError):
    """A request the backend cannot act on; becomes a 400 with this message."""


def request_json():
    """The request's JSON, or None when it is not valid JSON (too deeply nested included: the
    parser raises RecursionError there, which ``silent=True`` does not catch)."""
    try:
        return request.get_json(silent=True)
    except RecursionError:
        return None


def json_body() -> dict:
    """The request's JSON object, or a 400."""
    body = request_json()
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    return body


def project(value) -> str:
    """The project id in ``value`` (canonical), or a 400 saying what was wrong."""
    try:
        return project_id(value)
    except ValueError as err:
        raise BadRequest(str(err)) from None


def number(name: str, default, kind, low, high):
    """Query parameter ``name`` as ``kind`` in [low, high], or a 400 naming it."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a {kind.__name__}, got {shown(raw)}") from None
    if not low <= value <= high:
        raise BadRequest(f"{name} must be in [{low}, {high}], got {shown(raw)}")
    return value

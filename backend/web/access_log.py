"""gunicorn's access log, each line bounded and printable (issue 58).

A request line is the client's: gunicorn logged it as sent, ESC and NUL included (a terminal
reading the log obeys an ESC sequence) and as long as the front took it. Every value of a line
is escaped as :func:`backend.config.redact.printable` escapes log messages, and cut at
:data:`MAX_VALUE` characters, its length said.
"""

from __future__ import annotations

from gunicorn.glogging import Logger

from backend.config.redact import printable

MAX_VALUE = 500  # characters of one value of an access-log line (the request line, say)


def bounded(value: str) -> str:
    """``value`` printable and at most :data:`MAX_VALUE` characters (then its length)."""
    value = printable(value)
    if len(value) <= MAX_VALUE:
        return value
    return f"{value[:MAX_VALUE]}... ({len(value)} characters)"


class AccessLogger(Logger):
    """gunicorn's logger, its access-log values through :func:`bounded`."""

    def atoms(self, resp, req, environ, request_time):
        return {
            key: bounded(value) if isinstance(value, str) else value
            for key, value in super().atoms(resp, req, environ, request_time).items()
        }

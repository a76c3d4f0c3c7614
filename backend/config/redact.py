"""Credentials out of every log line, response and stored message.

The code never logs a credential on purpose; this is the net under it. A URL's password
(``http://user:pw@host``, Label Studio's or Redis's), and each configured secret (the Label
Studio API key, the basic-auth password and its header, the webhook secret) are replaced with
``***`` wherever they appear: in log records (a filter on the process's handlers, tracebacks
included), in every response body (the app's ``after_request``), and in the error a failed job
keeps in its status.

This module is the net alone, over text: which values are credentials is the settings' word
(:func:`backend.config.settings.secrets_of`), and :func:`backend.config.logs.install` puts the
net on the process's log handlers.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

MASK = "***"
# scheme://user:password@ -> scheme://user:***@ (any scheme; the password may hold "@": the last
# one before the host ends it, as URL parsers read it)
_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*:)[^\s/]+@")
# Shorter values would mask ordinary words in every line; a password that short is not masked.
MIN_LENGTH = 4


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with URL passwords and each of ``secrets`` replaced by :data:`MASK`."""
    text = _URL_PASSWORD.sub(rf"\1{MASK}@", text)
    for secret in sorted(set(secrets), key=len, reverse=True):  # a secret inside another
        if len(secret) >= MIN_LENGTH:
            text = text.replace(secret, MASK)
    return text


_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with what UTF-8 cannot encode (lone surrogates) backslash-escaped, and every
    control character but newline and tab too (``\\x1b``): a log line holds no terminal
    escape and no NUL, whatever a client or a task sent."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class RedactingFilter(logging.Filter):
    """Rewrites each record's message (and traceback) through :func:`redact`."""

    def __init__(self, secrets: Iterable[str] = ()):
        super().__init__()
        self.secrets = list(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        message = redact(record.getMessage(), self.secrets)
        # A lone surrogate from task data would fail a handler that writes UTF-8.
        record.msg = printable(message)
        record.args = ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, self.secrets)
        if record.stack_info:
            record.stack_info = redact(record.stack_info, self.secrets)
        return True

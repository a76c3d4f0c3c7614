"""How the backend's processes log: to stderr, in one format, at LOG_LEVEL, every record through
the credential net (:class:`backend.config.redact.RedactingFilter`) for the settings' secrets."""

from __future__ import annotations

import logging
import os

from backend.config.redact import RedactingFilter
from backend.config.settings import Settings, secrets_of

# The process id tells gunicorn workers and rq workers apart in one log.
LOG_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str | None = None) -> None:
    """Log to stderr at ``level`` (default: LOG_LEVEL, else INFO)."""
    level = (level or os.environ.get("LOG_LEVEL") or "INFO").upper()
    logging.basicConfig(level=getattr(logging, level, logging.INFO), format=LOG_FORMAT)


def install(settings: Settings) -> None:
    """Put a :class:`RedactingFilter` for ``settings``' secrets on every handler of the root
    logger (records of every module pass through them), replacing one installed before."""
    handlers = logging.getLogger().handlers
    for handler in handlers:
        for old in [f for f in handler.filters if isinstance(f, RedactingFilter)]:
            handler.removeFilter(old)
        handler.addFilter(RedactingFilter(secrets_of(settings)))

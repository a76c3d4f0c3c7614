"""How much of a caller's value an error message or a log line repeats: enough to find it, never
all of it (a 40 MB value must not come back in a 40 MB reply or log line)."""

from __future__ import annotations

SHOWN_CHARS = 60


def shown(value) -> str:
    """``value`` (from a request or a setting) as an error or a log line may echo it: its
    repr, cut to :data:`SHOWN_CHARS` characters with how long it was."""
    text = repr(value)
    if len(text) <= SHOWN_CHARS:
        return text
    return f"{text[:SHOWN_CHARS]}... ({len(text)} characters)"

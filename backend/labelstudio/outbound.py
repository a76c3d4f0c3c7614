"""The one request the backend makes to an address it was given rather than configured: the
challenge a training sends to a connection's ``/health`` (:mod:`backend.labelstudio.webhook_auth`).

Whoever can edit a project's ML connection chooses that address, so the request is bounded on
every side: a fixed path (the URL's own path and query are dropped), no credentials, no
redirects followed, at most :data:`MAX_ANSWER` bytes read, and one deadline for all of it,
connecting, headers and body (a server that answers a byte every few seconds is cut off when
it passes). Its failure is an answer (:class:`OutboundRefused`), never a stuck training.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from urllib.parse import urlsplit

MAX_ANSWER = 4096  # bytes of a reply read, headers excluded
DEADLINE = 5.0  # seconds for the whole request


class OutboundRefused(RuntimeError):
    """The request could not be made or its answer was refused; the message says why."""


def fixed_url(base_url: str, path: str) -> str:
    """``path`` on ``base_url``'s scheme, host and port: whatever path, query or fragment the
    base URL carries is dropped, and so are credentials in it."""
    parts = urlsplit(base_url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise OutboundRefused("not an http(s) URL")
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{path}"


def bounded_get(url: str, deadline: float = DEADLINE, limit: int = MAX_ANSWER) -> tuple[int, bytes]:
    """``(status, body)`` of ``GET url`` (as :func:`fixed_url` makes it), within ``deadline``
    seconds in all and at most ``limit`` bytes of body; no redirect is followed (a 3xx is an
    answer). :class:`OutboundRefused` when it cannot be had within those bounds."""
    parts = urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    conn = kind(parts.hostname, parts.port, timeout=deadline)
    expired = threading.Event()

    def cut_off():  # unblocks a read that a slow server keeps alive byte by byte
        expired.set()
        sock = conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    watchdog = threading.Timer(deadline, cut_off)
    watchdog.daemon = True
    start = time.monotonic()
    watchdog.start()
    try:
        conn.request("GET", target, headers={"Accept": "application/json", "Connection": "close"})
        response = conn.getresponse()
        declared = response.getheader("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise OutboundRefused(f"answered {declared} bytes (at most {limit} are read)")
        body = response.read(limit + 1)
        if len(body) > limit:
            raise OutboundRefused(f"answered more than {limit} bytes")
        if expired.is_set():
            raise OutboundRefused(f"no complete answer within {deadline:g} s")
        return response.status, body
    except OutboundRefused:
        raise
    except Exception as err:  # refused, unreachable, reset, cut off by the deadline
        if expired.is_set() or time.monotonic() - start >= deadline:
            raise OutboundRefused(f"no complete answer within {deadline:g} s") from None
        raise OutboundRefused(f"unreachable from here ({type(err).__name__})") from None
    finally:
        watchdog.cancel()
        conn.close()

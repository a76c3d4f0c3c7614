"""One deadline for the whole of each HTTP request to Label Studio: connecting, sending,
the headers and the body.

httpx's timeouts (label-studio-sdk's ``timeout``) bound each read, not the request: a server
that answers a byte every few seconds never passes a read timeout, and held a request thread
for minutes (the hostile probe of issue 58: six webhooks held all four threads).
:func:`deadline_client` gives an ``httpx.Client`` whose every socket operation is given at most
what is left of its request's deadline, and fails with ``httpx.ReadTimeout`` once it is spent.
"""

from __future__ import annotations

import threading
import time

import httpcore
import httpx

_now = threading.local()  # the deadline (time.monotonic) of the request this thread sends


def _left(timeout: float | None) -> float | None:
    deadline = getattr(_now, "deadline", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("the request's deadline passed")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    """A connection whose reads and writes take at most what the request has left."""

    def __init__(self, stream: httpcore.NetworkStream):
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _left(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _left(timeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context, server_hostname=None, timeout=None) -> _Stream:
        return _Stream(self._stream.start_tls(ssl_context, server_hostname, _left(timeout)))

    def get_extra_info(self, info: str):
        return self._stream.get_extra_info(info)


class _Backend(httpcore.SyncBackend):
    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        stream = super().connect_tcp(host, port, _left(timeout), local_address, socket_options)
        return _Stream(stream)


class _Transport(httpx.HTTPTransport):
    """httpx's transport over :class:`_Backend`, each request given ``seconds`` in all."""

    def __init__(self, seconds: float):
        super().__init__()
        self.seconds = seconds
        # httpx builds its pool without a way to name the network backend: the same pool, ours
        self._pool = httpcore.ConnectionPool(network_backend=_Backend())

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        _now.deadline = time.monotonic() + self.seconds
        try:
            response = super().handle_request(request)
            try:
                response.read()  # the body within the same deadline, before the deadline goes
            except BaseException:
                response.close()
                raise
        finally:
            _now.deadline = None
        return response


def deadline_client(seconds: float, timeout: float | None = None) -> httpx.Client:
    """An ``httpx.Client`` whose every request, body included, ends within ``seconds``
    (``httpx.TimeoutException`` past it); ``timeout``: each read's own limit as well."""
    return httpx.Client(transport=_Transport(seconds), timeout=timeout or seconds)

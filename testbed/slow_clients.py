"""Hostile slow clients (slowloris) for the server tests and benchmarks.

:class:`SlowClients` opens connections to a server and, from one background thread, sends each
of them one more byte of its request every ``interval`` seconds, never finishing it:

- *slow headers*: ``GET /health HTTP/1.1`` and header lines, a byte at a time, whose blank line
  never comes;
- *slow bodies*: a ``POST /predict`` whose headers arrive whole, announcing a ``Content-Length``
  body that then arrives a byte at a time.

It notices when the server closes a connection (or answers on it: a 408 or a 400 ends it too),
and can :meth:`~SlowClients.pause`, leaving every connection idle, to see whether and when the
server closes idle ones::

    with SlowClients("127.0.0.1", port, headers=100, bodies=100) as slow:
        ...                        # the server must go on answering others
        slow.open()                # connections the server has not closed (200 here)
        slow.pause()               # send nothing more from now on
        slow.wait_closed(timeout=40)
"""

from __future__ import annotations

import contextlib
import itertools
import selectors
import socket
import threading
import time

# Long enough that nothing reaches its end at a byte a second.
_HEADER_LINES = b"".join(b"X-Slow-%d: %s\r\n" % (i, b"a" * 40) for i in range(200))
BODY_LENGTH = 100_000


def _slow_header_request(host: str) -> bytes:
    return b"GET /health HTTP/1.1\r\nHost: %s\r\n" % host.encode() + _HEADER_LINES


def _slow_body_request(host: str) -> tuple[bytes, bytes]:
    """(headers sent at once, body trickled: never all of it)."""
    head = (
        b"POST /predict HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % (host.encode(), BODY_LENGTH)
    )
    return head, b'{"tasks": [' + b" " * (BODY_LENGTH - 12)


class _Conn:
    __slots__ = ("sock", "payload", "sent", "kind", "opened", "closed")

    def __init__(self, sock: socket.socket, payload: bytes, kind: str):
        self.sock, self.payload, self.kind = sock, payload, kind
        self.sent = 0
        self.opened = time.monotonic()
        self.closed: float | None = None  # when the server closed it (monotonic)


class SlowClients:
    """``headers`` slow-header and ``bodies`` slow-body connections to ``host:port``."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        headers: int = 100,
        bodies: int = 100,
        interval: float = 1.0,
        connect_timeout: float = 10.0,
    ):
        self.host, self.port = host, port
        self.counts = {"headers": headers, "bodies": bodies}
        self.interval, self.connect_timeout = interval, connect_timeout
        self.conns: list[_Conn] = []
        self._paused = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.paused_at: float | None = None

    # -- the connections

    def _connect(self, kind: str) -> _Conn:
        sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if kind == "headers":
            payload = _slow_header_request(self.host)
        else:
            head, payload = _slow_body_request(self.host)
            sock.sendall(head)
        sock.setblocking(False)
        conn = _Conn(sock, payload, kind)
        self._send_byte(conn)
        return conn

    def start(self) -> SlowClients:
        kinds = itertools.chain.from_iterable(
            itertools.repeat(kind, n) for kind, n in self.counts.items()
        )
        for kind in kinds:
            self.conns.append(self._connect(kind))
        self._thread = threading.Thread(target=self._run, name="slow-clients", daemon=True)
        self._thread.start()
        return self

    def _send_byte(self, conn: _Conn) -> None:
        if conn.closed is not None or conn.sent >= len(conn.payload):
            return
        try:
            conn.sent += conn.sock.send(conn.payload[conn.sent : conn.sent + 1])
        except BlockingIOError:
            pass
        except OSError:  # reset or broken pipe: the server closed it
            self._mark_closed(conn)

    def _mark_closed(self, conn: _Conn) -> None:
        with self._lock:
            if conn.closed is None:
                conn.closed = time.monotonic()

    def _check_closed(self, conn: _Conn) -> None:
        """The server wrote (an error reply) or closed: the request is over either way."""
        try:
            data = conn.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data or data.startswith(b"HTTP/"):
            self._mark_closed(conn)

    def _run(self) -> None:
        with selectors.DefaultSelector() as selector:
            for conn in self.conns:
                selector.register(conn.sock, selectors.EVENT_READ, conn)
            next_tick = time.monotonic() + self.interval
            while not self._stop.is_set():
                for key, _ in selector.select(max(0.0, next_tick - time.monotonic())):
                    self._check_closed(key.data)
                    if key.data.closed is not None:
                        selector.unregister(key.fileobj)
                if time.monotonic() >= next_tick:
                    next_tick += self.interval
                    if not self._paused.is_set():
                        for conn in self.conns:
                            self._send_byte(conn)

    # -- what the tests ask

    def open(self, kind: str | None = None) -> int:
        """Connections the server has not closed (of ``kind``: "headers" or "bodies")."""
        with self._lock:
            return sum(c.closed is None and kind in (None, c.kind) for c in self.conns)

    def bytes_sent(self) -> int:
        return sum(c.sent for c in self.conns)

    def pause(self) -> None:
        """Send nothing more: every connection is idle from now on."""
        self.paused_at = time.monotonic()
        self._paused.set()

    def wait_closed(self, timeout: float) -> float | None:
        """Seconds from :meth:`pause` until the server closed the last connection; None if some
        were still open after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.open() == 0:
                with self._lock:
                    return max(c.closed for c in self.conns) - (self.paused_at or 0.0)
            time.sleep(0.2)
        return None

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for conn in self.conns:
            with contextlib.suppress(OSError):
                conn.sock.close()

    def __enter__(self) -> SlowClients:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc) -> None:
        self.close()

"""A gunicorn worker whose connections are read by waitress's event loop (gunicorn.conf.py).

gunicorn's ``gthread`` worker hands each new connection to a thread, which then reads the request
itself: a client that sends its headers or its body a byte at a time holds that thread for as long
as it likes, and 8 such clients held all of 2 workers x 4 threads (issue 26). In this worker one
loop (waitress's, in the worker's main thread) reads every connection without blocking and buffers
each request whole, body included (in memory up to 512 KiB, then in a temporary file); only a
complete request reaches one of the worker's ``THREADS`` threads, and the loop writes the reply
back. A slow client costs a file descriptor and its buffer, not a thread.

gunicorn still runs the processes: ``WORKERS``, the heartbeat (``GUNICORN_TIMEOUT``: the loop
notifies the master at least once a second), ``MAX_REQUESTS`` with its jitter, graceful stops and
restarts (TERM, HUP: stop accepting, read for 2 s more the requests on their way on connections
already accepted, answer the requests in flight within ``graceful_timeout``, close the rest) and
the access log in ``access_log_format`` (for the app's replies: waitress's own 400, 413 and 431
are not logged). gunicorn's ``pre_request`` and ``post_request`` hooks are not called.

What the loop enforces (:func:`adjustments`):

- gunicorn's ``keepalive`` (``IDLE_TIMEOUT``, 30 s in gunicorn.conf.py): a connection that sends
  nothing for that long, waiting for a request or in the middle of its headers or body, or that
  reads nothing of its reply, is closed (checked every second). One whose request is being
  computed is not.
- ``worker_connections`` (1000): open connections per worker; beyond them the worker stops
  accepting (new connections wait in the listen backlog) until some close. Capped below the
  process's limit on open files, whose soft value is raised to the hard one.
- the app's ``MAX_CONTENT_LENGTH`` (``MAX_REQUEST_MB``): a body declared larger is refused with
  413 before it is read; headers over 256 KiB with 431.
"""

from __future__ import annotations

import logging
import os
import resource
import threading
import time
from datetime import datetime
from types import SimpleNamespace

from gunicorn.workers import base
from waitress import wasyncore
from waitress.channel import HTTPChannel
from waitress.server import BaseWSGIServer, create_server

LOOP_SECONDS = 1.0  # the loop wakes at least this often: heartbeat, idle connections, stop
STOP_LINGER = 2.0  # seconds a stopping worker still reads requests on accepted connections
SPARE_FILES = 64  # open files kept for the app (scouts, stores, logs) beyond its connections


def open_files_limit() -> int:
    """Raise this process's soft limit on open files to the hard one; the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError):
            pass
    return soft


def adjustments(cfg, max_body: int | None, files: int) -> dict:
    """waitress's settings for a worker with gunicorn's settings ``cfg``, serving an app that
    takes bodies of ``max_body`` bytes at most (None: no limit of its own), in a process that
    may open ``files`` files."""
    connections = max(1, min(cfg.worker_connections, files - SPARE_FILES))
    return {
        "threads": cfg.threads,
        "backlog": cfg.backlog,
        "connection_limit": connections + 2,  # waitress counts its listener and wake-up pipe
        "channel_timeout": max(1, cfg.keepalive),
        "cleanup_interval": 1,
        "asyncore_use_poll": True,  # select() stops at file descriptor 1024
        "asyncore_loop_timeout": 1,
        "max_request_body_size": max_body or 1 << 30,  # waitress's default: 1 GiB
        "max_request_header_size": 256 * 1024,
        "inbuf_overflow": 512 * 1024,
    }


class WaitressWorker(base.Worker):
    """gunicorn worker: waitress's loop reads and writes, ``cfg.threads`` threads run the app."""

    def run(self):
        # waitress warns of every request that waits for a thread: under load, most of the log
        # (gthread queued them silently; the access log's times show the wait)
        logging.getLogger("waitress.queue").setLevel(logging.ERROR)
        self.counting = threading.Lock()
        self.socket_map: dict = {}
        max_body = getattr(self.wsgi, "config", {}).get("MAX_CONTENT_LENGTH")  # Flask's
        server = create_server(
            self.access_logged,
            map=self.socket_map,
            sockets=[listener.sock for listener in self.sockets],
            **adjustments(self.cfg, max_body, open_files_limit()),
        )
        try:
            while self.alive:
                self.notify()
                self.turn(LOOP_SECONDS)
                if self.ppid != os.getppid():
                    self.log.info("Parent changed, shutting down: %s", self)
                    break
            self.stop()
        finally:
            server.task_dispatcher.shutdown(timeout=1)

    def turn(self, timeout: float) -> None:
        """One wait for the connections (at most ``timeout`` s) and what they are ready for."""
        wasyncore.loop(timeout=timeout, map=self.socket_map, use_poll=True, count=1)

    def channels(self) -> list[HTTPChannel]:
        return [c for c in list(self.socket_map.values()) if isinstance(c, HTTPChannel)]

    def stop(self) -> None:
        """Stop accepting. Requests in flight are answered within graceful_timeout; for
        STOP_LINGER s the connections already accepted may still send a request (one that was
        on its way), then those with none in flight are closed."""
        for dispatcher in list(self.socket_map.values()):
            if isinstance(dispatcher, BaseWSGIServer):
                dispatcher.accepting = False  # no longer polled; the master keeps the socket
        started = time.monotonic()
        linger = started + min(STOP_LINGER, self.cfg.graceful_timeout)
        deadline = started + self.cfg.graceful_timeout
        while self.channels() and time.monotonic() < deadline:
            if time.monotonic() >= linger:
                for channel in self.channels():
                    if not (channel.requests or channel.total_outbufs_len):
                        channel.close()
            self.notify()
            self.turn(0.1)
        for channel in self.channels():
            channel.close()

    def access_logged(self, environ, start_response):
        """The app, counting requests for MAX_REQUESTS and writing gunicorn's access log."""
        started = datetime.now()
        with self.counting:
            self.nr += 1
            last = self.nr == self.max_requests
        if last:
            self.log.info("Autorestarting worker after current request.")
            self.alive = False
        environ.setdefault("RAW_URI", environ.get("REQUEST_URI") or environ["PATH_INFO"])
        reply = SimpleNamespace(status="-", headers=[], sent=0)

        def start(status, headers, exc_info=None):
            reply.status, reply.headers = status, headers
            return start_response(status, headers, exc_info)

        def log():
            headers = [(k[5:].replace("_", "-"), v) for k, v in environ.items() if k[:5] == "HTTP_"]
            request = SimpleNamespace(headers=headers)
            self.log.access(reply, request, environ, datetime.now() - started)

        return _Logged(self.wsgi(environ, start), reply, log)


class _Logged:
    """A reply's body that counts the bytes it yields and logs once closed (WSGI closes it)."""

    def __init__(self, body, reply, log):
        self.body, self.reply, self.log = body, reply, log

    def __iter__(self):
        for chunk in self.body:
            self.reply.sent += len(chunk)
            yield chunk

    def close(self):
        try:
            if hasattr(self.body, "close"):
                self.body.close()
        finally:
            self.log()

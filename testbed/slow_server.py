"""A server that answers every request a byte at a time: Label Studio behind a bad link, for
the tests of the backend's deadlines on its calls to Label Studio (issue 58).

    with TricklingServer(interval=0.5) as slow:
        LabelStudioAPI(slow.url, "token", retries=0).label_config(1)   # ends by its deadline

Each request is read whole, then answered ``200`` with a JSON body, one byte every
``interval`` seconds, status line and headers included, until the answer is sent or the client
goes away. ``requests`` counts what was asked.
"""

from __future__ import annotations

import socket
import threading
import time

ANSWER = b'{"label_config": "<View/>", "padding": "' + b"x" * 400 + b'"}'


class TricklingServer:
    def __init__(self, interval: float = 0.5):
        self.interval = interval
        self.requests = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._stop = threading.Event()
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def __enter__(self) -> TricklingServer:
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            self.requests += 1
            head = (
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % len(ANSWER)
            )
            for byte in head + ANSWER:
                if self._stop.is_set():
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return  # the client gave up: what a deadline is for
                time.sleep(self.interval)

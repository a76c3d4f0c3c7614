"""The challenge request to a connection's /health, against real hostile servers on loopback
(issue 42, item 3): an endless answer, an answer that trickles a byte at a time, a redirect to
the real backend, a connection URL that names another path. Each is cut off within its bounds,
and the training gets a reason, not a stuck wait or an out-of-memory kill."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from backend.labelstudio.outbound import MAX_ANSWER, OutboundRefused, bounded_get
from backend.labelstudio.webhook_auth import proves_self

SECRET = b"s" * 32


class Hostile(BaseHTTPRequestHandler):
    """Answers by ``self.server.how``; records each request's path."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.server.paths.append(self.path)
        how = self.server.how
        if how == "endless":  # 2.5 GB, or as much as the client reads
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            chunk = b"x" * 65536
            try:
                for _ in range(40_000):
                    self.wfile.write(chunk)
            except OSError:
                return
        elif how == "declared-huge":
            self.send_response(200)
            self.send_header("Content-Length", str(2_500_000_000))
            self.end_headers()
        elif how == "trickle":  # a byte every half second, for ever
            try:
                self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                for _ in range(1000):
                    self.wfile.write(b"X")
                    self.wfile.flush()
                    time.sleep(0.5)
            except OSError:
                return
        elif how == "redirect":
            self.send_response(302)
            self.send_header("Location", self.server.target)
            self.send_header("Content-Length", "0")
            self.end_headers()


@pytest.fixture
def hostile():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    server.paths, server.how, server.target = [], None, ""
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("how", ["endless", "declared-huge"])
def test_a_huge_answer_is_refused_after_a_few_kilobytes(hostile, how):
    server, url = hostile
    server.how = how
    start = time.monotonic()
    with pytest.raises(OutboundRefused, match=f"at most {MAX_ANSWER}|more than {MAX_ANSWER}"):
        bounded_get(url + "/health")
    assert time.monotonic() - start < 5


def test_a_trickling_answer_is_cut_off_at_the_deadline(hostile):
    server, url = hostile
    server.how = "trickle"
    start = time.monotonic()
    with pytest.raises(OutboundRefused, match="within 1 s"):
        bounded_get(url + "/health", deadline=1.0)
    assert time.monotonic() - start < 3
    # through the challenge: a reason for the log, within the default deadline
    start = time.monotonic()
    proven, why = proves_self(url, SECRET)
    assert not proven and "within" in why and time.monotonic() - start < 8


def test_a_redirect_is_not_followed_and_the_path_is_fixed(hostile):
    server, url = hostile
    server.how, server.target = "redirect", "http://127.0.0.1:1/health"
    proven, why = proves_self(f"{url}/internal/admin/delete-everything?confirm=yes&x=", SECRET)
    assert (proven, why) == (False, "/health answered HTTP 302")
    (path,) = server.paths
    assert path.startswith("/health?challenge=") and "delete" not in path


def test_an_unreachable_connection_is_a_reason():
    proven, why = proves_self("http://127.0.0.1:1", SECRET)
    assert not proven and "unreachable" in why

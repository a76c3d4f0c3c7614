"""A slow Label Studio cannot take the backend down (issue 58, item 4).

The hostile probe's Label Studio answered a byte every 4 s: six webhooks naming tasks the
version had not scored held all four request threads for minutes, and ``/health`` timed out,
because the calls' timeout bounded each read, not the request. Here a real server process as
the image runs it (gunicorn.conf.py's worker, 4 threads) talks to a stand-in that trickles every
answer a byte at a time (testbed.slow_server: Label Studio cannot be made to do it): every call
ends by its deadline, no webhook waits on Label Studio for a task, and ``/health`` answers
throughout.
"""

from __future__ import annotations

import threading
import time

import pytest

from backend.labelstudio.client import LabelStudioAPI, LabelStudioUnavailable
from backend.labelstudio.membership import ASK_TIMEOUT
from testbed.projects import publish_scout
from testbed.servers import BackendServer, http_json
from testbed.slow_server import TricklingServer


def _timed(method: str, url: str, body=None, timeout: float = 30.0) -> tuple[float, object]:
    """Seconds to the whole reply, and its status (or the error it raised)."""
    started = time.perf_counter()
    try:
        code, _ = http_json(method, url, body=body, timeout=timeout)
    except Exception as err:  # a timeout is an answer too
        code = f"{type(err).__name__}: {err}"
    return time.perf_counter() - started, code


def test_every_call_to_label_studio_ends_by_its_deadline():
    with TricklingServer(interval=0.2) as slow:  # its answer would take some 100 s
        api = LabelStudioAPI(slow.url, "0" * 40, retries=0, timeout=1.0, deadline=2.0)
        started = time.perf_counter()
        with pytest.raises(LabelStudioUnavailable, match="could not read project 1"):
            api.label_config(1)
        assert time.perf_counter() - started < 4.0
        assert slow.requests == 1


def test_a_trickling_label_studio_holds_no_request_thread(tmp_path, tiny_scout):
    model_dir = tmp_path / "models"
    publish_scout(model_dir, 1, tiny_scout, "srw-20260101-000000000-aaaaaa")
    with TricklingServer(interval=0.5) as slow:
        env = {"LOG_LEVEL": "INFO", "LABEL_STUDIO_URL": slow.url, "LABEL_STUDIO_API_KEY": "0" * 40}
        with BackendServer(
            model_dir, env, tmp_path / "server.log", workers=1, threads=4
        ) as backend:
            replies: list = []

            def event(task: int) -> None:
                body = {
                    "action": "ANNOTATION_UPDATED",
                    "project": {"id": 1},
                    "task": {"id": task},
                    "annotation": {"id": task},
                }
                replies.append(_timed("POST", backend.url + "/webhook", body))

            # six events naming tasks the serving version has not scored, at once
            senders = [threading.Thread(target=event, args=(100 + i,)) for i in range(6)]
            for sender in senders:
                sender.start()
            health = [_timed("GET", backend.url + "/health", timeout=5.0) for _ in range(6)]
            for sender in senders:
                sender.join(timeout=40)
            assert all(code == 200 and seconds < 2.0 for seconds, code in health), health
            assert len(replies) == 6 and all(code == 200 for _, code in replies), replies
            assert max(seconds for seconds, _ in replies) < 2.0, replies
            # a project new here is asked about, within the ask's deadline in all
            new = {"action": "ANNOTATION_CREATED", "project": {"id": 2}}
            seconds, code = _timed("POST", backend.url + "/webhook", new)
            assert code != 200 and seconds < ASK_TIMEOUT + 2.0, (seconds, code)
            assert _timed("GET", backend.url + "/health", timeout=5.0)[1] == 200
            assert not (model_dir / "2").exists()

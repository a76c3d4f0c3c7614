"""Slow clients cannot starve the production server (issue 26, item 2).

A real server process as the image runs it (gunicorn.conf.py, 2 workers x 4 threads) and 200
hostile connections (testbed.slow_clients): 100 trickle their headers a byte a second, 100 send
whole headers and then trickle a Content-Length body. Under gunicorn's gthread workers these held
every thread and /health stopped answering; the server's front must buffer them instead, keep
answering /health and /predict within a second, and close the connections once they go idle.
"""

from __future__ import annotations

import re
import time

from testbed.projects import NER_CONFIG, ner_task, publish_scout
from testbed.servers import BackendServer, http_json
from testbed.slow_clients import SlowClients

TASKS = [
    ner_task(1, "Angela Merkel visited Paris on Monday ."),
    ner_task(2, "Shares of Microsoft rose in New York ."),
]
SLOW = 100  # of each kind: 200 connections
IDLE_TIMEOUT = 4  # seconds, the server's IDLE_TIMEOUT in these tests


def _timed(method: str, url: str, body=None) -> tuple[float, int | str]:
    """Seconds to the whole reply, and its status (or the error it raised)."""
    started = time.perf_counter()
    try:
        code, _ = http_json(method, url, body=body, timeout=5.0)
    except Exception as err:  # a timeout or a refused connection is an answer too
        code = f"{type(err).__name__}: {err}"
    return time.perf_counter() - started, code


def _server(tmp_path, tiny_scout, **env) -> BackendServer:
    model_dir = tmp_path / "models"
    publish_scout(model_dir, 1, tiny_scout, "srw-20260101-000000000-aaaaaa")
    env = {"LOG_LEVEL": "INFO", "IDLE_TIMEOUT": str(IDLE_TIMEOUT), **env}
    return BackendServer(model_dir, env, tmp_path / "server.log", workers=2, threads=4)


def test_health_and_predict_answer_within_a_second_beside_200_slow_clients(tmp_path, tiny_scout):
    predict = {"tasks": TASKS, "project": "1.1700000000", "label_config": NER_CONFIG}
    with _server(tmp_path, tiny_scout, IDLE_TIMEOUT="60") as backend:
        for _ in range(50):  # computes and stores the scores, then every worker reads them once
            code, reply = http_json("POST", backend.url + "/predict", body=predict, timeout=120)
            assert code == 200 and len(reply["results"]) == len(TASKS), reply
            if (
                len(set(re.findall(r'"POST /predict [^"]*" 200 .* pid=<?(\d+)', backend.log(400))))
                == 2
            ):
                break
        with SlowClients("127.0.0.1", backend.port, headers=SLOW, bodies=SLOW) as slow:
            time.sleep(3)  # every connection accepted (or queued) and trickling
            answers = []
            for _ in range(10):  # over about 10 s of slow traffic
                answers.append(("/health", *_timed("GET", backend.url + "/health")))
                answers.append(("/predict", *_timed("POST", backend.url + "/predict", predict)))
                time.sleep(0.5)
            still_open = slow.open()
            sent = slow.bytes_sent()
        log = backend.log(200)
    late = [(path, round(s, 2), code) for path, s, code in answers if s >= 1.0 or code != 200]
    assert not late, f"{len(late)} of {len(answers)} late or failed: {late[:6]}\n{log[-3000:]}"
    # The server got out of nothing by dropping the slow connections: all 200 were open and
    # trickling throughout (they are not idle, so the idle timeout does not close them).
    assert still_open == 2 * SLOW, still_open
    assert sent >= 2 * SLOW * 5  # a byte a second each, for 5 s and more
    for path in ("/health", "/predict"):
        ms = sorted(round(s * 1000) for p, s, _ in answers if p == path)
        print(f"{path} beside {2 * SLOW} slow clients: {ms} ms")


def test_idle_slow_connections_are_closed_after_the_idle_timeout(tmp_path, tiny_scout):
    with _server(tmp_path, tiny_scout) as backend:
        with SlowClients("127.0.0.1", backend.port, headers=SLOW, bodies=SLOW) as slow:
            time.sleep(2 * IDLE_TIMEOUT)  # trickling: not idle, so still open
            assert slow.open() == 2 * SLOW
            slow.pause()
            closed_after = slow.wait_closed(timeout=IDLE_TIMEOUT + 20)
            left = {kind: slow.open(kind) for kind in ("headers", "bodies")}
            # and the server still answers
            seconds, code = _timed("GET", backend.url + "/health")
        log = backend.log(200)
    assert closed_after is not None, f"still open {IDLE_TIMEOUT + 20} s after going idle: {left}"
    # closed after the idle timeout, not before, and at most a couple of seconds after it
    assert IDLE_TIMEOUT - 1.5 <= closed_after <= IDLE_TIMEOUT + 3, closed_after
    assert code == 200 and seconds < 1.0, (seconds, code)
    assert "Traceback" not in log, log[-3000:]

"""The production server: gunicorn with several worker processes and threads (gunicorn.conf.py).

Stored scores must be visible to every worker, and no worker may load a version's scout twice.
The published versions are real (a MiniLM scout trained on CoNLL); training is not under test.
"""

from __future__ import annotations

import re
import signal
import socket
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from backend.config.settings import Settings
from backend.labelstudio.tasks import TaskRead, parse_label_config
from backend.serving.predictions import predict
from testbed.projects import NER_CONFIG, ner_task, publish_scout
from testbed.servers import BackendServer

TEXTS = [
    "Angela Merkel visited Paris on Monday .",
    "Manchester United beat Arsenal 2-1 .",
    "The European Commission said on Thursday it disagreed with German advice .",
    "Peter Blackburn reported from Brussels .",
    "Shares of Microsoft rose in New York .",
]


def _predict(backend: BackendServer, tasks: list[dict]) -> tuple[int, dict]:
    return backend.post(
        "/predict", {"tasks": tasks, "project": "1.1700000000", "label_config": NER_CONFIG}
    )


def _loads(log: str) -> Counter:
    """(version, pid) -> how often that worker loaded that version's scout."""
    return Counter(re.findall(r"loaded the scout of version (\S+) in [\d.]+ s \(pid (\d+)", log))


def _pids(log: str) -> set[str]:
    return set(re.findall(r'"POST /predict HTTP/1.1" 200 \d+ [\d.]+s pid=<?(\d+)', log))


def test_workers_share_stored_scores_and_load_each_version_once(tmp_path, tiny_scout):
    model_dir = tmp_path / "models"
    # Tasks 100-104 are the project's (a training stored them; their texts changed since).
    stale = {str(100 + i): {"result": [], "score": 0.5, "fingerprint": "old"} for i in range(5)}
    publish_scout(model_dir, 1, tiny_scout, "srw-20260101-000000000-aaaaaa", scores=stale)
    log_path = tmp_path / "gunicorn.log"
    with BackendServer(model_dir, {"LOG_LEVEL": "INFO"}, log_path, workers=2, threads=4) as backend:
        # 1. A burst of concurrent requests for the same new tasks: all answer alike.
        tasks = [ner_task(i, text) for i, text in enumerate(TEXTS)]
        with ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(lambda _: _predict(backend, tasks), range(24)))
        assert all(code == 200 for code, _ in replies), replies[0]
        scores = {tuple(r["score"] for r in body["results"]) for _, body in replies}
        assert len(scores) == 1 and len(next(iter(scores))) == len(TEXTS)

        # 2. Tasks a rescore stored (this process, as an rq job would, reading them from Label
        # Studio) are served from storage by every worker, none computing them.
        log_before = log_path.read_text()
        fresh = [ner_task(100 + i, text + " again") for i, text in enumerate(TEXTS)]
        settings = Settings(model_dir=str(model_dir))
        spec = parse_label_config(NER_CONFIG)
        stored = predict(settings, "1", spec, TaskRead.of(fresh, spec), True)
        for _ in range(200):  # until both workers have answered (the kernel picks the worker)
            with ThreadPoolExecutor(4) as pool:
                later = list(pool.map(lambda _: _predict(backend, fresh), range(4)))
            assert all(
                [r["score"] for r in body["results"]] == [r["score"] for r in stored]
                for _, body in later
            )
            if len(_pids(log_path.read_text()[len(log_before) :])) == 2:
                break
        new_log = log_path.read_text()[len(log_before) :]
        assert len(_pids(new_log)) == 2, "only one gunicorn worker answered"
        assert "project 1: computed" not in new_log, new_log[-3000:]

        # 3. A new version: each worker loads it once, and serves it.
        publish_scout(model_dir, 1, tiny_scout, "srw-20260102-000000000-bbbbbb")
        with ThreadPoolExecutor(8) as pool:
            replies = list(
                pool.map(
                    lambda i: _predict(backend, [ner_task(200 + i % 3, TEXTS[i % 3])]), range(40)
                )
            )
        assert all(
            code == 200 and body["model_version"] == "srw-20260102-000000000-bbbbbb"
            for code, body in replies
        )

    log = log_path.read_text()
    loads = _loads(log)
    assert loads, log[-3000:]
    assert max(loads.values()) == 1, f"a worker loaded a version twice: {loads}"
    assert {version for version, _ in loads} == {
        "srw-20260101-000000000-aaaaaa",
        "srw-20260102-000000000-bbbbbb",
    }
    assert "Traceback" not in log


def test_each_process_keeps_at_most_cached_models_scouts(tmp_path, tiny_scout, monkeypatch):
    """Memory per worker is bounded: loading a third project's version evicts the least recently
    used; a project's new version replaces its older one at once (never served again)."""
    from backend.config.settings import Settings
    from backend.serving import weighers
    from backend.store.store import ProjectStore

    monkeypatch.setattr(weighers, "CACHED_MODELS", 2)
    settings = Settings(model_dir=str(tmp_path))
    stores = [ProjectStore(tmp_path, project) for project in (1, 2, 3)]
    versions = [
        publish_scout(tmp_path, project, tiny_scout, f"srw-2026010{project}-000000000-aaaaaa")
        for project in (1, 2, 3)
    ]
    weighers._weighers.clear()
    first = weighers.weigher(settings, stores[0], versions[0])
    weighers.weigher(settings, stores[1], versions[1])
    assert weighers.weigher(settings, stores[0], versions[0]) is first  # cached: no second load
    weighers.weigher(settings, stores[2], versions[2])  # evicts project 2, the least recently used
    cached = [version for (_, version) in weighers._weighers]
    assert cached == [versions[0], versions[2]]
    newer = publish_scout(tmp_path, 1, tiny_scout, "srw-20260109-000000000-bbbbbb")
    weighers.weigher(settings, stores[0], newer)  # project 1's older version goes
    assert [version for (_, version) in weighers._weighers] == [versions[2], newer]
    weighers._weighers.clear()


# ----------------------------------------------------------------------------- the worker's front
# backend/web/waitress_worker.py: waitress's loop reads requests, gunicorn runs the processes (the
# slow clients themselves: tests/operations/test_slow_clients.py).


def test_max_requests_recycles_a_worker_without_losing_a_request(tmp_path):
    env = {"LOG_LEVEL": "INFO", "MAX_REQUESTS": "5"}
    with BackendServer(tmp_path / "models", env, tmp_path / "server.log", workers=1) as backend:
        codes = [backend.get("/health")[0] for _ in range(14)]
        log = backend.log(400)
    assert codes == [200] * 14
    # 15 requests with the start-up's: a worker for each 5 (one may still answer a request that
    # was on its way when it stopped accepting)
    assert log.count("Autorestarting worker after current request.") >= 2, log[-3000:]
    assert len(set(re.findall(r'"GET /health HTTP/1.1" 200 .* pid=<?(\d+)', log))) >= 3


def test_a_stop_finishes_the_request_in_flight(tmp_path, tiny_scout):
    """SIGTERM (a stop, or a restart's old workers): no new connections, the /predict in flight
    (a scout to load and 2 tasks to compute: seconds) is answered, then the worker exits."""
    model_dir = tmp_path / "models"
    publish_scout(model_dir, 1, tiny_scout, "srw-20260101-000000000-aaaaaa")
    tasks = [ner_task(i, text) for i, text in enumerate(TEXTS[:2])]
    backend = BackendServer(model_dir, {"LOG_LEVEL": "INFO"}, tmp_path / "server.log", workers=1)
    with backend, ThreadPoolExecutor(1) as pool:
        in_flight = pool.submit(_predict, backend, tasks)
        deadline = time.monotonic() + 60
        while "loaded the scout" not in backend.log(200) and time.monotonic() < deadline:
            time.sleep(0.05)  # the request is being computed
        backend.proc.send_signal(signal.SIGTERM)  # gunicorn's master: stop gracefully
        code, reply = in_flight.result(timeout=60)
        assert backend.proc.wait(timeout=40) == 0
        log = backend.log(200)
    assert code == 200 and len(reply["results"]) == 2, reply
    assert "computed 2 of 2 tasks" in log and "Traceback" not in log, log[-3000:]


def test_a_body_over_max_request_mb_is_refused_before_it_is_sent(tmp_path):
    env = {"MAX_REQUEST_MB": "1"}
    with BackendServer(tmp_path / "models", env, tmp_path / "server.log", workers=1) as backend:
        with socket.create_connection(("127.0.0.1", backend.port), timeout=5) as sock:
            sock.sendall(
                b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % (1024 * 1024 + 1)
            )
            reply = sock.recv(4096)  # no body sent: the limit is the declared length's
        assert reply.startswith(b"HTTP/1.1 413 "), reply
        code, _ = backend.post("/predict", {"tasks": ["x" * (1024 * 1024 - 100)]})
        assert code != 413  # the app's limit, not lower


def test_a_refused_setup_says_why_in_the_status_line(tmp_path):
    """Label Studio shows a refused /setup as '400 Client Error: <reason> for url: ...', never
    the body: the production server (gunicorn, the waitress worker) keeps our reason phrase."""
    import http.client
    import json

    with BackendServer(tmp_path / "models", {}, tmp_path / "server.log", workers=1) as backend:
        connection = http.client.HTTPConnection("127.0.0.1", backend.port, timeout=30)
        body = {"project": "3.1700000000", "schema": NER_CONFIG, "extra_params": "k=0"}
        connection.request("POST", "/setup", json.dumps(body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        assert (response.status, response.reason) == (
            400,
            "extra parameter k is 0; it must be at least 1",
        )


def test_two_servers_of_one_user_share_no_control_socket(tmp_path):
    """gunicorn's control socket defaults to one path per user ($XDG_RUNTIME_DIR or
    ~/.gunicorn): the second server of a user took it and the first's stop unlinked it
    (issue 42, item 10). gunicorn.conf.py makes none."""
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "XDG_RUNTIME_DIR": str(home)}
    first = BackendServer(tmp_path / "a", env, tmp_path / "a.log", workers=1)
    second = BackendServer(tmp_path / "b", env, tmp_path / "b.log", workers=1)
    with first, second:
        assert first.get("/health")[0] == 200 and second.get("/health")[0] == 200
        assert not list(home.rglob("*.ctl")), list(home.rglob("*"))
        first.stop()
        assert second.get("/health")[0] == 200


def test_a_large_body_without_credentials_costs_no_memory(tmp_path):
    """Issue 42, item 2: a 45 MB webhook body without credentials cost 1.4 GB of resident
    memory before its 401 (the JSON was parsed first), and four at once got the workers killed.
    Now the 401 comes from the headers: four at once leave the server's size as it was."""
    import requests

    from testbed.servers import tree_rss_mb

    env = {"BASIC_AUTH_USER": "lead", "BASIC_AUTH_PASS": "body-pass-77a1", "LOG_LEVEL": "INFO"}
    with BackendServer(tmp_path / "models", env, tmp_path / "server.log", workers=1) as backend:
        body = b'{"action": "START_TRAINING", "project": 1, "pad": "' + b"x" * 45_000_000 + b'"}'
        before = tree_rss_mb(backend.proc.pid)

        def post(_):
            return requests.post(
                f"{backend.url}/webhook",
                data=body,
                headers={"Content-Type": "application/json"},
                timeout=120,
            ).status_code

        with ThreadPoolExecutor(4) as pool:
            codes = list(pool.map(post, range(4)))
        after = tree_rss_mb(backend.proc.pid)
        assert codes == [401] * 4
        assert backend.get("/health")[0] == 200
    print(f"server {before:.0f} MB before, {after:.0f} MB after four 45 MB bodies")
    assert after - before < 150, (before, after)


def test_the_access_log_is_printable_and_bounded_and_data_files_private(tmp_path, tiny_scout):
    """Issue 58's lows: a request line with ESC and NUL was logged raw (a terminal reading the
    log obeys the escape), and as long as sent; the files the server writes under MODEL_DIR
    were readable by every user."""
    model_dir = tmp_path / "models"
    publish_scout(model_dir, 1, tiny_scout, "srw-20260101-000000000-aaaaaa")
    log_path = tmp_path / "gunicorn.log"
    with BackendServer(model_dir, {"LOG_LEVEL": "INFO"}, log_path, workers=1, threads=2) as backend:
        long_path = "/health?" + "a" * 3000
        for line in (b"GET /health?\x1b[2J\x1b[31mred\x00 HTTP/1.1", f"GET {long_path} HTTP/1.1"):
            with socket.create_connection(("127.0.0.1", backend.port), timeout=10) as conn:
                raw = line if isinstance(line, bytes) else line.encode()
                conn.sendall(raw + b"\r\nHost: x\r\nConnection: close\r\n\r\n")
                while conn.recv(65536):
                    pass
        event = {"action": "ANNOTATION_CREATED", "project": {"id": 1}}
        code, reply = backend.post("/webhook", event)
        assert code == 200, reply  # the server writes the project's status
        deadline = time.monotonic() + 10
        while "characters)" not in log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
    log = log_path.read_text()
    assert "\x1b" not in log and "\x00" not in log
    assert "\\x1b[2J\\x1b[31mred\\x00" in log
    (cut,) = [line for line in log.splitlines() if "/health?aaa" in line]
    assert len(cut) < 1000 and "characters)" in cut
    status = model_dir / "1" / "status.json"
    assert status.stat().st_mode & 0o777 == 0o640, oct(status.stat().st_mode)

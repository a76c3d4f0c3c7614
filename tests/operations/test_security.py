"""Security properties of the backend, beyond tests/backend/test_backend_server.py's per-endpoint
checks.

* Basic auth guards every route in the app's url_map except /health, so a new endpoint is
  covered without anyone remembering to list it.
* Secrets (Label Studio API key, basic-auth password, Redis password) appear in no log and no
  response, with real processes at LOG_LEVEL=DEBUG: redis-server with a password, the backend
  (``python _wsgi.py``) on rq, an rq worker, and a training that fails because Label Studio is
  unreachable.
* Nothing from a task is executed or used as a path: shell, template and Python injections,
  traversal ids, XXE labeling configs; project ids that are not plain digits are refused.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import time
import urllib.parse
from pathlib import Path
from typing import ClassVar

import pytest

import model as model_module
from backend.config.settings import Settings
from backend.labelstudio.tasks import ConfigError
from backend.store.store import ProjectStore
from backend.web.server import create_app
from testbed.projects import publish_scout
from testbed.servers import BackendServer, RedisServer, WorkerProcess, free_port, require_redis
from tests.doubles import (
    IMAGE_CONFIG,
    NER_CONFIG,
    FakeRunner,
    basic_auth,
    offline_settings,
    use_label_studio,
)
from tests.paths import ROUTES

USER, PASSWORD = "sec-user", "sec-pass-8d1e4b"
API_KEY = "sec-apikey-4e5f6a7b8c9d0e1f2a3b4c5d"

GOOD = basic_auth(USER, PASSWORD)


def _app(model_dir: Path, **overrides):
    config = {
        "model_dir": str(model_dir),
        "basic_auth_user": USER,
        "basic_auth_pass": PASSWORD,
        "label_studio_url": f"http://127.0.0.1:{free_port()}",
        "label_studio_api_key": API_KEY,
        "k": 3,
        "n_samples": 10,
        "retrain_after": 1,
        "max_request_mb": 1,
    }
    config.update(overrides)
    runner = FakeRunner()
    return create_app(Settings(**config), runner=runner, selftest_runner=FakeRunner()), runner


# ------------------------------------------------------------------------- basic auth, every route

BAD_CREDENTIALS = {
    "none": {},
    "wrong password": basic_auth(USER, "wrong"),
    "wrong user": basic_auth("admin", PASSWORD),
    "user and password swapped": basic_auth(PASSWORD, USER),
    "password prefix": basic_auth(USER, PASSWORD[:-1]),
    "password plus a character": basic_auth(USER, PASSWORD + "x"),
    "user in upper case": basic_auth(USER.upper(), PASSWORD),
    "empty": basic_auth("", ""),
    "no password": {"Authorization": "Basic " + base64.b64encode(USER.encode()).decode()},
    "Bearer scheme": {"Authorization": f"Bearer {PASSWORD}"},
    "Token scheme": {"Authorization": f"Token {API_KEY}"},
    "Digest scheme": {"Authorization": f'Digest username="{USER}", response="{PASSWORD}"'},
    "credentials without scheme": {
        "Authorization": base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    },
    "not base64": {"Authorization": "Basic !!!"},
    "non-ASCII token": {"Authorization": "Basic ÿÿ"},
    "in the query string": {},  # below: ?user=...&password=... does not count
}
# A body every POST route acts on when authorised; START_TRAINING shows on the runner if not.
BODY = {
    "project": "1",
    "schema": NER_CONFIG,
    "label_config": NER_CONFIG,
    "tasks": [],
    "action": "START_TRAINING",
}


def _routes(app) -> list[tuple[str, str]]:
    """(method, path) for every rule of the app but /health; converters filled with "1"."""
    out = []
    for rule in app.url_map.iter_rules():
        if rule.rule == "/health":
            continue
        path = re.sub(r"<(?:[^<>:]+:)?[^<>]+>", "1", rule.rule)
        out += [(method, path) for method in sorted(rule.methods)]
    return out


def test_basic_auth_guards_every_route_but_health(tmp_path):
    app, runner = _app(tmp_path / "models")
    # Registered after create_app, like a future endpoint: the guard is app-wide, not per view.
    app.add_url_rule(
        "/added-later/<int:n>", "added_later", lambda n: {"secret": n}, methods=["GET", "DELETE"]
    )
    client = app.test_client()
    routes = _routes(app)
    paths = {path for _, path in routes}
    assert (ROUTES - {"/health"}) | {"/added-later/1"} <= paths, paths

    for method, path in routes:
        for name, headers in BAD_CREDENTIALS.items():
            query = {
                "project": 1,
                **({"user": USER, "password": PASSWORD} if name == "in the query string" else {}),
            }
            url = path + "?" + urllib.parse.urlencode(query)
            response = client.open(url, method=method, json=BODY, headers=headers)
            assert response.status_code == 401, (method, path, name, response.status_code)
            assert response.headers["WWW-Authenticate"].startswith("Basic realm=")
            if method != "HEAD":
                assert response.get_json() == {"error": "authentication required"}
        response = client.open(path + "?project=1", method=method, json=BODY, headers=GOOD)
        assert response.status_code != 401, (method, path)
        assert response.status_code < 500, (method, path, response.get_data())
    # Only the authorised START_TRAINING webhooks reached the runner.
    assert runner.submitted == ["1"] * sum(1 for m, p in routes if p == "/webhook" and m == "POST")

    # The exemption is the exact path /health, nothing that merely resembles it.
    assert client.get("/health").status_code == 200
    for path in ("/health/", "/Health", "//health", "/health/../status"):
        assert client.get(path + "?project=1").status_code == 401, path


# ------------------------------------------------------------------------- secrets, real processes


def test_secrets_never_in_logs_or_responses_real_processes(tmp_path, tiny_scout):
    require_redis()
    redis_password = "redis-pw-" + secrets.token_hex(8)
    api_key = "ls-key-" + secrets.token_hex(16)
    basic_password = "basic-pw-" + secrets.token_hex(8)
    basic_token = base64.b64encode(f"{USER}:{basic_password}".encode()).decode()
    url_password = "ls-url-pw-" + secrets.token_hex(8)
    webhook_secret = "wh-secret-" + secrets.token_hex(12)
    secret_values = {
        "LABEL_STUDIO_API_KEY": api_key,
        "BASIC_AUTH_PASS": basic_password,
        "REDIS_PASSWORD": redis_password,
        "basic auth header": basic_token,
        "LABEL_STUDIO_URL's password": url_password,
        "SRW_WEBHOOK_SECRET": webhook_secret,
    }
    # Nothing listens there; its user:password@ must be masked wherever the URL is shown.
    ls_host = f"127.0.0.1:{free_port()}"
    ls_url = f"http://lsadmin:{url_password}@{ls_host}"
    auth = (USER, basic_password)

    redis = RedisServer(password=redis_password).start()
    redis_url = redis.url
    model_dir = tmp_path / "models"
    publish_scout(model_dir, 1, tiny_scout)
    env = {
        "REDIS_URL": redis_url,
        "RQ_QUEUE_NAME": f"srw-sec-{secrets.token_hex(4)}",
        "LABEL_STUDIO_URL": ls_url,
        "LABEL_STUDIO_API_KEY": api_key,
        "BASIC_AUTH_USER": USER,
        "BASIC_AUTH_PASS": basic_password,
        "SRW_WEBHOOK_SECRET": webhook_secret,
        "LOG_LEVEL": "DEBUG",
        "SRW_K": "3",
        "SRW_N": "10",
        "SRW_MIN_ANNOTATIONS": "1",
        "SRW_RETRAIN_AFTER": "2",
    }
    backend = BackendServer(model_dir, env, tmp_path / "backend.log")
    # The worker, as docker-compose runs it, reads the Redis URL from the environment.
    worker = WorkerProcess(model_dir, env, tmp_path / "worker.log")
    bodies: list[str] = []

    def call(method, path, body=None, credentials=auth, expect=None):
        if method == "GET":
            status, data = backend.get(path, auth=credentials)
        else:
            status, data = backend.post(path, body, auth=credentials)
        bodies.append(json.dumps(data))
        if expect is not None:
            assert status == expect, (method, path, status, data)
        return status, data

    try:
        backend.start()
        worker.start()
        task = {
            "id": 1,
            "data": {"text": "Angela Merkel visited Paris ."},
            "annotations": [
                {
                    "id": 1,
                    "result": [
                        {
                            "from_name": "label",
                            "to_name": "text",
                            "type": "labels",
                            "value": {
                                "start": 0,
                                "end": 13,
                                "text": "Angela Merkel",
                                "labels": ["PER"],
                            },
                        }
                    ],
                }
            ],
        }
        # Wrong credentials of every kind, some carrying the other secrets.
        for credentials in (
            (USER, "wrong"),
            ("admin", basic_password),
            (USER, api_key),
            (redis_password, "x"),
        ):
            call("GET", "/status?project=1", credentials=credentials, expect=401)
            call(
                "POST",
                "/webhook",
                {"action": "START_TRAINING", "project": {"id": 1}},
                credentials=credentials,
                expect=401,
            )
        # Label Studio does not answer: the connection is refused, naming the masked address
        _, refused = call(
            "POST",
            "/setup",
            {
                "project": "1.1700000000",
                "schema": NER_CONFIG,
                "access_token": api_key,
                "hostname": ls_url,
            },
            expect=502,
        )
        assert f"Label Studio at http://lsadmin:***@{ls_host} did not answer" in refused["error"]
        call("POST", "/setup", {"project": "1", "schema": IMAGE_CONFIG}, expect=400)
        call(
            "POST",
            "/predict",
            {"project": "1", "label_config": NER_CONFIG, "tasks": [task]},
            expect=200,
        )
        call("POST", "/predict", {"project": "1", "tasks": [task]}, expect=400)
        call("POST", "/webhook", {"action": "ANNOTATION_CREATED", "project": {"id": 1}}, expect=200)
        # Start Training reads the project first: refused, as Label Studio does not answer
        call("POST", "/webhook", {"action": "START_TRAINING", "project": {"id": 1}}, expect=502)
        # the second change starts a retrain (SRW_RETRAIN_AFTER=2), which fails on the worker
        call("POST", "/webhook", {"action": "ANNOTATION_CREATED", "project": {"id": 1}}, expect=201)

        # The job runs on the worker: Label Studio does not answer, so after its retries
        # (about 15 s of backoff) the training fails, and /status says why.
        deadline = time.monotonic() + 120
        while True:
            _, status = call("GET", "/status?project=1", expect=200)
            if status["state"] == "failed" or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert status["state"] == "failed", (status, worker.log(), backend.log())
        assert (
            "LabelStudioUnreachable" in status["last_error"] and ls_host in status["last_error"]
        ), status
        assert status["current_version"] is not None  # the published version keeps serving
        call("GET", "/is_training?project=1", expect=200)
        call("GET", "/versions?project=1", expect=200)
        call("GET", "/status", expect=400)
    finally:
        worker.stop()
        backend.stop()
        redis.stop()

    backend_log = backend.log_path.read_text(errors="replace")
    worker_log = worker.log_path.read_text(errors="replace")
    # We read real debug output, including the training's failure on the worker.
    assert " DEBUG " in backend_log and "subregweigh backend" in backend_log
    assert f"http://lsadmin:***@{ls_host}" in backend_log  # the start-up line, masked
    assert "LabelStudioUnreachable" in worker_log, worker_log[-3000:]
    for name, value in secret_values.items():
        assert value not in backend_log, f"{name} in the backend's log"
        assert value not in worker_log, f"{name} in the worker's log"
        for body in bodies:
            assert value not in body, f"{name} in a response: {body[:300]}"


# ----------------------------------------------------------------------------- injections and paths

XXE_CONFIGS = [
    (
        '<!DOCTYPE v [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        '<View><Labels name="label" toName="text"><Label value="&x;"/></Labels><Text name="text" '
        'value="$text"/></View>'
    ),
    (
        '<!DOCTYPE v [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        '<View><Labels name="label" toName="text"><Label value="PER"/></Labels><Text name="&x;" '
        'value="$text"/></View>'
    ),
    (
        '<!DOCTYPE v [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        '<View><Labels name="label" toName="&x;"><Label value="PER"/></Labels><Text name="text" '
        'value="$text"/></View>'
    ),
    (
        '<!DOCTYPE v [<!ENTITY % p SYSTEM "file:///etc/passwd"> %p;]>'
        '<View><Labels name="label" toName="text"><Label value="PER"/></Labels><Text name="text" '
        'value="$text"/></View>'
    ),
    (
        '<View xmlns:xi="http://www.w3.org/2001/XInclude"><xi:include href="file:///etc/passwd" '
        'parse="text"/>'
        '<Labels name="label" toName="text"><Label value="PER"/></Labels><Text name="text" '
        'value="$text"/></View>'
    ),
    # billion laughs: refused by the parser's amplification limit, quickly
    '<!DOCTYPE v [<!ENTITY a "lol">'
    + "".join(f'<!ENTITY {chr(98 + i)} "' + f"&{chr(97 + i)};" * 10 + '">' for i in range(9))
    + ']><View><Labels name="label" toName="text"><Label value="&j;"/></Labels><Text name="text" '
    'value="$text"/></View>',
]


def _nasty(canary: Path) -> list[str]:
    return [
        "../../../tmp/pwned",
        "../../canary/pwned",
        "../../../canary/pwned",
        str(canary / "absolute"),
        "$(touch /tmp/x)",
        f"$(touch {canary}/cmd)",
        f"`touch {canary}/backtick`",
        f"; touch {canary}/semi",
        f"| touch {canary}/pipe",
        "{{7*7}}",
        "${7*7}",
        "#{7*7}",
        "<%= 7*7 %>",
        f"__import__('os').system('touch {canary}/py')",
        "%s%s%s%n",
        "\x00",
        "/etc/passwd",
        "file:///etc/passwd",
        "..\\..\\windows\\win.ini",
        "CON",
    ]


def _outside(root: Path) -> set[str]:
    """Every path under ``root`` but those in its models/ (MODEL_DIR)."""
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.relative_to(root).parts[0] != "models"
    }


class FakeLabelStudio:
    """Stands in for Label Studio's API (the LabelStudioAPI of backend.jobs.training and
    backend.jobs.rescore) so a real training runs on the tasks given here; records what the
    training writes back."""

    config = NER_CONFIG
    task_list: ClassVar[list[dict]] = []
    written: ClassVar[list[dict]] = []
    model_version: str | None = None

    def __init__(self, url, api_key, **kwargs):
        pass

    def label_config(self, project):
        return type(self).config

    def tasks(self, project):
        return type(self).task_list

    def users(self):
        return {1: "admin@example.com"}

    def write_predictions(self, project, predictions):
        type(self).written.extend(predictions)
        return set()  # every task still in the project

    def set_model_version(self, project, version):
        type(self).model_version = version

    def model_versions(self, project):
        versions = {p["model_version"] for p in type(self).written}
        return {v: sum(p["model_version"] == v for p in type(self).written) for v in versions}

    def delete_model_version(self, project, version):
        type(self).written[:] = [p for p in type(self).written if p["model_version"] != version]


def test_task_data_never_executed_nor_used_as_a_path(tmp_path, tiny_scout, monkeypatch):
    model_dir, canary = tmp_path / "models", tmp_path / "canary"
    canary.mkdir()
    version = publish_scout(model_dir, 1, tiny_scout)
    app, runner = _app(model_dir)
    client = app.test_client()
    nasty = _nasty(canary)
    outside = [Path("/tmp/pwned"), Path("/tmp/x"), Path("/tmp/canary")]
    existed = {p: p.exists() for p in outside}
    before = _outside(tmp_path)
    responses: list[bytes] = []

    def post(path, body, ok=(200,)):
        response = client.post(path, json=body, headers=GOOD)
        responses.append(response.get_data())
        assert response.status_code in ok, (path, response.status_code, response.get_data()[:500])
        return response

    # /predict: injections as task ids, texts, data keys, annotation ids, region fields.
    tasks = []
    for i, value in enumerate(nasty):
        tasks.append({"id": value, "data": {"text": f"Angela Merkel {value} visited Paris ."}})
        tasks.append(
            {
                "id": 100 + i,
                "data": {"text": value, value: value},
                "annotations": [
                    {
                        "id": value,
                        "result": [
                            {
                                "from_name": value,
                                "to_name": value,
                                "type": "labels",
                                "id": value,
                                "value": {"start": 0, "end": 6, "text": value, "labels": ["PER"]},
                            }
                        ],
                    }
                ],
            }
        )
    body = post("/predict", {"project": "1", "label_config": NER_CONFIG, "tasks": tasks}).get_json()
    assert len(body["results"]) == len(tasks)
    assert all(r["model_version"] == version for r in body["results"])
    # Served, and not stored: no task of the project has such an id
    # (backend.labelstudio.membership).
    assert not {v for v in nasty} & set(ProjectStore(model_dir, 1).scores(version))

    # XXE and friends in the labeling config: a clean 400 (or 200), never a file's content.
    for config in XXE_CONFIGS:
        start = time.monotonic()
        post("/setup", {"project": "1", "schema": config}, ok=(200, 400))
        post(
            "/predict", {"project": "1", "label_config": config, "tasks": tasks[:4]}, ok=(200, 400)
        )
        assert time.monotonic() - start < 10

    # Project ids that are not plain ASCII digits never become directories.
    bad_projects = [
        "../1",
        "1/../../canary",
        "../../canary",
        "..",
        "/tmp",
        "١",
        "²",
        "𝟏",
        "-1",
        "1e3",
        " 1",
        "1 ",
        "0x1",
        "+1",
        "",
        "1\x00",
        "1" * 300,
        {"id": "../1"},
        {"id": str(canary)},
        [1],
        *[v for v in nasty if not v[:1].isdigit()],
    ]
    for project in bad_projects:
        for path, body in (
            ("/setup", {"project": project, "schema": NER_CONFIG}),
            ("/predict", {"project": project, "label_config": NER_CONFIG, "tasks": tasks[:2]}),
            ("/webhook", {"action": "START_TRAINING", "project": project}),
            ("/webhook", {"action": "ANNOTATION_CREATED", "project": project}),
            ("/versions", {"project": project}),
        ):
            post(path, body, ok=(400,))
        if isinstance(project, str):
            for path in ("/status", "/is_training", "/versions"):
                response = client.get(path, query_string={"project": project}, headers=GOOD)
                responses.append(response.get_data())
                assert response.status_code == 400, (path, project, response.get_data())
    assert runner.submitted == []

    # Training: the same conversions on a real (tiny) training, tasks fetched from a fake
    # Label Studio whose task data and annotations carry the injections.
    train_tasks = [
        {
            "id": 1000 + i,
            "data": {"text": f"Angela Merkel met {value} in Paris ."},
            "annotations": [
                {
                    "id": value,
                    "result": [
                        {
                            "from_name": "label",
                            "to_name": "text",
                            "type": "labels",
                            "id": value,
                            "value": {"start": 0, "end": 13, "text": value, "labels": ["PER"]},
                        }
                    ],
                }
            ],
        }
        for i, value in enumerate(nasty)
    ]
    monkeypatch.setattr(FakeLabelStudio, "task_list", train_tasks)
    monkeypatch.setattr(FakeLabelStudio, "written", [])
    monkeypatch.setattr(FakeLabelStudio, "model_version", None)
    use_label_studio(monkeypatch, FakeLabelStudio)
    settings = offline_settings(
        model_dir,
        label_studio_api_key=API_KEY,
        epochs=1,
        k=2,
        n_samples=4,
        min_annotations=2,
    )
    result = model_module.SubRegWeighModel(project="5", settings=settings).fit()
    assert result["trained"] is True, result
    assert sorted(p["task"] for p in FakeLabelStudio.written) == [t["id"] for t in train_tasks]
    assert FakeLabelStudio.model_version == result["last_version"]

    # An XXE config fetched by a training fails it cleanly; the error holds no file content.
    monkeypatch.setattr(FakeLabelStudio, "config", XXE_CONFIGS[1])
    with pytest.raises(ConfigError, match="not valid XML"):
        model_module.SubRegWeighModel(project="6", settings=settings).fit()
    status = client.get("/status?project=6", headers=GOOD)
    responses.append(status.get_data())
    assert status.get_json()["state"] == "failed"

    # Nothing was created outside MODEL_DIR, and inside it only digit-named projects.
    assert list(canary.iterdir()) == []
    for path, was in existed.items():
        assert path.exists() == was, path
    assert _outside(tmp_path) == before
    assert all(p.name.isascii() and p.name.isdigit() for p in model_dir.iterdir()), list(
        model_dir.iterdir()
    )
    for path in model_dir.rglob("*"):
        assert path.resolve().is_relative_to(model_dir.resolve()), path
        assert not any(
            marker in path.name for marker in ("pwned", "touch", "{{", "$(", "import")
        ), path
    for raw in responses:
        assert b"root:" not in raw and b"/bin/bash" not in raw and b"/usr/sbin" not in raw

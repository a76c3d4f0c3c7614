"""backend.web.server: the Flask app Label Studio talks to (Flask test client, no training)."""

from __future__ import annotations

import logging

import pytest

from backend.config.settings import Settings
from backend.web.server import create_app
from tests.doubles import IMAGE_CONFIG, NER_CONFIG, FakeRunner, basic_auth

USER, PASSWORD = "ls-backend", "basic-pass-5f2a9c"
API_KEY = "apikey-0123456789abcdef0123456789abcdef"

GOOD = basic_auth(USER, PASSWORD)


def make_app(tmp_path, **overrides):
    settings = dict(
        model_dir=str(tmp_path / "models"),
        basic_auth_user=USER,
        basic_auth_pass=PASSWORD,
        label_studio_api_key=API_KEY,
        label_studio_url="http://127.0.0.1:1",
        retrain_after=3,
        max_request_mb=1,
    )
    settings.update(overrides)
    runner = FakeRunner()
    app = create_app(
        Settings(**settings),
        runner=runner,
        selftest_runner=FakeRunner(),
        rescore_runner=FakeRunner(),
    )
    return app, app.test_client(), runner


@pytest.fixture
def backend(tmp_path):
    return make_app(tmp_path)


def _task(task_id, text="Angela Merkel visited Zürich."):
    return {"id": task_id, "data": {"text": text}, "annotations": [], "predictions": []}


# One authorised request per endpoint, with the status it must answer.
ENDPOINTS = [
    ("GET", "/", None, 200),
    ("POST", "/setup", {"project": "1.1700000000", "schema": NER_CONFIG}, 200),
    (
        "POST",
        "/predict",
        {"project": "1.1700000000", "label_config": NER_CONFIG, "tasks": [_task(1)]},
        200,
    ),
    ("POST", "/webhook", {"action": "START_TRAINING", "project": {"id": 1}}, 201),
    ("POST", "/webhook", {"action": "PROJECT_UPDATED", "project": {"id": 1}}, 200),
    ("POST", "/webhook", {"action": "NOPE", "project": {"id": 1}}, 400),
    ("GET", "/status?project=1", None, 200),
    ("GET", "/is_training?project=1", None, 200),
    ("GET", "/versions", None, 200),
    ("GET", "/versions?project=1", None, 200),
    ("POST", "/versions", {"project": "1"}, 200),
    ("GET", "/status", None, 400),
    ("GET", "/report?project=1", None, 404),  # not trained yet
    ("GET", "/report.json?project=1", None, 404),
    ("POST", "/selftest?project=1", {}, 202),
]


def _call(client, method, path, body, headers=None):
    if method == "GET":
        return client.get(path, headers=headers)
    return client.post(path, json=body, headers=headers)


def _answer(client, path: str, status: int, **request) -> dict:
    """POST ``request`` (``json=`` or ``data=``) to ``path`` as the right user: it answers
    ``status``; its JSON body."""
    response = client.post(path, headers=GOOD, **request)
    assert response.status_code == status, response.get_json()
    return response.get_json()


def _refused(client, path: str, **request) -> str:
    """:func:`_answer` 400: its error message."""
    return _answer(client, path, 400, **request)["error"]


# ----------------------------------------------------------------------------- auth


def test_health_needs_no_auth(backend):
    _, client, _ = backend
    for headers in (None, basic_auth("wrong", "wrong")):
        response = client.get("/health", headers=headers)
        assert response.status_code == 200
        assert response.get_json() == {"status": "UP", "model_class": "SubRegWeighModel"}


@pytest.mark.parametrize("method,path,body,expected", ENDPOINTS)
def test_endpoints_require_basic_auth(backend, method, path, body, expected):
    _, client, runner = backend
    for headers in (
        None,
        basic_auth(USER, "wrong"),
        basic_auth("wrong", PASSWORD),
        basic_auth("", ""),
        {"Authorization": "Bearer " + PASSWORD},
        {"Authorization": "Basic !!notbase64"},
    ):
        response = _call(client, method, path, body, headers)
        assert response.status_code == 401, (path, headers)
        assert response.headers["WWW-Authenticate"].startswith("Basic")
        assert response.get_json() == {"error": "authentication required"}
    assert runner.submitted == []  # nothing acted on without auth
    response = _call(client, method, path, body, GOOD)
    assert response.status_code == expected, response.get_json()


def test_unknown_path_needs_auth_too(backend):
    _, client, _ = backend
    assert client.get("/nope").status_code == 401
    assert client.get("/nope", headers=GOOD).status_code == 404


def test_no_auth_configured_means_open(tmp_path):
    _, client, _ = make_app(tmp_path, basic_auth_user="", basic_auth_pass="")
    assert client.post("/setup", json={"project": "1", "schema": NER_CONFIG}).status_code == 200


# ----------------------------------------------------------------------------- /setup


def test_setup_image_config_400_with_message(backend):
    _, client, _ = backend
    error = _refused(client, "/setup", json={"project": "4.1700000000", "schema": IMAGE_CONFIG})
    assert "weighs a Labels (NER) or Choices (classification) control on a Text" in error
    assert "'box' (RectangleLabels)" in error and "<" not in error  # Label Studio strips tags


@pytest.mark.parametrize(
    "body,fragment",
    [
        ({"project": "4", "schema": ""}, "no labeling config"),
        ({"project": "4"}, "no labeling config"),
        ({"project": "4", "schema": "<View><Text"}, "not valid XML"),
        ({"project": "../4", "schema": NER_CONFIG}, "no valid project id"),
        ({"schema": NER_CONFIG}, "no valid project id"),
    ],
)
def test_setup_bad_requests(backend, body, fragment):
    _, client, _ = backend
    assert fragment in _refused(client, "/setup", json=body)


def test_setup_ner_config_untrained(backend):
    _, client, _ = backend
    setup = {
        "project": "1.1700000000",
        "schema": NER_CONFIG,
        "hostname": "http://localhost:8080",
        "access_token": "tok",
        "extra_params": "",
    }
    assert _answer(client, "/setup", 200, json=setup) == {"model_version": "subregweigh-untrained"}


def test_setup_reports_published_version(backend, tmp_path):
    from backend.store.store import ProjectStore

    _, client, _ = backend
    store = ProjectStore(tmp_path / "models", 2)
    staging = store.staging_dir()
    store.publish(staging, "srw-20260101-000000-abcdef")
    response = client.post("/setup", json={"project": "2.1", "schema": NER_CONFIG}, headers=GOOD)
    assert response.get_json() == {"model_version": "srw-20260101-000000-abcdef"}


# ----------------------------------------------------------------------------- /predict


@pytest.mark.parametrize("data", [b"{not json", b"", b"[1, 2]", b'"a string"', b"null"])
def test_predict_malformed_json_400(backend, data):
    _, client, _ = backend
    error = _refused(client, "/predict", data=data, content_type="application/json")
    assert error == "the request body must be a JSON object"


@pytest.mark.parametrize(
    "body,fragment",
    [
        ({"project": "1", "label_config": NER_CONFIG}, "'tasks' must be a list"),
        (
            {"project": "1", "label_config": NER_CONFIG, "tasks": {"id": 1}},
            "'tasks' must be a list",
        ),
        ({"project": "1", "label_config": NER_CONFIG, "tasks": [1, 2]}, "'tasks' must be a list"),
        ({"project": "1", "tasks": [_task(1)]}, "'label_config' is missing"),
        ({"label_config": NER_CONFIG, "tasks": [_task(1)]}, "no valid project id"),
        (
            {"project": "1", "label_config": IMAGE_CONFIG, "tasks": [_task(1)]},
            "control on a Text object",
        ),
    ],
)
def test_predict_bad_requests(backend, body, fragment):
    _, client, _ = backend
    assert fragment in _refused(client, "/predict", json=body)


def test_predict_before_training_empty_results_in_order(backend):
    _, client, _ = backend
    tasks = [_task(30), _task(10, "Paris"), {"id": 20, "data": {"other": "x"}}, _task(40, "")]
    request = {
        "project": "1.1700000000",
        "label_config": NER_CONFIG,
        "tasks": tasks,
        "params": {"login": None, "password": None, "context": None},
    }
    body = _answer(client, "/predict", 200, json=request)
    assert body["model_version"] == "subregweigh-untrained"
    assert body["results"] == [{"result": [], "model_version": "subregweigh-untrained"}] * len(
        tasks
    )


def test_predict_no_tasks(backend):
    _, client, _ = backend
    request = {"project": "1", "label_config": NER_CONFIG, "tasks": []}
    assert _answer(client, "/predict", 200, json=request)["results"] == []


def test_each_route_caps_its_body_with_413_before_reading_it(backend):
    """/predict at MAX_REQUEST_MB (1 here), /webhook at WEBHOOK_BODY (sized from what Label
    Studio sends for long tasks), /setup at 1 MiB, the rest at SMALL_BODY; a body just under a
    cap gets past it (to its route's own answer)."""
    from backend.web.auth import SMALL_BODY, WEBHOOK_BODY

    _, client, runner = backend
    caps = {"/predict": 2**20, "/webhook": WEBHOOK_BODY, "/setup": 2**20, "/selftest": SMALL_BODY}
    for path, cap in caps.items():
        over = b'{"tasks": ["' + b"x" * cap + b'"]}'
        response = client.post(path, data=over, content_type="application/json", headers=GOOD)
        assert response.status_code == 413, path
        assert f"at most {cap} bytes" in response.get_json()["error"]
        under = b'{"x": "' + b"x" * (cap - 100) + b'"}'
        response = client.post(path, data=under, content_type="application/json", headers=GOOD)
        assert response.status_code == 400, path  # read, and refused for what it holds
    assert runner.submitted == []


def test_request_just_under_limit_accepted(backend):
    _, client, _ = backend
    text = "word " * 150_000  # 750 kB, under the 1 MB limit
    response = client.post(
        "/predict",
        json={"project": "1", "label_config": NER_CONFIG, "tasks": [_task(1, text)]},
        headers=GOOD,
    )
    assert response.status_code == 200


# ----------------------------------------------------------------------------- /webhook


def test_webhook_unknown_action_400(backend):
    _, client, runner = backend
    error = _refused(client, "/webhook", json={"action": "SOMETHING_ELSE", "project": {"id": 1}})
    assert "SOMETHING_ELSE" in error
    assert "'action' is missing" in _refused(client, "/webhook", json={"project": {"id": 1}})
    _refused(client, "/webhook", data=b"{oops", content_type="application/json")
    assert runner.submitted == []


@pytest.mark.parametrize("action", ["PROJECT_UPDATED", "TASKS_CREATED", "TASKS_DELETED"])
def test_webhook_ignored_actions(backend, action):
    _, client, runner = backend
    event = {"action": action, "project": {"id": 1, "title": "p"}}
    assert _answer(client, "/webhook", 200, json=event) == {"status": "ignored", "action": action}
    assert runner.submitted == []


def test_webhook_start_training_submits(backend):
    _, client, runner = backend
    response = client.post(
        "/webhook",
        json={
            "action": "START_TRAINING",
            "project": {"id": 12, "title": "NER", "label_config": NER_CONFIG},
        },
        headers=GOOD,
    )
    assert response.status_code == 201
    # the stand-in Label Studio (tests.doubles) has 40 of 40 tasks annotated
    sentence = "training started on 40 annotated tasks"
    assert response.status == f"201 {sentence}"  # the reason phrase
    assert response.get_json() == {
        "status": "started",
        "action": "START_TRAINING",
        "message": sentence,
    }
    assert runner.submitted == ["12"]
    assert client.get("/status?project=12", headers=GOOD).get_json()["start_reply"] == sentence


def test_webhook_bad_project_400(backend):
    _, client, runner = backend
    for project in (None, {"id": "../1"}, "abc", {"title": "no id"}):
        response = client.post(
            "/webhook", json={"action": "START_TRAINING", "project": project}, headers=GOOD
        )
        assert response.status_code == 400, project
    assert runner.submitted == []


def test_one_project_has_one_name_whatever_zeros_lead_its_id(backend, tmp_path):
    _, client, runner = backend
    for raw in ({"id": 4}, "04.1700000000", {"id": "004"}):  # retrain_after=3
        event = {"action": "ANNOTATION_CREATED", "project": raw, "task": {"id": 9}}
        assert client.post("/webhook", json=event, headers=GOOD).status_code in (200, 201)
    assert runner.submitted == ["4"]  # the third change of project 4, not three projects
    assert sorted(
        p.name for p in (tmp_path / "models").iterdir() if not p.name.startswith(".")
    ) == ["4"]
    for query in ("4", "04", "0004"):
        status = client.get(f"/status?project={query}", headers=GOOD).get_json()
        assert status["events_since_training"] == 3


def test_webhook_annotation_events_counted_until_retrain_after(backend):
    _, client, runner = backend
    events = ["ANNOTATION_CREATED", "ANNOTATION_UPDATED"]
    for i, action in enumerate(events):  # retrain_after=3: the first two are only counted
        event = {
            "action": action,
            "project": {"id": 5},
            "task": {"id": 100 + i},
            "annotation": {"id": 200 + i, "result": []},
        }
        assert _answer(client, "/webhook", 200, json=event) == {
            "status": "counted",
            "action": action,
        }
        assert runner.submitted == []
        status = client.get("/status?project=5", headers=GOOD).get_json()
        assert status["events_since_training"] == i + 1

    response = client.post(
        "/webhook",
        json={"action": "ANNOTATIONS_DELETED", "project": {"id": 5}, "annotations": [{"id": 200}]},
        headers=GOOD,
    )
    assert response.status_code == 201
    assert runner.submitted == ["5"]
    # Other projects keep their own count.
    response = client.post(
        "/webhook", json={"action": "ANNOTATION_CREATED", "project": {"id": 6}}, headers=GOOD
    )
    assert response.status_code == 200 and runner.submitted == ["5"]


def test_annotation_changes_are_queued_for_a_rescore_once_a_version_serves(tmp_path):
    from backend.store import inbox, snapshot
    from backend.store.inbox import Inbox
    from backend.store.store import ProjectStore
    from subregweigh.io.atomic import atomic_write_json

    app, client, runner = make_app(tmp_path, retrain_after=100)
    rescores = app.extensions["subregweigh"]["rescore_runner"]

    def send(action, **body):
        return _answer(
            client, "/webhook", 200, json={"action": action, "project": {"id": 5}, **body}
        )

    # Before the first training, with none running: counted; no task kept (nothing reads it).
    assert send("ANNOTATION_CREATED", task={"id": 99}, annotation={"id": 1}) == {
        "status": "counted",
        "action": "ANNOTATION_CREATED",
    }
    store = ProjectStore(tmp_path / "models", 5)
    assert store.status()["events_since_training"] == 1
    assert store.inbox() == Inbox()
    # While the first training runs: remembered for it, but nothing to rescore with.
    store.update_status(state="running")
    send("ANNOTATION_CREATED", task={"id": 100}, annotation={"id": 1})
    assert rescores.submitted == []
    assert set(store.inbox().changed_since_fetch) == {"100"}

    staging = store.staging_dir()
    atomic_write_json(staging / "scores.json", {})
    store.publish(staging, "v1")
    reply = send("ANNOTATION_UPDATED", task={"id": 101}, annotation={"id": 2, "task": 101})
    assert reply == {"status": "counted", "action": "ANNOTATION_UPDATED", "rescore": "started"}
    # An annotation without its nested task still names it.
    send("ANNOTATION_UPDATED", annotation={"id": 3, "task": 102})
    assert rescores.submitted == ["5", "5"]
    waiting = store.inbox()
    assert set(waiting.rescore_pending) == {"101", "102"}
    assert set(waiting.changed_since_fetch) == {"100", "101", "102"}
    assert not inbox.KEYS & set(store.status())  # the status the UI reads holds none of them
    # A deletion names no task; one without a usable task id is only counted. Either drops
    # the tasks kept for the refresh (backend.store.snapshot): the next refresh reads the project.
    snapshot.keep_project(store, [], read_at=0.0)
    assert snapshot.load(store) == []
    send("ANNOTATIONS_DELETED", annotations=[{"id": 3}])
    assert snapshot.load(store) is None
    send("ANNOTATION_UPDATED", task={"id": "../7"}, annotation={"id": 4})
    assert rescores.submitted == ["5", "5"]
    assert store.take_inbox("rescore_pending").keys() == {"101", "102"}
    assert not store.inbox().rescore_pending and store.take_inbox("rescore_pending") == {}
    assert runner.submitted == []  # 6 changes of 100 before a retrain


# --------------------------------------------------------------------------- /status, /is_training


def test_status_shape(backend):
    _, client, runner = backend
    response = client.get("/status?project=3", headers=GOOD)
    assert response.status_code == 200
    status = response.get_json()
    assert {
        "state",
        "events_since_training",
        "last_error",
        "project",
        "current_version",
        "job",
        "is_training",
    } <= set(status)
    assert status["state"] == "idle" and status["project"] == "3"
    assert status["events_since_training"] == 0 and status["last_error"] is None
    assert status["current_version"] is None
    assert status["job"] == "idle" and status["is_training"] is False
    assert status["rescore_job"] == "idle"  # no rescore runs or waits

    runner.states["3"] = "running"
    status = client.get("/status?project=3", headers=GOOD).get_json()
    assert status["job"] == "running" and status["is_training"] is True


def test_is_training_shape(backend):
    _, client, runner = backend
    response = client.get("/is_training?project=3", headers=GOOD)
    assert response.status_code == 200
    assert response.get_json() == {"is_training": False, "job": "idle", "model_version": None}
    runner.states["3"] = "queued"
    assert client.get("/is_training?project=3", headers=GOOD).get_json() == {
        "is_training": True,
        "job": "queued",
        "model_version": None,
    }
    assert client.get("/is_training", headers=GOOD).status_code == 400
    assert client.get("/is_training?project=x", headers=GOOD).status_code == 400


def test_versions_shape(backend):
    _, client, _ = backend
    assert client.get("/versions", headers=GOOD).get_json() == {"versions": []}
    assert client.get("/versions?project=1", headers=GOOD).get_json() == {
        "versions": [],
        "current": "subregweigh-untrained",
    }
    assert client.get("/versions?project=x", headers=GOOD).status_code == 400


# ----------------------------------------------------------------------------- secrets


def test_secrets_never_logged(tmp_path, caplog):
    redis_password = "redis-pw-77aa"
    with caplog.at_level(logging.DEBUG):
        app, client, _ = make_app(tmp_path, redis_url=f"redis://:{redis_password}@127.0.0.1:6399/0")
        client.post("/setup", json={"project": "1", "schema": IMAGE_CONFIG}, headers=GOOD)
        client.post("/setup", json={"project": "1", "schema": NER_CONFIG}, headers=GOOD)
        client.post(
            "/predict",
            json={"project": "1", "label_config": NER_CONFIG, "tasks": [_task(1)]},
            headers=GOOD,
        )
        client.post(
            "/webhook", json={"action": "ANNOTATION_CREATED", "project": {"id": 1}}, headers=GOOD
        )
        client.post(
            "/webhook", json={"action": "START_TRAINING", "project": {"id": 1}}, headers=GOOD
        )
        client.get("/status?project=1", headers=basic_auth(USER, "wrong-" + PASSWORD))
        client.get("/status?project=1", headers=GOOD)
    text = caplog.text + " ".join(str(r.args) for r in caplog.records)
    assert "subregweigh backend" in text  # the startup line with the settings was captured
    for secret in (API_KEY, PASSWORD, redis_password):
        assert secret not in text
    status = client.get("/status?project=1", headers=GOOD).get_data(as_text=True)
    assert API_KEY not in status and PASSWORD not in status


def test_redis_password_with_at_sign_never_logged(tmp_path, caplog):
    with caplog.at_level(logging.DEBUG):
        make_app(tmp_path, redis_url="redis://:sec@ret-tail-99@127.0.0.1:6399/0")
    assert "ret-tail-99" not in caplog.text


_NON_ASCII = (
    "BUG: basic_auth compares str with hmac.compare_digest, which raises TypeError for "
    "non-ASCII strings, so the request ends in a 500 (compare .encode('utf-8') bytes)"
)


def test_non_ascii_credentials_from_client_401(backend):
    _, client, _ = backend
    assert client.get("/status?project=1", headers=basic_auth("müller", "x")).status_code == 401


def test_non_ascii_configured_password(tmp_path):
    _, client, _ = make_app(tmp_path, basic_auth_pass="pässwörd")
    assert client.get("/status?project=1", headers=basic_auth(USER, "wrong")).status_code == 401
    assert client.get("/status?project=1", headers=basic_auth(USER, "pässwörd")).status_code == 200

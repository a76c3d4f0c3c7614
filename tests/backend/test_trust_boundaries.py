"""The hostile suite's findings that run in process (issue 42; those needing a real Label
Studio are in tests/labelstudio/test_trust_boundaries.py, the outbound challenge in
tests/backend/test_outbound.py). Label Studio's answers about projects come from
:class:`tests.doubles.ProjectsOfLabelStudio` (tests/backend/conftest.py).

* 2: credentials are checked on the headers before any body is read; each route caps its body;
  an unknown action or value is echoed cut short.
* 6: the status keeps counts, not every task an event names; made-up projects make nothing.
* 9: replies carry no absolute path of the model directory.
* 12: every reply says nosniff; HTML replies carry a Content-Security-Policy.
"""

from __future__ import annotations

import json
import logging

import flask

from backend.store import store as store_module
from backend.store import unwritten
from backend.store.store import ProjectStore
from backend.store.unwritten import MAX_PENDING
from backend.web.auth import HTML_POLICY
from subregweigh.io.atomic import atomic_write_json
from tests.backend.test_backend_server import GOOD, make_app


def test_credentials_are_checked_before_the_body_is_read(tmp_path, monkeypatch):
    """A 5 MB body without credentials (or with a wrong token) gets 401 without being parsed."""
    _, client, runner = make_app(tmp_path)
    parsed = []
    real = flask.Request.get_json

    def counting(self, *args, **kwargs):
        parsed.append(self.path)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(flask.Request, "get_json", counting)
    big = json.dumps({"action": "START_TRAINING", "project": 1, "pad": "x" * 5_000_000})
    for headers in ({}, {"X-SubRegWeigh-Webhook-Token": "1." + "0" * 64}):
        for path in ("/webhook", "/predict", "/setup", "/selftest"):
            reply = client.post(path, data=big, content_type="application/json", headers=headers)
            assert reply.status_code == 401, path
    assert parsed == [] and runner.submitted == []


def test_an_unknown_action_or_value_is_echoed_cut_short(tmp_path, caplog):
    _, client, _ = make_app(tmp_path)
    huge = "A" * 1_000_000
    with caplog.at_level(logging.INFO):
        reply = client.post("/webhook", json={"action": huge, "project": 1}, headers=GOOD)
        settings = client.post(
            "/setup",
            json={"project": "1", "schema": "<View/>", "extra_params": {"k": huge}},
            headers=GOOD,
        )
    assert reply.status_code == 400 and len(reply.get_data()) < 400
    assert "1000002 characters" in reply.get_json()["error"]
    assert settings.status_code == 400 and len(settings.get_data()) < 1000
    assert max(len(r.getMessage()) for r in caplog.records) < 2000


def test_events_of_a_project_that_does_not_train_keep_no_task(tmp_path):
    """1,000 events naming distinct tasks of a project with no version: counted, and the
    status stays a few hundred bytes (nothing would ever read the tasks)."""
    app, client, _ = make_app(tmp_path, retrain_after=10**9)
    for task in range(1_000):
        event = {"action": "ANNOTATION_CREATED", "project": {"id": 3}, "task": {"id": task}}
        assert client.post("/webhook", json=event, headers=GOOD).status_code == 200
    status_file = tmp_path / "models" / "3" / "status.json"
    assert json.loads(status_file.read_text())["events_since_training"] == 1_000
    assert status_file.stat().st_size < 1_000


def test_pending_rescores_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(unwritten, "MAX_PENDING", 50)
    _, client, _ = make_app(tmp_path, retrain_after=10**9)
    store = ProjectStore(tmp_path / "models", 3)
    staging = store.staging_dir()
    atomic_write_json(staging / "scores.json", {})
    store.publish(staging, "v1")
    for task in range(120):
        event = {"action": "ANNOTATION_CREATED", "project": {"id": 3}, "task": {"id": task}}
        assert client.post("/webhook", json=event, headers=GOOD).status_code == 200
    pending = store.inbox().rescore_pending
    assert set(pending) == {str(t) for t in range(70, 120)}  # the newest
    assert MAX_PENDING >= 1_000  # the shipped bound: a rescore's worth, not a project's


def test_made_up_projects_make_no_directory(tmp_path, label_studio_projects):
    label_studio_projects.projects = {1: {10, 11}}
    _, client, _ = make_app(tmp_path)
    for project in (2, 99_999):
        event = {"action": "ANNOTATION_CREATED", "project": {"id": project}}
        reply = client.post("/webhook", json=event, headers=GOOD)
        assert reply.status_code == 404 and "not connected" in reply.get_json()["error"]
        reply = client.post(f"/selftest?project={project}", json={}, headers=GOOD)
        assert reply.status_code == 404
        setup = {"project": f"{project}.1", "schema": _NER, "extra_params": {"k": 5}}
        assert client.post("/setup", json=setup, headers=GOOD).status_code == 404
    assert not (tmp_path / "models").exists() or not [
        p for p in (tmp_path / "models").iterdir() if p.is_dir()
    ]
    # the connected project works; a task its events name waits for the rescore, which reads
    # the project's own task list (no request thread asks Label Studio about a task)
    event = {"action": "ANNOTATION_CREATED", "project": {"id": 1}, "task": {"id": 10}}
    assert client.post("/webhook", json=event, headers=GOOD).status_code == 200
    label_studio_projects.asked.clear()  # the project is known here now: nothing more to ask
    event["task"] = {"id": 12, "project": 2}
    assert client.post("/webhook", json=event, headers=GOOD).status_code == 200
    assert label_studio_projects.asked == []


_NER = """<View><Labels name="label" toName="text"><Label value="PER"/></Labels>
<Text name="text" value="$text"/></View>"""


def test_replies_carry_no_path_of_the_model_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "MAX_PROJECTS", 1)
    _, client, _ = make_app(tmp_path)
    models = str((tmp_path / "models").resolve())
    replies = []
    for project in (1, 2):  # the second passes the bound on projects: a 503 naming the folder
        event = {"action": "ANNOTATION_CREATED", "project": {"id": project}}
        replies.append(client.post("/webhook", json=event, headers=GOOD))
    setup = {"project": "1.1", "schema": _NER, "extra_params": {"reference": "nosuch.conll"}}
    replies.append(client.post("/setup", json=setup, headers=GOOD))
    assert [r.status_code for r in replies] == [200, 503, 400]
    for reply in replies:
        text = reply.get_data(as_text=True) + reply.status
        assert models not in text and str(tmp_path) not in text, text
    assert "MODEL_DIR" in replies[1].get_json()["error"]


def test_replies_say_nosniff_and_html_carries_a_policy(tmp_path):
    """JSON replies here; the report page's policy is asserted where it is rendered
    (tests/backend/test_backend_report.py::test_report_json_and_page)."""
    _, client, _ = make_app(tmp_path)
    for path in ("/health", "/status?project=1", "/report.json?project=1", "/report?project=1"):
        headers = client.get(path, headers=GOOD).headers
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Cache-Control"] == "no-store"  # issue 58: no copy kept on the way
    assert "script-src" not in HTML_POLICY and "default-src 'none'" in HTML_POLICY


def test_status_says_plainly_an_early_version_of_an_unfinished_training_serves(tmp_path):
    """Item 8: a training killed after its CRF-only early version leaves that version serving;
    /status says so, and start-up prunes what a kill between publishing and pruning left."""
    from backend.store.store import KEEP_VERSIONS

    model_dir = tmp_path / "models"
    store = ProjectStore(model_dir, 2)
    names = [f"srw-2026010{i}-000000000-aaaaaa" for i in range(1, 6)]
    for name in names:
        staging = store.staging_dir()
        atomic_write_json(staging / "scores.json", {})
        atomic_write_json(staging / "meta.json", {"early": "the CRF alone, while the scout trains"})
        # a publish whose prune never ran: the version moved in, CURRENT set
        atomic_write_json(staging / "COMPLETE", {"version": name, "files": {}})
        (store.versions).mkdir(parents=True, exist_ok=True)
        staging.rename(store.versions / name)
        store._release(staging)
        (store.root / "CURRENT").write_text(name)
    assert len(store.all_versions()) == 5
    _, client, _ = make_app(tmp_path)  # start-up cleans every project
    assert store.all_versions() == names[-KEEP_VERSIONS:]
    serving = client.get("/status?project=2", headers=GOOD).get_json()["serving"]
    assert serving["version"] == names[-1]
    assert serving["early"] == "the CRF alone, while the scout trains"
    assert "did not finish" in serving["message"]

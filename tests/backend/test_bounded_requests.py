"""Requests cannot make unbounded work or state (issue 26, item 5): self-test noise kinds
validated and deduplicated, one warning line per request however many tasks are unreadable,
and a bound on the number of project directories made-up ids can create."""

from __future__ import annotations

import logging

import pytest

from backend.labelstudio.tasks import TaskRead
from backend.store import store as store_module
from testbed.projects import publish_scout
from tests.backend.test_backend_server import GOOD, NER_CONFIG, make_app


@pytest.mark.parametrize("noise", [[["paper"]], [{"a": 1}], [None], [], "paper,bogus", 7])
def test_selftest_refuses_malformed_noise_with_400(tmp_path, noise):
    _, client, _ = make_app(tmp_path)
    reply = client.post("/selftest?project=1", json={"noise": noise}, headers=GOOD)
    assert reply.status_code == 400 and "noise must be among" in reply.get_json()["error"]


def test_selftest_runs_each_noise_kind_once(tmp_path):
    app, client, _ = make_app(tmp_path)
    runner = app.extensions["subregweigh"]["selftest_runner"]
    reply = client.post(
        "/selftest?project=1", json={"noise": ["sentence"] * 4_000 + ["paper"]}, headers=GOOD
    )
    assert reply.status_code == 202 and reply.get_json()["noise"] == ["sentence", "paper"]
    assert runner.submitted == ["1"]
    status = client.get("/status?project=1", headers=GOOD).get_json()
    assert status["selftest_request"]["noises"] == ["sentence", "paper"]
    assert (tmp_path / "models" / "1" / "status.json").stat().st_size < 10_000


def test_unreadable_tasks_log_a_bounded_number_of_lines(tmp_path, tiny_scout, caplog):
    _, client, _ = make_app(tmp_path)
    publish_scout(tmp_path / "models", 1, tiny_scout)
    bad = [{"id": i, "data": {"other": "no text"}} for i in range(2_000)]
    with caplog.at_level(logging.WARNING, logger="backend.serving.predictions"):
        reply = client.post(
            "/predict",
            json={"project": "1", "label_config": NER_CONFIG, "tasks": bad},
            headers=GOOD,
        )
    assert reply.status_code == 200 and len(reply.get_json()["results"]) == 2_000
    lines = [r.getMessage() for r in caplog.records if r.name == "backend.serving.predictions"]
    assert 1 < len(lines) <= 6, lines[:8]
    assert "1995 more warnings like these (2000 in all)" in lines[-1]


def test_made_up_project_ids_stop_at_the_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "MAX_PROJECTS", 3)
    _, client, _ = make_app(tmp_path)
    for project in range(1, 6):
        event = {"action": "ANNOTATION_CREATED", "project": {"id": project}}
        reply = client.post("/webhook", json=event, headers=GOOD)
        if project <= 3:
            assert reply.status_code == 200
        else:
            assert reply.status_code == 503
            assert "at most 3" in reply.get_json()["error"]
    made = sorted(p.name for p in (tmp_path / "models").iterdir() if p.is_dir())
    assert made == ["1", "2", "3"]
    # A known project goes on working.
    event = {"action": "ANNOTATION_CREATED", "project": {"id": 2}}
    assert client.post("/webhook", json=event, headers=GOOD).status_code == 200
    # Reads make nothing.
    assert client.get("/status?project=77", headers=GOOD).status_code == 200
    assert not (tmp_path / "models" / "77").exists()


def test_a_warning_about_task_data_is_always_encodable(caplog):
    from backend.serving.predictions import log_warnings

    with caplog.at_level(logging.WARNING, logger="backend.serving.predictions"):
        log_warnings("1", ["task 'a\udfffb' has no text"])
    (line,) = [r.getMessage() for r in caplog.records]
    line.encode("utf-8")  # no UnicodeEncodeError (pytest-xdist sends logs between processes)
    assert "a\\udfffb" in line


def test_predict_stores_nothing_and_reads_from_label_studio_are_bounded(
    tmp_path, tiny_scout, monkeypatch
):
    """``/predict``'s tasks come from the caller: scored and served, never stored (issue 58:
    a made-up text must not replace a task's score). What the backend read from Label Studio
    itself is stored, up to the version's trained tasks plus MAX_NEW_TASKS."""
    from backend.config.settings import Settings
    from backend.labelstudio.tasks import parse_label_config
    from backend.serving import predictions
    from backend.store.store import ProjectStore

    monkeypatch.setattr(predictions, "MAX_NEW_TASKS", 3)
    _, client, _ = make_app(tmp_path)
    version = publish_scout(tmp_path / "models", 1, tiny_scout, meta={"n_tasks": 2})
    tasks = [
        {"id": 1000 + i, "data": {"text": f"Angela Merkel visited Paris {i} ."}} for i in range(8)
    ]
    body = {"project": "1", "label_config": NER_CONFIG, "tasks": tasks}
    reply = client.post("/predict", json=body, headers=GOOD)
    assert reply.status_code == 200
    assert all("score" in r for r in reply.get_json()["results"])  # every task is answered
    assert ProjectStore(tmp_path / "models", 1).scores(version) == {}  # nothing stored
    again = client.post("/predict", json=body, headers=GOOD).get_json()["results"]
    assert [r["score"] for r in again] == [r["score"] for r in reply.get_json()["results"]]
    settings = Settings(model_dir=str(tmp_path / "models"))
    spec = parse_label_config(NER_CONFIG)
    predictions.predict(settings, "1", spec, TaskRead.of(tasks, spec), from_label_studio=True)
    stored = ProjectStore(tmp_path / "models", 1).scores(version)
    assert len(stored) == 2 + 3  # the version's trained tasks (2) + MAX_NEW_TASKS, no more

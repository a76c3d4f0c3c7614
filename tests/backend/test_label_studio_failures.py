"""Every failure reaches the lead in Label Studio: a ``/setup`` whose Label Studio address or token
does not work is refused with a 502 naming what is wrong, in the reason phrase (what Label Studio
1.23 shows of a refused connection); *Start Training* answers with a sentence (issue 61).

Label Studio here is a tiny real HTTP server on 127.0.0.1 that answers ``GET /api/projects/P``
the way Label Studio 1.23 does (401 for a wrong token, the project's counts for the right one):
these tests are about the backend's replies, not Label Studio's. The real Label Studio's
answers are tested in tests/labelstudio/test_failures_shown_ls.py.
"""

from __future__ import annotations

import json

import pytest

from backend.labelstudio import client as ls_client
from backend.labelstudio import membership
from backend.web.server import create_app
from testbed.servers import QuietHandler, free_port, serving
from tests.doubles import NER_CONFIG, FakeRunner, offline_settings

TOKEN = "c0ffee" * 6 + "beef"


class StandInLabelStudio(QuietHandler):
    """``GET /api/projects/P``: 401 unless the token is :data:`TOKEN`, else the project's counts
    (``annotated`` tasks of ``tasks``; ``ground_truth`` more annotated tasks, which Label Studio
    leaves out of ``num_tasks_with_annotations``); ``GET /api/tasks`` counts them all;
    ``GET /api/ml`` lists one connection; ``GET /api/current-user/whoami`` names the user."""

    asked: list[str] = []
    tasks, annotated, ground_truth = 40, 0, 0
    lagging = 0  # annotations the tasks' counters (the Data Manager's count) do not show yet
    config = NER_CONFIG

    def do_GET(self):
        type(self).asked.append(self.path)
        if self.headers.get("Authorization") != f"Token {TOKEN}":
            body = json.dumps({"detail": "Invalid token."}).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path.startswith("/api/current-user/whoami"):  # the start-up check
            self.reply({"id": 1, "email": "lead@example.com", "username": "lead"})
            return
        if self.path.startswith("/api/ml"):  # the project's ML connections: this backend
            self.reply([{"id": 1, "url": "http://127.0.0.1:9090", "auth_method": "NONE"}])
            return
        if self.path.startswith("/api/tasks"):
            self.reply({"tasks": [], "total": self.annotated + self.ground_truth})
            return
        project = int(self.path.split("/")[3])
        self.reply(
            {
                "id": project,
                "title": "p",
                "label_config": self.config,
                "task_number": self.tasks,
                "num_tasks_with_annotations": self.annotated,
                "total_annotations_number": self.annotated + self.ground_truth + self.lagging,
            }
        )


@pytest.fixture
def stand_in(monkeypatch):
    """The tiny server, and the real client in the membership checks (not conftest's double)."""
    monkeypatch.setattr(membership, "LabelStudioAPI", ls_client.LabelStudioAPI)
    handler = type("LS", (StandInLabelStudio,), {"asked": []})
    with serving(handler) as url:
        handler.url = url
        yield handler


def _client(tmp_path, url, token=TOKEN, runner=None, **values):
    settings = offline_settings(
        tmp_path, label_studio_url=url, label_studio_api_key=token, **values
    )
    return create_app(settings, runner=runner or FakeRunner()).test_client()


def _project_reads(stand_in) -> list[str]:
    """What the backend asked of projects (the start-up check asks whoami first)."""
    return [path for path in stand_in.asked if path.startswith("/api/projects/")]


def _setup(client, project="3.1700000000"):
    return client.post("/setup", json={"project": project, "schema": NER_CONFIG})


def test_a_wrong_token_refuses_the_connection_naming_the_fix_not_the_token(tmp_path, stand_in):
    reply = _setup(_client(tmp_path, stand_in.url, token="wrong-token-1234"))
    assert reply.status_code == 502
    expected = (
        f"Label Studio at {stand_in.url} refused the backend's token (HTTP 401): set "
        "LABEL_STUDIO_API_KEY to a token of this Label Studio"
    )
    assert reply.status == f"502 {expected}"  # the reason phrase: what Label Studio shows
    assert reply.get_json() == {"error": expected}
    assert "wrong-token-1234" not in reply.status + reply.get_data(as_text=True)
    assert "<" not in reply.status and ">" not in reply.status


def test_an_address_that_does_not_answer_refuses_the_connection(tmp_path, stand_in):
    url = f"http://127.0.0.1:{free_port()}"
    reply = _setup(_client(tmp_path, url))
    assert reply.status_code == 502
    assert reply.status.startswith(f"502 Label Studio at {url} did not answer the backend (")
    assert "set LABEL_STUDIO_URL to the address" in reply.status


def test_a_working_token_connects_and_is_asked_once_a_minute(tmp_path, stand_in, monkeypatch):
    client = _client(tmp_path, stand_in.url)
    for _ in range(3):  # Label Studio calls /setup on every view of the connection
        assert _setup(client).status_code == 200
    assert _project_reads(stand_in) == ["/api/projects/3/"]
    assert _setup(client, "4.1700000000").status_code == 200  # per project
    assert len(_project_reads(stand_in)) == 2
    clock = membership.time.monotonic() + membership.CHECK_SECONDS + 1
    monkeypatch.setattr(membership.time, "monotonic", lambda: clock)
    assert _setup(client).status_code == 200
    assert len(_project_reads(stand_in)) == 3  # after a minute, asked again


def test_a_refusal_is_remembered_too(tmp_path, stand_in):
    client = _client(tmp_path, stand_in.url, token="wrong")
    assert [_setup(client).status_code for _ in range(3)] == [502, 502, 502]
    assert len(_project_reads(stand_in)) == 1  # a refused token costs Label Studio's 3 s only once


# ----------------------------------------------------------------------------- Start Training


def _start(client, project=3):
    return client.post("/webhook", json={"action": "START_TRAINING", "project": {"id": project}})


def test_start_training_on_too_few_annotated_tasks_says_so(tmp_path, stand_in):
    runner = FakeRunner()
    client = _client(tmp_path, stand_in.url, runner=runner, min_annotations=10)
    reply = _start(client)
    sentence = "not started: 0 of 40 tasks are annotated; training starts at 10"
    assert reply.status == f"409 {sentence}"  # what Label Studio keeps as the card's error
    assert reply.get_json()["message"] == sentence
    assert client.get("/status?project=3").get_json()["start_reply"] == sentence
    assert runner.submitted == []


def test_setup_repeats_the_refusal_while_it_holds(tmp_path, stand_in, monkeypatch):
    """Label Studio 1.23 clears a refused training's error at its next /setup (each view of
    the connection): /setup repeats the sentence until the project has enough annotations."""
    client = _client(tmp_path, stand_in.url, min_annotations=10)
    sentence = "not started: 0 of 40 tasks are annotated; training starts at 10"
    assert _setup(client).status_code == 200  # connected: nothing refused yet
    assert _start(client).status_code == 409
    assert _setup(client).status == f"409 {sentence}"  # the model card keeps showing it
    lower = {
        "project": "3.1700000000",
        "schema": NER_CONFIG,
        "extra_params": {"min_annotations": 5},
    }
    assert client.post("/setup", json=lower).status_code == 200  # another minimum: not true
    back = {"project": "3.1700000000", "schema": NER_CONFIG, "extra_params": None}
    assert client.post("/setup", json=back).status == f"409 {sentence}"  # the server's again
    stand_in.ground_truth = 12  # the lead imports 12 annotated tasks
    clock = membership.time.monotonic() + membership.CHECK_SECONDS + 1
    monkeypatch.setattr(membership.time, "monotonic", lambda: clock)
    assert _setup(client).status_code == 200  # Label Studio counted again: no longer true


def test_start_training_counts_ground_truth_annotations(tmp_path, stand_in):
    """Imported annotations are ground truth, which Label Studio's num_tasks_with_annotations
    leaves out: the Data Manager's count of annotated tasks is asked then."""
    stand_in.annotated, stand_in.ground_truth = 2, 10
    runner = FakeRunner()
    reply = _start(_client(tmp_path, stand_in.url, runner=runner, min_annotations=10))
    assert reply.status == "201 training started on 12 annotated tasks"
    assert reply.get_json()["status"] == "started"
    assert runner.submitted == ["3"]
    assert any(path.startswith("/api/tasks?") for path in stand_in.asked)


def test_start_training_starts_when_the_task_counters_lag_the_annotations(tmp_path, stand_in):
    """Seen in a real Label Studio 1.23 under load: 24 tasks imported with their annotations
    counted 0 annotated tasks (the tasks' counters lagging), while the project's number of
    annotations held them. A stand-in, since the lag cannot be provoked at will: the training
    starts, and says what Label Studio holds; a project short in both is still refused."""
    stand_in.lagging = 24
    runner = FakeRunner()
    reply = _start(_client(tmp_path, stand_in.url, runner=runner, min_annotations=10))
    assert reply.status == "201 training started: Label Studio holds 24 annotations"
    assert runner.submitted == ["3"]
    stand_in.lagging = 9
    refused = _start(_client(tmp_path / "short", stand_in.url, runner=FakeRunner()))
    assert refused.status_code == 409


def test_start_training_with_a_wrong_token_is_a_502_naming_it(tmp_path, stand_in):
    runner = FakeRunner()
    reply = _start(_client(tmp_path, stand_in.url, token="wrong", runner=runner))
    assert reply.status_code == 502
    assert "refused the backend's token (HTTP 401)" in reply.status
    assert runner.submitted == []


def test_start_training_with_a_config_it_cannot_weigh_is_a_400(tmp_path, stand_in):
    from tests.doubles import IMAGE_CONFIG

    stand_in.annotated, stand_in.config = 40, IMAGE_CONFIG
    runner = FakeRunner()
    reply = _start(_client(tmp_path, stand_in.url, runner=runner))
    assert reply.status_code == 400
    assert reply.status.startswith("400 refused: ")
    assert "<" not in reply.status
    assert runner.submitted == []


# ----------------------------------------------------------------------------- start-up


@pytest.fixture
def who_am_i(stand_in):
    return stand_in.url


def _startup_lines(caplog, tmp_path, url, token):
    caplog.clear()
    with caplog.at_level("INFO", logger="backend.labelstudio.membership"):
        _client(tmp_path, url, token=token)
    return [r for r in caplog.records if "Label Studio" in r.getMessage()]


def test_start_up_logs_one_line_the_token_works(tmp_path, who_am_i, caplog):
    (line,) = _startup_lines(caplog, tmp_path, who_am_i, TOKEN)
    assert line.levelname == "INFO"
    assert line.getMessage() == (
        f"Label Studio at {who_am_i} takes the backend's token (user lead@example.com)"
    )
    assert TOKEN not in line.getMessage()


def test_start_up_logs_one_line_naming_what_is_wrong(tmp_path, who_am_i, caplog):
    (line,) = _startup_lines(caplog, tmp_path, who_am_i, "wrong-token-9876")
    assert line.levelname == "ERROR"
    assert line.getMessage() == (
        f"Label Studio credentials do not work: Label Studio at {who_am_i} refused the "
        "backend's token (HTTP 401): set LABEL_STUDIO_API_KEY to a token of this Label Studio"
    )
    url = f"http://127.0.0.1:{free_port()}"
    (line,) = _startup_lines(caplog, tmp_path, url, TOKEN)
    assert (
        line.levelname == "ERROR" and f"Label Studio at {url} did not answer" in line.getMessage()
    )


def test_the_progress_title_is_bounded_keeps_its_stage_and_comes_off_whole():
    """Issue 61: the connection's title while a project trains (backend.labelstudio.progress):
    the stage whole, within TITLE_MAX characters, the lead's own title shortened first; the
    progress (a killed training's too) comes off, leaving the lead's title as it was."""
    from backend.labelstudio.progress import TITLE_MAX, base_title, progress_title, stage_text

    stage = stage_text(2, "scout retrains, the last version serves", 0.0)
    assert stage == "2/4: scout retrains, the last version serves; scores ~00:00:00 UTC"
    shown = progress_title("subregweigh", stage)
    assert shown == f"subregweigh [training {stage}]" and base_title(shown) == "subregweigh"
    long = progress_title("NER of tweets, " * 10, stage)
    assert len(long) == TITLE_MAX and long.endswith(f"… [training {stage}]")
    assert progress_title(shown, "3/4: scoring") == "subregweigh [training 3/4: scoring]"
    assert base_title("my [own] title") == "my [own] title"
    assert len(progress_title("x", "y" * 300)) == TITLE_MAX

"""backend.config.project_settings: a project's settings from its Label Studio connection's extra
parameters, read, checked, stored, shown, and retraining when the scores change (Flask test
client; the job runner is a double that records submissions, no training)."""

from __future__ import annotations

import json

import pytest

from backend.config import project_settings
from backend.config.project_settings import effective, parse_extra_params
from backend.config.settings import (
    BY_NAME,
    PER_PROJECT,
    SCORING,
    SETTINGS,
    Settings,
    SettingsError,
)
from backend.store.store import ProjectStore
from backend.web.server import create_app
from tests.doubles import NER_CONFIG, FakeRunner

VERSION = "srw-20260101-000000-abcdef"


# ----------------------------------------------------------------------------- the declaration


def test_the_issue_s_settings_are_per_project_and_only_scoring_ones_retrain():
    asked = {"k", "n_samples", "n_scouts", "crf", "epochs", "learning_rate", "scout_model"}
    assert asked | {"retrain_after", "min_annotations"} <= set(PER_PROJECT)
    assert asked <= set(SCORING)
    assert not {"retrain_after", "min_annotations"} & set(SCORING)
    assert set(SCORING) <= set(PER_PROJECT)
    # Where things are, credentials and the server's own resources stay the server's.
    server = {"model_dir", "label_studio_url", "label_studio_api_key", "basic_auth_pass"}
    server |= {"redis_url", "max_request_mb", "training_seconds", "webhook_secret"}
    assert not server & set(PER_PROJECT)
    assert not any(s.secret or s.url for s in SETTINGS if s.per_project)


# ----------------------------------------------------------------------------- reading them


@pytest.mark.parametrize(
    "raw",
    [
        {"k": 5, "scout_model": "org/name", "learning_rate": 0.2, "crf": False},
        '{"k": 5, "scout_model": "org/name", "learning_rate": 0.2, "crf": false}',
        "k=5\nscout_model=org/name\nlearning_rate=0.2\ncrf=off",
        "# the project's own\nSRW_K = 5 ; SRW_MODEL=org/name\n\n--learning-rate=0.2\n--crf=off",
        {"K": "5", "Scout_Model": "org/name", "SRW_LEARNING_RATE": "0.2", "--crf": "no"},
    ],
)
def test_a_json_object_its_text_or_key_value_lines_by_field_variable_or_flag(raw):
    expected = {"k": 5, "scout_model": "org/name", "learning_rate": 0.2, "crf": False}
    assert parse_extra_params(raw) == expected


@pytest.mark.parametrize("raw", [None, "", "   \n", {}, "{}", "# nothing yet"])
def test_nothing_given_is_no_override(raw):
    assert parse_extra_params(raw) == {}


def test_values_come_out_of_the_setting_s_type():
    out = parse_extra_params({"learning_rate": 1, "epochs": "3", "scout_model": "x/y"})
    assert out == {"learning_rate": 1.0, "epochs": 3, "scout_model": "x/y"}
    assert type(out["learning_rate"]) is float and type(out["epochs"]) is int


@pytest.mark.parametrize(
    "raw, fragments",
    [
        ({"kk": 5}, ["extra parameter 'kk'", "no such setting", "did you mean k?"]),
        ("epohcs=3", ["'epohcs'", "did you mean epochs?"]),
        ({"label_studio_url": "http://x"}, ["LABEL_STUDIO_URL is the server's setting"]),
        ("MODEL_DIR=/tmp", ["MODEL_DIR is the server's setting", "a project may set"]),
        ({"k": 0}, ["extra parameter k is 0; it must be at least 1"]),
        ("SRW_K=0", ["extra parameter SRW_K is 0; it must be at least 1"]),
        ({"k": "five"}, ["extra parameter k='five' is not a valid int"]),
        ({"k": 2.5}, ["extra parameter k is 2.5; it must be an integer"]),
        ({"k": [5]}, ["extra parameter k is an array; give one value"]),
        ({"n_scouts": 11}, ["extra parameter n_scouts is 11; it must be in [0, 10]"]),
        ({"learning_rate": -1}, ["extra parameter learning_rate is -1.0; it must be at least 0"]),
        ({"crf": "maybe"}, ["'maybe' is not 1/0, true/false, on/off"]),
        ("k=5\nepochs", ["line 2", "'epochs' is not KEY=VALUE"]),
        ("k=5\nk=6", ["'k' is given twice"]),
        ({"k": 5, "SRW_K": 6}, ["k is given twice"]),
        ('{"k": 5', ["not valid JSON", "line 1"]),
        ("[1, 2]", ["must be a JSON object, not an array"]),
        (42, ["must be a JSON object or KEY=VALUE lines, not a number"]),
        ("k=" + "9" * 20_000, ["20002 characters; at most 10000"]),
        # issue 58: a name longer than a file name can be was a 500 (ENAMETOOLONG)
        ({"reference": "x" * 900}, ["extra parameter reference", "at most 200"]),
    ],
)
def test_a_bad_parameter_is_named_with_what_is_wrong(raw, fragments):
    with pytest.raises(SettingsError) as caught:
        parse_extra_params(raw)
    for fragment in fragments:
        assert fragment in str(caught.value)


def test_a_server_secret_given_as_a_parameter_is_refused_without_repeating_it():
    with pytest.raises(SettingsError) as caught:
        parse_extra_params("basic_auth_pass=hunter2-secret")
    assert "BASIC_AUTH_PASS is the server's setting" in str(caught.value)
    assert "hunter2" not in str(caught.value)


def test_the_parameters_are_checked_together_with_the_server_s_settings(tmp_path):
    store = ProjectStore(tmp_path, 3)
    server = Settings(model_dir=str(tmp_path), k=10, n_samples=100)
    with pytest.raises(SettingsError, match="N must be at least K"):
        project_settings.apply(server, store, {"n_samples": 5})
    assert store.overrides() == {}  # nothing stored


# ----------------------------------------------------------------------------- storing them


def test_stored_with_the_project_and_effective_after_a_restart(tmp_path):
    server = Settings(model_dir=str(tmp_path), k=10, n_samples=100, epochs=0)
    changed = project_settings.apply(server, ProjectStore(tmp_path, 7), "k=4\nepochs=2")
    assert changed == ["k", "epochs"]
    on_disk = json.loads((tmp_path / "7" / "settings.json").read_text())
    assert on_disk["overrides"] == {"k": 4, "epochs": 2}
    again = effective(server, ProjectStore(tmp_path, 7))  # a new process reads the file
    assert (again.k, again.epochs, again.n_samples) == (4, 2, 100)
    assert effective(server, ProjectStore(tmp_path, 8)) is server  # another project: defaults


def test_settings_that_no_longer_fit_the_server_s_fail_its_trainings_clearly(tmp_path):
    store = ProjectStore(tmp_path, 7)
    project_settings.apply(Settings(model_dir=str(tmp_path)), store, {"n_samples": 20})
    stricter = Settings(model_dir=str(tmp_path), k=30, n_samples=100)  # SRW_K raised since
    with pytest.raises(project_settings.ProjectSettingsError) as caught:
        effective(stricter, store)
    assert "project 7" in str(caught.value) and "N must be at least K" in str(caught.value)
    assert "error" in project_settings.shown(stricter, store)


def test_an_unreadable_settings_file_means_the_server_s_settings_with_a_warning(tmp_path, caplog):
    store = ProjectStore(tmp_path, 7)
    store.root.mkdir(parents=True)
    (store.root / "settings.json").write_text("{truncated")
    server = Settings(model_dir=str(tmp_path))
    assert effective(server, store) is server
    assert "settings.json is unreadable" in caplog.text


# ----------------------------------------------------------------------------- /setup and /status


@pytest.fixture
def backend(tmp_path):
    settings = Settings(model_dir=str(tmp_path / "models"), k=10, n_samples=100, retrain_after=3)
    runner = FakeRunner()
    app = create_app(
        settings, runner=runner, selftest_runner=FakeRunner(), rescore_runner=FakeRunner()
    )
    return app.test_client(), runner, ProjectStore(settings.model_dir, 5)


def _setup(client, extra_params, project="5.1700000000"):
    body = {"project": project, "schema": NER_CONFIG, "extra_params": extra_params}
    return client.post("/setup", json=body)


def _publish(store):
    store.publish(store.staging_dir(), VERSION)


def test_setup_stores_the_parameters_and_status_shows_the_effective_settings(backend):
    client, runner, _ = backend
    assert _setup(client, "k=5\ncrf=off\nretrain_after=1").status_code == 200
    status = client.get("/status?project=5").get_json()["settings"]
    assert status["overrides"] == {"k": 5, "crf": False, "retrain_after": 1}
    assert status["effective"]["k"] == 5 and status["effective"]["n_samples"] == 100
    assert set(status["effective"]) == set(PER_PROJECT)
    assert "extra parameters" in status["source"]
    assert runner.submitted == []  # nothing trained yet: the first training uses them
    # retrain_after=1 now counts for this project: one annotation event trains it.
    event = {"action": "ANNOTATION_CREATED", "project": {"id": 5}, "task": {"id": 1}}
    assert client.post("/webhook", json=event).get_json()["status"] == "started"
    assert runner.submitted == ["5"]


def test_a_refusal_names_the_parameter_in_the_body_and_the_status_line(backend):
    client, runner, store = backend
    _setup(client, {"k": 5})
    response = _setup(client, {"k": 0, "crf": False})
    assert response.status_code == 400
    message = "extra parameter k is 0; it must be at least 1"
    assert response.get_json() == {"error": message}
    # Label Studio shows "400 Client Error: <reason> for url: ...", never the body.
    assert response.status == f"400 {message}"
    assert store.overrides() == {"k": 5}  # the project keeps what it had


def test_the_status_line_is_one_line_of_ascii(backend):
    client, _, _ = backend
    response = _setup(client, "k=fünf\r\ncrf=x")
    assert response.status_code == 400
    reason = response.status.split(" ", 1)[1]
    assert reason.isascii() and "\n" not in reason and "\r" not in reason
    assert "extra parameter k='f?nf' is not a valid int" in reason


def test_a_change_of_a_scoring_setting_retrains_once(backend):
    client, runner, store = backend
    _publish(store)
    _setup(client, {"k": 5})
    assert runner.submitted == ["5"]
    _setup(client, {"k": 5})  # Label Studio calls /setup on every page view: no retrain
    _setup(client, '{"k": 5}')  # the same settings as text
    assert runner.submitted == ["5"]
    _setup(client, {"k": 5, "retrain_after": 50, "min_annotations": 2})  # not scoring
    assert runner.submitted == ["5"]
    _setup(client, {"k": 5, "crf": False})
    assert runner.submitted == ["5", "5"]
    _setup(client, {"crf": False, "retrain_after": 50, "min_annotations": 2})
    assert runner.submitted == ["5", "5", "5"]  # k back to the server's 10
    _setup(client, {"crf": False, "retrain_after": 50, "SRW_K": 10})  # the same K
    assert runner.submitted == ["5", "5", "5"]


def test_a_change_while_the_first_training_runs_queues_another(backend):
    client, runner, _ = backend
    runner.states["5"] = "running"
    _setup(client, {"epochs": 1})
    assert runner.submitted == ["5"]


def test_null_clears_the_project_s_settings_and_no_key_leaves_them(backend):
    client, runner, store = backend
    _publish(store)
    _setup(client, {"k": 5})
    client.post("/setup", json={"project": "5", "schema": NER_CONFIG})  # not Label Studio
    assert store.overrides() == {"k": 5}
    _setup(client, None)  # the connection's extra params were removed
    assert store.overrides() == {}
    assert runner.submitted == ["5", "5"]  # K 5 -> the server's 10 changes the scores


@pytest.mark.parametrize(
    "extra_params",
    [[], [1], 3.5, True, {"": 1}, {"k": None}, {"k": {"a": 1}}, "=", "==", "{", "\x00", "k=\x00"],
)
def test_malformed_parameters_are_a_400_never_a_500(backend, extra_params):
    client, _, store = backend
    response = _setup(client, extra_params)
    assert response.status_code == 400, response.get_json()
    assert response.get_json()["error"].startswith("extra parameter")
    assert store.overrides() == {}


def test_settings_a_project_stored_that_no_longer_work_are_a_400_on_webhooks(tmp_path):
    store = ProjectStore(tmp_path, 5)
    store.replace_overrides({"n_samples": 20})  # set while SRW_K was 10
    settings = Settings(model_dir=str(tmp_path), k=30, n_samples=100)
    app = create_app(
        settings, runner=FakeRunner(), selftest_runner=FakeRunner(), rescore_runner=FakeRunner()
    )
    event = {"action": "ANNOTATION_CREATED", "project": {"id": 5}, "task": {"id": 1}}
    response = app.test_client().post("/webhook", json=event)
    assert response.status_code == 400
    assert "N must be at least K" in response.get_json()["error"]
    status = app.test_client().get("/status?project=5").get_json()
    assert "N must be at least K" in status["settings"]["error"]


def test_the_declaration_s_bounds_are_the_ones_checked():
    """Every per-project setting refuses a value outside its declared bounds, by its name."""
    for name in PER_PROJECT:
        s = BY_NAME[name]
        bad = (
            "no-such-choice"
            if s.choices
            else (s.minimum - 1 if s.minimum is not None else None)
            if s.type in (int, float)
            else None
        )
        if bad is None:
            continue
        with pytest.raises(SettingsError, match=f"extra parameter {name}"):
            parse_extra_params({name: bad})


def test_settings_are_stored_when_the_job_queue_is_down_and_a_warning_says_so(tmp_path, caplog):
    """A real RQRunner on a port where no Redis listens: /setup still stores the settings."""
    from backend.jobs.training import train_project
    from backend.queue.runners import RQRunner
    from testbed.servers import free_port

    settings = Settings(model_dir=str(tmp_path / "models"))
    runner = RQRunner(train_project, f"redis://127.0.0.1:{free_port()}/0")
    app = create_app(
        settings, runner=runner, selftest_runner=FakeRunner(), rescore_runner=FakeRunner()
    )
    store = ProjectStore(settings.model_dir, 5)
    _publish(store)
    assert _setup(app.test_client(), {"k": 5}).status_code == 200
    assert store.overrides() == {"k": 5}
    assert "no retraining queued" in caplog.text and "k changed by" in caplog.text


def test_setup_without_settings_makes_no_project_directory(backend):
    client, _, store = backend
    assert _setup(client, None).status_code == 200
    assert _setup(client, "").status_code == 200
    assert not store.root.exists()


@pytest.mark.parametrize(
    "raw",
    ["learning_rate=nan", "learning_rate=inf", '{"learning_rate": NaN}', "learning_rate=-inf"],
)
def test_a_number_that_is_not_finite_is_refused(raw):
    with pytest.raises(SettingsError, match="it must be a finite number"):
        parse_extra_params(raw)


def test_the_environment_refuses_it_too(monkeypatch):
    monkeypatch.setenv("SRW_LEARNING_RATE", "nan")
    with pytest.raises(SettingsError, match=r"SRW_LEARNING_RATE \(--learning-rate\) is nan; it"):
        Settings.from_env()

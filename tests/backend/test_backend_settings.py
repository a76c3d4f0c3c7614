"""backend.config.settings: one Settings object, validated when built, used by everything it
starts."""

from __future__ import annotations

import argparse
import dataclasses
import json
import pickle
import subprocess
import sys

import pytest
import yaml

from backend.config import settings_docs
from backend.config.settings import (
    GROUPS,
    PER_PROJECT,
    SECRETS,
    SETTINGS,
    TRAINING,
    Setting,
    Settings,
    SettingsError,
    add_arguments,
    from_arguments,
    parse_kwargs,
)
from backend.jobs import training
from backend.queue.runners import RQRunner, ThreadRunner
from backend.serving import publish, weighers
from backend.web.server import create_app
from testbed.projects import CLS_CONFIG
from tests.doubles import NER_CONFIG, offline_settings, use_label_studio
from tests.paths import REPO

# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "values,message",
    [
        ({"k": 0}, "SRW_K (-k) is 0; it must be at least 1"),
        ({"k": 20, "n_samples": 10}, "SRW_N (--n-samples) is 10; N must be at least K (SRW_K"),
        ({"epochs": -1}, "SRW_EPOCHS (--epochs) is -1; it must be at least 0"),
        ({"min_annotations": 0}, "SRW_MIN_ANNOTATIONS (--min-annotations) is 0"),
        ({"n_scouts": 11}, "SRW_SCOUTS (--scouts) is 11; it must be in [0, 10]"),
        ({"queue_name": ""}, "RQ_QUEUE_NAME (--queue-name) is ''; it must not be empty"),
        ({"k": "5"}, "SRW_K (-k) is '5'; it must be an integer"),
        ({"crf": 1}, "SRW_CRF (--crf) is 1; it must be True or False"),
    ],
)
def test_settings_that_cannot_work_fail_when_built(values, message):
    with pytest.raises(SettingsError) as info:
        Settings(**values)
    assert message in str(info.value)


def test_from_env_flags_win_over_the_environment(monkeypatch):
    monkeypatch.setenv("SRW_K", "7")
    monkeypatch.setenv("SRW_N", "70")
    monkeypatch.setenv("LABEL_STUDIO_URL", "http://ls:8080/")
    settings = Settings.from_env(k=5, n_samples=None, model_dir="/data/m")
    assert (settings.k, settings.n_samples, settings.model_dir) == (5, 70, "/data/m")
    assert settings.label_studio_url == "http://ls:8080"
    with pytest.raises(TypeError, match="unknown settings"):
        Settings.from_env(kay=5)
    monkeypatch.setenv("SRW_K", "ten")
    with pytest.raises(
        SettingsError, match=r"SRW_K='ten' is not a valid int \(the setting of -k\)"
    ):
        Settings.from_env()
    monkeypatch.setenv("SRW_K", "80")  # valid on its own, but above SRW_N
    with pytest.raises(SettingsError, match="N must be at least K"):
        Settings.from_env()


def test_a_variable_that_is_no_setting_is_named_once_in_a_warning(monkeypatch, caplog):
    """A typo, or a variable of an earlier build (SRW_WARM_START), is not silently ignored."""
    from backend.config import settings as settings_module

    monkeypatch.setattr(settings_module, "_warned", set())
    monkeypatch.setenv("SRW_WARM_START", "1")
    monkeypatch.setenv("SRW_SCUOTS", "2")
    with caplog.at_level("WARNING", logger="backend.config.settings"):
        Settings.from_env()
        Settings.from_env()
    lines = [r.getMessage() for r in caplog.records if r.name == "backend.config.settings"]
    assert len(lines) == 2, lines
    assert "SRW_SCUOTS is not a setting and is ignored; did you mean SRW_SCOUTS?" in lines[0]
    assert "SRW_WARM_START is not a setting and is ignored" in lines[1]


def test_training_settings_are_plain_values_without_secrets():
    settings = Settings(k=5, label_studio_api_key="secret-key", basic_auth_pass="pw")
    training = settings.training()
    assert set(training) == set(TRAINING) and training["k"] == 5
    assert pickle.loads(pickle.dumps(training)) == training
    assert "secret-key" not in repr(training) and "pw" not in training.values()


def _run(args, env_extra, **kwargs):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), **env_extra}
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )


def test_server_refuses_to_start_with_settings_that_cannot_work(tmp_path):
    """At start-up, with the reason, not in a training that fails later."""
    flags = _run(["_wsgi.py", "-k", "20", "--n-samples", "10", "--port", "1"], {})
    assert flags.returncode == 2
    assert "SRW_N (--n-samples) is 10; N must be at least K" in flags.stderr
    assert "Traceback" not in flags.stderr
    # gunicorn imports _wsgi:app; the environment is all it has
    env = _run(["-c", "import _wsgi"], {"SRW_K": "0", "MODEL_DIR": str(tmp_path)})
    assert env.returncode != 0
    assert "subregweigh backend: SRW_K (-k) is 0" in env.stderr
    assert "Traceback" not in env.stderr


def test_worker_refuses_to_start_with_settings_that_cannot_work(monkeypatch, capsys):
    from backend.queue import worker

    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("SRW_SCOUTS", "11")
    assert worker.main([]) == 2
    assert "SRW_SCOUTS (--scouts) is 11; it must be in [0, 10]" in capsys.readouterr().err


# ----------------------------------------------------------------------------- one source


class FakeLabelStudio:
    """Label Studio's API for a project of three annotated tasks."""

    def __init__(self, url, api_key, **kwargs):
        self.url, self.api_key = url, api_key

    def label_config(self, project):
        return NER_CONFIG

    def users(self):
        return {1: "admin@example.com"}

    def tasks(self, project):
        text = "Angela Merkel visited Paris ."
        region = {
            "from_name": "label",
            "to_name": "text",
            "type": "labels",
            "value": {"start": 22, "end": 27, "text": "Paris", "labels": ["LOC"]},
        }
        return [
            {"id": i, "data": {"text": text}, "annotations": [{"id": 10 + i, "result": [region]}]}
            for i in range(3)
        ]


def test_trainings_use_the_apps_settings_not_the_environment(tmp_path, monkeypatch):
    """create_app(Settings(k=5)) serves and trains with k=5, whatever SRW_K says (trainings
    used to rebuild their settings from the environment)."""
    monkeypatch.setenv("SRW_K", "7")
    monkeypatch.setenv("SRW_N", "70")
    monkeypatch.setenv("MODEL_DIR", str(tmp_path / "elsewhere"))
    seen = []

    def engine(settings, spec):  # where the training builds its engine: stop there
        seen.append((settings, spec.task))
        raise RuntimeError("stopped by the test")

    monkeypatch.setattr(training, "engine", engine)
    use_label_studio(monkeypatch, FakeLabelStudio)
    settings = offline_settings(tmp_path / "models", k=5, n_samples=50, min_annotations=3)
    app = create_app(settings)
    runner = app.extensions["subregweigh"]["runner"]
    assert isinstance(runner, ThreadRunner)
    client = app.test_client()
    response = client.post("/webhook", json={"action": "START_TRAINING", "project": {"id": 3}})
    assert response.status_code == 201
    assert runner.wait(60)
    assert seen == [(settings, "ner")]
    status = client.get("/status?project=3").get_json()
    assert status["state"] == "failed" and "stopped by the test" in status["last_error"]
    assert not (tmp_path / "elsewhere").exists()


def test_queued_trainings_carry_the_servers_training_settings(tmp_path, monkeypatch):
    """On rq the job carries the server's training settings; the worker's environment says
    where things are and holds the credentials (which never go through Redis)."""
    settings = Settings(
        model_dir=str(tmp_path / "server"),
        redis_url="redis://127.0.0.1:1/0",  # never connected to here
        label_studio_api_key="server-key-31c9",
        k=5,
        n_samples=50,
        epochs=2,
        crf=False,
    )
    runner = create_app(settings).extensions["subregweigh"]["runner"]
    assert isinstance(runner, RQRunner)
    sent = pickle.dumps(runner.job)  # what rq stores in Redis for a worker
    assert b"server-key-31c9" not in sent
    monkeypatch.setenv("SRW_K", "7")
    monkeypatch.setenv("SRW_CRF", "on")
    monkeypatch.setenv("MODEL_DIR", str(tmp_path / "worker"))
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", "worker-key")
    monkeypatch.setenv("MAX_REQUEST_MB", "2")  # the worker's own, not the server's
    trained = []
    monkeypatch.setattr(training, "train_project", lambda project, s: trained.append((project, s)))
    pickle.loads(sent)("4")
    ((project, used),) = trained
    assert project == "4"
    assert used.training() == settings.training()
    assert (used.k, used.n_samples, used.epochs, used.crf) == (5, 50, 2, False)
    assert used.model_dir == str(tmp_path / "worker")
    assert used.label_studio_api_key == "worker-key"
    assert used.max_request_mb == 2


@pytest.mark.parametrize(
    ("tasks", "scouts", "after_crf", "expected"),
    [
        (14000, 1, False, 300),  # 2,625 steps: EARLY_STEPS is the cap
        (1000, 1, False, 63),  # 189 steps: after a third
        (3000, 1, False, 188),  # 564 steps
        (480, 1, False, 30),  # 90 steps: a third is a tenth of 300, the least that does
        (460, 1, False, None),  # 87 steps: a third is under a tenth of 300
        (300, 1, False, None),  # 57 steps: its own scores come soon enough
        (300, 2, False, 57),  # an ensemble's first scout publishes once trained
        (1000, 1, True, None),  # the CRF's scores came first: no scout mid-way
        (1000, 2, True, 189),  # but an ensemble's first scout, once trained
        (1000, 0, True, None),  # 0: the default, one scout at 1,000 NER examples
        (3000, 0, True, 564),  # and three at 3,000: the first publishes once trained
    ],
)
def test_early_scores_come_after_a_third_of_the_training_at_most_early_steps(
    tmp_path, tasks, scouts, after_crf, expected
):
    from backend.labelstudio.tasks import parse_label_config

    assert training.EARLY_STEPS == 300
    settings = Settings(model_dir=str(tmp_path), n_scouts=scouts)
    srw = weighers.engine(settings, parse_label_config(NER_CONFIG))
    assert training._early_step(srw, tasks, after_crf) == expected


# ----------------------------------------------------------------------------- the declaration


def _values(s: Setting) -> tuple:
    """Two valid values of setting ``s``, both unlike its default."""
    if s.choices:
        return tuple(c for c in s.choices if c != s.default)[:2]
    if s.type is bool:
        return (not s.default, not s.default)
    if s.type is int:
        return (s.default + 1, s.default + 2)
    if s.type is float:
        low = s.minimum or 0.0
        high = s.below if s.below is not None else s.maximum if s.maximum is not None else 1.0
        return (low + (high - low) / 4, low + (high - low) / 2)
    if s.url:
        return (f"http://env.example:1/{s.name}", f"http://flag.example:2/{s.name}")
    if s.name == "project_limits":
        return ("epochs=7", "k=30,n_samples=300")
    return (f"{s.name}-from-the-environment", f"{s.name}-from-a-flag-0123")


def _raw(value) -> str:
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def test_settings_are_the_declaration():
    """One field per declared setting, its type and default; help for every one; one
    variable and one flag per setting, none shared."""
    fields = {f.name: f for f in dataclasses.fields(Settings)}
    assert list(fields) == [s.name for s in SETTINGS]
    for s in SETTINGS:
        assert fields[s.name].type is s.type and getattr(Settings(), s.name) == s.default
        assert s.help.strip() and s.env, s.name
        assert s.group in GROUPS, s.name
        assert not s.training or s.per_project, f"{s.name}: a project could override it"
        assert s.default == "" or s.problem(s.default) is None
    envs = [name for s in SETTINGS for name in (s.env, *s.fallbacks)]
    flags = [flag for s in SETTINGS for flag in s.flags]
    assert len(set(envs)) == len(envs) and len(set(flags)) == len(flags)
    assert set(TRAINING) <= set(PER_PROJECT)
    assert {"k", "n_samples", "n_scouts", "crf", "epochs", "min_annotations"} <= set(TRAINING)
    assert "max_request_mb" not in TRAINING  # each machine's own
    # what users face (the 26th: self_review, issue 58; the 27th: weigh_controls, issue 62; the
    # 28th: write_reason, issue 61); the lab's switches are the engine's
    assert len(SETTINGS) <= 28
    assert set(SECRETS) == {"label_studio_api_key", "basic_auth_pass", "webhook_secret"}


def test_secrets_stay_out_of_public_and_repr():
    secret = "s3cret-value-0123456789"
    settings = Settings(
        label_studio_api_key=secret,
        basic_auth_pass=secret,
        webhook_secret=secret,
        label_studio_url=f"http://user:{secret}@ls:8080",
        redis_url=f"redis://:{secret}@redis:6379/0",
    )
    assert secret not in repr(settings) and secret not in str(settings.public())
    assert not set(SECRETS) & set(settings.public())
    assert settings.public()["label_studio_url"] == "http://user:***@ls:8080"


@pytest.mark.parametrize("s", SETTINGS, ids=lambda s: s.name)
def test_every_setting_from_the_environment_and_from_its_flag(s, monkeypatch, tmp_path):
    """A value in the environment reaches the field; the flag's value, or --kwargs by field
    name, wins over it."""
    for other in SETTINGS:
        for name in (other.env, *other.fallbacks):
            monkeypatch.delenv(name, raising=False)
    if s.name == "reference":  # it names a file of the reference folder: both are there
        (tmp_path / "references").mkdir()
        for name in _values(s):
            (tmp_path / "references" / name).touch()
        monkeypatch.setenv("MODEL_DIR", str(tmp_path))
    from_env, from_flag = _values(s)
    monkeypatch.setenv(s.env, _raw(from_env))
    assert getattr(Settings.from_env(), s.name) == from_env
    assert getattr(Settings.from_env(**{s.name: from_flag}), s.name) == from_flag
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert getattr(from_arguments(parser.parse_args([])), s.name) == from_env
    kwargs = [f"{s.name}={_raw(from_flag)}"]
    assert getattr(from_arguments(parser.parse_args([]), kwargs), s.name) == from_flag
    if s.flags:
        if s.type is bool:
            argv = [s.flags[0] if from_flag else "--no-" + s.flags[0].removeprefix("--")]
        else:
            argv = [s.flags[0], str(from_flag)]
        assert getattr(from_arguments(parser.parse_args(argv)), s.name) == from_flag
        # a flag wins over --kwargs too
        assert (
            getattr(from_arguments(parser.parse_args(argv), [f"{s.name}={_raw(from_env)}"]), s.name)
            == from_flag
        )


def _bad(s: Setting):
    if s.choices:
        return "no-such-choice"
    if s.minimum is not None:
        return next(s.type(bad) for bad in range(int(s.minimum) - 1, -9, -1) if bad not in s.also)
    if s.min_length:
        return "x" * (s.min_length - 1)
    if s.pattern:
        return "../not-a-name"
    return None


@pytest.mark.parametrize("s", [s for s in SETTINGS if _bad(s) is not None], ids=lambda s: s.name)
def test_bad_values_name_the_variable_and_the_flag(s, monkeypatch):
    with pytest.raises(SettingsError) as built:
        Settings(**{s.name: _bad(s)})
    assert s.env in str(built.value)
    assert all(flag in str(built.value) for flag in s.flags)
    if s.type in (int, float):
        monkeypatch.setenv(s.env, "many")
        with pytest.raises(SettingsError) as read:
            Settings.from_env()
        assert f"environment variable {s.env}='many' is not a valid" in str(read.value)
        assert all(flag in str(read.value) for flag in s.flags)


def test_booleans_read_1_0_true_false_on_off(monkeypatch):
    for raw, value in [("1", True), ("on", True), ("TRUE", True), ("0", False), ("off", False)]:
        monkeypatch.setenv("SRW_CRF", raw)
        assert Settings.from_env().crf is value
    monkeypatch.setenv("SRW_CRF", "maybe")
    with pytest.raises(SettingsError, match="SRW_CRF='maybe' is not 1/0, true/false"):
        Settings.from_env()


def test_redis_url_from_its_parts_and_label_studio_ml_names(monkeypatch):
    for name in ("REDIS_URL", "LABEL_STUDIO_URL", "LABEL_STUDIO_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("REDIS_HOST", "redis.local")
    monkeypatch.setenv("REDIS_DB", "2")
    # label-studio-ml's names, where ours are unset
    monkeypatch.setenv("LABEL_STUDIO_HOST", "http://ls.local:8080/")
    monkeypatch.setenv("LABEL_STUDIO_ACCESS_TOKEN", "token-from-ls-ml")
    settings = Settings.from_env()
    assert settings.redis_url == "redis://redis.local:6379/2"
    assert settings.label_studio_url == "http://ls.local:8080"
    assert settings.label_studio_api_key == "token-from-ls-ml"
    monkeypatch.setenv("REDIS_PORT", "six")
    with pytest.raises(SettingsError, match="REDIS_PORT='six' is not a valid int"):
        Settings.from_env()
    # both names, saying the same: fine; saying different things: which was meant?
    monkeypatch.setenv("REDIS_URL", "redis://other:1/0")  # REDIS_URL wins over its parts
    monkeypatch.setenv("LABEL_STUDIO_URL", "http://ls.local:8080/")
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", "token-from-ls-ml")
    settings = Settings.from_env()
    assert (settings.redis_url, settings.label_studio_url) == (
        "redis://other:1/0",
        "http://ls.local:8080",
    )
    monkeypatch.setenv("LABEL_STUDIO_URL", "http://ours:8080")
    with pytest.raises(SettingsError, match="LABEL_STUDIO_URL and LABEL_STUDIO_HOST are both set"):
        Settings.from_env()
    monkeypatch.setenv("LABEL_STUDIO_URL", "http://ls.local:8080/")
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", "our-key")
    with pytest.raises(SettingsError, match="LABEL_STUDIO_API_KEY and LABEL_STUDIO_ACCESS") as err:
        Settings.from_env()
    assert "our-key" not in str(err.value) and "token-from-ls-ml" not in str(err.value)
    # label-studio-ml's basic-auth names
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", "token-from-ls-ml")
    monkeypatch.setenv("ML_SERVER_BASIC_AUTH_USER", "lsml-user")
    monkeypatch.setenv("ML_SERVER_BASIC_AUTH_PASS", "lsml-pass-123")
    for name in ("BASIC_AUTH_USER", "BASIC_AUTH_PASS"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings.from_env()
    assert (settings.basic_auth_user, settings.basic_auth_pass) == ("lsml-user", "lsml-pass-123")


def test_kwargs_by_field_name():
    assert parse_kwargs(["k=5", "n-scouts=2", "learning_rate=0.5", "crf=off"]) == {
        "k": 5,
        "n_scouts": 2,
        "learning_rate": 0.5,
        "crf": False,
    }
    with pytest.raises(SettingsError, match="no setting 'kay'"):
        parse_kwargs(["kay=5"])
    with pytest.raises(SettingsError, match="expected FIELD=VALUE"):
        parse_kwargs(["k"])
    with pytest.raises(SettingsError, match="--kwargs k='five' is not a valid int"):
        parse_kwargs(["k=five"])


# ----------------------------------------------------------------------------- _wsgi.py


def test_wsgi_p_is_the_port_and_check_validates(tmp_path):
    """label-studio-ml's conventions: -p/--port, --check, --kwargs, --basic-auth-*."""
    env = {"MODEL_DIR": str(tmp_path), "SRW_K": "7", "BASIC_AUTH_PASS": "pw-in-the-env"}
    args = ["-p", "9091", "--check", "--kwargs", "k=5", "crf=off", "--scouts", "2"]
    ok = _run(["_wsgi.py", *args, "--basic-auth-user", "lead"], env)
    assert ok.returncode == 0, ok.stderr
    shown = json.loads(ok.stdout)
    assert shown["port"] == 9091
    assert shown["settings"]["n_scouts"] == 2 and shown["settings"]["k"] == 5
    assert shown["settings"]["crf"] is False
    assert shown["settings"]["basic_auth_user"] == "lead"
    assert "pw-in-the-env" not in ok.stdout and "basic_auth_pass" not in shown["settings"]
    # the old meaning of -p, the dropout, is refused, saying what -p is
    old = _run(["_wsgi.py", "-p", "0.1", "--check"], env)
    assert old.returncode == 2 and "-p is the port, as in label-studio-ml" in old.stderr
    bad = _run(["_wsgi.py", "--check", "--kwargs", "k=0"], env)
    assert bad.returncode == 2 and "SRW_K (-k) is 0; it must be at least 1" in bad.stderr
    assert "Traceback" not in bad.stderr + old.stderr
    debug = _run(["_wsgi.py", "-d", "--check"], env)  # label-studio-ml's -d/--debug
    assert debug.returncode == 0 and json.loads(debug.stdout)["log_level"] == "DEBUG"


# ----------------------------------------------------------------------------- generated files


def test_generated_files_are_up_to_date():
    """docs/configuration.md, the README's table and docker-compose.yml's environment are what
    the declaration generates: `python -m backend.config.settings_docs --write` after changing
    it."""
    assert settings_docs.stale() == [], "run: python -m backend.config.settings_docs --write"
    compose = yaml.safe_load(settings_docs.COMPOSE.read_text())
    assert compose["x-subregweigh-env"] == settings_docs.compose_env()
    assert {s.env for s in SETTINGS} <= set(settings_docs.compose_env())
    docs = settings_docs.DOCS.read_text()
    for s in SETTINGS:
        assert f"`{s.env}`" in docs and all(f"`{flag}`" in docs for flag in s.flags)
        assert s.help in docs


def test_a_stale_file_is_found(tmp_path, monkeypatch):
    compose = tmp_path / "docker-compose.yml"
    compose.write_text(
        settings_docs.COMPOSE.read_text().replace("SRW_K: ${SRW_K:-10}", "SRW_K: ${SRW_K:-11}")
    )
    monkeypatch.setattr(settings_docs, "COMPOSE", compose)
    assert settings_docs.stale() == [compose]
    assert settings_docs.main([]) == 1
    assert settings_docs.main(["--write"]) == 0 and settings_docs.stale() == []
    assert "SRW_K: ${SRW_K:-10}" in compose.read_text()


def test_an_ensemble_setting_reaches_the_engine_and_its_versions_load_every_scout(
    tmp_path, tiny_scout
):
    import shutil

    from backend.labelstudio.tasks import parse_label_config
    from backend.store.store import ProjectStore
    from testbed.projects import publish_scout

    default = Settings(model_dir=str(tmp_path))  # SRW_SCOUTS 0: NER 3, classification 1
    assert weighers.engine(default, parse_label_config(NER_CONFIG)).ensemble_size() == 3
    assert weighers.engine(default, parse_label_config(CLS_CONFIG)).ensemble_size() == 1
    settings = Settings(model_dir=str(tmp_path), n_scouts=2)
    srw = weighers.engine(settings, parse_label_config(NER_CONFIG))
    assert srw.n_scouts == 2 == srw.ensemble_size()
    store = ProjectStore(tmp_path, 1)
    version = publish_scout(tmp_path, 1, tiny_scout)
    for member in (1, 2):  # an ensemble's version: scout, scout-1, scout-2
        shutil.copytree(store.scout_dir(version), store.scout_dir(version, member))
    assert store.n_scouts(version) == 3
    loaded = weighers.weigher(settings, store, version)
    assert len(loaded.scouts_) == 3 and loaded.scout_ is loaded.scouts_[0]
    with pytest.raises(SettingsError, match="SRW_SCOUTS"):
        Settings(model_dir=str(tmp_path), n_scouts=-1)


def test_a_version_keeps_its_crf_and_serves_with_it(tmp_path, tiny_scout, tiny_ner_data):
    """SRW_CRF reaches the engine; a version trained with the CRF keeps it beside its scout,
    and the loaded version scores with it, as the training did."""
    import numpy as np

    from backend.labelstudio.tasks import parse_label_config
    from backend.store.store import ProjectStore
    from subregweigh.crf import FeatureTagger
    from subregweigh.weigh import SubRegWeigh

    spec = parse_label_config(NER_CONFIG)
    settings = Settings(model_dir=str(tmp_path))
    assert weighers.engine(settings, spec).crf
    assert not weighers.engine(Settings(model_dir=str(tmp_path), crf=False), spec).crf
    store = ProjectStore(tmp_path, 1)
    trained = SubRegWeigh.from_parts([tiny_scout], FeatureTagger().fit(tiny_ner_data))
    staged = publish.stage_version(store, trained, {}, (spec, settings, [], 0, 0))
    assert publish.serve_here(staged)  # the publish path's step here: no Label Studio
    version = staged.version
    assert store.crf_file(version).is_file()
    expected = trained.weigh_deterministic(tiny_ner_data).deterministic_probability
    served = weighers.weigher(settings, store, version)
    got = served.weigh_deterministic(tiny_ner_data).deterministic_probability
    np.testing.assert_allclose(got, expected, atol=1e-5)
    alone = SubRegWeigh.from_parts([tiny_scout]).weigh_deterministic(tiny_ner_data)
    assert not np.allclose(alone.deterministic_probability, expected, atol=1e-3)


def test_a_version_of_the_crf_alone_serves(tmp_path, tiny_scout, tiny_ner_data):
    """Early scores of the CRF alone make a version with no scout: it loads and scores tasks,
    annotated or not, with the CRF (its own tags as the prediction)."""
    import numpy as np

    from backend.labelstudio.tasks import parse_label_config
    from backend.store.store import ProjectStore
    from subregweigh.crf import FeatureTagger
    from subregweigh.weigh import SubRegWeigh

    spec = parse_label_config(NER_CONFIG)
    settings = Settings(model_dir=str(tmp_path))
    store = ProjectStore(tmp_path, 1)
    crf = FeatureTagger().fit(tiny_ner_data)
    alone = SubRegWeigh.from_parts([], crf)
    staged = publish.stage_version(store, alone, {}, (spec, settings, [], 0, 0))
    assert publish.serve_here(staged)  # the publish path's step here: no Label Studio
    version = staged.version
    assert store.n_scouts(version) == 0 and store.crf_file(version).is_file()
    assert "training" not in store.meta(version)
    served = weighers.weigher(settings, store, version)
    assert not served.scouts_
    got = served.weigh(tiny_ner_data)  # no K candidates: the CRF's one pass
    expected = SubRegWeigh.from_parts([], crf).weigh_deterministic(tiny_ner_data)
    np.testing.assert_allclose(got.deterministic_probability, expected.deterministic_probability)
    assert got.majority == crf.predict(tiny_ner_data)

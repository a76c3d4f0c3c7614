"""backend.settings: one Settings object, validated when built, used by everything it starts."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from backend import service
from backend.jobs import RQRunner, ThreadRunner
from backend.server import create_app
from backend.settings import METHODS, TRAINING, Settings, SettingsError

REPO = Path(__file__).resolve().parents[1]
NER_CONFIG = """<View>
  <Labels name="label" toName="text"><Label value="PER"/><Label value="LOC"/></Labels>
  <Text name="text" value="$text"/>
</View>"""


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "values,message",
    [
        ({"method": "kmeanz"}, "SRW_METHOD (--method) is 'kmeanz'; choose one of random"),
        ({"score": "c/K"}, "SRW_SCORE (--score) is 'c/K'; choose one of deterministic"),
        ({"k": 0}, "SRW_K (-k) is 0; K must be at least 1"),
        ({"k": 20, "n_samples": 10}, "SRW_N (--n-samples) is 10; N must be at least K (SRW_K"),
        ({"p": 1.0}, "SRW_P (-p) is 1.0; p must be in [0, 1)"),
        ({"w_min": 1.5}, "SRW_W_MIN (--w-min) is 1.5; the weight floor must be in [0, 1]"),
        ({"epochs": -1}, "SRW_EPOCHS (--epochs) is -1; it must not be negative"),
        ({"batch_size": 0}, "SRW_BATCH_SIZE is 0; it must be at least 1"),
        ({"min_annotations": 0}, "SRW_MIN_ANNOTATIONS (--min-annotations) is 0"),
        ({"cached_models": 0}, "SRW_CACHED_MODELS is 0; it must be at least 1"),
        ({"n_jobs": 0}, "SRW_N_JOBS is 0; it must be at least 1, or -1 for one process per"),
        ({"n_jobs": -2}, "SRW_N_JOBS is -2; it must be at least 1, or -1"),
        ({"queue_name": ""}, "RQ_QUEUE_NAME (--queue-name) is ''"),
        ({"precision": "fp16"}, "SRW_PRECISION is 'fp16'; choose one of float32, bfloat16, auto"),
    ],
)
def test_settings_that_cannot_work_fail_when_built(values, message):
    with pytest.raises(SettingsError) as info:
        Settings(**values)
    assert message in str(info.value)


def test_methods_are_the_engines():
    from subregweigh.selection import METHODS as ENGINE_METHODS

    assert set(METHODS) == set(ENGINE_METHODS)


def test_precisions_are_the_scouts():
    from backend.settings import PRECISIONS
    from subregweigh.scout import PRECISIONS as SCOUT_PRECISIONS

    assert PRECISIONS == SCOUT_PRECISIONS


def test_scores_are_the_engines_with_its_default_first():
    from backend.settings import SCORES
    from subregweigh.weigh import DEFAULT_SCORE
    from subregweigh.weigh import SCORES as ENGINE_SCORES

    assert SCORES == ENGINE_SCORES and Settings().score == DEFAULT_SCORE == SCORES[0]


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
    with pytest.raises(SettingsError, match="SRW_K='ten' is not a valid int"):
        Settings.from_env()
    monkeypatch.setenv("SRW_K", "80")  # valid on its own, but above SRW_N
    with pytest.raises(SettingsError, match="N must be at least K"):
        Settings.from_env()


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
    env = _run(["-c", "import _wsgi"], {"SRW_METHOD": "fast", "MODEL_DIR": str(tmp_path)})
    assert env.returncode != 0
    assert "subregweigh backend: SRW_METHOD (--method) is 'fast'" in env.stderr
    assert "Traceback" not in env.stderr


def test_worker_refuses_to_start_with_settings_that_cannot_work(monkeypatch, capsys):
    from backend import worker

    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("SRW_P", "1.5")
    assert worker.main([]) == 2
    assert "SRW_P (-p) is 1.5; p must be in [0, 1)" in capsys.readouterr().err


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

    def engine(settings, spec, warm_from=None):  # where the training builds its engine: stop there
        seen.append((settings, spec.task))
        raise RuntimeError("stopped by the test")

    monkeypatch.setattr(service, "engine", engine)
    monkeypatch.setattr(service, "LabelStudioAPI", FakeLabelStudio)
    settings = Settings(
        model_dir=str(tmp_path / "models"),
        label_studio_url="http://127.0.0.1:1",
        label_studio_api_key="key",
        k=5,
        n_samples=50,
        min_annotations=3,
    )
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
        method="cossim",
        n_jobs=4,
    )
    runner = create_app(settings).extensions["subregweigh"]["runner"]
    assert isinstance(runner, RQRunner)
    sent = pickle.dumps(runner.job)  # what rq stores in Redis for a worker
    assert b"server-key-31c9" not in sent
    monkeypatch.setenv("SRW_K", "7")
    monkeypatch.setenv("SRW_METHOD", "random")
    monkeypatch.setenv("MODEL_DIR", str(tmp_path / "worker"))
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", "worker-key")
    monkeypatch.setenv("SRW_N_JOBS", "2")  # the worker's machine: its cores, not the server's
    trained = []
    monkeypatch.setattr(service, "train_project", lambda project, s: trained.append((project, s)))
    pickle.loads(sent)("4")
    ((project, used),) = trained
    assert project == "4"
    assert used.training() == settings.training()
    assert (used.k, used.n_samples, used.epochs, used.method) == (5, 50, 2, "cossim")
    assert used.model_dir == str(tmp_path / "worker")
    assert used.label_studio_api_key == "worker-key"
    assert used.n_jobs == 2


def test_trainings_sample_candidates_in_n_jobs_processes(tmp_path):
    from backend.tasks import parse_label_config

    spec = parse_label_config(NER_CONFIG)
    srw = service.engine(Settings(model_dir=str(tmp_path), n_jobs=3, k=4, n_samples=20), spec)
    assert (srw.n_jobs, srw.k, srw.n_samples) == (3, 4, 20)
    assert service.engine(Settings(model_dir=str(tmp_path)), spec).n_jobs == 1


def test_trainings_compute_in_the_servers_precision(tmp_path, monkeypatch):
    from backend.tasks import parse_label_config

    spec = parse_label_config(NER_CONFIG)
    assert Settings().precision == "auto"  # bfloat16 where the hardware has it
    monkeypatch.setenv("SRW_PRECISION", "bfloat16")
    settings = Settings.from_env(model_dir=str(tmp_path))
    assert settings.training()["precision"] == "bfloat16"  # travels with a queued training
    assert service.engine(settings, spec).scout.precision == "bfloat16"
    monkeypatch.setenv("SRW_PRECISION", "half")
    with pytest.raises(SettingsError, match="SRW_PRECISION is 'half'"):
        Settings.from_env()

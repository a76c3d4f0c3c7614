"""A training's budget (issue 42, item 4): settings a project asks for beyond the server's
limits are refused at /setup, and a training that runs past SRW_TRAINING_SECONDS is stopped,
fails saying why, and leaves the last good version serving. A real scout trains on real CoNLL
sentences; only Label Studio's API is stood in for (it is not what this is about; the settings'
round trip through a real Label Studio is tests/labelstudio/test_project_settings_ls.py)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from backend.config.settings import Settings
from backend.jobs import training
from backend.queue import budget
from backend.store.store import ProjectStore
from backend.web.server import create_app
from testbed.projects import NER_CONFIG, conll_tasks, publish_scout
from tests.doubles import FakeRunner, ProjectsOfLabelStudio, offline_settings, use_label_studio

TASKS = conll_tasks(np.random.default_rng(3), 300)


class ProjectInLabelStudio:
    """Label Studio's API for one project of 300 annotated CoNLL sentences."""

    def __init__(self, url, api_key, **kwargs):
        pass

    def label_config(self, project):
        return NER_CONFIG

    def users(self):
        return {}

    def tasks(self, project):
        return [{"id": i, **task} for i, task in enumerate(TASKS, 1)]


def test_a_training_past_its_seconds_fails_and_the_last_version_serves(
    tmp_path, tiny_scout, monkeypatch
):
    use_label_studio(monkeypatch, ProjectInLabelStudio)
    monkeypatch.setattr(training, "EARLY_STEPS", 10**9)  # no early version: one that serves
    model_dir = tmp_path / "models"
    serving = publish_scout(model_dir, 4, tiny_scout)
    settings = offline_settings(
        model_dir,
        training_seconds=10,
        epochs=20,
        n_scouts=1,
        crf=False,
    )
    start = time.monotonic()
    try:
        training.train_project("4", settings)
        raise AssertionError("the training finished within 10 s: the test needs a longer one")
    except budget.BudgetExceeded as err:
        assert "past its budget of 10 s (SRW_TRAINING_SECONDS)" in str(err)
    assert time.monotonic() - start < 40
    store = ProjectStore(model_dir, 4)
    status = store.status()
    assert status["state"] == "failed" and "SRW_TRAINING_SECONDS" in status["last_error"]
    assert store.current_version() == serving and store.all_versions() == [serving]


def test_setup_refuses_settings_beyond_the_servers_limits(tmp_path, monkeypatch):
    monkeypatch.setattr("backend.labelstudio.membership.LabelStudioAPI", ProjectsOfLabelStudio)
    settings = Settings(model_dir=str(tmp_path / "models"), project_limits="epochs=10,k=20")
    client = create_app(settings, runner=FakeRunner(), selftest_runner=FakeRunner()).test_client()
    for params, why in [
        ({"epochs": 1_000_000}, "SRW_EPOCHS is 1000000; this server lets a project set at most 10"),
        ({"k": 5_000_000, "n_samples": 5_000_000}, "SRW_K is 5000000"),
        ({"scout_model": "/srv/models/7/versions/v1/scout"}, "may name only a model"),
        ({"scout_model": "../../etc"}, "may name only a model"),
    ]:
        body = {"project": "1.1", "schema": NER_CONFIG, "extra_params": params}
        reply = client.post("/setup", json=body)
        assert reply.status_code == 400, params
        assert why in reply.get_json()["error"] and why[:40] in reply.status
    assert not (tmp_path / "models" / "1" / "settings.json").exists()
    body = {"project": "1.1", "schema": NER_CONFIG, "extra_params": {"epochs": 10, "k": 20}}
    assert client.post("/setup", json=body).status_code == 200


def test_trainings_of_one_process_take_turns_so_each_budget_is_its_own(tmp_path, monkeypatch):
    """Issue 58, item 7: three projects training at once in one worker failed together, each
    charged with the growth of the others where each alone passed. A process
    trains one project at a time (backend.queue.budget.training_slot): three trainings that each
    grow by 300 MB, under a 500 MB budget, all pass, one after the other, and the waiting ones say
    so. The training's stages are stood in for by a step that holds 300 MB for a second (the
    real stages' cost is not what this is about; their budget is the tests above)."""
    settings = Settings(model_dir=str(tmp_path / "models"), training_memory_mb=500)
    running, overlap, waiting = [], [], []

    def grows(project, store, effective, *_):
        running.append(project)
        overlap.append(len(running))
        held = np.ones(300 * 2**20, dtype=np.uint8)  # 300 MB, touched
        time.sleep(1.0)
        del held
        running.remove(project)
        return {"message": "trained", "trained": True}

    monkeypatch.setattr(training, "_train", grows)
    real_update = ProjectStore.update_status

    def noting(self, **changes):
        if changes.get("message") == budget.WAITING:
            waiting.append(self.project)
        return real_update(self, **changes)

    monkeypatch.setattr(ProjectStore, "update_status", noting)
    results: dict = {}
    threads = [
        threading.Thread(
            target=lambda p=p: results.setdefault(p, training.train_project(p, settings))
        )
        for p in ("1", "2", "3")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert {p: r["trained"] for p, r in results.items()} == {"1": True, "2": True, "3": True}
    assert max(overlap) == 1 and len(waiting) == 2
    for project in ("1", "2", "3"):
        assert ProjectStore(settings.model_dir, project).status()["state"] == "idle"


def test_a_rescore_and_its_refresh_run_within_the_training_seconds(tmp_path, monkeypatch):
    """Issue 58: a refresh ran several times past its budget. The rescore job, its refresh with it,
    runs within SRW_TRAINING_SECONDS: past them it stops, saying so. Its work is stood in for
    by a loop that would take 60 s (what it computes is not what this is about)."""
    from backend.jobs import rescore

    def busy(project, settings, refresh):
        for _ in range(600):
            time.sleep(0.1)

    monkeypatch.setattr(rescore, "_rescore", busy)
    monkeypatch.setattr(budget, "CHECK_SECONDS", 0.1)
    settings = Settings(model_dir=str(tmp_path / "models"), training_seconds=10)
    started = time.monotonic()
    with pytest.raises(budget.BudgetExceeded, match="the rescore ran past its budget of 10 s"):
        rescore.rescore_project("1", settings)
    assert time.monotonic() - started < 12

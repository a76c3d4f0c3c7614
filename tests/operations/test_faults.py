"""Faults a backend meets over months of service, with real processes: a real Label Studio 1.23,
real redis-server, our server and rq workers as separate processes, killed and restarted.

Training is kept tiny (20 tasks, 1 epoch, N=20, K=5): these tests are about what survives a
fault, not detection quality (tests/labelstudio/test_e2e_label_studio.py measures that).
"""

from __future__ import annotations

import json
import os
import signal
import time

import numpy as np
import pytest

from backend.jobs.training import EARLY_STEPS
from testbed.projects import (
    CLS_CONFIG,
    NER_CONFIG,
    classification_tasks,
    conll_tasks,
    connect_model,
    field,
    import_tasks,
    ner_task,
    ner_tasks,
    publish_scout,
)
from testbed.servers import (
    BackendServer,
    LabelStudioServer,
    RedisServer,
    WorkerProcess,
    free_port,
    process_tree,
    require_label_studio,
    require_redis,
)

FAST = {
    "SRW_N": "20",
    "SRW_K": "5",
    "SRW_EPOCHS": "1",
    "SRW_MIN_ANNOTATIONS": "5",
    "SRW_RETRAIN_AFTER": "1000",
    "LOG_LEVEL": "INFO",
}
N_TASKS = 20


def _project(
    ls: LabelStudioServer, kind: str = "ner", seed: int = 3, tasks: list[dict] | None = None
) -> tuple[int, list[int]]:
    """A new project of N_TASKS ``kind`` tasks, 2 of them wrong (``tasks``: these instead)."""
    make, config = (ner_tasks, NER_CONFIG) if kind == "ner" else (classification_tasks, CLS_CONFIG)
    if tasks is None:
        tasks, _ = make(np.random.default_rng(seed), N_TASKS, 2)
    sdk = ls.sdk()
    project = sdk.projects.create(title=f"faults {kind}", label_config=config)
    ids = import_tasks(sdk, project.id, tasks)
    _LABEL_STUDIO[project.id] = ls
    return project.id, ids


_LABEL_STUDIO: dict[int, LabelStudioServer] = {}  # project -> its Label Studio
_CONNECTED: set[tuple[int, str]] = set()


def _env(ls: LabelStudioServer, **extra) -> dict[str, str]:
    return {**FAST, **ls.backend_env, **extra}


def _train(backend: BackendServer, project: int) -> tuple[int, dict]:
    """START_TRAINING, as Label Studio sends it for a project connected to ``backend`` (the
    backend keeps nothing for a project not connected to it: connected here on first use)."""
    if (project, backend.url) not in _CONNECTED:
        _LABEL_STUDIO[project].sdk().ml.create(project=project, url=backend.url, title="srw")
        _CONNECTED.add((project, backend.url))
    return backend.post("/webhook", {"action": "START_TRAINING", "project": {"id": project}})


def _wait(
    backend: BackendServer,
    project: int,
    done,
    what: str,
    timeout: float = 300.0,
    poll: float = 0.5,
    worker=None,
) -> dict:
    """The project's status once ``done(status)``; a failure shows the backend's log, and the
    rq ``worker``'s where one runs the job (why a queued job did not start)."""
    deadline = time.monotonic() + timeout
    status: dict = {}
    while time.monotonic() < deadline:
        code, status = backend.get(f"/status?project={project}")
        assert code == 200, status
        if done(status):
            return status
        time.sleep(poll)
    logs = backend.log() + (f"\n--- the worker's log ---\n{worker.log()}" if worker else "")
    pytest.fail(f"{what}: not within {timeout:.0f} s; last status {status}\n{logs}")


def _trained(
    backend: BackendServer, project: int, other_than: str | None = None, worker=None
) -> str:
    status = _wait(
        backend,
        project,
        lambda s: (
            s["state"] in {"idle", "failed"}
            and s["job"] == "idle"
            and s["current_version"] not in {None, other_than}
        ),
        "a new version",
        worker=worker,
    )
    assert status["state"] == "idle", status
    return status["current_version"]


def _ls_predict(
    backend: BackendServer, ls: LabelStudioServer, project: int, config: str = NER_CONFIG
):
    """/predict exactly as Label Studio calls it, for all the project's tasks."""
    tasks = [
        {"id": t.id, "data": t.data, "annotations": t.annotations}
        for t in ls.sdk().tasks.list(project=project, fields="all")
    ]
    return backend.post(
        "/predict", {"tasks": tasks, "project": f"{project}.1", "label_config": config}
    )


# ----------------------------------------------------------------------------- worker killed


def test_worker_killed_mid_training(label_studio, tmp_path):
    """The previous version keeps serving, the job shows as failed, the next training succeeds."""
    require_redis()
    with RedisServer() as redis:
        env = _env(label_studio, REDIS_URL=redis.url, RQ_QUEUE_NAME="faults", SRW_N="5")
        env.update(SRW_JOB_LOCK_SECONDS="3", SRW_SCOUTS="1", SRW_CRF="0")
        with BackendServer(tmp_path / "models", env, tmp_path / "backend.log") as backend:
            # Texts of 4 sentences make each step slow.
            tasks = conll_tasks(np.random.default_rng(5), N_TASKS, sentences_per_task=4)
            project, _ = _project(label_studio, tasks=tasks)
            with WorkerProcess(tmp_path / "models", env, tmp_path / "worker1.log"):
                assert _train(backend, project)[0] == 201
                v1 = _trained(backend, project)

            # The slow training: 20 epochs (the job carries the project's settings, not the
            # worker's), too few steps for early scores (a third of them under a tenth of
            # EARLY_STEPS), so it publishes nothing until its scout is trained.
            assert 20 * -(-N_TASKS // 16) < 3 * (EARLY_STEPS // 10)
            ml = label_studio.api("GET", f"/api/ml?project={project}")[0]["id"]
            code, reply = connect_model(label_studio, project, backend.url, {"epochs": 20}, ml)
            assert code == 200, reply
            slow = WorkerProcess(tmp_path / "models", env, tmp_path / "worker2.log").start()
            try:
                assert _train(backend, project)[0] == 201
                _wait(
                    backend,
                    project,
                    lambda s: (
                        s["job"] == "running" and s.get("message", "").startswith("training on")
                    ),
                    "the slow training to start",
                )
                time.sleep(1.0)
                # The machine or container dies: the worker and its work horse (rq puts the horse
                # in a process group of its own) are killed mid-epoch.
                for pid in process_tree(slow.proc.pid):
                    os.kill(pid, signal.SIGKILL)
                slow.proc.wait(timeout=10)
            finally:
                slow.stop()
            assert "training the scout on 20 texts: 20 epochs" in slow.log_path.read_text()
            failed = _wait(
                backend,
                project,
                lambda s: s["state"] == "failed",
                "the dead training to show as failed",
                timeout=30,
            )
            assert "killed or crashed" in failed["last_error"]
            assert failed["current_version"] == v1 and failed["is_training"] is False

            code, body = _ls_predict(backend, label_studio, project)
            assert code == 200 and {r["model_version"] for r in body["results"]} == {v1}
            assert label_studio.sdk().projects.get(id=project).model_version == v1

            code, reply = connect_model(label_studio, project, backend.url, {}, ml)
            assert code == 200, reply
            with WorkerProcess(tmp_path / "models", env, tmp_path / "worker3.log"):
                assert _train(backend, project)[0] == 201
                v2 = _trained(backend, project, other_than=v1)
            assert label_studio.sdk().projects.get(id=project).model_version == v2
            versions = backend.get(f"/versions?project={project}")[1]["versions"]
            assert versions == sorted([v1, v2])  # the killed training left no version behind


# ----------------------------------------------------------------------------- server restarted


def test_server_restart_serves_the_latest_version_without_retraining(label_studio, tmp_path):
    env = _env(label_studio)
    project, _ = _project(label_studio, seed=4)
    with BackendServer(tmp_path / "models", env, tmp_path / "first.log") as backend:
        assert _train(backend, project)[0] == 201
        version = _trained(backend, project)
        code, before = _ls_predict(backend, label_studio, project)
        assert code == 200

    with BackendServer(tmp_path / "models", env, tmp_path / "second.log") as backend:
        code, after = _ls_predict(backend, label_studio, project)
        assert code == 200 and after == before
        assert after["model_version"] == version
        status = backend.get(f"/status?project={project}")[1]
        assert (status["state"], status["job"], status["current_version"]) == (
            "idle",
            "idle",
            version,
        )
        assert backend.post("/setup", {"project": f"{project}.1", "schema": NER_CONFIG})[1] == {
            "model_version": version
        }
        log = backend.log(400)
    assert "computed" not in log and "training a scout" not in log and "-> training" not in log


# ----------------------------------------------------------------------------- Redis restarted


def test_redis_stopped_and_started_again(label_studio, tmp_path):
    require_redis()
    redis = RedisServer(data_dir=tmp_path / "redis", appendonly=True).start()
    try:
        env = _env(label_studio, REDIS_URL=redis.url, RQ_QUEUE_NAME="faults-redis")
        project, _ = _project(label_studio, seed=5)
        with (
            BackendServer(tmp_path / "models", env, tmp_path / "backend.log") as backend,
            WorkerProcess(tmp_path / "models", env, tmp_path / "worker.log") as worker,
        ):
            deadline = time.monotonic() + 60
            while "Listening on" not in worker.log(20) and time.monotonic() < deadline:
                time.sleep(0.2)
            redis.stop()  # an outage while everything runs
            code, body = _train(backend, project)
            assert code == 503, body
            assert "Redis" in body["error"] and f"127.0.0.1:{redis.port}" in body["error"]
            code, status = backend.get(f"/status?project={project}")
            assert code == 200 and status["job"] == "unknown"
            code, body = backend.get(f"/is_training?project={project}")
            assert code == 200 and body["is_training"] is False
            code, body = _ls_predict(backend, label_studio, project)
            assert code == 200 and len(body["results"]) == N_TASKS  # serving needs no Redis

            redis.start()  # same port, same append-only file
            code, body = _train(backend, project)
            assert code == 201 and body["status"] == "queued"
            version = _trained(backend, project, worker=worker)
            assert worker.proc.poll() is None, "the worker must survive the outage"
            assert _ls_predict(backend, label_studio, project)[1]["model_version"] == version
        assert "Traceback" not in (tmp_path / "backend.log").read_text()
    finally:
        redis.stop()


# ------------------------------------------------------------------------ Label Studio unreachable


def test_label_studio_unreachable_while_predictions_are_written(tmp_path):
    """Retries with backoff, then the training says it waits for Label Studio; the server stays
    up; once Label Studio is back the same training writes its version there (issue 58: the
    backend and Label Studio serve one version, without waiting for the next change)."""
    require_label_studio()
    ls = LabelStudioServer(port=free_port(), data_dir=tmp_path / "ls")
    try:
        ls.start()
        # 3 epochs: a few seconds of training, ample time to stop Label Studio (SIGTERM, at once)
        # between the fetch of the annotations and the write of the predictions.
        env = _env(ls, SRW_EPOCHS="3")
        project, _ = _project(ls, seed=6)
        with BackendServer(tmp_path / "models", env, tmp_path / "backend.log") as backend:
            assert _train(backend, project)[0] == 201
            _wait(
                backend,
                project,
                lambda s: s.get("message", "").startswith("training on"),
                "training to start",
                poll=0.05,
            )
            ls.stop()
            waiting = _wait(
                backend,
                project,
                lambda s: "Label Studio is unreachable" in s.get("message", ""),
                "the write to wait for Label Studio",
                timeout=120,
            )
            assert "could not write" in waiting["message"] and ls.url in waiting["message"]
            assert "tried again in 15 s" in waiting["message"]
            log = backend.log(400)
            assert "retrying in 1 s" in log and "retrying in 8 s" in log  # backoff: 1, 2, 4, 8 s
            assert backend.get("/health")[0] == 200
            version = waiting["current_version"]  # published here, Label Studio's to come
            assert version is not None and waiting["state"] == "running"

            ls.start()  # same data, same port; no change, no new training
            done = _wait(
                backend,
                project,
                lambda s: s["state"] == "idle" and s["job"] == "idle",
                "the training to finish",
                timeout=300,
            )
            assert done["current_version"] == version and done["last_error"] is None
            assert ls.sdk().projects.get(id=project).model_version == version

            # A change whose webhook came just before Label Studio went down: its rescore waits
            # for Label Studio and reads the task once it is back, with no change after it.
            task = ls.sdk().tasks.list(project=project).items[0]
            annotation = ls.api("GET", f"/api/tasks/{task.id}")["annotations"][0]
            ls.stop()
            event = {
                "action": "ANNOTATION_UPDATED",
                "project": {"id": project},
                "task": {"id": task.id},
                "annotation": {"id": annotation["id"]},
            }
            assert backend.post("/webhook", event)[0] == 200
            deadline = time.monotonic() + 120
            while "the rescore of its changed tasks: Label Studio is unreachable" not in (
                backend.log(200)
            ):
                assert time.monotonic() < deadline, backend.log(80)
                time.sleep(0.5)
            ls.start()
            rescored = _wait(
                backend,
                project,
                lambda s: (s.get("last_rescore") or {}).get("tasks") == 1,
                "the rescore once Label Studio is back",
                timeout=180,
            )
            assert not rescored.get("rescore_pending")
    finally:
        ls.close()


# ----------------------------------------------------------------------------- two projects at once


def test_two_projects_training_at_once_stay_isolated(label_studio, tmp_path):
    ner_project, ner_ids = _project(label_studio, "ner", seed=7)
    cls_project, cls_ids = _project(label_studio, "sentiment", seed=7)
    with BackendServer(
        tmp_path / "models", _env(label_studio, SRW_EPOCHS="3"), tmp_path / "backend.log"
    ) as backend:
        assert _train(backend, ner_project)[1]["status"] == "started"
        assert _train(backend, cls_project)[1]["status"] == "started"
        both = [backend.get(f"/status?project={p}")[1]["job"] for p in (ner_project, cls_project)]
        assert both == ["running", "running"]
        versions = {p: _trained(backend, p) for p in (ner_project, cls_project)}
    assert versions[ner_project] != versions[cls_project]

    sdk = label_studio.sdk()
    for project, ids, control in (
        (ner_project, ner_ids, "label"),
        (cls_project, cls_ids, "sentiment"),
    ):
        assert sdk.projects.get(id=project).model_version == versions[project]
        tasks = list(sdk.tasks.list(project=project, fields="all"))
        assert sorted(t.id for t in tasks) == sorted(ids)
        for task in tasks:
            (prediction,) = [
                p for p in task.predictions if field(p, "model_version") == versions[project]
            ]
            assert all(r["from_name"] == control for r in field(prediction, "result"))
        stored = json.loads(
            (
                tmp_path / "models" / str(project) / "versions" / versions[project] / "scores.json"
            ).read_text()
        )
        # Its own tasks, and every stored annotation of one of them (task/annotation ids).
        assert set(stored) == {str(i) for i in ids}
        for task, entry in stored.items():
            assert all(a["id"].split("/")[0] == task for a in entry["annotations"])


# ----------------------------------------------------------------------------- damaged model dirs


def test_corrupt_or_half_written_versions_are_never_served(tmp_path, tiny_scout, caplog):
    from backend.config.settings import Settings
    from backend.queue.runners import ThreadRunner
    from backend.store.store import ProjectStore
    from backend.web.server import create_app

    model_dir = tmp_path / "models"
    v1, v2 = "srw-20260101-000000000-aaaaaa", "srw-20260102-000000000-bbbbbb"
    publish_scout(model_dir, 1, tiny_scout, v1)
    publish_scout(model_dir, 1, tiny_scout, v2)
    store = ProjectStore(model_dir, 1)
    runner = ThreadRunner(lambda project: None, model_dir)  # no training in this test
    client = create_app(Settings(model_dir=str(model_dir)), runner=runner).test_client()

    def predict(task_id: int) -> dict:
        response = client.post(
            "/predict",
            json={
                "project": "1",
                "label_config": NER_CONFIG,
                "tasks": [ner_task(task_id, "Angela Merkel visited Paris .")],
            },
        )
        assert response.status_code == 200, response.get_json()
        return response.get_json()

    # A half-written version (killed before COMPLETE), even named in CURRENT, is never served.
    half = store.versions / "srw-20260103-000000000-cccccc"
    (half / "scout").mkdir(parents=True)
    (half / "scout" / "config.json").write_text("{")
    (store.root / "CURRENT").write_text(half.name)
    setup = client.post("/setup", json={"project": "1", "schema": NER_CONFIG}).get_json()
    assert setup["model_version"] == v2

    # A published version damaged later: a truncated weights file. Marked BROKEN when it fails to
    # load, and the previous version serves. (Damage it before any load: a loaded scout maps its
    # weights file, and shrinking a mapped file kills the process with SIGBUS; gunicorn then
    # starts a new worker, whose load fails like this.)
    weights = next((store.versions / v2 / "scout").glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:1000])
    body = predict(2)
    assert body["model_version"] == v1 and body["results"][0]["score"] is not None
    assert (store.versions / v2 / "BROKEN").is_file()
    assert weights.name in caplog.text and "will not be served" in caplog.text
    assert client.get("/status?project=1").get_json()["current_version"] == v1

    # Unreadable stored scores: the last version goes too; nothing trained is left to serve.
    (store.versions / v1 / "scores.json").write_text('{"1": {"result": [')
    body = predict(3)
    assert body["model_version"] == "subregweigh-untrained" and body["results"] == [
        {"result": [], "model_version": "subregweigh-untrained"}
    ]
    assert client.get("/versions?project=1").get_json()["versions"] == []

"""A full disk under MODEL_DIR (issue 26, item 3): the backend keeps serving the last good
scores, refuses new trainings with "disk full: ..." in /status and the log, and loses no
annotation event: what it cannot write is kept in the process and written once space returns.

Two ways to fill the disk:

* ``test_a_full_tmpfs_...``: a real one. MODEL_DIR lies on a tmpfs mounted for the test (root
  only; skipped where mount is not allowed), filled to the last byte with a ballast file, and
  the backend is a real server process (``python _wsgi.py``). Removing the ballast gives the
  space back.
* the other tests: in this process, ENOSPC injected at the write layer (every
  :func:`subregweigh.io.atomic.atomic_open` under MODEL_DIR raises ``OSError(ENOSPC)``) and
  the free space the training checks (``backend.store.disk.free_mb``) reported as 0 MB.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import subprocess
import time
from functools import partial
from pathlib import Path

import pytest

from backend.config.settings import Settings
from backend.jobs import training
from backend.labelstudio.tasks import TaskRead, parse_label_config
from backend.queue.runners import ThreadRunner
from backend.serving import predictions
from backend.store import disk, unwritten
from backend.store import store as store_module
from backend.store.store import ProjectStore
from backend.web.server import create_app
from subregweigh.io import atomic
from testbed.projects import NER_CONFIG, ner_task, publish_scout
from tests.doubles import FakeRunner

V1 = "srw-20260101-000000000-aaaaaa"


class FullDisk:
    """ENOSPC from every atomic write under ``root`` while ``full``; free space 0 MB."""

    def __init__(self, monkeypatch, root: Path):
        self.root, self.full, self.refused = str(root), False, 0
        real_open, real_free = atomic.atomic_open, disk.free_mb

        @contextlib.contextmanager
        def atomic_open(path, mode="w", **kwargs):
            if self.full and str(Path(path).absolute()).startswith(self.root):
                self.refused += 1
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
            with real_open(path, mode, **kwargs) as f:
                yield f

        monkeypatch.setattr(atomic, "atomic_open", atomic_open)
        monkeypatch.setattr(
            store_module, "free_mb", lambda path: 0.0 if self.full else real_free(path)
        )


def _event(action: str, task: int | None = None) -> dict:
    body = {"action": action, "project": {"id": 1}}
    if task is not None:
        body.update(task={"id": task}, annotation={"task": task, "result": []})
    return body


def _on_disk(model_dir: Path) -> dict:
    """Project 1's status.json with its inbox.json (what waits: the pending rescores)."""
    paths = [model_dir / "1" / "status.json", model_dir / "1" / "inbox.json"]
    return {k: v for p in paths if p.exists() for k, v in json.loads(p.read_text()).items()}


@pytest.fixture
def backend(tmp_path, tiny_scout, monkeypatch):
    """A backend in this process: version V1 of project 1 published, trainings in a thread
    (the real training, which refuses on a full disk before it reads anything), rescores not
    run (a double), every 3 annotation events a training."""
    model_dir = tmp_path / "models"
    publish_scout(model_dir, 1, tiny_scout, V1)
    monkeypatch.setattr(unwritten, "RETRY_SECONDS", 0.1)
    settings = Settings(model_dir=str(model_dir), retrain_after=3)
    runner = ThreadRunner(partial(training.train_project, settings=settings), model_dir)
    rescores = FakeRunner()
    app = create_app(settings, runner=runner, rescore_runner=rescores)
    disk = FullDisk(monkeypatch, model_dir)
    yield app.test_client(), disk, runner, rescores, model_dir
    disk.full = False
    runner.wait(60)
    for key in unwritten.unwritten_projects():  # nothing kept for the next test
        unwritten._kept.pop(key, None)


def test_events_predictions_and_a_refused_training_on_a_full_disk(backend, caplog):
    client, disk, runner, rescores, model_dir = backend
    predict = {
        "project": "1",
        "label_config": NER_CONFIG,
        "tasks": [ner_task(7, "Angela Merkel visited Paris ."), ner_task(8, "EU rejects it .")],
    }
    computed = []
    real_score = predictions.score_tasks
    service_score = partial(_counting, real_score, computed)
    disk.full = True
    caplog.set_level(logging.INFO)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(predictions, "score_tasks", service_score)

        # Two annotation events: 2xx (Label Studio never sends a webhook twice), counted, and
        # their tasks wait to be rescored, though status.json took nothing.
        for action, task in (("ANNOTATION_CREATED", 7), ("ANNOTATION_UPDATED", 8)):
            reply = client.post("/webhook", json=_event(action, task))
            assert reply.status_code == 202, reply.get_json()
            assert reply.get_json()["unwritten"]["annotation_events"] >= 1
        assert rescores.submitted == ["1", "1"]
        assert _on_disk(model_dir).get("events_since_training", 0) == 0
        status = client.get("/status?project=1").get_json()
        assert status["events_since_training"] == 2
        assert set(status["rescore_pending"]) == {"7", "8"}
        assert status["unwritten"]["annotation_events"] == 2
        assert status["disk"]["free_mb"] == 0 and status["disk"]["enough"] is False

        # /predict: served; a caller's tasks are never stored (issue 58), so computed each time
        for _ in range(2):
            reply = client.post("/predict", json=predict)
            assert reply.status_code == 200, reply.get_json()
            body = reply.get_json()
            assert body["model_version"] == V1
            assert all(r.get("score") is not None for r in body["results"])
        assert computed == [2, 2]
        # tasks read from Label Studio (a rescore's): computed once, kept in memory, served
        # again without work
        spec = parse_label_config(NER_CONFIG)
        for _ in range(2):
            read = predictions.predict(
                Settings(model_dir=str(model_dir)),
                "1",
                spec,
                TaskRead.of(predict["tasks"], spec),
                True,
            )
            assert all(r.get("score") is not None for r in read)
        assert computed == [2, 2, 2]
        assert json.loads((model_dir / "1" / "versions" / V1 / "scores.json").read_text()) == {}

        # The third event asks for a training: refused at once, the reason in /status and the
        # log, V1 still serving.
        reply = client.post("/webhook", json=_event("ANNOTATION_DELETED"))
        assert reply.status_code == 201
        assert runner.wait(60)
    status = client.get("/status?project=1").get_json()
    needed = status["disk"]["needed_mb"]
    assert needed >= store_module.MIN_FREE_MB  # or the last version's size plus 20%
    assert status["state"] == "failed" and status["current_version"] == V1
    assert status["last_error"].startswith(
        f"disk full: 0 MB free in MODEL_DIR, a version needs about {needed} MB"
    ), status
    assert "training refused" in caplog.text and "keeps serving" in status["message"]
    assert status["events_since_training"] == 3  # the refusal reset nothing
    assert client.post("/predict", json=predict).get_json()["model_version"] == V1
    warnings = [r for r in caplog.records if "cannot write to" in r.getMessage()]
    assert len(warnings) == 1, "one WARNING per outage, however many writes fail"
    assert disk.refused >= 5  # the events', the scores', the training's status writes

    # Space returns: within a few retries everything kept is on disk, nothing twice.
    disk.full = False
    deadline = time.monotonic() + 15  # a retry thread started earlier may sleep 5 s first
    while unwritten.unwritten_projects() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not unwritten.unwritten_projects()
    on_disk = _on_disk(model_dir)
    assert on_disk["events_since_training"] == 3
    assert set(on_disk["rescore_pending"]) == {"7", "8"}
    assert "changed_since_fetch" not in on_disk  # no training ran to read it
    assert on_disk["last_error"].startswith("disk full:")
    stored = json.loads((model_dir / "1" / "versions" / V1 / "scores.json").read_text())
    assert set(stored) == {"7", "8"}
    assert "the disk has room again" in caplog.text
    assert "unwritten" not in client.get("/status?project=1").get_json()


def _counting(real, computed, srw, spec, items, *args, **kwargs):
    computed.append(len(items))
    return real(srw, spec, items, *args, **kwargs)


def test_a_storm_of_events_on_a_full_disk_is_one_change_in_memory(tmp_path, monkeypatch):
    """10,000 events while full: one kept change (not 10,000), the count exact once written."""
    disk = FullDisk(monkeypatch, tmp_path)
    store = ProjectStore(tmp_path, 5)
    store.note_event("1")
    disk.full = True
    try:
        for i in range(10_000):
            status = store.note_event(str(i % 50))
        assert status["events_since_training"] == 10_001
        assert status["unwritten"]["status_changes"] == 1
        # A job's change in between keeps its place in the order.
        store.update_status(events_since_training=0, changed_since_fetch={}, state="running")
        store.note_event("99")
        assert store.status()["events_since_training"] == 1
        assert store.status()["unwritten"]["status_changes"] == 3
        # What a rescore takes on a full disk stays on disk too: rescored again, never lost.
        assert set(store.take_inbox("rescore_pending")) == {str(i) for i in range(50)} | {"99"}
    finally:
        disk.full = False
    assert store.write_unwritten()
    on_disk = json.loads((store.root / "status.json").read_text())
    assert on_disk["events_since_training"] == 1
    waiting = json.loads((store.root / "inbox.json").read_text())  # what waits: the inbox
    assert set(waiting["changed_since_fetch"]) == {"99"}
    assert len(waiting["rescore_pending"]) == 51
    assert "unwritten" not in on_disk and "unwritten" not in store.status()


def test_a_new_project_on_a_full_disk_counts_its_events(tmp_path, monkeypatch):
    """No room even for the project's directory (mkdir fails): the event is kept all the same."""
    store = ProjectStore(tmp_path, 6)

    def no_room(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    with monkeypatch.context() as mp:
        mp.setattr(Path, "mkdir", no_room)
        assert store.note_event("3")["events_since_training"] == 1
        assert store.note_event("4")["unwritten"]["annotation_events"] == 2
    assert store.write_unwritten()
    assert json.loads((store.root / "status.json").read_text())["events_since_training"] == 2


# ------------------------------------------------------------------------- a real small disk


def _mount_tmpfs(where: Path, size_mb: int) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root; the ENOSPC-injected tests cover it")
    where.mkdir(parents=True)
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(where)],
            capture_output=True,
            text=True,
        )
    except FileNotFoundError:
        pytest.skip("no mount command here; the ENOSPC-injected tests cover it")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}); ENOSPC-injected tests")


def _fill(directory: Path) -> Path:
    """Fill the filesystem of ``directory`` to its last byte; returns the ballast file."""
    ballast = directory / "ballast"
    with open(ballast, "wb", buffering=0) as f:
        for chunk in (2**20, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    f.write(b"\0" * chunk)
    return ballast


def test_a_full_tmpfs_under_a_real_server(tmp_path, tiny_scout):
    """A real server process whose MODEL_DIR is a tmpfs filled to the last byte."""
    from testbed.servers import BackendServer

    mount = tmp_path / "small"
    _mount_tmpfs(mount, 256)  # a MiniLM version (~90 MB), then the ballast
    server = None
    try:
        model_dir = mount / "models"
        # tasks 7 and 8 are the project's (a training stored them): their events are let in
        # while Label Studio is out of reach
        known = {str(t): {"result": [], "score": 0.5, "fingerprint": "stale"} for t in (7, 8)}
        publish_scout(model_dir, 1, tiny_scout, V1, scores=known)
        ballast = _fill(mount)
        assert os.statvfs(mount).f_bavail == 0
        env = {
            "LABEL_STUDIO_URL": "http://127.0.0.1:9",  # nothing there: rescores fail, kept
            "LABEL_STUDIO_API_KEY": "x" * 40,
            "SRW_RETRAIN_AFTER": "3",
            "LOG_LEVEL": "INFO",
        }
        server = BackendServer(model_dir, env, tmp_path / "backend.log").start()
        predict = {
            "project": "1",
            "label_config": NER_CONFIG,
            "tasks": [ner_task(7, "Angela Merkel visited Paris ."), ner_task(8, "EU rejects .")],
        }
        code, body = server.post("/predict", predict)
        assert code == 200 and body["model_version"] == V1, body
        assert all(r.get("score") is not None for r in body["results"])
        for action, task in (("ANNOTATION_CREATED", 7), ("ANNOTATION_UPDATED", 8), (None, None)):
            code, body = server.post("/webhook", _event(action or "ANNOTATION_DELETED", task))
            assert code in (201, 202), body
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            code, status = server.get("/status?project=1")
            if status["state"] == "failed" and status["job"] == "idle":
                break
            time.sleep(0.3)
        assert status["last_error"].startswith("disk full: 0 MB free in MODEL_DIR"), status
        assert status["current_version"] == V1 and status["disk"]["enough"] is False
        assert status["events_since_training"] == 3
        assert set(status["rescore_pending"]) == {"7", "8"}
        assert "training refused: disk full" in server.log()
        code, body = server.post("/predict", predict)
        assert code == 200 and body["model_version"] == V1
        assert all(r.get("score") is not None for r in body["results"])
        on_disk_scores = (model_dir / "1" / "versions" / V1 / "scores.json").read_text()
        assert json.loads(on_disk_scores) == known  # the new scores are kept in memory

        # Space returns: the server writes what it kept within its retry period.
        ballast.unlink()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            on_disk = _on_disk(model_dir)
            scores = json.loads((model_dir / "1" / "versions" / V1 / "scores.json").read_text())
            if on_disk.get("events_since_training") == 3 and scores:
                break
            time.sleep(0.5)
        assert on_disk["events_since_training"] == 3, server.log()
        assert set(on_disk["rescore_pending"]) == {"7", "8"}
        assert set(scores) == {"7", "8"}
        assert on_disk["last_error"].startswith("disk full:")
        code, status = server.get("/status?project=1")
        assert "unwritten" not in status and status["disk"]["enough"] is True
        assert "the disk has room again" in server.log()
    finally:
        if server is not None:
            server.stop()
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_version_found_broken_on_a_full_disk_is_not_served_again(
    tmp_path, tiny_scout, monkeypatch
):
    """Its BROKEN marker cannot be written: this process stops serving it all the same, and the
    marker is written when space returns."""
    model_dir = tmp_path / "models"
    v2 = "srw-20260102-000000000-bbbbbb"
    publish_scout(model_dir, 1, tiny_scout, V1)
    publish_scout(model_dir, 1, tiny_scout, v2)
    store = ProjectStore(model_dir, 1)
    (store.versions / v2 / "scores.json").write_text('{"1": [')  # unreadable
    disk = FullDisk(monkeypatch, model_dir)
    disk.full = True
    client = create_app(Settings(model_dir=str(model_dir)), runner=FakeRunner()).test_client()
    body = {"project": "1", "label_config": NER_CONFIG, "tasks": [ner_task(3, "Paris .")]}
    for _ in range(2):
        reply = client.post("/predict", json=body).get_json()
        assert reply["model_version"] == V1 and reply["results"][0]["score"] is not None
    assert not (store.versions / v2 / "BROKEN").exists()
    disk.full = False
    assert store.write_unwritten()
    assert "scores.json is unreadable" in (store.versions / v2 / "BROKEN").read_text()

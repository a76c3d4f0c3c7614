"""backend.store: project ids, versions that are served only when complete, pruning, status."""

from __future__ import annotations

import json
import threading

import pytest

from backend.store import KEEP_VERSIONS, ProjectStore, new_version_name
from subregweigh.io.atomic import atomic_write_json


def _build(store: ProjectStore, version: str, scores: dict | None = None):
    staging = store.staging_dir()
    (staging / "scout").mkdir()
    (staging / "scout" / "weights.bin").write_bytes(b"\0" * 16)
    atomic_write_json(staging / "scores.json", scores or {"1": {"score": 0.5}})
    return store.publish(staging, version)


def _names(i: int) -> str:
    return f"srw-20260101-0000{i:02d}-abc{i:03d}"


@pytest.mark.parametrize(
    "project", ["../x", "1/2", "", "x", "1.5", "-1", " 1", "1 ", "../../etc", "１"]
)
def test_rejects_non_digit_project_ids(tmp_path, project):
    with pytest.raises(ValueError, match="invalid project id"):
        ProjectStore(tmp_path, project)
    assert list(tmp_path.iterdir()) == []


def test_rejects_project_id_with_trailing_newline(tmp_path):
    with pytest.raises(ValueError):
        ProjectStore(tmp_path, "12\n")


@pytest.mark.parametrize("project, name", [(7, "7"), ("7", "7"), ("0012", "12"), ("000", "0")])
def test_accepts_digit_ids_in_one_canonical_form(tmp_path, project, name):
    store = ProjectStore(tmp_path, project)
    assert store.project == name
    assert store.root == tmp_path / name


def test_new_store_has_no_version(tmp_path):
    store = ProjectStore(tmp_path, 1)
    assert store.current_version() is None
    assert store.all_versions() == []
    status = store.status()
    assert status["state"] == "idle" and status["events_since_training"] == 0
    assert status["current_version"] is None and status["project"] == "1"


def test_publish_makes_version_current(tmp_path):
    store = ProjectStore(tmp_path, 1)
    target = _build(store, _names(1), {"5": {"score": 0.25}})
    assert target == store.versions / _names(1)
    assert store.current_version() == _names(1)
    assert (store.root / "CURRENT").read_text() == _names(1)
    assert (target / "COMPLETE").is_file()
    assert store.scores(_names(1)) == {"5": {"score": 0.25}}
    assert not list(store.versions.glob(".staging-*"))  # the staging dir was moved into place

    _build(store, _names(2))
    assert store.current_version() == _names(2)
    assert store.all_versions() == [_names(1), _names(2)]
    assert store.status()["current_version"] == _names(2)


def test_publish_with_real_version_names(tmp_path):
    store = ProjectStore(tmp_path, 1)
    name = new_version_name()
    assert name.startswith("srw-") and len(name) == len("srw-20261121-164301123-1a2b3c")
    _build(store, name)
    assert store.current_version() == name


def _half_written(store: ProjectStore, name: str = "srw-99999999-999999-zzzzzz"):
    half = store.versions / name
    (half / "scout").mkdir(parents=True)
    (half / "scout" / "weights.bin").write_bytes(b"partial")
    (half / "scores.json").write_text('{"1": {"sc')
    (store.root / "CURRENT").write_text(name)
    return name


def test_half_written_version_falls_back_to_newest_complete(tmp_path):
    store = ProjectStore(tmp_path, 1)
    _build(store, _names(1))
    _build(store, _names(2))
    half = _half_written(store)
    assert not store.is_complete(half)
    assert store.current_version() == _names(2)
    assert half not in store.all_versions()
    assert store.status()["current_version"] == _names(2)


def test_half_written_version_and_nothing_complete(tmp_path):
    store = ProjectStore(tmp_path, 1)
    store.versions.mkdir(parents=True)
    _half_written(store)
    assert store.current_version() is None
    assert store.all_versions() == []


def test_current_pointing_nowhere_or_empty(tmp_path):
    store = ProjectStore(tmp_path, 1)
    _build(store, _names(1))
    (store.root / "CURRENT").write_text("srw-does-not-exist")
    assert store.current_version() == _names(1)
    (store.root / "CURRENT").write_text("")
    assert store.current_version() == _names(1)
    (store.root / "CURRENT").unlink()
    assert store.current_version() == _names(1)


def test_current_may_point_to_an_older_complete_version(tmp_path):
    store = ProjectStore(tmp_path, 1)
    _build(store, _names(1))
    _build(store, _names(2))
    (store.root / "CURRENT").write_text(_names(1) + "\n")
    assert store.current_version() == _names(1)


def test_pruning_keeps_the_last_three(tmp_path):
    assert KEEP_VERSIONS == 3
    store = ProjectStore(tmp_path, 1)
    for i in range(1, 7):
        _build(store, _names(i))
        assert len(store.all_versions()) == min(i, 3)
    assert store.all_versions() == [_names(4), _names(5), _names(6)]
    assert sorted(p.name for p in store.versions.iterdir()) == [_names(4), _names(5), _names(6)]
    assert store.current_version() == _names(6)


def test_pruning_leaves_incomplete_versions_and_fresh_staging_alone(tmp_path):
    store = ProjectStore(tmp_path, 1)
    half = store.versions / "srw-00000000-000000-aaaaaa"
    half.mkdir(parents=True)
    fresh_staging = store.staging_dir()
    for i in range(1, 6):
        _build(store, _names(i))
    assert half.is_dir()  # never served, never pruned as a complete version
    assert fresh_staging.is_dir()
    assert store.all_versions() == [_names(3), _names(4), _names(5)]


def test_pruning_removes_day_old_staging_dirs(tmp_path):
    import os
    import time

    store = ProjectStore(tmp_path, 1)
    stale = store.staging_dir()
    old = time.time() - 2 * 86400
    os.utime(stale, (old, old))
    _build(store, _names(1))
    assert not stale.exists()


def test_scores_of_missing_version_is_empty(tmp_path):
    assert ProjectStore(tmp_path, 1).scores("srw-nothing") == {}


def test_update_status_merges_and_persists(tmp_path):
    store = ProjectStore(tmp_path, 3)
    out = store.update_status(state="running", message="training")
    assert out["state"] == "running" and out["message"] == "training" and "updated_at" in out
    again = ProjectStore(tmp_path, 3).status()  # another process sees it
    assert again["state"] == "running" and again["message"] == "training"
    store.update_status(events_since_training=lambda n: (n or 0) + 5)
    assert store.status()["events_since_training"] == 5
    assert store.status()["message"] == "training"
    on_disk = json.loads((store.root / "status.json").read_text())
    assert on_disk["events_since_training"] == 5


def test_corrupt_status_file_reads_as_defaults(tmp_path):
    store = ProjectStore(tmp_path, 3)
    store.root.mkdir(parents=True)
    (store.root / "status.json").write_text("{not json")
    assert store.status()["state"] == "idle"
    assert (
        store.update_status(events_since_training=lambda n: (n or 0) + 1)["events_since_training"]
        == 1
    )


def test_update_status_concurrent_increments(tmp_path):
    threads, per_thread = 8, 50
    errors = []
    start = threading.Barrier(threads)

    def bump():
        store = ProjectStore(tmp_path, 9)  # like separate requests / workers
        try:
            start.wait()
            for _ in range(per_thread):
                store.update_status(events_since_training=lambda n: (n or 0) + 1)
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    workers = [threading.Thread(target=bump) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    assert errors == []
    assert ProjectStore(tmp_path, 9).status()["events_since_training"] == threads * per_thread
    # No temporary files left behind.
    assert sorted(p.name for p in (tmp_path / "9").iterdir()) == [".lock", "status.json"]


def test_update_status_concurrent_shared_store(tmp_path):
    store = ProjectStore(tmp_path, 10)
    workers = [
        threading.Thread(
            target=lambda: [
                store.update_status(events_since_training=lambda n: (n or 0) + 1) for _ in range(25)
            ]
        )
        for _ in range(4)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    assert store.status()["events_since_training"] == 100


def test_update_status_when_the_predicate_holds_only(tmp_path):
    store = ProjectStore(tmp_path, 1)
    store.update_status(state="running")
    kept = store.update_status(when=lambda s: s["state"] == "idle", state="failed")
    assert kept["state"] == "running" and store.status()["state"] == "running"
    changed = store.update_status(when=lambda s: s["state"] == "running", state="failed")
    assert changed["state"] == "failed" and store.status()["state"] == "failed"

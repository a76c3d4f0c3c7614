"""backend.store.store: project ids, versions that are served only when complete, pruning,
status."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from backend.store.store import KEEP_VERSIONS, ProjectStore
from backend.store.versions import new_version_name
from subregweigh.io.atomic import atomic_write_json
from tests.paths import REPO


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


def test_pruning_keeps_a_live_staging_dir_and_removes_unpublished_versions(tmp_path):
    store = ProjectStore(tmp_path, 1)
    half = store.versions / "srw-00000000-000000-aaaaaa"  # no COMPLETE: never published
    (half / "scout").mkdir(parents=True)
    fresh_staging = store.staging_dir()  # this process builds it
    for i in range(1, 6):
        _build(store, _names(i))
    assert not half.exists()
    assert fresh_staging.is_dir()
    assert store.all_versions() == [_names(3), _names(4), _names(5)]
    store.discard(fresh_staging)
    assert sorted(p.name for p in store.versions.iterdir()) == [_names(3), _names(4), _names(5)]


KILLED_WHILE_STAGING = """
import os, signal, sys
from backend.store.store import ProjectStore
staging = ProjectStore(sys.argv[1], 1).staging_dir()
(staging / "weights.bin").write_bytes(b"0" * 1_000_000)
print(staging, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_training_s_staging_dir_is_cleaned_and_a_live_one_kept(tmp_path):
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", KILLED_WHILE_STAGING, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert run.returncode == -9, run.stderr
    killed = Path(run.stdout.strip())
    assert killed.is_dir() and killed.with_name(killed.name + ".lock").exists()
    other = ProjectStore(tmp_path, 1)  # another process's view: owns nothing
    live = ProjectStore(tmp_path, 1).staging_dir()
    assert other.clean_debris() == [killed.name]
    assert not killed.exists() and not killed.with_name(killed.name + ".lock").exists()
    assert live.is_dir()  # its owner is alive


def test_a_half_removed_version_is_never_listed_and_start_up_clears_trash(tmp_path):
    store = ProjectStore(tmp_path, 1)
    for i in range(1, 3):
        _build(store, _names(i))
    # What a prune killed half-way by the old code left: COMPLETE, but files gone.
    (store.versions / _names(1) / "scout" / "weights.bin").unlink()
    # What a prune killed between its rename and its delete leaves now.
    trash = store.versions / f".trash-{_names(0)}-abc123"
    (trash / "scout").mkdir(parents=True)
    assert store.all_versions() == [_names(2)]
    assert store.clean_debris() == [trash.name]
    assert store.current_version() == _names(2)


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


def test_start_up_cleans_every_project_and_versions_lists_only_complete(tmp_path):
    from backend.config.settings import Settings
    from backend.web.server import create_app

    models = tmp_path / "models"
    store = ProjectStore(models, 4)
    _build(store, _names(1))
    _build(store, _names(2))
    (store.versions / _names(1) / "scout" / "weights.bin").unlink()  # half-pruned by old code
    unpublished = store.versions / "srw-20990101-000000000-ffffff"
    (unpublished / "scout").mkdir(parents=True)
    orphan = store.versions / ".staging-orphan"  # no owner: a killed process's
    orphan.mkdir()
    app = create_app(Settings(model_dir=str(models)))
    assert not unpublished.exists() and not orphan.exists()
    reply = app.test_client().get("/versions?project=4").get_json()
    assert reply["versions"] == [_names(2)] and reply["current"] == _names(2)


KEEP_PUBLISHING = """
import sys
from backend.store.store import ProjectStore
from tests.backend.test_backend_store import _build, _names
store = ProjectStore(sys.argv[1], 1)
i = 0
while True:  # train, publish, prune, over and over, until killed
    i += 1
    _build(store, _names(i % 90 + 1) + f"-{i:06d}", {"1": {"score": 0.5}})
"""


def test_killed_at_any_moment_of_publish_and_prune_only_complete_versions_are_listed(tmp_path):
    """SIGKILL a process that publishes and prunes versions without pause, at 12 moments of
    its loop: after each, only intact versions are listed, one of them serves, and cleaning
    leaves no staging or trash behind."""
    import random
    import signal
    import subprocess
    import sys
    import time

    rng = random.Random(7)
    for _ in range(12):
        child = subprocess.Popen(
            [sys.executable, "-c", KEEP_PUBLISHING, str(tmp_path)],
            cwd=REPO,
        )
        # Not before its first version (a loaded machine starts the child slowly), then at
        # any moment of the loop.
        deadline = time.monotonic() + 120
        while not (tmp_path / "1" / "CURRENT").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 0.5))
        child.send_signal(signal.SIGKILL)
        child.wait()
        store = ProjectStore(tmp_path, 1)
        listed = store.all_versions()
        for version in listed:
            store.verify(version)  # every file of its manifest in place
        if listed:
            assert store.current_version() in listed
        store.clean_debris()
        # No directory left; a killed child's empty lock file may stay (removed after a minute).
        left = [
            p.name
            for p in store.versions.iterdir()
            if p.name.startswith((".staging", ".trash")) and p.is_dir()
        ]
        assert left == []
    assert listed  # the loop did publish


def test_a_status_json_from_before_the_inbox_has_its_waiting_tasks_read_then_moved(tmp_path):
    """Issue 60: status.json held the inbox's keys before inbox.json. They are read as the
    inbox's, and the next write moves them there: none is lost, status.json keeps none."""
    from backend.store import inbox

    store = ProjectStore(tmp_path, 3)
    store.root.mkdir(parents=True)
    old = {"state": "idle", "events_since_training": 2, "rescore_pending": {"7": 1.0}}
    (store.root / "status.json").write_text(json.dumps(old))
    assert store.inbox().rescore_pending == {"7": 1.0}
    store.note_event("8")
    assert set(store.inbox().rescore_pending) == {"7", "8"}
    on_disk = json.loads((store.root / "status.json").read_text())
    assert on_disk["events_since_training"] == 3 and not inbox.KEYS & set(on_disk)
    assert set(store.take_inbox("rescore_pending")) == {"7", "8"}
    assert store.inbox() == inbox.Inbox()


def test_a_status_json_from_before_the_ledger_has_its_written_versions_read_then_moved(tmp_path):
    """Issue 60: status.json held ``written_versions`` before ledger.json. They are read as
    the ledger's, and the next write moves them there: none is lost, status.json keeps none,
    and the status the UI reads shows neither the ledger nor the inbox."""
    from backend.store import inbox, ledger

    store = ProjectStore(tmp_path, 3)
    store.root.mkdir(parents=True)
    old = {"state": "idle", "written_versions": ["srw-1", "srw-2"], "slips_pending": {"a": 1}}
    (store.root / "status.json").write_text(json.dumps(old))
    assert store.ledger().written_versions == ("srw-1", "srw-2")
    assert not (ledger.KEYS | inbox.KEYS) & set(store.status())
    store.update_ledger(lambda written: written.written("srw-3"))
    on_disk = json.loads((store.root / "status.json").read_text())
    assert on_disk["state"] == "idle" and not (ledger.KEYS | inbox.KEYS) & set(on_disk)
    assert json.loads((store.root / "ledger.json").read_text()) == {
        "written_versions": ["srw-1", "srw-2", "srw-3"]
    }
    assert store.inbox().slips_pending == {"a": 1}
    assert store.ledger().superseded_by("srw-3") == ["srw-1", "srw-2"]
    assert store.ledger().superseded_by("srw-9") == []
    with pytest.raises(ValueError, match="update_ledger"):
        store.update_status(written_versions=[])  # the ledger has one way in
    with pytest.raises(ValueError, match="not the inbox's: state"):
        store.take_inbox("state")


def test_the_ledger_keeps_the_newest_written_versions(tmp_path):
    """The ledger keeps the last KEPT versions written; a version written again (served again
    after a broken one) supersedes those between its writes."""
    from backend.store.ledger import KEPT, Ledger

    store = ProjectStore(tmp_path, 4)
    for n in range(KEPT + 5):
        store.update_ledger(lambda written, n=n: written.written(f"srw-{n:03d}"))
    written = store.ledger().written_versions
    assert len(written) == KEPT and written[0] == "srw-005" and written[-1] == f"srw-{KEPT + 4:03d}"
    again = Ledger(("a", "b", "a", "c")).written("b")
    assert again.superseded_by("b") == ["a", "c"] and again.without({"a"}).written_versions == (
        "b",
        "c",
        "b",
    )

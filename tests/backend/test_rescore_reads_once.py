"""One rescore job (backend.jobs.rescore) reads its project once: the tasks its webhooks named are
parsed once (shared by the snapshot, the decisions, the changed-labels check and the scores:
:class:`backend.serving.changed.ChangedTasks`), and the project's settings are derived once.
Label Studio is a double answering what the rescore asks (the same count against the real
Label Studio, with a refresh, is tests/labelstudio/test_refresh.py); the version, its stored
scores, the parser, the decisions and the served scores are the real ones."""

from __future__ import annotations

import json
import time

from backend.config import project_settings
from backend.jobs import rescore
from backend.labelstudio import tasks as task_reading
from backend.review import reviews
from backend.store import inbox
from backend.store.store import ProjectStore
from tests.backend.test_backend_server import NER_CONFIG
from tests.backend.test_reviews import (
    MERKEL_LOC,
    MERKEL_PER,
    PROJECT,
    _at,
    _decide,
    _publish,
    _task,
)
from tests.doubles import offline_settings

# The tasks as the version scored them, and as Label Studio now lists them: task 1 confirmed by
# a reviewer (saved again, labels unchanged), task 3 as it was.
SCORED = [
    _task(1, [(11, MERKEL_PER)]),
    _task(2, [(21, MERKEL_PER)]),
    _task(3, [(31, MERKEL_PER), (32, MERKEL_PER)]),
]
NOW = {1: _task(1, [(11, MERKEL_PER, _at(5))]), 3: SCORED[2]}


class _LabelStudio:
    """What a rescore asks Label Studio, answered from :data:`NOW`; the predictions it writes
    are kept in ``written``."""

    written: list = []

    def __init__(self, url=None, api_key=None, **kwargs):
        pass

    def label_config(self, project: int) -> str:
        return NER_CONFIG

    def project_tasks(self, project: int, ids) -> list[dict]:
        return [NOW[i] for i in ids if i in NOW]

    def users(self) -> dict:
        return {}

    def replace_predictions(self, project: int, predictions: list) -> None:
        type(self).written.extend(predictions)


def count_parses(monkeypatch) -> list[list[int]]:
    """The ids of the tasks of each call of the backend's task parser, as the calls come."""
    parsed: list[list[int]] = []
    parse = task_reading.parse_tasks
    monkeypatch.setattr(
        task_reading,
        "parse_tasks",
        lambda tasks, *a, **kw: parsed.append([t["id"] for t in tasks]) or parse(tasks, *a, **kw),
    )
    return parsed


def test_a_rescore_parses_each_task_once_and_derives_the_settings_once(tmp_path, monkeypatch):
    settings = offline_settings(tmp_path / "models", retrain_after=1000)
    _publish(tmp_path / "models", SCORED, {1: [0.1], 2: [0.2], 3: [0.3, 0.9]})
    store = ProjectStore(settings.model_dir, PROJECT)
    store.replace_overrides({"self_review": True})  # the project's own settings, to derive
    store.update_status(rescore_pending={"1": time.time(), "3": time.time()})

    parsed = count_parses(monkeypatch)
    derived: list[str] = []
    effective = project_settings.effective
    monkeypatch.setattr(
        project_settings,
        "effective",
        lambda s, st: derived.append(st.project) or effective(s, st),
    )
    monkeypatch.setattr(rescore, "LabelStudioAPI", type("LS", (_LabelStudio,), {"written": []}))

    done = rescore.rescore_project(str(PROJECT), settings)

    assert done["rescored"] == 2
    assert parsed == [[1, 3]]  # one parse, one entry per task
    assert derived == [str(PROJECT)]
    written = {p["task"]: p["score"] for p in rescore.LabelStudioAPI.written}
    assert written == {1: 1.0, 3: 0.3}  # the confirmation serves score 1
    assert reviews.load(store)["decisions"]["1/11"]["decision"] == "confirmed"


def test_the_slips_a_rescore_s_decisions_move_reach_their_repeats_not_the_status(
    tmp_path, monkeypatch
):
    """Issue 60: the decisions queued their slips in status.json and the same rescore read them
    back. Task 2 was fixed (Merkel PER -> LOC) before; the rescore of task 1, confirmed as PER,
    weighs against that slip: its repeats (task 3 and task 2's stored annotation) are
    rewritten as served, from the slips the decisions handed back, and the status carries
    none."""
    settings = offline_settings(tmp_path / "models", retrain_after=1000)
    _publish(tmp_path / "models", SCORED, {1: [0.1], 2: [0.2], 3: [0.3, 0.9]})
    store = ProjectStore(settings.model_dir, PROJECT)
    assert _decide(store, _task(2, [(21, MERKEL_LOC, _at(4))])) == {"2/21": "fixed"}
    assert not store.inbox().slips_pending  # a decision queues nothing there
    store.update_status(rescore_pending={"1": time.time()})
    monkeypatch.setattr(rescore, "LabelStudioAPI", type("LS", (_LabelStudio,), {"written": []}))

    assert rescore.rescore_project(str(PROJECT), settings)["rescored"] == 1

    written = [p["task"] for p in rescore.LabelStudioAPI.written]
    assert written[0] == 1 and sorted(written[1:]) == [2, 3]  # the repeats, after the task
    assert not store.inbox().slips_pending


def test_what_waits_is_in_the_inbox_and_status_json_carries_none_of_it(tmp_path, monkeypatch):
    """Issue 60: status.json held the job inbox beside the UI status. After an annotation event
    (the task waits for its rescore), a review and the rescore that reads it, status.json holds
    no inbox key; what waits is in inbox.json, read as a typed Inbox."""
    settings = offline_settings(tmp_path / "models", retrain_after=1000)
    _publish(tmp_path / "models", SCORED, {1: [0.1], 2: [0.2], 3: [0.3, 0.9]})
    store = ProjectStore(settings.model_dir, PROJECT)
    store.note_event("1")
    store.note_event("3")
    on_disk = json.loads((store.root / "status.json").read_text())
    assert on_disk["events_since_training"] == 2 and not inbox.KEYS & set(on_disk)
    assert set(store.inbox().rescore_pending) == {"1", "3"}
    assert set(json.loads((store.root / "inbox.json").read_text())) == {"rescore_pending"}
    monkeypatch.setattr(rescore, "LabelStudioAPI", type("LS", (_LabelStudio,), {"written": []}))

    assert rescore.rescore_project(str(PROJECT), settings)["rescored"] == 2

    assert reviews.load(store)["decisions"]["1/11"]["decision"] == "confirmed"
    on_disk = json.loads((store.root / "status.json").read_text())
    assert "last_rescore" in on_disk and not inbox.KEYS & set(on_disk)
    assert store.inbox() == inbox.Inbox()  # nothing waits: the rescore took its tasks

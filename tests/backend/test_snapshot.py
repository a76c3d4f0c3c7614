"""backend.store.snapshot: the annotated tasks as last read, which a refresh trains on instead of
reading the whole project (the refresh through a real Label Studio:
tests/labelstudio/test_refresh.py)."""

from __future__ import annotations

import pytest

from backend.labelstudio.tasks import parse_label_config, read_tasks
from backend.store import snapshot
from backend.store.store import ProjectStore
from tests.backend.test_backend_server import NER_CONFIG
from tests.backend.test_refresh import _task

SPEC = parse_label_config(NER_CONFIG)


def _unannotated(task_id: int, text: str) -> dict:
    return {**_task(task_id, text, []), "annotations": []}


def _by(task: dict, who: int) -> dict:
    """``task`` with its annotation made by user ``who``, named as the backend names them."""
    user = {"id": who, "email": f"user{who}@example.com"}
    return {**task, "annotations": [{**a, "completed_by": user} for a in task["annotations"]]}


def _items(*tasks: dict):
    return [item for item in read_tasks(list(tasks), SPEC).tasks if item]


MERKEL_PER = _task(1, "Angela Merkel spoke", [(0, 13, "PER")])
MERKEL_LOC = _task(1, "Angela Merkel spoke", [(0, 13, "LOC")])
PARIS = _task(2, "in Paris today", [(3, 8, "LOC")])
BERLIN = _task(3, "to Berlin", [(3, 9, "LOC")])


@pytest.fixture
def store(tmp_path):
    return ProjectStore(tmp_path / "models", 5)


def _labels(store) -> dict[str, tuple]:
    return {item.id: item.examples[0].label for item in snapshot.load(store)}


def test_a_project_read_comes_back_as_read(store):
    assert snapshot.load(store) is None  # nothing kept: the refresh reads the project
    items = _items(_by(MERKEL_PER, 7), PARIS, _unannotated(4, "unannotated"))
    snapshot.keep_project(store, items, read_at=1.0)
    kept = snapshot.load(store)
    assert kept == [i for i in items if i.examples]  # the annotated ones, in task order
    assert [ex.annotator for i in kept for ex in i.examples] == ["user7@example.com", ""]


def test_a_rescore_updates_its_tasks_and_drops_the_gone_and_unannotated(store):
    snapshot.keep_tasks(store, ["1"], _items(MERKEL_LOC), read_at=2.0)
    assert snapshot.load(store) is None  # no project read to update
    snapshot.keep_project(store, _items(MERKEL_PER, PARIS, BERLIN), read_at=1.0)
    # task 1 retyped; task 2 asked for and not returned (deleted, or moved to another project);
    # task 3's annotation deleted
    snapshot.keep_tasks(store, [1, 2, 3], _items(MERKEL_LOC, _unannotated(3, "to Berlin")), 2.0)
    assert _labels(store) == {"1": ("B-LOC", "I-LOC", "O")}


def test_the_newest_read_of_a_task_wins(store):
    snapshot.keep_project(store, _items(MERKEL_PER, PARIS), read_at=1.0)
    snapshot.keep_tasks(store, [1], _items(MERKEL_LOC), read_at=3.0)
    # a training's read that started before the rescore's keeps the rescore's task 1
    snapshot.keep_project(store, _items(MERKEL_PER, PARIS, BERLIN), read_at=2.0)
    assert _labels(store) == {
        "1": ("B-LOC", "I-LOC", "O"),
        "2": ("O", "B-LOC", "O"),
        "3": ("O", "B-LOC"),
    }
    # one that started after it replaces everything
    snapshot.keep_project(store, _items(MERKEL_PER), read_at=4.0)
    assert _labels(store) == {"1": ("B-PER", "I-PER", "O")}


def test_nothing_is_kept_beyond_what_a_refresh_trains_on(store, monkeypatch):
    monkeypatch.setattr("subregweigh.crf.CRF_FIRST_EXAMPLES", 2)
    snapshot.keep_project(store, _items(MERKEL_PER, PARIS), read_at=1.0)
    assert len(snapshot.load(store)) == 2
    snapshot.keep_tasks(store, [3], _items(BERLIN), read_at=2.0)  # a third annotation
    assert snapshot.load(store) is None
    snapshot.keep_project(store, _items(MERKEL_PER, PARIS, BERLIN), read_at=3.0)
    assert snapshot.load(store) is None


def test_a_forgotten_or_damaged_snapshot_reads_as_none(store):
    snapshot.keep_project(store, _items(MERKEL_PER), read_at=1.0)
    snapshot.forget(store)
    assert snapshot.load(store) is None
    snapshot.keep_project(store, _items(MERKEL_PER), read_at=1.0)
    (store.root / snapshot.FILE).write_text('{"tasks": {"1": {"text": 3')
    assert snapshot.load(store) is None
    # and a damaged one is replaced by the next project read, not updated
    snapshot.keep_tasks(store, [1], _items(MERKEL_LOC), read_at=2.0)
    assert snapshot.load(store) is None
    (store.root / snapshot.FILE).write_text('{"tasks": [1]}')  # JSON, not what was written
    snapshot.keep_tasks(store, [1], _items(MERKEL_LOC), read_at=2.0)
    assert snapshot.load(store) is None
    snapshot.keep_project(store, _items(MERKEL_LOC), read_at=3.0)
    assert _labels(store) == {"1": ("B-LOC", "I-LOC", "O")}


def test_each_control_of_several_keeps_its_own_reading(store):
    """Issue 62: a project weighing several labeling controls keeps each NER control's
    reading apart (names of any characters), updated and forgotten on its own; a forget of
    the whole project drops every control's."""
    first, second = "title label", "body: label"
    snapshot.keep_project(store, _items(MERKEL_PER, PARIS), 1.0, control=first)
    snapshot.keep_project(store, _items(BERLIN), 1.0, control=second)
    assert snapshot.path(store, first) != snapshot.path(store, second) != snapshot.path(store)
    snapshot.keep_tasks(store, ["1"], _items(MERKEL_LOC), 2.0, control=first)
    assert [ex.label for t in snapshot.load(store, first) for ex in t.examples] == [
        ("B-LOC", "I-LOC", "O"),
        ("O", "B-LOC", "O"),
    ]
    assert [t.id for t in snapshot.load(store, second)] == ["3"]
    assert snapshot.load(store) is None  # a project of one control's: none kept
    snapshot.forget(store, second)
    assert snapshot.load(store, second) is None and snapshot.load(store, first) is not None
    snapshot.keep_project(store, _items(PARIS), 3.0)
    snapshot.forget(store)
    assert snapshot.load(store, first) is None and snapshot.load(store) is None

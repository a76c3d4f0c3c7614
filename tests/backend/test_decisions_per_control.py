"""Decisions keep the control (issue 62): a project weighing several labeling controls (here a
``<Labels name="ner">`` and a ``<Choices name="topic">`` on one text) keeps a record per
annotation and control, and a reviewer's save is judged per control (backend.review.decisions,
backend.review.reviews, backend.review.served).

* A save: the controls whose labels it changed are fixed, the others confirmed.
* The review control: *correct* confirms every control's record, *wrong (fixed)* fixes those
  whose labels changed against what was scored and confirms the others.
* Served: a task whose every control is confirmed serves 1; one with a control fixed by a save
  serves as a fix does (the lowest record's score, the confirmed one at 1).
* The report counts decisions per control; a decision kept before decisions named their
  control reads as the first control's.

Tasks are dicts as Label Studio 1.23 returns them (each annotation with ``updated_at``,
``completed_by`` and ``updated_by``); the version is stored as a training of several controls
stores it (the real parser, record writer and :func:`backend.serving.controls.merge_entries`).
The real Label Studio round trip is tests/labelstudio/test_team_configs_ls.py's.
"""

from __future__ import annotations

import html
import json
import re

import pytest

from backend.config.settings import Settings
from backend.labelstudio.tasks import (
    TaskRead,
    parse_label_config,
    read_tasks,
)
from backend.review import reviews
from backend.review.decisions import content_hash
from backend.serving.controls import merge_entries
from backend.serving.publish import version_meta
from backend.serving.report import annotation_records, project_report, render
from backend.store.store import ProjectStore
from subregweigh.io.atomic import atomic_write_json
from subregweigh.io.labelstudio import REVIEW_CONTROL, review_control_xml
from tests.backend.test_label_configs import stored_entries
from tests.backend.test_reviews import _at
from tests.backend.test_reviews import _region as labels_region

TEXT = "Merkel won the cup in Paris ."
NER_AND_TOPIC = (
    '<View><Labels name="ner" toName="text"><Label value="PER"/><Label value="LOC"/></Labels>'
    '<Text name="text" value="$text"/>'
    '<Choices name="topic" toName="text" choice="single"><Choice value="sport"/>'
    '<Choice value="other"/></Choices>{review}</View>'
)
SCORED_AT = "2026-01-01T10:00:00.000000Z"  # when Label Studio last saved what was scored
VERSION = "srw-20260101-000000000-cccccc"
PROJECT = 12
# task -> (ner's score, topic's score), as each control's scout stored them
SCORES = {1: (0.6, 0.2), 2: (0.3, 0.7), 3: (0.4, 0.5)}


def _region(start, end, label):
    return labels_region(start, end, label, "ner", TEXT)


def _choice(control, value):
    return {
        "id": control,
        "from_name": control,
        "to_name": "text",
        "type": "choices",
        "value": {"choices": [value]},
    }


ENTITIES = [_region(0, 6, "PER"), _region(22, 27, "LOC")]
SPORT, OTHER = _choice("topic", "sport"), _choice("topic", "other")


def _task(task_id, result, saved=SCORED_AT, by=5):
    """Task ``task_id`` with one annotation, ``task_id * 10 + 1``, made by user 4 and last saved
    by user ``by`` at ``saved``."""
    return {
        "id": task_id,
        "data": {"text": f"{TEXT} {task_id}"},  # texts of their own: no copies
        "annotations": [
            {
                "id": task_id * 10 + 1,
                "result": result,
                "updated_at": saved,
                "completed_by": 4,
                "updated_by": by,
            }
        ],
    }


def _entries(control, tasks, which: int, scores=SCORES) -> dict:
    """One control's stored entries of ``tasks``, each at its ``scores`` (``which``: the
    control's place), as a training of that control stores them."""
    return stored_entries(control, tasks, lambda task: scores[int(task)][which])


def _publish(model_dir, spec) -> ProjectStore:
    """A version of both controls of tasks 1 to 3 (each annotated: Merkel PER, Paris LOC,
    sport), stamped with the times Label Studio saved them, as a training stores it."""
    tasks = [_task(t, [*ENTITIES, SPORT]) for t in SCORES]
    merged = merge_entries(
        spec, [_entries(control, tasks, i) for i, control in enumerate(spec.each())]
    )
    reviews.stamp_saved(merged, reviews.saved_times(tasks))
    store = ProjectStore(model_dir, PROJECT)
    staging = store.staging_dir()
    atomic_write_json(staging / "scores.json", merged)
    items = [i for i in read_tasks(tasks, spec).tasks if i]
    meta = version_meta(VERSION, spec, Settings(model_dir=str(model_dir)), items, len(items))
    meta["weighers"] = [
        {"control": "ner", "type": "Labels", "folder": "controls/0", "learned": None},
        {"control": "topic", "type": "Choices", "folder": "controls/1", "learned": None},
    ]
    atomic_write_json(staging / "meta.json", meta)
    store.publish(staging, VERSION)
    return store


def _rescore(spec, store, task: dict, scores: tuple[float, float]) -> None:
    """What the rescore after a save stores of ``task`` (as Label Studio holds it now): each
    control's record of it at ``scores``, its baseline the save."""
    per_control = [
        _entries(control, [task], i, {task["id"]: scores}) for i, control in enumerate(spec.each())
    ]
    fresh = merge_entries(spec, per_control)
    reviews.stamp_saved(fresh, reviews.saved_times([task]))
    store.store_scores(VERSION, fresh)


@pytest.fixture
def by_save(tmp_path):
    spec = parse_label_config(NER_AND_TOPIC.format(review=""))
    assert [c.from_name for c in spec.each()] == ["ner", "topic"] and spec.review is None
    return spec, _publish(tmp_path, spec)


@pytest.fixture
def by_control(tmp_path):
    spec = parse_label_config(NER_AND_TOPIC.format(review=review_control_xml("text")))
    assert [c.from_name for c in spec.each()] == ["ner", "topic"] and spec.review
    return spec, _publish(tmp_path, spec)


def _decide(spec, store, *tasks) -> dict:
    """What the rescore does with ``tasks`` read from Label Studio."""
    return reviews.decide(store, store.current_version(), spec, TaskRead.of(tasks, spec))


def _served(store) -> dict:
    version = store.current_version()
    return reviews.served_scores(
        store, store.scores(version), reviews.version_scales(store, version)
    )


def _decisions(store) -> dict:
    return reviews.load(store)["decisions"]


def _reviewed(review: dict) -> tuple:
    """``(decided, confirmed, fixed)`` over every decided task of a report's reviews."""
    return review["all"]["reviewed"], review["all"]["confirmed"], review["all"]["fixed"]


# ----------------------------------------------------------------------------- saves


def test_a_save_fixes_the_control_it_changed_and_confirms_the_others(by_save):
    spec, store = by_save
    assert _served(store)["1"]["score"] == 0.2  # the task at its topic's score
    # task 1: the reviewer (user 5; the annotator is user 4) sets the topic to other and saves
    assert _decide(spec, store, _task(1, [*ENTITIES, OTHER], _at(5))) == {
        "1/11/ner": "confirmed",
        "1/11/topic": "fixed",
    }
    kept = _decisions(store)
    fix, held = kept["1/11/topic"], kept["1/11/ner"]
    assert (fix["control"], fix["decision"], fix["fixed"], fix["labels"]) == (
        "topic",
        "fixed",
        True,
        ["sport"],  # what was scored
    )
    assert (held["control"], held["decision"], held["fixed"]) == ("ner", "confirmed", False)
    assert [h[3:] for h in reviews.load(store)["history"]] == [
        ["confirmed", "user 5", "ner"],
        ["fixed", "user 5", "topic"],
    ]
    # served as a fix is: the topic rescored like every change, the labels held at 1
    served = _served(store)["1"]
    assert (served["score"], served["confirmed"]) == (0.2, 1)
    records = {
        r["control"]: r["score"]
        for r in annotation_records(
            {"1": store.scores(VERSION)["1"]}, reviews.confirmed_keys(store)
        )
    }
    assert records == {"ner": 1.0, "topic": 0.2}
    # rescored: the fixed topic at its new score, the labels still confirmed (unchanged)
    _rescore(spec, store, _task(1, [*ENTITIES, OTHER], _at(5)), (0.65, 0.9))
    served = _served(store)["1"]
    assert (served["score"], served["confirmed"]) == (0.9, 1)
    assert _decide(spec, store, _task(1, [*ENTITIES, OTHER], _at(5))) == {}  # read again

    # task 2: saved unchanged, each control's record confirmed; the task serves 1 and shows
    # every control's own regions, each note naming its control
    assert _decide(spec, store, _task(2, [*ENTITIES, SPORT], _at(6))) == {
        "2/21/ner": "confirmed",
        "2/21/topic": "confirmed",
    }
    served = _served(store)["2"]
    assert (served["score"], served["confirmed"]) == (1.0, 2)
    shown = served["result"]
    assert [r["from_name"] for r in shown] == ["ner", "ner", "topic"]
    assert shown[2]["value"] == {"choices": ["sport"]}
    assert [r["meta"]["text"][0].split(" by ")[0] for r in shown] == [
        "ner: confirmed",
        "ner: confirmed",
        "topic: confirmed",
    ]
    assert _served(store)["3"]["score"] == 0.4  # undecided: as stored


def test_a_replayed_save_or_one_without_a_named_saver_decides_no_control(by_save):
    spec, store = by_save
    assert _decide(spec, store, _task(1, [*ENTITIES, OTHER])) == {}  # not saved since scored
    assert _decide(spec, store, _task(1, [*ENTITIES, OTHER], _at(5), by=None)) == {}
    assert _decide(spec, store, _task(1, [*ENTITIES, OTHER], _at(5))) == {
        "1/11/ner": "confirmed",
        "1/11/topic": "fixed",
    }
    assert _decide(spec, store, _task(1, [*ENTITIES, OTHER], _at(5))) == {}  # read again


# ----------------------------------------------------------------------------- the control


def test_correct_confirms_every_control_and_wrong_fixed_fixes_the_changed_ones(by_control):
    spec, store = by_control
    chose = {value: _choice(REVIEW_CONTROL, value) for value in ("correct", "wrong (fixed)")}
    # the annotator's own plain save is an edit: no control decided (another user's would fix
    # the topic alone, as a plain save of a project of one control does)
    assert _decide(spec, store, _task(1, [*ENTITIES, OTHER], _at(3), by=4)) == {}
    # wrong (fixed) with the topic changed: the topic fixed, the labels confirmed
    fixed = _task(1, [*ENTITIES, OTHER, chose["wrong (fixed)"]], _at(5))
    assert _decide(spec, store, fixed) == {"1/11/ner": "confirmed", "1/11/topic": "fixed"}
    kept = _decisions(store)
    assert kept["1/11/topic"]["by"] == kept["1/11/ner"]["by"] == "control"
    assert kept["1/11/topic"]["fixed"] and not kept["1/11/ner"]["fixed"]
    assert (kept["1/11/topic"]["chosen"], kept["1/11/ner"]["chosen"]) == ("fixed", "confirmed")
    # a fix through the control vouches for what it now holds: once rescored (the topic's
    # record holds the fix), every control served at 1
    assert _served(store)["1"]["score"] == 0.2  # the rescore has not stored the fix yet
    _rescore(spec, store, fixed, (0.6, 0.3))
    served = _served(store)["1"]
    assert (served["score"], served["confirmed"]) == (1.0, 2)
    assert [r["from_name"] for r in served["result"]] == ["ner", "ner", "topic"]
    assert served["result"][2]["value"] == {"choices": ["other"]}  # the fix, not the scout's
    assert served["result"][2]["meta"]["text"][0].startswith("topic: fixed by user 5")
    # correct: every control's record confirmed
    assert _decide(spec, store, _task(2, [*ENTITIES, SPORT, chose["correct"]], _at(6))) == {
        "2/21/ner": "confirmed",
        "2/21/topic": "confirmed",
    }
    assert _served(store)["2"]["score"] == 1.0
    # wrong (fixed) where no control's labels changed: nothing says which was wrong, the
    # choice stands for each (as for a project of one control)
    unchanged = _task(3, [*ENTITIES, SPORT, chose["wrong (fixed)"]], _at(7))
    assert _decide(spec, store, unchanged) == {"3/31/ner": "fixed", "3/31/topic": "fixed"}
    # the choice cleared: every control's decision withdrawn
    assert _decide(spec, store, _task(3, [*ENTITIES, SPORT], _at(8))) == {
        "3/31/ner": "withdrawn",
        "3/31/topic": "withdrawn",
    }
    assert "3/31/ner" not in _decisions(store) and _served(store)["3"]["score"] == 0.4


# ----------------------------------------------------------------------------- the report


def test_the_report_counts_each_controls_decisions_and_reviewers(by_save):
    spec, store = by_save
    _decide(spec, store, _task(1, [*ENTITIES, OTHER], _at(5)))  # topic fixed, labels confirmed
    _decide(spec, store, _task(2, [*ENTITIES, SPORT], _at(6), by=6))  # both confirmed
    inputs = reviews.review_inputs(store, "topic", "ner")
    assert (inputs["tasks"], inputs["fixed"], inputs["labels"]) == (
        ["1", "2"],
        [True, False],
        [["sport"], ["sport"]],
    )
    assert inputs["decisions"]["item"] == ["1/11/topic", "2/21/topic"]
    assert reviews.review_inputs(store, "ner", "ner")["fixed"] == [False, False]
    assert len(reviews.review_inputs(store)["decisions"]["item"]) == 4  # every control's

    report = project_report(Settings(model_dir=str(store.root.parent)), str(PROJECT))
    parts = {p["control"]: p["report"]["reviews"] for p in report["per_control"]}
    assert _reviewed(parts["ner"]) == (2, 2, 0)
    assert _reviewed(parts["topic"]) == (2, 1, 1)
    assert _reviewed(report["reviews"]) == (2, 2, 0)  # the page's: the first control's
    page = " ".join(html.unescape(render(report, str(PROJECT))).split())
    assert "the most doubtful tasks are the first control's ('ner')" in page
    # each control's decisions on the page, under its name: the topic's fix among them
    for i, name in enumerate(("'ner' (Labels)", "'topic' (Choices)"), 1):
        assert f"decisions say about the flags, control {name}" in page
        assert f'id="reviewers-{i}"' in page
    assert 'id="reviews"' not in page
    # the one flag each control's decisions reviewed: the labels' confirmed, the topic's fixed
    flags = re.findall(r"\d+ fixed of \d+ reviewed", page)
    assert flags == ["0 fixed of 1 reviewed", "1 fixed of 1 reviewed"]
    by_reviewer = {r["reviewer"]: r for r in parts["topic"]["reviewers"]}
    assert (by_reviewer["user 5"]["fixed"], by_reviewer["user 6"]["confirmed"]) == (1, 1)
    # the annotations as served: task 1's labels confirmed (1), its topic as stored
    served = {
        (p["control"], a["task"]): a["score"]
        for p in report["per_control"]
        for a in p["report"]["annotations"]
    }
    assert (served[("ner", "1")], served[("topic", "1")]) == (1.0, 0.2)


# ----------------------------------------------------------------------------- earlier files


def _earlier_decision(store, task: int, decision: str = "confirmed") -> None:
    """reviews.json as a backend kept it before decisions named their control: judged on the
    first control's labels, keyed by the annotation alone."""
    record = next(
        r for r in store.scores(VERSION)[str(task)]["annotations"] if r["control"] == "ner"
    )
    key = f"{task}/{task * 10 + 1}"
    kept = {
        "decisions": {
            key: {
                "decision": decision,
                "by": "save",
                "task": str(task),
                "annotation": str(task * 10 + 1),
                "hash": content_hash(record),
                "saved_at": _at(2),
                "reviewer": "user 5",
                "score": record["score"],
                "labels": ["LOC", "PER"],
                "version": VERSION,
                "fixed": False,
                "reviewers": {"user 5": decision},
                "at": 1.0,
                "last_at": 1.0,
                "count": 1,
            }
        },
        "history": [[1.0, str(task), str(task * 10 + 1), decision, "user 5"]],
    }
    (store.root / "reviews.json").write_text(json.dumps(kept))


def test_a_decision_kept_without_its_control_is_the_first_controls(by_save):
    spec, store = by_save
    _earlier_decision(store, 2)
    # served: the labels confirmed, the topic as stored; the report counts it for the labels
    served = _served(store)["2"]
    assert (served["score"], served["confirmed"]) == (0.7, 1)
    assert reviews.review_inputs(store, "ner", "ner")["tasks"] == ["2"]
    assert reviews.review_inputs(store, "topic", "ner") is None
    # the next save of it is judged from it, and moves it under its control's key
    assert _decide(spec, store, _task(2, [*ENTITIES, OTHER], _at(6))) == {
        "2/21/ner": "confirmed",
        "2/21/topic": "fixed",
    }
    kept = _decisions(store)
    assert sorted(kept) == ["2/21/ner", "2/21/topic"]
    assert kept["2/21/ner"]["count"] == 2 and kept["2/21/ner"]["at"] == 1.0  # carried on


def test_an_earlier_decision_is_read_again_unchanged(by_save):
    """A save replayed after an upgrade finds the decision it made and decides nothing new."""
    spec, store = by_save
    _earlier_decision(store, 2)
    kept = _decisions(store)
    kept["2/21"]["saved_at"] = _at(6)
    (store.root / "reviews.json").write_text(json.dumps({"decisions": kept, "history": []}))
    decided = _decide(spec, store, _task(2, [*ENTITIES, SPORT], _at(6)))
    assert "2/21/ner" not in decided  # the labels' save was decided already
    assert decided == {"2/21/topic": "confirmed"}  # the topic was never judged before


def test_a_control_named_with_a_colon_is_no_earlier_layout(tmp_path):
    """Keys of the layout before one decision per annotation began with the decision
    (``"confirmed:1/11/<hash>"``); a control's key begins with its task, whatever its name."""
    store = ProjectStore(tmp_path, PROJECT)
    store.root.mkdir(parents=True)
    decision = {"task": "1", "annotation": "11", "control": "doc:topic", "decision": "fixed"}
    (store.root / "reviews.json").write_text(
        json.dumps({"decisions": {"1/11/doc:topic": decision}, "history": []})
    )
    assert reviews.load(store)["decisions"] == {"1/11/doc:topic": decision}

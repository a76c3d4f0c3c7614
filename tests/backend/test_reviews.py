"""backend.reviews through the Flask app's /webhook: a reviewer confirms an annotation (saved
with its labels unchanged) or fixes it (changed); decisions are kept per task, annotation and
content, served as score 1 until the annotation changes; bad events and concurrent reviewers
lose nothing and never fail the webhook. The version is published with stored scores made by
the real parser and record writer; no scout is needed to judge a decision (the real Label
Studio round trip, with trainings, is tests/labelstudio/test_review_decisions.py)."""

from __future__ import annotations

import json
import logging
import threading

import pytest

from backend import reviews
from backend.report import annotation_records
from backend.store import ProjectStore
from backend.tasks import annotation_record, fingerprint, parse_label_config, read_tasks
from subregweigh.io.atomic import atomic_write_json
from tests.backend.test_backend_server import GOOD, NER_CONFIG, make_app

SPEC = parse_label_config(NER_CONFIG)
TEXT = "Angela Merkel visited Zürich ."
PROJECT = 7


def _region(start, end, label):
    return {
        "id": f"r{start}",
        "from_name": "label",
        "to_name": "text",
        "type": "labels",
        "value": {"start": start, "end": end, "text": TEXT[start:end], "labels": [label]},
    }


MERKEL_PER = [_region(0, 13, "PER"), _region(22, 28, "LOC")]
MERKEL_LOC = [_region(0, 13, "LOC"), _region(22, 28, "LOC")]


def _task(task_id: int, annotations: list[tuple[int, list]]) -> dict:
    return {
        "id": task_id,
        "data": {"text": TEXT},
        "annotations": [{"id": a, "result": r} for a, r in annotations],
    }


def _publish(model_dir, tasks: list[dict], scores: dict[int, list[float]]) -> str:
    """A version whose scores.json holds ``tasks``' annotations with the given scores."""
    store = ProjectStore(model_dir, PROJECT)
    table = {}
    for item, task in zip(read_tasks(tasks, SPEC).tasks, tasks):
        records = [
            annotation_record(ex, "ner", s, {}, 0)
            for ex, s in zip(item.examples, scores[task["id"]])
        ]
        table[item.id] = {
            "result": [{**MERKEL_LOC[0], "meta": {"text": ["annotated as PER (p 0.10)"]}}],
            "score": min(scores[task["id"]]),
            "fingerprint": fingerprint(item),
            "annotations": records,
        }
    staging = store.staging_dir()
    atomic_write_json(staging / "scores.json", table)
    store.publish(staging, "srw-20260101-000000000-aaaaaa")
    return "srw-20260101-000000000-aaaaaa"


def _updated(task_id: int, annotation_id: int, result: list, **overrides) -> dict:
    """Label Studio's ANNOTATION_UPDATED webhook (the fields the backend reads)."""
    body = {
        "action": "ANNOTATION_UPDATED",
        "project": {"id": PROJECT, "label_config": NER_CONFIG},
        "task": {"id": task_id, "data": {"text": TEXT}},
        "annotation": {"id": annotation_id, "task": task_id, "result": result},
    }
    body.update(overrides)
    return body


@pytest.fixture
def project(tmp_path):
    app, client, _ = make_app(tmp_path, retrain_after=1000)
    _publish(
        tmp_path / "models",
        [
            _task(1, [(11, MERKEL_PER)]),
            _task(2, [(21, MERKEL_PER)]),
            _task(3, [(31, MERKEL_PER), (32, MERKEL_PER)]),
        ],
        {1: [0.1], 2: [0.2], 3: [0.3, 0.9]},
    )
    return client, ProjectStore(tmp_path / "models", PROJECT)


def _post(client, body):
    response = client.post("/webhook", json=body, headers=GOOD)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def _served(store: ProjectStore) -> dict:
    version = store.current_version()
    return reviews.served(store, store.scores(version))


def test_a_confirmation_serves_score_one_until_the_annotation_changes(project):
    client, store = project
    assert _post(client, _updated(1, 11, MERKEL_PER))["review"] == "confirmed"
    served = _served(store)
    assert served["1"]["score"] == 1.0 and served["2"]["score"] == 0.2
    assert served["1"]["result"][0]["meta"] == {"text": [reviews.CONFIRMED_NOTE]}
    assert store.scores(store.current_version())["1"]["score"] == 0.1  # stored: the scout's
    # Kept on disk (it survives restarts and retrains), keyed by task, annotation and content.
    kept = json.loads((store.root / "reviews.json").read_text())["decisions"]
    (decision,) = kept.values()
    assert decision["decision"] == "confirmed" and decision["score"] == 0.1
    assert (decision["task"], decision["annotation"], decision["labels"]) == (
        "1",
        "11",
        ["LOC", "PER"],
    )
    # The same annotation with other labels is not confirmed: an edit undoes the confirmation.
    edited = {
        **store.scores(store.current_version())["1"],
        "annotations": annotation_records({"1": store.scores(store.current_version())["1"]}),
    }
    edited["annotations"][0]["tags"] = ["B-LOC", "I-LOC", "O", "B-LOC", "O"]
    assert reviews.served_entry("1", edited, reviews.confirmed_keys(store))["score"] == 0.1
    # The report sees the confirmed annotation as the queue does.
    records = annotation_records(
        store.scores(store.current_version()), reviews.confirmed_keys(store)
    )
    assert {r["task"]: r["score"] for r in records if r["task"] in "12"} == {"1": 1.0, "2": 0.2}


def test_a_note_on_a_region_confirms_and_a_repeat_is_counted(project):
    """The UI's Update needs a change: a note in a region's meta is one that leaves the labels
    as they are, so it confirms."""
    client, store = project
    noted = [{**MERKEL_PER[0], "meta": {"text": ["checked: correct"]}}, MERKEL_PER[1]]
    assert _post(client, _updated(1, 11, noted))["review"] == "confirmed"
    assert _post(client, _updated(1, 11, MERKEL_PER))["review"] == "confirmed"
    (decision,) = reviews.load(store)["decisions"].values()
    assert decision["count"] == 2 and decision["score"] == 0.1


def test_changed_update_fixes_and_a_later_unchanged_one_confirms_the_fix(project):
    client, store = project
    assert _post(client, _updated(2, 21, MERKEL_LOC))["review"] == "fixed"
    assert _served(store)["2"]["score"] == 0.2  # not confirmed: rescored like every change
    # Updated again as fixed, before its rescore stored the new labels: a confirmation of the fix.
    assert _post(client, _updated(2, 21, MERKEL_LOC))["review"] == "confirmed"
    inputs = reviews.review_inputs(store)
    assert inputs == {"tasks": ["2"], "score": [0.2], "fixed": [True], "labels": [["LOC", "PER"]]}


def test_a_task_scores_as_its_least_reliable_unconfirmed_annotation(project):
    client, store = project
    assert _post(client, _updated(3, 31, MERKEL_PER))["review"] == "confirmed"
    assert _served(store)["3"]["score"] == 0.9  # 31 confirmed; 32 still 0.9
    assert _served(store)["3"]["result"][0]["meta"]["text"] != [reviews.CONFIRMED_NOTE]
    assert _post(client, _updated(3, 32, MERKEL_PER))["review"] == "confirmed"
    assert _served(store)["3"]["score"] == 1.0


@pytest.mark.parametrize(
    "change, why, level",
    [
        ({"annotation": {"id": 11, "task": 1}}, "no annotation with a result list", "WARNING"),
        ({"annotation": {"id": "x", "result": []}}, "no integer id", "WARNING"),
        ({"task": {"id": 1}}, "no data of task 1", "WARNING"),
        ({"project": {"id": PROJECT}}, "labeling config cannot be read", "WARNING"),
        (
            {"task": {"id": 99, "data": {"text": TEXT}}},
            "has not scored annotation 11 of task 99",
            "INFO",
        ),
        (
            {"annotation": {"id": 12, "task": 1, "result": MERKEL_PER}},
            "has not scored annotation 12 of task 1",
            "INFO",
        ),
    ],
)
def test_bad_or_unknown_review_events_decide_nothing_and_say_why(
    project, caplog, change, why, level
):
    client, store = project
    caplog.set_level(logging.INFO, logger="backend.reviews")
    reply = _post(client, _updated(1, 11, MERKEL_PER, **change))
    assert "review" not in reply and reply["status"] == "counted"
    assert any(why in r.getMessage() and r.levelname == level for r in caplog.records), caplog.text
    assert not (store.root / "reviews.json").exists()
    assert store.status()["events_since_training"] == 1  # the event still counts


def test_a_cancelled_annotation_decides_nothing(project, caplog):
    client, store = project
    caplog.set_level(logging.INFO, logger="backend.reviews")
    body = _updated(1, 11, MERKEL_PER)
    body["annotation"]["was_cancelled"] = True
    assert "review" not in _post(client, body)
    assert "not usable" in caplog.text and not (store.root / "reviews.json").exists()


def test_reviewers_deciding_at_once_lose_no_decision(project, tmp_path):
    """Many reviewers at once: each decision kept, on its own annotation; two on one
    annotation (one confirms, one fixes) both kept, each keyed by the content it saw."""
    _, store = project
    app = make_app(tmp_path, retrain_after=1000)[0]
    bodies = [_updated(1, 11, MERKEL_PER), _updated(1, 11, MERKEL_LOC)] + [
        _updated(3, a, MERKEL_PER) for a in (31, 32)
    ] * 5
    barrier = threading.Barrier(len(bodies))
    replies = [None] * len(bodies)

    def review(i):
        client = app.test_client()
        barrier.wait()
        replies[i] = client.post("/webhook", json=bodies[i], headers=GOOD)

    threads = [threading.Thread(target=review, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(r.status_code == 200 for r in replies)
    kept = reviews.load(store)["decisions"].values()
    on = {(d["task"], d["annotation"], d["decision"]): d["count"] for d in kept}
    assert on[("3", "31", "confirmed")] == 5 and on[("3", "32", "confirmed")] == 5
    # 11: the confirmation of what was scored (PER), and the fix to LOC, in either order
    assert on[("1", "11", "confirmed")] == 1 and on[("1", "11", "fixed")] == 1
    assert len(on) == 4
    assert store.status()["events_since_training"] == len(bodies)


def test_decisions_are_judged_against_the_scores_stored_now(project):
    """The scored annotations a process keeps parsed follow scores.json: after a rescore
    stores task 2's new labels, saving them unchanged confirms them."""
    client, store = project
    assert _post(client, _updated(2, 21, MERKEL_PER))["review"] == "confirmed"  # parsed, kept
    version = store.current_version()
    (rescored,) = read_tasks([_task(2, [(21, MERKEL_LOC)])], SPEC).tasks
    record = annotation_record(rescored.examples[0], "ner", 0.7, {}, 0)
    store.store_scores(version, {"2": {**store.scores(version)["2"], "annotations": [record]}})
    assert reviews.scored_annotations(store, version)["2/21"]["score"] == 0.7
    assert _post(client, _updated(2, 31, MERKEL_LOC)).get("review") is None  # not task 2's
    assert _post(client, _updated(2, 21, MERKEL_LOC))["review"] == "confirmed"
    assert _served(store)["2"]["score"] == 1.0


def test_a_fix_moves_up_the_other_annotations_that_repeat_its_slip(project):
    """The review loop's `propagate` (benchmarks/review_loop.py): Merkel fixed from PER to LOC
    in task 2 halves the served score of every other annotation of Angela Merkel as PER, once
    per repeated (word, type); the fixed annotation itself waits for its rescore."""
    client, store = project
    assert _post(client, _updated(2, 21, MERKEL_LOC))["review"] == "fixed"
    (decision,) = reviews.load(store)["decisions"].values()
    assert decision["slips"] == [["Angela", "PER"], ["Merkel", "PER"]]
    served = _served(store)
    assert served["1"]["score"] == pytest.approx(0.1 * 0.25)  # two repeated pairs
    assert served["1"]["slip_repeats"] == 2
    assert served["3"]["score"] == pytest.approx(0.3 * 0.25)  # the least reliable of two
    assert served["2"]["score"] == 0.2 and "slip_repeats" not in served["2"]
    assert store.scores(store.current_version())["1"]["score"] == 0.1  # stored: the scout's
    # queued for the rescore, which rewrites the repeats' predictions in Label Studio
    assert set(store.status()["slips_pending"]) == {"Angela\0PER", "Merkel\0PER"}
    # The report ranks as the queue does.
    records = annotation_records(
        store.scores(store.current_version()),
        reviews.confirmed_keys(store),
        reviews.fixed_slips(store),
    )
    assert {r["task"]: r["score"] for r in records if r["task"] in "12"} == pytest.approx(
        {"1": 0.1 * 0.25, "2": 0.2}
    )
    # A confirmation still wins: a reviewer who finds task 1 correct takes it off the queue.
    assert _post(client, _updated(1, 11, MERKEL_PER))["review"] == "confirmed"
    assert _served(store)["1"]["score"] == 1.0


def test_a_confirmation_records_no_slip(project):
    client, store = project
    assert _post(client, _updated(1, 11, MERKEL_PER))["review"] == "confirmed"
    assert reviews.fixed_slips(store).counts == {}
    assert "slips_pending" not in store.status()
    assert _served(store)["2"]["score"] == 0.2

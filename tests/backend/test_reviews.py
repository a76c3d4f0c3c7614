"""backend.review.reviews: a reviewer confirms an annotation (saved with its labels unchanged) or
fixes it (changed). Decisions are judged from the task as Label Studio returns it (here: the
dicts :meth:`LabelStudioAPI.project_tasks` gives, with each annotation's ``updated_at``) against
the baseline the serving version scored, never from a webhook's body; they are kept per
annotation, served as score 1 until the annotation changes; concurrent reviewers lose nothing.
The version is published with stored scores made by the real parser and record writer; no
scout is needed to judge a decision (the real Label Studio round trip, with trainings, is
tests/labelstudio/test_review_decisions.py)."""

from __future__ import annotations

import json
import threading

import pytest

from backend.labelstudio.tasks import (
    TaskRead,
    annotation_record,
    fingerprint,
    parse_label_config,
    read_tasks,
)
from backend.review import reviews
from backend.review.served import served_entry
from backend.serving.report import annotation_records
from backend.store.store import ProjectStore
from subregweigh.io.atomic import atomic_write_json
from tests.backend.test_backend_server import GOOD, NER_CONFIG, make_app

SPEC = parse_label_config(NER_CONFIG)
TEXT = "Angela Merkel visited Zürich ."
PROJECT = 7
SCORED_AT = "2026-01-01T10:00:00.000000Z"  # when Label Studio last saved what was scored
CONFIRMED_TAIL = "served as fully reliable (score 1) until it changes"


def _at(minute: int) -> str:
    """A save after the scoring, ``minute`` minutes after it."""
    return f"2026-01-01T10:{minute:02d}:00.000000Z"


def _region(start, end, label, from_name="label", text=TEXT):
    return {
        "id": f"r{start}",
        "from_name": from_name,
        "to_name": "text",
        "type": "labels",
        "value": {"start": start, "end": end, "text": text[start:end], "labels": [label]},
    }


MERKEL_PER = [_region(0, 13, "PER"), _region(22, 28, "LOC")]
MERKEL_LOC = [_region(0, 13, "LOC"), _region(22, 28, "LOC")]


def _task(task_id: int, annotations: list[tuple], saved: str = SCORED_AT) -> dict:
    """A task as Label Studio returns it; each annotation ``(id, result)`` or ``(id, result,
    updated_at)``."""
    return {
        "id": task_id,
        "data": {"text": TEXT},
        "annotations": [
            {
                "id": a[0],
                "result": a[1],
                "updated_at": a[2] if len(a) > 2 else saved,
                "completed_by": 4,
                "updated_by": 5,
            }
            for a in annotations
        ],
    }


def _publish(model_dir, tasks: list[dict], scores: dict[int, list[float]]) -> str:
    """A version whose scores.json holds ``tasks``' annotations with the given scores, and the
    times Label Studio saved them (as a training stamps them)."""
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
    reviews.stamp_saved(table, reviews.saved_times(tasks))
    staging = store.staging_dir()
    atomic_write_json(staging / "scores.json", table)
    store.publish(staging, "srw-20260101-000000000-aaaaaa")
    return "srw-20260101-000000000-aaaaaa"


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


def _decide(store: ProjectStore, *tasks: dict) -> dict:
    """What the rescore does with ``tasks`` read from Label Studio."""
    return reviews.decide(store, store.current_version(), SPEC, TaskRead.of(tasks, SPEC))


def _judge(store: ProjectStore, *tasks: dict) -> reviews.Judged:
    """The same, with the slips the decisions moved, handed to the rescore."""
    return reviews.judge(store, store.current_version(), SPEC, TaskRead.of(tasks, SPEC))


def _served(store: ProjectStore) -> dict:
    version = store.current_version()
    return reviews.served_scores(
        store, store.scores(version), reviews.version_scales(store, version)
    )


def test_a_confirmation_serves_score_one_until_the_annotation_changes(project):
    client, store = project
    assert _decide(store, _task(1, [(11, MERKEL_PER, _at(5))])) == {"1/11": "confirmed"}
    served = _served(store)
    assert served["1"]["score"] == 1.0 and served["2"]["score"] == 0.2
    # the prediction shows the confirmed annotation itself, with who confirmed it and when
    assert served["1"]["result"] == [
        {
            "meta": {"text": ["confirmed by user 5 on 2026-01-01: " + CONFIRMED_TAIL]},
            **{k: region[k] for k in ("from_name", "to_name", "type", "value")},
            "score": 1.0,
        }
        for region in MERKEL_PER
    ]
    assert store.scores(store.current_version())["1"]["score"] == 0.1  # stored: the scout's
    # Kept on disk (it survives restarts and retrains), one current decision per annotation.
    kept = json.loads((store.root / "reviews.json").read_text())
    assert list(kept["decisions"]) == ["1/11"]
    decision = kept["decisions"]["1/11"]
    assert decision["decision"] == "confirmed" and decision["score"] == 0.1
    assert decision["saved_at"] == _at(5)
    assert (decision["task"], decision["annotation"], decision["labels"]) == (
        "1",
        "11",
        ["LOC", "PER"],
    )
    assert decision["reviewer"] == "user 5"  # who saved it (updated_by), as Label Studio says
    assert [h[1:] for h in kept["history"]] == [["1", "11", "confirmed", "user 5"]]
    # The same annotation with other labels is not confirmed: an edit undoes the confirmation.
    edited = {
        **store.scores(store.current_version())["1"],
        "annotations": annotation_records({"1": store.scores(store.current_version())["1"]}),
    }
    edited["annotations"][0]["tags"] = ["B-LOC", "I-LOC", "O", "B-LOC", "O"]
    assert served_entry("1", edited, reviews.confirmed_keys(store), {})["score"] == 0.1
    # The report sees the confirmed annotation as the queue does.
    records = annotation_records(
        store.scores(store.current_version()), reviews.confirmed_keys(store)
    )
    assert {r["task"]: r["score"] for r in records if r["task"] in "12"} == {"1": 1.0, "2": 0.2}


def test_unchanged_and_not_saved_since_it_was_scored_decides_nothing(project):
    """A replayed or made-up event makes the rescore read the task: if Label Studio shows the
    annotation as scored and not saved since, nothing was reviewed."""
    _, store = project
    assert _decide(store, _task(1, [(11, MERKEL_PER)])) == {}
    assert _decide(store, _task(1, [(11, MERKEL_PER, "2025-12-31T23:00:00Z")])) == {}
    assert not (store.root / "reviews.json").exists()
    assert _served(store)["1"]["score"] == 0.1


def test_a_note_on_a_region_confirms_and_each_save_counts_once(project):
    """The UI's Update needs a change: a note in a region's meta is one that leaves the labels
    as they are, so it confirms. The same save read twice (two events) counts once."""
    _, store = project
    noted = [{**MERKEL_PER[0], "meta": {"text": ["checked: correct"]}}, MERKEL_PER[1]]
    assert _decide(store, _task(1, [(11, noted, _at(5))])) == {"1/11": "confirmed"}
    assert _decide(store, _task(1, [(11, noted, _at(5))])) == {}  # replayed: decided already
    assert _decide(store, _task(1, [(11, MERKEL_PER, _at(6))])) == {"1/11": "confirmed"}
    decision = reviews.load(store)["decisions"]["1/11"]
    assert decision["count"] == 2 and decision["score"] == 0.1


def test_changed_labels_fix_and_a_later_unchanged_save_confirms_the_fix(project):
    _, store = project
    assert _decide(store, _task(2, [(21, MERKEL_LOC, _at(5))])) == {"2/21": "fixed"}
    assert _served(store)["2"]["score"] == 0.2  # not confirmed: rescored like every change
    # Saved again as fixed, before its rescore stored the new labels: a confirmation of the fix.
    assert _decide(store, _task(2, [(21, MERKEL_LOC, _at(7))])) == {"2/21": "confirmed"}
    inputs = reviews.review_inputs(store)
    assert inputs == {
        "tasks": ["2"],
        "score": [0.2],
        "fixed": [True],
        "labels": [["LOC", "PER"]],
        "decisions": {"item": ["2/21"], "reviewer": ["user 5"], "decision": ["confirmed"]},
    }


def test_a_task_scores_as_its_least_reliable_unconfirmed_annotation(project):
    _, store = project
    assert _decide(store, _task(3, [(31, MERKEL_PER, _at(5)), (32, MERKEL_PER)])) == {
        "3/31": "confirmed"
    }
    assert _served(store)["3"]["score"] == 0.9  # 31 confirmed; 32 still 0.9
    assert _served(store)["3"]["result"][0]["meta"]["text"] == ["annotated as PER (p 0.10)"]
    assert _decide(store, _task(3, [(31, MERKEL_PER, _at(5)), (32, MERKEL_PER, _at(6))])) == {
        "3/32": "confirmed"
    }
    assert _served(store)["3"]["score"] == 1.0


def test_unscored_cancelled_or_timeless_annotations_decide_nothing(project):
    _, store = project
    # an annotation the version has not scored (newer): its rescore scores it
    assert _decide(store, _task(1, [(12, MERKEL_PER, _at(5))])) == {}
    assert _decide(store, _task(99, [(11, MERKEL_PER, _at(5))])) == {}
    # cancelled: not an annotation the engine reads
    cancelled = _task(1, [(11, MERKEL_PER, _at(5))])
    cancelled["annotations"][0]["was_cancelled"] = True
    assert _decide(store, cancelled) == {}
    # no time from Label Studio: the same labels cannot be proven saved again
    timeless = _task(1, [(11, MERKEL_PER)])
    del timeless["annotations"][0]["updated_at"]
    assert _decide(store, timeless) == {}
    assert not (store.root / "reviews.json").exists()


def test_a_webhook_body_never_decides(project):
    """Whatever an ANNOTATION_UPDATED body carries, the webhook only counts the event and queues
    the rescore that reads the task from Label Studio."""
    client, store = project
    body = {
        "action": "ANNOTATION_UPDATED",
        "project": {"id": PROJECT, "label_config": NER_CONFIG},
        "task": {"id": 2, "data": {"text": TEXT}},
        "annotation": {"id": 21, "task": 2, "result": MERKEL_LOC, "updated_at": _at(59)},
    }
    reply = client.post("/webhook", json=body, headers=GOOD).get_json()
    assert reply == {"status": "counted", "action": "ANNOTATION_UPDATED", "rescore": "started"}
    assert not (store.root / "reviews.json").exists()
    assert set(store.inbox().rescore_pending) == {"2"}


def test_reviewers_deciding_at_once_lose_no_decision(project):
    """Many rescores at once, of many saves: each decision kept on its own annotation, each save
    counted once however often it is read."""
    _, store = project
    saves = [_task(1, [(11, MERKEL_LOC, _at(5))])] + [
        _task(3, [(31, MERKEL_PER, _at(5)), (32, MERKEL_PER, _at(6))])
    ] * 8
    barrier = threading.Barrier(len(saves))

    def review(task):
        barrier.wait()
        _decide(store, task)

    threads = [threading.Thread(target=review, args=(task,)) for task in saves]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kept = reviews.load(store)["decisions"]
    on = {key: (d["decision"], d["count"]) for key, d in kept.items()}
    assert on == {"1/11": ("fixed", 1), "3/31": ("confirmed", 1), "3/32": ("confirmed", 1)}


def test_forged_fixes_in_parallel_keep_one_decision(project):
    """20 events naming one annotation make 20 reads of the same save: one fix."""
    _, store = project
    threads = [
        threading.Thread(target=_decide, args=(store, _task(2, [(21, MERKEL_LOC, _at(5))])))
        for _ in range(20)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    decisions = reviews.load(store)
    assert {k: d["count"] for k, d in decisions["decisions"].items()} == {"2/21": 1}
    assert len(decisions["history"]) == 1


@pytest.mark.slow
def test_reviews_json_stays_bounded(project):
    """One current decision per annotation and the last HISTORY decisions, however many saves."""
    _, store = project
    for minute in range(1, 60):
        for second in range(0, 60, 3):
            stamp = f"2026-01-01T10:{minute:02d}:{second:02d}.000000Z"
            _decide(store, _task(3, [(31, MERKEL_PER, stamp), (32, MERKEL_PER, stamp)]))
    kept = reviews.load(store)
    assert set(kept["decisions"]) == {"3/31", "3/32"}
    assert kept["decisions"]["3/31"]["count"] == 59 * 20
    assert len(kept["history"]) == reviews.HISTORY
    assert (store.root / "reviews.json").stat().st_size < 100_000


def test_the_earlier_layout_reads_as_its_latest_decision_per_annotation(project):
    _, store = project
    earlier = {
        "decisions": {
            "fixed:2/21/aaa": {
                "decision": "fixed",
                "task": "2",
                "annotation": "21",
                "hash": "aaa",
                "score": 0.2,
                "labels": ["PER"],
                "last_at": 1.0,
                "slips": [["Merkel", "PER"]],
                "scored_hash": "000",
            },
            "confirmed:2/21/aaa": {
                "decision": "confirmed",
                "task": "2",
                "annotation": "21",
                "hash": "aaa",
                "score": 0.2,
                "labels": ["PER"],
                "last_at": 2.0,
            },
        },
        "seen": {"2/21": "aaa"},
    }
    (store.root / "reviews.json").write_text(json.dumps(earlier))
    kept = reviews.load(store)
    assert list(kept["decisions"]) == ["2/21"]
    decision = kept["decisions"]["2/21"]
    assert decision["decision"] == "confirmed" and decision["fixed"] is True
    assert reviews.fixed_slips(store).counts == {("Merkel", "PER"): 1}


def test_decisions_are_judged_against_the_scores_stored_now(project):
    """The scored annotations a process keeps parsed follow scores.json: after a rescore
    stores task 2's new labels (and when Label Studio saved them), the same labels saved again
    confirm them, and not saved again decide nothing."""
    _, store = project
    assert _decide(store, _task(2, [(21, MERKEL_PER, _at(1))])) == {"2/21": "confirmed"}
    version = store.current_version()
    fixed = _task(2, [(21, MERKEL_LOC, _at(10))])
    (rescored,) = read_tasks([fixed], SPEC).tasks
    entry = {
        **store.scores(version)["2"],
        "annotations": [annotation_record(rescored.examples[0], "ner", 0.7, {}, 0)],
    }
    reviews.stamp_saved({"2": entry}, reviews.saved_times([fixed]))
    store.store_scores(version, {"2": entry})
    assert reviews.scored_annotations(store, version)["2/21"]["score"] == 0.7
    assert _decide(store, fixed) == {}  # what the rescore read: no new save
    assert _decide(store, _task(2, [(21, MERKEL_LOC, _at(11))])) == {"2/21": "confirmed"}
    assert _served(store)["2"]["score"] == 1.0


def test_a_fix_moves_up_the_other_annotations_that_repeat_its_slip(project):
    """The review loop's `propagate` (benchmarks/review_loop.py): Merkel fixed from PER to LOC
    in task 2 halves the served score of every other annotation of Angela Merkel as PER, once
    per repeated convention (the entity, its words and type) and per the slip's weight (its
    fixes less the decided annotations that held it unchanged); the fixed annotation itself
    waits for its rescore."""
    _, store = project
    fixed = _judge(store, _task(2, [(21, MERKEL_LOC, _at(5))]))
    assert fixed.made == {"2/21": "fixed"}
    decision = reviews.load(store)["decisions"]["2/21"]
    assert decision["slips"] == [["Angela Merkel", "PER"]]
    served = _served(store)
    assert served["1"]["score"] == pytest.approx(0.1 * 0.5)  # one repeated entity
    assert served["1"]["slip_repeats"] == 1
    assert served["3"]["score"] == pytest.approx(0.3 * 0.5)  # the least reliable of two
    assert served["2"]["score"] == 0.2 and "slip_repeats" not in served["2"]
    assert store.scores(store.current_version())["1"]["score"] == 0.1  # stored: the scout's
    # handed to the rescore, which rewrites the repeats' predictions in Label Studio; the
    # status queues nothing
    assert set(fixed.slips) == {"Angela Merkel\0PER"}
    assert not store.inbox().slips_pending
    # The report ranks as the queue does.
    records = annotation_records(
        store.scores(store.current_version()),
        reviews.confirmed_keys(store),
        slips=reviews.fixed_slips(store),
    )
    assert {r["task"]: r["score"] for r in records if r["task"] in "12"} == pytest.approx(
        {"1": 0.1 * 0.5, "2": 0.2}
    )
    # A confirmation still wins: a reviewer who finds task 1 correct takes it off the queue.
    confirmed = _judge(store, _task(1, [(11, MERKEL_PER, _at(6))]))
    assert confirmed.made == {"1/11": "confirmed"}
    served = _served(store)
    assert served["1"]["score"] == 1.0
    # Its Angela Merkel as PER, seen and left standing, weighs against the slip: one fix less
    # one confirmation moves nothing up, and the repeats' predictions are queued for rewriting.
    assert reviews.load(store)["decisions"]["1/11"]["pairs"] == [
        ["Angela Merkel", "PER"],
        ["Zürich", "LOC"],
    ]
    assert reviews.fixed_slips(store).counts == {}
    assert served["3"]["score"] == 0.3 and "slip_repeats" not in served["3"]
    assert set(confirmed.slips) == {"Angela Merkel\0PER"}
    # A second fix of the slip outweighs the confirmation: task 3's other annotation, which
    # repeats it, moves up again (its fixed one waits for its rescore).
    fixed_31 = _task(3, [(31, MERKEL_LOC, _at(7)), (32, MERKEL_PER)])
    assert _decide(store, fixed_31) == {"3/31": "fixed"}
    assert reviews.fixed_slips(store).counts == {("Angela Merkel", "PER"): 1}
    served_3 = _served(store)["3"]  # the fixed one's stored 0.3 is now the lower of two
    assert served_3["slip_repeats"] == 1 and served_3["score"] == pytest.approx(0.3)
    records = annotation_records(
        store.scores(store.current_version()),
        reviews.confirmed_keys(store),
        slips=reviews.fixed_slips(store),
    )
    assert {r["id"]: r["score"] for r in records if r["task"] == "3"} == pytest.approx(
        {"3/31": 0.3, "3/32": 0.9 * 0.5}
    )
    # ... and confirming a fix keeps its slip: the weights stay.
    assert _decide(store, _task(2, [(21, MERKEL_LOC, _at(8))])) == {"2/21": "confirmed"}
    assert reviews.fixed_slips(store).counts == {("Angela Merkel", "PER"): 1}


def test_a_confirmation_records_no_slip(project):
    _, store = project
    confirmed = _judge(store, _task(1, [(11, MERKEL_PER, _at(5))]))
    assert confirmed.made == {"1/11": "confirmed"}
    assert reviews.fixed_slips(store).counts == {}
    assert confirmed.slips == frozenset() and not store.inbox().slips_pending
    assert _served(store)["2"]["score"] == 0.2


def _saved_by(task: dict, by, created_by=4) -> dict:
    """``task`` with its annotations saved by user ``by`` (None: imported, Label Studio names
    nobody) and made by ``created_by``."""
    for a in task["annotations"]:
        a.update(updated_by=by, completed_by=created_by)
    return task


def test_only_a_save_label_studio_names_a_user_for_decides(project):
    """Issue 58: an annotation Label Studio names no saver for (imported: ``updated_by``
    null) decides nothing, with other labels or the same, however late its time; a record
    scored without a read from Label Studio (no baseline) neither."""
    _, store = project
    assert _decide(store, _saved_by(_task(1, [(11, MERKEL_PER, _at(5))]), None)) == {}
    assert _decide(store, _saved_by(_task(2, [(21, MERKEL_LOC, _at(5))]), None)) == {}
    version = store.current_version()
    scores = store.scores(version)
    del scores["3"]["annotations"][0]["saved"]
    store.store_scores(version, {"3": scores["3"]})
    assert _decide(store, _task(3, [(31, MERKEL_LOC, _at(5)), (32, MERKEL_PER)])) == {}
    assert not (store.root / "reviews.json").exists()


def test_an_annotators_own_saves_are_self_reviews_not_decisions(project):
    """Without the control: the annotator re-saving her annotation unchanged does not confirm
    it, and her own edit is no reviewer's fix (no slips, no weight in the CRF's refit); both
    are kept as self-reviewed. A reviewer's save after them decides as usual."""
    _, store = project
    same = _saved_by(_task(1, [(11, MERKEL_PER, _at(5))]), 4)
    assert _decide(store, same) == {"1/11": reviews.SELF_REVIEWED}
    edit = _saved_by(_task(2, [(21, MERKEL_LOC, _at(5))]), 4)
    assert _decide(store, edit) == {"2/21": reviews.SELF_REVIEWED}
    served = _served(store)
    assert (served["1"]["score"], served["2"]["score"]) == (0.1, 0.2)
    assert reviews.fixed_slips(store).counts == {}
    kept = reviews.load(store)["decisions"]
    assert (kept["1/11"]["chosen"], kept["2/21"]["chosen"]) == ("confirmed", "fixed")
    assert "slips" not in kept["2/21"] and "pairs" not in kept["1/11"]
    assert _decide(store, _task(1, [(11, MERKEL_PER, _at(7))])) == {"1/11": "confirmed"}
    assert _served(store)["1"]["score"] == 1.0

"""The review control (issue 44): a ``<Choices name="srw_review">`` a reviewer clicks, read by the
backend as a decision and never as a label (backend.review.decisions, backend.review.reviews,
backend.review.served).

Tasks are dicts as Label Studio 1.23 returns them (each annotation with ``updated_at``,
``completed_by`` and ``updated_by``: what a real Label Studio 1.23.2 gives, see
tests/labelstudio/test_control_decisions_ls.py, which drives the same through a real one); the
versions are published with stored scores made by the real parser and record writer. No scout
is needed to judge a decision.
"""

from __future__ import annotations

import json

import pytest

from backend.labelstudio.tasks import (
    ConfigError,
    TaskRead,
    annotation_record,
    fingerprint,
    name_annotators,
    parse_label_config,
    read_tasks,
)
from backend.review import reviews
from backend.review.decisions import reviewer
from backend.serving.report import annotation_records
from backend.store.store import ProjectStore
from subregweigh.io import read_label_studio
from subregweigh.io.atomic import atomic_write_json
from subregweigh.io.labelstudio import REVIEW_CHOICES, REVIEW_CONTROL, review_control_xml
from subregweigh.report import AnnotationTable, build_report
from tests.backend.test_backend_server import make_app
from tests.backend.test_reviews import SCORED_AT, TEXT, _at, _region

NER = (
    '<View><Labels name="label" toName="text"><Label value="PER"/><Label value="LOC"/>'
    '</Labels><Text name="text" value="$text"/>' + review_control_xml("text") + "</View>"
)
CLS = (
    '<View><Text name="text" value="$text"/><Choices name="topic" toName="text" '
    'choice="{choice}"><Choice value="sports"/><Choice value="politics"/>'
    '<Choice value="tech"/></Choices>' + review_control_xml("text") + "</View>"
)
PROJECT = 9


def _choices(name, *values):
    return {
        "id": name,
        "from_name": name,
        "to_name": "text",
        "type": "choices",
        "value": {"choices": list(values)},
    }


def chose(value: str) -> dict:
    """The review control's region, as Label Studio saves it."""
    return _choices(REVIEW_CONTROL, value)


MERKEL_PER = [_region(0, 13, "PER"), _region(22, 28, "LOC")]
MERKEL_LOC = [_region(0, 13, "LOC"), _region(22, 28, "LOC")]


def _task(task_id, annotation_id, result, saved=SCORED_AT, by=5, created_by=4):
    return {
        "id": task_id,
        "data": {"text": TEXT},
        "annotations": [
            {
                "id": annotation_id,
                "result": result,
                "updated_at": saved,
                "completed_by": created_by,
                "updated_by": by,
            }
        ],
    }


def _publish(model_dir, spec, tasks, scores) -> ProjectStore:
    """A version whose scores.json holds ``tasks``' annotations with ``scores`` (task id ->
    score), the scout's region a contrary one, stamped as a training stamps them."""
    store = ProjectStore(model_dir, PROJECT)
    table = {}
    for item in read_tasks(tasks, spec).tasks:
        (ex,) = item.examples
        scout = _region(0, 13, "LOC") if spec.task == "ner" else _choices("topic", "tech")
        table[item.id] = {
            "result": [{**scout, "meta": {"text": ["the scout's suggestion"]}}],
            "score": scores[int(item.id)],
            "fingerprint": fingerprint(item),
            "annotations": [
                annotation_record(ex, spec.task, scores[int(item.id)], {"majority": [ex.label]}, 0)
            ],
        }
    reviews.stamp_saved(table, reviews.saved_times(tasks))
    staging = store.staging_dir()
    atomic_write_json(staging / "scores.json", table)
    store.publish(staging, "srw-20260101-000000000-bbbbbb")
    return store


@pytest.fixture
def ner(tmp_path):
    """A NER project with the control: task 1 and 2 annotated (Merkel as PER), task 3 without
    regions (no entity), scored 0.1, 0.2 and 0.3."""
    make_app(tmp_path, retrain_after=1000)
    spec = parse_label_config(NER)
    tasks = [_task(1, 11, MERKEL_PER), _task(2, 21, MERKEL_PER), _task(3, 31, [])]
    return spec, _publish(tmp_path / "models", spec, tasks, {1: 0.1, 2: 0.2, 3: 0.3})


def _decide(spec, store, *tasks):
    return reviews.decide(store, store.current_version(), spec, TaskRead.of(tasks, spec))


def _judge(spec, store, *tasks) -> reviews.Judged:
    return reviews.judge(store, store.current_version(), spec, TaskRead.of(tasks, spec))


def _served(store) -> dict:
    version = store.current_version()
    return reviews.served_scores(
        store, store.scores(version), reviews.version_scales(store, version)
    )


def _decisions(store) -> dict:
    return reviews.load(store)["decisions"]


# ----------------------------------------------------------------------------- not a label


def test_the_review_control_is_a_control_of_its_own_and_never_a_label():
    assert REVIEW_CONTROL == "srw_review" and REVIEW_CHOICES == (
        "correct",
        "wrong (fixed)",
        "unsure",
    )
    spec = parse_label_config(NER)
    assert (spec.task, spec.from_name, spec.labels, spec.review) == (
        "ner",
        "label",
        ("PER", "LOC"),
        "srw_review",
    )
    multi = parse_label_config(CLS.format(choice="multiple"))
    assert (multi.from_name, multi.labels, multi.multi_label, multi.review) == (
        "topic",
        ("sports", "politics", "tech"),
        True,
        "srw_review",
    )
    without = parse_label_config(NER.replace(review_control_xml("text"), ""))
    assert without.review is None
    # An existing project's annotations stay valid when the control is added: the same examples,
    # and the control's regions neither warn nor label.
    tasks = [_task(1, 11, MERKEL_PER + [chose("correct")]), _task(3, 31, [chose("unsure")])]
    plain = [_task(1, 11, MERKEL_PER), _task(3, 31, [])]
    got, before = read_tasks(tasks, spec), read_tasks(plain, without)
    assert [i.examples for i in got.tasks] == [i.examples for i in before.tasks]
    assert got.warnings == []
    # a classification annotation with a decision and no label makes no example
    only = {
        "id": 5,
        "data": {"text": TEXT},
        "annotations": [{"id": 51, "result": [chose("correct")]}],
    }
    assert read_tasks([only], multi).tasks[0].examples == ()


@pytest.mark.parametrize(
    "config, message",
    [
        (NER.replace("<Choices", "<Labels").replace("</Choices>", "</Labels>"), "reserved name"),
        (
            '<View><Text name="text" value="$text"/>' + review_control_xml("text") + "</View>",
            "is the review control",
        ),
        (
            NER.replace('toName="text" choice="single"', 'toName="other" choice="single"'),
            "the review control 'srw_review' \\(Choices\\) labels 'other'",
        ),
    ],
)
def test_configs_with_a_wrong_review_control_are_refused(config, message):
    with pytest.raises(ConfigError, match=message):
        parse_label_config(config)


def test_an_export_with_decisions_reads_as_one_without(tmp_path):
    """The command line's export reader (exports for training) skips the control's regions, for
    NER (they would be choices beside labels) and classification (a second control)."""
    for config, result in [
        (NER, MERKEL_PER),
        (CLS.format(choice="single"), [_choices("topic", "sports")]),
    ]:
        spec = parse_label_config(config)
        path = tmp_path / "export.json"
        path.write_text(json.dumps([_task(1, 11, result + [chose("wrong (fixed)")])]))
        examples, kind = read_label_studio(path)
        assert kind == spec.task
        (ex,) = examples
        assert "wrong (fixed)" not in ex.label and REVIEW_CONTROL not in str(ex.label)


# ----------------------------------------------------------------------------- decisions


def test_with_the_control_only_the_control_decides(ner):
    spec, store = ner
    # plain saves of the same labels, and the annotator's own of other labels, decide nothing
    assert _decide(spec, store, _task(1, 11, MERKEL_PER, _at(3))) == {}
    assert _decide(spec, store, _task(2, 21, MERKEL_LOC, _at(3), by=4)) == {}
    assert not (store.root / "reviews.json").exists()
    # correct: confirmed, by the user who saved it, at the time Label Studio saved it
    assert _decide(spec, store, _task(1, 11, MERKEL_PER + [chose("correct")], _at(5))) == {
        "1/11": "confirmed"
    }
    decision = _decisions(store)["1/11"]
    assert (decision["reviewer"], decision["saved_at"], decision["by"]) == (
        "user 5",
        _at(5),
        "control",
    )
    served = _served(store)
    assert served["1"]["score"] == 1.0 and served["2"]["score"] == 0.2
    # the prediction shows the confirmed annotation (PER), not the scout's contrary LOC
    assert [r["value"]["labels"] for r in served["1"]["result"]] == [["PER"], ["LOC"]]
    assert served["1"]["result"][0]["meta"]["text"][0].startswith(
        "confirmed by user 5 on 2026-01-01"
    )
    assert {r["score"] for r in served["1"]["result"]} == {1.0}
    # replayed (read again, not saved since): nothing new
    assert _decide(spec, store, _task(1, 11, MERKEL_PER + [chose("correct")], _at(5))) == {}
    # an edit saved with the choice still there: a confirmation of what was saved
    edited = _task(1, 11, MERKEL_LOC + [chose("correct")], _at(6), by=7)
    assert _decide(spec, store, edited) == {"1/11": "confirmed"}
    assert _decisions(store)["1/11"]["reviewers"] == {"user 5": "confirmed", "user 7": "confirmed"}


def test_a_reviewers_save_of_other_labels_without_a_choice_is_a_fix(ner):
    """Issue 61: retyping a region and pressing Update (3 clicks) fixes it, as *wrong (fixed)*
    would; a later unchanged save keeps the fix (it has no choice to clear), and a save that
    brings the labels back reverts it."""
    spec, store = ner
    assert _decide(spec, store, _task(2, 21, MERKEL_LOC, _at(3))) == {"2/21": "fixed"}
    decision = _decisions(store)["2/21"]
    assert (decision["by"], decision["fixed"], decision["reviewer"]) == ("control", True, "user 5")
    assert decision["implied"] and decision["slips"] == [["Angela Merkel", "PER"]]
    assert _served(store)["1"]["score"] == pytest.approx(0.1 * 0.5)  # its repeats move up
    assert _decide(spec, store, _task(2, 21, MERKEL_LOC, _at(4))) == {}  # saved again: kept
    assert _decisions(store)["2/21"]["decision"] == "fixed"
    assert _decide(spec, store, _task(2, 21, MERKEL_PER, _at(5))) == {"2/21": "reverted"}
    assert _decisions(store)["2/21"]["fixed"] is False


def test_wrong_fixed_records_a_fix_and_unsure_changes_no_score(ner):
    spec, store = ner
    assert _decide(spec, store, _task(2, 21, MERKEL_LOC + [chose("wrong (fixed)")], _at(5))) == {
        "2/21": "fixed"
    }
    decision = _decisions(store)["2/21"]
    assert decision["fixed"] and decision["slips"] == [["Angela Merkel", "PER"]]
    assert _served(store)["1"]["score"] == pytest.approx(0.1 * 0.5)  # its repeats move up
    assert _decide(spec, store, _task(1, 11, MERKEL_PER + [chose("unsure")], _at(6))) == {
        "1/11": "unsure"
    }
    assert _served(store)["1"]["score"] == pytest.approx(0.1 * 0.5)  # unsure: as it was
    inputs = reviews.review_inputs(store)
    assert inputs["tasks"] == ["2"]  # unsure says nothing of a flag
    assert sorted(inputs["decisions"]["decision"]) == ["fixed", "unsure"]


def test_clearing_the_choice_withdraws_the_decision(ner):
    spec, store = ner
    _decide(spec, store, _task(1, 11, MERKEL_PER + [chose("correct")], _at(5)))
    _decide(spec, store, _task(2, 21, MERKEL_LOC + [chose("wrong (fixed)")], _at(5)))
    assert set(_decisions(store)) == {"1/11", "2/21"}
    assert _decide(spec, store, _task(1, 11, MERKEL_PER, _at(7))) == {"1/11": "withdrawn"}
    withdrawn = _judge(spec, store, _task(2, 21, MERKEL_LOC, _at(7)))
    assert withdrawn.made == {"2/21": "withdrawn"}
    assert _decisions(store) == {}
    assert _served(store)["1"]["score"] == 0.1  # the scout's again; the fix's slips gone
    assert reviews.fixed_slips(store).counts == {}
    assert set(withdrawn.slips) == {"Angela Merkel\0PER"}
    assert [h[3] for h in reviews.load(store)["history"]][-2:] == ["withdrawn", "withdrawn"]
    assert reviews.review_inputs(store) is None
    assert _decide(spec, store, _task(1, 11, MERKEL_PER, _at(8))) == {}  # nothing to withdraw


def test_a_task_without_regions_is_decided_too(ner):
    """NER without regions (flagged "not annotated: the scout finds ... as X"): one click
    decides it; confirmed, its prediction is empty (no entity) at score 1."""
    spec, store = ner
    assert _decide(spec, store, _task(3, 31, [chose("correct")], _at(5))) == {"3/31": "confirmed"}
    assert _served(store)["3"]["score"] == 1.0 and _served(store)["3"]["result"] == []
    assert _decisions(store)["3/31"]["labels"] == ["O"]


def test_a_fix_reverted_through_the_control_stops_counting(ner):
    spec, store = ner
    _decide(spec, store, _task(2, 21, MERKEL_LOC + [chose("wrong (fixed)")], _at(5)))
    # the labels back as they were, the choice left at wrong (fixed): a fix no more
    back = _task(2, 21, MERKEL_PER + [chose("wrong (fixed)")], _at(6))
    assert _decide(spec, store, back) == {"2/21": "reverted"}
    assert not _decisions(store)["2/21"]["fixed"] and reviews.fixed_slips(store).counts == {}
    assert reviews.review_inputs(store)["tasks"] == []
    # then found correct as it was: a confirmation, not a fix
    assert _decide(spec, store, _task(2, 21, MERKEL_PER + [chose("correct")], _at(7))) == {
        "2/21": "confirmed"
    }
    assert reviews.review_inputs(store)["fixed"] == [False]


def test_the_reviewer_is_who_saved_the_annotation():
    """Label Studio 1.23 sets ``updated_by`` on every update (null until the first) and keeps
    ``completed_by`` as who created the annotation; the rescore names both by email."""
    assert reviewer({"completed_by": 4, "updated_by": 5}) == "user 5"
    # an imported annotation: Label Studio names nobody who saved it, whatever the import claims
    assert reviewer({"completed_by": 4, "updated_by": None}) == ""
    assert reviewer({}) == ""
    (task,) = name_annotators([_task(1, 11, [], by=5, created_by=4)], {5: "rev@example.com"})
    assert reviewer(task["annotations"][0]) == "rev@example.com"
    assert task["annotations"][0]["completed_by"] == 4  # not known: left as it is


@pytest.mark.parametrize("choice", ["single", "multiple"])
def test_classification_decisions_and_the_confirmed_prediction(tmp_path, choice):
    make_app(tmp_path, retrain_after=1000)
    spec = parse_label_config(CLS.format(choice=choice))
    labels = ["sports", "politics"] if choice == "multiple" else ["sports"]
    annotated = [_choices("topic", *labels)]
    store = _publish(tmp_path / "models", spec, [_task(1, 11, annotated)], {1: 0.2})
    confirm = _task(1, 11, annotated + [chose("correct")], _at(5), by=6)
    assert _decide(spec, store, confirm) == {"1/11": "confirmed"}
    entry = _served(store)["1"]
    assert entry["score"] == 1.0
    (shown,) = entry["result"]  # the annotated choices, not the scout's "tech"
    assert shown["value"] == {"choices": labels} and shown["from_name"] == "topic"
    assert shown["meta"]["text"][0].startswith("confirmed by user 6")
    # fixed to another choice: a fix, rescored as any change
    fix = _task(1, 11, [_choices("topic", "tech"), chose("wrong (fixed)")], _at(6), by=7)
    assert _decide(spec, store, fix) == {"1/11": "fixed"}
    assert _served(store)["1"]["score"] == 0.2
    assert reviews.review_inputs(store)["labels"] == [sorted(labels)]


# ----------------------------------------------------------------------------- the report


def test_the_report_per_reviewer_with_agreement(ner):
    """Two reviewers on task 1 (one confirms, the other marks it wrong and fixes it), one on
    task 2 and 3: decisions per reviewer, the share fixed, and their agreement."""
    spec, store = ner
    _decide(spec, store, _task(1, 11, MERKEL_PER + [chose("correct")], _at(5), by=5))
    _decide(spec, store, _task(1, 11, MERKEL_LOC + [chose("wrong (fixed)")], _at(6), by=6))
    _decide(spec, store, _task(2, 21, MERKEL_PER + [chose("correct")], _at(7), by=5))
    _decide(spec, store, _task(3, 31, [chose("unsure")], _at(8), by=6))
    records = annotation_records(store.scores(store.current_version()))
    report = build_report(
        AnnotationTable.from_records(records, [f"task {r['task']}" for r in records]),
        threshold=0.5,
        reviews=reviews.review_inputs(store),
    )["reviews"]
    rows = {row["reviewer"]: row for row in report["reviewers"]}
    assert {k: rows["user 5"][k] for k in ("decided", "confirmed", "fixed", "unsure")} == {
        "decided": 2,
        "confirmed": 2,
        "fixed": 0,
        "unsure": 0,
    }
    assert rows["user 6"]["fixed_share"] == 1.0 and rows["user 6"]["unsure"] == 1
    assert (rows["user 5"]["pairs"], rows["user 5"]["agreement"]) == (1, 0.0)
    assert report["agreement"] == {"annotations": 1, "pairs": 1, "agree": 0, "share": 0.0}
    # the flag precision per label and per threshold is kept
    assert (report["reviewed"], report["fixed"]) == (2, 1)
    assert {row["label"] for row in report["by_label"]} == {"LOC", "PER"}
    assert len(report["by_threshold"]) == 10


# ----------------------------------------------------------------------------- vouched (issue 58)


def test_an_imported_choice_never_decides_however_often_it_is_read(ner):
    """The probe's attack: an annotation imported with ``completed_by`` another user and the
    choice *correct* already in it. Label Studio's import leaves ``updated_by`` null and the
    scoring read it as it is: no rescore, replayed or after a later time, confirms it."""
    spec, store = ner
    imported = _task(1, 11, MERKEL_PER + [chose("correct")], SCORED_AT, by=None, created_by=5)
    assert _decide(spec, store, imported) == {}
    later = _task(1, 11, MERKEL_PER + [chose("correct")], _at(9), by=None, created_by=5)
    for _ in range(3):  # an id-only webhook replayed: the same read, nothing new
        assert _decide(spec, store, later) == {}
    assert _decisions(store) == {} and _served(store)["1"]["score"] == 0.1


def test_a_choice_the_scoring_already_read_decides_nothing(ner):
    """A save the version scored (its ``updated_at`` is the baseline) is no decision made after
    the scoring, even with ``updated_by`` set; saved again after it, it decides once."""
    spec, store = ner
    assert _decide(spec, store, _task(1, 11, MERKEL_PER + [chose("correct")], SCORED_AT)) == {}
    after = _task(1, 11, MERKEL_PER + [chose("correct")], _at(3))
    assert _decide(spec, store, after) == {"1/11": "confirmed"}
    assert _decide(spec, store, after) == {}  # replayed
    assert _served(store)["1"]["score"] == 1.0


def test_an_annotator_choosing_correct_on_her_own_annotation_is_a_self_review(ner):
    """The annotator (``completed_by``) saving *correct* herself: kept as self-reviewed, served
    at its scout's score, never weighed as reviewed; the report counts it apart. A reviewer's
    *correct* afterwards confirms it."""
    spec, store = ner
    own = _task(1, 11, MERKEL_PER + [chose("correct")], _at(2), by=4, created_by=4)
    assert _decide(spec, store, own) == {"1/11": reviews.SELF_REVIEWED}
    kept = _decisions(store)["1/11"]
    assert (kept["chosen"], kept["self"], kept["reviewers"]) == ("confirmed", True, {})
    assert _served(store)["1"]["score"] == 0.1
    (example,) = read_tasks([own], spec).tasks[0].examples
    assert reviews.decided(store, [example], "ner") == set()  # the CRF's refit: not reviewed
    table = reviews.review_inputs(store)
    assert table["tasks"] == [] and table["decisions"]["decision"] == [reviews.SELF_REVIEWED]
    records = annotation_records(store.scores(store.current_version()))
    report_rows = build_report(
        AnnotationTable.from_records(records, [f"task {r['task']}" for r in records]),
        threshold=0.5,
        reviews=table,
    )["reviews"]["reviewers"]
    assert [(r["reviewer"], r["decided"], r["self_reviewed"]) for r in report_rows] == [
        ("user 4", 0, 1)
    ]
    # a reviewer then confirms the same content: it counts
    by_reviewer = _task(1, 11, MERKEL_PER + [chose("correct")], _at(4), by=5, created_by=4)
    assert _decide(spec, store, by_reviewer) == {"1/11": "confirmed"}
    assert _served(store)["1"]["score"] == 1.0
    # and the annotator's unchanged re-save leaves the reviewer's confirmation standing
    again = _task(1, 11, MERKEL_PER + [chose("correct")], _at(6), by=4, created_by=4)
    assert _decide(spec, store, again) == {}
    assert _decisions(store)["1/11"]["decision"] == "confirmed"


def test_a_project_may_let_annotators_review_their_own(ner):
    """``self_review`` on: the annotator's choice decides as a reviewer's, marked self."""
    spec, store = ner
    own = _task(2, 21, MERKEL_LOC + [chose("wrong (fixed)")], _at(2), by=4, created_by=4)
    made = reviews.decide(
        store, store.current_version(), spec, TaskRead.of([own], spec), allow_self=True
    )
    assert made == {"2/21": "fixed"}
    kept = _decisions(store)["2/21"]
    assert kept["self"] is True and kept["reviewers"] == {"user 4": "fixed"}
    assert reviews.fixed_slips(store).counts

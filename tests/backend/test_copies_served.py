"""Copies that disagree as the backend serves them (backend.review.copies): two tasks of the
same text labelled otherwise name each other in their predictions' notes; a confirmation of
one halves the served score of the copies that contradict it, not of those that agree; a fix
of one is suggested in the notes of its copies. Stored scores as the real parser and record
writer make them (tests/backend/test_reviews.py's); the real Label Studio round trip is
tests/labelstudio/test_copies_ls.py."""

from __future__ import annotations

import pytest

from backend.labelstudio.tasks import annotation_record, fingerprint, read_tasks
from backend.store.store import ProjectStore
from tests.backend.test_backend_server import make_app
from tests.backend.test_reviews import (
    MERKEL_LOC,
    MERKEL_PER,
    PROJECT,
    SPEC,
    _at,
    _decide,
    _publish,
    _served,
    _task,
)


def _notes(entry: dict) -> list[str]:
    return [
        text for region in entry["result"] for text in (region.get("meta") or {}).get("text", ())
    ]


@pytest.fixture
def store(tmp_path):
    make_app(tmp_path, retrain_after=1000)
    _publish(
        tmp_path / "models",
        [_task(1, [(11, MERKEL_PER)]), _task(2, [(21, MERKEL_LOC)]), _task(3, [(31, MERKEL_PER)])],
        {1: [0.4], 2: [0.6], 3: [0.8]},
    )
    return ProjectStore(tmp_path / "models", PROJECT)


def test_copies_that_disagree_name_each_other(store):
    served = _served(store)
    assert _notes(served["1"])[-1] == "task 2, the same text, labels 'Angela Merkel' as LOC"
    assert _notes(served["2"])[-1] == (
        "task 1, the same text, labels 'Angela Merkel' as PER; task 3 labels 'Angela Merkel' as PER"
    )
    assert served["2"]["copies"] == ["1", "3"]
    # the note sits on the region of the entity it is about, after the scout's own note
    (region,) = [r for r in served["1"]["result"] if r["value"]["text"] == "Angela Merkel"]
    assert region["meta"]["text"][0] == "annotated as PER (p 0.10)"
    # nothing decided: the scores are the stored ones
    assert [served[t]["score"] for t in "123"] == [0.4, 0.6, 0.8]
    stored = store.scores(store.current_version())
    assert _notes(stored["1"]) == ["annotated as PER (p 0.10)"]  # served, never stored


def test_a_confirmation_moves_up_the_copies_that_contradict_it(store):
    assert _decide(store, _task(3, [(31, MERKEL_PER, _at(5))])) == {"3/31": "confirmed"}
    served = _served(store)
    assert served["3"]["score"] == 1.0
    assert served["2"]["score"] == pytest.approx(0.6 * 0.5)  # contradicts the confirmed one
    assert served["2"]["contradicted"] == 1
    assert served["1"]["score"] == 0.4  # agrees with it
    assert _notes(served["2"])[-1].startswith(
        "task 3, the same text, labels 'Angela Merkel' as PER, confirmed by a reviewer"
    )
    # /predict serves the same
    version = store.current_version()
    assert store.scores(version)["2"]["score"] == 0.6


def test_a_fix_is_suggested_to_its_copies(store):
    """Task 2 fixed from LOC to PER in its save; once its rescore stored the new annotation,
    a copy that still says LOC (a fourth task) is told, and task 1's link to it is gone."""
    fixed = _task(2, [(21, MERKEL_PER, _at(5))])
    assert _decide(store, fixed) == {"2/21": "fixed"}
    version = store.current_version()
    (item,) = read_tasks([fixed], SPEC).tasks
    record = annotation_record(item.examples[0], "ner", 0.7, {}, 0)
    entry = {
        **store.scores(version)["2"],
        "annotations": [record],
        "fingerprint": fingerprint(item),
    }
    other = _task(4, [(41, MERKEL_LOC)])
    (item4,) = read_tasks([other], SPEC).tasks
    entry4 = {
        **entry,
        "annotations": [annotation_record(item4.examples[0], "ner", 0.9, {}, 0)],
        "score": 0.9,
    }
    store.store_scores(version, {"2": {**entry, "score": 0.7}, "4": entry4})
    served = _served(store)
    assert served["1"]["copies"] == ["4"]  # agrees with task 2 now
    # halved for the fix's slip (Angela Merkel as LOC) it repeats, and for the fixed copy
    assert served["4"]["slip_repeats"] == 1 and served["4"]["contradicted"] == 1
    assert served["4"]["score"] == pytest.approx(0.9 * 0.5 * 0.5)
    assert _notes(served["4"])[-1].startswith(
        "task 2, the same text, was fixed to label 'Angela Merkel' as PER by a reviewer: "
        "suggested here"
    )


# ------------------------------------------------------------ several labeling controls (62)

WORDS = ["Angela", "Merkel", "met", "Reuters"]
TAGS = ["B-PER", "I-PER", "O", "B-ORG"]


def _several(task: int, topic: str, tone: str) -> dict:
    """A stored entry of a project weighing 'ner' (Labels), 'topic' and 'tone' (Choices), as
    backend.serving.controls.merge_entries makes it: records and regions naming their control."""
    text = " ".join(WORDS)
    return {
        "score": 0.5,
        "annotations": [
            {"id": task, "words": WORDS, "tags": TAGS, "score": 0.5, "control": "ner"},
            {"id": task, "text": text, "label": topic, "score": 0.5, "control": "topic"},
            {"id": task, "text": text, "label": tone, "score": 0.5, "control": "tone"},
        ],
        "result": [
            {"from_name": "ner", "type": "labels", "value": {"text": "Angela Merkel"}},
            {"from_name": "ner", "type": "labels", "value": {"text": "Reuters"}},
            {"from_name": "topic", "type": "choices", "value": {"choices": [topic]}},
            {"from_name": "tone", "type": "choices", "value": {"choices": [tone]}},
        ],
        "controls": {"ner": 0.5, "topic": 0.5, "tone": 0.5},
    }


def test_several_controls_link_copies_by_one_control_at_a_time():
    """Two tasks of the same text and entities, one control labelling them otherwise: linked
    on that control alone, its note on that control's region and naming it; one control's
    labels are never read against another's."""
    from backend.review.copies import CopiesState, index, with_notes

    scores = {"1": _several(1, "politics", "formal"), "2": _several(2, "sports", "formal")}
    linked = index(scores)
    assert [(g.control, g.kind, g.key) for g in linked.groups] == [
        ("topic", "text", "Angela Merkel met Reuters")
    ]
    served = with_notes("1", scores["1"], CopiesState(linked))
    by_control = {r["from_name"]: (r.get("meta") or {}).get("text") for r in served["result"]}
    assert by_control == {
        "ner": None,
        "topic": ["topic: task 2, the same text, is annotated sports"],
        "tone": None,
    }
    assert served["copies"] == ["2"]
    # the same topic, another tone: the tone's copies, not a mix of both controls' classes
    scores = {"1": _several(1, "sports", "formal"), "2": _several(2, "sports", "casual")}
    served = with_notes("2", scores["2"], CopiesState(index(scores)))
    notes = [t for r in served["result"] for t in (r.get("meta") or {}).get("text", ())]
    assert notes == ["tone: task 1, the same text, is annotated formal"]

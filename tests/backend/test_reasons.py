"""The reason a task's data carries (``srw_reason``, issue 61): the served note's first
sentence, capped; the rule that keeps a task's other data fields as Label Studio stores them."""

from __future__ import annotations

from backend.labelstudio.convert import labels_result
from backend.review.served import confirmed_result
from backend.serving.reasons import MAX_CHARS, _writable, first_sentence, reason
from subregweigh.io.labelstudio import REASON_FIELD, LabelingSpec, parse_tasks

TEXT = "Paris is where Reuters met Monday ."


def ner_entry(notes, scores, score=0.04):
    spans = [(0, 5, "LOC"), (15, 22, "ORG")]
    return {
        "result": labels_result(TEXT, spans, "label", "text", scores, notes),
        "score": score,
        "annotations": [{"score": score}],
    }


def test_the_lowest_scored_noted_region_gives_the_reason_with_its_words():
    entry = ner_entry(
        ["annotated as ORG (p 0.04); the scout says LOC (p 0.94)", "not annotated. More."],
        [0.94, 0.81],
    )
    assert reason(entry) == (
        'score 0.04: "Reuters": not annotated (+1 more on the prediction\'s regions)'
    )
    entry = ner_entry(["annotated as ORG (p 0.04); the scout says LOC (p 0.94)", None], [0.1, 0.9])
    assert reason(entry) == "score 0.04: annotated as ORG (p 0.04); the scout says LOC (p 0.94)"


def test_a_confirmed_task_says_who_confirmed_it_once():
    decision = {
        "reviewer": "lead@example.com",
        "saved_at": "2026-12-03T15:00:00Z",
        "decision": "confirmed",
        "result": ner_entry(None, None)["result"],
    }
    entry = {
        "result": confirmed_result(decision),
        "score": 1.0,
        "annotations": [{}],
        "confirmed": 1,
    }
    entry["result"][1]["meta"]["text"].append("task 11 labels 'Reuters' as PER")  # a copy's
    text = reason(entry)
    assert text.startswith("score 1.00: confirmed by lead@example.com on 2026-12-03")
    assert "Paris" not in text and "more" not in text and "task 11" not in text
    assert reason({**entry, "result": []}) == "score 1.00: confirmed by a reviewer"


def test_the_notes_a_region_gathered_read_as_one_line_each_its_first_sentence():
    """A region's ``meta.text`` holds the scout's note and those added after it (a copy that
    disagrees): each is a clause of the reason, not run into the one before."""
    entry = ner_entry(["annotated as ORG (p 0.04); the CRF says LOC. More.", None], [0.1, 0.9])
    entry["result"][0]["meta"]["text"].append("task 11 labels 'Paris' as LOC")
    assert reason(entry) == (
        "score 0.04: annotated as ORG (p 0.04); the CRF says LOC; task 11 labels 'Paris' as LOC"
    )


def test_no_note_and_no_annotation_say_so():
    assert reason(ner_entry(None, [0.9, 0.9], 0.93)) == (
        "score 0.93: the scout agrees with the annotation"
    )
    unannotated = {"result": [], "score": 0.5}
    assert reason(unannotated).startswith("score 0.50: not annotated")


def test_a_long_note_is_cut_to_the_cap():
    entry = ner_entry(["x" * 1000, None], [0.1, 0.9])
    text = reason(entry)
    assert len(text) == MAX_CHARS and text.endswith("…")
    assert first_sentence("a (p 0.04); b. c") == "a (p 0.04); b."


def test_only_data_label_studio_stores_as_shown_is_sent_back():
    assert _writable({"text": TEXT, REASON_FIELD: "old"})
    assert not _writable({"$undefined$": TEXT})
    assert not _writable({"text": "s3://bucket/doc.txt"})
    assert not _writable(None)


def test_a_task_with_the_reason_field_still_reads_its_only_text():
    """An export read without its config (no data key) takes the task's only string field."""
    annotation = {"id": 7, "result": [], "was_cancelled": False}
    data = {"text": "Paris here", REASON_FIELD: "score 0.04: ..."}
    task = {"id": 1, "data": data, "annotations": [annotation]}
    parsed = parse_tasks([task], LabelingSpec(task="ner", from_name="label"), strict=True)
    ((example,),) = [item.examples for item in parsed.tasks]
    assert example.words == ("Paris", "here")

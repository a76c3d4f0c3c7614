"""backend.labelstudio.tasks: labeling configs and Label Studio task dicts -> engine examples
(through the engine's Label Studio parser, read the backend's way: every annotation, problems
skipped)."""

from __future__ import annotations

import copy

import pytest

from backend.labelstudio.tasks import (
    ConfigError,
    fingerprint,
    parse_label_config,
    read_tasks,
    weighed,
)
from subregweigh.io.labelstudio import LabelingSpec

NER_CONFIG = """
<View>
  <Labels name="label" toName="text">
    <Label value="PER" background="red"/>
    <Label value="ORG" background="darkorange"/>
    <Label value="LOC" background="orange"/>
    <Label value="MISC" background="green"/>
  </Labels>
  <Text name="text" value="$text"/>
</View>
"""

SINGLE_CHOICE = """
<View>
  <Text name="review" value="$sentence"/>
  <Choices name="sentiment" toName="review" choice="single-radio">
    <Choice value="positive"/>
    <Choice value="negative"/>
  </Choices>
</View>
"""

MULTI_CHOICE = """
<View>
  <Text name="text" value="$text"/>
  <Choices name="topic" toName="text" choice="multiple">
    <Choice value="sports"/>
    <Choice value="politics"/>
    <Choice value="science"/>
  </Choices>
</View>
"""

IMAGE_CONFIG = """
<View>
  <Image name="image" value="$image"/>
  <RectangleLabels name="label" toName="image">
    <Label value="Car"/>
  </RectangleLabels>
</View>
"""

TWO_CONTROLS = """
<View>
  <Text name="text" value="$text"/>
  <Labels name="label" toName="text"><Label value="PER"/></Labels>
  <Choices name="sentiment" toName="text"><Choice value="positive"/></Choices>
</View>
"""

LABELS_NOT_ON_TEXT = """
<View>
  <Text name="text" value="$text"/>
  <Labels name="label" toName="elsewhere"><Label value="PER"/></Labels>
</View>
"""


# ----------------------------------------------------------------------------- parse_label_config


def test_parse_ner_config():
    spec = parse_label_config(NER_CONFIG)
    assert spec == LabelingSpec(
        task="ner",
        from_name="label",
        to_name="text",
        data_key="text",
        labels=("PER", "ORG", "LOC", "MISC"),
        multi_label=False,
    )


def test_parse_single_choice_config():
    spec = parse_label_config(SINGLE_CHOICE)
    assert spec.task == "classification"
    assert (spec.from_name, spec.to_name, spec.data_key) == ("sentiment", "review", "sentence")
    assert spec.labels == ("positive", "negative")
    assert spec.multi_label is False


def test_parse_multiple_choice_config():
    spec = parse_label_config(MULTI_CHOICE)
    assert spec.task == "classification"
    assert spec.labels == ("sports", "politics", "science")
    assert spec.multi_label is True


def test_image_config_rejected_with_reason():
    with pytest.raises(ConfigError) as err:
        parse_label_config(IMAGE_CONFIG)
    message = str(err.value)
    assert "a Labels (NER) or Choices (classification) control on a Text" in message
    assert "'label' (RectangleLabels)" in message
    assert "<" not in message and ">" not in message  # Label Studio strips tags from messages


def test_two_controls_are_each_weighed():
    spec = parse_label_config(TWO_CONTROLS)
    assert [(s.from_name, s.task) for s in spec.each()] == [
        ("label", "ner"),
        ("sentiment", "classification"),
    ]
    assert [c.name for c in spec.each()[0].ignored] == ["sentiment"]
    assert [c.name for c in spec.each()[1].ignored] == ["label"]


def test_labels_not_pointing_to_the_text_rejected():
    with pytest.raises(
        ConfigError, match=r"'label' \(Labels\) labels 'elsewhere', which the config does not have"
    ):
        parse_label_config(LABELS_NOT_ON_TEXT)


@pytest.mark.parametrize("config", ["", "   \n\t", None])
def test_empty_config_rejected(config):
    with pytest.raises(ConfigError, match="no labeling config"):
        parse_label_config(config)


@pytest.mark.parametrize(
    "config",
    [
        '<View><Text name="text" value="$text"></View>',
        "not xml at all <<<",
        '<View><Labels name="label" toName="text"><Label value="PER"/></Labels><Text name="text" '
        'value="$text"/>',
    ],
)
def test_invalid_xml_rejected(config):
    with pytest.raises(ConfigError, match="not valid XML"):
        parse_label_config(config)


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def test_labels_without_label_values_rejected():
    config = (
        '<View><Text name="text" value="$text"/><Labels name="label" toName="text"></Labels></View>'
    )
    with pytest.raises(ConfigError, match="has no labels"):
        parse_label_config(config)


def test_text_without_dollar_field_rejected():
    config = (
        '<View><Text name="text" value="text"/>'
        '<Labels name="label" toName="text"><Label value="PER"/></Labels></View>'
    )
    with pytest.raises(ConfigError, match=r'value="\$field"'):
        parse_label_config(config)


def test_extra_control_left_alone():
    config = (
        '<View><Text name="text" value="$text"/>'
        '<Labels name="label" toName="text"><Label value="PER"/></Labels>'
        '<TextArea name="comment" toName="text"/></View>'
    )
    spec = parse_label_config(config)
    assert (spec.task, spec.from_name) == ("ner", "label")
    assert [(c.name, c.tag) for c in spec.ignored] == [("comment", "TextArea")]


# ----------------------------------------------------------------------------- read_tasks


def task_examples(task, spec):
    """One task read the backend's way: (the task read, or None if skipped; the warnings)."""
    parsed = read_tasks([task], spec)
    return parsed.tasks[0], parsed.warnings


NER = parse_label_config(NER_CONFIG)
SINGLE = parse_label_config(SINGLE_CHOICE)
MULTI = parse_label_config(MULTI_CHOICE)

TEXT = "Angela Merkel visited Zürich on Monday."
#       0      7      14      22     29 32


def region(start, end, label, from_name="label", rid="r1"):
    return {
        "id": rid,
        "from_name": from_name,
        "to_name": "text",
        "type": "labels",
        "origin": "manual",
        "value": {"start": start, "end": end, "text": TEXT[start:end], "labels": [label]},
    }


def choices(*values, from_name="sentiment", to_name="review", **extra):
    """A Choices region choosing ``values``, of SINGLE_CHOICE's control unless told."""
    return {
        "from_name": from_name,
        "to_name": to_name,
        "type": "choices",
        "value": {"choices": list(values)},
        **extra,
    }


def ner_task(task_id=1, annotations=(), text=TEXT, **extra):
    task = {
        "id": task_id,
        "data": {"text": text},
        "annotations": list(annotations),
        "predictions": [],
        "project": 3,
        "created_at": "2026-01-01T00:00:00Z",
    }
    task.update(extra)
    return task


def annotation(ann_id, result, **extra):
    ann = {
        "id": ann_id,
        "completed_by": 1,
        "result": result,
        "was_cancelled": False,
        "ground_truth": False,
        "created_at": "2026-01-02T10:00:00Z",
        "lead_time": 12.5,
    }
    ann.update(extra)
    return ann


GOOD = [region(0, 13, "PER", rid="a"), region(22, 28, "LOC", rid="b")]
GOOD_TAGS = ("B-PER", "I-PER", "O", "B-LOC", "O", "O", "O")


def test_single_ner_annotation():
    item, warnings = task_examples(ner_task(1, [annotation(10, GOOD)]), NER)
    assert warnings == []
    assert item.id == "1" and item.text == TEXT and item.examples
    assert [w for w, _, _ in item.words] == [
        "Angela",
        "Merkel",
        "visited",
        "Zürich",
        "on",
        "Monday",
        ".",
    ]
    assert len(item.examples) == 1
    ex = item.examples[0]
    assert ex.id == "1/10"
    assert ex.words == ("Angela", "Merkel", "visited", "Zürich", "on", "Monday", ".")
    assert ex.label == GOOD_TAGS


def test_annotation_with_no_regions_is_all_o():
    item, warnings = task_examples(ner_task(2, [annotation(11, [])]), NER)
    assert item.examples and item.examples[0].label == ("O",) * 7
    assert warnings == []


def test_cancelled_annotations_skipped():
    task = ner_task(4, [annotation(20, GOOD, was_cancelled=True), annotation(21, GOOD)])
    item, warnings = task_examples(task, NER)
    assert [ex.id for ex in item.examples] == ["4/21"]
    assert warnings == []


def test_only_cancelled_annotations_means_unannotated():
    item = task_examples(ner_task(5, [annotation(22, GOOD, was_cancelled=True)]), NER)[0]
    assert not item.examples
    assert [(ex.id, ex.label) for ex in weighed(item)] == [("5", ())]


def test_unknown_label_skips_that_annotation_with_warning():
    bad = [region(0, 13, "PERSON")]
    task = ner_task(6, [annotation(30, bad), annotation(31, GOOD)])
    item, warnings = task_examples(task, NER)
    assert [ex.id for ex in item.examples] == ["6/31"]
    assert len(warnings) == 1
    assert "task 6" in warnings[0] and "annotation 30" in warnings[0]
    assert "'PERSON'" in warnings[0] and "skipped" in warnings[0]


def test_unknown_choice_skips_that_annotation_with_warning():
    task = {
        "id": 7,
        "data": {"sentence": "great film"},
        "annotations": [
            annotation(40, [choices("neutral")]),
            annotation(41, [choices("positive")]),
        ],
    }
    item, warnings = task_examples(task, SINGLE)
    assert [(ex.id, ex.label) for ex in item.examples] == [("7/41", ("positive",))]
    assert len(warnings) == 1 and "task 7" in warnings[0] and "annotation 40" in warnings[0]
    assert "'neutral'" in warnings[0]


def test_region_without_offsets_skips_annotation():
    bad = [
        {"from_name": "label", "to_name": "text", "type": "labels", "value": {"labels": ["PER"]}}
    ]
    item, warnings = task_examples(ner_task(8, [annotation(50, bad)]), NER)
    assert not item.examples
    assert len(warnings) == 1 and "task 8: annotation 50" in warnings[0]


def test_regions_of_other_controls_ignored():
    other = dict(region(0, 13, "Whatever"), from_name="relations_or_other")
    item = task_examples(ner_task(9, [annotation(51, GOOD + [other])]), NER)[0]
    assert item.examples[0].label == GOOD_TAGS


def test_span_warnings_name_task_and_annotation():
    cut = [region(24, 27, "LOC")]  # "ric" inside Zürich
    item, warnings = task_examples(ner_task(12, [annotation(60, cut)]), NER)
    assert item.examples[0].label == ("O", "O", "O", "B-LOC", "O", "O", "O")
    assert (
        len(warnings) == 1 and "task 12: annotation 60" in warnings[0] and "widened" in warnings[0]
    )


def test_missing_text_field_skips_task_with_warning():
    task = {"id": 13, "data": {"body": TEXT}, "annotations": [annotation(70, GOOD)]}
    item, warnings = task_examples(task, NER)
    assert item is None
    assert len(warnings) == 1
    assert "task 13" in warnings[0] and "'text'" in warnings[0] and "skipped" in warnings[0]
    assert "body" in warnings[0]  # says which fields the task has


@pytest.mark.parametrize("data", [None, "a string", 5, {"text": None}, {"text": 12}])
def test_unusable_data_skips_task_with_warning(data):
    task = {"id": 14, "data": data}
    item, warnings = task_examples(task, NER)
    assert item is None
    assert len(warnings) == 1 and "task 14" in warnings[0] and "skipped" in warnings[0]


@pytest.mark.parametrize("text", ["", "   ", "\n\t "])
def test_empty_text_skipped(text):
    item, warnings = task_examples(ner_task(15, [annotation(80, [])], text=text), NER)
    assert item is None
    assert len(warnings) == 1 and "task 15" in warnings[0] and "empty text" in warnings[0]


def test_multiple_annotators_one_example_each():
    other = [region(0, 6, "PER", rid="c"), region(22, 28, "ORG", rid="d")]
    task = ner_task(
        16,
        [
            annotation(90, GOOD, completed_by=1),
            annotation(91, other, completed_by=2),
            annotation(92, [], completed_by=3),
        ],
    )
    item = task_examples(task, NER)[0]
    assert item.examples
    assert [ex.id for ex in item.examples] == ["16/90", "16/91", "16/92"]
    assert item.examples[0].label == GOOD_TAGS
    assert item.examples[1].label == ("B-PER", "O", "O", "B-ORG", "O", "O", "O")
    assert item.examples[2].label == ("O",) * 7
    assert len({ex.words for ex in item.examples}) == 1


@pytest.mark.parametrize("annotations", [[], None])
def test_unannotated_task_one_unlabeled_example(annotations):
    task = ner_task(17)
    task["annotations"] = annotations
    item = task_examples(task, NER)[0]
    assert not item.examples
    assert len(weighed(item)) == 1
    assert weighed(item)[0].id == "17" and weighed(item)[0].label == ()
    assert len(weighed(item)[0].words) == 7


def test_task_without_annotations_key():
    item = task_examples({"id": 18, "data": {"text": "hello world"}}, NER)[0]
    assert not item.examples and weighed(item)[0].label == ()


def test_classification_single_and_multi():
    single = {
        "id": 19,
        "data": {"sentence": "A fine, moving film."},
        "annotations": [annotation(100, [choices("positive")])],
    }
    item = task_examples(single, SINGLE)[0]
    assert item.examples[0].label == ("positive",)
    # Classification words are the text's whitespace words, as the command line and the TSV and
    # JSONL readers make them (NER splits punctuation off, for character spans).
    assert item.examples[0].words == ("A", "fine,", "moving", "film.")

    multi = {
        "id": 20,
        "data": {"text": "Election results and a football match"},
        "annotations": [
            annotation(101, [choices("sports", "politics", from_name="topic", to_name="text")])
        ],
    }
    assert task_examples(multi, MULTI)[0].examples[0].label == ("politics", "sports")


def test_two_choices_in_a_single_choice_config_skipped():
    task = {
        "id": 21,
        "data": {"sentence": "meh"},
        "annotations": [annotation(102, [choices("positive", "negative")])],
    }
    item, warnings = task_examples(task, SINGLE)
    assert not item.examples
    assert len(warnings) == 1 and "task 21: annotation 102" in warnings[0]


def test_long_text_100k_characters():
    sentence = "Angela Merkel visited Zürich on Monday, 2024-05-01. "
    text = (sentence * (100_000 // len(sentence) + 1))[:100_000]
    assert len(text) == 100_000
    spans = [region(0, 13, "PER"), region(99_000, 99_010, "MISC", rid="z")]
    item, warnings = task_examples(ner_task(22, [annotation(110, spans)], text=text), NER)
    assert len(item.words) > 15_000
    assert len(item.examples[0].label) == len(item.words)
    assert item.examples[0].label[:2] == ("B-PER", "I-PER")
    assert sum(tag.startswith("B-") for tag in item.examples[0].label) == 2
    assert all("widened" in w for w in warnings)


# ----------------------------------------------------------------------------- fingerprint


def _fp(task, spec=NER):
    return fingerprint(task_examples(task, spec)[0])


def test_fingerprint_changes_with_label():
    task = ner_task(30, [annotation(200, GOOD)])
    changed = copy.deepcopy(task)
    changed["annotations"][0]["result"][1]["value"]["labels"] = ["ORG"]
    assert _fp(task) != _fp(changed)


def test_fingerprint_changes_with_span_text_and_annotations():
    task = ner_task(31, [annotation(201, GOOD)])
    base = _fp(task)
    moved = copy.deepcopy(task)
    moved["annotations"][0]["result"][0]["value"]["end"] = 6  # "Angela" only
    assert _fp(moved) != base
    retyped = copy.deepcopy(task)
    retyped["data"]["text"] = TEXT.replace("Monday", "Friday")
    assert _fp(retyped) != base
    added = copy.deepcopy(task)
    added["annotations"].append(annotation(202, GOOD))
    assert _fp(added) != base
    cancelled = copy.deepcopy(task)
    cancelled["annotations"][0]["was_cancelled"] = True
    assert _fp(cancelled) != base


def test_fingerprint_ignores_unrelated_keys():
    task = ner_task(32, [annotation(203, GOOD)])
    base = _fp(task)
    other = copy.deepcopy(task)
    other["created_at"] = "2030-12-31T23:59:59Z"
    other["updated_at"] = "2030-12-31T23:59:59Z"
    other["predictions"] = [{"id": 1, "result": [], "score": 0.1}]
    ann = other["annotations"][0]
    ann["created_at"] = ann["updated_at"] = "2031-01-01T00:00:00Z"
    ann["lead_time"] = 99.0
    ann["completed_by"] = 7
    for i, r in enumerate(ann["result"]):
        r["id"] = f"renamed-{i}"
        r["origin"] = "prediction-changed"
    ann["result"].reverse()  # region order does not matter
    assert _fp(other) == base


def test_fingerprint_classification_label_change():
    def task(choice):
        return {
            "id": 33,
            "data": {"sentence": "ok"},
            "annotations": [annotation(204, [choices(choice, id="x")])],
        }

    assert _fp(task("positive"), SINGLE) != _fp(task("negative"), SINGLE)
    t2 = task("positive")
    t2["annotations"][0]["result"][0]["id"] = "y"
    t2["annotations"][0]["created_at"] = "later"
    assert _fp(task("positive"), SINGLE) == _fp(t2, SINGLE)


def test_a_task_beyond_what_one_task_may_cost_is_skipped_with_a_note():
    """Issue 58: one saved annotation of 5,000 regions on a 1 MB task cost the backend minutes of
    CPU. Beyond MAX_TASK_CHARS characters or MAX_TASK_REGIONS regions a task is skipped, its
    warning naming it and the bound; the tasks beside it are read."""
    from backend.labelstudio.tasks import MAX_TASK_CHARS, MAX_TASK_REGIONS

    word = "Zebulon "
    long_text = word * (1_000_000 // len(word))
    regions = [
        {**region(0, 7, "PER", rid=f"r{i}"), "value": {"start": s, "end": s + 7, "labels": ["PER"]}}
        for i, s in enumerate(range(0, 5_000 * len(word), len(word)))
    ]
    many = word * (MAX_TASK_REGIONS + 1)
    tasks = [
        ner_task(1, [annotation(10, regions)], text=long_text),
        ner_task(2, [annotation(20, regions[: MAX_TASK_REGIONS + 1])], text=many),
        ner_task(3, [annotation(30, GOOD)]),
    ]
    parsed = read_tasks(tasks, NER)
    assert parsed.tasks[0] is None and parsed.tasks[1] is None
    assert parsed.tasks[2].examples[0].label == GOOD_TAGS
    assert len(long_text) > MAX_TASK_CHARS > len(many)
    assert any(
        w.startswith("task 1:") and f"more than the {MAX_TASK_CHARS:,}" in w
        for w in parsed.warnings
    )
    assert any(
        w.startswith("task 2:") and f"{MAX_TASK_REGIONS + 1:,} regions" in w
        for w in parsed.warnings
    )


def test_spans_map_to_words_by_bisection_as_by_scanning():
    """The span mapping is linear in words and regions (issue 58); it tags as a scan of every
    word for every span does, cut words widened and overlaps dropped alike."""
    from subregweigh.spans import spans_to_tags, words_with_offsets

    text = "Angela Merkel met Xi Jinping in Beijing, China; Merkel-Xi talks."
    spans = [(0, 13, "PER"), (18, 20, "PER"), (19, 27, "PER"), (31, 36, "LOC"), (48, 54, "PER")]
    words, tags, warnings = spans_to_tags(text, spans)
    scanned = ["O"] * len(words)
    taken = [False] * len(words)
    for start, end, label in sorted(spans, key=lambda s: (s[0], -(s[1] - s[0]))):
        covered = [i for i, (_, ws, we) in enumerate(words) if ws < end and we > start]
        if covered and not any(taken[i] for i in covered):
            for i in covered:
                taken[i] = True
                scanned[i] = ("B-" if i == covered[0] else "I-") + label
    assert words == words_with_offsets(text) and tags == scanned
    assert tags[:2] == ["B-PER", "I-PER"] and "B-LOC" in tags  # Beijing, widened from "Beiji"
    assert any("overlaps" in w for w in warnings) and any("cuts a word" in w for w in warnings)

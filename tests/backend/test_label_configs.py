"""Labeling configs as teams make them (issue 62): a comment box, a quality flag, a title beside
the body, several labeling controls. The backend weighs one Labels or Choices control on a Text
(the only one, or the one the project's ``weigh_controls`` names), leaves every other control
alone when it reads tasks, and refuses what it cannot weigh with a message that names the
controls in words, since Label Studio strips whatever looks like a tag from what it shows.

The configs marked "template" are Label Studio 1.23.2's own templates (label_studio/
annotation_templates/natural-language-processing/*/config.yml), as a new project gets them."""

from __future__ import annotations

import html
import re

import pytest

from backend.config.project_settings import parse_extra_params
from backend.config.settings import BY_NAME, SCORING, Settings, SettingsError
from backend.labelstudio.tasks import (
    ConfigError,
    TaskRead,
    annotation_record,
    fingerprint,
    parse_label_config,
    read_tasks,
    weighed_controls,
)
from backend.review import reviews
from backend.serving import predictions
from backend.serving.controls import fingerprints, merge_entries, read_each
from backend.serving.publish import version_meta
from backend.serving.report import project_report, render
from backend.store.store import ProjectStore
from subregweigh.io.atomic import atomic_write_json

# template: content moderation, a multi-label Choices with a comment box
CONTENT_MODERATION = """
<View>
  <Text name="text" value="$text"/>

  <Choices name="content_moderation" toName="text" choice="multiple" showInline="false">
    <Choice value="Toxic" background="red"/>
    <Choice value="Severely Toxic" background="brown"/>
    <Choice value="Obscene" background="green"/>
    <Choice value="Threat" background="blue"/>
    <Choice value="Insult" background="orange"/>
    <Choice value="Hate" background="grey"/>
  </Choices>

  <View style="margin: var(--spacing-tight); padding: var(--spacing-tight);">
    <Header value="Please provide additional comments"/>
    <TextArea name="comments" toName="text" required="false"/>
  </View>
</View>
"""

# template: question answering, two Text objects (the passage and the question), one labeled
QUESTION_ANSWERING = """
<View>
  <Header value="Please read the passage" />
  <Text name="text" value="$text" granularity="word"/>
  <Header value="Select a text span answering the following question:"/>
  <Text name="question" value="$question"/>

  <Labels name="answer" toName="text">
    <Label value="Answer" maxUsage="1" background="red"/>
  </Labels>
</View>
"""

# template: relation extraction, Relations beside the Labels
RELATION_EXTRACTION = """
<View>
   <Relations>
    <Relation value="org:founded_by"/>
    <Relation value="org:founded"/>
  </Relations>
  <Labels name="label" toName="text">
    <Label value="Organization" background="orange"/>
    <Label value="Person" background="green"/>
    <Label value="Datetime" background="blue"/>
  </Labels>

  <Text name="text" value="$text"/>
</View>
"""

# NER with what an annotation team adds: a comment box, a quality flag, a rating, a number
NER_WITH_EXTRAS = """
<View>
  <Labels name="ner" toName="text">
    <Label value="PER"/><Label value="ORG"/><Label value="LOC"/><Label value="MISC"/>
  </Labels>
  <Text name="text" value="$text"/>
  <Choices name="flag" toName="text" choice="single">
    <Choice value="fine"/><Choice value="unclear"/><Choice value="broken text"/>
  </Choices>
  <TextArea name="comment" toName="text" placeholder="anything odd?"/>
  <Rating name="difficulty" toName="text" maxRating="5"/>
  <Number name="minutes" toName="text" min="0"/>
  <DateTime name="seen" toName="text" only="date"/>
</View>
"""

# a title and a body, the entities on the body, a class of the whole article on the title
TITLE_AND_BODY = """
<View>
  <Header value="$title"/>
  <Text name="title" value="$title"/>
  <Text name="body" value="$body"/>
  <Labels name="entities" toName="body"><Label value="PER"/><Label value="LOC"/></Labels>
  <TextArea name="note" toName="title"/>
</View>
"""

TWO_LABELS = """
<View>
  <Text name="text" value="$text"/>
  <Labels name="persons" toName="text"><Label value="PER"/></Labels>
  <Labels name="places" toName="text"><Label value="LOC"/><Label value="GPE"/></Labels>
</View>
"""


def survives_tag_stripping(message: str) -> bool:
    """What Label Studio shows of ``message`` is all of it: nothing that looks like a tag."""
    return re.search(r"<[^<>]*>", message) is None and "<" not in message


def test_a_comment_box_is_left_alone():
    spec = parse_label_config(CONTENT_MODERATION)
    assert (spec.task, spec.from_name, spec.to_name, spec.data_key) == (
        "classification",
        "content_moderation",
        "text",
        "text",
    )
    assert spec.multi_label and len(spec.labels) == 6
    assert [(c.name, c.tag, c.to_name) for c in spec.ignored] == [
        ("comments", "TextArea", ("text",))
    ]


def test_a_second_text_object_is_left_alone():
    spec = parse_label_config(QUESTION_ANSWERING)
    assert (spec.from_name, spec.to_name, spec.data_key) == ("answer", "text", "text")
    assert spec.ignored == ()
    # the title and body: the labeled one's field is read, the other's never
    spec = parse_label_config(TITLE_AND_BODY)
    assert (spec.from_name, spec.to_name, spec.data_key) == ("entities", "body", "body")
    assert [(c.name, c.tag) for c in spec.ignored] == [("note", "TextArea")]


def test_relations_are_left_alone():
    spec = parse_label_config(RELATION_EXTRACTION)
    assert (spec.task, spec.from_name, spec.labels) == (
        "ner",
        "label",
        ("Organization", "Person", "Datetime"),
    )


def test_a_flag_beside_the_labels_is_weighed_too_unless_one_is_chosen():
    spec = parse_label_config(NER_WITH_EXTRAS)
    assert spec.several and [(s.from_name, s.task) for s in spec.each()] == [
        ("ner", "ner"),
        ("flag", "classification"),
    ]
    ner, flag = spec.each()
    assert ner == parse_label_config(NER_WITH_EXTRAS, ("ner",))  # each a one-control spec
    assert flag == parse_label_config(NER_WITH_EXTRAS, ("flag",))
    described = spec.controls()
    assert [c["name"] for c in described["weighed"]] == ["ner", "flag"]
    assert {c["name"] for c in described["ignored"]} == {"comment", "difficulty", "minutes", "seen"}
    assert described["summary"].startswith(
        "weighed: 'ner' (Labels) on 'text', 'flag' (Choices) on 'text'; left alone: 'comment'"
    )
    said = weighed_controls(spec)
    assert said == "two labeling controls, 'ner' (Labels) and 'flag' (Choices)"
    assert survives_tag_stripping(said) and survives_tag_stripping(described["summary"])


@pytest.mark.parametrize("chosen, task", [("ner", "ner"), ("flag", "classification")])
def test_weigh_controls_chooses_one(chosen, task):
    spec = parse_label_config(NER_WITH_EXTRAS, (chosen,))
    assert (spec.from_name, spec.task) == (chosen, task)
    left = {c.name: c.tag for c in spec.ignored}
    every = {
        "ner": "Labels",
        "flag": "Choices",
        "comment": "TextArea",
        "difficulty": "Rating",
        "minutes": "Number",
        "seen": "DateTime",
    }
    assert left == {name: tag for name, tag in every.items() if name != chosen}
    described = spec.controls()
    assert described["weighed"] == [{"name": chosen, "type": spec.control.tag, "to_name": ["text"]}]
    assert {c["name"] for c in described["ignored"]} == set(left)
    assert described["summary"].startswith(f"weighed: {chosen!r} ({spec.control.tag}) on 'text'")


def test_two_labels_are_both_weighed_until_one_is_chosen():
    spec = parse_label_config(TWO_LABELS)
    assert [(s.from_name, s.labels) for s in spec.each()] == [
        ("persons", ("PER",)),
        ("places", ("LOC", "GPE")),
    ]
    said = "two labeling controls, 'persons' (Labels) and 'places' (Labels)"
    assert weighed_controls(spec) == said
    spec = parse_label_config(TWO_LABELS, ("places",))
    assert (spec.from_name, spec.labels, spec.several) == ("places", ("LOC", "GPE"), False)
    assert [c.name for c in spec.ignored] == ["persons"]
    both = parse_label_config(TWO_LABELS, ("places", "persons"))  # in the order named
    assert [s.from_name for s in both.each()] == ["places", "persons"]


@pytest.mark.parametrize(
    "weigh, said",
    [
        (
            ("nowhere",),
            "weigh_controls names 'nowhere', a control the labeling config does not "
            "have (its labeling controls: 'ner' (Labels) and 'flag' (Choices))",
        ),
        (("comment",), "'comment' (TextArea) is not one"),
        (("ner", "flag", "ner"), "weigh_controls names 'ner' twice"),
        (("srw_review",), "'srw_review', the review control"),
    ],
)
def test_a_weigh_controls_that_cannot_be_weighed_is_refused(weigh, said):
    with pytest.raises(ConfigError) as err:
        parse_label_config(NER_WITH_EXTRAS, weigh)
    assert said in str(err.value)
    assert survives_tag_stripping(str(err.value))


def test_a_weigh_controls_of_the_only_control_changes_nothing():
    assert parse_label_config(CONTENT_MODERATION, ("content_moderation",)) == parse_label_config(
        CONTENT_MODERATION
    )
    with pytest.raises(ConfigError, match="'nope', a control the labeling config does not have"):
        parse_label_config(CONTENT_MODERATION, ("nope",))


@pytest.mark.parametrize(
    "config",
    [
        '<View><Image name="image" value="$image"/><Choices name="c" toName="image">'
        '<Choice value="car"/></Choices></View>',
        '<View><Text name="a" value="$a"/><Text name="b" value="$b"/>'
        '<Choices name="c" toName="a,b"><Choice value="x"/></Choices></View>',
        '<View><Text name="text" value="$text"/><Labels name="l" toName="text"></Labels></View>',
        '<View><Text name="text" value="text"/><Labels name="l" toName="text"><Label value="X"/>'
        "</Labels></View>",
        '<View><Text name="text" value="$text"/><Labels name="srw_review" toName="text">'
        '<Label value="X"/></Labels></View>',
        '<View><Text name="text" value="$text"></View>',
        "not xml at all <<<",
        "<View></View>",
    ],
)
def test_every_refusal_survives_label_studios_display(config):
    with pytest.raises(ConfigError) as err:
        parse_label_config(config)
    assert survives_tag_stripping(str(err.value)), str(err.value)


def test_a_control_on_no_text_is_named_with_where_it_points():
    config = (
        '<View><Image name="image" value="$image"/><Choices name="kind" toName="image">'
        '<Choice value="car"/></Choices><TextArea name="why" toName="image"/></View>'
    )
    with pytest.raises(
        ConfigError, match="'kind' \\(Choices\\) labels the Image 'image', not a Text"
    ):
        parse_label_config(config)


# ----------------------------------------------------------------------------- reading tasks

TEXT = "Merkel visited Paris ."


def _region(from_name, kind, value, to_name="text"):
    return {
        "id": f"{from_name}-r",
        "from_name": from_name,
        "to_name": to_name,
        "type": kind,
        "value": value,
    }


TEAM_ANNOTATION = [
    _region("ner", "labels", {"start": 0, "end": 6, "text": "Merkel", "labels": ["PER"]}),
    _region("ner", "labels", {"start": 15, "end": 20, "text": "Paris", "labels": ["LOC"]}),
    _region("flag", "choices", {"choices": ["unclear"]}),
    _region("comment", "textarea", {"text": ["is Paris the city?"]}),
    _region("difficulty", "rating", {"rating": 4}),
    _region("minutes", "number", {"number": 3}),
    _region("seen", "datetime", {"datetime": "2025-03-01"}),
]


def _task(result, annotation_id=11, **annotation):
    return {
        "id": 1,
        "data": {"text": TEXT},
        "annotations": [{"id": annotation_id, "result": result, **annotation}],
    }


def test_reading_tasks_takes_the_weighed_control_alone_without_warnings():
    ner = parse_label_config(NER_WITH_EXTRAS, ("ner",))
    parsed = read_tasks([_task(TEAM_ANNOTATION)], ner)
    (ex,) = parsed.tasks[0].examples
    assert ex.label == ("B-PER", "O", "B-LOC", "O")
    assert parsed.warnings == []  # the config declares them: nothing to warn about
    flag = parse_label_config(NER_WITH_EXTRAS, ("flag",))
    parsed = read_tasks([_task(TEAM_ANNOTATION)], flag)
    assert parsed.tasks[0].examples[0].label == ("unclear",)
    assert parsed.warnings == []
    # a control the config does not declare (renamed since the annotation was made) still warns
    stray = [*TEAM_ANNOTATION, _region("old_flag", "choices", {"choices": ["x"]})]
    parsed = read_tasks([_task(stray)], ner)
    assert parsed.tasks[0].examples[0].label == ("B-PER", "O", "B-LOC", "O")
    assert parsed.warnings == ["ignored result regions of other controls than 'ner' (type choices)"]


def test_a_region_naming_its_control_oddly_is_skipped_with_the_warning():
    """``from_name`` is whatever the JSON holds (a list, an object): skipped, never a crash."""
    spec = parse_label_config(NER_WITH_EXTRAS, ("ner",))
    odd = [*TEAM_ANNOTATION, {**TEAM_ANNOTATION[2], "from_name": ["flag"]}]
    parsed = read_tasks([_task(odd)], spec)
    assert parsed.tasks[0].examples[0].label == ("B-PER", "O", "B-LOC", "O")
    assert parsed.warnings == ["ignored result regions of other controls than 'ner' (type choices)"]


def test_title_and_body_read_the_body():
    spec = parse_label_config(TITLE_AND_BODY)
    task = {
        "id": 4,
        "data": {"title": "Visit", "body": TEXT},
        "annotations": [
            {
                "id": 41,
                "result": [
                    _region(
                        "entities", "labels", {"start": 0, "end": 6, "labels": ["PER"]}, "body"
                    ),
                    _region("note", "textarea", {"text": ["short"]}, "title"),
                ],
            }
        ],
    }
    parsed = read_tasks([task], spec)
    item = parsed.tasks[0]
    assert item.text == TEXT and item.examples[0].label == ("B-PER", "O", "O", "O")
    assert parsed.warnings == []


VERSION = "srw-20260101-000000000-aaaaaa"


def _published(model_dir, spec, tasks: list[dict]) -> ProjectStore:
    """A version whose scores.json holds ``tasks``' annotations as a training stores them (the
    real parser and record writer; no scout is needed to judge a decision), score 0.1 each."""
    store = ProjectStore(model_dir, 9)
    table = {}
    for item in read_tasks(tasks, spec).tasks:
        records = [
            annotation_record(ex, spec.task, 0.1, {"majority": [list(ex.label)]}, 0)
            for ex in item.examples
        ]
        table[item.id] = {
            "result": [],
            "score": 0.1,
            "fingerprint": fingerprint(item),
            "annotations": records,
        }
    reviews.stamp_saved(table, reviews.saved_times(tasks))
    staging = store.staging_dir()
    atomic_write_json(staging / "scores.json", table)
    items = [i for i in read_tasks(tasks, spec).tasks if i]
    meta = version_meta(VERSION, spec, Settings(model_dir=str(model_dir)), items, len(items))
    atomic_write_json(staging / "meta.json", meta)
    store.publish(staging, VERSION)
    return store


def test_a_decision_round_trip_keeps_the_other_controls_out_of_the_labels(tmp_path):
    """A reviewer who edits only the comment box or the flag and saves leaves the labels weighed
    as they were scored: the save confirms them, never records a fix; one that changes a label
    fixes it whatever the other controls say. What the confirmed task's prediction shows is the
    weighed control's regions alone."""
    spec = parse_label_config(NER_WITH_EXTRAS, ("ner",))
    scored_at, later = "2026-01-01T10:00:00.000000Z", "2026-01-01T10:05:00.000000Z"

    def task(task_id, result, at):
        return {
            "id": task_id,
            "data": {"text": TEXT},
            "annotations": [
                {
                    "id": task_id * 10,
                    "result": result,
                    "updated_at": at,
                    "completed_by": 4,
                    "updated_by": 5,
                }
            ],
        }

    store = _published(
        tmp_path, spec, [task(1, TEAM_ANNOTATION, scored_at), task(2, TEAM_ANNOTATION, scored_at)]
    )
    other_controls = [
        *TEAM_ANNOTATION[:2],
        _region("flag", "choices", {"choices": ["fine"]}),
        _region("comment", "textarea", {"text": ["checked: the city"]}),
    ]
    relabeled = [
        _region("ner", "labels", {"start": 0, "end": 6, "text": "Merkel", "labels": ["ORG"]}),
        *TEAM_ANNOTATION[1:],
    ]
    decided = reviews.decide(
        store,
        store.current_version(),
        spec,
        TaskRead.of([task(1, other_controls, later), task(2, relabeled, later)], spec),
    )
    assert decided == {"1/10": "confirmed", "2/20": "fixed"}
    version = store.current_version()
    served = reviews.served_scores(
        store, store.scores(version), reviews.version_scales(store, version)
    )
    assert served["1"]["score"] == 1.0
    assert {region["from_name"] for region in served["1"]["result"]} == {"ner"}
    assert len(served["1"]["result"]) == 2


def test_status_and_the_report_say_what_is_weighed_and_what_is_left_alone(tmp_path):
    spec = parse_label_config(NER_WITH_EXTRAS, ("ner",))
    unpublished = ProjectStore(tmp_path, 9)
    assert predictions.controls(unpublished) == {
        "weighed": None,
        "summary": "known once a training has read the labeling config",
    }
    store = _published(tmp_path, spec, [_task(TEAM_ANNOTATION)])
    shown = predictions.controls(store)
    assert shown["weighed"] == [{"name": "ner", "type": "Labels", "to_name": ["text"]}]
    assert [c["name"] for c in shown["ignored"]] == [
        "flag",
        "comment",
        "difficulty",
        "minutes",
        "seen",
    ]
    assert shown["summary"] == (
        "weighed: 'ner' (Labels) on 'text'; left alone: 'flag' (Choices), 'comment' "
        "(TextArea), 'difficulty' (Rating), 'minutes' (Number), 'seen' (DateTime)"
    )
    report = project_report(Settings(model_dir=str(tmp_path)), "9")
    assert report["meta"]["controls"] == shown
    page = render(report, "9")
    assert "<th>weighed</th><td>ner (Labels on text)</td>" in page
    assert (
        "<th>left alone</th><td>flag (Choices), comment (TextArea), difficulty (Rating), "
        "minutes (Number), seen (DateTime)</td>"
    ) in page


def stored_entries(spec, tasks: list[dict], score, note: str = "?") -> dict:
    """One control's stored entries of ``tasks`` as a training stores them (the real parser
    and record writer), each at ``score`` (a float, or task id -> its float) with one region
    noted ``note``."""
    table = {}
    for item in read_tasks(tasks, spec).tasks:
        score_of = score(item.id) if callable(score) else score
        records = [
            annotation_record(ex, spec.task, score_of, {"majority": [list(ex.label)]}, 0)
            for ex in item.examples
        ]
        region = {"from_name": spec.from_name, "to_name": "text", "meta": {"text": [note]}}
        table[item.id] = {
            "result": [region],
            "score": score_of,
            "fingerprint": fingerprint(item),
            "reliability": {ex.id: 1.0 for ex in item.examples},
            "probability": {ex.id: score_of for ex in item.examples},
            "annotations": records,
        }
    return table


def test_several_controls_merge_into_one_entry_at_the_lowest_score_naming_each_control(tmp_path):
    spec = parse_label_config(NER_WITH_EXTRAS)  # 'ner' and 'flag' weighed
    ner, flag = spec.each()
    tasks = [_task(TEAM_ANNOTATION)]
    merged = merge_entries(
        spec,
        [
            stored_entries(ner, tasks, 0.8, "annotated as LOC (p 0.80)"),
            stored_entries(
                flag, tasks, 0.12, "annotated unclear (p 0.12); the scout suggests fine"
            ),
        ],
    )
    entry = merged["1"]
    assert entry["score"] == 0.12 and entry["controls"] == {"ner": 0.8, "flag": 0.12}
    assert [r["meta"]["text"][0] for r in entry["result"]] == [
        "ner: annotated as LOC (p 0.80)",
        "flag: annotated unclear (p 0.12); the scout suggests fine",
    ]
    assert [(r["id"], r["control"]) for r in entry["annotations"]] == [
        ("1/11", "ner"),
        ("1/11", "flag"),
    ]
    assert entry["reliability"] == {"ner:1/11": 1.0, "flag:1/11": 1.0}
    # the stored fingerprint is the one /predict computes, and changes with either control
    (now,) = fingerprints(read_each(tasks, spec))
    assert entry["fingerprint"] == now
    other = [
        r if r["from_name"] != "flag" else {**r, "value": {"choices": ["fine"]}}
        for r in TEAM_ANNOTATION
    ]
    assert fingerprints(read_each([_task(other)], spec)) != [now]

    # the report: the first control's page, and each control's own report
    store = ProjectStore(tmp_path, 9)
    staging = store.staging_dir()
    atomic_write_json(staging / "scores.json", merged)
    items = [i for i in read_tasks(tasks, spec).tasks if i]
    meta = version_meta(VERSION, spec, Settings(model_dir=str(tmp_path)), items, 2)
    learned = {"too_little": True, "message": "the scouts found 1 of 9 entities again"}
    meta["weighers"] = [
        {"control": "ner", "type": "Labels", "folder": "controls/0", "learned": learned},
        {"control": "flag", "type": "Choices", "folder": "controls/1", "learned": None},
    ]
    atomic_write_json(staging / "meta.json", meta)
    store.publish(staging, VERSION)
    assert predictions.serving(store, training=False)["message"] == (
        "a training's full version; beware, 'ner': the scouts found 1 of 9 entities again"
    )
    report = project_report(Settings(model_dir=str(tmp_path)), "9")
    assert report["task"] == "ner" and [a["score"] for a in report["annotations"]] == [0.8]
    parts = {p["control"]: p["report"] for p in report["per_control"]}
    assert [p["type"] for p in report["per_control"]] == ["Labels", "Choices"]
    assert [parts["ner"]["task"], parts["flag"]["task"]] == ["ner", "classification"]
    assert [a["score"] for a in parts["flag"]["annotations"]] == [0.12]
    assert report["meta"]["controls"]["summary"].startswith(
        "weighed: 'ner' (Labels) on 'text', 'flag' (Choices) on 'text'; left alone: 'comment'"
    )
    page = " ".join(html.unescape(render(report, "9")).split())  # each control, in words
    assert "2 labeling controls weighed, each on its own: 'ner' (Labels), 'flag' (Choices)" in page
    for i, name in enumerate(("'ner' (Labels)", "'flag' (Choices)"), 1):
        assert f'id="label-table-{i}"' in page and f'id="annotator-table-{i}"' in page
        assert f"Per label: where the scout's majority disagrees, control {name}" in page
    assert 'id="label-table"' not in page


# ----------------------------------------------------------------------------- the setting


def test_weigh_controls_is_a_project_setting_that_retrains():
    assert parse_extra_params("weigh_controls=ner") == {"weigh_controls": "ner"}
    assert parse_extra_params({"SRW_WEIGH_CONTROLS": " flag "}) == {"weigh_controls": " flag "}
    settings = Settings(model_dir="/tmp/srw-62").for_project({"weigh_controls": " flag "})
    assert settings.controls_to_weigh == ("flag",)
    assert Settings(model_dir="/tmp/srw-62").controls_to_weigh == ()
    assert Settings(weigh_controls="ner, topic").controls_to_weigh == ("ner", "topic")
    assert "weigh_controls" in SCORING and BY_NAME["weigh_controls"].per_project


@pytest.mark.parametrize(
    "raw",
    [
        "weigh_controls=,",
        "weigh_controls=ner,,topic",
        "weigh_controls=../ner",
        "weigh_controls=" + "x" * 101,
    ],
)
def test_weigh_controls_refuses_blank_and_long_names(raw):
    with pytest.raises(SettingsError, match="control names separated by commas"):
        parse_extra_params(raw)

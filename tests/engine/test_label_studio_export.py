"""Label Studio JSON exports (Project > Export > JSON) as input: subregweigh.io.read_label_studio,
read_dataset's detection, and the command line. Exports are built from real CoNLL++ and SST-2
data the way Label Studio writes them; one test reads an export from a real Label Studio."""

from __future__ import annotations

import json
import logging
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from subregweigh import cli
from subregweigh.cli_args import build_parser
from subregweigh.example import DataError
from subregweigh.io import read_conll, read_dataset, read_jsonl, read_label_studio, read_tsv
from subregweigh.spans import words_with_offsets
from subregweigh.tags import entity_spans
from tests.paths import DATA

CONLLPP_TRAIN = DATA / "conllpp" / "conllpp_train.txt"
SST2_TRAIN = DATA / "sst2" / "train.tsv"
SENTIMENT = {"0": "negative", "1": "positive"}


# ----------------------------------------------------------------------------- building exports


@pytest.fixture(scope="module")
def sentences():
    return read_conll(CONLLPP_TRAIN)[:30]


@pytest.fixture(scope="module")
def reviews():
    return read_tsv(SST2_TRAIN)[:30]


def char_spans(ex):
    """``(start, end, type)`` character spans of a CoNLL sentence in ``" ".join(words)``."""
    starts = np.cumsum([0] + [len(w) + 1 for w in ex.words])
    return [(int(starts[s]), int(starts[e] - 1), t) for t, s, e in entity_spans(ex.label)]


def labels_region(i, text, start, end, label, from_name="label"):
    return {
        "id": f"r{i}",
        "from_name": from_name,
        "to_name": "text",
        "type": "labels",
        "origin": "manual",
        "value": {"start": start, "end": end, "text": text[start:end], "labels": [label]},
    }


def choices_region(choices, from_name="sentiment"):
    return {
        "id": "c0",
        "from_name": from_name,
        "to_name": "text",
        "type": "choices",
        "origin": "manual",
        "value": {"choices": list(choices)},
    }


def annotation(ann_id, result, when="2025-03-01T10:00:00.000000Z", cancelled=False):
    """An annotation with the fields Label Studio 1.23 exports."""
    return {
        "id": ann_id,
        "completed_by": 1,
        "result": result,
        "was_cancelled": cancelled,
        "ground_truth": False,
        "created_at": when,
        "updated_at": when,
        "draft_created_at": None,
        "lead_time": 12.5,
        "prediction": {},
        "result_count": len(result),
        "task": None,
        "project": 3,
        "updated_by": 1,
        "parent_prediction": None,
        "parent_annotation": None,
    }


def task(task_id, text, annotations, **data):
    return {
        "id": task_id,
        "annotations": annotations,
        "drafts": [],
        "predictions": [],
        "data": {"text": text, **data},
        "meta": {},
        "inner_id": task_id,
        "project": 3,
        "total_annotations": len(annotations),
        "cancelled_annotations": 0,
    }


def ner_export(examples, first_id=100):
    tasks = []
    for k, ex in enumerate(examples):
        text = " ".join(ex.words)
        result = [labels_region(j, text, s, e, t) for j, (s, e, t) in enumerate(char_spans(ex))]
        tasks.append(task(first_id + k, text, [annotation(1000 + k, result)]))
    return tasks


def classification_export(examples, first_id=200):
    return [
        task(first_id + k, ex.text, [annotation(2000 + k, [choices_region(ex.label)])])
        for k, ex in enumerate(examples)
    ]


def write_export(path, tasks):
    path.write_text(json.dumps(tasks, ensure_ascii=False, indent=2), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- round trips


def test_ner_round_trip(tmp_path, sentences):
    path = write_export(tmp_path / "export.json", ner_export(sentences))
    examples, kind = read_label_studio(path)
    assert kind == "ner"
    assert [ex.id for ex in examples] == [str(100 + k) for k in range(len(sentences))]
    assert all(ex.source == f"{path}:task {ex.id}" for ex in examples)
    exact = 0
    for original, read in zip(sentences, examples):
        text = " ".join(original.words)
        # Words come from the backend's tokenizer, which splits off punctuation ("EU-wide" ->
        # "EU", "-", "wide"); the entities, as character spans of the text, are the originals.
        offsets = words_with_offsets(text)
        assert read.words == tuple(w for w, _, _ in offsets)
        got = [(offsets[s][1], offsets[e - 1][2], t) for t, s, e in entity_spans(read.label)]
        assert got == char_spans(original)
        if all(len(words_with_offsets(w)) == 1 for w in original.words):
            assert (read.words, read.label) == (original.words, original.label)
            exact += 1
    assert exact >= 10  # a sizeable share of sentences is tokenized exactly as in CoNLL
    assert sum(any(t != "O" for t in ex.label) for ex in examples) >= 25
    # read_dataset recognises the export by its content, not only by --format
    assert read_dataset(path) == (examples, "ner")
    assert read_dataset(path, format="label-studio") == (examples, "ner")


def test_classification_round_trip(tmp_path, reviews):
    path = write_export(tmp_path / "export.json", classification_export(reviews))
    examples, kind = read_dataset(path)
    assert kind == "classification"
    assert [(ex.id, ex.words, ex.label) for ex in examples] == [
        (str(200 + k), ex.words, ex.label) for k, ex in enumerate(reviews)
    ]


def test_multi_label_like_jsonl(tmp_path, reviews):
    """Several choices make a multi-label example, represented exactly as read_jsonl does."""
    labels = [
        ["negative", "sarcastic"] if k % 3 == 0 else [SENTIMENT[ex.label[0]]]
        for k, ex in enumerate(reviews[:12])
    ]
    tasks = [
        task(k + 1, ex.text, [annotation(k + 1, [choices_region(reversed(lab))])])
        for k, (ex, lab) in enumerate(zip(reviews, labels))
    ]
    examples, kind = read_label_studio(write_export(tmp_path / "export.json", tasks))
    jsonl = tmp_path / "same.jsonl"
    jsonl.write_text(
        "".join(
            json.dumps({"id": k + 1, "text": ex.text, "labels": lab}) + "\n"
            for k, (ex, lab) in enumerate(zip(reviews, labels))
        )
    )
    assert (examples, kind) == read_jsonl(jsonl)
    assert examples[0].label == ("negative", "sarcastic") and len(examples[1].label) == 1


def test_latest_non_cancelled_annotation_is_used(tmp_path, caplog, sentences):
    ex = sentences[0]  # "EU rejects German call to boycott British lamb ."
    text = " ".join(ex.words)
    org, misc = labels_region(0, text, 0, 2, "ORG"), labels_region(1, text, 11, 17, "MISC")
    tasks = [
        task(
            1,
            text,
            [  # listed out of order: the newest update wins, a newer cancelled one does not
                annotation(12, [org, misc], when="2025-03-02T09:00:00.5Z"),
                annotation(11, [org], when="2025-03-01T09:00:00Z"),
                annotation(13, [], when="2025-03-03T09:00:00Z", cancelled=True),
            ],
        ),
        task(
            2,
            text,
            [
                annotation(21, [misc], when="2025-03-01T09:00:00Z"),  # same time: higher id
                annotation(22, [org], when="2025-03-01T09:00:00Z"),
            ],
        ),
        task(3, text, [annotation(31, [org], cancelled=True)]),  # only cancelled: skipped
        task(4, text, []),  # unannotated: skipped
        task(5, text, [annotation(51, [])]),  # no regions: all O
    ]
    path = write_export(tmp_path / "export.json", tasks)
    with caplog.at_level(logging.WARNING, logger="subregweigh"):
        examples, _ = read_label_studio(path)
    assert [ex.id for ex in examples] == ["1", "2", "5"]
    assert examples[0].label[:4] == ("B-ORG", "O", "B-MISC", "O")
    assert examples[1].label[:3] == ("B-ORG", "O", "O")
    assert set(examples[2].label) == {"O"}
    skipped = [r.getMessage() for r in caplog.records if "no annotation" in r.getMessage()]
    assert skipped == [f"{path}: 2 of 5 tasks have no annotation (or only cancelled ones); skipped"]


def test_text_field_and_span_repairs(tmp_path, caplog):
    text = "I \U0001f600 Paris, France"  # an emoji: old Label Studio counted it as 2 (UTF-16)
    paris_utf16 = {
        "id": "p",
        "from_name": "label",
        "to_name": "text",
        "type": "labels",
        "value": {"start": 5, "end": 10, "text": "Paris", "labels": ["LOC"]},
    }
    cut = {
        "id": "f",
        "from_name": "label",
        "to_name": "text",
        "type": "labels",
        "value": {"start": 12, "end": 16, "labels": ["LOC"]},
    }  # "Fran": widened to the word
    tasks = [task(7, "unused", [annotation(1, [paris_utf16, cut])], body=text)]
    path = write_export(tmp_path / "export.json", tasks)
    with pytest.raises(
        DataError,
        match=r"task 7: data has several text fields \('text', 'body'\); "
        r"pass --text-field",
    ):
        read_label_studio(path)
    with caplog.at_level(logging.WARNING, logger="subregweigh"):
        (ex,), _ = read_dataset(path, text_field="body")
    assert ex.words == ("I", "\U0001f600", "Paris", ",", "France")
    assert ex.label == ("O", "O", "B-LOC", "O", "B-LOC")
    assert any("cuts a word" in r.getMessage() for r in caplog.records)


def test_utf16_offsets_without_the_regions_text_map_to_the_right_words(tmp_path):
    """Issue 58: a region without its text, counted in UTF-16 code units past an emoji, fell
    outside the text or on the wrong words; where the UTF-16 reading, and not the characters',
    falls on word edges, it is the one read."""
    text = "I \U0001f600 love Paris and Rome"  # Paris at characters 9-14, UTF-16 units 10-15
    regions = [
        {
            "id": name,
            "from_name": "label",
            "to_name": "text",
            "type": "labels",
            "value": {"start": start, "end": end, "labels": ["LOC"]},
        }
        for name, start, end in (("paris", 10, 15), ("rome", 20, 24))
    ]
    path = write_export(tmp_path / "export.json", [task(3, text, [annotation(1, regions)])])
    (ex,), _ = read_dataset(path)
    assert ex.label == ("O", "O", "O", "B-LOC", "O", "B-LOC")
    # character offsets that fall on word edges stay as they are
    regions[0]["value"].update(start=9, end=14)
    regions[1]["value"].update(start=19, end=23)
    path = write_export(tmp_path / "export.json", [task(3, text, [annotation(1, regions)])])
    (ex,), _ = read_dataset(path)
    assert ex.label == ("O", "O", "O", "B-LOC", "O", "B-LOC")


# ----------------------------------------------------------------------------- errors


def _one_ner_task(**region_value):
    value = {"start": 0, "end": 2, "labels": ["ORG"], **region_value}
    return [
        task(
            7,
            "EU rejects it",
            [
                annotation(
                    3,
                    [
                        {
                            "id": "r1",
                            "from_name": "label",
                            "to_name": "text",
                            "type": "labels",
                            "value": value,
                        }
                    ],
                )
            ],
        )
    ]


ERRORS = {
    "invalid JSON": ('[\n  {"id": 1,\n   "data": }\n]', ":3: invalid JSON"),
    "not an array": (
        '{"id": 1, "data": {"text": "x"}}',
        ":1: expected a JSON array of Label Studio tasks",
    ),
    "empty array": ("[]", ":1: the export holds no tasks"),
    "region out of range": (
        _one_ner_task(start=5, end=40),
        ":task 7: annotation 3: region r1: span 5-40 lies outside the text of 13",
    ),
    "offset not an integer": (
        _one_ner_task(start="0"),
        ":task 7: annotation 3: region r1: 'start' must be",
    ),
    "no labels": (_one_ner_task(labels=[]), ":task 7: annotation 3: region r1: 'labels' must be"),
    "duplicate task": (_one_ner_task() * 2, ":task 7: duplicate task id"),
    "no text field": (
        [{"id": 7, "data": {"n": 3}, "annotations": [annotation(1, [])]}],
        ":task 7: data has no text field (fields: 'n')",
    ),
    "examples, not tasks": (
        [{"words": ["a"], "tags": ["O"]}],
        ": item 0 of the array has no valid task 'id' (got None); this looks like "
        "an array of examples",
    ),
    "labels and choices": (
        [*_one_ner_task(), task(8, "Good film", [annotation(4, [choices_region("a")])])],
        ":task 8: has choices (classification) regions, but {path}:task 7 has labels (NER)",
    ),
    "two controls": (
        [
            *_one_ner_task(),
            task(8, "EU", [annotation(4, [labels_region(0, "EU", 0, 2, "ORG", "ner2")])]),
        ],
        ":task 8: labels from the control 'ner2', but {path}:task 7 has them from 'label'",
    ),
    "nothing labelled": (
        [task(1, "a b", [annotation(1, [])])],
        ": no annotation has labels (NER) or choices",
    ),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_name_file_and_task(tmp_path, case):
    content, message = ERRORS[case]
    path = tmp_path / "export.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    with pytest.raises(DataError) as info:
        read_label_studio(path)
    assert str(info.value).startswith(str(path))
    assert message.format(path=path) in str(info.value)


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-2, 30)
    | st.floats()
    | st.sampled_from(
        ["", "labels", "choices", "ORG", "a b", "x\U0001f600y", "2025-03-01T10:00:00Z"]
    )
)
_REGION = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["labels", "choices", "relation"]) | _SCALARS,
        "from_name": st.sampled_from(["label", "other"]),
        "value": st.fixed_dictionaries(
            {
                "start": _SCALARS,
                "end": _SCALARS,
                "text": _SCALARS,
                "labels": st.lists(_SCALARS, max_size=2) | _SCALARS,
                "choices": st.lists(_SCALARS, max_size=2),
            }
        )
        | _SCALARS,
    }
)
_TASK = st.fixed_dictionaries(
    {
        "id": _SCALARS,
        "data": st.dictionaries(st.sampled_from(["text", "title"]), _SCALARS, max_size=2)
        | _SCALARS,
        "annotations": st.lists(
            st.fixed_dictionaries(
                {
                    "id": _SCALARS,
                    "result": st.lists(_REGION, max_size=3) | _SCALARS,
                    "was_cancelled": _SCALARS,
                    "updated_at": _SCALARS,
                }
            ),
            max_size=3,
        )
        | _SCALARS,
    }
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tasks=st.lists(_TASK, max_size=4) | _SCALARS)
def test_malformed_exports_raise_data_error_only(tmp_path, tasks):
    path = tmp_path / "export.json"
    path.write_text(json.dumps(tasks), encoding="utf-8")
    try:
        examples, kind = read_label_studio(path)
    except DataError as err:
        assert str(err).startswith(str(path))
    else:
        assert kind in ("ner", "classification") and examples
        assert all(len(ex.words) == len(ex.label) for ex in examples) or kind == "classification"


def test_json_lines_stay_jsonl(tmp_path):
    """A .json file with one object per line is still JSONL; an array is an export."""
    path = tmp_path / "data.json"
    path.write_text('{"id": "a", "words": ["EU"], "tags": ["B-ORG"]}\n')
    assert read_dataset(path)[0][0].label == ("B-ORG",)
    path.write_text("\ufeff \n" + json.dumps(_one_ner_task()))
    (ex,), kind = read_dataset(path)
    assert (ex.id, kind, ex.label) == ("7", "ner", ("B-ORG", "O", "O"))


# ----------------------------------------------------------------------------- command line


@pytest.mark.slow
def test_cli_weigh_and_train_an_export(tmp_path, capsys, sentences):
    tasks = ner_export(sentences[:20])
    tasks[3]["annotations"][0]["was_cancelled"] = True  # not annotated: no weight row
    export = write_export(tmp_path / "export.json", tasks)
    weights = tmp_path / "w.jsonl"
    assert (
        cli.main(
            [
                "-q",
                "weigh",
                str(export),
                "-o",
                str(weights),
                "--epochs",
                "1",
                "--n-samples",
                "10",
                "-k",
                "3",
                "--method",
                "random",
            ]
        )
        == 0
    )
    assert "of 19 examples have deterministic" in capsys.readouterr().out
    rows = [json.loads(line) for line in weights.read_text().splitlines()]
    assert [r["id"] for r in rows] == [str(t["id"]) for k, t in enumerate(tasks) if k != 3]
    assert all(r["k"] <= 3 and 1 / 3 <= r["weight"] <= 1 for r in rows)

    model = tmp_path / "final"
    assert (
        cli.main(
            [
                "-q",
                "train",
                str(export),
                "--weights",
                str(weights),
                "--epochs",
                "1",
                "-o",
                str(model),
            ]
        )
        == 0
    )
    assert (model / "scout.json").is_file()


def test_cli_errors_and_text_field(tmp_path, capsys):
    export = write_export(
        tmp_path / "export.json", [task(12, "EU rejects it", [annotation(1, [])], title="News")]
    )
    out = tmp_path / "n.jsonl"
    argv = ["noise", str(export), "-o", str(out), "--flags", str(tmp_path / "f.jsonl")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"subregweigh noise: error: {export}:task 12: data has several text fields "
        "('text', 'title'); pass --text-field"
    )
    assert not out.exists()
    export.write_text(json.dumps(_one_ner_task()))
    assert cli.main([*argv, "--text-field", "text", "--format", "label-studio"]) == 0
    assert json.loads(out.read_text())["id"] == "7"


# ----------------------------------------------------------------------------- real Label Studio


def test_real_label_studio_export(tmp_path, sentences, reviews, label_studio):
    """Import annotated tasks into a real Label Studio 1.23, export them as JSON, read back."""
    from label_studio_sdk.client import LabelStudio

    from testbed.projects import CLS_CONFIG, NER_CONFIG

    ner = sentences[:15]
    cls = reviews[:10]
    ner_tasks = [
        {
            "data": {"text": " ".join(ex.words)},
            "annotations": [
                {
                    "result": [
                        {
                            "id": f"r{j}",
                            "from_name": "label",
                            "to_name": "text",
                            "type": "labels",
                            "value": {
                                "start": s,
                                "end": e,
                                "text": " ".join(ex.words)[s:e],
                                "labels": [t],
                            },
                        }
                        for j, (s, e, t) in enumerate(char_spans(ex))
                    ]
                }
            ],
        }
        for ex in ner
    ]
    ner_tasks[2]["annotations"].append({"result": [], "was_cancelled": True})
    ner_tasks.append({"data": {"text": "Not annotated at all ."}})
    cls_tasks = [
        {
            "data": {"text": ex.text},
            "annotations": [{"result": [choices_region([SENTIMENT[ex.label[0]]])]}],
        }
        for ex in cls
    ]
    server = label_studio
    ls = LabelStudio(base_url=server.url, api_key=server.token)
    exports = {}
    for name, config, tasks in (
        ("ner", NER_CONFIG, ner_tasks),
        ("sentiment", CLS_CONFIG, cls_tasks),
    ):
        project = ls.projects.create(title=f"export {name}", label_config=config)
        ids = list(
            ls.projects.import_tasks(id=project.id, request=tasks, return_task_ids=True).task_ids
        )
        if name == "ner":  # a later annotation of task 0 replaces the imported one
            ls.annotations.create(id=ids[0], result=[], was_cancelled=False)
        exports[name] = (
            ids,
            server.api(
                "GET",
                f"/api/projects/{project.id}/export?exportType=JSON&download_all_tasks=true",
            ),
        )

    ids, exported = exports["ner"]
    path = write_export(tmp_path / "ner.json", exported)
    examples, kind = read_dataset(path)
    assert kind == "ner"
    assert [ex.id for ex in examples] == [str(i) for i in ids[: len(ner)]]  # no unannotated task
    assert set(examples[0].label) == {"O"}  # the later, empty annotation
    for original, read in zip(ner[1:], examples[1:]):
        offsets = words_with_offsets(" ".join(original.words))
        assert [
            (offsets[s][1], offsets[e - 1][2], t) for t, s, e in entity_spans(read.label)
        ] == char_spans(original)

    ids, exported = exports["sentiment"]
    examples, kind = read_dataset(write_export(tmp_path / "sentiment.json", exported))
    assert kind == "classification"
    assert [(ex.id, ex.words, ex.label) for ex in examples] == [
        (str(i), ex.words, (SENTIMENT[ex.label[0]],)) for i, ex in zip(ids, cls)
    ]


def test_backend_reads_a_project_by_export_or_else_by_task_list(label_studio, monkeypatch):
    """The backend reads every task of a real project with Label Studio's export; where the
    export answers 404 (Label Studio Enterprise, which cannot run here: its refusal is
    simulated), with the task list. Both give the same tasks, in id order."""
    from label_studio_sdk.core.api_error import ApiError

    from backend.labelstudio.client import LabelStudioAPI, LabelStudioUnavailable
    from testbed.projects import NER_CONFIG

    server = label_studio
    project = server.api("POST", "/api/projects", {"title": "fetch", "label_config": NER_CONFIG})
    text = "EU rejects German call"
    ids = server.api(
        "POST",
        f"/api/projects/{project['id']}/import?return_task_ids=true",
        [
            {
                "data": {"text": text},
                "annotations": [{"result": [labels_region(0, text, 0, 2, "ORG")]}],
            },
            {"data": {"text": "Not annotated ."}},
            {"data": {"text": "Skipped ."}, "annotations": [{"result": [], "was_cancelled": True}]},
        ],
    )["task_ids"]
    server.api("POST", f"/api/tasks/{ids[0]}/annotations", {"result": [], "was_cancelled": False})
    api = LabelStudioAPI(server.url, server.token, retries=0)

    def essentials(tasks):
        return [
            (
                t["id"],
                t["data"],
                [
                    (a["id"], a["result"], a["was_cancelled"], a["completed_by"])
                    for a in t["annotations"]
                ],
            )
            for t in tasks
        ]

    exported = api.tasks(project["id"])
    assert [t["id"] for t in exported] == sorted(ids)
    assert [len(t["annotations"]) for t in exported] == [2, 0, 1]
    assert exported[0]["annotations"][0]["result"][0]["value"]["labels"] == ["ORG"]
    assert exported[2]["annotations"][0]["was_cancelled"] is True

    def refused(status):
        def download_sync(**kwargs):
            raise ApiError(status_code=status, body={"detail": "refused"})

        return download_sync

    monkeypatch.setattr(api.client.projects.exports, "download_sync", refused(404))
    assert essentials(api.tasks(project["id"])) == essentials(exported)
    with pytest.raises(LabelStudioUnavailable, match="list the tasks of project 99999: HTTP 404"):
        api.tasks(99999)
    monkeypatch.setattr(api.client.projects.exports, "download_sync", refused(403))
    with pytest.raises(
        LabelStudioUnavailable, match=f"export the tasks of project {project['id']}: HTTP 403"
    ):
        api.tasks(project["id"])


# ----------------------------------------------------------------------------- the backend


def _parity_exports(sentences, reviews):
    """A NER and a sentiment export with what real projects hold: several annotators per task,
    cancelled and updated annotations, an unannotated task, UTF-16 offsets, a span that cuts a
    word, texts with punctuation attached to words."""
    ner = ner_export(sentences[:12])
    ner[1]["annotations"].append(annotation(5001, [], when="2025-03-02T10:00:00Z"))  # newer, empty
    ner[2]["annotations"].append(annotation(5002, [], cancelled=True))
    ner[3]["annotations"] = []
    text = "Talks in \U0001f600 Paris, France and Rome"  # old Label Studio: UTF-16 offsets
    ner.append(
        task(
            900,
            text,
            [
                annotation(
                    9001,
                    [
                        {  # "Paris" is characters 11-16, UTF-16 code units 12-17
                            **labels_region(0, text, 11, 16, "LOC"),
                            "value": {"start": 12, "end": 17, "text": "Paris", "labels": ["LOC"]},
                        },
                        labels_region(1, text, 18, 22, "LOC"),  # "Fran": widened to France
                    ],
                ),
                annotation(9002, [labels_region(0, text, 29, 33, "LOC")], when="2025-01-01T00:00Z"),
            ],
        )
    )
    cls = classification_export(reviews[:12])
    for k, t in enumerate(cls):
        t["annotations"][0]["result"][0]["value"]["choices"] = [SENTIMENT[reviews[k].label[0]]]
    flipped = "negative" if reviews[0].label == ("1",) else "positive"
    cls[0]["annotations"].append(annotation(6001, [choices_region([flipped])], when="2025-04-01"))
    cls[1]["annotations"].append(annotation(6002, [choices_region(["positive"])], cancelled=True))
    cls.append(
        task(
            950,
            "A fine, moving film -- if you're patient.",
            [
                annotation(9501, [choices_region(["positive"])]),
                annotation(9502, [choices_region(["negative"])], when="2025-05-01T00:00:00Z"),
            ],
        )
    )
    cls.append(task(951, "Not annotated.", []))
    return {"ner": ner, "sentiment": cls}


@pytest.mark.parametrize("annotations", ["latest", "all"])
@pytest.mark.parametrize("project", ["ner", "sentiment"])
def test_cli_and_backend_read_an_export_alike(tmp_path, sentences, reviews, project, annotations):
    """The same export, read by the command line (`subregweigh weigh export.json`) and by the
    ML backend's conversion of the same tasks (from Label Studio's API), gives the same examples,
    so the backend's scores and the exported weights are the same reliability."""
    from backend.labelstudio.tasks import parse_label_config, read_tasks
    from testbed.projects import CLS_CONFIG, NER_CONFIG

    tasks = _parity_exports(sentences, reviews)[project]
    path = write_export(tmp_path / "export.json", tasks)
    argv = ["weigh", str(path), "-o", str(tmp_path / "w.jsonl"), "--annotations", annotations]
    cli_examples, kind = cli._load(build_parser().parse_args(argv))

    spec = parse_label_config(NER_CONFIG if project == "ner" else CLS_CONFIG)
    parsed = read_tasks(tasks, spec, annotations=annotations)
    backend_examples = [ex for t in parsed.tasks if t is not None for ex in t.examples]

    assert kind == spec.task
    assert cli_examples == backend_examples
    assert [(ex.id, ex.words, ex.label) for ex in cli_examples] == [
        (ex.id, ex.words, ex.label) for ex in backend_examples
    ]
    assert len(cli_examples) >= 12
    per_task = Counter(ex.id.split("/")[0] for ex in backend_examples)
    if annotations == "latest":  # one example per task, its id the task's
        assert set(per_task.values()) == {1} and all("/" not in ex.id for ex in cli_examples)
    else:  # one per annotation: several annotators, several examples
        assert max(per_task.values()) == 2
    if project == "ner":  # the UTF-16 offsets are repaired, the cut word widened, in both
        words = tuple(w for w, _, _ in words_with_offsets(tasks[-1]["data"]["text"]))
        last = [ex for ex in cli_examples if ex.id.split("/")[0] == "900"][0]
        assert last.words == words
        assert last.label[words.index("Paris")] == "B-LOC"
        assert last.label[words.index("France")] == "B-LOC"
    else:  # classification words are whitespace words, in both
        last = [ex for ex in cli_examples if ex.id.split("/")[0] == "950"][0]
        assert last.words == ("A", "fine,", "moving", "film", "--", "if", "you're", "patient.")


def test_backend_default_reads_every_annotation(tmp_path, sentences, reviews):
    """The defaults differ on purpose: the command line gives one example (and weight) per task,
    its latest annotation; the backend weighs every annotator's. A task's latest annotation is
    the same example in both, under its task id or task/annotation id."""
    from backend.labelstudio.tasks import parse_label_config, read_tasks
    from testbed.projects import CLS_CONFIG

    tasks = _parity_exports(sentences, reviews)["sentiment"]
    cli_examples, _ = read_label_studio(write_export(tmp_path / "export.json", tasks))
    parsed = read_tasks(tasks, parse_label_config(CLS_CONFIG))
    by_task = {t.id: t.examples for t in parsed.tasks if t is not None}
    assert sum(len(examples) > 1 for examples in by_task.values()) == 2
    for ex in cli_examples:
        latest = [b for b in by_task[ex.id] if (b.words, b.label) == (ex.words, ex.label)]
        assert latest and all(b.id.startswith(f"{ex.id}/") for b in latest)
    assert "951" in by_task and not by_task["951"]  # kept, unannotated: the backend predicts it
    assert "951" not in {ex.id for ex in cli_examples}

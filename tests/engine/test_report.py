"""The project report: its numbers (subregweigh.report) on tables built with known annotators
and known errors, the page (subregweigh.report_html), and the command line's `report` and
`selftest` on real CoNLL++ / SST-2 data. The backend's report, in a real browser after a real
training, is tests/labelstudio/test_e2e_report.py."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from subregweigh import cli
from subregweigh.example import DataError
from subregweigh.io.labelstudio import annotator
from subregweigh.report import (
    AnnotationTable,
    annotator_rows,
    build_report,
    class_pairs,
    entity_pairs,
    entity_segments,
    label_confusion,
    label_rows,
    most_doubtful_tasks,
    review_summary,
    reviewer_summary,
    score_summary,
    wilson_interval,
)
from subregweigh.report_html import render_html, write_report
from tests.engine.test_label_studio_export import (
    annotation,
    char_spans,
    labels_region,
    task,
    write_export,
)

# ----------------------------------------------------------------------------- pairs


@pytest.mark.parametrize(
    "gold, predicted, expected",
    [
        (["B-PER", "I-PER", "O"], ["B-PER", "I-PER", "O"], [("PER", "PER", False)]),
        (["B-PER", "O"], ["B-MISC", "O"], [("PER", "MISC", False)]),  # retyped
        (["B-LOC", "I-LOC", "O"], ["B-LOC", "O", "O"], [("LOC", "LOC", True)]),  # boundary
        (["B-ORG", "I-ORG", "O"], ["O", "B-LOC", "I-LOC"], [("ORG", "LOC", True)]),
        (["B-PER", "O"], ["O", "O"], [("PER", "O", False)]),  # missed by the scout
        (["O", "O"], ["O", "B-ORG"], [("O", "ORG", False)]),  # added by the scout
        (
            ["B-PER", "O", "B-LOC"],
            ["B-PER", "I-PER", "B-LOC"],  # PER grows over the O word: boundary, LOC exact
            [("LOC", "LOC", False), ("PER", "PER", True)],
        ),
    ],
)
def test_entity_pairs(gold, predicted, expected):
    assert sorted(entity_pairs(gold, predicted)) == sorted(expected)


def test_class_pairs():
    assert class_pairs(("pos",), ("neg",)) == [("pos", "neg", False)]
    assert class_pairs(("pos",), ()) == [("pos", "(none)", False)]
    assert class_pairs(("a", "b"), ("b", "c")) == [
        ("b", "b", False),
        ("a", "(none)", False),
        ("(none)", "c", False),
    ]


# ----------------------------------------------------------------------------- a known project

# Six annotations of four tasks by three annotators. alice is right throughout; bob retypes a
# PER as MISC, and the scout also adds a LOC to one of his; carol's LOC is one word short of the
# scout's. Task 2 has two annotations (overlap): bob's wrong one and alice's.
KNOWN = dict(
    task="ner",
    ids=["1/11", "2/21", "3/31", "4/41", "2/22", "5/51"],
    tasks=["1", "2", "3", "4", "2", "5"],
    annotators=["alice", "bob", "bob", "carol", "alice", "alice"],
    words=[
        ("John", "Smith", "in", "Paris"),
        ("Peter", "spoke"),
        ("EU", "says", "Bonn"),
        ("New", "York", "now"),
        ("Peter", "spoke"),
        ("Rain", "today"),
    ],
    gold=[
        ("B-PER", "I-PER", "O", "B-LOC"),
        ("B-MISC", "O"),
        ("B-ORG", "O", "O"),
        ("B-LOC", "O", "O"),
        ("B-PER", "O"),
        ("O", "O"),
    ],
    majority=[
        ("B-PER", "I-PER", "O", "B-LOC"),
        ("B-PER", "O"),
        ("B-ORG", "O", "B-LOC"),
        ("B-LOC", "I-LOC", "O"),
        ("B-PER", "O"),
        ("O", "O"),
    ],
    score=[0.9, 0.1, 0.3, 0.4, 0.95, 0.99],
    reliability=[1.0, 0.0, 0.2, 0.3, 1.0, 1.0],
    entity_probability=[
        [("PER", 0, 2, 0.95), ("LOC", 3, 4, 0.9)],
        [("MISC", 0, 1, 0.1)],
        [("ORG", 0, 1, 0.8)],
        [("LOC", 0, 1, 0.4)],
        [("PER", 0, 1, 0.95)],
        [],
    ],
)


@pytest.fixture
def known():
    return AnnotationTable(**KNOWN)


def test_label_confusion_and_rows_of_a_known_project(known):
    confusion = label_confusion(known.task, known.gold, known.majority)
    assert confusion["labels"] == ["LOC", "MISC", "ORG", "PER", "O"]
    assert confusion["none"] == "O"
    # rows gold, columns scout:    LOC MISC ORG PER O
    assert confusion["matrix"] == [
        [2, 0, 0, 0, 0],  # LOC: alice's exact, carol's one word short (same type)
        [0, 0, 0, 1, 0],  # MISC: bob's retyped PER
        [0, 0, 1, 0, 0],  # ORG
        [0, 0, 0, 2, 0],  # PER: alice's two
        [1, 0, 0, 0, 0],  # O: the LOC the scout adds to bob's task 3
    ]
    assert confusion["boundary"] == {"LOC": 1}

    rows = {row["label"]: row for row in label_rows(confusion)}
    assert rows["MISC"] == {
        "label": "MISC",
        "n": 1,
        "agree": 0,
        "disagree": 1,
        "disagree_share": 1.0,
        "boundary": 0,
        "confused_with": [{"label": "PER", "n": 1}],
    }
    assert (rows["LOC"]["n"], rows["LOC"]["agree"], rows["LOC"]["boundary"]) == (2, 1, 1)
    assert rows["O"]["confused_with"] == [{"label": "LOC", "n": 1}]
    assert rows["PER"]["disagree"] == 0
    order = [row["label"] for row in label_rows(confusion)]
    assert order[:2] == ["MISC", "O"]  # the most contradicted labels come first


def test_annotator_rows_of_a_known_project(known):
    rows = annotator_rows(known.annotators, known.score, threshold=0.5)
    assert [r["annotator"] for r in rows] == ["bob", "carol", "alice"]
    bob, carol, alice = rows
    assert (bob["n"], bob["n_doubtful"], bob["doubtful_share"]) == (2, 2, 1.0)
    assert bob["mean_score"] == pytest.approx(0.2)
    assert (carol["n"], carol["n_doubtful"]) == (1, 1)
    assert (alice["n"], alice["n_doubtful"], alice["doubtful_share"]) == (3, 0, 0.0)
    assert alice["mean_score"] == pytest.approx((0.9 + 0.95 + 0.99) / 3)
    assert all(r["small"] for r in rows)  # fewer than 10 annotations each
    assert not annotator_rows(["x"] * 10, np.full(10, 0.9))[0]["small"]
    # The interval says how little 2 of 2 means.
    assert bob["interval"][0] < 0.5 < bob["interval"][1] == 1.0
    assert annotator_rows(["", "a"], [0.1, 0.9])[0]["annotator"] == "(unknown)"


def test_wilson_interval():
    low, high = wilson_interval(30, 100)
    assert low == pytest.approx(0.2189, abs=1e-3) and high == pytest.approx(0.3958, abs=1e-3)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(0, 5)[0] == 0.0 and wilson_interval(5, 5)[1] == 1.0
    # narrower with more annotations at the same share
    assert np.diff(wilson_interval(50, 100)) < np.diff(wilson_interval(5, 10))


def test_score_summary():
    score = np.array([0.05, 0.1, 0.2, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0])
    s = score_summary(score, threshold=0.5)
    assert (s["n"], s["n_doubtful"], s["doubtful_share"]) == (10, 3, 0.3)
    assert s["expected_source"] == "estimated"
    assert s["expected_error_rate"] == pytest.approx(np.mean(1 - score))
    assert s["n_expected"] == 4 and s["review_threshold"] == 0.6  # mean(1 - score) = 0.371
    assert sum(s["histogram"]["counts"]) == 10 and len(s["histogram"]["edges"]) == 11
    given = score_summary(score, expected_error_rate=0.1)
    assert (given["expected_source"], given["n_expected"], given["review_threshold"]) == (
        "given",
        1,
        0.05,
    )
    assert score_summary(score, expected_error_rate=0.0)["review_threshold"] is None
    with pytest.raises(ValueError, match="expected_error_rate"):
        score_summary(score, expected_error_rate=1.5)


def test_most_doubtful_tasks_take_the_minimum(known):
    groups = most_doubtful_tasks(known.tasks, known.score, top=3)
    # task 2 (bob 0.1, then alice 0.95), task 3, task 4
    assert groups == [[1, 4], [2], [3]]
    assert [g[0] for g in most_doubtful_tasks(known.tasks, known.score, top=10)] == [1, 2, 3, 0, 5]


def test_entity_segments_mark_what_the_other_side_lacks():
    segments = entity_segments(
        ("EU", "rejects", "German", "call"),
        ("B-ORG", "O", "B-MISC", "O"),
        ("B-LOC", "O", "B-MISC", "O"),
        [("ORG", 0, 1, 0.05), ("MISC", 2, 3, 0.9)],
    )
    assert [(s["text"], s["label"], s["differs"], s["probability"]) for s in segments] == [
        ("EU", "ORG", True, 0.05),
        ("rejects", None, False, None),
        ("German", "MISC", False, 0.9),
        ("call", None, False, None),
    ]


def test_build_report_of_a_known_project(known):
    report = build_report(
        known, top=2, task_url=lambda t: f"http://ls/projects/7/data?task={t}", meta={"k": 10}
    )
    assert json.loads(json.dumps(report)) == report  # plain JSON
    assert [d["task"] for d in report["doubtful"]] == ["2", "3"]
    overlap = report["doubtful"][0]
    assert overlap["url"] == "http://ls/projects/7/data?task=2"
    assert overlap["score"] == 0.1  # the task scores as its least reliable annotation
    assert [(a["annotator"], a["score"]) for a in overlap["annotations"]] == [
        ("bob", 0.1),
        ("alice", 0.95),
    ]
    # every annotation keeps its own values, overlap included
    assert [(a["id"], a["task"], a["annotator"]) for a in report["annotations"]] == list(
        zip(KNOWN["ids"], KNOWN["tasks"], KNOWN["annotators"])
    )
    assert [a["score"] for a in report["annotations"]] == KNOWN["score"]
    with pytest.raises(ValueError, match="no annotations"):
        build_report(AnnotationTable(**{**KNOWN, **{k: [] for k in KNOWN if k != "task"}}))


def test_classification_report():
    table = AnnotationTable(
        task="classification",
        ids=["1", "2", "3", "4"],
        tasks=["1", "2", "3", "4"],
        annotators=["a", "a", "b", "b"],
        words=[("good",), ("bad",), ("fine",), ("dull",)],
        gold=[("positive",), ("positive",), ("positive",), ("negative",)],
        majority=[("positive",), ("negative",), ("positive",), ("negative",)],
        score=[0.9, 0.2, 0.8, 0.7],
        reliability=[1, 0, 1, 1],
        entity_probability=[[], [], [], []],
    )
    report = build_report(table)
    assert report["confusion"]["labels"] == ["negative", "positive", "(none)"]
    assert report["confusion"]["matrix"] == [[1, 0, 0], [1, 2, 0], [0, 0, 0]]
    first = report["doubtful"][0]["annotations"][0]
    assert (first["text"], first["gold"], first["scout"], first["agrees"]) == (
        "bad",
        "positive",
        "negative",
        False,
    )


# ----------------------------------------------------------------------------- reviews


def test_review_summary_counts_flags_and_their_precision_by_threshold():
    # five decided tasks: scores when decided, fixed or confirmed, the labels they held
    score = [0.05, 0.2, 0.3, 0.45, 0.8]
    fixed = [True, False, True, False, True]
    labels = [["PER"], ["PER", "LOC"], ["LOC"], ["O"], ["ORG"]]
    summary = review_summary(score, fixed, labels, threshold=0.5, thresholds=(0.1, 0.5, 1.0))
    assert json.loads(json.dumps(summary)) == summary
    # flagged (score < 0.5): four reviewed, two fixed
    assert (summary["reviewed"], summary["confirmed"], summary["fixed"]) == (4, 2, 2)
    assert summary["precision"] == 0.5
    assert summary["interval"] == pytest.approx(list(wilson_interval(2, 4)))
    assert (summary["all"]["reviewed"], summary["all"]["fixed"]) == (5, 3)
    by_label = {row["label"]: row for row in summary["by_label"]}
    assert (by_label["PER"]["reviewed"], by_label["PER"]["fixed"]) == (2, 1)
    assert by_label["LOC"]["precision"] == 0.5
    assert by_label["ORG"]["reviewed"] == 0 and by_label["ORG"]["precision"] is None
    by_threshold = [(r["threshold"], r["reviewed"], r["fixed"]) for r in summary["by_threshold"]]
    assert by_threshold == [(0.1, 1, 1), (0.5, 4, 2), (1.0, 5, 3)]
    assert summary["by_threshold"][0]["precision"] == 1.0
    nothing = review_summary([0.9], [False], [["PER"]])
    assert nothing["reviewed"] == 0 and nothing["precision"] is None
    with pytest.raises(ValueError, match="one entry per item"):
        review_summary([0.1, 0.2], [True], [["PER"]])


def test_report_shows_the_reviews_first(known):
    reviews = {"score": [0.1, 0.3, 0.9], "fixed": [True, False, True], "labels": [["PER"]] * 3}
    report = build_report(known, reviews=reviews)
    assert (report["reviews"]["reviewed"], report["reviews"]["fixed"]) == (2, 1)
    page = render_html(report)
    assert page.index('id="reviews"') < page.index('id="scores"')  # shown prominently
    card = re.search(r'id="flag-precision"><b>([^<]+)</b>', page).group(1)
    assert card == "50%"
    assert "1 fixed of 2 reviewed" in page
    assert build_report(known)["reviews"] is None
    assert 'id="reviews"' not in render_html(build_report(known))


def test_reviewer_summary_counts_each_reviewers_decisions_and_their_agreement(known):
    """Three annotations: a1 decided by ann and bob alike, a2 by ann and bob differently, a3 by
    carol alone (unsure); a reverted fix is left out."""
    items = ["a1", "a1", "a2", "a2", "a3", "a4"]
    who = ["ann", "bob", "ann", "bob", "carol", ""]
    what = ["confirmed", "confirmed", "fixed", "confirmed", "unsure", "reverted"]
    got = reviewer_summary(items, who, what)
    rows = {row["reviewer"]: row for row in got["reviewers"]}
    assert list(rows) == ["ann", "bob", "carol"]  # most decisions first, then by name
    assert rows["ann"] == {
        "reviewer": "ann",
        "decided": 2,
        "confirmed": 1,
        "fixed": 1,
        "unsure": 0,
        "self_reviewed": 0,
        "fixed_share": 0.5,
        "pairs": 2,
        "agree": 1,
        "agreement": 0.5,
    }
    assert rows["carol"]["fixed_share"] is None and rows["carol"]["agreement"] is None
    assert got["agreement"] == {"annotations": 2, "pairs": 2, "agree": 1, "share": 0.5}
    with pytest.raises(ValueError, match="one entry each"):
        reviewer_summary(["a1"], [], ["fixed"])
    # in the report and on its page, beside the flags' precision
    reviews = {
        "score": [0.1, 0.3],
        "fixed": [True, False],
        "labels": [["PER"]] * 2,
        "decisions": {"item": items, "reviewer": who, "decision": what},
    }
    report = build_report(known, reviews=reviews)
    assert report["reviews"]["reviewers"] == got["reviewers"]
    assert report["reviews"]["by_threshold"] and report["reviews"]["by_label"]
    page = render_html(report)
    table = re.search(r'<table id="reviewers">(.*?)</table>', page, re.S).group(1)
    assert re.findall(r"<tr><td>(\w+)</td>", table) == ["ann", "bob", "carol"]
    assert "1 of 2 pairs over 2 annotations" in page


# ----------------------------------------------------------------------------- the page


def test_page_shows_the_tables_and_escapes_task_text(tmp_path, known):
    table = AnnotationTable(**{**KNOWN, "words": [("<script>alert(1)</script>", "x")] * 6})
    table.gold = [("B-PER", "O")] * 6
    table.majority = [("B-MISC", "O")] * 6
    table.entity_probability = [[]] * 6
    html = render_html(build_report(table, task_url=lambda t: f"http://ls/?task={t}"), "T <x>")
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<title>T &lt;x&gt;</title>" in html
    assert re.search(r'<img class="plot" id="histogram"[^>]+src="data:image/png;base64,', html)
    assert "PER is MISC 6" in html  # "PER is often MISC here"
    assert 'href="http://ls/?task=2"' in html

    page = render_html(build_report(known))
    annotators = re.search(r'<table id="annotator-table">(.*?)</table>', page, re.S).group(1)
    assert re.findall(r"<tr><td>(\w+)</td>", annotators) == ["bob", "carol", "alice"]
    assert "small sample: 2 annotations" in annotators

    write_report(tmp_path / "r.json", build_report(known))
    assert json.loads((tmp_path / "r.json").read_text())["task"] == "ner"
    with pytest.raises(ValueError, match=r"\.html or \.json"):
        write_report(tmp_path / "r.txt", build_report(known))


# ----------------------------------------------------------------------------- records


def test_records_round_trip_and_errors(known):
    records = [
        {
            "id": known.ids[i],
            "task": known.tasks[i],
            "annotator": known.annotators[i],
            "words": list(known.words[i]),
            "tags": list(known.gold[i]),
            "majority": list(known.majority[i]),
            "weight": 1.0,
            "score": float(known.score[i]),
            "reliability": float(known.reliability[i]),
            "entity_probability": [
                {"type": t, "start": s, "end": e, "probability": p}
                for t, s, e, p in known.entity_probability[i]
            ],
        }
        for i in range(len(known))
    ]
    table = AnnotationTable.from_records(records)
    assert build_report(table) == build_report(known)

    def fails(record, *needles):
        with pytest.raises(DataError) as info:
            AnnotationTable.from_records([records[0], record], ["w.jsonl:1", "w.jsonl:2"])
        assert str(info.value).startswith("w.jsonl:2: ")
        for needle in needles:
            assert needle in str(info.value)

    fails({k: v for k, v in records[1].items() if k != "majority"}, "'majority'")
    fails({**records[1], "score": 1.5}, "'score'", "[0, 1]")
    fails({**records[1], "score": None, "reliability": None}, "no 'score'")
    fails({**records[1], "tags": ["O"]}, "2 words, 1 tags")
    fails({**records[1], "entity_probability": [{"type": "PER"}]}, "entity_probability")


@pytest.mark.parametrize(
    "completed_by, expected",
    [
        (7, "user 7"),
        ({"id": 7, "email": "ann@example.com"}, "ann@example.com"),
        ({"id": 7, "email": ""}, "user 7"),
        (None, ""),
        (True, ""),
    ],
)
def test_annotator_from_completed_by(completed_by, expected):
    assert annotator({"completed_by": completed_by}) == expected


# ----------------------------------------------------------------------------- command line


@pytest.fixture(scope="module")
def overlap_export(tmp_path_factory, conll_train):
    """20 CoNLL tasks annotated by alice, 6 of them by bob too, who gives the first entity of
    each another type (a known error per bob annotation)."""
    tasks = []
    for k, ex in enumerate(conll_train[:40]):
        if len(tasks) == 20:
            break
        spans = char_spans(ex)
        if not spans:
            continue
        text = " ".join(ex.words)
        right = [labels_region(j, text, s, e, t) for j, (s, e, t) in enumerate(spans)]
        annotations = [{**annotation(1000 + k, right), "completed_by": 1}]
        if len(tasks) < 6:
            s, e, t = spans[0]
            wrong = [labels_region(0, text, s, e, "MISC" if t != "MISC" else "PER")] + right[1:]
            annotations.append({**annotation(2000 + k, wrong), "completed_by": 2})
        tasks.append(task(100 + k, text, annotations))
    return write_export(tmp_path_factory.mktemp("export") / "export.json", tasks), tasks


@pytest.mark.slow
def test_cli_weigh_all_annotations_then_report(tmp_path, capsys, overlap_export):
    export, tasks = overlap_export
    weights = tmp_path / "weights.jsonl"
    tiny = ["--epochs", "1", "--n-samples", "10", "-k", "3", "--method", "random"]
    assert (
        cli.main(["-q", "weigh", str(export), "--annotations", "all", "-o", str(weights)] + tiny)
        == 0
    )
    rows = [json.loads(line) for line in weights.read_text().splitlines()]
    assert len(rows) == 26
    assert {(r["id"], r["task"], r["annotator"]) for r in rows} == {
        (f"{t['id']}/{a['id']}", str(t["id"]), f"user {a['completed_by']}")
        for t in tasks
        for a in t["annotations"]
    }

    html = tmp_path / "report.html"
    args = ["-q", "report", str(weights), "-o", str(html), "--top", "5"]
    link = ["--label-studio-url", "http://ls.example:8080/", "--project", "3"]
    assert cli.main(args + link) == 0
    assert f"wrote {html}" in capsys.readouterr().out
    page = html.read_text()
    assert re.search(r"<td>user 1</td><td class=\"num\">20</td>", page)
    assert re.search(r"<td>user 2</td><td class=\"num\">6</td>", page)
    assert page.count('<div class="doubtful"') == 5
    assert 'href="http://ls.example:8080/projects/3/data?task=1' in page

    data = tmp_path / "report.json"
    assert cli.main(["-q", "report", str(weights), "-o", str(data)]) == 0
    report = json.loads(data.read_text())
    assert len(report["annotations"]) == 26
    assert {a["task"] for a in report["annotations"]} == {str(t["id"]) for t in tasks}
    per = {r["annotator"]: r["n"] for r in report["annotators"]}
    assert per == {"user 1": 20, "user 2": 6}
    # Every gold entity of every annotation is in the per-label table, the known errors too.
    n_entities = sum(len(a["result"]) for t in tasks for a in t["annotations"])
    matrix = np.array(report["confusion"]["matrix"])
    assert matrix[:-1].sum() == n_entities


@pytest.mark.slow
def test_cli_report_from_an_export_directly(tmp_path, overlap_export):
    export, _ = overlap_export
    out = tmp_path / "direct.json"
    tiny = ["--epochs", "1", "--n-samples", "10", "-k", "3", "--method", "random"]
    assert cli.main(["-q", "report", str(export), "-o", str(out)] + tiny) == 0
    report = json.loads(out.read_text())
    assert {r["annotator"]: r["n"] for r in report["annotators"]} == {"user 1": 20, "user 2": 6}
    assert report["meta"]["settings"]["k"] == 3 and report["meta"]["n_annotations"] == 26


def test_cli_report_errors(tmp_path, capsys, overlap_export):
    from tests.engine.test_cli import _fails_cleanly

    export, _ = overlap_export
    _fails_cleanly(capsys, ["report", str(export), "-o", str(tmp_path / "r.pdf")], ".pdf")
    _fails_cleanly(
        capsys,
        ["report", str(export), "-o", str(tmp_path / "r.html"), "--project", "3"],
        "--label-studio-url",
    )
    bad = tmp_path / "w.jsonl"
    bad.write_text('{"id": "1", "weight": 1.0, "words": ["a"], "tags": ["O"]}\n')
    _fails_cleanly(capsys, ["report", str(bad), "-o", str(tmp_path / "r.html")], "w.jsonl:1:")


@pytest.mark.slow
def test_cli_selftest_on_sst2(tmp_path, capsys, sst2_train):
    """A real self-test: flip 10% of 60 SST-2 labels, weigh with a head on the frozen encoder."""
    from subregweigh.io import write_dataset

    data = tmp_path / "sst2.jsonl"
    write_dataset(data, sst2_train[:60], task="classification")
    out = tmp_path / "selftest.json"
    argv = ["-q", "selftest", str(data), "-o", str(out), "--n-samples", "10", "-k", "3"]
    argv += ["--freeze-encoder", "--epochs", "5", "--learning-rate", "3e-3"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["task"] == "classification" and result["n"] == 60
    (only,) = result["results"]  # classification: one kind of noise, flipped labels
    assert only["noise"] == "flip"
    assert only["n_injected"] == 6 and only["base_rate"] == pytest.approx(0.1)
    assert 0 <= only["found"] <= 6 and 0 <= only["found_in_top"] <= 10
    assert 0 < only["average_precision"] <= 1
    assert f"{only['found_in_top']} of the 10 most doubtful" in printed


def test_a_scout_that_learned_too_little_is_said_in_the_report():
    """Issue 59: a scout trained on sparse tweets found 1 of 167 of its own annotations'
    entities, and nothing said so. The report shows what the weigher measured (``learned``,
    :class:`subregweigh.learned.Learned`) and the page warns."""
    from subregweigh.learned import Learned
    from subregweigh.report_html import render_html

    gold = [("B-PER", "I-PER", "O", "B-LOC")] * 8 + [("B-ORG", "O")] * 2
    lost = [("O", "O", "O", "O")] * 8 + [("B-ORG", "O")] * 2
    learned = Learned.of(gold, lost)
    assert (learned.found, learned.total, learned.too_little) == (2, 18, True)
    records = [
        {
            "id": f"t{i}/1",
            "task": f"t{i}",
            "words": ["Ann", "Lee", "in", "Rome"][: len(g)],
            "tags": list(g),
            "majority": list(p),
            "score": 0.5,
        }
        for i, (g, p) in enumerate(zip(gold, lost))
    ]
    for record in records[8:]:
        record["words"] = ["ACME", "rose"]
    table = AnnotationTable.from_records(records, [r["task"] for r in records])
    report = build_report(table, learned=learned)
    assert report["learned"]["too_little"] and report["learned"]["by_label"][0]["label"] == "LOC"
    page = render_html(report)
    assert 'id="learned-too-little"' in page and "finds 2 of the 18 entities" in page
    assert build_report(table)["learned"] is None  # nothing measured, nothing claimed
    fine = render_html(build_report(table, learned=Learned.of(gold, gold)))
    assert 'id="learned-too-little"' not in fine

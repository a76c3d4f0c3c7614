"""The backend's report and self-test endpoints, in process: stored per-annotation scores from a
real (tiny) scout, /report, /report.json, POST /selftest, the self-test's state in /status,
annotators named by email, runners of two kinds (the doubt notes of a prediction's regions:
tests/backend/test_suggestions.py).
The whole path with a real Label Studio and a browser is tests/labelstudio/test_e2e_report.py."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from backend.config.settings import Settings
from backend.labelstudio.tasks import (
    annotated_examples,
    name_annotators,
    parse_label_config,
    read_tasks,
    score_tasks,
    stored_prediction,
)
from backend.queue.runners import IDLE, RUNNING, ThreadRunner
from backend.review import reviews, served
from backend.serving.publish import version_meta
from backend.store.store import ProjectStore
from backend.web.auth import HTML_POLICY
from backend.web.routes import ABANDONED_SELFTEST
from backend.web.server import create_app
from subregweigh.example import Example
from subregweigh.scores import collect
from testbed.projects import publish_scout
from tests.backend.test_backend_server import GOOD, NER_CONFIG
from tests.doubles import FakeRunner

TEXTS = [
    ("Angela Merkel visited Paris .", [(0, 13, "PER"), (22, 27, "LOC")]),
    ("Peter Blackburn spoke in Brussels .", [(0, 15, "PER"), (25, 33, "LOC")]),
    ("Rain fell on Berlin .", [(13, 19, "LOC")]),
]


def _region(start, end, label, text):
    return {
        "from_name": "label",
        "to_name": "text",
        "type": "labels",
        "value": {"start": start, "end": end, "text": text[start:end], "labels": [label]},
    }


def team_tasks() -> list[dict]:
    """Three tasks annotated by user 1; the first again by user 2, who labels Merkel LOC."""
    tasks = []
    for i, (text, spans) in enumerate(TEXTS):
        annotations = [
            {"id": 10 + i, "completed_by": 1, "result": [_region(*s, text) for s in spans]}
        ]
        if i == 0:
            wrong = [(0, 13, "LOC"), spans[1]]
            annotations.append(
                {"id": 20, "completed_by": 2, "result": [_region(*s, text) for s in wrong]}
            )
        tasks.append({"id": 100 + i, "data": {"text": text}, "annotations": annotations})
    return tasks


USERS = {1: "ann@example.com", 2: "bo@example.com"}


@pytest.fixture(scope="module")
def stored(tmp_path_factory, tiny_scout):
    """A published version whose scores come from weighing the team's tasks."""
    from subregweigh.weigh import SubRegWeigh

    model_dir = tmp_path_factory.mktemp("report") / "models"
    spec = parse_label_config(NER_CONFIG)
    items = [i for i in read_tasks(name_annotators(team_tasks(), USERS), spec).tasks if i]
    srw = SubRegWeigh.from_parts([tiny_scout], k=3, n_samples=10, progress=False)
    scores = score_tasks(srw, spec, items)
    version = publish_scout(
        model_dir,
        7,
        tiny_scout,
        scores=scores,
        meta=lambda name: version_meta(name, spec, Settings(k=3, n_samples=10), items, 4),
    )
    return model_dir, version, scores


@pytest.mark.slow
def test_unannotated_tasks_keep_the_k_copies_score_beside_ordinary_ones(tiny_scout):
    """With the default score an annotated task is scored and shown from the ordinary pass,
    an unannotated one by the K copies' self-consistency; a quick call gives the annotated
    tasks exactly what the full call gives them, and one ordinary pass serves both calls."""
    from subregweigh.weigh import SubRegWeigh

    spec = parse_label_config(NER_CONFIG)
    tasks = team_tasks() + [{"id": 200, "data": {"text": TEXTS[1][0]}}]
    items = [i for i in read_tasks(name_annotators(tasks, USERS), spec).tasks if i]
    srw = SubRegWeigh.from_parts([tiny_scout], k=3, n_samples=10, progress=False)
    full = score_tasks(srw, spec, items)
    assert "annotations" not in full["200"]

    # an unannotated task is scored from the K copies even when an ordinary pass is shown
    blank = items[-1]
    words = tuple(word for word, _, _ in blank.words)
    tags = [("O",) * len(words), ("B-PER", "I-PER") + ("O",) * (len(words) - 2)]
    placeholder = [Example(blank.id, words, ())]
    k_copies = collect(
        placeholder, [tags[0], tags[1], tags[1]], np.zeros(3, int), np.ones(3, int), 1 / 3, "ner"
    )
    one = collect(placeholder, [tags[0]], np.zeros(1, int), np.ones(1, int), 1 / 3, "ner")
    entry = stored_prediction(blank, spec, k_copies, 0, 1, shown=(one, 0))
    assert entry["score"] == pytest.approx(2 / 3) and len(entry["result"]) == 1

    ordinary = srw.weigh_deterministic(annotated_examples(items))
    quick = score_tasks(srw, spec, items, quick=True, ordinary=ordinary)
    again = score_tasks(srw, spec, items, ordinary=ordinary)
    assert set(quick) == {"100", "101", "102"}
    for task, entry in quick.items():
        assert (entry["result"], entry["score"]) == (full[task]["result"], full[task]["score"])
        assert "reliability" not in entry["annotations"][0]
    assert again == full
    with pytest.raises(ValueError, match="deterministic"):
        score_tasks(srw, spec, items, "agreement", ordinary=ordinary)


def make(model_dir, **overrides):
    settings = Settings(
        model_dir=str(model_dir),
        basic_auth_user="ls-backend",
        basic_auth_pass="basic-pass-5f2a9c",
        label_studio_url="http://label-studio:8080",
        **overrides,
    )
    runner, selftests = FakeRunner(), FakeRunner()
    app = create_app(settings, runner=runner, selftest_runner=selftests)
    return app.test_client(), selftests


def test_stored_scores_keep_every_annotation_with_its_annotator(stored):
    _, _, scores = stored
    first = scores["100"]
    assert [(a["id"], a["annotator"]) for a in first["annotations"]] == [
        ("100/10", "ann@example.com"),
        ("100/20", "bo@example.com"),
    ]
    assert first["score"] == min(a["score"] for a in first["annotations"])
    for a in first["annotations"]:  # the score is the default (deterministic p(gold)), c/K beside
        assert a["score"] == a["deterministic_probability"] and 0 <= a["reliability"] <= 1
        assert len(a["words"]) == len(a["tags"]) == len(a["majority"])
    assert [a["tags"][:2] for a in first["annotations"]] == [["B-PER", "I-PER"], ["B-LOC", "I-LOC"]]


def test_report_json_and_page(stored):
    model_dir, version, scores = stored
    client, _ = make(model_dir, label_studio_public_url="https://ls.example.org")
    response = client.get("/report.json?project=7&top=2", headers=GOOD)
    assert response.status_code == 200, response.get_data()
    report = response.get_json()
    assert report["meta"]["version"] == version and report["meta"]["n_annotations"] == 4
    assert {r["annotator"]: r["n"] for r in report["annotators"]} == {
        "ann@example.com": 3,
        "bo@example.com": 1,
    }
    assert [(a["id"], a["task"]) for a in report["annotations"]] == [
        ("100/10", "100"),
        ("100/20", "100"),
        ("101/11", "101"),
        ("102/12", "102"),
    ]
    assert len(report["doubtful"]) == 2
    assert report["doubtful"][0]["url"].startswith("https://ls.example.org/projects/7/data?task=")
    # the report serves the queue's scores: on the version's one scale (its meta's)
    scales = reviews.version_scales(ProjectStore(model_dir, 7), version)
    assert set(scales) == {""} and report["meta"]["scale"] == served.scales_json(scales)
    lowest = min(served.on_scale(r, scales) for e in scores.values() for r in e["annotations"])
    assert report["doubtful"][0]["score"] == pytest.approx(lowest)

    page = client.get("/report?project=7", headers=GOOD)
    assert page.status_code == 200 and page.mimetype == "text/html"
    # no script, frame or request elsewhere may run in it (issue 42, item 12)
    assert page.headers["Content-Security-Policy"] == HTML_POLICY
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    html = page.get_data(as_text=True)
    assert "<td>bo@example.com</td>" in html and "Project 7: annotation report" in html
    # Without a public address, links go to LABEL_STUDIO_URL.
    client, _ = make(model_dir)
    report = client.get("/report.json?project=7", headers=GOOD).get_json()
    assert report["doubtful"][0]["url"].startswith("http://label-studio:8080/projects/7/")


@pytest.mark.parametrize(
    "query, status, fragment",
    [
        ("project=8", 404, "no trained version"),
        ("project=7&top=0", 400, "top must be in [1, 1000]"),
        ("project=7&top=x", 400, "top must be a int"),
        ("project=7&threshold=2", 400, "threshold must be in"),
        ("project=7&expected_error_rate=-1", 400, "expected_error_rate"),
        ("project=../7", 400, "project id"),
    ],
)
def test_report_errors(stored, query, status, fragment):
    client, _ = make(stored[0])
    for path in ("/report", "/report.json"):
        response = client.get(f"{path}?{query}", headers=GOOD)
        assert response.status_code == status, (path, response.get_data())
        assert fragment in response.get_json()["error"]


def test_report_of_a_version_without_annotation_scores_404(tmp_path, tiny_scout):
    publish_scout(tmp_path, 3, tiny_scout, scores={"1": {"result": [], "score": 0.5}})
    client, _ = make(tmp_path)
    response = client.get("/report.json?project=3", headers=GOOD)
    assert response.status_code == 404 and "train again" in response.get_json()["error"]


def test_selftest_is_queued_with_its_noise_and_shows_in_status(tmp_path):
    client, selftests = make(tmp_path)
    status = client.get("/status?project=5", headers=GOOD).get_json()
    assert status["selftest"] == {"state": "idle", "job": "idle"}
    for query, body in [("noise=bogus", {}), ("", {"noise": "x"}), ("", {"noise": []})]:
        response = client.post(f"/selftest?project=5&{query}", json=body, headers=GOOD)
        assert response.status_code == 400 and "noise must be among" in response.get_json()["error"]
    assert selftests.submitted == []
    response = client.post("/selftest?project=5&noise=sentence", headers=GOOD)
    assert response.status_code == 202
    assert response.get_json() == {"status": "started", "project": "5", "noise": ["sentence"]}
    response = client.post("/selftest", json={"project": 5}, headers=GOOD)  # the default
    assert response.get_json()["noise"] == ["annotators"]
    assert selftests.submitted == ["5", "5"]
    assert ProjectStore(tmp_path, 5).inbox().selftest_request["noises"] == ["annotators"]
    selftests.states["5"] = RUNNING
    assert client.get("/status?project=5", headers=GOOD).get_json()["selftest"]["job"] == RUNNING


def test_a_dead_selftest_shows_as_failed(tmp_path):
    client, selftests = make(tmp_path)
    ProjectStore(tmp_path, 5).update_status(selftest={"state": "running", "started_at": 1.0})
    selftests.states["5"] = RUNNING  # alive: left alone
    assert (
        client.get("/status?project=5", headers=GOOD).get_json()["selftest"]["state"] == "running"
    )
    selftests.states["5"] = IDLE  # recorded running, no process: it died
    status = client.get("/status?project=5", headers=GOOD).get_json()
    assert status["selftest"]["state"] == "failed"
    assert status["selftest"]["last_error"] == ABANDONED_SELFTEST
    assert status["state"] == "idle"  # the training's state is another matter


def test_name_annotators():
    tasks = [
        {"id": 1, "annotations": [{"completed_by": 1}, {"completed_by": 9}, {"x": 1}, "junk"]},
        {"id": 2},
        "not a task",
    ]
    named = name_annotators(tasks, {1: "a@x.org"})
    assert named[0]["annotations"] == [
        {"completed_by": {"id": 1, "email": "a@x.org"}},
        {"completed_by": 9},
        {"x": 1},
        "junk",
    ]
    assert named[1:] == tasks[1:]
    assert tasks[0]["annotations"][0] == {"completed_by": 1}  # the input is not modified


def test_runners_of_two_kinds_do_not_see_each_other(tmp_path):
    started, release = threading.Event(), threading.Event()

    def job(project):
        started.set()  # inside the runner's lock
        release.wait(10)

    selftests = ThreadRunner(job, tmp_path, kind="selftest")
    trainings = ThreadRunner(lambda project: None, tmp_path)
    selftests.submit("4")
    try:
        assert started.wait(10) and selftests.state("4") == RUNNING
        assert trainings.state("4") == IDLE  # another process's view: only its own lock
        assert (tmp_path / "4" / ".selftest.lock").exists()
    finally:
        release.set()
        assert selftests.wait(timeout=10)


def test_report_page_survives_lone_surrogates_in_task_text(stored, tmp_path, tiny_scout):
    """Label Studio stores whatever text it is sent; a lone surrogate (found by the fuzz test)
    cannot be encoded as UTF-8, and must not turn the whole page into a 500."""
    import copy

    _, _, scores = stored
    broken = copy.deepcopy(scores)
    broken["100"]["annotations"][0]["words"][0] = "a\udfffb"
    spec = parse_label_config(NER_CONFIG)
    items = [i for i in read_tasks(name_annotators(team_tasks(), USERS), spec).tasks if i]
    publish_scout(
        tmp_path / "models",
        7,
        tiny_scout,
        scores=broken,
        meta=lambda name: version_meta(name, spec, Settings(k=3, n_samples=10), items, 4),
    )
    client, _ = make(tmp_path / "models")
    page = client.get("/report?project=7", headers=GOOD)
    assert page.status_code == 200, page.get_data()[:300]
    assert b"a\\udfffb" in page.get_data() and page.mimetype == "text/html"


def test_report_shows_the_project_s_settings_beside_the_version_s(stored):
    """What the version trained with, and what the project set and its next training uses."""
    model_dir, _, _ = stored
    store = ProjectStore(model_dir, 7)
    client, _ = make(model_dir, k=3, n_samples=10)
    try:
        store.replace_overrides({"k": 5, "crf": False})
        meta = client.get("/report.json?project=7", headers=GOOD).get_json()["meta"]
        assert meta["settings"]["k"] == 3  # the version's
        assert meta["project_settings"]["overrides"] == {"k": 5, "crf": False}
        assert meta["project_settings"]["effective"]["k"] == 5
        page = client.get("/report?project=7", headers=GOOD).get_data(as_text=True)
        assert "<th>set for this project</th><td>crf=False, k=5 (" in page
        assert "<th>next training's settings</th>" in page
        store.replace_overrides({})
        page = client.get("/report?project=7", headers=GOOD).get_data(as_text=True)
        assert "nothing: the server's settings" in page
    finally:
        store.replace_overrides({})


def test_the_report_names_the_reference_corpus_a_version_trained_on(tmp_path, tiny_scout):
    from subregweigh.weigh import SubRegWeigh

    folder = tmp_path / "models" / "references"
    folder.mkdir(parents=True)
    (folder / "corpus.conll").write_text("EU B-ORG\nrejects O\n", encoding="utf-8")
    settings = Settings(
        k=3, n_samples=10, model_dir=str(tmp_path / "models"), reference="corpus.conll"
    )
    spec = parse_label_config(NER_CONFIG)
    items = [i for i in read_tasks(name_annotators(team_tasks(), USERS), spec).tasks if i]
    srw = SubRegWeigh.from_parts([tiny_scout], k=3, n_samples=10, progress=False)
    publish_scout(
        tmp_path / "models",
        5,
        tiny_scout,
        scores=score_tasks(srw, spec, items),
        meta=lambda name: version_meta(name, spec, settings, items, 4, n_reference=200),
    )
    client, _ = make(tmp_path / "models")
    meta = client.get("/report.json?project=5", headers=GOOD).get_json()["meta"]
    assert meta["reference"] == {"name": "corpus.conll", "examples": 200}
    page = client.get("/report?project=5", headers=GOOD).get_data(as_text=True)
    assert "<th>reference corpus</th><td>corpus.conll: 200 examples, trained on" in page
    # A version trained without one says nothing of it.
    publish_scout(
        tmp_path / "models",
        6,
        tiny_scout,
        scores=score_tasks(srw, spec, items),
        meta=lambda name: version_meta(name, spec, Settings(k=3, n_samples=10), items, 4),
    )
    assert "reference" not in client.get("/report.json?project=6", headers=GOOD).get_json()["meta"]
    assert "reference corpus" not in client.get("/report?project=6", headers=GOOD).get_data(
        as_text=True
    )


def test_the_report_says_what_the_versions_scout_learned(tmp_path, tiny_scout):
    """Issue 59: what the scout learned of its own annotations is kept with the version
    (learned.json, beside its parts); the project's report and /status show it, with the
    warning when it learned too little; a version without it claims nothing."""
    from backend.serving.report import project_report, render
    from subregweigh.learned import Learned

    spec = parse_label_config(NER_CONFIG)
    items = [i for i in read_tasks(name_annotators(team_tasks(), USERS), spec).tasks if i]
    scores = {
        item.id: {
            "annotations": [
                {
                    "id": f"{item.id}/1",
                    "words": ["Ann"],
                    "tags": ["B-PER"],
                    "majority": ["O"],
                    "score": 0.4,
                }
            ],
            "score": 0.4,
        }
        for item in items
    }
    settings = Settings(model_dir=str(tmp_path))
    collapsed = Learned.of([("B-PER", "O"), ("B-LOC", "O")], [("O", "O")] * 2)
    for project, learned in ((8, collapsed), (9, None)):
        publish_scout(tmp_path, project, tiny_scout, scores=scores, learned=learned)
    report = project_report(settings, "8")
    assert report["learned"] == collapsed.to_json() and report["learned"]["too_little"]
    assert "finds 0 of the 2 entities" in render(report, "8")
    assert project_report(settings, "9")["learned"] is None
    client, _ = make(tmp_path)  # /status says it of the version that serves
    serving = client.get("/status?project=8", headers=GOOD).get_json()["serving"]
    assert serving["learned"] == collapsed.to_json()
    assert "beware: the scout finds 0 of the 2 entities" in serving["message"]
    assert "rest on the CRF" in serving["message"]
    fine = client.get("/status?project=9", headers=GOOD).get_json()["serving"]
    assert fine["learned"] is None and "beware" not in fine["message"]

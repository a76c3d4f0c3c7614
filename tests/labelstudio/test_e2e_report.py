"""The project report, the self-test and the stored scores, end to end: a real Label Studio 1.23,
the backend with basic auth, one real training, and headless Chromium.

One NER project (CoNLL-2003 sentences) is built with known annotators and known errors
(:func:`testbed.projects.team_ner_tasks`): alice and bob annotate 15 tasks each, carol annotates
10 of them again and retypes a recurring entity in 5. Every test below reads that one training;
the last one then edits annotations through Label Studio and waits for the retraining they start
(``SRW_RETRAIN_AFTER=2``), so it must stay last.
"""

from __future__ import annotations

import base64
import time
from collections import Counter
from urllib.parse import quote

import numpy as np
import pytest

from backend.labelstudio.webhook_auth import TOKEN_HEADER
from testbed.browser import Page, require_chromium
from testbed.projects import (
    TEAM,
    TEAM_ENV,
    TYPES,
    field,
    score_below,
    team_project,
    wait_selftest,
    wait_trained,
)
from testbed.servers import BackendServer, LabelStudioServer, require_label_studio

AUTH = ("lead", "report-pass-5e1f")
RETRAIN_AFTER = 2  # annotation changes; only the last test makes any


class Project:
    """The trained project every test reads."""

    def __init__(self, ls_server, backend, ls, project, task_ids, built, status):
        self.ls_server, self.backend, self.ls = ls_server, backend, ls
        self.id, self.task_ids, self.built, self.status = project, task_ids, built, status

    def get(self, path: str):
        code, body = self.backend.get(path, auth=AUTH)
        assert code == 200, (path, code, body)
        return body

    def predictions(self) -> dict[int, list]:
        """task id -> its predictions, through Label Studio's API."""
        tasks = self.ls.tasks.list(project=self.id, fields="all")
        return {t.id: list(t.predictions or []) for t in tasks}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    require_label_studio()
    tmp = tmp_path_factory.mktemp("report")
    with LabelStudioServer() as ls_server:
        env = {
            **TEAM_ENV,
            "SRW_RETRAIN_AFTER": str(RETRAIN_AFTER),
            **ls_server.backend_env,
            "BASIC_AUTH_USER": AUTH[0],
            "BASIC_AUTH_PASS": AUTH[1],
        }
        backend = BackendServer(tmp / "models", env, tmp / "backend.log").start()
        try:
            ls = ls_server.sdk()
            project_id, task_ids, built, status = team_project(ls_server, backend, auth=AUTH)
            yield Project(ls_server, backend, ls, project_id, task_ids, built, status)
        finally:
            backend.stop()


def test_every_annotation_has_its_own_score_and_the_task_its_minimum(project):
    report = project.get(f"/report.json?project={project.id}")
    annotations = report["annotations"]
    assert len(annotations) == len(project.built) == 40
    # Each annotation is there once, under its task and the email of whoever made it.
    expected = Counter((str(project.task_ids[b["task"]]), b["annotator"]) for b in project.built)
    assert Counter((a["task"], a["annotator"]) for a in annotations) == expected
    assert all(0.0 <= a["score"] <= 1.0 and 0.0 <= a["reliability"] <= 1.0 for a in annotations)
    # In Label Studio a task's prediction score is the minimum of its annotations' scores.
    version = project.status["current_version"]
    by_task: dict[str, list[float]] = {}
    for a in annotations:
        by_task.setdefault(a["task"], []).append(a["score"])
    for task_id, predictions in project.predictions().items():
        (mine,) = [p for p in predictions if field(p, "model_version") == version]
        assert field(mine, "score") == pytest.approx(min(by_task[str(task_id)]))
    overlapping = [s for s in by_task.values() if len(s) == 2]
    assert len(overlapping) == 10


def test_per_annotator_and_per_label_tables_on_known_annotators_and_errors(project):
    report = project.get(f"/report.json?project={project.id}")
    rows = {r["annotator"]: r for r in report["annotators"]}
    assert {name: r["n"] for name, r in rows.items()} == {TEAM[0]: 15, TEAM[1]: 15, TEAM[2]: 10}
    scores = {
        name: [a["score"] for a in report["annotations"] if a["annotator"] == name] for name in TEAM
    }
    for name, row in rows.items():
        assert row["mean_score"] == pytest.approx(np.mean(scores[name]))
        assert row["n_doubtful"] == sum(s < 0.5 for s in scores[name])
        assert row["small"] == (row["n"] < 10)
    # The careless annotator's work is the most doubted.
    assert rows[TEAM[2]]["mean_score"] < min(
        rows[TEAM[0]]["mean_score"], rows[TEAM[1]]["mean_score"]
    )

    # Per label: every gold entity of every annotation is counted under its label, carol's
    # retyped ones included.
    confusion = report["confusion"]
    totals = dict(zip(confusion["labels"], np.array(confusion["matrix"]).sum(axis=1).tolist()))
    built = Counter(t for b in project.built for t in b["entities"])
    assert {k: v for k, v in totals.items() if k != "O"} == dict(built)
    labels = {r["label"]: r for r in report["labels"]}
    assert sum(r["n"] for k, r in labels.items() if k != "O") == sum(built.values())
    print(
        "\nper annotator: "
        + "; ".join(
            f"{r['annotator']} n={r['n']} mean {r['mean_score']:.2f}" for r in report["annotators"]
        )
        + "\nper label: "
        + "; ".join(
            f"{r['label']} {r['disagree']}/{r['n']} {r['confused_with'][:2]}"
            for r in report["labels"]
        )
    )


def test_report_renders_in_a_real_browser(project, tmp_path):
    require_chromium()
    import base64

    token = base64.b64encode(f"{AUTH[0]}:{AUTH[1]}".encode()).decode()
    url = f"{project.backend.url}/report?project={project.id}&top=8"
    with Page(width=1200, height=900, headers={"Authorization": f"Basic {token}"}) as page:
        page.goto(url)
        seen = page.evaluate(
            """(() => {
              const text = s => [...document.querySelectorAll(s)].map(e => e.innerText.trim());
              return {
                title: document.title,
                images: [...document.images].map(
                  i => [i.complete, i.naturalWidth, i.naturalHeight]),
                annotators: text('#annotator-table tr td:first-child'),
                counts: text('#annotator-table tr td:nth-child(2)'),
                labels: text('#label-table tr td:first-child'),
                doubtful: document.querySelectorAll('#doubtful .doubtful').length,
                links: [...document.querySelectorAll('#doubtful a')].map(a => a.href),
                differs: document.querySelectorAll('#doubtful .ent.differs').length,
                model: document.querySelector('#model-table').innerText,
                width: document.documentElement.scrollWidth,
              };
            })()"""
        )
        page.screenshot(tmp_path / "report.png")
    assert seen["title"] == f"Project {project.id}: annotation report"
    (histogram,) = seen["images"]
    assert histogram[0] and histogram[1] > 300 and histogram[2] > 100  # the PNG decoded
    assert sorted(seen["annotators"]) == sorted(TEAM)
    assert sorted(seen["counts"], key=int) == ["10", "15", "15"]
    assert {"PER", "LOC", "ORG"} <= {label.split()[0] for label in seen["labels"]}
    assert seen["doubtful"] == 8
    prefix = f"{project.ls_server.url}/projects/{project.id}/data?task="
    assert len(seen["links"]) == 8 and all(link.startswith(prefix) for link in seen["links"])
    assert {int(link[len(prefix) :]) for link in seen["links"]} <= set(project.task_ids)
    assert seen["differs"] >= 1  # a doubtful entity is highlighted
    assert project.status["current_version"] in seen["model"]
    assert seen["width"] <= 1200  # no sideways scrolling
    assert (tmp_path / "report.png").stat().st_size > 20_000


def test_data_manager_filter_and_region_doubt_through_label_studio(project):
    version = project.status["current_version"]
    scores = {}
    noted = 0
    for task_id, predictions in project.predictions().items():
        (mine,) = [p for p in predictions if field(p, "model_version") == version]
        scores[task_id] = field(mine, "score")
        for region in field(mine, "result"):
            assert 0.0 <= region["score"] <= 1.0  # per-entity: the share of copies predicting it
            noted += bool(region.get("meta", {}).get("text"))
    assert noted >= 1, "no region says where the annotation differs"
    # The Data Manager's filter "Prediction score < 0.5" on the stored scores
    listed = project.ls_server.api(
        "GET", f"/api/tasks?project={project.id}&page_size=100&query={quote(score_below(0.5))}"
    )["tasks"]
    below = {t for t, s in scores.items() if s < 0.5}
    assert below and len(below) < len(scores)  # the filter has something to tell apart
    assert {t["id"] for t in listed} == below


def test_selftest_job_reports_without_touching_label_studio(project):
    before = {t: len(p) for t, p in project.predictions().items()}
    annotations_before = project.ls_server.api("GET", f"/api/projects/{project.id}")[
        "total_annotations_number"
    ]
    # Sentence-level noise only (one training, not two: CI's 2 cores); both are the default.
    code, body = project.backend.post(f"/selftest?project={project.id}&noise=bogus", {}, auth=AUTH)
    assert code == 400 and "noise must be among paper, sentence" in body["error"]
    code, body = project.backend.post(
        f"/selftest?project={project.id}", {"noise": ["sentence"]}, auth=AUTH
    )
    assert code == 202 and body["noise"] == ["sentence"], body
    selftest = wait_selftest(project.backend, project.id, auth=AUTH)
    assert selftest["n"] == 40 and selftest["rate"] == 0.1
    (result,) = selftest["results"]
    assert result["noise"] == "sentence" and result["n_injected"] == 4  # 10% of 40
    assert result["base_rate"] == pytest.approx(0.1)
    assert 0 <= result["found"] <= 4 and 0 <= result["found_in_top"] <= result["top"] == 10
    assert 0 < result["average_precision"] <= 1
    print(f"\nself-test: {selftest['message']}")
    # Nothing was written to Label Studio ...
    assert {t: len(p) for t, p in project.predictions().items()} == before
    assert (
        project.ls_server.api("GET", f"/api/projects/{project.id}")["total_annotations_number"]
        == annotations_before
    )
    assert project.ls.projects.get(id=project.id).model_version == project.status["current_version"]
    # ... and the report shows it.
    report = project.get(f"/report.json?project={project.id}")
    assert report["selftest"]["results"] == selftest["results"]
    code, page = project.backend.get(f"/report?project={project.id}", auth=AUTH)
    assert code == 200 and 'id="selftest"' in page
    assert f"{result['found_in_top']} of 10</b>" in page


def _retype_first_entity(ls_server, task_id: int) -> None:
    """Edit the task's first annotation through Label Studio's API (ANNOTATION_UPDATED)."""
    annotation = ls_server.api("GET", f"/api/tasks/{task_id}")["annotations"][0]
    first, *rest = annotation["result"]
    label = first["value"]["labels"][0]
    value = {**first["value"], "labels": [TYPES[(TYPES.index(label) + 1) % len(TYPES)]]}
    ls_server.api(
        "PATCH",
        f"/api/annotations/{annotation['id']}",
        {"result": [{**first, "value": value}, *rest]},
    )


def _events_counted(project, n: int, timeout: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status = project.get(f"/status?project={project.id}")
        if status["events_since_training"] >= n or time.monotonic() > deadline:
            return status
        time.sleep(0.5)


# Last: it retrains the project the tests above read.
def test_annotation_changes_reach_the_backend_behind_basic_auth_and_retrain(project):
    """Label Studio sends the webhook it created on connect (<backend>/webhook, every action)
    without the ML backend's basic-auth credentials; the first training (started through Label
    Studio's API, above) gave it the backend's webhook token, so annotation edits are counted
    and retrain the scout."""
    version = project.status["current_version"]
    token = base64.b64encode(f"{AUTH[0]}:{AUTH[1]}".encode()).decode()
    hooks = project.ls_server.api("GET", f"/api/webhooks?project={project.id}")
    (hook,) = [h for h in hooks if h["url"] == f"{project.backend.url}/webhook"]

    _retype_first_entity(project.ls_server, project.task_ids[0])
    status = _events_counted(project, 1)
    assert status["events_since_training"] == 1, (
        f"the ANNOTATION_UPDATED webhook did not reach the backend (its headers: "
        f"{sorted(hook['headers'])}); the backend saw:\n"
        + "\n".join(line for line in project.backend.log(400).splitlines() if "/webhook" in line)
    )
    assert list(hook["headers"]) == [TOKEN_HEADER]  # the token, never the password
    assert hook["send_for_all_actions"] and hook["is_active"]  # the rest as Label Studio made it
    log = project.backend.log_path.read_text()
    assert log.count("its webhook token") == 1
    assert AUTH[1] not in log and token not in log

    _retype_first_entity(project.ls_server, project.task_ids[1])  # the RETRAIN_AFTER-th change
    again = wait_trained(project.backend, project.id, auth=AUTH, previous=version)
    assert again["current_version"] != version and again["events_since_training"] == 0
    assert project.ls.projects.get(id=project.id).model_version == again["current_version"]
    # Already there: the retraining changed nothing in Label Studio's webhook.
    hooks = project.ls_server.api("GET", f"/api/webhooks?project={project.id}")
    assert [h["headers"] for h in hooks] == [hook["headers"]]
    assert project.backend.log_path.read_text().count("its webhook token") == 1

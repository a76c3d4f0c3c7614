"""Suggestions with confidence in a real Label Studio 1.23 (issue 29, item 3): the predictions
the backend writes are stored as sent, the classification note and the suggested choice's
score included, and the reviewer sees them: a NER region's note in the labeling view, a
classification note in the Data Manager's "Prediction results" column (Label Studio 1.23's
labeling view shows a choice's meta nowhere). Real scouts, Label Studio, headless Chromium."""

from __future__ import annotations

import json
import time

import pytest

from backend.labelstudio.client import LabelStudioAPI
from backend.labelstudio.tasks import parse_label_config, read_tasks, score_tasks
from backend.serving.publish import write_predictions
from subregweigh.weigh import SubRegWeigh
from testbed.browser import Page, chromium_available
from testbed.servers import LS_PASSWORD, LS_USERNAME
from tests.backend.test_suggestions import CLS_CONFIG, NER_CONFIG, ls_task, sentiment_scout

pytestmark = pytest.mark.slow
VERSION = "srw-suggest-test"


def _project(ls, title: str, config: str, tasks: list[dict]) -> int:
    project = ls.api("POST", "/api/projects", {"title": title, "label_config": config})["id"]
    ls.api("POST", f"/api/projects/{project}/import", tasks)
    return project


def _write(ls, project: int, srw) -> dict:
    """What a training writes: the project's tasks read back through the API, scored, and
    their predictions imported; returns the scores by task id."""
    api = LabelStudioAPI(ls.url, ls.token)
    spec = parse_label_config(api.label_config(project))
    items = [item for item in read_tasks(api.tasks(project), spec).tasks if item]
    scores = score_tasks(srw, spec, items)
    write_predictions(api, str(project), VERSION, scores)
    api.set_model_version(project, VERSION)  # the Data Manager shows this version's scores
    return scores


def _stored(ls, project: int) -> dict[str, dict]:
    return {
        str(p["task"]): p
        for p in ls.api("GET", f"/api/predictions?project={project}")
        if p["model_version"] == VERSION
    }


@pytest.fixture(scope="module")
def sentiment_project(label_studio, sst2_train):
    scout, rows = sentiment_scout(sst2_train)
    flipped = {"0": "1", "1": "0"}
    tasks = [
        ls_task(None, ex.text, choices=[flipped[ex.label[0]] if i % 4 == 0 else ex.label[0]])
        for i, ex in enumerate(rows[:12])
    ]
    for task in tasks:
        del task["id"]
    project = _project(label_studio, "sentiment suggestions", CLS_CONFIG, tasks)
    srw = SubRegWeigh.from_parts([scout], k=3, n_samples=10, progress=False)
    return project, _write(label_studio, project, srw)


@pytest.fixture(scope="module")
def ner_project(label_studio, tiny_scout):
    text = "Peter Blackburn spoke in Brussels ."
    task = ls_task(None, text, regions=[(0, 15, "PER")])
    del task["id"]
    project = _project(label_studio, "ner suggestions", NER_CONFIG, [task])
    srw = SubRegWeigh.from_parts([tiny_scout], k=3, n_samples=10, progress=False)
    return project, _write(label_studio, project, srw)


def test_classification_suggestions_are_stored_as_sent(label_studio, sentiment_project):
    project, scores = sentiment_project
    stored = _stored(label_studio, project)
    assert set(stored) == set(scores) and len(stored) == 12
    disagree = 0
    for task, entry in scores.items():
        assert stored[task]["result"] == entry["result"]  # the note and the score included
        assert stored[task]["score"] == pytest.approx(entry["score"])
        (result,) = stored[task]["result"]
        (note,) = result["meta"]["text"]
        assert 0.5 <= result["score"] <= 1.0  # the suggested class of two, at its probability
        assert note.startswith("annotated ") and f"(p {entry['score']:.2f})" in note
        disagree += "the scout suggests" in note
    assert disagree >= 1  # every fourth annotation is flipped


def test_ner_suggestions_are_stored_as_sent(label_studio, ner_project):
    project, scores = ner_project
    ((task, entry),) = scores.items()
    stored = _stored(label_studio, project)[task]
    assert stored["result"] == entry["result"]
    notes = [r["meta"]["text"][0] for r in stored["result"] if "meta" in r]
    assert notes, "the tiny scout agrees with the annotation: nothing to show"
    # a missed entity's note names it, as Label Studio stores and shows the region (issue 59)
    for region in stored["result"]:
        note = region.get("meta", {}).get("text", [""])[0]
        if note.startswith("not annotated"):
            value = region["value"]
            assert note.startswith(
                f'not annotated: the scout finds "{value["text"]}" as {value["labels"][0]} (p '
            ), note


def _show_region_note(page, tab: str, note: str, timeout: float = 60.0) -> None:
    """Select the prediction's ``tab``, then its first region, until the region's ``note``
    shows and stays (Label Studio may select the annotation again while the task loads)."""
    shown = f"document.body.innerText.includes({json.dumps(note)})"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        page.evaluate(f"{tab}.querySelector('.lsf-annotation-button__name').click()")
        time.sleep(1)
        page.evaluate("document.querySelector('.lsf-tree-node-content-wrapper')?.click()")
        time.sleep(1)
        if page.evaluate(shown):
            time.sleep(2)
            if page.evaluate(shown):
                return
    raise TimeoutError(f"the region's note {note!r} did not show within {timeout:.0f} s")


def test_the_reviewer_sees_the_notes(label_studio, sentiment_project, ner_project, tmp_path):
    if not chromium_available():
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    cls_project, cls_scores = sentiment_project
    ner, ner_scores = ner_project
    ((ner_task, ner_entry),) = ner_scores.items()
    (note,) = [r["meta"]["text"][0] for r in ner_entry["result"] if "meta" in r][:1]
    # The Data Manager's first tab, with the "Prediction results" column shown
    columns = label_studio.api("GET", f"/api/dm/columns?project={cls_project}")["columns"]
    shown = {"tasks:id", "tasks:predictions_score", "tasks:predictions_results"}
    hidden = [
        f"tasks:{c['id']}"
        for c in columns
        if c.get("target", "tasks") == "tasks" and c.get("parent") != "data"
    ]
    view = {
        "title": "Default",
        "type": "list",
        "target": "tasks",
        "hiddenColumns": {"explore": sorted(set(hidden) - shown), "labeling": []},
        "filters": {"conjunction": "and", "items": []},
    }
    label_studio.api("POST", "/api/dm/views", {"project": cls_project, "data": view})
    with Page(1600, 900) as page:
        page.log_in_to_label_studio(label_studio.url, LS_USERNAME, LS_PASSWORD)
        # NER: the prediction's tab, then its region: the note is in the region's details
        page.goto(f"{label_studio.url}/projects/{ner}/data?task={ner_task}")
        # the prediction's tab shows its score as a percentage (and a shortened model version)
        percent = json.dumps(f"{ner_entry['score'] * 100:.2f}%")
        tab = (
            "[...document.querySelectorAll('.lsf-annotation-button')]"
            f".find(b => b.innerText.includes({percent}))"
        )
        page.wait_for(f"!!{tab}")
        _show_region_note(page, tab, note)
        page.screenshot(tmp_path / "ner.png", full_page=False)
        # classification: the notes in the Data Manager's table
        page.goto(f"{label_studio.url}/projects/{cls_project}/data")
        page.wait_for("document.querySelectorAll('.lsf-table__row-wrapper').length >= 12")
        table = page.evaluate("document.querySelector('.lsf-table').innerText")
        page.screenshot(tmp_path / "data-manager.png", full_page=False)
    for entry in cls_scores.values():
        assert entry["result"][0]["meta"]["text"][0] in table

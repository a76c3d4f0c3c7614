"""Reviewers' decisions through a real Label Studio 1.23 (backend.reviews).

The gesture is Update on an annotation (``PATCH /api/annotations/{id}``): unchanged confirms it,
changed fixes it. Flag, confirm one task and fix another, retrain: the confirmed task serves
score 1 and is no longer among the most doubtful, across the retrain, until its annotation
changes; the fixed one is rescored; the report counts both.
"""

from __future__ import annotations

import json
import time
from urllib.parse import quote

import numpy as np
import pytest

from testbed.projects import ENGINE_ENV, NER_CONFIG, field, ner_tasks, retyped, wait_trained
from testbed.servers import BackendServer, LabelStudioServer, require_label_studio

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def label_studio():
    require_label_studio()
    with LabelStudioServer() as server:
        yield server


def test_confirm_and_fix_stick_across_a_retrain(label_studio, tmp_path):
    from label_studio_sdk.client import LabelStudio

    env = {
        **ENGINE_ENV,
        "SRW_EPOCHS": "4",
        "LABEL_STUDIO_URL": label_studio.url,
        "LABEL_STUDIO_API_KEY": label_studio.token,
    }
    tasks, _ = ner_tasks(np.random.default_rng(29), 30, 3)
    models = tmp_path / "models"
    with BackendServer(models, env, tmp_path / "backend.log") as backend:
        ls = LabelStudio(base_url=label_studio.url, api_key=label_studio.token)
        project = ls.projects.create(title="review decisions", label_config=NER_CONFIG)
        ls.projects.import_tasks(id=project.id, request=tasks)
        ml = ls.ml.create(project=project.id, url=backend.url, title="subregweigh")
        ls.ml.train(id=ml.id)
        version = wait_trained(backend, project.id)["current_version"]

        def queue() -> list[tuple[int, float]]:
            """(task, score) of the project's tasks, most doubtful first, as Label Studio
            orders them by its predictions' scores."""
            query = quote(json.dumps({"ordering": ["tasks:predictions_score"]}))
            page = label_studio.api(
                "GET", f"/api/tasks?project={project.id}&fields=all&page_size=100&query={query}"
            )
            return [(t["id"], t["predictions_score"]) for t in page["tasks"]]

        def served(task_id: int, version: str) -> float:
            mine = [
                p for p in ls.predictions.list(task=task_id) if field(p, "model_version") == version
            ]
            assert len(mine) == 1, f"task {task_id}: {mine}"
            return field(mine[0], "score")

        def annotation(task_id: int) -> dict:
            (only,) = label_studio.api("GET", f"/api/tasks/{task_id}")["annotations"]
            return only

        def update(task_id: int, result: list) -> None:
            """What Update does in the labeling UI."""
            label_studio.api(
                "PATCH", f"/api/annotations/{annotation(task_id)['id']}", {"result": result}
            )

        def wait(condition, what: str, timeout: float = 120):
            deadline = time.monotonic() + timeout
            while not condition():
                assert time.monotonic() < deadline, f"{what}\n{backend.log(80)}"
                time.sleep(0.5)

        before = queue()
        doubtful = [t for t, _ in before if annotation(t)["result"]][:2]
        confirmed, fixed = doubtful
        raw = dict(before)
        assert raw[confirmed] < 1.0

        # Confirm: Update with the annotation as it is. Fix: Update with an entity retyped.
        update(confirmed, annotation(confirmed)["result"])
        update(fixed, retyped(annotation(fixed)["result"]))
        wait(lambda: served(confirmed, version) == pytest.approx(1.0), "confirmed not served 1")
        reviews = json.loads((models / str(project.id) / "reviews.json").read_text())
        decided = {(d["task"], d["decision"]) for d in reviews["decisions"].values()}
        assert decided == {(str(confirmed), "confirmed"), (str(fixed), "fixed")}
        scores = models / str(project.id) / "versions" / version / "scores.json"
        wait(
            lambda: (
                served(fixed, version)
                == pytest.approx(json.loads(scores.read_text())[str(fixed)]["score"])
                and served(fixed, version) != pytest.approx(raw[fixed])
            ),
            "fixed task not rescored",
        )
        top = [t for t, _ in queue()[:5]]
        assert confirmed not in top

        # A retrain: the confirmation holds (the annotation did not change).
        ls.ml.train(id=ml.id)
        retrained = wait_trained(backend, project.id, previous=version)["current_version"]
        assert served(confirmed, retrained) == pytest.approx(1.0)
        assert confirmed not in [t for t, _ in queue()[:5]]
        stored = json.loads(
            (models / str(project.id) / "versions" / retrained / "scores.json").read_text()
        )
        assert stored[str(confirmed)]["score"] < 1.0  # the scout's own score stays stored
        assert served(fixed, retrained) == pytest.approx(stored[str(fixed)]["score"])

        code, report = backend.get(f"/report.json?project={project.id}&threshold=1.0")
        assert code == 200, report
        assert (report["reviews"]["reviewed"], report["reviews"]["fixed"]) == (2, 1)
        assert report["reviews"]["precision"] == pytest.approx(0.5)
        assert report["reviews"]["all"]["confirmed"] == 1
        assert confirmed not in [int(d["task"]) for d in report["doubtful"][:5]]
        code, page = backend.get(f"/report?project={project.id}")
        assert code == 200 and "reviewers' decisions" in str(page)

        # An edit undoes the confirmation: the task is served its new score again.
        update(confirmed, retyped(annotation(confirmed)["result"]))
        wait(lambda: served(confirmed, retrained) < 1.0, "the edit did not undo the confirmation")

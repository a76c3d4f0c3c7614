"""One-click review through a real Label Studio 1.23 and headless Chromium (issue 44).

Two projects (NER, with one task annotated without any region, and sentiment classification),
annotated by one user, trained through our backend; ``python -m backend.labelstudio.review_control
--apply`` then adds the review control to each. A second user (the admin) reviews in the
browser: the Data Manager sorted by prediction score, open the top undecided task, click a
choice of the control, Update. The backend's rescore reads the choice as the decision of the
user who saved it (``reviews.json``, and per reviewer in the report): *correct* serves the task
at score 1, so after a reload it is no longer at the top; *wrong (fixed)* with a corrected label
records a fix and rescores the task; clearing the choice withdraws the decision; a NER task
annotated without any region is confirmed with the same one click.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest

from scripts.screenshot_data_manager import configure_view
from subregweigh.io.labelstudio import REVIEW_CONTROL
from testbed.browser import Page, require_chromium
from testbed.projects import (
    CLS_CONFIG,
    ENGINE_ENV,
    NER_CONFIG,
    classification_tasks,
    create_users,
    import_tasks,
    ner_tasks,
    retyped_region,
    serving_prediction,
    serving_score,
    wait_trained,
)
from testbed.servers import (
    LS_PASSWORD,
    LS_USERNAME,
    REPO,
    label_studio_and_backend,
    require_label_studio,
)

pytestmark = pytest.mark.slow

ANNOTATOR = "annotator@example.com"  # who annotated; the reviewer is Label Studio's admin
DECIDED_WITHIN = 120.0  # seconds from Update to the decision in reviews.json
ROW = ".lsf-table__row-wrapper"  # a task row of the Data Manager
UPDATE = "document.querySelector('[data-testid=bottombar-update-button]')"
# The smallest training that scores every task, on CI's 2 cores.
ENV = {**ENGINE_ENV, "SRW_EPOCHS": "4", "SRW_K": "4", "SRW_N": "20"}


def _annotated_by(tasks: list[dict], user: int) -> list[dict]:
    for task in tasks:
        for annotation in task["annotations"]:
            annotation["completed_by"] = user
    return tasks


def _add_control(label_studio, project: int) -> str:
    """``python -m backend.labelstudio.review_control PROJECT --apply``, as the lead runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SRW_", "LABEL_STUDIO_"))}
    env.update(LABEL_STUDIO_URL=label_studio.url, LABEL_STUDIO_API_KEY=label_studio.token)
    run = subprocess.run(
        [sys.executable, "-m", "backend.labelstudio.review_control", str(project), "--apply"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


@pytest.fixture(scope="module")
def review(tmp_path_factory):
    """Label Studio, the backend, and the two trained projects with the control added."""
    require_label_studio()
    require_chromium()
    tmp = tmp_path_factory.mktemp("review-control")
    with label_studio_and_backend(tmp, ENV) as (label_studio, backend):
        ls = label_studio.sdk()
        annotator = create_users(label_studio, (ANNOTATOR,))[ANNOTATOR]
        seed = 29
        ner, ner_wrong = ner_tasks(np.random.default_rng(seed), 30, 3)
        # one task annotated without any region, though its sentence has entities
        bare = next(i for i in range(len(ner)) if i not in ner_wrong)
        ner[bare]["annotations"][0]["result"] = []
        # a task with an entity retyped, its region and the label that region should have
        fix, region, right = retyped_region(seed, ner, ner_wrong, 30)
        cls, cls_wrong = classification_tasks(np.random.default_rng(5), 24, 3)
        projects = {}
        for kind, config, tasks in [("ner", NER_CONFIG, ner), ("cls", CLS_CONFIG, cls)]:
            project = ls.projects.create(title=f"one-click review {kind}", label_config=config)
            ids = import_tasks(ls, project.id, _annotated_by(tasks, annotator))
            ml = ls.ml.create(project=project.id, url=backend.url, title="subregweigh")
            ls.ml.train(id=ml.id)
            projects[kind] = SimpleNamespace(
                id=project.id, ids=list(ids), root=tmp / "models" / str(project.id)
            )
        for project in projects.values():
            wait_trained(backend, project.id)
            shown = _add_control(label_studio, project.id)
            assert "Saved" in shown
            configure_view(label_studio, project.id)  # sorted by score, lowest first
        ner_project, cls_project = projects["ner"], projects["cls"]
        ner_project.bare = ner_project.ids[bare]
        ner_project.fix = (ner_project.ids[fix], region["value"], right)
        # what the tests that take the top task leave alone
        ner_project.reserved = {ner_project.bare, ner_project.ids[fix]}
        cls_project.reserved = set()
        cls_project.wrong = {cls_project.ids[i] for i in cls_wrong}
        yield SimpleNamespace(
            label_studio=label_studio,
            backend=backend,
            ner=ner_project,
            cls=cls_project,
            annotator=annotator,
        )


# ------------------------------------------------------------------ what the backend keeps


def current(project, task: int) -> list[dict]:
    """The task's current decisions in reviews.json (one per decided annotation)."""
    path = project.root / "reviews.json"
    kept = json.loads(path.read_text())["decisions"].values() if path.exists() else ()
    return [d for d in kept if d["task"] == str(task)]


def wait(ctx, condition, what: str, timeout: float = DECIDED_WITHIN):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}\n{ctx.backend.log(60)}"
        time.sleep(0.5)


def decided(ctx, project, task: int, decision: str) -> dict:
    """The task's decision once reviews.json has it (bounded wait), made by the reviewer."""
    wait(
        ctx,
        lambda: [d["decision"] for d in current(project, task)] == [decision],
        f"task {task}: no decision {decision!r} in reviews.json: {current(project, task)}",
    )
    (kept,) = current(project, task)
    assert kept["reviewer"] == LS_USERNAME, kept  # who saved it, not who annotated it
    return kept


def served(ctx, project, task: int) -> float:
    """The score of the task's prediction of the serving version, as Label Studio sorts by."""
    return serving_prediction(ctx.backend, ctx.label_studio, project.id, task)["score"]


def stored(ctx, project, task: int) -> float:
    """The scout's own score of the task, as the serving version stores it."""
    return serving_score(ctx.backend, project.root, project.id, task)


def annotation(ctx, task: int) -> dict:
    (only,) = ctx.label_studio.api("GET", f"/api/tasks/{task}")["annotations"]
    return only


def labels(ctx, task: int) -> list[tuple]:
    """The annotation's labels, as (start, end, labels) of each region (NER) or
    (None, None, choices) (classification), the review control's choice left out: what Update
    saves of them (it adds the region's text and origin)."""
    return sorted(
        (
            r["value"].get("start"),
            r["value"].get("end"),
            r["value"].get("labels", r["value"].get("choices")),
        )
        for r in annotation(ctx, task)["result"]
        if r["from_name"] != REVIEW_CONTROL
    )


def choice(ctx, task: int) -> str | None:
    """The review control's choice in the task's annotation, as Label Studio saved it."""
    for region in annotation(ctx, task)["result"]:
        if region["from_name"] == REVIEW_CONTROL:
            return region["value"]["choices"][0]
    return None


# ------------------------------------------------------------------ the reviewer's browser


def _row(task: int) -> str:
    return (
        f"[...document.querySelectorAll('{ROW}')].find(r => r.querySelector("
        f"'input[aria-label=\"Select Task {task}\"]'))"
    )


def _choice_input(value: str) -> str:
    return f"document.querySelector({json.dumps(f'input[name={json.dumps(value)}]')})"


class Reviewer:
    """The admin in headless Chromium, logged in to Label Studio."""

    def __init__(self, ctx):
        self.ctx, self.url = ctx, ctx.label_studio.url
        self.page = Page(1400, 2000)  # tall: the Data Manager renders the rows it shows
        self.page.log_in_to_label_studio(self.url, LS_USERNAME, LS_PASSWORD)

    def close(self) -> None:
        self.page.close()

    def queue(self, project) -> list[int]:
        """The task ids of the Data Manager's rows, top first, after a (re)load of the project's
        Data Manager (its tab sorted by prediction score, lowest first)."""
        page = self.page
        page.goto(f"{self.url}/projects/{project.id}/data")
        page.wait_for(f"!!document.querySelector('{ROW}')", 60)
        rows = (
            f"[...document.querySelectorAll('{ROW}')].map(r => Number(r.querySelector("
            "'input[aria-label^=\"Select Task\"]').getAttribute('aria-label').split(' ').pop()))"
        )
        seen, deadline = None, time.monotonic() + 30
        while time.monotonic() < deadline:  # settled: the same rows twice in a row
            now = page.evaluate(rows)
            if now and now == seen:
                return now
            seen = now
            time.sleep(0.5)
        raise AssertionError(f"the Data Manager's rows did not settle: {seen}")

    def top_undecided(self, project, among: set[int] | None = None) -> int:
        """The first row of the sorted Data Manager without a decision (of ``among``; none of
        the project's ``reserved`` tasks)."""
        for task in self.queue(project):
            if task in project.reserved or current(project, task):
                continue
            if among is None or task in among:
                return task
        raise AssertionError(f"no undecided task in the Data Manager's rows of {project.id}")

    def open(self, task: int) -> None:
        """Click the task's row (in the Data Manager as :meth:`queue` left it); wait for the
        labeling view with the review control."""
        page = self.page
        page.click(f"{_row(task)}.querySelector('.lsf-table__cell:nth-child(2)')")
        page.wait_for(f"new URLSearchParams(location.search).get('task') === '{task}'", 30)
        page.wait_for(f"!!{UPDATE}", 90)
        page.wait_for(f"!!{_choice_input('correct')}", 30)
        # Update is disabled until something changes (waited for: it re-renders as the task loads)
        page.wait_for(f"{UPDATE}.disabled === true", 30)

    def click_choice(self, value: str) -> None:
        checked = f"{_choice_input(value)}.checked"
        was = self.page.evaluate(checked)
        self.page.click(_choice_input(value))
        self.page.wait_for(f"{checked} === {json.dumps(not was)}", 10)

    def relabel(self, start: int, label: str) -> None:
        """Give the region starting at character ``start`` the label ``label`` (select the
        region in the text, then click the label)."""
        self.page.click(f"document.querySelector('.htx-highlight[data-start=\"{start}\"]')")
        label_button = (
            "[...document.querySelectorAll('.lsf-label')].find(e => "
            f"e.querySelector('.lsf-label__text').textContent === {json.dumps(label)})"
        )
        self.page.click(label_button)

    def update(self, task: int, chosen: str | None) -> None:
        """Click Update; wait until Label Studio holds the annotation with ``chosen``."""
        self.page.wait_for(f"!{UPDATE}.disabled", 20)
        self.page.click(UPDATE)
        wait(self.ctx, lambda: choice(self.ctx, task) == chosen, f"task {task} not saved", 30)


@pytest.fixture
def reviewer(review):
    browser = Reviewer(review)
    yield browser
    browser.close()


# ------------------------------------------------------------------ the tests


@pytest.mark.parametrize("kind", ["ner", "cls"])
def test_correct_on_the_top_task_confirms_it_and_it_leaves_the_top(review, reviewer, kind):
    ctx, project = review, getattr(review, kind)
    task = reviewer.top_undecided(project)
    assert served(ctx, project, task) < 1.0
    labels_before = labels(ctx, task)

    reviewer.open(task)
    reviewer.click_choice("correct")
    reviewer.update(task, "correct")

    kept = decided(ctx, project, task, "confirmed")
    assert kept["annotation"] == str(annotation(ctx, task)["id"])
    wait(ctx, lambda: served(ctx, project, task) == pytest.approx(1.0), "confirmed not served 1")
    queue = reviewer.queue(project)
    assert queue[0] != task, f"task {task} is still at the top after a reload: {queue[:5]}"
    assert labels(ctx, task) == labels_before  # as the annotator left them
    code, report = ctx.backend.get(f"/report.json?project={project.id}")
    assert code == 200, report
    rows = {row["reviewer"]: row for row in report["reviews"]["reviewers"]}
    assert rows[LS_USERNAME]["confirmed"] >= 1, rows  # the report counts it, per reviewer
    by = annotation(ctx, task)["completed_by"]  # still the annotator's (an id, or the user)
    assert (by["id"] if isinstance(by, dict) else by) == ctx.annotator


def test_wrong_fixed_with_a_corrected_label_records_a_fix(review, reviewer):
    """A retyped entity of the NER project set back to its right type, then *wrong (fixed)*."""
    ctx, project = review, review.ner
    task, region, right = project.fix
    assert task in reviewer.queue(project), "the task to fix is not among the Data Manager's rows"
    seen = served(ctx, project, task)

    reviewer.open(task)
    reviewer.relabel(region["start"], right)
    reviewer.click_choice("wrong (fixed)")
    reviewer.update(task, "wrong (fixed)")

    kept = decided(ctx, project, task, "fixed")
    assert kept["fixed"] is True and seen < 1.0
    assert (region["start"], region["end"], [right]) in labels(ctx, task)
    # the reviewer vouched for the labels it now holds: served as reviewed, off the top
    wait(ctx, lambda: served(ctx, project, task) == pytest.approx(1.0), "fix not served 1")
    queue = reviewer.queue(project)
    assert queue[0] != task, f"task {task} is still at the top after a reload: {queue[:5]}"


def test_wrong_fixed_on_a_classification_task(review, reviewer):
    """A flipped sentiment set right, then *wrong (fixed)*."""
    ctx, project = review, review.cls
    task = reviewer.top_undecided(project, among=project.wrong)
    ((_, _, label),) = labels(ctx, task)
    right = {"negative": "positive", "positive": "negative"}[label[0]]

    reviewer.open(task)
    reviewer.click_choice(right)
    reviewer.click_choice("wrong (fixed)")
    reviewer.update(task, "wrong (fixed)")

    kept = decided(ctx, project, task, "fixed")
    assert kept["fixed"] is True
    assert labels(ctx, task) == [(None, None, [right])]


def test_clearing_the_choice_withdraws_the_decision(review, reviewer):
    ctx, project = review, review.ner
    task = reviewer.top_undecided(project)
    reviewer.open(task)
    reviewer.click_choice("correct")
    reviewer.update(task, "correct")
    decided(ctx, project, task, "confirmed")
    wait(ctx, lambda: served(ctx, project, task) == pytest.approx(1.0), "confirmed not served 1")

    reviewer.click_choice("correct")  # clicked again: no choice
    reviewer.update(task, None)
    wait(ctx, lambda: not current(project, task), f"task {task}'s decision was not withdrawn")
    # its stored score again, or lower where a copy a reviewer decided contradicts it (issue 61)
    wait(
        ctx,
        lambda: served(ctx, project, task) <= stored(ctx, project, task) + 1e-9,
        "the withdrawn confirmation still serves score 1",
    )
    assert served(ctx, project, task) < 1.0


def test_an_ner_task_without_regions_is_confirmed_in_one_click(review, reviewer):
    """The scout says an entity is missing; the reviewer finds the task right as it is."""
    ctx, project = review, review.ner
    task = project.bare
    assert annotation(ctx, task)["result"] == []
    before = reviewer.queue(project)
    assert task in before, "the task without regions is not among the Data Manager's rows"
    assert served(ctx, project, task) < 1.0

    reviewer.open(task)
    reviewer.click_choice("correct")
    reviewer.update(task, "correct")

    decided(ctx, project, task, "confirmed")
    wait(ctx, lambda: served(ctx, project, task) == pytest.approx(1.0), "confirmed not served 1")
    after = reviewer.queue(project)
    assert after[0] != task and (task not in after or after.index(task) >= before.index(task))
    # the annotation still holds no region: only the decision was saved
    assert [r["from_name"] for r in annotation(ctx, task)["result"]] == [REVIEW_CONTROL]

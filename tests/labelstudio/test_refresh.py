"""The refresh between trainings through a real Label Studio 1.23 (backend.jobs.refresh).

A NER project is trained once. Then an entity that recurs in the project is retyped in all but
one of its tasks, through the API, as a reviewer fixing a convention would: each save's webhook
queues a rescore, which refreshes. Checked: a new version serves, made of the same scout files
(hard links) and a CRF trained again; the task still holding the old convention is doubted more
than before, in the version's scores and in Label Studio's prediction; every task has a
prediction of the new version; the status says what the refresh did.
"""

from __future__ import annotations

import json
import time

import pytest

from backend.review import copies, reviews
from backend.store.store import ProjectStore
from testbed.projects import field, trained_ner_module

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A real Label Studio with a 30-task NER project (none wrong), our backend connected and
    trained once."""
    yield from trained_ner_module(tmp_path_factory, "refresh", seed=31)


def annotated(ctx) -> dict[int, tuple[str, dict]]:
    """Task id -> (its text, its one annotation), as Label Studio holds them."""
    out = {}
    for task in ctx.label_studio.api(
        "GET", f"/api/tasks?project={ctx.project}&fields=all&page_size=100"
    )["tasks"]:
        (only,) = ctx.label_studio.api("GET", f"/api/tasks/{task['id']}")["annotations"]
        out[task["id"]] = (task["data"]["text"], only)
    return out


def mentions(text: str, annotation: dict) -> list[tuple[str, str, dict]]:
    """(mention, type, region) of each region of ``annotation``."""
    return [
        (text[r["value"]["start"] : r["value"]["end"]], r["value"]["labels"][0], r)
        for r in annotation["result"]
    ]


def version_scores(ctx, version: str) -> dict:
    return json.loads((ctx.root / "versions" / version / "scores.json").read_text())


def status(ctx) -> dict:
    code, body = ctx.backend.get(f"/status?project={ctx.project}")
    assert code == 200, body
    return body


def test_a_fixed_convention_reaches_the_task_that_still_holds_the_old_one(trained):
    ctx = trained
    tasks = annotated(ctx)
    counts: dict = {}
    for task, (text, annotation) in tasks.items():
        for mention, etype, _ in mentions(text, annotation):
            counts.setdefault((mention, etype), []).append(task)
    (mention, etype), holders = max(counts.items(), key=lambda kv: len(kv[1]))
    assert len(holders) >= 3, counts
    kept, *fixed = holders
    new_type = next(t for t in ("PER", "ORG", "LOC", "MISC") if t != etype)
    before = version_scores(ctx, ctx.first)[str(kept)]["score"]

    for task in fixed:  # the reviewer's fixes: the mention retyped, everything else as it was
        text, annotation = tasks[task]
        result = [
            {**r, "value": {**r["value"], "labels": [new_type]}}
            if (m, t) == (mention, etype)
            else r
            for m, t, r in mentions(text, annotation)
        ]
        ctx.label_studio.api("PATCH", f"/api/annotations/{annotation['id']}", {"result": result})

    deadline = time.monotonic() + 180
    while True:
        snapshot = status(ctx)  # one reading: the three fields agree
        refresh, current = snapshot.get("last_refresh") or {}, snapshot["current_version"]
        meta = json.loads((ctx.root / "versions" / current / "meta.json").read_text())
        done = refresh.get("version") == current and meta.get("refreshed")
        # nothing waits and no rescore runs: a later batch of the fixes is not mid-refresh
        quiet = not snapshot.get("rescore_pending") and snapshot["rescore_job"] == "idle"
        if done and quiet:
            # the last fix is in the CRF the serving version holds
            if meta["refreshed"]["annotations"] == len(tasks):
                break
        assert time.monotonic() < deadline, f"no refresh after the fixes\n{ctx.backend.log(80)}"
        time.sleep(1)

    first, now = ctx.root / "versions" / ctx.first, ctx.root / "versions" / current
    assert current != ctx.first and meta["refreshed"]["tasks"] >= len(tasks) - len(fixed)
    # the same scout files, linked; a CRF trained again
    weights = sorted(p.relative_to(now) for p in (now / "scout").rglob("*") if p.is_file())
    assert weights and all((now / p).stat().st_ino == (first / p).stat().st_ino for p in weights), (
        "the scout was copied, not linked"
    )
    assert (now / "crf.npz").read_bytes() != (first / "crf.npz").read_bytes()
    # the task holding the old convention is doubted more, stored and served (where the
    # fixes' slips move it up further: halved once per repeated convention)
    after = version_scores(ctx, current)[str(kept)]["score"]
    assert after < before, (before, after)
    served = [p for p in ctx.ls.predictions.list(task=kept) if field(p, "model_version") == current]
    assert len(served) == 1
    # the mention is one convention (its words and type), whatever its length; and each fixed
    # task that labels the same entity string otherwise halves it again (backend.review.copies)
    scores = version_scores(ctx, current)
    kept_reviews = json.loads((ctx.root / "reviews.json").read_text())
    against = copies.state(copies.index(scores), scores, kept_reviews).contradicted.get(
        str(kept), 0
    )
    assert against >= 1  # the fixes contradict the one task left with the old convention
    # Label Studio shows the score the backend serves now: halved once per fix of the
    # convention (each adds its weight: review.net_slips) and once per copy contradicting it
    store = ProjectStore(ctx.root.parent, ctx.project)
    scales = reviews.version_scales(store, current)  # the refreshed version's one scale
    now_served = reviews.served_scores(store, scores, scales)[str(kept)]["score"]
    assert field(served[0], "score") == pytest.approx(now_served)
    assert now_served == pytest.approx(scales[""](after) * 0.5 ** (len(fixed) + against))
    # every task is served by the refreshed version
    versions = ctx.label_studio.api("GET", f"/api/projects/{ctx.project}/model-versions/")
    assert versions.get(current) == len(tasks), versions
    assert refresh["seconds"] > 0 and refresh["annotations"] == len(tasks)
    # the last fix's own rescore ran while the CRF trained, within the CRF's phase
    assert 0 < refresh["rescore_beside_crf_seconds"] <= refresh["phase_seconds"]["crf"]
    # trained on the tasks the training read and the rescores updated (backend.store.snapshot), with
    # every fix: the project was not read again
    assert refresh["read_project"] is False


def test_a_deleted_task_leaves_the_store_and_the_refresh_writes_the_others(trained):
    """Issue 58: Label Studio refuses a whole prediction import (HTTP 400) that names a task it
    no longer holds. After a task is deleted, the next change's refresh still serves: the
    deleted task's prediction is left out, every other task's written, and the deleted task
    leaves the version's scores."""
    ctx = trained
    tasks = annotated(ctx)
    before = status(ctx)["current_version"]
    deleted, edited = sorted(tasks)[:2]
    ctx.label_studio.api("DELETE", f"/api/tasks/{deleted}")
    text, annotation = tasks[edited]
    _, etype, region = mentions(text, annotation)[0]
    new_type = next(t for t in ("PER", "ORG", "LOC", "MISC") if t != etype)
    result = [
        {**r, "value": {**r["value"], "labels": [new_type]}} if r is region else r
        for r in annotation["result"]
    ]
    ctx.label_studio.api("PATCH", f"/api/annotations/{annotation['id']}", {"result": result})
    deadline = time.monotonic() + 180
    while True:
        snapshot = status(ctx)
        refresh, current = snapshot.get("last_refresh") or {}, snapshot["current_version"]
        if current != before and refresh.get("version") == current:
            break
        assert time.monotonic() < deadline, f"no refresh after the deletion\n{ctx.backend.log(80)}"
        time.sleep(1)
    assert str(deleted) not in version_scores(ctx, current)
    versions = ctx.label_studio.api("GET", f"/api/projects/{ctx.project}/model-versions/")
    assert versions.get(current) == len(tasks) - 1, versions
    assert "no longer in the project (deleted)" in ctx.backend.log(200)


def test_a_rescore_parses_the_tasks_it_read_once(trained, monkeypatch):
    """Issue 60: a rescore read Label Studio's payload of its changed tasks once and parsed it
    four times (the snapshot, the decisions, the check for changed labels, the scores). Run
    here in this process against the real Label Studio, with the parser counted: one parse of
    the tasks it read, and they are rescored."""
    from backend.config.settings import Settings
    from backend.jobs import refresh, rescore
    from backend.labelstudio import tasks as task_reading
    from backend.store.store import ProjectStore

    ctx = trained
    parsed: list[int] = []
    parse = task_reading.parse_tasks
    monkeypatch.setattr(
        task_reading,
        "parse_tasks",
        lambda tasks, *args, **kwargs: parsed.append(len(tasks)) or parse(tasks, *args, **kwargs),
    )
    for name, value in ctx.label_studio.backend_env.items():
        monkeypatch.setenv(name, value)
    settings = Settings.from_env(model_dir=str(ctx.root.parent))
    changed = sorted(annotated(ctx))[:3]
    ProjectStore(settings.model_dir, ctx.project).update_status(
        rescore_pending={str(task): time.time() for task in changed}
    )
    done = rescore.rescore_project(str(ctx.project), settings, refresh.refresh_project)
    assert done["rescored"] == 3
    assert parsed == [3]

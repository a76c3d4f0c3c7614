"""A retrain through a real Label Studio 1.23 (issue 61): what Label Studio shows while it runs.

A 30-task NER project is trained once (its first training publishes the CRF's early version),
then retrained with *Start Training*. Read through Label Studio's own API every half second
while the retrain runs: the connection's title (what the model card shows) carries the stage
and when scores are expected, and `/status` says the same; the project's model version and its
predictions' versions are only the first full version and the retrain's (no early version in
between); the title comes back when the retrain ends.
"""

from __future__ import annotations

import re
import time

import pytest

from backend.labelstudio.progress import TITLE_MAX, progress_title
from testbed.projects import retyped, trained_ner_module

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    yield from trained_ner_module(tmp_path_factory, "progress", seed=41)


def status(ctx) -> dict:
    code, body = ctx.backend.get(f"/status?project={ctx.project}")
    assert code == 200, body
    return body


def shown(ctx) -> tuple[str, set[str], str]:
    """(the connection's title, the versions of the project's predictions, the project's model
    version), read without Label Studio calling the backend's /setup (the model-versions view
    that its Predictions settings read)."""
    api = ctx.label_studio.api
    versions = api(
        "GET",
        f"/api/projects/{ctx.project}/model-versions/?extended=true&include_live_models=true",
    )
    (connection,) = [c for c in versions["live"] if c["id"] == ctx.ml.id]
    project_version = api("GET", f"/api/projects/{ctx.project}")["model_version"]
    return connection["title"], {v["model_version"] for v in versions["static"]}, project_version


def test_a_retrain_shows_its_stage_and_serves_the_full_version_until_its_own(trained):
    ctx = trained
    before = status(ctx)
    # the first training published an early version (the CRF's) before its own
    assert [e["what"] for e in before["early_scores"]] == ["the CRF alone, while the scout trains"]
    assert before["scores_seconds"] > 0
    title, _, _ = shown(ctx)
    assert title == "subregweigh"

    ctx.ls.ml.train(id=ctx.ml.id)
    titles, seen_versions, project_versions, agreed = [], set(), set(), []
    deadline = time.monotonic() + 300
    while True:
        now = status(ctx)
        title, versions, project_version = shown(ctx)
        titles.append(title)
        seen_versions |= versions
        project_versions.add(project_version)
        if now.get("progress") and title == progress_title("subregweigh", now["progress"]):
            agreed.append(now["progress"])
        done = now["current_version"] != ctx.first and now["state"] == "idle"
        if done and now["job"] == "idle":
            break
        assert now["state"] != "failed", now
        assert time.monotonic() < deadline, f"no retrain\n{ctx.backend.log(80)}"
        time.sleep(0.5)
    new = now["current_version"]
    # no early version reached Label Studio: the first full version served until the new one
    assert seen_versions <= {ctx.first, new}, seen_versions
    assert project_versions <= {ctx.first, new}, project_versions
    assert now["early_scores"] == [] and now["early_version"] is None

    stages = [t for t in titles if t != "subregweigh"]
    assert stages, titles
    assert all(t.startswith("subregweigh [training ") and len(t) <= TITLE_MAX for t in stages)
    assert any(" 2/4: scout retrains, the last version serves; scores ~" in t for t in stages), (
        stages
    )
    assert agreed, (titles, now)  # /status said what the title showed
    due = next(t for t in stages if "scores ~" in t)  # a clock time the lead can read
    assert re.search(r"scores ~\d\d:\d\d:\d\d UTC\]$", due), due

    # the title comes back once the retrain ends (read again after Label Studio's own saves)
    deadline = time.monotonic() + 20
    while shown(ctx)[0] != "subregweigh":
        assert time.monotonic() < deadline, shown(ctx)
        time.sleep(0.5)
    connection = ctx.label_studio.api("GET", f"/api/ml/{ctx.ml.id}")
    assert connection["title"] == "subregweigh" and connection["state"] != "ER", connection
    assert status(ctx).get("progress") is None
    print(f"retrain: {len(set(stages))} stages shown: {sorted(set(stages))}")


def test_after_two_refreshes_a_task_shows_one_prediction_of_this_backend(trained):
    """Issue 61, item 4: two fixes, each refreshed into a new version; a few seconds after the
    second, every task holds one prediction of this backend, the serving version's (its
    superseded ones deleted as they are replaced, the store's older versions included)."""
    ctx = trained
    api = ctx.label_studio.api
    tasks = api("GET", f"/api/tasks?project={ctx.project}&fields=all&page_size=100")["tasks"]
    refreshed = []
    for task in tasks[:2]:  # a fix, its refresh served, then the next
        before = status(ctx)["current_version"]
        (annotation,) = api("GET", f"/api/tasks/{task['id']}")["annotations"]
        api(
            "PATCH",
            f"/api/annotations/{annotation['id']}",
            {"result": retyped(annotation["result"])},
        )
        deadline = time.monotonic() + 120
        while True:
            now = status(ctx)
            refresh = now.get("last_refresh") or {}
            if refresh.get("of") == before and refresh.get("version") == now["current_version"]:
                break
            assert time.monotonic() < deadline, f"no refresh\n{ctx.backend.log(60)}"
            time.sleep(0.5)
        refreshed.append(now["current_version"])
    current = refreshed[-1]
    deadline, started = time.monotonic() + 60, time.monotonic()
    while True:
        shown = {t["id"]: api("GET", f"/api/predictions?task={t['id']}") for t in tasks}
        versions = {i: [p["model_version"] for p in ps] for i, ps in shown.items()}
        if all(v == [current] for v in versions.values()):
            break
        assert time.monotonic() < deadline, {i: v for i, v in versions.items() if v != [current]}
        time.sleep(1)
    print(f"one prediction per task {time.monotonic() - started:.1f} s after the second refresh")
    model_versions = api("GET", f"/api/projects/{ctx.project}/model-versions/")
    assert model_versions == {current: len(tasks)}, model_versions


def test_a_fix_during_a_retrain_is_refreshed_into_the_version_serving(trained):
    """Issue 61: while a retrain runs, the version serving keeps its refresh after each change:
    a fix made once the retrain has read the annotations is refreshed into a new version of the
    one serving, which serves, here and in Label Studio, while the retrain goes on; the
    retrain's own version replaces it when ready."""
    ctx = trained
    api = ctx.label_studio.api
    before = status(ctx)["current_version"]
    task = api("GET", f"/api/tasks?project={ctx.project}&fields=all&page_size=100")["tasks"][5]
    ctx.ls.ml.train(id=ctx.ml.id)
    deadline = time.monotonic() + 120
    while not status(ctx)["message"].startswith("training on"):  # the annotations are read
        assert time.monotonic() < deadline, ctx.backend.log(60)
        time.sleep(0.2)
    (annotation,) = api("GET", f"/api/tasks/{task['id']}")["annotations"]
    api("PATCH", f"/api/annotations/{annotation['id']}", {"result": retyped(annotation["result"])})
    served_during, seen = set(), set()
    deadline = time.monotonic() + 300
    while True:
        now = status(ctx)
        _, versions, project_version = shown(ctx)
        seen |= versions | {project_version}
        if now["state"] == "running" and (now.get("last_refresh") or {}).get("of") == before:
            if now["current_version"] == now["last_refresh"]["version"]:
                served_during.add(now["current_version"])
        refreshed = (now.get("last_refresh") or {}).get("version")
        done = now["current_version"] not in (before, refreshed) and now["state"] == "idle"
        if done and now["job"] == "idle":
            break
        assert now["state"] != "failed", now
        assert time.monotonic() < deadline, f"no retrain\n{ctx.backend.log(80)}"
        time.sleep(0.5)
    (refreshed,) = served_during  # the refresh of the version serving, served while it ran
    assert refreshed in seen, seen  # Label Studio had it as the project's model version
    assert seen <= {before, refreshed, now["current_version"]}, seen  # and no early version
    assert now["early_scores"] == []

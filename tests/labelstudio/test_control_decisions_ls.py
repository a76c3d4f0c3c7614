"""The review control's decisions through a real Label Studio 1.23.2 and its API (issue 44; the
browser's clicks are tests/labelstudio/test_review_control_ui.py).

Three projects with the control in their config (NER, classification single- and multi-label),
trained once through Label Studio; a second Label Studio user, signed up through the project's
invite link as a reviewer would be, decides through the API what Update sends: *correct*,
*wrong (fixed)* with a corrected label, a cleared choice, a fix reverted. Each decision is read
by the rescore its webhook queued, recorded with that user (Label Studio's ``updated_by``,
named by email), and shown in the task's prediction; a plain save of other labels is a fix.
The Data Manager's filter for "flagged and not yet reviewed" is checked as Label Studio
evaluates it.
"""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from urllib.parse import quote

import numpy as np
import pytest

from subregweigh.io.labelstudio import REVIEW_CONTROL, review_control_xml
from testbed.projects import (
    CLS_CONFIG,
    ENGINE_ENV,
    NER_CONFIG,
    classification_tasks,
    import_tasks,
    ner_tasks,
    retyped,
    serving_prediction,
    serving_score,
    wait_trained,
)
from testbed.servers import http_json, label_studio_and_backend, require_label_studio

pytestmark = pytest.mark.slow

REVIEWER = "reviewer@example.com"
MULTI_CONFIG = CLS_CONFIG.replace('choice="single"', 'choice="multiple"')


def with_control(config: str) -> str:
    return config.replace("</View>", review_control_xml("text") + "</View>")


def sign_up(label_studio, email: str, password: str) -> str:
    """A user who joins through the organization's invite link, as a colleague does; their API
    token."""
    import requests

    invite = label_studio.api("GET", "/api/invite")
    session = requests.Session()
    url = f"{label_studio.url}{invite['invite_url']}"
    session.get(url, timeout=30)
    form = {
        "email": email,
        "password": password,
        "csrfmiddlewaretoken": session.cookies.get("csrftoken"),
        "allow_newsletters": "false",
    }
    session.post(url, data=form, headers={"Referer": url}, timeout=30).raise_for_status()
    return session.get(f"{label_studio.url}/api/current-user/token", timeout=30).json()["token"]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A real Label Studio with three projects, each with the review control, connected to our
    backend and trained once; and a reviewer's token."""
    require_label_studio()
    tmp = tmp_path_factory.mktemp("control")
    rng = np.random.default_rng(44)
    ner, _ = ner_tasks(rng, 24, 3)
    # NER without regions: a sentence with entities, annotated as having none
    ner[-1]["annotations"][0]["result"] = []
    single, _ = classification_tasks(rng, 24, 3)
    multi, _ = classification_tasks(rng, 24, 3)
    both = {**multi[0]["annotations"][0]["result"][0]}
    both["value"] = {"choices": ["negative", "positive"]}
    multi[0]["annotations"][0]["result"] = [both]
    with label_studio_and_backend(
        tmp,
        {
            **ENGINE_ENV,
            "SRW_EPOCHS": "3",
            "SRW_N": "20",
            "SRW_K": "4",
        },
    ) as (label_studio, backend):
        ls = label_studio.sdk()
        projects = {}
        for name, config, tasks in [
            ("ner", NER_CONFIG, ner),
            ("single", CLS_CONFIG, single),
            ("multi", MULTI_CONFIG, multi),
        ]:
            project = ls.projects.create(title=f"control {name}", label_config=config)
            import_tasks(ls, project.id, tasks)
            # the control added to a project that already has annotations: they stay valid
            ls.projects.update(id=project.id, label_config=with_control(config))
            ml = ls.ml.create(project=project.id, url=backend.url, title="subregweigh")
            ls.ml.train(id=ml.id)
            projects[name] = project.id
        for project in projects.values():
            wait_trained(backend, project)
        yield SimpleNamespace(
            label_studio=label_studio,
            backend=backend,
            ls=ls,
            projects=projects,
            models=tmp / "models",
            reviewer=sign_up(label_studio, REVIEWER, "reviewer-pw-12345"),
        )


def tasks_of(ctx, project: int, query: dict | None = None) -> list[dict]:
    path = f"/api/tasks?project={project}&fields=all&page_size=100"
    if query is not None:
        path += f"&query={quote(json.dumps(query))}"
    return ctx.label_studio.api("GET", path)["tasks"]


def queue(ctx, project: int) -> list[int]:
    """The project's tasks, most doubtful first, as the Data Manager sorts them by score."""
    return [t["id"] for t in tasks_of(ctx, project, {"ordering": ["tasks:predictions_score"]})]


def annotation(ctx, task: int) -> dict:
    (only,) = ctx.label_studio.api("GET", f"/api/tasks/{task}")["annotations"]
    return only


def labels_only(result: list) -> list:
    return [r for r in result if r.get("from_name") != REVIEW_CONTROL]


def choice(value: str) -> dict:
    """The review control's region, as the labeling view saves a click on ``value``."""
    return {
        "from_name": REVIEW_CONTROL,
        "to_name": "text",
        "type": "choices",
        "value": {"choices": [value]},
    }


def save(ctx, task: int, result: list, token: str | None = None) -> dict:
    """What Update sends, as the user of ``token`` (default: the reviewer)."""
    status, body = http_json(
        "PATCH",
        f"{ctx.label_studio.url}/api/annotations/{annotation(ctx, task)['id']}",
        token=token or ctx.reviewer,
        body={"result": result},
    )
    assert status == 200, body
    return body


def served(ctx, project: int, task: int) -> dict:
    """The task's prediction of the serving version."""
    mine = serving_prediction(ctx.backend, ctx.label_studio, project, task)
    return {"score": mine["score"], "result": mine["result"]}


def stored(ctx, project: int, task: int) -> float:
    return serving_score(ctx.backend, ctx.models / str(project), project, task)


def decisions(ctx, project: int) -> dict[str, dict]:
    path = ctx.models / str(project) / "reviews.json"
    return json.loads(path.read_text())["decisions"] if path.exists() else {}


def decision(ctx, project: int, task: int) -> dict | None:
    return next((d for d in decisions(ctx, project).values() if d["task"] == str(task)), None)


def wait(ctx, condition, what: str, timeout: float = 90):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}\n{ctx.backend.log(60)}"
        time.sleep(0.5)


def undecided(ctx, project: int, with_regions: bool | None = True) -> list[int]:
    """The project's tasks without a decision, most doubtful first (``with_regions``: only
    annotations with (True) or without (False) regions; None: either)."""
    decided = {int(d["task"]) for d in decisions(ctx, project).values()}
    out = []
    for task in queue(ctx, project):
        regions = labels_only(annotation(ctx, task)["result"])
        if task not in decided and (with_regions is None or bool(regions) == with_regions):
            out.append(task)
    return out


def wait_rescored(ctx, project: int, task: int) -> None:
    wait(
        ctx,
        lambda: served(ctx, project, task)["score"] == pytest.approx(stored(ctx, project, task)),
        f"task {task} was not rescored",
    )


# ----------------------------------------------------------------------------- NER


def test_ner_correct_confirms_by_the_reviewer_and_shows_the_annotation(lab):
    ctx, project = lab, lab.projects["ner"]
    task = undecided(ctx, project)[0]
    assert served(ctx, project, task)["score"] < 1.0
    regions = labels_only(annotation(ctx, task)["result"])
    saved = save(ctx, task, regions + [choice("correct")])
    wait(ctx, lambda: decision(ctx, project, task) is not None, "no decision recorded")
    kept = decision(ctx, project, task)
    # the reviewer is Label Studio's updated_by (the reviewer, not the annotator who created
    # it), named by email; the time is Label Studio's
    assert saved["updated_by"] != saved["completed_by"]
    assert (kept["decision"], kept["reviewer"], kept["saved_at"]) == (
        "confirmed",
        REVIEWER,
        saved["updated_at"],
    )
    wait(ctx, lambda: served(ctx, project, task)["score"] == 1.0, "confirmed not served 1")
    shown = served(ctx, project, task)["result"]
    assert [r["value"] for r in shown] == [r["value"] for r in regions]
    assert all(r["meta"]["text"][0].startswith(f"confirmed by {REVIEWER}") for r in shown)
    assert task not in queue(ctx, project)[:5]
    # clearing the choice withdraws the decision: the scout's score again
    save(ctx, task, regions)
    wait(ctx, lambda: decision(ctx, project, task) is None, "the decision was not withdrawn")
    wait(ctx, lambda: served(ctx, project, task)["score"] < 1.0, "still served as confirmed")
    assert served(ctx, project, task)["score"] == pytest.approx(stored(ctx, project, task))


def test_ner_without_regions_is_decided_with_one_click(lab):
    ctx, project = lab, lab.projects["ner"]
    (task,) = undecided(ctx, project, with_regions=False)[:1]
    save(ctx, task, [choice("correct")])
    wait(ctx, lambda: decision(ctx, project, task) is not None, "no decision recorded")
    assert decision(ctx, project, task)["decision"] == "confirmed"
    assert decision(ctx, project, task)["labels"] == ["O"]
    wait(ctx, lambda: served(ctx, project, task)["score"] == 1.0, "confirmed not served 1")
    assert served(ctx, project, task)["result"] == []  # no entity, as confirmed


def test_ner_plain_saves_fix_and_a_reverted_fix_stops_counting(lab):
    ctx, project = lab, lab.projects["ner"]
    edited, fixed = undecided(ctx, project)[:2]
    # a plain save with other labels, by a user other than the annotator: a fix, no choice needed
    save(ctx, edited, retyped(labels_only(annotation(ctx, edited)["result"])))
    wait(ctx, lambda: decision(ctx, project, edited) is not None, "no decision recorded")
    plain = decision(ctx, project, edited)
    assert (plain["decision"], plain["fixed"], plain["reviewer"]) == ("fixed", True, REVIEWER)
    assert plain["implied"]
    # wrong (fixed) with a corrected label: a fix by the reviewer
    original = labels_only(annotation(ctx, fixed)["result"])
    save(ctx, fixed, retyped(original) + [choice("wrong (fixed)")])
    wait(ctx, lambda: decision(ctx, project, fixed) is not None, "no decision recorded")
    kept = decision(ctx, project, fixed)
    assert (kept["decision"], kept["fixed"], kept["reviewer"]) == ("fixed", True, REVIEWER)
    # the reviewer vouched for the labels it now holds: served as reviewed, noted so
    wait(ctx, lambda: served(ctx, project, fixed)["score"] == 1.0, "fix not served as reviewed")
    assert "fixed by " in json.dumps(served(ctx, project, fixed)["result"])
    # reverted: the original labels back, found correct after all; a fix no more
    save(ctx, fixed, original + [choice("correct")])
    wait(
        ctx,
        lambda: decision(ctx, project, fixed)["decision"] == "confirmed",
        "the revert was not read",
    )
    assert decision(ctx, project, fixed)["fixed"] is False
    code, report = ctx.backend.get(f"/report.json?project={project}&threshold=1.0")
    assert code == 200, report
    assert report["reviews"]["all"]["fixed"] == 1  # the plain save's; the reverted one no more
    rows = {row["reviewer"]: row for row in report["reviews"]["reviewers"]}
    assert rows[REVIEWER]["confirmed"] >= 1


def test_the_data_manager_filter_for_flagged_and_not_yet_reviewed(lab):
    """*Annotation results* does not contain ``srw_review`` and *Prediction score* below the
    threshold: the tasks flagged that no one has decided, as Label Studio 1.23 filters them."""
    ctx, project = lab, lab.projects["ner"]
    first, second = undecided(ctx, project)[:2]
    save(ctx, first, labels_only(annotation(ctx, first)["result"]) + [choice("unsure")])
    wait(ctx, lambda: decision(ctx, project, first) is not None, "no decision recorded")
    threshold = max(served(ctx, project, t)["score"] for t in (first, second)) + 1e-6
    items = [
        {
            "filter": "filter:tasks:annotations_results",
            "operator": "not_contains",
            "type": "String",
            "value": REVIEW_CONTROL,
        },
        {
            "filter": "filter:tasks:predictions_score",
            "operator": "less",
            "type": "Number",
            "value": threshold,
        },
    ]
    query = {
        "filters": {"conjunction": "and", "items": items},
        "ordering": ["tasks:predictions_score"],
    }
    listed = [t["id"] for t in tasks_of(ctx, project, query)]
    assert second in listed and first not in listed  # unsure is a decision: reviewed
    decided = {int(d["task"]) for d in decisions(ctx, project).values()}
    assert not decided & set(listed)
    assert all(served(ctx, project, t)["score"] < threshold for t in listed)


# ----------------------------------------------------------------------------- classification


@pytest.mark.parametrize("kind", ["single", "multi"])
def test_classification_correct_and_wrong_fixed(lab, kind):
    ctx, project = lab, lab.projects[kind]
    first = undecided(ctx, project)[0]
    if kind == "multi":  # the task annotated with both choices
        first = next(
            t
            for t in queue(ctx, project)
            if len(labels_only(annotation(ctx, t)["result"])[0]["value"]["choices"]) == 2
        )
    second = next(t for t in undecided(ctx, project) if t != first)
    annotated = labels_only(annotation(ctx, first)["result"])
    save(ctx, first, annotated + [choice("correct")])
    wait(ctx, lambda: decision(ctx, project, first) is not None, "no decision recorded")
    assert decision(ctx, project, first)["reviewer"] == REVIEWER
    wait(ctx, lambda: served(ctx, project, first)["score"] == 1.0, "confirmed not served 1")
    (shown,) = served(ctx, project, first)["result"]  # the annotated choices, as confirmed
    assert shown["value"] == annotated[0]["value"]
    assert shown["meta"]["text"][0].startswith(f"confirmed by {REVIEWER}")
    # wrong (fixed): the other choice
    given = labels_only(annotation(ctx, second)["result"])[0]
    other = [c for c in ("negative", "positive") if c not in given["value"]["choices"]][:1]
    corrected = {**given, "value": {"choices": other}}
    save(ctx, second, [corrected, choice("wrong (fixed)")])
    wait(ctx, lambda: decision(ctx, project, second) is not None, "no decision recorded")
    assert decision(ctx, project, second)["decision"] == "fixed"
    # the reviewer vouched for the choice it now holds: served as reviewed, the fix shown
    wait(ctx, lambda: served(ctx, project, second)["score"] == 1.0, "fix not served as reviewed")
    (shown,) = served(ctx, project, second)["result"]
    assert shown["value"]["choices"] == other
    assert shown["meta"]["text"][0].startswith(f"fixed by {REVIEWER}")
    code, report = ctx.backend.get(f"/report.json?project={project}&threshold=1.0")
    assert code == 200, report
    assert REVIEW_CONTROL not in json.dumps(report["labels"])  # never a label
    (row,) = report["reviews"]["reviewers"]
    assert (row["reviewer"], row["confirmed"], row["fixed"]) == (REVIEWER, 1, 1)


# ----------------------------------------------------------------------------- who may decide


MALLORY = "mallory@example.com"


def scored_annotations(ctx, project: int, task: int) -> int:
    """How many annotations of ``task`` the serving version scored (0: not the task)."""
    version = ctx.backend.get(f"/status?project={project}")[1]["current_version"]
    path = ctx.models / str(project) / "versions" / version / "scores.json"
    try:
        entry = json.loads(path.read_text()).get(str(task)) or {}
    except FileNotFoundError:  # replaced meanwhile
        return 0
    return len(entry.get("annotations") or ())


def rescored_since(ctx, project: int, since: float) -> bool:
    """Whether a rescore of ``project`` finished after ``since`` (the backend's clock) and no
    other waits."""
    status = ctx.backend.get(f"/status?project={project}")[1]
    last = status.get("last_rescore") or {}
    return (last.get("finished_at") or 0) > since and not status.get("rescore_pending")


def test_a_member_cannot_decide_in_anothers_name_nor_for_herself(lab):
    """The hostile probe's high finding (issue 58): a plain member imports a task whose
    annotation claims ``completed_by`` the reviewer and already holds *correct*, then makes the
    backend read it again and again (an annotation of her own added and saved, id-only
    webhooks replayed). Label Studio's import leaves ``updated_by`` null: the imported
    annotation decides nothing. Her *correct* on her own annotation is a self-review: kept as
    such, never a confirmation. The task is served at its scouts' score, not 1."""
    ctx, project = lab, lab.projects["ner"]
    mallory = sign_up(ctx.label_studio, MALLORY, "mallory-pw-12345")
    users = {u["email"]: u["id"] for u in ctx.label_studio.api("GET", "/api/users")}
    source = next(  # the least doubtful task with an entity: a sentence the scout knows
        task
        for task in reversed(tasks_of(ctx, project, {"ordering": ["tasks:predictions_score"]}))
        if len(task["annotations"]) == 1 and labels_only(task["annotations"][0]["result"])
    )
    wrong = retyped(labels_only(source["annotations"][0]["result"]))
    status, imported = http_json(
        "POST",
        f"{ctx.label_studio.url}/api/projects/{project}/import?return_task_ids=true",
        token=mallory,
        body=[
            {
                "data": source["data"],
                "annotations": [
                    {"result": wrong + [choice("correct")], "completed_by": users[REVIEWER]}
                ],
            }
        ],
    )
    assert status == 201, imported
    (task,) = imported["task_ids"]
    (forged,) = ctx.label_studio.api("GET", f"/api/tasks/{task}")["annotations"]
    claimed = forged["completed_by"]  # the user, expanded, in a task's annotations
    assert (claimed["id"] if isinstance(claimed, dict) else claimed) == users[REVIEWER]
    assert forged["updated_by"] is None
    # her own annotation: its webhook makes the rescore score the task (both annotations)
    status, own = http_json(
        "POST",
        f"{ctx.label_studio.url}/api/tasks/{task}/annotations",
        token=mallory,
        body={"result": labels_only(source["annotations"][0]["result"])},
    )
    assert status == 201, own
    wait(ctx, lambda: scored_annotations(ctx, project, task) == 2, "the task was not scored")
    # *correct* on her own annotation, then id-only events replayed for the forged one
    status, body = http_json(
        "PATCH",
        f"{ctx.label_studio.url}/api/annotations/{own['id']}",
        token=mallory,
        body={"result": own["result"] + [choice("correct")]},
    )
    assert status == 200, body
    key = f"{task}/{own['id']}"
    wait(ctx, lambda: key in decisions(ctx, project), "her save was not read")
    sent = time.time()
    for _ in range(3):
        event = {
            "action": "ANNOTATION_UPDATED",
            "project": {"id": project},
            "task": {"id": task},
            "annotation": {"id": forged["id"]},
        }
        code, reply = ctx.backend.post("/webhook", event)
        assert code == 200, reply
    wait(ctx, lambda: rescored_since(ctx, project, sent), "the replays were not read")
    kept = decisions(ctx, project)
    assert f"{task}/{forged['id']}" not in kept  # the import decided nothing
    assert (kept[key]["decision"], kept[key]["reviewer"]) == ("self-reviewed", MALLORY)
    assert served(ctx, project, task)["score"] < 1.0
    code, report = ctx.backend.get(f"/report.json?project={project}")
    assert code == 200, report
    rows = {row["reviewer"]: row for row in report["reviews"]["reviewers"]}
    assert (rows[MALLORY]["decided"], rows[MALLORY]["self_reviewed"]) == (0, 1)

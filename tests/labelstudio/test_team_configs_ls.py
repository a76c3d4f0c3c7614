"""Projects as teams make them, through a real Label Studio 1.23 (issue 62).

NER with a comment box (TextArea) and a quality flag (a Choices on the same text), weighing the
labels alone: a ``weigh_controls`` naming a control the config lacks is refused with a message
that names its controls in words (what Label Studio shows of it is all of it); with
``weigh_controls=label`` in the connection's extra parameters the project connects, trains and
gets scores, the predictions Label Studio stores hold regions of the weighed control alone,
``/status`` and the report say what is weighed and what is left alone, and a reviewer's save
that changes only the comment and the flag confirms the labels scored (the prediction shown
then is the annotation's own labels, no comment).

Several labeling controls, each weighed with no setting: NER beside a document-level Choices on
the same text, NER on the body beside a Choices on a second text, NER on a title and on the
body (two Labels, two Texts), and two Choices on one text.
Each control's planted errors have one among the served queue's first :data:`TOP` of 50 tasks,
its notes naming the control; the report holds each control's; a fix of one control's error is
rescored up (where a Choices is weighed). Each fails where several controls are refused
(before issue 62's item 2). Of NER beside a topic, the fix (the topic's choice changed by a
second user's PATCH) is recorded for the topic and not for the labels, which it confirms, and the
task serves as a fix does: its topic's rescored score, not 1 (issue 62: decisions keep the
control); the refresh that follows serves, and then a NER convention retyped in one task is
refreshed too: the version after it holds the NER control's CRF trained again (its scouts
linked), the tasks still holding the old convention lower, the topic's entries as they were.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass

import numpy as np
import pytest
from label_studio_sdk.label_interface import LabelInterface

from testbed.projects import (
    ENGINE_ENV,
    TYPES,
    classification_tasks,
    connect_model,
    field,
    import_tasks,
    ner_tasks,
    wait_trained,
)
from testbed.servers import BackendServer

CONFIG = (
    '<View><Labels name="label" toName="text">'
    + "".join(f'<Label value="{t}"/>' for t in TYPES)
    + '</Labels><Text name="text" value="$text"/>'
    '<Choices name="flag" toName="text" choice="single"><Choice value="fine"/>'
    '<Choice value="unclear"/></Choices>'
    '<TextArea name="comment" toName="text"/></View>'
)
N_TASKS, N_WRONG = 50, 5


def _team_tasks(rng) -> tuple[list[dict], set[int]]:
    """:func:`ner_tasks` with what the team adds to each annotation: the flag, and a comment on
    every third (the wrong annotations among them flagged "fine": the flag is no hint)."""
    tasks, wrong = ner_tasks(rng, N_TASKS, N_WRONG)
    for i, task in enumerate(tasks):
        (annotation,) = task["annotations"]
        extra = [
            {
                "id": f"flag{i}",
                "from_name": "flag",
                "to_name": "text",
                "type": "choices",
                "value": {"choices": ["unclear" if i % 7 == 3 else "fine"]},
            }
        ]
        if i % 3 == 0:
            extra.append(
                {
                    "id": f"comment{i}",
                    "from_name": "comment",
                    "to_name": "text",
                    "type": "textarea",
                    "value": {"text": [f"task {i}: checked twice"]},
                }
            )
        annotation["result"] = [*annotation["result"], *extra]
    return tasks, wrong


def _refusal(reply) -> str:
    return " ".join(reply["validation_errors"]["non_field_errors"])


def _prediction(ls, task_id: int, version: str):
    mine = [p for p in ls.predictions.list(task=task_id) if field(p, "model_version") == version]
    assert len(mine) == 1, (task_id, mine)
    return mine[0]


def _status(backend, project: int) -> dict:
    code, status = backend.get(f"/status?project={project}")
    assert code == 200, status
    return status


def _served_score(ls, backend, project: int, task_id: int) -> float | None:
    """``task_id``'s score in the prediction of the version serving now (a rescore's refresh
    replaces the version, and its predictions, while a test waits), or None while it has none."""
    version = _status(backend, project)["current_version"]
    mine = [p for p in ls.predictions.list(task=task_id) if field(p, "model_version") == version]
    return field(mine[0], "score") if len(mine) == 1 else None


def _refreshed(backend, project: int, of: str, timeout: float = 120) -> dict:
    """The status once a refresh of version ``of`` serves and nothing waits."""
    deadline = time.monotonic() + timeout
    while True:
        status = _status(backend, project)
        last = status.get("last_refresh") or {}
        if last.get("of") == of and last.get("version") == status["current_version"]:
            if not status.get("rescore_pending") and status["job"] == "idle":
                return status
        assert time.monotonic() < deadline, (last, backend.log(80))
        time.sleep(0.5)


def _labels(task: dict) -> list[tuple[str, str, dict]]:
    """(mention, type, region) of each region of the Labels ``label`` in ``task``'s one
    annotation (as Label Studio holds it)."""
    text = task["data"]["text"]
    (annotation,) = task["annotations"]
    return [
        (text[r["value"]["start"] : r["value"]["end"]], r["value"]["labels"][0], r)
        for r in annotation["result"]
        if r["from_name"] == "label"
    ]


def _fix_a_ner_convention(label_studio, backend, project: int, ids: list[int]) -> dict:
    """Of NER beside a topic, once the version serving is refreshed: the entity that most tasks
    label alike retyped in one of them (a second user's PATCH, the topic kept), and the refresh
    that follows waited for. ``{"of", "status", "fixed", "others"}``: the version it refreshed,
    the status then, the task fixed and the tasks still holding the old convention."""
    tasks = {t: label_studio.api("GET", f"/api/tasks/{t}") for t in ids}
    holders: dict[tuple[str, str], list[int]] = {}
    for task_id, task in tasks.items():
        for mention, etype, _ in _labels(task):
            holders.setdefault((mention, etype), []).append(task_id)
    (mention, etype), holding = max(holders.items(), key=lambda kv: len(set(kv[1])))
    fixed, *others = sorted(set(holding))
    assert others, holders
    new_type = next(t for t in TYPES if t != etype)
    (annotation,) = tasks[fixed]["annotations"]
    edited = [
        {**r, "value": {**r["value"], "labels": [new_type]}}
        if r["from_name"] == "label"
        and (
            tasks[fixed]["data"]["text"][r["value"]["start"] : r["value"]["end"]],
            r["value"]["labels"][0],
        )
        == (mention, etype)
        else r
        for r in annotation["result"]
    ]
    of = _status(backend, project)["current_version"]
    label_studio.api("PATCH", f"/api/annotations/{annotation['id']}", {"result": edited})
    status = _refreshed(backend, project, of)
    print(f"  label: {mention!r} {etype} -> {new_type} in task {fixed}; {len(others)} hold it")
    return {"of": of, "status": status, "fixed": fixed, "others": others}


@pytest.mark.slow
def test_a_project_with_a_comment_box_and_a_flag_weighs_its_labels(label_studio, tmp_path):
    env = {**ENGINE_ENV, **label_studio.backend_env}
    with BackendServer(tmp_path / "models", env, tmp_path / "backend.log") as backend:
        ls = label_studio.sdk()
        tasks, wrong = _team_tasks(np.random.default_rng(5))
        project = ls.projects.create(title="team config", label_config=CONFIG)
        ids = import_tasks(ls, project.id, tasks)

        # Two labeling controls and no choice: both would be weighed (test_several_controls_*
        # below); a refused weigh_controls names what the config has, in words.
        code, reply = connect_model(label_studio, project.id, backend.url, "weigh_controls=nope")
        assert code == 400, reply
        refusal = _refusal(reply)
        assert "its labeling controls: 'label' (Labels) and 'flag' (Choices)" in refusal
        assert label_studio.api("GET", f"/api/ml?project={project.id}") == []

        # One chosen, as the UI's connection form sends it (text): connects, trains, scores.
        code, ml = connect_model(label_studio, project.id, backend.url, "weigh_controls=label")
        assert code == 201, ml
        ls.ml.train(id=ml["id"])
        status = wait_trained(backend, project.id)
        version = status["current_version"]
        assert status["controls"]["weighed"] == [
            {"name": "label", "type": "Labels", "to_name": ["text"]}
        ]
        assert {(c["name"], c["type"]) for c in status["controls"]["ignored"]} == {
            ("flag", "Choices"),
            ("comment", "TextArea"),
        }
        assert "ignored result regions" not in backend.log(400)  # declared: nothing to warn of

        # Every task scored, its prediction holding the weighed control's regions alone.
        scores = {}
        for task_id in ids:
            prediction = _prediction(ls, task_id, version)
            scores[task_id] = field(prediction, "score")
            assert scores[task_id] is not None and 0.0 <= scores[task_id] <= 1.0
            names = {region["from_name"] for region in field(prediction, "result")}
            assert names <= {"label"}, (task_id, field(prediction, "result"))
        assert any(field(_prediction(ls, t, version), "result") for t in ids)
        wrong_ids = {ids[i] for i in wrong}
        wrong_mean = np.mean([scores[t] for t in wrong_ids])
        clean_mean = np.mean([s for t, s in scores.items() if t not in wrong_ids])
        print(f"team config: mean score wrong {wrong_mean:.3f}, correct {clean_mean:.3f}")
        assert wrong_mean < clean_mean

        code, report = backend.get(f"/report.json?project={project.id}")
        assert code == 200, report
        assert report["meta"]["controls"]["summary"] == (
            "weighed: 'label' (Labels) on 'text'; left alone: 'flag' (Choices), "
            "'comment' (TextArea)"
        )
        assert report["meta"]["settings"]["weigh_controls"] == "label"

        # A reviewer (the admin; the annotations are another user's) changes the comment and
        # the flag of a task and saves: the labels scored are confirmed, the other controls stay.
        reviewed = ids[next(i for i in range(N_TASKS) if i % 3 == 0 and i not in wrong)]
        task = label_studio.api("GET", f"/api/tasks/{reviewed}")
        (annotation,) = task["annotations"]
        edited = [
            region
            if region["from_name"] == "label"
            else {**region, "value": {"choices": ["unclear"]}}
            if region["from_name"] == "flag"
            else {**region, "value": {"text": ["a reviewer's note"]}}
            for region in annotation["result"]
        ]
        label_studio.api("PATCH", f"/api/annotations/{annotation['id']}", {"result": edited})
        deadline = time.monotonic() + 120
        while True:
            prediction = _prediction(ls, reviewed, version)
            if field(prediction, "score") == 1.0:
                break
            assert time.monotonic() < deadline, backend.log(80)
            time.sleep(0.5)
        kept = label_studio.api("GET", f"/api/annotations/{annotation['id']}")["result"]
        assert {r["from_name"] for r in kept} == {"label", "flag", "comment"}
        labels = [r for r in kept if r["from_name"] == "label"]
        shown = field(prediction, "result")
        assert {r["from_name"] for r in shown} == {"label"} and len(shown) == len(labels)
        assert "confirmed by" in shown[0]["meta"]["text"][0]


# NER on a task's body beside a document-level Choices on its second text (a title-and-body
# project), with a comment box left alone; and two Choices on one text. The scout settings are
# the project's, shared by its controls: a head on the frozen encoder (classification only)
# needs 3e-3 to learn from 50 tasks, and the NER scout still ranks its errors at it.
NER_AND_REVIEW = (
    '<View><Labels name="label" toName="text">'
    + "".join(f'<Label value="{t}"/>' for t in TYPES)
    + '</Labels><Text name="text" value="$text"/><Text name="review" value="$review"/>'
    '<Choices name="sentiment" toName="review" choice="single"><Choice value="negative"/>'
    '<Choice value="positive"/></Choices><TextArea name="comment" toName="text"/></View>'
)
TWO_CHOICES = (
    '<View><Text name="text" value="$text"/>'
    '<Choices name="sentiment" toName="text" choice="single"><Choice value="negative"/>'
    '<Choice value="positive"/></Choices>'
    '<Choices name="tone" toName="text" choice="single"><Choice value="cold"/>'
    '<Choice value="warm"/></Choices></View>'
)
NER_AND_TOPIC = (
    '<View><Labels name="label" toName="text">'
    + "".join(f'<Label value="{t}"/>' for t in TYPES)
    + '</Labels><Text name="text" value="$text"/>'
    '<Choices name="topic" toName="text" choice="single"><Choice value="sport"/>'
    '<Choice value="other"/></Choices></View>'
)
# A CoNLL sentence's topic, as the tests annotate it: sport where it holds a score or one of
# these words (the tennis results, the league tables), else other.
SPORT = re.compile(
    r"\b(\d+-\d+|beat|match|cup|league|soccer|cricket|tennis|golf|champion\w*|season|game|"
    r"goals?|innings|wickets?|draw|round|open|race|win|won|victory|team|coach|player)\b",
    re.IGNORECASE,
)
TITLE_AND_BODY = (
    '<View><Text name="title" value="$title"/><Labels name="title_label" toName="title">'
    + "".join(f'<Label value="{t}"/>' for t in TYPES)
    + '</Labels><Text name="body" value="$body"/><Labels name="body_label" toName="body">'
    + "".join(f'<Label value="{t}"/>' for t in TYPES)
    + "</Labels></View>"
)
TOP = 10  # a planted error of each control is among the served queue's first TOP of 50 tasks


def _disjoint(wrong: set[int], other: set[int], n: int) -> dict[int, int]:
    """A rotation of ``other``'s task order (index -> index) that puts none of its wrong tasks
    on one of ``wrong``: each control's planted errors are tasks of their own."""
    shift = next(s for s in range(n) if not {(i + s) % n for i in other} & wrong)
    return {i: (i + shift) % n for i in range(n)}


def _beside(
    wrong: set[int], others: list[dict], others_wrong: set[int]
) -> tuple[list[dict], set[int]]:
    """``others`` reordered (:func:`_disjoint`) to stand beside tasks whose wrong ones are
    ``wrong``, the i-th beside the i-th, no two wrong ones together: the reordered tasks, and
    where their wrong ones stand now."""
    moved = _disjoint(wrong, others_wrong, N_TASKS)
    by_index = {moved[i]: task for i, task in enumerate(others)}
    return [by_index[i] for i in range(N_TASKS)], {moved[i] for i in others_wrong}


def _ner_and_review_tasks(rng) -> tuple[list[dict], set[int], set[int]]:
    """:func:`ner_tasks` on ``text`` beside :func:`classification_tasks` on ``review``, one
    annotation holding both controls' regions: the tasks, the NER errors', the sentiment's."""
    ner, ner_wrong = ner_tasks(rng, N_TASKS, N_WRONG)
    reviews, review_wrong = _beside(ner_wrong, *classification_tasks(rng, N_TASKS, N_WRONG))
    tasks = []
    for task, review in zip(ner, reviews):
        (choice,) = review["annotations"][0]["result"]
        result = [*task["annotations"][0]["result"], {**choice, "to_name": "review"}]
        data = {**task["data"], "review": review["data"]["text"]}
        tasks.append({"data": data, "annotations": [{"result": result}]})
    return tasks, ner_wrong, review_wrong


def _ner_and_topic_tasks(rng) -> tuple[list[dict], set[int], set[int]]:
    """:func:`ner_tasks` with a document-level Choices on the same text, ``topic``
    (:data:`SPORT`), flipped on other tasks than the NER errors: the tasks, the NER errors',
    the topic's."""
    tasks, ner_wrong = ner_tasks(rng, N_TASKS, N_WRONG)
    others = [i for i in range(N_TASKS) if i not in ner_wrong]
    topic_wrong = {int(i) for i in rng.choice(others, N_WRONG, replace=False)}
    for i, task in enumerate(tasks):
        sport = bool(SPORT.search(task["data"]["text"])) != (i in topic_wrong)
        _result(task).append(_choice("topic", "topic", "sport" if sport else "other"))
    return tasks, ner_wrong, topic_wrong


def _title_and_body_tasks(rng) -> tuple[list[dict], set[int], set[int]]:
    """Two draws of :func:`ner_tasks`, one the task's title, the other its body, each labelled
    by a Labels of its own, their errors on other tasks: the tasks, the title's errors, the
    body's."""
    titles, title_wrong = ner_tasks(rng, N_TASKS, N_WRONG)
    bodies, body_wrong = _beside(title_wrong, *ner_tasks(rng, N_TASKS, N_WRONG))
    tasks = []
    for title, body in zip(titles, bodies):
        result = [
            *({**r, "from_name": "title_label", "to_name": "title"} for r in _result(title)),
            *(
                {**r, "id": f"b{r['id']}", "from_name": "body_label", "to_name": "body"}
                for r in _result(body)
            ),
        ]
        data = {"title": title["data"]["text"], "body": body["data"]["text"]}
        tasks.append({"data": data, "annotations": [{"result": result}]})
    return tasks, title_wrong, body_wrong


def _result(task: dict) -> list[dict]:
    return task["annotations"][0]["result"]


def _choice(region_id: str, control: str, choice: str) -> dict:
    """A region of the Choices ``control`` on the task's ``text``, choosing ``choice``."""
    return {
        "id": region_id,
        "from_name": control,
        "to_name": "text",
        "type": "choices",
        "value": {"choices": [choice]},
    }


def _two_choices_tasks(rng) -> tuple[list[dict], set[int], set[int]]:
    """:func:`classification_tasks` with a second Choices, ``tone`` (cold for negative, warm
    for positive, as the text really is), flipped on other tasks than the sentiment."""
    tasks, wrong = classification_tasks(rng, N_TASKS, N_WRONG)
    annotated = [_result(t)[0]["value"]["choices"][0] for t in tasks]
    positive = [(said == "positive") != (i in wrong) for i, said in enumerate(annotated)]
    tone_wrong = set(_disjoint(wrong, wrong, N_TASKS)[i] for i in wrong)
    for i, task in enumerate(tasks):
        warm = positive[i] != (i in tone_wrong)
        _result(task).append(_choice("t0", "tone", "warm" if warm else "cold"))
    return tasks, wrong, tone_wrong


@dataclass(frozen=True)
class Weighed:
    """What :func:`_weigh_several` did: the backend's ``status`` after the training, the
    ``project``, and the task whose planted error it fixed (None where it fixed none) with its
    served score ``before`` and ``after`` the fix's rescore; of NER beside a Choices on one
    text, the NER convention fixed after it (:func:`_fix_a_ner_convention`)."""

    status: dict
    project: int
    fixed: int | None = None
    before: float | None = None
    after: float | None = None
    convention: dict | None = None


def _weigh_several(
    label_studio, tmp_path, config, tasks, wrong: dict, env: dict, said: str, ner_fix=False
):
    """Connect a project of ``config`` and ``tasks`` with no weigh_controls, train it, and
    check that every control named in ``wrong`` (control -> the indices of its planted errors)
    is weighed and has one of them among the served queue's first :data:`TOP`, its notes
    naming the control, and that the status names the controls weighed as ``said``; then, where
    the last control is a Choices, fix its worst planted error (a PATCH by the admin, a second
    user: the annotations are :data:`testbed.projects.ANNOTATOR`'s) and wait for its rescore.
    With ``ner_fix`` (NER beside a topic), the refresh after that fix waited for, then a NER
    convention fixed and its refresh waited for (:func:`_fix_a_ner_convention`). A
    :class:`Weighed`."""
    env = {**ENGINE_ENV, **env, **label_studio.backend_env}
    with BackendServer(tmp_path / "models", env, tmp_path / "backend.log") as backend:
        ls = label_studio.sdk()
        project = ls.projects.create(title="several controls", label_config=config)
        ids = import_tasks(ls, project.id, tasks)
        code, ml = connect_model(label_studio, project.id, backend.url, {})  # no choice made
        assert code == 201, ml
        ls.ml.train(id=ml["id"])
        status = wait_trained(backend, project.id)
        version = status["current_version"]
        assert [c["name"] for c in status["controls"]["weighed"]] == list(wrong)
        assert said in status["message"], status["message"]

        predictions = {t: _prediction(ls, t, version) for t in ids}
        scores = {t: field(p, "score") for t, p in predictions.items()}
        queue = sorted(ids, key=lambda t: scores[t])
        print(f"several controls: queue's first {TOP}:", [ids.index(t) for t in queue[:TOP]])
        for control, planted in wrong.items():
            at = sorted(queue.index(ids[i]) for i in planted)
            print(f"  {control}: its planted errors at {at} of the queue")
            assert at[0] < TOP, (control, at, backend.log(60))
            top = [ids[i] for i in planted if queue.index(ids[i]) < TOP]
            notes = [
                note
                for t in top
                for r in field(predictions[t], "result")
                if r["from_name"] == control
                for note in (r.get("meta") or {}).get("text", ())
            ]
            assert notes and all(n.startswith(f"{control}: ") for n in notes), (control, notes)
        for prediction in predictions.values():
            assert {r["from_name"] for r in field(prediction, "result")} <= set(wrong)

        # The report: each control's own, per label and per annotator, every annotation in it.
        code, report = backend.get(f"/report.json?project={project.id}")
        assert code == 200, report
        per_control = {part["control"]: part["report"] for part in report["per_control"]}
        assert list(per_control) == list(wrong)
        for control, part in per_control.items():
            assert len(part["annotations"]) == len(ids), control
            assert part["labels"] and part["annotators"], control

        # The last control's worst planted error fixed (its choice set right, the other
        # controls' regions kept): rescored within the version, its score up.
        control = list(wrong)[-1]
        if config.count("<Labels") == len(wrong):  # NER alone: the tests know no gold to fix
            return Weighed(status, project.id)
        fixed = ids[min(wrong[control], key=lambda i: queue.index(ids[i]))]
        (annotation,) = label_studio.api("GET", f"/api/tasks/{fixed}")["annotations"]
        flip = {"negative": "positive", "cold": "warm", "sport": "other"}
        flip |= {b: a for a, b in flip.items()}
        edited = [
            {**r, "value": {"choices": [flip[r["value"]["choices"][0]]]}}
            if r["from_name"] == control
            else r
            for r in annotation["result"]
        ]
        label_studio.api("PATCH", f"/api/annotations/{annotation['id']}", {"result": edited})
        deadline = time.monotonic() + 120
        while (after := _served_score(ls, backend, project.id, fixed)) is None or (
            after <= scores[fixed]
        ):
            assert time.monotonic() < deadline, backend.log(80)
            time.sleep(0.5)
        print(f"  {control}: a fixed error's score {scores[fixed]:.3f} -> {after:.3f}")
        convention = None
        if ner_fix:  # the topic's fix refreshed the version, and so does a NER convention's
            _refreshed(backend, project.id, of=version)
            convention = _fix_a_ner_convention(label_studio, backend, project.id, ids)
        return Weighed(status, project.id, fixed, scores[fixed], after, convention)


# The scout settings of a project of NER beside a Choices, and of two Choices.
NER_BESIDE = {"SRW_EPOCHS": "6", "SRW_FREEZE_ENCODER": "1", "SRW_LEARNING_RATE": "3e-3"}
CHOICES = {"SRW_FREEZE_ENCODER": "1", "SRW_EPOCHS": "10", "SRW_LEARNING_RATE": "3e-3"}
# name -> the tasks' maker and seed, the config, its controls, the settings, where each
# control labels (its toName) and what the config leaves alone
SEVERAL = {
    "ner and a document choices on one text": (
        _ner_and_topic_tasks, 11, NER_AND_TOPIC, ("label", "topic"), NER_BESIDE, "text text", ""
    ),
    "ner on a body beside a choices on a second text": (
        _ner_and_review_tasks, 11, NER_AND_REVIEW, ("label", "sentiment"), NER_BESIDE,
        "text review", "comment",
    ),
    "ner on a title and ner on the body": (
        _title_and_body_tasks, 13, TITLE_AND_BODY, ("title_label", "body_label"),
        {"SRW_EPOCHS": "6"}, "title body", "",
    ),
    "two choices on one text": (
        _two_choices_tasks, 12, TWO_CHOICES, ("sentiment", "tone"), CHOICES, "text text", ""
    ),
}  # fmt: skip


# the case test_a_fix_of_the_topic_is_recorded_for_the_topic_alone runs, with its decisions
NER_TOPIC = "ner and a document choices on one text"


def _several(label_studio, tmp_path, case: str) -> Weighed:
    """:func:`_weigh_several` of the :data:`SEVERAL` ``case``, its status checked."""
    make, seed, config, names, env, targets, alone = SEVERAL[case]
    tasks, *wrong = make(np.random.default_rng(seed))
    interface = LabelInterface(config)
    tags = [next(c.tag for c in interface.controls if c.name == name) for name in names]
    said = " and ".join(f"{n!r} ({t})" for n, t in zip(names, tags, strict=True))
    weighed = _weigh_several(
        label_studio,
        tmp_path,
        config,
        tasks,
        dict(zip(names, wrong, strict=True)),
        env,
        f"two labeling controls, {said} weighed",
        ner_fix=case == NER_TOPIC,
    )
    status = weighed.status
    assert [c["to_name"] for c in status["controls"]["weighed"]] == [[t] for t in targets.split()]
    assert [c["name"] for c in status["controls"]["ignored"]] == alone.split()
    return weighed


@pytest.mark.slow
@pytest.mark.parametrize("case", [case for case in SEVERAL if case != NER_TOPIC])
def test_several_controls_each_weighed(label_studio, tmp_path, case):
    _several(label_studio, tmp_path, case)


@pytest.mark.slow
def test_a_fix_of_the_topic_is_recorded_for_the_topic_alone(label_studio, tmp_path):
    """NER beside a topic, weighed as every case of :data:`SEVERAL` is; the topic of a planted
    error set right by a second user's PATCH, the labels kept: the backend records a fix for
    'topic' and not for 'label' (its labels saved unchanged: confirmed), each decision naming
    its control, and the task serves as a fix does, at its topic's rescored score (the labels
    at 1), not as a confirmed task."""
    weighed = _several(label_studio, tmp_path, NER_TOPIC)
    assert weighed.fixed is not None
    root = tmp_path / "models" / str(weighed.project)
    kept = json.loads((root / "reviews.json").read_text())["decisions"]
    mine = {d["control"]: d for d in kept.values() if d["task"] == str(weighed.fixed)}
    assert set(mine) == {"label", "topic"}, kept
    assert (mine["topic"]["decision"], mine["topic"]["fixed"]) == ("fixed", True)
    assert (mine["label"]["decision"], mine["label"]["fixed"]) == ("confirmed", False)
    # the fixes: the topic's, and the NER convention's made after it (below)
    fixes = {(d["task"], d["control"]) for d in kept.values() if d["decision"] == "fixed"}
    assert fixes == {(str(weighed.fixed), "topic"), (str(weighed.convention["fixed"]), "label")}
    assert mine["topic"]["reviewer"] == mine["label"]["reviewer"] != ""
    version = weighed.status["current_version"]
    entry = json.loads((root / "versions" / version / "scores.json").read_text())
    entry = entry[str(weighed.fixed)]
    print(f"  the fixed task's controls as stored after its rescore: {entry['controls']}")
    assert weighed.after == pytest.approx(entry["controls"]["topic"])
    assert weighed.before < weighed.after < 1.0

    # Then a NER convention retyped in one task: a refresh of the version serving (issue 62),
    # its CRF trained again, in which the tasks still holding the old convention score lower
    fix = weighed.convention
    status, of = fix["status"], fix["of"]
    refreshed = status["current_version"]
    assert status["last_refresh"]["of"] == of != refreshed
    meta = json.loads((root / "versions" / refreshed / "meta.json").read_text())
    assert meta["refreshed"]["of"] == of and [p["control"] for p in meta["weighers"]] == [
        "label",
        "topic",
    ]
    ner = meta["weighers"][0]["folder"]
    old, new = root / "versions" / of, root / "versions" / refreshed
    assert (new / ner / "crf.npz").read_bytes() != (old / ner / "crf.npz").read_bytes()
    scouts = [p.relative_to(old) for p in (old / "controls").rglob("*") if p.name != "crf.npz"]
    assert all(
        (new / p).stat().st_ino == (old / p).stat().st_ino for p in scouts if (old / p).is_file()
    ), "the scouts were copied, not linked"
    before = json.loads((old / "scores.json").read_text())
    after = json.loads((new / "scores.json").read_text())
    label = {
        t: (before[str(t)]["controls"]["label"], after[str(t)]["controls"]["label"])
        for t in fix["others"]
    }
    print(f"  the old convention's other holders, label score before -> after: {label}")
    assert all(a < b for b, a in label.values()), label
    # the topic's entries as they were (the fixed task's as its rescore scored it again)
    for task, entry in after.items():
        if task != str(fix["fixed"]):
            assert entry["controls"]["topic"] == before[task]["controls"]["topic"], task

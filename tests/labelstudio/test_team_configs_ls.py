"""A project as a team makes it, through a real Label Studio 1.23 (issue 62): NER with a comment
box (TextArea) and a quality flag (a Choices on the same text). Connecting without saying which
labeling control to weigh is refused with a message that names both controls in words (what
Label Studio shows of it is all of it); with ``weigh_controls=label`` in the connection's extra
parameters the project connects, trains and gets scores, the predictions Label Studio stores
hold regions of the weighed control alone, ``/status`` and the report say what is weighed and
what is left alone, and a reviewer's save that changes only the comment and the flag confirms
the labels scored (the prediction shown then is the annotation's own labels, no comment)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from testbed.projects import (
    ENGINE_ENV,
    TYPES,
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


@pytest.mark.slow
def test_a_project_with_a_comment_box_and_a_flag_weighs_its_labels(label_studio, tmp_path):
    env = {**ENGINE_ENV, **label_studio.backend_env}
    with BackendServer(tmp_path / "models", env, tmp_path / "backend.log") as backend:
        ls = label_studio.sdk()
        tasks, wrong = _team_tasks(np.random.default_rng(5))
        project = ls.projects.create(title="team config", label_config=CONFIG)
        ids = import_tasks(ls, project.id, tasks)

        # Two labeling controls and no choice: refused, naming both, nothing connected.
        code, reply = connect_model(label_studio, project.id, backend.url, {})
        assert code == 400, reply
        refusal = _refusal(reply)
        assert "two labeling controls, 'label' (Labels) and 'flag' (Choices)" in refusal
        assert "set weigh_controls=label in the model's extra parameters" in refusal
        assert label_studio.api("GET", f"/api/ml?project={project.id}") == []

        # Chosen as the UI's connection form sends it (text): connects, trains, scores.
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

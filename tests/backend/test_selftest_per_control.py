"""Issue 62: the self-test of a project weighing several labeling controls tests each control
on its own annotations, as its training weighs them, and the report shows each control's.

The self-test job reads the project as every job does (:func:`backend.jobs.annotations.
read_annotations`: the labeling config and Label Studio's task JSON, parsed by
``read_tasks``); here that read is handed the task JSON a Label Studio would send, so that the
test pays for the scouts alone. A real Label Studio runs the self-test job in
``tests/labelstudio/test_e2e_report.py``."""

from __future__ import annotations

import html
import time

import numpy as np
import pytest

from backend.config.settings import Settings
from backend.jobs import selftest
from backend.jobs.annotations import ProjectRead
from backend.labelstudio.tasks import parse_label_config, read_tasks
from backend.serving.controls import merge_entries, read_each
from backend.serving.publish import version_meta
from backend.serving.report import project_report, render
from backend.store.store import ProjectStore
from subregweigh.io.atomic import atomic_write_json
from testbed.projects import TYPES, ner_tasks
from tests.backend.test_label_configs import VERSION, stored_entries

pytestmark = pytest.mark.slow  # trains a scout per control

CONFIG = (
    '<View><Labels name="label" toName="text">'
    + "".join(f'<Label value="{t}"/>' for t in TYPES)
    + '</Labels><Text name="text" value="$text"/>'
    '<Choices name="topic" toName="text" choice="single"><Choice value="numbers"/>'
    '<Choice value="words"/></Choices>'
    '<Choices name="tone" toName="text" choice="single"><Choice value="cold"/>'
    '<Choice value="warm"/></Choices></View>'  # nobody annotates the tone
)


def _project(n_tasks: int = 30) -> list[dict]:
    """NER tasks of real CoNLL sentences, each with a topic too: numbers where it holds a
    digit."""
    tasks, _ = ner_tasks(np.random.default_rng(3), n_tasks, 0)
    for i, task in enumerate(tasks, 1):
        topic = "numbers" if any(c.isdigit() for c in task["data"]["text"]) else "words"
        region = {
            "from_name": "topic",
            "to_name": "text",
            "type": "choices",
            "value": {"choices": [topic]},
        }
        (annotation,) = task["annotations"]
        task.update(
            id=i,
            annotations=[{**annotation, "id": 100 + i, "result": [*annotation["result"], region]}],
        )
    return tasks


def test_each_control_is_self_tested_on_its_own_annotations_and_reported(tmp_path, monkeypatch):
    tasks = _project()
    spec = parse_label_config(CONFIG)
    assert [c.from_name for c in spec.each()] == ["label", "topic", "tone"]
    items = [item for item in read_tasks(tasks, spec).tasks if item]
    read = ProjectRead(None, spec, items, len(items), None, {}, reads=read_each(tasks, spec))
    monkeypatch.setattr(selftest, "read_annotations", lambda *args: read)
    settings = Settings(model_dir=str(tmp_path), epochs=2, n_samples=6, k=3, n_scouts=1)
    store = ProjectStore(tmp_path, "5")

    outcome = selftest._selftest("5", store, settings)

    ner, topic, tone = outcome["per_control"]
    assert tone == {
        "control": "tone",
        "type": "Choices",
        "n": 0,
        "message": "not tested: no annotations",
    }
    assert (ner["control"], ner["type"], ner["task"]) == ("label", "Labels", "ner")
    assert (topic["control"], topic["type"], topic["task"]) == (
        "topic",
        "Choices",
        "classification",
    )
    assert ner["n"] == topic["n"] == len(tasks)  # each control's annotations, one per task
    assert [r["noise"] for r in ner["results"]] == ["annotators"]
    assert [r["noise"] for r in topic["results"]] == ["flip"]
    assert outcome["results"] == ner["results"]  # the summary cards stay the first control's
    first, second = outcome["message"].split("; 'topic' (Choices): ")
    assert first.startswith("'label' (Labels): annotators noise: ") and second.startswith("flip")
    assert second.endswith("; 'tone' (Choices): not tested: no annotations")

    # the report: each control's self-test under its name
    staging = store.staging_dir()
    ner_spec, topic_spec, _ = spec.each()
    merged = merge_entries(
        spec,
        [
            stored_entries(ner_spec, tasks, 0.8, "fine"),
            stored_entries(topic_spec, tasks, 0.3, "?"),
            {},
        ],
    )
    atomic_write_json(staging / "scores.json", merged)
    meta = version_meta(VERSION, spec, settings, items, len(items))
    meta["weighers"] = [
        {"control": "label", "type": "Labels", "folder": "controls/0", "learned": None},
        {"control": "topic", "type": "Choices", "folder": "controls/1", "learned": None},
    ]
    atomic_write_json(staging / "meta.json", meta)
    store.publish(staging, VERSION)
    store.update_status(selftest={"state": "idle", "finished_at": time.time(), **outcome})
    report = project_report(settings, "5")
    parts = {p["control"]: p["report"]["selftest"] for p in report["per_control"]}
    assert [r["noise"] for r in parts["topic"]["results"]] == ["flip"]
    assert parts["label"]["n"] == len(tasks)
    page = " ".join(html.unescape(render(report, "5")).split())
    assert 'id="selftest-1"' in page and 'id="selftest-2"' in page
    assert 'id="selftest"' not in page
    for name in ("'label' (Labels)", "'topic' (Choices)"):
        assert f"Self-test: how far to trust the flags on this project, control {name}" in page

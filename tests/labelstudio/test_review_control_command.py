"""``python -m backend.labelstudio.review_control`` against a real Label Studio 1.23: without
``--apply`` it only shows, with it the project's config gains the review control and its annotations
stay as they were; what it refuses (the control already there, no single <Text>, an unknown project,
a token Label Studio does not take) is a message and exit status 2, and changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from backend.labelstudio.review_control import add_review_control
from subregweigh.io.labelstudio import REVIEW_CONTROL
from testbed.projects import NER_CONFIG, ner_tasks
from testbed.servers import REPO


def command(label_studio, *args: str, token: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SRW_", "LABEL_STUDIO_"))}
    env.update(LABEL_STUDIO_URL=label_studio.url, LABEL_STUDIO_API_KEY=token or label_studio.token)
    return subprocess.run(
        [sys.executable, "-m", "backend.labelstudio.review_control", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def refused(run: subprocess.CompletedProcess, why: str) -> None:
    assert run.returncode == 2, run
    assert why in run.stderr and "Traceback" not in run.stderr, run.stderr


def config(label_studio, project: int) -> str:
    return label_studio.api("GET", f"/api/projects/{project}")["label_config"]


def annotations(label_studio, project: int) -> dict[int, list]:
    tasks = label_studio.api("GET", f"/api/tasks?project={project}&fields=all&page_size=100")
    return {t["id"]: [a["result"] for a in t["annotations"]] for t in tasks["tasks"]}


def test_the_command_shows_then_applies_on_request_and_refuses_twice(label_studio):
    tasks, _ = ner_tasks(np.random.default_rng(3), 6, 1)
    project = label_studio.api(
        "POST", "/api/projects", {"title": "command", "label_config": NER_CONFIG}
    )
    label_studio.api("POST", f"/api/projects/{project['id']}/import", tasks)
    before = annotations(label_studio, project["id"])

    shown = command(label_studio, str(project["id"]))
    assert shown.returncode == 0, shown.stderr
    assert NER_CONFIG in shown.stdout and add_review_control(NER_CONFIG) in shown.stdout
    assert "--apply" in shown.stdout
    assert config(label_studio, project["id"]) == NER_CONFIG  # only shown

    applied = command(label_studio, str(project["id"]), "--apply")
    assert applied.returncode == 0, applied.stderr
    assert "Saved" in applied.stdout
    assert config(label_studio, project["id"]) == add_review_control(NER_CONFIG)
    assert f'name="{REVIEW_CONTROL}"' in config(label_studio, project["id"])
    assert annotations(label_studio, project["id"]) == before  # every annotation as it was

    again = command(label_studio, str(project["id"]), "--apply")
    refused(again, "already has the review control")
    assert config(label_studio, project["id"]) == add_review_control(NER_CONFIG)


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("two texts", "2 <Text> elements"),
        ("unknown project", "HTTP 404"),
        ("bad token", "HTTP 401"),
    ],
)
def test_what_the_command_refuses_changes_nothing(label_studio, case, why):
    two = NER_CONFIG.replace("</View>", '<Text name="title" value="$title"/></View>')
    project = label_studio.api("POST", "/api/projects", {"title": case, "label_config": two})
    target = {"unknown project": "99999"}.get(case, str(project["id"]))
    token = "0" * 40 if case == "bad token" else None
    refused(command(label_studio, target, "--apply", token=token), why)
    assert config(label_studio, project["id"]) == two

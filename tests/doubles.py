"""Test doubles, for the one part a test is not about, and what the backend's tests build their
requests and settings from: small labeling configs, basic-auth headers, offline settings."""

from __future__ import annotations

import base64
from pathlib import Path

# A labeling config the backend supports (NER, two entity types), and one it does not (images)
NER_CONFIG = """<View>
  <Labels name="label" toName="text"><Label value="PER"/><Label value="LOC"/></Labels>
  <Text name="text" value="$text"/>
</View>"""
IMAGE_CONFIG = """<View>
  <Image name="image" value="$image"/>
  <RectangleLabels name="box" toName="image"><Label value="Car"/></RectangleLabels>
</View>"""


def basic_auth(user: str, password: str) -> dict[str, str]:
    """The ``Authorization`` header of HTTP basic authentication as ``user``."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def offline_settings(model_dir: Path | str, **values):
    """:class:`backend.config.settings.Settings` for a backend whose Label Studio is a double
    (:func:`use_label_studio`): a URL nobody answers at and an API key, then ``values``."""
    from backend.config.settings import Settings

    values = {"label_studio_url": "http://127.0.0.1:1", "label_studio_api_key": "key", **values}
    return Settings(model_dir=str(model_dir), **values)


class FakeRunner:
    """Stands in for the job runner (ThreadRunner / RQRunner) where training is not under test:
    it records submissions and reports a state, so no training starts. The rest stays real."""

    def __init__(self):
        self.submitted: list[str] = []
        self.states: dict[str, str] = {}

    def submit(self, project: str) -> str:
        self.submitted.append(project)
        return "started"

    def state(self, project: str) -> str:
        return self.states.get(project, "idle")


class ProjectsOfLabelStudio:
    """Stands in for :class:`backend.labelstudio.client.LabelStudioAPI` where the backend asks Label
    Studio which projects exist and which tasks each holds (:mod:`backend.labelstudio.membership`),
    in the unit tests that run no Label Studio. ``projects``: project id -> its task ids; None (the
    default) answers that every project exists, is connected and holds every task. The real
    Label Studio's answers are tested in tests/labelstudio/test_trust_boundaries.py."""

    projects: dict[int, set[int]] | None = None
    asked: list[tuple] = []

    def __init__(self, url=None, api_key=None, **kwargs):
        pass

    def project_connected(self, project: int) -> bool:
        type(self).asked.append(("connected", project))
        return self.projects is None or project in self.projects

    def label_config(self, project: int) -> str:
        from backend.labelstudio.client import LabelStudioUnavailable

        type(self).asked.append(("config", project))
        if self.projects is not None and project not in self.projects:
            raise LabelStudioUnavailable(f"Label Studio refused to read {project}: HTTP 404")
        return ""

    def project_counts(self, project: int) -> dict:
        type(self).asked.append(("counts", project))
        return {
            "label_config": NER_CONFIG,
            "task_number": 40,
            "num_tasks_with_annotations": 40,
            "total_annotations_number": 40,
        }

    def annotated_tasks(self, project: int) -> int:
        return 40

    def whoami(self) -> str:
        return "lead@example.com"

    def tasks_in_project(self, project: int, ids) -> set[int]:
        ids = {int(task) for task in ids}
        type(self).asked.append(("tasks", project, tuple(sorted(ids))))
        if self.projects is None:
            return ids
        return ids & self.projects.get(project, set())


def use_label_studio(monkeypatch, fake) -> None:
    """Make ``fake`` (a class standing in for :class:`backend.labelstudio.client.LabelStudioAPI`)
    the Label Studio that trainings, self-tests and rescores talk to (they read a project
    through :mod:`backend.jobs.annotations`, a rescore through :mod:`backend.jobs.rescore`);
    membership checks keep their own double (conftest)."""
    for module in ("backend.jobs.annotations", "backend.jobs.rescore"):
        monkeypatch.setattr(f"{module}.LabelStudioAPI", fake)

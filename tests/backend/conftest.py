"""The backend's unit tests run no Label Studio: what the backend asks it about projects and
their tasks is answered by :class:`tests.doubles.ProjectsOfLabelStudio` (every project connected
and holding every task, unless a test says otherwise)."""

from __future__ import annotations

import pytest

from tests.doubles import ProjectsOfLabelStudio


@pytest.fixture(autouse=True)
def label_studio_projects(monkeypatch):
    """The stand-in's class: a test sets ``.projects`` to say which project holds which tasks."""
    fake = type("Projects", (ProjectsOfLabelStudio,), {"projects": None, "asked": []})
    monkeypatch.setattr("backend.labelstudio.membership.LabelStudioAPI", fake)
    monkeypatch.setattr("backend.labelstudio.membership._checked", {})  # each test asks anew
    return fake

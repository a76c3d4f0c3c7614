"""Test doubles, for the one part a test is not about."""

from __future__ import annotations


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

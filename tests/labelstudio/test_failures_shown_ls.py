"""Issue 61 in a real Label Studio 1.23: the failures reach the lead where they work.

* A backend whose token Label Studio refuses cannot be connected: Label Studio's own reply to
  the connection (``POST /api/ml``, what its Connect dialog shows) carries the backend's
  sentence, which names the fix and not the token.
* *Start Training* (``POST /api/ml/{id}/train``) on a project without annotations: the backend's
  sentence is the connection's ``error_message`` (the model card's error, kept over Label
  Studio's later ``/setup`` calls), and ``start_reply`` in ``/status``.
* Imported annotations, which Label Studio keeps as ground truth and leaves out of
  ``num_tasks_with_annotations``, are counted by the backend's own count.

One Label Studio for the module, two backends (one with the right token, one without).
"""

from __future__ import annotations

import numpy as np
import pytest

from backend.config.settings import Settings
from backend.labelstudio import membership
from testbed.projects import ENGINE_ENV, NER_CONFIG, connect_model, import_tasks, ner_tasks
from testbed.servers import BackendServer, LabelStudioServer, require_label_studio

pytestmark = pytest.mark.slow

WRONG_TOKEN = "0123456789abcdef" * 2 + "deadbeef"


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    require_label_studio()
    tmp = tmp_path_factory.mktemp("failures")
    with LabelStudioServer() as ls:
        env = {**ENGINE_ENV, **ls.backend_env}
        wrong = {**env, "LABEL_STUDIO_API_KEY": WRONG_TOKEN}
        with (
            BackendServer(tmp / "models", env, tmp / "backend.log") as backend,
            BackendServer(tmp / "wrong", wrong, tmp / "wrong.log") as wrong_backend,
        ):
            yield {"ls": ls, "backend": backend, "wrong": wrong_backend}


def _project(ls, title: str, tasks: list[dict]) -> int:
    project = ls.api("POST", "/api/projects", {"title": title, "label_config": NER_CONFIG})
    if tasks:
        ls.api("POST", f"/api/projects/{project['id']}/import", tasks)
    return project["id"]


def test_a_wrong_token_refuses_the_connection_with_the_reason(servers):
    ls, wrong = servers["ls"], servers["wrong"]
    pid = _project(ls, "wrong token", [{"text": "Angela Merkel visited Paris ."}])
    code, reply = connect_model(ls, pid, wrong.url, None)
    assert code == 400, reply  # Label Studio refuses to save the connection
    shown = " ".join(reply["validation_errors"]["non_field_errors"])
    assert (
        f"Label Studio at {ls.url} refused the backend's token (HTTP 401): set "
        "LABEL_STUDIO_API_KEY to a token of this Label Studio"
    ) in shown
    assert WRONG_TOKEN not in shown
    assert ls.api("GET", f"/api/ml?project={pid}") == []  # nothing was connected
    assert "Label Studio credentials do not work" in wrong.log()  # the start-up line


def test_start_training_on_an_empty_project_shows_the_sentence(servers):
    ls, backend = servers["ls"], servers["backend"]
    pid = _project(ls, "empty", [{"text": f"Sentence number {i} ."} for i in range(40)])
    code, ml = connect_model(ls, pid, backend.url, None)
    assert code == 201, ml
    ls.api("POST", f"/api/ml/{ml['id']}/train", {})  # the Start Training button's request
    sentence = "not started: 0 of 40 tasks are annotated; training starts at 10"
    # Label Studio keeps the refused reply as the connection's error, and its next /setup (each
    # GET of the connection, each view of the Model page) hears the backend repeat it
    connection = ls.api("GET", f"/api/ml/{ml['id']}")
    assert connection["state"] == "ER"  # the model card turns red, with the sentence
    assert sentence in connection["error_message"], connection
    assert backend.get(f"/status?project={pid}")[1]["start_reply"] == sentence
    assert "takes the backend's token" in backend.log()  # the start-up line


def test_imported_annotations_are_counted(servers):
    ls = servers["ls"]
    tasks, _ = ner_tasks(np.random.default_rng(3), 12, 1)
    pid = _project(ls, "imported", [])
    import_tasks(ls.sdk(), pid, tasks)
    settings = Settings(model_dir="unused", label_studio_url=ls.url, label_studio_api_key=ls.token)
    counts = membership.project_counts(settings, pid)
    assert counts["task_number"] == 12
    assert counts["annotated"] == 12

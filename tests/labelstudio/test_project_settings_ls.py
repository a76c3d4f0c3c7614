"""Per-project settings through a real Label Studio 1.23: the extra parameters set on a
project's ML backend connection change what its next training does, a change of a scoring
setting retrains it, and a bad parameter is refused with our message where Label Studio shows
it. With the embedded runner and with rq + a real redis-server (the job carries the server's
settings; the worker reads the project's over them from MODEL_DIR)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from subregweigh.scout import Scout
from testbed.projects import ENGINE_ENV, NER_CONFIG, connect_model, ner_tasks, wait_trained
from testbed.servers import (
    backend_with_jobs,
)
from tests.paths import DATA

# The server's defaults: the project overrides K, N and the epochs, and each must show.
SERVER_ENV = {
    **ENGINE_ENV,
    "SRW_N": "20",
    "SRW_K": "4",
    "SRW_EPOCHS": "1",
    "SRW_MIN_ANNOTATIONS": "5",
}
N_TASKS = 16


def _refusal(reply) -> str:
    return " ".join(reply["validation_errors"]["non_field_errors"])


def _trained_with(backend, project) -> dict:
    code, report = backend.get(f"/report.json?project={project}")
    assert code == 200, report
    return report["meta"]["settings"]


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["embedded", "redis"])
def test_extra_parameters_change_what_the_next_training_does(label_studio, jobs, tmp_path):
    env = {**SERVER_ENV, **label_studio.backend_env}
    with backend_with_jobs(jobs, env, tmp_path) as (backend, _):
        ls = label_studio
        project = ls.api(
            "POST", "/api/projects", {"title": f"settings {jobs}", "label_config": NER_CONFIG}
        )
        tasks, _ = ner_tasks(np.random.default_rng(3), N_TASKS, 2)
        ls.api("POST", f"/api/projects/{project['id']}/import", tasks)
        pid = project["id"]

        # A bad parameter refuses the connection, with our message where Label Studio shows it.
        code, reply = connect_model(ls, pid, backend.url, "k=0")
        assert code == 400, reply
        assert "extra parameter k is 0; it must be at least 1" in _refusal(reply)
        code, reply = connect_model(ls, pid, backend.url, {"kk": 3})
        assert code == 400 and "did you mean k?" in _refusal(reply), reply
        assert ls.api("GET", f"/api/ml?project={pid}") == []  # nothing was connected

        # Connected as the UI does it, with text: min_annotations above the project's size.
        code, ml = connect_model(
            ls, pid, backend.url, "k=3\nn_samples=12\nepochs=2\nmin_annotations=1000"
        )
        assert code == 201, ml
        settings = backend.get(f"/status?project={pid}")[1]["settings"]
        assert settings["overrides"] == {
            "k": 3,
            "n_samples": 12,
            "epochs": 2,
            "min_annotations": 1000,
        }
        ls.api("POST", f"/api/ml/{ml['id']}/train", {})  # refused at once, with the count
        status = backend.get(f"/status?project={pid}")[1]
        assert status["start_reply"] == (
            f"not started: {N_TASKS} of {N_TASKS} tasks are annotated; training starts at 1000"
        )
        assert status["current_version"] is None

        # The server's min_annotations again (a JSON object this time): the training runs,
        # with the project's K, N and epochs, not the server's 4, 20 and 1.
        code, reply = connect_model(
            ls, pid, backend.url, {"k": 3, "n_samples": 12, "epochs": 2}, ml["id"]
        )
        assert code == 200, reply
        ls.api("POST", f"/api/ml/{ml['id']}/train", {})
        first = wait_trained(backend, pid, timeout=600)["current_version"]
        trained = _trained_with(backend, pid)
        assert (trained["k"], trained["n_samples"], trained["epochs"]) == (3, 12, 2)
        assert trained["crf"] is True

        # A change of a scoring setting retrains at once, with nobody asking for a training.
        new = {"k": 2, "n_samples": 12, "epochs": 2, "crf": False}
        code, reply = connect_model(ls, pid, backend.url, new, ml["id"])
        assert code == 200, reply
        status = wait_trained(backend, pid, timeout=600, previous=first)
        trained = _trained_with(backend, pid)
        assert (trained["k"], trained["crf"]) == (2, False)
        assert status["settings"]["effective"]["k"] == 2
        assert ls.api("GET", f"/api/projects/{pid}")["model_version"] == status["current_version"]

        # A bad change is refused; Label Studio and the backend keep the settings they had.
        code, reply = connect_model(ls, pid, backend.url, {**new, "n_scouts": 11}, ml["id"])
        assert code == 400, reply
        assert "extra parameter n_scouts is 11; it must be in [0, 10]" in _refusal(reply)
        assert ls.api("GET", f"/api/ml/{ml['id']}")["extra_params"] == new
        assert backend.get(f"/status?project={pid}")[1]["settings"]["overrides"] == new


def _conll_train(n: int) -> str:
    """CoNLL-2003's first ``n`` training sentences, as distributed (IOB1)."""
    blocks = (DATA / "conll2003" / "eng.train").read_text(encoding="utf-8").split("\n\n")
    sentences = [b for b in blocks if b.strip() and not b.startswith("-DOCSTART-")]
    return "\n\n".join(sentences[:n]) + "\n"


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["embedded"])  # a worker's MODEL_DIR: the test above, on rq
def test_a_reference_corpus_trains_the_scout_beside_the_projects_annotations(
    label_studio, jobs, tmp_path
):
    references = tmp_path / "models" / "references"  # MODEL_DIR/references
    references.mkdir(parents=True)
    (references / "conll-200.conll").write_text(_conll_train(200), encoding="utf-8")
    env = {**SERVER_ENV, **label_studio.backend_env}
    with backend_with_jobs(jobs, env, tmp_path) as (backend, _):
        ls = label_studio
        project = ls.api(
            "POST", "/api/projects", {"title": f"reference {jobs}", "label_config": NER_CONFIG}
        )
        pid = project["id"]
        tasks, _ = ner_tasks(np.random.default_rng(4), N_TASKS, 2)
        ls.api("POST", f"/api/projects/{pid}/import", tasks)

        # A project names a file of the server's folder, never a path; a missing one is refused
        # with the names it could have meant.
        code, reply = connect_model(ls, pid, backend.url, "reference=../models/settings.json")
        assert code == 400 and "must be a file name in MODEL_DIR/references" in _refusal(reply)
        code, reply = connect_model(ls, pid, backend.url, "reference=conll.conll")
        assert code == 400, reply
        assert "no such file in" in _refusal(reply)
        assert "(MODEL_DIR/references); it holds conll-200.conll for url" in _refusal(reply)

        code, ml = connect_model(ls, pid, backend.url, "reference=conll-200.conll")
        assert code == 201, ml
        ls.api("POST", f"/api/ml/{ml['id']}/train", {})
        first = wait_trained(backend, pid, timeout=600)["current_version"]
        code, report = backend.get(f"/report.json?project={pid}")
        assert code == 200, report
        meta = report["meta"]
        assert meta["reference"] == {"name": "conll-200.conll", "examples": 200}
        assert meta["settings"]["reference"] == "conll-200.conll"
        # It trained on both: the steps of 1 epoch over 216 examples, not over 16.
        steps = Scout(task="ner", epochs=1).training_steps(N_TASKS + 200)
        assert meta["training"]["steps"] == steps > Scout(task="ner", epochs=1).training_steps(16)
        # Only the project's tasks are scored and written.
        predictions = ls.api("GET", f"/api/predictions?project={pid}")
        assert len(predictions) == N_TASKS
        assert {p["model_version"] for p in predictions} == {first}

        # A reference that stops reading fails the next training with its name and line; the
        # last good version keeps serving.
        (references / "conll-200.conll").write_text("EU B-ORG\nrejects\n", encoding="utf-8")
        ls.api("POST", f"/api/ml/{ml['id']}/train", {})
        deadline = time.monotonic() + 300
        while (status := backend.get(f"/status?project={pid}")[1])["state"] != "failed":
            assert time.monotonic() < deadline, status
            time.sleep(1)
        assert "the reference conll-200.conll cannot be read" in status["last_error"]
        assert "conll-200.conll:2: expected 2 or 4 columns" in status["last_error"]
        assert status["current_version"] == first
        assert ls.api("GET", f"/api/projects/{pid}")["model_version"] == first

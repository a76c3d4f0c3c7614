"""The built image and the compose stack, running: backend, rq worker, Redis and Label Studio
from the unchanged Dockerfile and docker-compose.yml, used as a user would use them.

``bash scripts/container-smoke.sh`` builds the images, starts the stack with podman and
docker-compose, and runs this file with ``SRW_CONTAINER_STACK=1``; the normal test suite skips
it (it needs root, podman and minutes of building). Checked: the image's HEALTHCHECK passes;
the processes run as the unprivileged ``srw`` (uid 10001); a Label Studio NER project with
real CoNLL tasks, connected to ``http://backend:9090`` over the compose network and trained
through Label Studio's API, gets one scored prediction per task of the backend's version and
sorts by them in the Data Manager; the rq worker container, not the web server, trained; the
models volume keeps that version through ``docker-compose down`` and ``up``; slow clients do not
starve the image's server.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time

import numpy as np
import pytest
import yaml

from testbed.projects import NER_CONFIG, field, ner_tasks, wait_trained
from testbed.servers import http_json
from testbed.slow_clients import SlowClients
from tests.paths import REPO

pytestmark = pytest.mark.skipif(
    os.environ.get("SRW_CONTAINER_STACK") != "1",
    reason="needs the running compose stack: run `bash scripts/container-smoke.sh`",
)

N_TASKS, N_WRONG = 30, 3
SRW_UID = "10001"


def _compose_default(service: str, name: str) -> str:
    """The default docker-compose.yml gives ``name`` in ``service`` when the shell sets nothing."""
    value = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"][service][
        "environment"
    ][name]
    return re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", str(value))


class Stack:
    """The compose project the script started: its URLs, compose and podman commands."""

    def __init__(self) -> None:
        self.project = os.environ["SRW_STACK_PROJECT"]
        self.backend_url = f"http://127.0.0.1:{os.environ['BACKEND_PORT']}"
        self.ls_url = f"http://127.0.0.1:{os.environ['LABEL_STUDIO_PORT']}"
        # the token the backend uses and Label Studio's admin gets: compose's own default
        self.token = os.environ.get("LABEL_STUDIO_API_KEY") or _compose_default(
            "label-studio", "LABEL_STUDIO_USER_TOKEN"
        )

    def compose(self, *args: str, timeout: float = 300) -> str:
        command = [
            "docker-compose",
            "-p",
            self.project,
            "--project-directory",
            str(REPO),
            "-f",
            str(REPO / "docker-compose.yml"),
            *args,
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, f"{shlex.join(command)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def container(self, service: str) -> str:
        ids = self.compose("ps", "-q", service).split()
        assert len(ids) == 1, f"{service}: containers {ids}"
        return ids[0]

    @staticmethod
    def podman(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        done = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
        if check:
            assert done.returncode == 0, f"podman {shlex.join(args)}: {done.stderr}"
        return done

    def logs(self, service: str) -> str:
        done = self.podman("logs", self.container(service))
        return done.stdout + done.stderr

    def health(self, service: str) -> str:
        return self.podman(
            "inspect", "--format", "{{.State.Health.Status}}", self.container(service)
        ).stdout.strip()

    def _ls_admin_ok(self) -> bool:
        code, me = http_json("GET", self.ls_url + "/api/current-user/whoami", token=self.token)
        return code == 200 and me["email"] == _compose_default(
            "label-studio", "LABEL_STUDIO_USERNAME"
        )

    def wait_up(self, timeout: float = 300) -> None:
        """Label Studio answers with the token, the backend is up and its HEALTHCHECK healthy
        (the script's loop runs the healthchecks, as Docker's engine would)."""
        started = time.monotonic()
        checks = [
            ("Label Studio", self._ls_admin_ok),
            ("backend /health", lambda: http_json("GET", self.backend_url + "/health")[0] == 200),
            ("backend HEALTHCHECK", lambda: self.health("backend") == "healthy"),
        ]
        while checks and time.monotonic() < started + timeout:
            try:
                ok = checks[0][1]()
            except (OSError, ValueError):  # not listening yet, or an HTML error page
                ok = False
            if ok:
                print(f"{checks.pop(0)[0]} up after {time.monotonic() - started:.0f} s")
            else:
                time.sleep(2)
        assert not checks, f"not up after {timeout:.0f} s: {checks[0][0]}\n{self.logs('backend')}"


class StackBackend:
    """The containerized backend as :func:`testbed.projects.wait_trained` reads it."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack

    def get(self, path: str, auth=None):
        return http_json("GET", self.stack.backend_url + path, timeout=30.0, auth=auth)

    def log(self, lines: int = 80) -> str:
        text = self.stack.logs("backend") + "\n----- worker\n" + self.stack.logs("worker")
        return "\n".join(text.splitlines()[-lines:])


@pytest.fixture(scope="module")
def stack() -> Stack:
    stack = Stack()
    stack.wait_up()
    return stack


@pytest.fixture(scope="module")
def trained(stack):
    """A real NER project in the stack's Label Studio, connected to http://backend:9090 and
    trained through Label Studio's API."""
    from label_studio_sdk.client import LabelStudio

    ls = LabelStudio(base_url=stack.ls_url, api_key=stack.token)
    tasks, _ = ner_tasks(np.random.default_rng(13), N_TASKS, N_WRONG)
    project = ls.projects.create(title="container stack NER", label_config=NER_CONFIG)
    task_ids = list(
        ls.projects.import_tasks(id=project.id, request=tasks, return_task_ids=True).task_ids
    )
    # the URL the README tells users to enter: the service name on the compose network
    ml = ls.ml.create(project=project.id, url="http://backend:9090", title="subregweigh")
    ls.ml.train(id=ml.id)
    started = time.monotonic()
    status = wait_trained(StackBackend(stack), project.id, timeout=600)
    print(f"trained in {time.monotonic() - started:.0f} s: {status['message']}")
    version = status["current_version"]
    return {"ls": ls, "project": project.id, "tasks": task_ids, "version": version}


def test_image_healthcheck_passes(stack):
    backend = stack.container("backend")
    run = stack.podman("healthcheck", "run", backend, check=False)
    assert run.returncode == 0, f"HEALTHCHECK failed: {run.stdout}{run.stderr}"
    assert stack.health("backend") == "healthy"
    # the check is the image's own, from the Dockerfile
    config = json.loads(stack.podman("inspect", backend).stdout)[0]["Config"]
    test = config["Healthcheck"]["Test"]
    assert "/health" in " ".join(test) and "python" in test


def test_image_server_answers_beside_slow_clients(stack):
    """The image's server reads requests in its workers' event loop (gunicorn.conf.py's
    backend.web.waitress_worker): 100 connections trickling a request a byte a second hold no
    thread, and /health answers within a second through compose's published port."""
    with SlowClients(
        "127.0.0.1", int(stack.backend_url.rsplit(":", 1)[1]), headers=50, bodies=50
    ) as slow:
        time.sleep(3)
        seconds = []
        for _ in range(5):
            started = time.perf_counter()
            code, _ = http_json("GET", stack.backend_url + "/health", timeout=5)
            seconds.append(time.perf_counter() - started)
            assert code == 200
            time.sleep(0.5)
        assert slow.open() == 100
    assert max(seconds) < 1.0, seconds
    assert "Using worker: backend.web.waitress_worker.WaitressWorker" in stack.logs("backend")


def test_processes_run_as_srw(stack):
    for service in ("backend", "worker"):
        cid = stack.container(service)
        assert stack.podman("exec", cid, "id", "-u").stdout.strip() == SRW_UID
        assert stack.podman("exec", cid, "id", "-un").stdout.strip() == "srw"
        rows = stack.podman("top", cid, "user", "args").stdout.strip().splitlines()[1:]
        assert rows, f"{service}: no processes"
        assert all(row.split()[0] == "srw" for row in rows), f"{service}: {rows}"


def test_training_in_the_worker_sorts_the_review_queue(stack, trained):
    ls, project, version = trained["ls"], trained["project"], trained["version"]
    assert ls.projects.get(id=project).model_version == version
    listed = list(ls.tasks.list(project=project, fields="all"))
    assert sorted(t.id for t in listed) == sorted(trained["tasks"])
    scores = {}
    for task in listed:
        mine = [p for p in task.predictions or [] if field(p, "model_version") == version]
        assert len(mine) == 1, f"task {task.id}: {task.predictions}"
        scores[task.id] = field(mine[0], "score")
        assert 0.0 <= scores[task.id] <= 1.0
    assert len(set(scores.values())) > 1, "every task got the same score"
    # The Data Manager's ordering by prediction score, through Label Studio's API.
    for reverse in (False, True):
        query = json.dumps({"ordering": ["-" * reverse + "tasks:predictions_score"]})
        ordered = [t.id for t in ls.tasks.list(project=project, query=query)]
        assert [scores[t] for t in ordered] == sorted(scores.values(), reverse=reverse)

    # The rq worker container trained, not the web server's.
    published = f"project {project}: published version {version}"
    assert published in stack.logs("worker")
    assert "published version" not in stack.logs("backend")
    # What it wrote on the shared volume belongs to srw.
    backend = stack.container("backend")
    foreign = stack.podman("exec", backend, "find", "/data/models", "!", "-user", "srw").stdout
    assert foreign.strip() == ""
    stored = stack.podman("exec", backend, "find", "/data/models", "-name", version).stdout
    assert stored.strip(), f"version {version} not in /data/models"


def test_models_volume_survives_down_and_up(stack, trained):
    project, version = trained["project"], trained["version"]
    stack.compose("down", "--timeout", "20")
    assert stack.compose("ps", "-q").split() == []
    stack.compose("up", "-d", "--no-build")
    stack.wait_up()
    code, status = StackBackend(stack).get(f"/status?project={project}")
    assert code == 200 and status["current_version"] == version, status

    # Label Studio kept its project too (its own volume), and the backend serves the stored
    # scores of that version to Label Studio's /predict call.
    ls = trained["ls"]
    assert ls.projects.get(id=project).model_version == version
    listed = list(ls.tasks.list(project=project, fields="all"))
    code, body = http_json(
        "POST",
        stack.backend_url + "/predict",
        body={
            "tasks": [{"id": t.id, "data": t.data, "annotations": t.annotations} for t in listed],
            "project": f"{project}.0",
            "label_config": NER_CONFIG,
        },
        timeout=120,
    )
    assert code == 200, body
    assert [r["model_version"] for r in body["results"]] == [version] * len(listed)
    stored = {
        t.id: field(p, "score")
        for t in listed
        for p in t.predictions or []
        if field(p, "model_version") == version
    }
    assert [r["score"] for r in body["results"]] == [stored[t.id] for t in listed]

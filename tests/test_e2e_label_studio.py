"""End to end against a real Label Studio 1.23 and a real redis-server, both on loopback.

NER (CoNLL-2003) and classification (SST-2) projects get ~50 annotated tasks each, 10% of them
deliberately wrong. The backend is connected and trained through Label Studio's API; then the
API must show a scored prediction on every task, the project's model_version set to the new
version, and the wrong annotations at the top when tasks are ordered by prediction score.
Runs with the embedded job runner and with rq + Redis.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from subregweigh.formats import read_conll, read_tsv
from subregweigh.tags import entity_spans
from tests.servers import (
    BackendServer,
    BackgroundProcess,
    LabelStudioServer,
    RedisServer,
    require_label_studio,
    require_redis,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
N_TASKS, N_WRONG = 50, 5
TYPES = ["PER", "LOC", "ORG", "MISC"]
NER_CONFIG = (
    '<View><Labels name="label" toName="text">'
    + "".join(f'<Label value="{t}"/>' for t in TYPES)
    + '</Labels><Text name="text" value="$text"/></View>'
)
CLS_CONFIG = (
    '<View><Text name="text" value="$text"/><Choices name="sentiment" toName="text" choice="single">'
    '<Choice value="negative"/><Choice value="positive"/></Choices></View>'
)
ENGINE_ENV = {  # a small configuration for CI's 2 cores
    "SRW_N": "100", "SRW_K": "10", "SRW_EPOCHS": "8", "SRW_MIN_ANNOTATIONS": "10",
    "SRW_RETRAIN_AFTER": "1000", "LOG_LEVEL": "INFO",
}


def ner_tasks(rng) -> tuple[list[dict], set[int]]:
    """Tasks with span annotations; the annotations of the returned indices are wrong."""
    sentences = [ex for ex in read_conll(DATA / "conllpp" / "conllpp_train.txt")[:3000]
                 if 6 <= len(ex.words) <= 30 and entity_spans(ex.label)]
    chosen = [sentences[i] for i in sorted(rng.choice(len(sentences), N_TASKS, replace=False))]
    wrong = set(rng.choice(N_TASKS, N_WRONG, replace=False).tolist())
    tasks = []
    for i, ex in enumerate(chosen):
        starts = np.cumsum([0] + [len(w) + 1 for w in ex.words])
        result = []
        for j, (etype, s, e) in enumerate(entity_spans(ex.label)):
            if i in wrong:  # every entity of the sentence gets another type
                etype = TYPES[(TYPES.index(etype) + 1) % len(TYPES)]
            start, end = int(starts[s]), int(starts[e] - 1)
            result.append({"id": f"r{j}", "from_name": "label", "to_name": "text", "type": "labels",
                           "value": {"start": start, "end": end, "labels": [etype]}})
        tasks.append({"data": {"text": " ".join(ex.words)}, "annotations": [{"result": result}]})
    return tasks, wrong


def classification_tasks(rng) -> tuple[list[dict], set[int]]:
    rows = read_tsv(DATA / "sst2" / "train.tsv")[:5000]
    rows = [r for r in rows if 8 <= len(r.words) <= 40]
    chosen = [rows[i] for i in sorted(rng.choice(len(rows), N_TASKS, replace=False))]
    wrong = set(rng.choice(N_TASKS, N_WRONG, replace=False).tolist())
    names = {"0": "negative", "1": "positive"}
    tasks = []
    for i, ex in enumerate(chosen):
        label = names[ex.label[0]]
        if i in wrong:
            label = "positive" if label == "negative" else "negative"
        tasks.append({"data": {"text": ex.text}, "annotations": [{"result": [{
            "id": "c0", "from_name": "sentiment", "to_name": "text", "type": "choices",
            "value": {"choices": [label]}}]}]})
    return tasks, wrong


@pytest.fixture(scope="module")
def label_studio():
    require_label_studio()
    with LabelStudioServer() as server:
        yield server


def _wait_trained(backend: BackendServer, project: int, timeout: float = 900.0) -> dict:
    deadline = time.monotonic() + timeout
    status = {}
    while time.monotonic() < deadline:
        code, status = backend.get(f"/status?project={project}")
        assert code == 200, status
        if status["state"] == "failed":
            pytest.fail(f"training failed: {status['last_error']}\n{backend.log()}")
        if status["current_version"] and status["job"] == "idle" and status["state"] == "idle":
            return status
        time.sleep(2)
    pytest.fail(f"training did not finish in {timeout:.0f} s: {status}\n{backend.log()}")


@pytest.mark.parametrize("jobs", ["embedded", "redis"])
def test_label_studio_end_to_end(label_studio, jobs, tmp_path):
    from label_studio_sdk.client import LabelStudio

    env = {**ENGINE_ENV, "LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.token}
    redis = worker = None
    if jobs == "redis":
        require_redis()
        redis = RedisServer().start()
        env["REDIS_URL"] = redis.url
        env["RQ_QUEUE_NAME"] = f"srw-test-{tmp_path.name}"
    backend = BackendServer(tmp_path / "models", env, tmp_path / "backend.log")
    try:
        backend.start()
        if redis is not None:
            worker = BackgroundProcess(
                [str(Path(sys.executable).parent / "rq"), "worker", "--url", redis.url, env["RQ_QUEUE_NAME"]],
                backend.env, tmp_path / "worker.log",
            ).start()
        ls = LabelStudio(base_url=label_studio.url, api_key=label_studio.token)
        rng = np.random.default_rng(7)
        for name, config, make in [("ner", NER_CONFIG, ner_tasks), ("sentiment", CLS_CONFIG, classification_tasks)]:
            tasks, wrong = make(rng)
            project = ls.projects.create(title=f"{name} {jobs}", label_config=config)
            imported = ls.projects.import_tasks(id=project.id, request=tasks, return_task_ids=True)
            task_ids = list(imported.task_ids)
            wrong_ids = {task_ids[i] for i in wrong}

            ml = ls.ml.create(project=project.id, url=backend.url, title="subregweigh")
            ls.ml.train(id=ml.id)
            status = _wait_trained(backend, project.id)
            version = status["current_version"]

            assert ls.projects.get(id=project.id).model_version == version
            listed = list(ls.tasks.list(project=project.id, fields="all"))
            assert len(listed) == N_TASKS
            for task in listed:
                mine = [p for p in task.predictions or [] if (p["model_version"] if isinstance(p, dict) else p.model_version) == version]
                assert len(mine) == 1, f"task {task.id}: {task.predictions}"
                score = mine[0]["score"] if isinstance(mine[0], dict) else mine[0].score
                assert score is not None and 0.0 <= score <= 1.0

            ordered = [t.id for t in ls.tasks.list(
                project=project.id, query=json.dumps({"ordering": ["tasks:predictions_score"]}))]
            top = ordered[: 2 * N_WRONG]
            found = len(wrong_ids & set(top))
            print(f"{name}/{jobs}: {found} of {N_WRONG} wrong annotations in the lowest-scored "
                  f"{len(top)}; status: {status['message']}")
            assert found >= 3, f"only {found} of {N_WRONG} wrong annotations among the first {len(top)}"

            # Label Studio's own /predict call shape: served from storage, one item per task.
            code, body = backend.post("/predict", {
                "tasks": [{"id": t.id, "data": t.data, "annotations": t.annotations} for t in listed],
                "project": f"{project.id}.0", "label_config": config})
            assert code == 200, body
            assert len(body["results"]) == N_TASKS
            assert all(r["model_version"] == version and "score" in r for r in body["results"])
            assert "computed" not in backend.log(40)
    finally:
        backend.stop()
        if worker is not None:
            worker.stop()
        if redis is not None:
            redis.stop()

"""The test-server harness (testbed/servers.py) against real redis-server and Label Studio 1.23.2.

The Label Studio part also pins down the label-studio-sdk calls an ML backend needs: create a
project, import tasks with annotations, write scored predictions, set the project's
model_version, list tasks ordered/filtered by prediction score, connect an ML backend and
trigger training. ``sdk_scenario`` runs in this interpreter when label_studio_sdk is importable
here, otherwise in .ls-venv's interpreter (Label Studio pins its own label-studio-sdk there).
"""

from __future__ import annotations

import inspect
import json
import subprocess
import textwrap

import pytest

from testbed.servers import (
    LS_VENV,
    LabelStudioServer,
    QuietHandler,
    RedisServer,
    require_redis,
    serving,
)

# ----------------------------------------------------------------------------- redis


def test_redis_set_get_restart():
    require_redis()
    import redis

    with RedisServer() as srv:
        assert srv.url == f"redis://127.0.0.1:{srv.port}/0"
        client = redis.Redis.from_url(srv.url)
        assert client.set("k", "v")
        assert client.get("k") == b"v"
        client.close()
        srv.stop()
        assert not srv.running
        srv.start()  # same port again; no persistence, so the key is gone
        client = redis.Redis.from_url(srv.url)
        assert client.get("k") is None
        client.close()
    assert not srv.running


def test_redis_appendonly_survives_kill(tmp_path):
    require_redis()
    import redis

    with RedisServer(data_dir=tmp_path / "redis", appendonly=True) as srv:
        client = redis.Redis.from_url(srv.url)
        client.set("k", "kept")
        client.close()
        srv.kill()  # SIGKILL: only the fsynced AOF keeps the key
        srv.start()
        client = redis.Redis.from_url(srv.url)
        assert client.get("k") == b"kept"
        client.close()


# ----------------------------------------------------------------------------- label studio


class _StubBackend(QuietHandler):
    """Just enough of the ML backend protocol for Label Studio to connect and train."""

    calls: list = []

    def do_GET(self):  # noqa: N802
        self.calls.append(("GET", self.path, None))
        self.reply({"status": "UP", "model_class": "Stub"})

    def do_POST(self):  # noqa: N802
        n = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(n) or b"null")
        self.calls.append(("POST", self.path, body))
        if self.path.startswith("/setup"):
            self.reply({"model_version": "stub-v0"})
        elif self.path.startswith("/predict"):
            self.reply({"results": []})
        else:
            self.reply({"status": "ok"})


@pytest.fixture
def stub_backend():
    _StubBackend.calls = []
    with serving(_StubBackend) as url:
        yield url, _StubBackend.calls


def sdk_scenario(base_url: str, api_key: str, backend_url: str) -> dict:
    """Self-contained (it may run in .ls-venv's interpreter): the SDK calls, results as JSON."""
    import json

    import label_studio_sdk
    from label_studio_sdk.client import LabelStudio

    ls = LabelStudio(base_url=base_url, api_key=api_key)
    out = {"sdk_version": getattr(label_studio_sdk, "__version__", None)}
    if out["sdk_version"] is None:
        from importlib.metadata import version

        out["sdk_version"] = version("label-studio-sdk")

    config = """<View>
  <Text name="text" value="$text"/>
  <Choices name="label" toName="text" choice="single">
    <Choice value="POS"/><Choice value="NEG"/>
  </Choices>
</View>"""

    def choice(label):
        return [
            {
                "from_name": "label",
                "to_name": "text",
                "type": "choices",
                "value": {"choices": [label]},
            }
        ]

    project = ls.projects.create(title="harness", label_config=config)
    out["project_id"] = project.id

    texts = [("good film", "POS"), ("bad film", "NEG"), ("fine film", "POS")]
    imported = ls.projects.import_tasks(
        id=project.id,
        request=[
            {"data": {"text": t}, "annotations": [{"result": choice(lab)}]} for t, lab in texts
        ],
        return_task_ids=True,
    )
    out["imported_task_ids"] = list(imported.task_ids or [])

    tasks = list(ls.tasks.list(project=project.id, fields="all"))
    out["tasks"] = [
        {
            "id": t.id,
            "text": t.data["text"],
            "labels": [a["result"][0]["value"]["choices"][0] for a in t.annotations],
        }
        for t in tasks
    ]
    anns = ls.annotations.list(id=tasks[0].id)
    out["annotations_of_first"] = [a.result[0]["value"]["choices"][0] for a in anns]

    scores = {tasks[0].id: 0.9, tasks[1].id: 0.1, tasks[2].id: 0.5}
    for t in tasks:
        ls.predictions.create(
            task=t.id, result=choice("POS"), score=scores[t.id], model_version="harness-v1"
        )
    out["scores"] = {str(k): v for k, v in scores.items()}
    out["predictions"] = [
        {"task": p.task, "score": p.score, "model_version": p.model_version}
        for p in ls.predictions.list(project=project.id)
    ]

    def ordered(ordering):
        q = json.dumps({"ordering": [ordering]})
        return [t.id for t in ls.tasks.list(project=project.id, query=q, fields="all")]

    out["order_before_patch"] = ordered("tasks:predictions_score")
    ls.projects.update(id=project.id, model_version="harness-v1")
    out["project_model_version"] = ls.projects.get(id=project.id).model_version
    out["order_asc"] = ordered("tasks:predictions_score")
    out["order_desc"] = ordered("-tasks:predictions_score")
    low = json.dumps(
        {
            "filters": {
                "conjunction": "and",
                "items": [
                    {
                        "filter": "filter:tasks:predictions_score",
                        "operator": "less",
                        "type": "Number",
                        "value": 0.5,
                    }
                ],
            }
        }
    )
    out["below_0_5"] = [t.id for t in ls.tasks.list(project=project.id, query=low)]
    out["predictions_score_field"] = {
        str(t.id): t.predictions_score for t in ls.tasks.list(project=project.id, fields="all")
    }

    backend = ls.ml.create(project=project.id, url=backend_url, title="stub")
    out["ml_backend_id"] = backend.id
    out["ml_backends"] = [b.id for b in ls.ml.list(project=project.id)]
    ls.ml.train(id=backend.id)
    return out


def _run_sdk_scenario(ls: LabelStudioServer, backend_url: str) -> tuple[str, dict]:
    try:
        import label_studio_sdk  # noqa: F401
    except ImportError:
        pass
    else:
        return "main env", sdk_scenario(ls.url, ls.token, backend_url)
    source = textwrap.dedent(inspect.getsource(sdk_scenario))
    code = source + "\nimport json, sys\nprint(json.dumps(sdk_scenario(*sys.argv[1:4])))\n"
    proc = subprocess.run(
        [str(LS_VENV / "bin" / "python"), "-c", code, ls.url, ls.token, backend_url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"sdk_scenario in .ls-venv failed:\n{proc.stderr[-4000:]}"
    return ".ls-venv", json.loads(proc.stdout.strip().splitlines()[-1])


def test_label_studio_sdk_roundtrip(label_studio, stub_backend):
    backend_url, calls = stub_backend
    where, out = _run_sdk_scenario(label_studio, backend_url)
    print(f"label-studio-sdk {out['sdk_version']} ran in the {where}")

    ids = [t["id"] for t in out["tasks"]]
    assert len(ids) == 3 and sorted(ids) == sorted(out["imported_task_ids"])
    assert [t["labels"] for t in out["tasks"]] == [["POS"], ["NEG"], ["POS"]]
    assert out["annotations_of_first"] == ["POS"]
    assert sorted(p["score"] for p in out["predictions"]) == [0.1, 0.5, 0.9]

    scores = {int(k): v for k, v in out["scores"].items()}
    by_score = sorted(ids, key=scores.get)
    # The catch: predictions_score counts only predictions of the project's model_version, so
    # ordering by it does nothing until the project's model_version is set to theirs.
    assert out["order_before_patch"] != by_score
    assert out["project_model_version"] == "harness-v1"
    assert out["order_asc"] == by_score
    assert out["order_desc"] == by_score[::-1]
    assert out["below_0_5"] == [by_score[0]]
    assert {int(k): v for k, v in out["predictions_score_field"].items()} == scores

    # Connect: GET /health, POST /setup; train: POST /webhook START_TRAINING.
    paths = [(m, p.split("?")[0]) for m, p, _ in calls]
    assert ("POST", "/setup") in paths
    assert out["ml_backend_id"] in out["ml_backends"]
    webhooks = [b for m, p, b in calls if p.startswith("/webhook")]
    assert any(b and b.get("action") == "START_TRAINING" for b in webhooks), paths


def test_label_studio_log_and_token(label_studio):
    assert label_studio.log_path.is_file()
    assert label_studio.log_path.parent == label_studio.data_dir
    who = label_studio.api("GET", "/api/current-user/whoami")
    assert who["email"] == label_studio.username

"""Writing predictions to a real Label Studio 1.23 is idempotent (issue 26, item 8): an import
that lands but whose reply is lost (a proxy in between answers 504 after forwarding it) is
retried without adding a second prediction of the same model version to any task. A write goes
in as few requests as Label Studio takes (issue 30): one, cut by body size, halved where a proxy
answers 413."""

from __future__ import annotations

import http.client
import json
import threading
from collections import Counter
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from backend.labelstudio.client import LabelStudioAPI, LabelStudioUnavailable, _batches
from backend.store.ledger import Ledger
from testbed.projects import NER_CONFIG
from testbed.servers import free_port


def _proxy(target: str, lose_first_import: bool, max_body: int | None = None):
    """A forwarding proxy to ``target``; with ``lose_first_import``, the first prediction
    import reaches Label Studio but its reply is replaced by a 504; a body over ``max_body``
    bytes is answered 413 without forwarding it, as nginx's client_max_body_size does. Records
    (method, path)."""
    host, port = urlsplit(target).hostname, urlsplit(target).port
    seen: list[tuple[str, str]] = []
    lost = []

    class Forward(BaseHTTPRequestHandler):
        def _forward(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append((self.command, self.path))
            if max_body is not None and len(body) > max_body:
                self.send_response(413)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            conn = http.client.HTTPConnection(host, port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
            conn.request(self.command, self.path, body=body or None, headers=headers)
            reply = conn.getresponse()
            data = reply.read()
            if lose_first_import and "import/predictions" in self.path and not lost:
                lost.append(self.path)
                self.send_response(504)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(reply.status)
            for name, value in reply.getheaders():
                if name.lower() not in {"transfer-encoding", "connection", "content-length"}:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = _forward  # noqa: N815

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Forward)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}", seen, lost


@pytest.mark.parametrize("lose_first_import", [True, False])
def test_a_retried_import_adds_no_second_prediction(label_studio, lose_first_import):
    ls = label_studio
    project = ls.api("POST", "/api/projects", {"title": "retry", "label_config": NER_CONFIG})
    ls.api(
        "POST",
        f"/api/projects/{project['id']}/import",
        [{"data": {"text": f"Task number {i}"}} for i in range(3)],
    )
    tasks = [t["id"] for t in ls.api("GET", f"/api/projects/{project['id']}/tasks")]
    server, url, seen, lost = _proxy(ls.url, lose_first_import)
    try:
        api = LabelStudioAPI(url, ls.token, retries=2, backoff=0.05)
        predictions = [
            {"task": t, "result": [], "score": 0.5, "model_version": "srw-v1"} for t in tasks
        ]
        api.write_predictions(project["id"], predictions)
    finally:
        server.shutdown()
        server.server_close()
    stored = ls.api("GET", f"/api/predictions?project={project['id']}")
    per_task = Counter(p["task"] for p in stored if p["model_version"] == "srw-v1")
    assert per_task == Counter(tasks)  # exactly one each
    imports = [path for method, path in seen if "import/predictions" in path]
    assert bool(lost) is lose_first_import
    assert len(imports) == 1  # the retry found them landed and sent nothing


def test_batches_are_cut_by_body_size_in_order():
    predictions = [
        {"task": t, "result": [], "score": 0.5, "model_version": "v"} for t in range(100, 150)
    ]
    one = len(json.dumps(predictions[0])) + 2
    assert _batches(predictions, 10**6) == [predictions]  # one request while it fits
    cut = _batches(predictions, 2 + 7 * one)
    assert [len(b) for b in cut] == [7] * 7 + [1]
    assert [p for b in cut for p in b] == predictions
    assert _batches(predictions[:2], 1) == [[predictions[0]], [predictions[1]]]
    assert _batches([], 100) == []


def _project(ls, n_tasks: int) -> tuple[int, list[int]]:
    project = ls.api("POST", "/api/projects", {"title": "writes", "label_config": NER_CONFIG})
    ls.api(
        "POST",
        f"/api/projects/{project['id']}/import",
        [{"data": {"text": f"Task number {i}"}} for i in range(n_tasks)],
    )
    return project["id"], [t["id"] for t in ls.api("GET", f"/api/projects/{project['id']}/tasks")]


def test_a_write_is_one_request_and_halved_where_a_proxy_answers_413(label_studio):
    """40 predictions: one request straight to Label Studio; behind a proxy that takes at most
    12 of them a request, each refused import is halved until it passes, and every task still
    gets exactly one prediction of each version. A single prediction too large: a clear error,
    nothing written."""
    ls = label_studio
    project, tasks = _project(ls, 40)

    def predictions(version, result=()):
        return [
            {"task": t, "result": list(result), "score": 0.5, "model_version": version}
            for t in tasks
        ]

    twelve = 2 + 12 * (len(json.dumps(predictions("v1")[0])) + 2)
    imports = {}
    for version, max_body in (("v1", None), ("v2", twelve)):
        server, url, seen, _ = _proxy(ls.url, False, max_body=max_body)
        try:
            api = LabelStudioAPI(url, ls.token, retries=0)
            api.write_predictions(project, predictions(version))
            if max_body:
                large = predictions("v3", [{"note": "x" * twelve}])[:1]
                with pytest.raises(LabelStudioUnavailable, match=r"too large \(HTTP 413\)"):
                    api.write_predictions(project, large)
        finally:
            server.shutdown()
            server.server_close()
        imports[version] = [path for _, path in seen if "import/predictions" in path]
    stored = ls.api("GET", f"/api/predictions?project={project}")
    for version in ("v1", "v2"):
        per_task = Counter(p["task"] for p in stored if p["model_version"] == version)
        assert per_task == Counter(tasks), version  # exactly one each
    assert not [p for p in stored if p["model_version"] == "v3"]
    assert len(imports["v1"]) == 1
    # 40 -> 20 + 20 -> 10 + 10 + 10 + 10: 3 refused, 4 landed; then the large one refused
    assert len(imports["v2"]) == 3 + 4 + 1


def _project_of(ls, title: str, n_tasks: int) -> tuple[int, list[int]]:
    """A new NER project of ``n_tasks`` tasks in Label Studio: its id and its tasks' ids."""
    pid = ls.api("POST", "/api/projects", {"title": title, "label_config": NER_CONFIG})["id"]
    ls.api("POST", f"/api/projects/{pid}/import", [{"data": {"text": "a b"}}] * n_tasks)
    return pid, [t["id"] for t in ls.api("GET", f"/api/projects/{pid}/tasks")]


def test_a_served_version_deletes_the_predictions_it_supersedes(label_studio, tmp_path):
    """Serving a version deletes, in Label Studio, the predictions of this backend's versions
    older than it: those the store no longer keeps, those it keeps (issue 61: a task shows one
    prediction of this backend) and the training's superseded early scores; the served one, a
    newer one of ours (a training's, written while a refresh cleans up) and other model
    versions (an import, another backend's named as ours are: issue 42, item 7) stay."""
    from backend.serving.publish import drop_superseded_predictions
    from backend.store.store import ProjectStore
    from backend.store.versions import new_version_name

    ls = label_studio
    pid, tasks = _project_of(ls, "prune", 3)
    store = ProjectStore(tmp_path, pid)
    gone, kept, early, served, newer, theirs = (new_version_name() for _ in range(6))
    for version in (kept, early, served):  # gone: pruned from the store already
        store.publish(store.staging_dir(), version)
    # what serve_in_label_studio records in the ledger of the versions this backend wrote
    store.update_status(early_version=early)
    store.update_ledger(lambda _: Ledger((gone, kept, early, served, newer)))
    api = LabelStudioAPI(ls.url, ls.token, retries=0)
    versions = (gone, kept, early, served, newer, theirs, "imported-1")
    api.write_predictions(
        pid,
        [
            {"task": t, "result": [], "score": 0.5, "model_version": v}
            for v in versions
            for t in tasks
        ],
    )
    written = {v: n for v, n in api.model_versions(pid).items() if n}
    assert written == dict.fromkeys(versions, 3)

    drop_superseded_predictions(api, store, str(pid), served)

    left = {v: n for v, n in api.model_versions(pid).items() if n}
    assert left == {served: 3, newer: 3, theirs: 3, "imported-1": 3}
    assert store.ledger().written_versions == (served, newer)
    drop_superseded_predictions(api, store, str(pid), served)  # nothing more to delete
    assert {v: n for v, n in api.model_versions(pid).items() if n} == left


def test_the_deletes_stop_for_a_change_that_waits(label_studio, tmp_path):
    """A refresh's deletes (seconds each in Label Studio) stop once a change waits for its
    rescore (backend.jobs.rescore._change_waits): the change waits for one delete, not for all, and
    the next call deletes the rest. Label Studio is real; the change lands from a wrapper
    around the first delete, where the webhook would record it."""
    from backend.jobs.rescore import _change_waits
    from backend.serving.publish import drop_superseded_predictions
    from backend.store.store import ProjectStore
    from backend.store.versions import new_version_name

    ls = label_studio
    pid, tasks = _project_of(ls, "stop", 2)
    store = ProjectStore(tmp_path, pid)
    *gone, served = (new_version_name() for _ in range(4))
    store.publish(store.staging_dir(), served)
    store.update_ledger(lambda _: Ledger((*gone, served)))
    api = LabelStudioAPI(ls.url, ls.token, retries=0)
    api.write_predictions(
        pid,
        [
            {"task": t, "result": [], "score": 0.5, "model_version": v}
            for v in (*gone, served)
            for t in tasks
        ],
    )
    deletes = []
    real_delete = api.delete_model_version

    def delete_as_a_change_lands(project, version):
        real_delete(project, version)
        deletes.append(version)
        store.update_status(rescore_pending={str(tasks[0]): 1.0})  # as the webhook records it

    api.delete_model_version = delete_as_a_change_lands
    drop_superseded_predictions(api, store, str(pid), served, stop=partial(_change_waits, store))

    left = {v for v, n in api.model_versions(pid).items() if n}
    assert len(deletes) == 1 and deletes[0] not in left
    assert left == {*gone, served} - set(deletes)
    assert store.ledger().written_versions == tuple(v for v in (*gone, served) if v not in deletes)
    store.take_inbox("rescore_pending")  # the change's rescore took it
    api.delete_model_version = real_delete
    drop_superseded_predictions(api, store, str(pid), served, stop=partial(_change_waits, store))
    assert {v for v, n in api.model_versions(pid).items() if n} == {served}
    assert store.ledger().written_versions == (served,)

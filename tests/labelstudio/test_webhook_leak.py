"""The basic-auth password never reaches another backend (issue 26, item 1), end to end: a real
Label Studio 1.23, our backend behind basic auth, and a second backend on loopback that a project
member connected with the same basic-auth user name (a recording HTTP server).

bf3c457 added ``Authorization: Basic <user:password>`` to every webhook of a connection with
that user name, so the second backend received the password with every event. Now a training
gives only the webhook whose URL answers the challenge at ``/health`` a token of its own, and
takes the password off any webhook that carries it (an earlier version put it there).
"""

from __future__ import annotations

import base64
import json
import time

import pytest

from backend.labelstudio.webhook_auth import TOKEN_HEADER, load_secret, webhook_token
from testbed.projects import NER_CONFIG
from testbed.servers import (
    BackendServer,
    LabelStudioServer,
    QuietHandler,
    require_label_studio,
    serving,
)

AUTH = ("lead", "leak-pass-93b1")
OTHER_PASS = "other-pass-1f07"  # the second backend's own connection password
BASIC = base64.b64encode(f"{AUTH[0]}:{AUTH[1]}".encode()).decode()


class Recorder(QuietHandler):
    """A minimal ML backend that records every request it gets, whole."""

    seen: list[dict]

    def _record(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode(errors="replace") if length else ""
        self.seen.append(
            {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
        )

    def do_GET(self):  # noqa: N802 (http.server's names)
        self._record()
        # It cannot compute the answer; it tries one anyway.
        self.reply({"status": "UP", "challenge_response": "0" * 64})

    def do_POST(self):  # noqa: N802
        self._record()
        self.reply({"model_version": "other", "results": []})


@pytest.fixture
def other_backend():
    seen: list[dict] = []
    with serving(type("OtherBackend", (Recorder,), {"seen": seen})) as url:
        yield url, seen


def _wait(what: str, check, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            assert value, f"timed out waiting for {what}"
            return value
        time.sleep(0.5)


def test_a_second_backend_with_the_same_user_name_gets_neither_password_nor_token(
    tmp_path, other_backend
):
    require_label_studio()
    other_url, seen = other_backend
    models = tmp_path / "models"
    with LabelStudioServer() as ls:
        env = {
            **ls.backend_env,
            "BASIC_AUTH_USER": AUTH[0],
            "BASIC_AUTH_PASS": AUTH[1],
            "SRW_MIN_ANNOTATIONS": "10",  # one task: the training stops after the webhooks
            "SRW_RETRAIN_AFTER": "1000",
        }
        backend = BackendServer(models, env, tmp_path / "backend.log").start()
        try:
            project = ls.api("POST", "/api/projects", {"title": "leak", "label_config": NER_CONFIG})
            pid = project["id"]
            region = {
                "from_name": "label",
                "to_name": "text",
                "type": "labels",
                "value": {"start": 0, "end": 4, "labels": ["PER"]},
            }
            ls.api(
                "POST",
                f"/api/projects/{pid}/import",
                [{"data": {"text": "John lives in Paris"}, "annotations": [{"result": [region]}]}],
            )
            ours = ls.api(
                "POST",
                "/api/ml",
                {
                    "project": pid,
                    "url": backend.url,
                    "title": "subregweigh",
                    "auth_method": "BASIC_AUTH",
                    "basic_auth_user": AUTH[0],
                    "basic_auth_pass": AUTH[1],
                },
            )
            ls.api(
                "POST",
                "/api/ml",
                {
                    "project": pid,
                    "url": other_url,
                    "title": "another member's backend",
                    "auth_method": "BASIC_AUTH",
                    "basic_auth_user": AUTH[0],  # the same user name, its own password
                    "basic_auth_pass": OTHER_PASS,
                },
            )

            def hooks():
                return {h["url"]: h for h in ls.api("GET", f"/api/webhooks?project={pid}")}

            assert set(hooks()) == {f"{backend.url}/webhook", f"{other_url}/webhook"}
            # What bf3c457 did: our password on the other backend's webhook.
            leaked = hooks()[f"{other_url}/webhook"]
            ls.api(
                "PATCH",
                f"/api/webhooks/{leaked['id']}",
                {"headers": {"Authorization": f"Basic {BASIC}"}, "actions": leaked["actions"]},
            )

            ls.api("POST", f"/api/ml/{ours['id']}/train", {})  # START_TRAINING, with basic auth
            token = None

            def secured():  # the training updates the webhooks one after the other
                now = hooks()
                return (
                    TOKEN_HEADER in now[f"{backend.url}/webhook"]["headers"]
                    and "Authorization" not in now[f"{other_url}/webhook"]["headers"]
                )

            _wait("the token on our webhook and the password off the other", secured)
            token = webhook_token(load_secret("", str(models)), str(pid))
            after = hooks()
            assert after[f"{backend.url}/webhook"]["headers"] == {TOKEN_HEADER: token}
            assert after[f"{other_url}/webhook"]["headers"] == {}  # the password taken off
            assert after[f"{other_url}/webhook"]["is_active"]  # the rest as it was
            # refused at once (issue 61), the webhooks secured first
            _wait("the refused training", lambda: "not started: 1 of 1 tasks" in backend.log(200))

            # An annotation change reaches our backend through basic auth with the token ...
            annotation = ls.api("GET", f"/api/projects/{pid}/tasks")[0]["annotations"][0]
            ls.api(
                "PATCH",
                f"/api/annotations/{annotation['id']}",
                {"result": [{**region, "value": {**region["value"], "labels": ["ORG"]}}]},
            )

            def counted():
                code, status = backend.get(f"/status?project={pid}", auth=AUTH)
                return code == 200 and status["events_since_training"] == 1

            _wait("the ANNOTATION_UPDATED event at our backend", counted)
            _wait(
                "the event at the other backend",
                lambda: any(r["path"].rstrip("/") == "/webhook" for r in seen),
            )
            log = backend.log_path.read_text()
        finally:
            backend.stop()

    # ... and the other backend never saw the password, the token or the secret.
    secret = load_secret("", str(models)).decode()
    received = json.dumps(seen)
    for credential in (AUTH[1], BASIC, token, secret):
        assert credential not in received
    challenges = [r for r in seen if "challenge=" in r["path"]]
    assert len(challenges) == 1 and "Authorization" not in challenges[0]["headers"]
    # Label Studio's own calls to it carry only its own connection's password.
    other_basic = base64.b64encode(f"{AUTH[0]}:{OTHER_PASS}".encode()).decode()
    assert {r["headers"].get("Authorization") for r in seen} <= {None, f"Basic {other_basic}"}
    # The log says what happened and repeats no credential.
    assert f"removed this backend's basic-auth password from the webhook to {other_url}" in log
    assert "rotate BASIC_AUTH_PASS" in log
    for credential in (AUTH[1], BASIC, token, secret):
        assert credential not in log

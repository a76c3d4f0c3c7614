"""Which of a project's Label Studio webhooks get the backend's basic-auth credentials, and how
a training adds them (the real Label Studio round trip: tests/test_e2e_report.py)."""

from __future__ import annotations

import base64
import logging

import pytest

from backend import service
from backend.labelstudio import (
    LabelStudioUnavailable,
    _describe,
    authorize_ml_webhooks,
    basic_auth_header,
    has_basic_auth,
    webhooks_missing_auth,
    with_basic_auth,
)
from backend.settings import Settings

USER, PASSWORD = "lead", "wh-pass-7c2d"
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
GOOD = f"Basic {TOKEN}"
OURS = {"url": "http://backend:9090", "auth_method": "BASIC_AUTH", "basic_auth_user": USER}


def _hook(id_, url="http://backend:9090/webhook", headers=None, actions=()):
    return {"id": id_, "url": url, "headers": headers or {}, "actions": list(actions)}


def test_basic_auth_header_is_what_the_backend_accepts():
    assert basic_auth_header(USER, PASSWORD) == GOOD
    assert has_basic_auth({"Authorization": GOOD}, USER, PASSWORD)


@pytest.mark.parametrize(
    "headers, ok",
    [
        ({"authorization": f"basic {TOKEN}"}, True),  # names and schemes in any case
        ({"X-Other": "1", "AUTHORIZATION": f"  Basic {TOKEN} "}, True),
        ({}, False),
        ({"X-Other": GOOD}, False),
        ({"Authorization": basic_auth_header(USER, "old-pass")}, False),
        ({"Authorization": basic_auth_header("other", PASSWORD)}, False),
        ({"Authorization": f"Bearer {TOKEN}"}, False),
        ({"Authorization": "Basic not*base64"}, False),
        ({"Authorization": "Basic"}, False),
        ({"Authorization": 42}, False),
    ],
)
def test_has_basic_auth(headers, ok):
    assert has_basic_auth(headers, USER, PASSWORD) is ok


def test_with_basic_auth_keeps_other_headers_and_replaces_a_stale_one():
    stale = {"X-Trace": "on", "authorization": basic_auth_header(USER, "old-pass")}
    assert with_basic_auth(stale, USER, PASSWORD) == {"X-Trace": "on", "Authorization": GOOD}
    assert stale["authorization"] != GOOD  # not modified in place


def test_only_webhooks_to_this_backends_connection_lack_auth():
    backends = [
        {**OURS, "url": "http://backend:9090/"},  # Label Studio strips one slash: as it does
        {"url": "http://other:9090", "auth_method": "NONE", "basic_auth_user": None},
        {"url": "http://third:9090", "auth_method": "BASIC_AUTH", "basic_auth_user": "someone"},
    ]
    hooks = [
        missing := _hook(1),
        _hook(2, headers={"Authorization": GOOD}),  # already there
        stale := _hook(3, headers={"Authorization": basic_auth_header(USER, "old")}),
        _hook(4, url="http://other:9090/webhook"),  # another backend: never our credentials
        _hook(5, url="http://third:9090/webhook"),  # connected as another user
        _hook(6, url="http://backend:9090/webhook/extra"),
        _hook(7, url="https://hooks.example.com/notify"),
    ]
    assert webhooks_missing_auth(hooks, backends, USER, PASSWORD) == [missing, stale]
    assert webhooks_missing_auth(hooks, [], USER, PASSWORD) == []


class FakeAPI:
    """Label Studio's three calls, recorded; ``fail``: the exception every call raises."""

    def __init__(self, webhooks, backends=(OURS,), fail=None):
        self._webhooks, self._backends, self.fail = webhooks, list(backends), fail
        self.patched = []

    def webhooks(self, project):
        if self.fail:
            raise self.fail
        return self._webhooks

    def ml_backends(self, project):
        return self._backends

    def set_webhook_headers(self, webhook, headers):
        self.patched.append((webhook["id"], headers, webhook["actions"]))


def test_authorize_ml_webhooks_patches_headers_keeping_the_rest():
    api = FakeAPI([_hook(8, headers={"X-Trace": "on"}, actions=["ANNOTATION_CREATED"]), _hook(9)])
    api._webhooks[1]["url"] = "http://elsewhere/webhook"
    assert authorize_ml_webhooks(api, 3, USER, PASSWORD) == ["http://backend:9090/webhook"]
    assert api.patched == [(8, {"X-Trace": "on", "Authorization": GOOD}, ["ANNOTATION_CREATED"])]


def _settings(tmp_path, **overrides):
    return Settings(
        model_dir=str(tmp_path),
        basic_auth_user=USER,
        basic_auth_pass=PASSWORD,
        **overrides,
    )


def test_training_step_logs_once_without_the_secret(tmp_path, caplog):
    api = FakeAPI([_hook(1)])
    with caplog.at_level(logging.DEBUG):
        service.authorize_webhooks(api, "3", _settings(tmp_path))
        api._webhooks = [_hook(1, headers={"Authorization": GOOD})]
        service.authorize_webhooks(api, "3", _settings(tmp_path))  # the next training: nothing
    assert len(api.patched) == 1
    (line,) = [r.getMessage() for r in caplog.records if r.name == "backend.service"]
    assert "added this backend's basic-auth credentials" in line
    assert PASSWORD not in caplog.text and TOKEN not in caplog.text


def test_no_basic_auth_no_calls(tmp_path):
    api = FakeAPI([_hook(1)], fail=AssertionError("Label Studio was called"))
    service.authorize_webhooks(api, "3", Settings(model_dir=str(tmp_path)))
    assert api.patched == []


@pytest.mark.parametrize(
    "error",
    [
        LabelStudioUnavailable("Label Studio refused to list the webhooks of project 3: HTTP 403"),
        KeyError("url"),
    ],
)
def test_a_failure_warns_how_to_fix_by_hand_and_never_fails_the_training(tmp_path, caplog, error):
    api = FakeAPI([_hook(1)], fail=error)
    with caplog.at_level(logging.INFO):
        service.authorize_webhooks(api, "3", _settings(tmp_path))  # no exception
    (record,) = [r for r in caplog.records if r.name == "backend.service"]
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert "Settings > Webhooks" in message and "Authorization: Basic" in message
    assert (str(error) if isinstance(error, LabelStudioUnavailable) else "KeyError") in message
    assert PASSWORD not in caplog.text and TOKEN not in caplog.text


def test_errors_of_calls_that_send_the_credentials_leave_out_label_studio_s_answer():
    from label_studio_sdk.core.api_error import ApiError

    err = ApiError(
        status_code=400, headers={}, body={"headers": [f"{{'Authorization': '{GOOD}'}}"]}
    )
    assert _describe(err, body=False) == "HTTP 400"
    assert TOKEN in _describe(err)  # what every other call says

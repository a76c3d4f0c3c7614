"""backend.labelstudio.webhook_auth: the webhook's own token, the challenge that proves a URL is
this backend, and which of a project's Label Studio webhooks get the token or lose the password. The
same with a real Label Studio and a second backend connected with the same user name:
tests/labelstudio/test_webhook_leak.py."""

from __future__ import annotations

import base64
import json
import logging
import os
import stat
import threading
from urllib.parse import parse_qs, urlsplit

import pytest

from backend.config.settings import Settings, SettingsError
from backend.labelstudio import webhook_auth
from backend.labelstudio.client import LabelStudioUnavailable, _describe
from backend.labelstudio.outbound import OutboundRefused
from backend.labelstudio.webhook_auth import (
    TOKEN_HEADER,
    basic_auth_header,
    challenge_response,
    has_basic_auth,
    load_secret,
    plan,
    proves_self,
    webhook_token,
)
from tests.backend.test_backend_server import make_app

USER, PASSWORD = "lead", "wh-pass-7c2d"
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
GOOD = f"Basic {TOKEN}"
SECRET = b"s" * 32
OURS = {"url": "http://backend:9090", "auth_method": "BASIC_AUTH", "basic_auth_user": USER}
# Another backend, connected by another project member with the same user name.
THEIRS = {"url": "http://evil:9090", "auth_method": "BASIC_AUTH", "basic_auth_user": USER}


def _hook(id_, url="http://backend:9090/webhook", headers=None, actions=()):
    return {"id": id_, "url": url, "headers": headers or {}, "actions": list(actions)}


class Proofs:
    """``is_self`` for :func:`plan`: the URLs in ``ours`` prove to be this backend; records
    every challenge."""

    def __init__(self, *ours):
        self.ours, self.asked = set(ours), []

    def __call__(self, base):
        self.asked.append(base)
        return (True, "") if base in self.ours else (False, "answered wrongly")


# ------------------------------------------------------------------------ secret, token, challenge
def test_tokens_are_per_project_and_no_challenge_answer_is_a_token():
    assert webhook_token(SECRET, "4") != webhook_token(SECRET, "5")
    assert webhook_token(SECRET, "4") != webhook_token(b"t" * 32, "4")
    assert webhook_token(SECRET, "4") != challenge_response(SECRET, "4")
    assert webhook_auth.valid_token(SECRET, "4", webhook_token(SECRET, "4"))
    assert not webhook_auth.valid_token(SECRET, "5", webhook_token(SECRET, "4"))


def test_the_secret_is_made_once_private_and_shared(tmp_path):
    models = tmp_path / "models"
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(load_secret("", str(models))))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1 and len(results[0]) >= 32
    path = models / webhook_auth.SECRET_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(os.listdir(models)) == [webhook_auth.SECRET_FILE]  # no temporary left
    assert load_secret("", str(models)) == results[0]
    assert load_secret("from-the-environment-0123", str(models)) == b"from-the-environment-0123"


def test_an_unusable_model_dir_says_what_to_do(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(webhook_auth.WebhookSecretUnavailable, match="SRW_WEBHOOK_SECRET"):
        load_secret("", str(blocker / "models"))


def test_a_short_secret_is_refused_without_repeating_it(tmp_path):
    with pytest.raises(SettingsError) as err:
        Settings(model_dir=str(tmp_path), webhook_secret="short-secret")
    assert "short-secret" not in str(err.value)
    settings = Settings(model_dir=str(tmp_path), webhook_secret="x" * 40)
    assert "x" * 40 not in repr(settings) and "webhook_secret" not in settings.public()


def _answering(how):
    """A :func:`backend.labelstudio.outbound.bounded_get` stand-in for the answers' parsing (the
    real requests, to real hostile servers, are in tests/backend/test_outbound.py) whose reply
    ``how(nonce)`` builds: ``(status, JSON body)``, or an exception raised. Records the URLs."""
    calls = []

    def fetch(url):
        calls.append(url)
        result = how(parse_qs(urlsplit(url).query)["challenge"][0])
        if isinstance(result, Exception):
            raise result
        status, body = result
        return status, body if isinstance(body, bytes) else json.dumps(body).encode()

    return fetch, calls


@pytest.mark.parametrize(
    "how, proven, why",
    [
        (lambda n: (200, {"challenge_response": challenge_response(SECRET, n)}), True, ""),
        (
            lambda n: (200, {"challenge_response": challenge_response(b"x" * 32, n)}),
            False,
            "wrongly",
        ),
        (lambda n: (200, {"status": "UP"}), False, "did not answer"),
        (lambda n: (200, b"not JSON"), False, "did not answer"),
        (lambda n: (302, {}), False, "HTTP 302"),  # a redirect proves nothing
        (lambda n: (401, {}), False, "HTTP 401"),
        (lambda n: OutboundRefused("unreachable from here"), False, "unreachable"),
    ],
)
def test_proves_self(how, proven, why):
    fetch, calls = _answering(how)
    got, reason = proves_self("http://backend:9090/", SECRET, fetch=fetch)
    assert got is proven and why in reason and bool(reason) is not proven
    proves_self("http://backend:9090/", SECRET, fetch=fetch)
    assert urlsplit(calls[0])._replace(query="").geturl() == "http://backend:9090/health"
    nonces = [parse_qs(urlsplit(url).query)["challenge"][0] for url in calls]
    assert all(webhook_auth.NONCE.fullmatch(n) for n in nonces)
    assert len(set(nonces)) == len(calls)  # a fresh nonce each time


@pytest.mark.parametrize(
    "base",
    [
        "http://backend:9090/internal/admin/delete-everything?confirm=yes&x=",
        "http://user:pw@backend:9090/ml/#frag",
    ],
)
def test_the_challenge_goes_to_a_fixed_path_whatever_the_url_carries(base):
    fetch, calls = _answering(lambda n: (200, {}))
    proves_self(base, SECRET, fetch=fetch)
    (url,) = calls
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("http", "backend:9090", "/health")
    assert list(parse_qs(parts.query)) == ["challenge"]


def test_proves_self_asks_only_http_urls():
    fetch, calls = _answering(lambda n: (200, {}))
    assert proves_self("file:///etc/passwd", SECRET, fetch=fetch) == (False, "not an http(s) URL")
    assert calls == []


# --------------------------------------------------------------------------------------- the plan
@pytest.mark.parametrize(
    "headers, ok",
    [
        ({"authorization": f"basic {TOKEN}"}, True),  # names and schemes in any case
        ({"X-Other": "1", "AUTHORIZATION": f"  Basic {TOKEN} "}, True),
        ({}, False),
        ({"X-Other": GOOD}, False),
        ({"Authorization": basic_auth_header(USER, "old-pass")}, False),
        ({"Authorization": f"Bearer {TOKEN}"}, False),
        ({"Authorization": "Basic not*base64"}, False),
        ({"Authorization": 42}, False),
    ],
)
def test_has_basic_auth(headers, ok):
    assert has_basic_auth(headers, USER, PASSWORD) is ok


def _plan(hooks, backends=(OURS, THEIRS), proofs=None):
    proofs = proofs or Proofs(OURS["url"])
    return plan(hooks, backends, "3", SECRET, USER, PASSWORD, proofs), proofs


def test_only_the_proven_backend_gets_the_token_and_nobody_keeps_the_password():
    token = webhook_token(SECRET, "3")
    hooks = [
        ours := _hook(1, headers={"X-Trace": "on"}, actions=["ANNOTATION_CREATED"]),
        theirs := _hook(2, url="http://evil:9090/webhook"),
        _hook(3, url="http://evil:9090/webhook", headers={"Authorization": GOOD}),
        _hook(4, url="https://hooks.example.com/notify"),  # no ML backend: never challenged
        _hook(5, url="http://backend:9090/webhook/extra"),
    ]
    planned, proofs = _plan(hooks)
    assert proofs.asked == ["http://backend:9090", "http://evil:9090"]  # once per connection
    by_id = {c.webhook["id"]: c for c in planned.changes}
    assert sorted(by_id) == [1, 3]
    assert by_id[1].headers == {"X-Trace": "on", TOKEN_HEADER: token}
    assert by_id[1].token_added and not by_id[1].password_removed
    assert by_id[3].headers == {} and by_id[3].password_removed and not by_id[3].is_self
    assert theirs not in [c.webhook for c in planned.changes]
    assert planned.with_token == 1
    assert planned.unproven == {"http://evil:9090": "answered wrongly"}
    assert ours["headers"] == {"X-Trace": "on"}  # not modified in place


def test_the_old_password_header_on_our_webhook_becomes_the_token():
    stale = _hook(1, headers={"authorization": GOOD, "X-Trace": "on"})
    planned, _ = _plan([stale])
    (change,) = planned.changes
    assert change.headers == {"X-Trace": "on", TOKEN_HEADER: webhook_token(SECRET, "3")}
    assert change.password_removed and change.token_added and change.is_self


def test_a_webhook_with_the_token_is_not_challenged_again():
    token = webhook_token(SECRET, "3")
    planned, proofs = _plan([_hook(1, headers={TOKEN_HEADER: token})])
    assert planned.changes == [] and planned.with_token == 1 and proofs.asked == []
    # A wrong token (another project's, an old secret's) is replaced after a proof.
    planned, proofs = _plan([_hook(1, headers={TOKEN_HEADER.lower(): "stale"})])
    assert planned.changes[0].headers == {TOKEN_HEADER: token} and proofs.asked


def test_without_basic_auth_connections_nothing_is_challenged():
    none = {"url": "http://backend:9090", "auth_method": "NONE", "basic_auth_user": None}
    planned, proofs = _plan([_hook(1)], backends=[none])
    assert planned.changes == [] and proofs.asked == [] and planned.with_token == 0


def test_an_unproven_backend_gets_nothing_even_with_our_user_name():
    planned, proofs = _plan([_hook(1)], proofs=Proofs())  # our own URL unreachable, say
    assert planned.changes == [] and planned.with_token == 0
    assert planned.unproven == {"http://backend:9090": "answered wrongly"}


# ---------------------------------------------------------------------- the training's step, logs
class FakeAPI:
    """Label Studio's three calls, recorded (its real API: test_webhook_leak.py); ``fail``: the
    exception listing the webhooks raises."""

    def __init__(self, webhooks, backends=(OURS, THEIRS), fail=None):
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


def _settings(tmp_path, **overrides):
    return Settings(
        model_dir=str(tmp_path),
        basic_auth_user=USER,
        basic_auth_pass=PASSWORD,
        webhook_secret=SECRET.decode(),
        **overrides,
    )


@pytest.fixture
def challenges(monkeypatch):
    """Every challenge answered as this backend would for OURS' URL only."""
    proofs = Proofs(OURS["url"])
    monkeypatch.setattr(webhook_auth, "proves_self", lambda base, secret: proofs(base.rstrip("/")))
    return proofs


def _secrets_in(text):
    return [s for s in (PASSWORD, TOKEN, webhook_token(SECRET, "3"), SECRET.decode()) if s in text]


def test_training_step_tokens_our_hook_strips_the_leak_and_logs_no_secret(
    tmp_path, caplog, challenges
):
    api = FakeAPI(
        [_hook(1), _hook(2, url="http://evil:9090/webhook", headers={"Authorization": GOOD})]
    )
    with caplog.at_level(logging.DEBUG):
        webhook_auth.authorize_webhooks(api, "3", _settings(tmp_path))
    assert sorted(p[0] for p in api.patched) == [1, 2]
    lines = [r for r in caplog.records if r.name == "backend.labelstudio.webhook_auth"]
    warning = next(r.getMessage() for r in lines if r.levelno == logging.WARNING)
    assert "http://evil:9090/webhook" in warning and "rotate BASIC_AUTH_PASS" in warning
    assert any("gave the webhook to http://backend:9090/webhook" in r.getMessage() for r in lines)
    assert _secrets_in(caplog.text) == []


def test_nothing_proven_warns_how_to_paste_the_header_by_hand(tmp_path, caplog, challenges):
    api = FakeAPI([_hook(1, url="http://evil:9090/webhook")], backends=[THEIRS])
    with caplog.at_level(logging.INFO):
        webhook_auth.authorize_webhooks(api, "3", _settings(tmp_path))
    assert api.patched == []
    (record,) = [r for r in caplog.records if r.name == "backend.labelstudio.webhook_auth"]
    assert record.levelno == logging.WARNING
    assert "python _wsgi.py --webhook-token 3" in record.getMessage()
    assert "http://evil:9090: answered wrongly" in record.getMessage()


def test_no_basic_auth_no_calls(tmp_path):
    api = FakeAPI([_hook(1)], fail=AssertionError("Label Studio was called"))
    webhook_auth.authorize_webhooks(api, "3", Settings(model_dir=str(tmp_path)))
    assert api.patched == []


@pytest.mark.parametrize(
    "error",
    [
        LabelStudioUnavailable("Label Studio refused to list the webhooks of project 3: HTTP 403"),
        KeyError(PASSWORD),  # an unexpected error is named by its type only
    ],
)
def test_a_failure_warns_and_never_fails_the_training(tmp_path, caplog, error, challenges):
    api = FakeAPI([_hook(1)], fail=error)
    with caplog.at_level(logging.INFO):
        webhook_auth.authorize_webhooks(api, "3", _settings(tmp_path))  # no exception
    (record,) = [r for r in caplog.records if r.name == "backend.labelstudio.webhook_auth"]
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert "--webhook-token 3" in message
    assert (str(error) if isinstance(error, LabelStudioUnavailable) else "KeyError") in message
    assert _secrets_in(caplog.text) == []


def test_errors_of_calls_that_send_the_credentials_leave_out_label_studio_s_answer():
    from label_studio_sdk.core.api_error import ApiError

    err = ApiError(
        status_code=400, headers={}, body={"headers": [f"{{'Authorization': '{GOOD}'}}"]}
    )
    assert _describe(err, body=False) == "HTTP 400"
    assert TOKEN in _describe(err)  # what every other call says


# ------------------------------------------------------------------------------------- the server
def test_health_answers_a_challenge_with_the_secret(tmp_path):
    app, client, _ = make_app(tmp_path, webhook_secret=SECRET.decode())
    nonce = "n" * 24
    reply = client.get(f"/health?challenge={nonce}")  # no credentials: Label Studio's probe
    assert reply.status_code == 200
    assert reply.get_json()["challenge_response"] == challenge_response(SECRET, nonce)
    assert "challenge_response" not in client.get("/health").get_json()
    for bad in ("short", "n" * 200, "a b" * 10, "é" * 20):
        reply = client.get("/health", query_string={"challenge": bad})
        assert reply.status_code == 400 and "challenge must be" in reply.get_json()["error"]


def test_the_token_opens_its_project_s_webhook_and_nothing_else(tmp_path):
    app, client, runner = make_app(tmp_path, webhook_secret=SECRET.decode())
    token = {TOKEN_HEADER: webhook_token(SECRET, "3")}
    event = {"action": "ANNOTATION_CREATED", "project": {"id": 3}, "annotation": {"task": 9}}
    assert client.post("/webhook", json=event).status_code == 401
    reply = client.post("/webhook", json=event, headers=token)
    assert reply.status_code == 200 and reply.get_json()["status"] == "counted"
    # Project 3's token naming project 4 in the body: known, but not let in (403).
    other = client.post("/webhook", json={**event, "project": {"id": 4}}, headers=token)
    assert other.status_code == 403 and "project 3's" in other.get_json()["error"]
    assert client.post("/webhook", json=event, headers={TOKEN_HEADER: "0" * 64}).status_code == 401
    assert client.get("/status?project=3", headers=token).status_code == 401
    assert (
        client.post("/predict", json={"project": "3", "tasks": []}, headers=token).status_code
        == 401
    )
    assert client.get("/webhook", headers=token).status_code == 401
    # Basic auth still works for /webhook (a webhook set up by hand with it).
    from tests.backend.test_backend_server import GOOD as BASIC

    assert client.post("/webhook", json=event, headers=BASIC).status_code == 200

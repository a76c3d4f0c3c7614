"""backend.config.redact: URL passwords and configured secrets masked in logs, replies and stored
errors (with real processes: tests/operations/test_security.py)."""

from __future__ import annotations

import base64
import logging

import pytest

from backend.config.logs import install
from backend.config.redact import MASK, RedactingFilter, redact
from backend.config.settings import SECRETS, Settings, secrets_of
from tests.backend.test_backend_server import GOOD, NER_CONFIG, PASSWORD, USER, make_app

KEY = "key-0123456789abcdef"


@pytest.mark.parametrize(
    "text, shown",
    [
        ("at http://lead:pw@ls:8080/api", "at http://lead:***@ls:8080/api"),
        ("redis://:s3cret@redis:6379/0", "redis://:***@redis:6379/0"),
        ("http://ls:8080/x and https://u:p%40ss@h", "http://ls:8080/x and https://u:***@h"),
        ("no url, the key " + KEY, "no url, the key " + MASK),
        ("key-01", "key-01"),  # not the secret, only its start
    ],
)
def test_redact(text, shown):
    assert redact(text, [KEY, "ab"]) == shown  # "ab": too short to mask


def test_secrets_of_covers_every_form(tmp_path):
    settings = Settings(
        model_dir=str(tmp_path),
        label_studio_url="http://admin:p%40ss@ls:8080",
        label_studio_api_key=KEY,
        basic_auth_user=USER,
        basic_auth_pass=PASSWORD,
        redis_url="redis://:rpw-123@redis:6379/0",
        webhook_secret="w" * 20,
    )
    values = secrets_of(settings)
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    for value in (KEY, PASSWORD, basic, "p%40ss", "p@ss", "rpw-123", "w" * 20):
        assert value in values
    public = str(settings.public())
    assert not [v for v in values if v in public]
    assert "http://admin:***@ls:8080" in public and "redis://:***@redis:6379/0" in public


def test_the_filter_masks_messages_arguments_and_tracebacks():
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(self.format(record))

    handler = Keep()
    handler.addFilter(RedactingFilter([KEY]))
    log = logging.getLogger("test.redact")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("calling %s with %s", "http://u:pw@ls", KEY)
        try:
            raise RuntimeError(f"refused key {KEY}")
        except RuntimeError:
            log.exception("failed")
    finally:
        log.removeHandler(handler)
    text = "\n".join(records)
    assert KEY not in text and ":pw@" not in text
    assert "calling http://u:***@ls with ***" in text and "RuntimeError: refused key ***" in text


def test_install_replaces_its_own_filter(tmp_path):
    root = logging.getLogger()
    handler = logging.NullHandler()
    root.addHandler(handler)
    try:
        install(Settings(model_dir=str(tmp_path), label_studio_api_key=KEY))
        install(Settings(model_dir=str(tmp_path), label_studio_api_key=KEY + "x"))
        (only,) = [f for f in handler.filters if isinstance(f, RedactingFilter)]
        assert only.secrets == [KEY + "x"]
    finally:
        root.removeHandler(handler)


def test_a_reply_never_carries_a_credential(tmp_path, monkeypatch, caplog):
    from backend.serving import predictions

    app, client, _ = make_app(tmp_path)
    # A reply that would echo the API key (an error message of Label Studio's, say).
    monkeypatch.setattr(
        predictions, "model_version", lambda settings, project: f"v-{settings.label_studio_api_key}"
    )
    with caplog.at_level(logging.WARNING):
        reply = client.post("/setup", json={"project": "1", "schema": NER_CONFIG}, headers=GOOD)
    body = reply.get_data(as_text=True)
    api_key = app.extensions["subregweigh"]["settings"].label_studio_api_key
    assert reply.status_code == 200 and api_key not in body
    assert reply.get_json()["model_version"] == f"v-{MASK}"
    assert "a credential was masked in the reply" in caplog.text


def test_every_setting_declared_secret_is_masked(tmp_path):
    """A secret added to backend/config/settings.py is redacted without touching redact.py."""
    values = {name: f"secret-of-{name}-0123456789" for name in SECRETS}
    settings = Settings(model_dir=str(tmp_path), **values)
    assert set(values.values()) <= set(secrets_of(settings))

"""The webhook's own credential: how Label Studio's project webhook gets through basic auth
without carrying the password that guards every endpoint.

Label Studio sends its ML webhook (``<backend url>/webhook``, created on connect) with the
webhook's own headers, not the ML backend connection's basic auth, so behind basic auth
annotation events would get 401. The backend gives that webhook a credential of its own:

* a **webhook secret** (``SRW_WEBHOOK_SECRET``, else generated once into
  ``MODEL_DIR/.webhook-secret``, mode 0600; every process sharing the model directory reads the
  same one);
* per project, a **webhook token** ``HMAC-SHA256(secret, "webhook" + project id)``, sent in the
  :data:`TOKEN_HEADER` header. It authenticates ``POST /webhook`` for that one project and
  nothing else: whoever holds it can do what any member of the project can already do from Label
  Studio (make annotation events, start a training), and no more;
* the token goes only to a webhook whose URL has **proven to be this backend**: a training asks
  ``GET <backend url>/health?challenge=<random nonce>`` (no credentials, no redirects followed)
  and the answer must be ``HMAC-SHA256(secret, "challenge" + nonce)``, which only a process
  holding the secret can compute. Another backend connected with the same user name gets
  nothing; the basic-auth password found on any webhook (an earlier version of this backend put
  it there) is removed, with a warning to rotate it.

Nothing here logs or returns the secret or a token. ``python _wsgi.py --webhook-token PROJECT``
prints a project's header for pasting by hand where the challenge cannot be made.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import logging
import os
import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from backend.config.redact import redact
from backend.labelstudio.client import LabelStudioUnavailable
from backend.labelstudio.outbound import OutboundRefused, bounded_get, fixed_url

if TYPE_CHECKING:
    from backend.config.settings import Settings
    from backend.labelstudio.client import LabelStudioAPI

logger = logging.getLogger(__name__)

TOKEN_HEADER = "X-SubRegWeigh-Webhook-Token"
SECRET_FILE = ".webhook-secret"
# A nonce as :func:`new_nonce` makes it, with room for other clients': URL-safe, bounded.
NONCE = re.compile(r"[A-Za-z0-9_-]{16,128}")


class WebhookSecretUnavailable(RuntimeError):
    """The webhook secret could neither be read nor created (a read-only or full disk)."""


def load_secret(secret: str, model_dir: str) -> bytes:
    """The webhook secret: ``secret`` (SRW_WEBHOOK_SECRET) when set, else the one in
    ``model_dir``/:data:`SECRET_FILE`, created there (0600) on first use.

    The file appears complete or not at all (linked into place from a written temporary file),
    so processes starting together agree on one secret.
    """
    if secret:
        return secret.encode()
    path = Path(model_dir) / SECRET_FILE
    try:
        try:
            return _read_secret(path)
        except FileNotFoundError:
            _create_secret(path)
        return _read_secret(path)
    except OSError as err:
        raise WebhookSecretUnavailable(
            f"cannot read or create the webhook secret {path} ({err.strerror or err}); set "
            "SRW_WEBHOOK_SECRET or make MODEL_DIR writable"
        ) from None


def _create_secret(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{SECRET_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32))
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # fails if another process got there first: theirs is used
            logger.info("created the webhook secret in %s", path)
        except FileExistsError:
            pass
    finally:
        tmp.unlink(missing_ok=True)


def webhook_secret(settings) -> bytes:
    """:func:`load_secret` for a :class:`backend.config.settings.Settings`."""
    return load_secret(settings.webhook_secret, settings.model_dir)


def _read_secret(path: Path) -> bytes:
    value = path.read_bytes().strip()
    if len(value) < 16:
        raise WebhookSecretUnavailable(
            f"the webhook secret in {path} is shorter than 16 characters; delete the file to "
            "have a new one made (then re-run a training so webhooks get the new token)"
        )
    return value


def _mac(secret: bytes, purpose: str, value: str) -> str:
    # The purpose keeps a challenge answer from ever being a token: the \0 ends it.
    return hmac.new(secret, f"{purpose}\0{value}".encode(), sha256).hexdigest()


def webhook_token(secret: bytes, project: str) -> str:
    """The :data:`TOKEN_HEADER` value that authenticates webhooks of ``project`` (a canonical
    project id, as :func:`backend.store.store.project_id` gives): ``<project>.<mac>``, so the header
    alone says which project it opens, before any body is read."""
    return f"{project}.{_mac(secret, 'webhook', project)}"


def token_project(secret: bytes, token: str) -> str | None:
    """The project whose valid webhook token ``token`` is, else None (constant time in the
    mac)."""
    project, dot, _ = token.partition(".")
    if not dot or not project.isascii() or not project.isdigit() or len(project) > 12:
        return None
    return project if valid_token(secret, project, token) else None


def challenge_response(secret: bytes, nonce: str) -> str:
    """What this backend answers to ``GET /health?challenge=<nonce>``."""
    return _mac(secret, "challenge", nonce)


def valid_token(secret: bytes, project: str, token: str) -> bool:
    """Whether ``token`` is ``project``'s webhook token (constant time)."""
    return hmac.compare_digest(token.encode(), webhook_token(secret, project).encode())


def new_nonce() -> str:
    return secrets.token_urlsafe(24)


def proves_self(base_url: str, secret: bytes, fetch: Callable | None = None) -> tuple[bool, str]:
    """Whether the backend at ``base_url`` is this one: it answers a fresh challenge at
    ``/health`` as only a holder of ``secret`` can. ``(proven, why not)``.

    The request goes to ``/health`` on the URL's scheme, host and port only (its path and query
    are dropped), without credentials, following no redirect (a server that redirects to this
    backend has not proven anything), bounded in bytes and time
    (:func:`backend.labelstudio.outbound.bounded_get`; ``fetch``: its signature, for tests).
    """
    fetch = fetch or bounded_get
    try:
        url = fixed_url(base_url, "/health")
    except OutboundRefused as err:
        return False, str(err)
    nonce = new_nonce()
    try:
        status, body = fetch(f"{url}?{urlencode({'challenge': nonce})}")
    except OutboundRefused as err:
        return False, str(err)
    if status != 200:
        return False, f"/health answered HTTP {status}"
    try:
        answer = json.loads(body).get("challenge_response")
    except Exception:
        answer = None
    if not isinstance(answer, str):
        return False, "/health did not answer the challenge"
    if not hmac.compare_digest(answer.encode(), challenge_response(secret, nonce).encode()):
        return False, "/health answered the challenge wrongly (another backend)"
    return True, ""


# --------------------------------------------------------------- the basic-auth password on a hook
def basic_auth_header(user: str, password: str) -> str:
    """The ``Authorization`` value for HTTP basic auth as ``user``:``password``."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def has_basic_auth(headers: Mapping, user: str, password: str) -> bool:
    """Whether ``headers`` (a webhook's) authenticate as ``user``:``password`` (the header's
    name in any case, the scheme too, as the backend reads them)."""
    return any(_is_password(name, value, user, password) for name, value in headers.items())


def _is_password(name, value, user: str, password: str) -> bool:
    if str(name).lower() != "authorization" or not isinstance(value, str):
        return False
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        decoded = base64.b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):
        return False
    return hmac.compare_digest(decoded, f"{user}:{password}".encode())


# ------------------------------------------------------------------------------ a project's hooks
@dataclass(frozen=True)
class HookChange:
    """What :func:`plan` does to one webhook: its new ``headers``, and why (for the log: no
    credential in it)."""

    webhook: Mapping
    headers: dict
    token_added: bool
    password_removed: bool
    is_self: bool


@dataclass(frozen=True)
class Plan:
    """:func:`plan`'s answer: the ``changes``; the connections that did not prove to be this
    backend, ``unproven`` (redacted base URL -> why); how many webhooks carry the token after
    the changes, ``with_token`` (0: no annotation event can get through)."""

    changes: list[HookChange]
    unproven: dict[str, str]
    with_token: int


def ml_webhook_url(backend_url: str) -> str:
    """The webhook Label Studio creates when ``backend_url`` is connected to a project."""
    return backend_url.rstrip("/") + "/webhook"


def plan(
    webhooks: Iterable[Mapping],
    backends: Iterable[Mapping],
    project: str,
    secret: bytes,
    user: str,
    password: str,
    is_self: Callable[[str], tuple[bool, str]],
) -> Plan:
    """The header changes that make ``project``'s ``webhooks`` safe and this backend's work.

    ``webhooks`` and ``backends`` as :class:`backend.labelstudio.client.LabelStudioAPI` lists them;
    ``is_self(base_url)`` as :func:`proves_self` (called at most once per URL, only for the
    connections Label Studio calls with basic auth, and not for a webhook that already carries
    the right token).

    * A webhook of a connection proven to be this backend gets the project's token.
    * The basic-auth password ``user``:``password`` is removed from every webhook that carries
      it: a webhook needs only the token, and another backend must never have it.
    """
    token = webhook_token(secret, project)
    connected = {
        ml_webhook_url(b["url"]): b["url"]
        for b in backends
        if b.get("url") and b.get("auth_method") == "BASIC_AUTH"
    }
    proofs: dict[str, tuple[bool, str]] = {}
    changes, unproven, with_token = [], {}, 0
    for hook in webhooks:
        headers = dict(hook.get("headers") or {})
        carries_password = bool(user) and has_basic_auth(headers, user, password)
        has_token = any(
            str(k).lower() == TOKEN_HEADER.lower() and v == token for k, v in headers.items()
        )
        base = connected.get(hook.get("url"))
        ours = has_token
        if base is not None and not has_token:
            if base not in proofs:
                proofs[base] = is_self(base)
            ours, why = proofs[base]
            if not ours:
                unproven[redact(base)] = why
        new = {
            k: v
            for k, v in headers.items()
            if not _is_password(k, v, user, password)
            and not (ours and str(k).lower() == TOKEN_HEADER.lower())
        }
        if ours:
            new[TOKEN_HEADER] = token
            with_token += 1
        if new != headers:
            changes.append(
                HookChange(hook, new, ours and not has_token, carries_password, bool(ours))
            )
    return Plan(changes, unproven, with_token)


def secure_webhooks(
    api, project: str, secret: bytes, user: str, password: str, is_self=None
) -> Plan:
    """Apply :func:`plan` to ``project``'s webhooks in Label Studio through ``api`` (a
    :class:`backend.labelstudio.client.LabelStudioAPI`).

    Raises what ``api`` raises when Label Studio cannot list or update them.
    """
    if is_self is None:

        def is_self(base_url: str) -> tuple[bool, str]:
            return proves_self(base_url, secret)

    planned = plan(
        api.webhooks(int(project)),
        api.ml_backends(int(project)),
        project,
        secret,
        user,
        password,
        is_self,
    )
    for change in planned.changes:
        api.set_webhook_headers(change.webhook, change.headers)
    return planned


def authorize_webhooks(api: LabelStudioAPI, project: str, settings: Settings) -> None:
    """With basic auth on, give the project's webhook to this backend its own token (Label
    Studio sends its ML webhook without the connection's credentials, so annotation events would
    get 401 and never trigger a retraining), and take this backend's basic-auth password off
    every webhook (see :mod:`backend.labelstudio.webhook_auth`). Never fails the training: a WARNING
    says how to do it by hand. Neither credentials nor tokens are logged."""
    if not settings.basic_auth_user:
        return
    by_hand = (
        "annotation changes get 401 here and never trigger a retraining until the webhook to "
        "<backend url>/webhook in the project's Settings > Webhooks carries the header that "
        f"`python _wsgi.py --webhook-token {project}` prints where the backend runs"
    )
    try:
        secret = webhook_secret(settings)
        planned = secure_webhooks(
            api, project, secret, settings.basic_auth_user, settings.basic_auth_pass
        )
    except Exception as err:  # Label Studio refused, an older API, no secret: the training goes on
        logger.warning(
            "project %s: could not give Label Studio's webhook to this backend its token (%s); %s",
            project,
            # Their messages hold no credential; any other error is named by its type only.
            err
            if isinstance(err, (LabelStudioUnavailable, WebhookSecretUnavailable))
            else type(err).__name__,
            by_hand,
        )
        return
    for change in planned.changes:
        url = redact(str(change.webhook.get("url")))
        if change.password_removed:
            logger.warning(
                "project %s: removed this backend's basic-auth password from the webhook to %s "
                "(%s); an earlier version of the backend put it there: rotate BASIC_AUTH_PASS",
                project,
                url,
                "this backend" if change.is_self else "NOT this backend",
            )
        if change.token_added:
            logger.info(
                "project %s: gave the webhook to %s (proven to be this backend) its webhook token; "
                "annotation changes now reach the backend",
                project,
                url,
            )
    if planned.with_token == 0:
        unproven = "; ".join(f"{url}: {why}" for url, why in planned.unproven.items())
        logger.warning(
            "project %s: no webhook could be proven to call this backend (%s); %s",
            project,
            unproven or "no ML backend connected with basic auth",
            by_hand,
        )
    elif planned.unproven:
        logger.info(
            "project %s: webhooks left without a token (not this backend): %s",
            project,
            "; ".join(f"{url}: {why}" for url, why in planned.unproven.items()),
        )

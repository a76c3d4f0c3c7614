"""The HTTP face of the backend: the endpoints Label Studio calls, plus status, the project
report (``/report``, ``/report.json``) and the self-test (``POST /selftest``), and the policy on
Label Studio's webhook events.

label-studio-ml's interface (``LabelStudioMLBase``, ``model.py``) is served by our own small
Flask app instead of label-studio-ml 1.0.9's: its job manager runs training inside the webhook
request without Redis (Label Studio waits 1 s), rebuilds a model version per job, lacks
START_TRAINING, and shares finished jobs between backends on one queue. Endpoints and payloads
are the same; the work is :mod:`backend.service`'s.
"""

from __future__ import annotations

import hmac
import logging
import time
from functools import partial
from pathlib import Path

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException

from backend import redact, service, webhook_auth
from backend import report as reports
from backend.jobs import IDLE, JobQueueUnavailable, RQRunner, ThreadRunner
from backend.settings import Settings
from backend.store import ProjectStore, TooManyProjects, project_id
from backend.tasks import ConfigError, parse_label_config
from subregweigh.selftest import NOISES

logger = logging.getLogger(__name__)

TEXT_RESPONSES = {"application/json", "text/html"}
ABANDONED = "the training stopped before finishing (its process was killed or crashed)"
ABANDONED_SELFTEST = ABANDONED.replace("training", "self-test")

# Webhook events. label-studio-ml 1.0.9 lacks START_TRAINING and misspells ANNOTATIONS_DELETED.
TRAIN_NOW = {"START_TRAINING"}
ANNOTATION_EVENTS = {
    "ANNOTATION_CREATED",
    "ANNOTATION_UPDATED",
    "ANNOTATIONS_DELETED",
    "ANNOTATION_DELETED",
}
TRAIN_EVENTS = TRAIN_NOW | ANNOTATION_EVENTS
IGNORED_EVENTS = {
    "TASKS_CREATED",
    "TASKS_DELETED",
    "PROJECT_UPDATED",
    "PROJECT_CREATED",
    "PROJECT_DELETED",
}


def wants_training(
    store: ProjectStore, settings: Settings, event: str, task: str | None = None
) -> tuple[bool, dict | None]:
    """Count ``event`` (one of :data:`TRAIN_EVENTS`; ``task``: the task it changed, see
    :func:`changed_task`). Returns whether it should start a training (at once, or after
    ``settings.retrain_after`` annotation changes), and what this process keeps unwritten
    because the disk is full (None when the count is on disk; else the event is kept in memory
    and written when space returns: Label Studio sends a webhook once, whatever the reply)."""
    if event in TRAIN_NOW:
        return True, None
    status = store.note_event(task)
    unwritten = status.get("unwritten")
    logger.info(
        "project %s: %s (%d of %d changes before retraining)%s",
        store.project,
        event,
        status["events_since_training"],
        settings.retrain_after,
        "; the disk is full: kept in memory" if unwritten else "",
    )
    return status["events_since_training"] >= settings.retrain_after, unwritten


def changed_task(body: dict) -> str | None:
    """The task id of an ANNOTATION_CREATED / ANNOTATION_UPDATED webhook, else None (a
    deletion names only annotation ids: the next training sees it)."""
    if body.get("action") not in {"ANNOTATION_CREATED", "ANNOTATION_UPDATED"}:
        return None
    task = body.get("task") if isinstance(body.get("task"), dict) else {}
    annotation = body.get("annotation") if isinstance(body.get("annotation"), dict) else {}
    try:  # the same rule as a project id: digits, or {"id": digits}
        return project_id(task.get("id", annotation.get("task")))
    except ValueError:
        logger.warning("%s webhook names no task id; the next training rescores it", body["action"])
        return None


class BadRequest(ValueError):
    """A request the backend cannot act on; becomes a 400 with this message."""


def _request_json():
    """The request's JSON, or None when it is not valid JSON (too deeply nested included: the
    parser raises RecursionError there, which ``silent=True`` does not catch)."""
    try:
        return request.get_json(silent=True)
    except RecursionError:
        return None


def _json_body() -> dict:
    body = _request_json()
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    return body


def _project(value) -> str:
    """The project id in ``value``, or a 400 saying what was wrong."""
    try:
        return project_id(value)
    except ValueError as err:
        raise BadRequest(str(err)) from None


def _webhook_token_ok(settings: Settings) -> bool:
    """Whether the request carries the webhook token of the project its body names
    (:mod:`backend.webhook_auth`): it opens ``POST /webhook`` of that project, nothing else."""
    token = request.headers.get(webhook_auth.TOKEN_HEADER)
    body = _request_json()
    if request.method != "POST" or not token or not isinstance(body, dict):
        return False
    try:
        project = project_id(body.get("project"))
        secret = webhook_auth.webhook_secret(settings)
    except (ValueError, webhook_auth.WebhookSecretUnavailable):
        return False
    return webhook_auth.valid_token(secret, project, token)


def _clean_debris(model_dir: str) -> None:
    """At start-up: what killed trainings, publishes and prunes left in every project (safe
    while another process trains: see :meth:`ProjectStore.clean_debris`)."""
    root = Path(model_dir)
    if not root.is_dir():
        return
    for entry in root.iterdir():
        if entry.is_dir() and entry.name.isascii() and entry.name.isdigit():
            try:
                ProjectStore(model_dir, entry.name).clean_debris()
            except (OSError, ValueError) as err:  # start-up goes on; the next training retries
                logger.warning("project %s: leftovers not cleaned: %s", entry.name, err)


def _runner(settings: Settings, kind: str, queued, in_process):
    """rq when ``settings.redis_url`` is set (the job ``queued`` with the training settings),
    else in-process threads (``in_process`` with ``settings``)."""
    if settings.redis_url:
        return RQRunner(
            partial(queued, training=settings.training()),
            settings.redis_url,
            settings.queue_name,
            lock_seconds=settings.job_lock_seconds,
            kind=kind,
        )
    return ThreadRunner(partial(in_process, settings=settings), settings.model_dir, kind=kind)


def _number(name: str, default, kind, low, high):
    """Query parameter ``name`` as ``kind`` in [low, high], or a 400 naming it."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a {kind.__name__}, got {raw[:40]!r}") from None
    if not low <= value <= high:
        raise BadRequest(f"{name} must be in [{low}, {high}], got {raw[:40]!r}")
    return value


def create_app(
    settings: Settings | None = None, runner=None, selftest_runner=None, rescore_runner=None
) -> Flask:
    """Build the app, serving and training with ``settings`` (default: from the environment).

    ``runner`` (trainings), ``selftest_runner`` (self-tests) and ``rescore_runner`` (changed
    tasks scored with the current version) default to rq when
    ``settings.redis_url`` is set, else in-process threads; their jobs run with ``settings``
    (on rq: its training part, see :mod:`backend.settings`).
    """
    settings = settings or Settings.from_env()
    if runner is None:
        runner = _runner(settings, "training", service.run_queued_training, service.train_project)
    if selftest_runner is None:
        selftest_runner = _runner(
            settings, "selftest", service.run_queued_selftest, service.selftest_project
        )
    if rescore_runner is None:
        rescore_runner = _runner(
            settings, "rescore", service.run_queued_rescore, service.rescore_project
        )
    app = Flask("subregweigh")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_request_mb * 1024 * 1024
    app.extensions["subregweigh"] = {
        "settings": settings,
        "runner": runner,
        "selftest_runner": selftest_runner,
        "rescore_runner": rescore_runner,
    }
    redact.install(settings)
    secrets = redact.secrets_of(settings)

    @app.after_request
    def no_credential_in_a_response(response):
        if not response.direct_passthrough and response.mimetype in {
            "application/json",
            "text/html",
        }:
            body = response.get_data(as_text=True)
            clean = redact.redact(body, secrets)
            if clean != body:
                logger.warning(
                    "%s %s: a credential was masked in the reply", request.method, request.path
                )
                response.set_data(clean)
        return response

    logger.info(
        "subregweigh backend: %s jobs, settings %s",
        "rq" if isinstance(runner, RQRunner) else "in-process",
        settings.public(),
    )

    _clean_debris(settings.model_dir)

    def store_for(value) -> ProjectStore:
        return ProjectStore(settings.model_dir, _project(value))

    @app.before_request
    def basic_auth():
        if not settings.basic_auth_user or request.path == "/health":
            return None
        if request.path == "/webhook" and _webhook_token_ok(settings):
            return None
        try:
            auth = request.authorization
        except ValueError:  # werkzeug raises on a non-ASCII Basic token instead of returning None
            auth = None
        # Bytes: compare_digest refuses non-ASCII str.
        ok = (
            auth is not None
            and auth.type == "basic"
            and hmac.compare_digest(
                (auth.username or "").encode(), settings.basic_auth_user.encode()
            )
            and hmac.compare_digest(
                (auth.password or "").encode(), settings.basic_auth_pass.encode()
            )
        )
        if ok:
            return None
        response = jsonify(error="authentication required")
        response.status_code = 401
        response.headers["WWW-Authenticate"] = 'Basic realm="subregweigh"'
        return response

    @app.errorhandler(BadRequest)
    @app.errorhandler(ConfigError)
    def bad_request(err):
        logger.warning("%s %s: 400: %s", request.method, request.path, err)
        return jsonify(error=str(err)), 400

    @app.errorhandler(reports.ReportUnavailable)
    def no_report(err):
        return jsonify(error=str(err)), 404

    @app.errorhandler(JobQueueUnavailable)
    @app.errorhandler(TooManyProjects)
    @app.errorhandler(webhook_auth.WebhookSecretUnavailable)
    def queue_unavailable(err):
        logger.error("%s %s: 503: %s", request.method, request.path, err)
        return jsonify(error=str(err)), 503

    @app.errorhandler(HTTPException)
    def http_error(err):
        return jsonify(error=err.description or err.name), err.code

    @app.errorhandler(Exception)
    def server_error(err):
        logger.exception("%s %s failed", request.method, request.path)
        return jsonify(error=f"internal error: {type(err).__name__}; see the backend's log"), 500

    @app.get("/health")
    @app.get("/")
    def health():
        reply = {"status": "UP", "model_class": "SubRegWeighModel"}
        nonce = request.args.get("challenge")
        if nonce is not None:  # a training asks whether a webhook's URL is this backend
            if not webhook_auth.NONCE.fullmatch(nonce):
                raise BadRequest("challenge must be 16-128 characters of A-Z, a-z, 0-9, _ and -")
            reply["challenge_response"] = webhook_auth.challenge_response(
                webhook_auth.webhook_secret(settings), nonce
            )
        return jsonify(reply)

    @app.post("/setup")
    def setup():
        body = _json_body()
        project = _project(body.get("project"))
        parse_label_config(body.get("schema"))  # an unsupported config fails at connect time
        return jsonify(model_version=service.model_version(settings, project))

    @app.post("/predict")
    def predict():
        body = _json_body()
        tasks = body.get("tasks")
        if not isinstance(tasks, list) or not all(isinstance(t, dict) for t in tasks):
            raise BadRequest("'tasks' must be a list of task objects")
        project = _project(body.get("project"))
        if not body.get("label_config"):
            raise BadRequest("'label_config' is missing")
        spec = parse_label_config(body["label_config"])
        start = time.perf_counter()
        results = service.predict(settings, project, spec, tasks)
        logger.info(
            "project %s: /predict of %d tasks in %.2f s",
            project,
            len(tasks),
            time.perf_counter() - start,
        )
        return jsonify(results=results, model_version=service.model_version(settings, project))

    @app.post("/webhook")
    def webhook():
        body = _json_body()
        event = body.get("action")
        if not isinstance(event, str):
            raise BadRequest("'action' is missing")
        if event not in TRAIN_EVENTS:
            if event in IGNORED_EVENTS:
                return jsonify(status="ignored", action=event), 200
            raise BadRequest(f"unknown webhook action {event!r}")
        store = store_for(body.get("project"))
        reply = {"action": event}
        task = changed_task(body)
        train, unwritten = wants_training(store, settings, event, task)
        if unwritten:  # a full disk: counted in this process, written when space returns
            reply["unwritten"] = unwritten
        if task is not None and store.current_version() is not None:
            reply["rescore"] = rescore_runner.submit(store.project)  # else the training scores it
        if not train:
            return jsonify(status="counted", **reply), 202 if unwritten else 200
        outcome = runner.submit(store.project)
        logger.info("project %s: %s -> training %s", store.project, event, outcome)
        return jsonify(status=outcome, **reply), 201

    def _reconciled(store: ProjectStore, jobs, running, why: str, **failed) -> tuple[dict, str]:
        """The status and the job's state, the job marked ``failed`` if recorded ``running``
        while no process holds its lock: that process died. Asked again under the status lock:
        a job that just started or finished (it writes its end before it lets its lock go) is
        left alone."""
        job = jobs.state(store.project)
        status = store.status()
        if running(status) and job == IDLE:
            status = store.update_status(
                when=lambda current: running(current) and jobs.state(store.project) == IDLE,
                **failed,
            )
            if running(status):  # it was alive after all
                job = jobs.state(store.project)
            else:
                logger.error("project %s: %s", store.project, why)
        return status, job

    def _status(value) -> dict:
        store = store_for(value)
        status, job = _reconciled(
            store,
            runner,
            lambda current: current["state"] == "running",
            ABANDONED,
            state="failed",
            finished_at=time.time(),
            last_error=ABANDONED,
            message="training failed; the previous version keeps serving",
        )
        status, selftest_job = _reconciled(
            store,
            selftest_runner,
            lambda current: (current.get("selftest") or {}).get("state") == "running",
            ABANDONED_SELFTEST,
            selftest=lambda old: {
                **old,
                "state": "failed",
                "finished_at": time.time(),
                "last_error": ABANDONED_SELFTEST,
                "message": "self-test failed",
            },
        )
        status["job"] = job
        status["is_training"] = job not in {IDLE, "unknown"}
        status["disk"] = service.disk_space(settings, store)
        selftest = status.get("selftest") or {"state": "idle"}
        status["selftest"] = {**selftest, "job": selftest_job}
        return status

    @app.get("/is_training")
    def is_training():
        status = _status(request.args.get("project"))
        return jsonify(
            is_training=status["is_training"],
            job=status["job"],
            model_version=status["current_version"],
        )

    @app.get("/status")
    def status():
        return jsonify(_status(request.args.get("project")))

    def _report() -> dict:
        return reports.project_report(
            settings,
            store_for(request.args.get("project")).project,
            threshold=_number("threshold", 0.5, float, 0.0, 1.0),
            top=_number("top", 20, int, 1, 1000),
            expected_error_rate=_number("expected_error_rate", None, float, 0.0, 1.0),
        )

    @app.get("/report")
    def report_page():
        report = _report()
        page = reports.render(report, report["meta"]["project"])
        # A task text may hold lone surrogates (Label Studio stores what it is sent); UTF-8
        # cannot encode them, so they are shown escaped rather than failing the whole page.
        body = page.encode("utf-8", errors="backslashreplace")
        return Response(body, mimetype="text/html", content_type="text/html; charset=utf-8")

    @app.get("/report.json")
    def report_json():
        return jsonify(_report())

    @app.post("/selftest")
    def selftest():
        body = _request_json()
        body = body if isinstance(body, dict) else {}
        store = store_for(request.args.get("project", body.get("project")))
        raw = request.args.get("noise", body.get("noise", ",".join(NOISES)))
        noises = raw.split(",") if isinstance(raw, str) else raw
        # Each kind once, in the order asked: one training per kind, however often it is named.
        if (
            not isinstance(noises, list)
            or not noises
            or not all(isinstance(n, str) and n in NOISES for n in noises)
        ):
            raise BadRequest(f"noise must be among {', '.join(NOISES)}, got {str(raw)[:60]!r}")
        noises = list(dict.fromkeys(noises))
        # The job reads what was asked last (submissions of one project collapse into one job).
        store.update_status(selftest_request={"noises": noises, "at": time.time()})
        outcome = selftest_runner.submit(store.project)
        logger.info("project %s: self-test (%s noise) %s", store.project, ",".join(noises), outcome)
        return jsonify(status=outcome, project=store.project, noise=noises), 202

    @app.route("/versions", methods=["GET", "POST"])
    def versions():
        body = _request_json() if request.method == "POST" else None
        raw = (body or {}).get("project") if isinstance(body, dict) else request.args.get("project")
        if raw is None:
            return jsonify(versions=[])
        store = store_for(raw)
        return jsonify(
            versions=store.all_versions(), current=service.model_version(settings, store.project)
        )

    return app

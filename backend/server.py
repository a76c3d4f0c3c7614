"""The HTTP face of the backend: the endpoints Label Studio calls, plus status.

We serve ``SubRegWeighModel`` (a ``LabelStudioMLBase``) with our own small Flask app instead of
label-studio-ml 1.0.9's: its job manager runs training inside the webhook request without
Redis (Label Studio waits 1 s), rebuilds a model version per job, lacks START_TRAINING, and
shares finished jobs between backends on one queue. Endpoints and payloads are the same.
"""

from __future__ import annotations

import hmac
import logging
import time

from flask import Flask, jsonify, request
from werkzeug.exceptions import HTTPException

from backend.jobs import IDLE, JobQueueUnavailable, RQRunner, ThreadRunner
from backend.settings import Settings
from backend.tasks import ConfigError

logger = logging.getLogger(__name__)

JOB = "model:train_project"
ABANDONED = "the training stopped before finishing (its process was killed or crashed)"


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
    from model import project_id

    try:
        return project_id(value)
    except ValueError as err:
        raise BadRequest(str(err)) from None


def create_app(settings: Settings | None = None, runner=None) -> Flask:
    """Build the app. ``runner`` defaults to rq when REDIS_URL is set, else in-process threads."""
    from model import SubRegWeighModel, train_project

    settings = settings or Settings.from_env()
    if runner is None:
        runner = (
            RQRunner(
                JOB, settings.redis_url, settings.queue_name, lock_seconds=settings.job_lock_seconds
            )
            if settings.redis_url
            else ThreadRunner(train_project, settings.model_dir)
        )
    app = Flask("subregweigh")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_request_mb * 1024 * 1024
    app.extensions["subregweigh"] = {"settings": settings, "runner": runner}
    logger.info(
        "subregweigh backend: %s jobs, settings %s",
        "rq" if isinstance(runner, RQRunner) else "in-process",
        settings.public(),
    )

    def model_for(project, label_config=None) -> SubRegWeighModel:
        return SubRegWeighModel(project=project, label_config=label_config, settings=settings)

    @app.before_request
    def basic_auth():
        if not settings.basic_auth_user or request.path == "/health":
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

    @app.errorhandler(JobQueueUnavailable)
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
        return jsonify(status="UP", model_class="SubRegWeighModel")

    @app.post("/setup")
    def setup():
        body = _json_body()
        model = model_for(_project(body.get("project")), body.get("schema"))
        model.spec()  # an unsupported config fails here, at connect time, with the reason
        return jsonify(model_version=model.model_version)

    @app.post("/predict")
    def predict():
        body = _json_body()
        tasks = body.get("tasks")
        if not isinstance(tasks, list) or not all(isinstance(t, dict) for t in tasks):
            raise BadRequest("'tasks' must be a list of task objects")
        model = model_for(_project(body.get("project")), body.get("label_config"))
        if not model.label_config:
            raise BadRequest("'label_config' is missing")
        start = time.perf_counter()
        results = model.predict(tasks)
        logger.info(
            "project %s: /predict of %d tasks in %.2f s",
            model.project,
            len(tasks),
            time.perf_counter() - start,
        )
        return jsonify(results=results, model_version=model.model_version)

    @app.post("/webhook")
    def webhook():
        body = _json_body()
        event = body.get("action")
        if not isinstance(event, str):
            raise BadRequest("'action' is missing")
        if event not in SubRegWeighModel.TRAIN_EVENTS:
            from model import IGNORED_EVENTS

            if event in IGNORED_EVENTS:
                return jsonify(status="ignored", action=event), 200
            raise BadRequest(f"unknown webhook action {event!r}")
        model = model_for(_project(body.get("project")))
        if not model.wants_training(event):
            return jsonify(status="counted", action=event), 200
        outcome = runner.submit(model.project)
        logger.info("project %s: %s -> training %s", model.project, event, outcome)
        return jsonify(status=outcome, action=event), 201

    def _status(project) -> dict:
        model = model_for(project)
        job = runner.state(model.project)
        status = model.store.status()
        if status["state"] == "running" and job == IDLE:
            # Recorded as running, yet no process holds its training lock: the process died.
            # Asked again under the status lock: a training that just started or finished (it
            # writes "idle" before it lets its lock go) is left alone.
            status = model.store.update_status(
                when=lambda current: (
                    current["state"] == "running" and runner.state(model.project) == IDLE
                ),
                state="failed",
                finished_at=time.time(),
                last_error=ABANDONED,
                message="training failed; the previous version keeps serving",
            )
            if status["state"] == "failed":
                logger.error("project %s: %s", model.project, ABANDONED)
            else:  # it was alive after all
                job = runner.state(model.project)
        status["job"] = job
        status["is_training"] = job not in {IDLE, "unknown"}
        return status

    @app.get("/is_training")
    def is_training():
        status = _status(_project(request.args.get("project")))
        return jsonify(
            is_training=status["is_training"],
            job=status["job"],
            model_version=status["current_version"],
        )

    @app.get("/status")
    def status():
        return jsonify(_status(_project(request.args.get("project"))))

    @app.route("/versions", methods=["GET", "POST"])
    def versions():
        body = _request_json() if request.method == "POST" else None
        raw = (body or {}).get("project") if isinstance(body, dict) else request.args.get("project")
        if raw is None:
            return jsonify(versions=[])
        model = model_for(_project(raw))
        return jsonify(versions=model.store.all_versions(), current=model.model_version)

    return app

"""The endpoints: those Label Studio calls (``/health``, ``/setup``, ``/predict``,
``/webhook``, ``/versions``, ``/is_training``) and ours (``/status``, the project report
``/report`` and ``/report.json``, the self-test ``POST /selftest``), and the policy on Label
Studio's webhook events. The work is :mod:`backend.jobs.training`'s,
:mod:`backend.serving.predictions`' and the others'; the app's settings and job
runners are those :func:`backend.web.server.create_app` put in ``app.extensions["subregweigh"]``.
"""

from __future__ import annotations

import logging
import time

from flask import Blueprint, Response, current_app, jsonify, request

from backend.config import project_settings
from backend.config.settings import Settings, SettingsError
from backend.labelstudio import membership, webhook_auth
from backend.labelstudio.tasks import ConfigError, TaskRead, parse_label_config
from backend.queue.runners import IDLE, QUEUED, RUNNING, JobQueueUnavailable
from backend.serving import predictions
from backend.serving import report as reports
from backend.store import snapshot
from backend.store.store import ProjectStore, disk_space, project_id, retrain_due
from backend.web import auth, errors, inputs
from backend.web.inputs import BadRequest
from subregweigh.selftest import DEFAULT_NOISES, NOISES

logger = logging.getLogger(__name__)

routes = Blueprint("subregweigh", __name__)

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
    status = store.note_event(task, serving=store.current_version() is not None)
    unwritten = status.get("unwritten")
    logger.info(
        "project %s: %s (%d of %d changes before retraining)%s",
        store.project,
        event,
        status["events_since_training"],
        settings.retrain_after,
        "; the disk is full: kept in memory" if unwritten else "",
    )
    return retrain_due(status, settings.retrain_after), unwritten


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


def _settings() -> Settings:
    return current_app.extensions["subregweigh"]["settings"]


def _jobs(kind: str):
    """The app's job runner ``kind``: "runner" (trainings), "selftest_runner", "rescore_runner"."""
    return current_app.extensions["subregweigh"][kind]


def _store(value) -> ProjectStore:
    return ProjectStore(_settings().model_dir, inputs.project(value))


@routes.get("/health")
@routes.get("/")
def health():
    reply = {"status": "UP", "model_class": "SubRegWeighModel"}
    nonce = request.args.get("challenge")
    if nonce is not None:  # a training asks whether a webhook's URL is this backend
        if not webhook_auth.NONCE.fullmatch(nonce):
            raise BadRequest("challenge must be 16-128 characters of A-Z, a-z, 0-9, _ and -")
        reply["challenge_response"] = webhook_auth.challenge_response(
            webhook_auth.webhook_secret(_settings()), nonce
        )
    return jsonify(reply)


@routes.post("/setup")
def setup():
    body = inputs.json_body()
    project = inputs.project(body.get("project"))
    store = _store(project)
    if body.get("extra_params"):
        try:  # what is wrong with them is said first, whoever asks
            _, settings = project_settings.check(_settings(), body["extra_params"])
        except SettingsError as err:
            raise BadRequest(str(err)) from None
    elif "extra_params" in body:  # Label Studio always sends it (null when unset)
        settings = _settings()
    else:
        settings = project_settings.effective(_settings(), store)
    # an unsupported config, or one of several labeling controls that the settings do not
    # choose between, fails at connect time
    parse_label_config(body.get("schema"), settings.controls_to_weigh)
    # the backend's own address and token, checked once a minute per project (a 502 naming
    # what is wrong: Label Studio shows it as the connection's error)
    membership.require_credentials(_settings(), int(store.project))
    refused = _start_refusal_still_true(store, settings.min_annotations)
    if refused:  # the model card shows it: Label Studio clears a training's error on each GET
        return errors.refusal(409, refused)
    if "extra_params" in body:
        if body["extra_params"]:  # they make the project's directory: is it Label Studio's?
            membership.require_exists(_settings(), store)
        _project_settings(store, body["extra_params"])
    return jsonify(model_version=predictions.model_version(_settings(), project))


# Seconds after a refused Start Training during which /setup repeats the refusal (Label Studio
# 1.23 keeps a refused training reply as the connection's error only until its next /setup).
START_REFUSAL_SHOWN = 600.0


def _start_refusal_still_true(store: ProjectStore, minimum: int) -> str | None:
    """The sentence of the project's last refused *Start Training* (too few annotated tasks),
    while it holds: refused within :data:`START_REFUSAL_SHOWN` s, nothing served, the
    project's ``minimum`` (min_annotations) unchanged, and its annotations (Label Studio's
    count, ground truth and several per task included, read by the credentials check) still
    under it. Else None."""
    refused = store.status().get("start_refused")
    if not refused or time.time() - refused["at"] > START_REFUSAL_SHOWN:
        return None
    if store.current_version() is not None:
        return None
    counts = membership.checked_counts(_settings(), int(store.project))
    if refused["minimum"] != minimum:
        return None
    if counts is None or counts["total_annotations_number"] >= minimum:
        return None
    return refused["sentence"]


def _project_settings(store: ProjectStore, extra_params) -> None:
    """Store the connection's extra parameters as the project's settings (a 400 naming what is
    wrong when they do not work: Label Studio shows it on connect) and retrain the project when
    they change its scores and it has scores to change (or a training of it runs or waits)."""
    try:
        changed = project_settings.apply(_settings(), store, extra_params)
    except SettingsError as err:
        raise BadRequest(str(err)) from None
    runner = _jobs("runner")
    if not changed:
        return
    if store.current_version() is None and runner.state(store.project) not in {QUEUED, RUNNING}:
        return  # nothing scored yet: the first training uses them
    why = f"{', '.join(changed)} changed by {project_settings.SOURCE}"
    try:
        outcome = runner.submit(store.project)
    except JobQueueUnavailable as err:  # the settings are stored; only the retrain is missing
        logger.warning(
            "project %s: %s; no retraining queued (%s): start one from the project's Model page",
            store.project,
            why,
            err,
        )
        return
    logger.info("project %s: %s -> training %s", store.project, why, outcome)


@routes.post("/predict")
def predict():
    body = inputs.json_body()
    tasks = body.get("tasks")
    if not isinstance(tasks, list) or not all(isinstance(t, dict) for t in tasks):
        raise BadRequest("'tasks' must be a list of task objects")
    project = inputs.project(body.get("project"))
    if not body.get("label_config"):
        raise BadRequest("'label_config' is missing")
    settings = project_settings.effective(_settings(), _store(project))
    spec = parse_label_config(body["label_config"], settings.controls_to_weigh)
    start = time.perf_counter()
    results = predictions.predict(settings, project, spec, TaskRead.of(tasks, spec))
    logger.info(
        "project %s: /predict of %d tasks in %.2f s",
        project,
        len(tasks),
        time.perf_counter() - start,
    )
    return jsonify(results=results, model_version=predictions.model_version(_settings(), project))


@routes.post("/webhook")
def webhook():
    body = inputs.json_body()
    event = body.get("action")
    if not isinstance(event, str):
        raise BadRequest("'action' is missing")
    if event not in TRAIN_EVENTS:
        if event in IGNORED_EVENTS:
            return jsonify(status="ignored", action=event), 200
        raise BadRequest(f"unknown webhook action {inputs.shown(event)}")
    project = inputs.project(body.get("project"))
    auth.require_project(project)  # a token opens its own project only
    store = _store(project)
    membership.require_connected(_settings(), store)
    # The task waits for the rescore, which reads it within the project only (no request
    # thread waits on Label Studio for an event); one of another project is logged there.
    task = changed_task(body)
    reply = {"action": event}
    settings = project_settings.effective(_settings(), store)
    train, unwritten = wants_training(store, settings, event, task)
    if event in ANNOTATION_EVENTS and task is None:  # a deletion names no task: read again
        snapshot.forget(store)
    if unwritten:  # a full disk: counted in this process, written when space returns
        reply["unwritten"] = unwritten
    if task is not None and store.current_version() is not None:
        # The rescore reads the task from Label Studio, keeps the decision it shows
        # (backend.review.reviews.decide) and rescores it; else the training scores it.
        reply["rescore"] = _jobs("rescore_runner").submit(store.project)
    if not train:
        return jsonify(status="counted", **reply), 202 if unwritten else 200
    if event in TRAIN_NOW:  # the lead pressed Start Training: the reply is what they read
        return _start_training(store, settings, reply)
    outcome = _jobs("runner").submit(store.project)
    logger.info("project %s: %s -> training %s", store.project, event, outcome)
    return jsonify(status=outcome, **reply), 201


def _start_training(store: ProjectStore, settings: Settings, reply: dict):
    """*Start Training*: the project read from Label Studio first (its config, how many tasks
    are annotated), then a training started, or refused with a sentence. The sentence is the
    reason phrase (Label Studio 1.23 keeps only that of a refused reply, as the connection's
    error on its model card), the JSON body's ``message``, and ``start_reply`` in ``/status``:
    409 too few annotated tasks, 400 a config the backend cannot weigh, 502 the backend's Label
    Studio address or token not working (:class:`membership.LabelStudioRefused`), 201 started."""
    project = int(store.project)
    counts = membership.project_counts(_settings(), project)
    try:
        parse_label_config(counts["label_config"], settings.controls_to_weigh)
    except ConfigError as err:
        store.update_status(start_reply=f"refused: {err}")
        raise BadRequest(f"refused: {err}") from None
    annotated, minimum = counts["annotated"], settings.min_annotations
    # The tasks' counters behind ``annotated`` can lag an import (seen in the full suite: 0 of 24
    # while Label Studio held the 24 annotations); the annotations' own number does not. Refused
    # only when that is short too; otherwise the training counts for itself (and refuses).
    lagging = annotated < minimum <= counts["total_annotations_number"]
    if annotated < minimum and not lagging:
        sentence = (
            f"not started: {annotated} of {counts['task_number']} tasks are annotated; "
            f"training starts at {minimum}"
        )
        store.update_status(
            start_reply=sentence,
            start_refused={"sentence": sentence, "at": time.time(), "minimum": minimum},
        )
        logger.info("project %s: START_TRAINING -> %s", store.project, sentence)
        # as a training would before its refusal: the annotation events must reach us
        webhook_auth.authorize_webhooks(membership.request_api(settings), store.project, settings)
        return errors.refusal(409, sentence, status="not started", message=sentence, **reply)
    outcome = _jobs("runner").submit(store.project)
    held = (
        f"Label Studio holds {counts['total_annotations_number']} annotations"
        if lagging
        else f"{annotated} annotated tasks"
    )
    if outcome == "started":
        sentence = f"training started: {held}" if lagging else f"training started on {held}"
    else:
        sentence = f"training {outcome}: {held}"
    store.update_status(start_reply=sentence, start_refused=None)
    logger.info("project %s: START_TRAINING -> %s", store.project, sentence)
    response = jsonify(status=outcome, message=sentence, **reply)
    response.status = f"201 {errors.reason_phrase(sentence)}"
    return response


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
    store = _store(value)
    status, job = _reconciled(
        store,
        _jobs("runner"),
        lambda current: current["state"] == "running",
        ABANDONED,
        state="failed",
        finished_at=time.time(),
        last_error=ABANDONED,
        message="training failed; the previous version keeps serving",
    )
    status, selftest_job = _reconciled(
        store,
        _jobs("selftest_runner"),
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
    status.update(store.inbox().waiting())  # what waits: the inbox's, apart from the status
    status["job"] = job
    # a rescore (and the refresh it runs) in flight: the served scores are about to change
    status["rescore_job"] = _jobs("rescore_runner").state(store.project)
    status["is_training"] = job not in {IDLE, "unknown"}
    status["serving"] = predictions.serving(store, status["is_training"])
    status["controls"] = predictions.controls(store)  # which it weighs, which it leaves alone
    status["disk"] = disk_space(store)
    status["settings"] = project_settings.shown(_settings(), store)
    selftest = status.get("selftest") or {"state": "idle"}
    status["selftest"] = {**selftest, "job": selftest_job}
    return status


@routes.get("/is_training")
def is_training():
    status = _status(request.args.get("project"))
    return jsonify(
        is_training=status["is_training"],
        job=status["job"],
        model_version=status["current_version"],
    )


@routes.get("/status")
def status():
    return jsonify(_status(request.args.get("project")))


def _report() -> dict:
    return reports.project_report(
        _settings(),
        _store(request.args.get("project")).project,
        threshold=inputs.number("threshold", 0.5, float, 0.0, 1.0),
        top=inputs.number("top", 20, int, 1, 1000),
        expected_error_rate=inputs.number("expected_error_rate", None, float, 0.0, 1.0),
    )


@routes.get("/report")
def report_page():
    report = _report()
    page = reports.render(report, report["meta"]["project"])
    # A task text may hold lone surrogates (Label Studio stores what it is sent); UTF-8
    # cannot encode them, so they are shown escaped rather than failing the whole page.
    body = page.encode("utf-8", errors="backslashreplace")
    return Response(body, mimetype="text/html", content_type="text/html; charset=utf-8")


@routes.get("/report.json")
def report_json():
    return jsonify(_report())


@routes.post("/selftest")
def selftest():
    body = inputs.request_json()
    body = body if isinstance(body, dict) else {}
    store = _store(request.args.get("project", body.get("project")))
    membership.require_connected(_settings(), store)
    raw = request.args.get("noise", body.get("noise", ",".join(DEFAULT_NOISES)))
    noises = raw.split(",") if isinstance(raw, str) else raw
    # Each kind once, in the order asked: one training per kind, however often it is named.
    if (
        not isinstance(noises, list)
        or not noises
        or not all(isinstance(n, str) and n in NOISES for n in noises)
    ):
        raise BadRequest(f"noise must be among {', '.join(NOISES)}, got {inputs.shown(raw)}")
    noises = list(dict.fromkeys(noises))
    # The job reads what was asked last (submissions of one project collapse into one job).
    store.update_status(selftest_request={"noises": noises, "at": time.time()})
    outcome = _jobs("selftest_runner").submit(store.project)
    logger.info("project %s: self-test (%s noise) %s", store.project, ",".join(noises), outcome)
    return jsonify(status=outcome, project=store.project, noise=noises), 202


@routes.route("/versions", methods=["GET", "POST"])
def versions():
    body = inputs.request_json() if request.method == "POST" else None
    raw = (body or {}).get("project") if isinstance(body, dict) else request.args.get("project")
    if raw is None:
        return jsonify(versions=[])
    store = _store(raw)
    return jsonify(
        versions=store.all_versions(), current=predictions.model_version(_settings(), store.project)
    )

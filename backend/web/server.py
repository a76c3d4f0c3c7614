"""The backend's Flask app: :func:`create_app` wires the settings, the job runners, the
auth (:mod:`backend.web.auth`), the error map (:mod:`backend.web.errors`) and the endpoints
(:mod:`backend.web.routes`), and cleans what killed processes left in the model directory.

label-studio-ml's interface (``LabelStudioMLBase``, ``model.py``) is served by our own small
Flask app instead of label-studio-ml 1.0.9's: its job manager runs training inside the webhook
request without Redis (Label Studio waits 1 s), rebuilds a model version per job, lacks
START_TRAINING, and shares finished jobs between backends on one queue. Endpoints and payloads
are the same; the work is :mod:`backend.jobs.training`'s and the others'.
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path

from flask import Flask

from backend.config import logs
from backend.config.settings import Settings
from backend.jobs import refresh, rescore, selftest, training
from backend.labelstudio import membership
from backend.queue.runners import RQRunner, ThreadRunner
from backend.store.store import ProjectStore
from backend.web import auth, errors
from backend.web.routes import routes

logger = logging.getLogger(__name__)


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


def create_app(
    settings: Settings | None = None, runner=None, selftest_runner=None, rescore_runner=None
) -> Flask:
    """Build the app, serving and training with ``settings`` (default: from the environment).

    ``runner`` (trainings), ``selftest_runner`` (self-tests) and ``rescore_runner`` (changed
    tasks scored with the current version, which then refresh it: the rescore job is given the
    refresh job, :func:`backend.jobs.refresh.refresh_project`) default to rq when
    ``settings.redis_url`` is set, else in-process threads; their jobs run with ``settings``
    (on rq: its training part, see :mod:`backend.config.settings`). Label Studio is asked once
    whether it takes the backend's token (:func:`backend.labelstudio.membership.startup_check`:
    one line in the log).
    """
    settings = settings or Settings.from_env()
    if runner is None:
        runner = _runner(settings, "training", training.run_queued_training, training.train_project)
    if selftest_runner is None:
        selftest_runner = _runner(
            settings, "selftest", selftest.run_queued_selftest, selftest.selftest_project
        )
    if rescore_runner is None:  # a rescore refreshes through the refresh job it is given
        rescore_runner = _runner(
            settings,
            "rescore",
            partial(rescore.run_queued_rescore, refresh=refresh.refresh_project),
            partial(rescore.rescore_project, refresh=refresh.refresh_project),
        )
    app = Flask("subregweigh")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_request_mb * 1024 * 1024
    app.extensions["subregweigh"] = {
        "settings": settings,
        "runner": runner,
        "selftest_runner": selftest_runner,
        "rescore_runner": rescore_runner,
    }
    logs.install(settings)
    auth.install(app, settings)
    errors.install(app)
    app.register_blueprint(routes)
    logger.info(
        "subregweigh backend: %s jobs, settings %s",
        "rq" if isinstance(runner, RQRunner) else "in-process",
        settings.public(),
    )
    membership.startup_check(settings)  # one line: the token works, or what to set
    _clean_debris(settings.model_dir)
    return app

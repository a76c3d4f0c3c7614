"""The self-test job: how far a project can trust its flags (:mod:`subregweigh.selftest` on a
copy of its annotations with injected errors)."""

from __future__ import annotations

import logging
import time

from backend.config import project_settings
from backend.config.redact import redact
from backend.config.settings import Settings, secrets_of
from backend.jobs.annotations import read_annotations
from backend.queue import budget
from backend.serving.weighers import SEED, engine, release_memory
from backend.store.store import ProjectStore

logger = logging.getLogger(__name__)


def selftest_project(project: str, settings: Settings) -> dict:
    """How far ``project`` can trust its flags: inject known errors into a copy of its
    annotations, weigh the copy with ``settings``, and keep the outcome in the project's status
    (``selftest``; :func:`subregweigh.selftest.self_test`), with the noise kinds last asked for
    (``selftest_request``, written by ``POST /selftest``; default the annotators' mix). Reads
    Label Studio, writes nothing there. Runs in a background job; on failure the error is kept
    and the exception propagates."""
    store = ProjectStore(settings.model_dir, project)
    waiting = {"state": "running", "started_at": time.time(), "message": budget.WAITING}
    with budget.training_slot(lambda: store.update_status(selftest=waiting)):
        try:
            return _selftest_project(project, settings)
        finally:
            release_memory()  # several scouts trained


def _selftest_project(project: str, settings: Settings) -> dict:
    store = ProjectStore(settings.model_dir, project)
    store.update_status(
        selftest={"state": "running", "started_at": time.time(), "message": "fetching annotations"}
    )
    try:
        with budget.within(settings.training_seconds, settings.training_memory_mb, "the self-test"):
            outcome = _selftest(project, store, project_settings.effective(settings, store))
    except Exception as err:
        message = redact(f"{type(err).__name__}: {err}", secrets_of(settings))
        store.update_status(
            selftest=lambda old: {
                **(old or {}),
                "state": "failed",
                "finished_at": time.time(),
                "last_error": message,
                "message": "self-test failed",
            }
        )
        logger.error("project %s: self-test failed: %s", project, message)
        raise
    store.update_status(
        selftest={"state": "idle", "finished_at": time.time(), "last_error": None, **outcome}
    )
    return outcome


def run_queued_selftest(project: str, training: dict) -> dict:
    """The rq job of a self-test, as :func:`backend.jobs.training.run_queued_training` is of a
    training."""
    return selftest_project(project, Settings.from_env(**training))


def _selftest(project: str, store: ProjectStore, settings: Settings) -> dict:
    read = read_annotations(project, settings, "the self-test")
    if read.refusal:
        raise ValueError(read.refusal)
    request = store.inbox().selftest_request or {}
    if not read.spec.several:
        outcome = _test_control(store, settings, read.spec, read.items, request)
    else:  # each control's annotations weighed as its own training weighs them (issue 62)
        each = [
            (
                control,
                _test_control(store, settings, control, r.items, request, str(control.control)),
            )
            for control, r in zip(read.spec.each(), read.reads, strict=True)
        ]
        tested = next(o for _, o in each if "results" in o)  # the read refused none annotated
        outcome = {
            **tested,
            "message": "; ".join(f"{c.control}: {o['message']}" for c, o in each),
            "per_control": [{"control": c.from_name, "type": c.control.tag, **o} for c, o in each],
        }
    logger.info("project %s: self-test: %s", project, outcome["message"])
    return outcome


def _test_control(
    store: ProjectStore, settings: Settings, spec, items, request, control: str = ""
) -> dict:
    """The self-test of one labeling control ``spec``, on its annotations (``items``, the tasks
    as read for it); ``control``: how the progress message names it (a project of several)."""
    from subregweigh.selftest import DEFAULT_NOISES, describe, self_test

    examples = [ex for item in items for ex in item.examples]
    if not examples:  # as its training does: a control nobody annotated is not weighed
        return {"n": 0, "message": "not tested: no annotations"}
    of = f" of {control}" if control else ""
    store.update_status(
        selftest=lambda old: {
            **(old or {}),
            "message": f"weighing copies of {len(examples)} annotations{of} with injected errors",
        }
    )
    outcome = self_test(
        examples,
        spec.task,
        lambda: engine(settings, spec),
        noises=request.get("noises") or DEFAULT_NOISES,
        random_state=SEED,
    )
    outcome["message"] = "; ".join(f"{r['noise']} noise: {describe(r)}" for r in outcome["results"])
    if "real_errors" in outcome:
        outcome["message"] += f"; {outcome['real_errors']['message']}"
    return outcome

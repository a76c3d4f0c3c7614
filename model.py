"""The Label Studio ML backend: SubRegWeigh reliability as prediction scores.

``SubRegWeighModel`` keeps label-studio-ml's ``LabelStudioMLBase`` interface:

* ``fit()`` trains a scout on the project's current annotations (fetched through the Label
  Studio API), weighs every annotated task and pre-annotates the others, publishes a new model
  version, writes its predictions to Label Studio and makes it the project's model version, so
  sorting the Data Manager by prediction score puts doubtful annotations first.
* ``predict(tasks)`` serves, per task, the scout's majority prediction with the reliability c/K
  of the task's annotation as score (self-consistency for unannotated tasks), from what the last
  training stored; only tasks missing there (or changed since) are computed.

It is a thin adapter: the engine (``subregweigh``) knows nothing of Label Studio, the
conversions live in ``backend.tasks``, state on disk in ``backend.store``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict

from label_studio_ml.model import LabelStudioMLBase

from backend.labelstudio import LabelStudioAPI
from backend.settings import Settings
from backend.store import CorruptVersion, ProjectStore, atomic_write_json, new_version_name
from backend.tasks import ConfigError, fingerprint, parse_label_config, score_tasks, task_examples

logger = logging.getLogger(__name__)

UNTRAINED = "subregweigh-untrained"
TRAIN_NOW = {"START_TRAINING"}
ANNOTATION_EVENTS = {
    "ANNOTATION_CREATED",
    "ANNOTATION_UPDATED",
    "ANNOTATIONS_DELETED",
    "ANNOTATION_DELETED",
}
IGNORED_EVENTS = {
    "TASKS_CREATED",
    "TASKS_DELETED",
    "PROJECT_UPDATED",
    "PROJECT_CREATED",
    "PROJECT_DELETED",
}

_weighers: OrderedDict[tuple[str, str], object] = OrderedDict()  # (project dir, version)
_weighers_lock = threading.Lock()


def _weigher(settings: Settings, store: ProjectStore, version: str):
    """The fitted SubRegWeigh of ``version``, loaded at most once per process.

    Raises :class:`CorruptVersion` (after marking the version BROKEN) when its files do not load.
    """
    from subregweigh.scout import Scout

    key = (str(store.root.resolve()), version)
    with _weighers_lock:  # one load at a time: concurrent requests wait for it, not repeat it
        if key in _weighers:
            _weighers.move_to_end(key)
            return _weighers[key]
        start = time.perf_counter()
        store.verify(version)
        srw = _engine(settings)
        try:
            srw.scout_ = Scout.load(store.scout_dir(version), progress=False)
        except MemoryError:
            raise
        except Exception as err:
            raise CorruptVersion(
                version, f"the scout does not load ({type(err).__name__}: {err})"
            ) from err
        _weighers[key] = srw
        while len(_weighers) > max(1, settings.cached_models):
            _weighers.popitem(last=False)
        logger.info(
            "project %s: loaded the scout of version %s in %.1f s (pid %d; %d cached)",
            store.project,
            version,
            time.perf_counter() - start,
            os.getpid(),
            len(_weighers),
        )
        return srw


def _engine(settings: Settings, task: str = "ner", multi_label: bool = False):
    from subregweigh.scout import Scout
    from subregweigh.weigh import SubRegWeigh

    scout = Scout(
        model=settings.scout_model or None,
        task=task,
        multi_label=multi_label,
        freeze_encoder=settings.freeze_encoder and task == "classification",
        epochs=settings.epochs or None,
        batch_size=settings.batch_size,
        learning_rate=settings.learning_rate or None,
        max_length=settings.max_length or None,
        random_state=settings.seed,
        progress=False,
    )
    return SubRegWeigh(
        scout,
        p=settings.p,
        n_samples=settings.n_samples,
        k=settings.k,
        method=settings.method,
        w_min=settings.w_min,
        random_state=settings.seed,
        progress=False,
    )


def project_id(value) -> str:
    """Label Studio sends ``"12.1700000000"`` (id.created) or ``{"id": 12}``; we key on 12."""
    if isinstance(value, dict):
        value = value.get("id")
    text = str(value if value is not None else "").split(".", 1)[0]
    # It names a directory: ASCII digits only ("١".isdigit() is True), and short.
    if not (text.isascii() and text.isdigit() and len(text) <= 20):
        raise ValueError(f"no valid project id in {str(value)[:40]!r}")
    return text


class SubRegWeighModel(LabelStudioMLBase):
    """One instance per request; construction is cheap (Label Studio allows /setup 3 s)."""

    # label-studio-ml 1.0.9 lacks START_TRAINING and misspells ANNOTATIONS_DELETED.
    TRAIN_EVENTS = tuple(sorted(TRAIN_NOW | ANNOTATION_EVENTS))

    def __init__(self, project=None, label_config=None, settings: Settings | None = None, **kwargs):
        # The base class would parse the config with label-studio-tools; we parse it ourselves
        # with label-studio-sdk, lazily, so an unsupported config fails with a clear message.
        super().__init__(label_config=None, **kwargs)
        self.label_config = label_config
        self.settings = settings or Settings.from_env()
        self.project = project_id(project) if project is not None else None
        self.store = ProjectStore(self.settings.model_dir, self.project) if self.project else None

    @property
    def model_version(self) -> str:
        return (self.store.current_version() if self.store else None) or UNTRAINED

    def spec(self):
        return parse_label_config(self.label_config)

    # -- events -------------------------------------------------------------------------------
    def wants_training(self, event: str) -> bool:
        """Count the event; True when it should start a training (now or after enough changes)."""
        if event in TRAIN_NOW:
            return True
        if event not in ANNOTATION_EVENTS:
            return False
        status = self.store.update_status(events_since_training=lambda n: (n or 0) + 1)
        due = status["events_since_training"] >= self.settings.retrain_after
        logger.info(
            "project %s: %s (%d of %d changes before retraining)",
            self.project,
            event,
            status["events_since_training"],
            self.settings.retrain_after,
        )
        return due

    # -- predict ------------------------------------------------------------------------------
    def predict(self, tasks, **kwargs) -> list[dict]:
        spec = self.spec()
        broken: set[str] = set()
        while True:  # a version found corrupt is marked BROKEN; then the next newest serves
            try:
                return self._predict(tasks, spec)
            except CorruptVersion as err:
                if err.version in broken:  # the marker did not take: do not loop
                    raise
                broken.add(err.version)
                self.store.mark_broken(err.version, str(err))

    def _predict(self, tasks, spec) -> list[dict]:
        version = self.store.current_version() if self.store else None
        if version is None:
            logger.info(
                "project %s: no trained scout yet; returning empty predictions for %d tasks "
                "(train from the project's Model settings, or annotate %d tasks)",
                self.project,
                len(tasks),
                self.settings.min_annotations,
            )
            return [{"result": [], "model_version": UNTRAINED} for _ in tasks]
        stored = self.store.scores(version)
        warnings: list[str] = []
        items = [task_examples(task, spec, warnings) for task in tasks]
        stale = [
            item
            for item in items
            if item is not None
            and stored.get(str(item.task_id), {}).get("fingerprint") != fingerprint(item)
        ]
        if stale:
            start = time.perf_counter()
            fresh = score_tasks(_weigher(self.settings, self.store, version), spec, stale)
            stored.update(fresh)
            self._remember(version, fresh)
            logger.info(
                "project %s: computed %d of %d tasks in %.1f s (the rest served from storage)",
                self.project,
                len(fresh),
                len(tasks),
                time.perf_counter() - start,
            )
        for warning in warnings:
            logger.warning("project %s: %s", self.project, warning)
        out = []
        for item in items:
            entry = stored.get(str(item.task_id)) if item is not None else None
            if entry is None:
                out.append({"result": [], "model_version": version})
            else:
                out.append(
                    {"result": entry["result"], "score": entry["score"], "model_version": version}
                )
        return out

    def _remember(self, version: str, fresh: dict) -> None:
        """Add freshly computed scores to the version's store (other workers see them too)."""
        with self.store.locked():
            scores = self.store.scores(version)
            scores.update(fresh)
            atomic_write_json(self.store.versions / version / "scores.json", scores)

    # -- fit ----------------------------------------------------------------------------------
    def fit(self, tasks=(), workdir=None, **kwargs) -> dict:
        """Train on the project's current annotations and publish a new version.

        Runs in a background worker, never in a request. On failure the previous version keeps
        serving and the error is kept in the project's status.
        """
        store, settings = self.store, self.settings
        started = time.time()
        store.update_status(
            state="running",
            started_at=started,
            message="fetching annotations",
            events_since_training=0,
        )
        try:
            result = self._train(store, settings)
        except Exception as err:
            message = f"{type(err).__name__}: {err}"
            store.update_status(
                state="failed",
                last_error=message,
                finished_at=time.time(),
                message="training failed; the previous version keeps serving",
            )
            logger.error("project %s: training failed: %s", self.project, message)
            raise
        store.update_status(state="idle", finished_at=time.time(), last_error=None, **result)
        return result

    def _train(self, store: ProjectStore, settings: Settings) -> dict:
        api = LabelStudioAPI(settings.label_studio_url, settings.label_studio_api_key)
        project = int(self.project)
        self.label_config = api.label_config(project)
        spec = self.spec()
        tasks = api.tasks(project)
        warnings: list[str] = []
        items = [
            item for task in tasks if (item := task_examples(task, spec, warnings)) is not None
        ]
        for warning in warnings:
            logger.warning("project %s: %s", self.project, warning)
        annotated = [ex for item in items if item.annotated for ex in item.examples]
        n_annotated = sum(item.annotated for item in items)
        if n_annotated < settings.min_annotations:
            message = (
                f"only {n_annotated} annotated tasks; training starts at "
                f"{settings.min_annotations} (SRW_MIN_ANNOTATIONS)"
            )
            logger.info("project %s: %s", self.project, message)
            return {"message": message, "trained": False}

        logger.info(
            "project %s: training a scout on %d annotations of %d tasks",
            self.project,
            len(annotated),
            n_annotated,
        )
        store.update_status(message=f"training on {len(annotated)} annotations")
        srw = _engine(settings, spec.task, spec.multi_label).fit(annotated)
        store.update_status(message=f"scoring {len(items)} tasks")
        scores = score_tasks(srw, spec, items)
        version = new_version_name()
        staging = store.staging_dir()
        srw.scout_.save(staging / "scout")
        atomic_write_json(staging / "scores.json", scores)
        store.publish(staging, version)
        logger.info(
            "project %s: published version %s (%d tasks scored)", self.project, version, len(scores)
        )

        store.update_status(message="writing predictions to Label Studio")
        api.write_predictions(
            project,
            [
                {
                    "task": int(task_id),
                    "result": entry["result"],
                    "score": entry["score"],
                    "model_version": version,
                }
                for task_id, entry in scores.items()
            ],
        )
        api.set_model_version(project, version)
        doubtful = sum(1 for e in scores.values() if e["reliability"] and e["score"] < 0.5)
        message = (
            f"version {version}: {n_annotated} annotated tasks weighed, {doubtful} with "
            f"reliability < 0.5; {len(scores) - n_annotated} pre-annotated"
        )
        logger.info("project %s: %s", self.project, message)
        return {
            "message": message,
            "trained": True,
            "last_version": version,
            "annotated_tasks": n_annotated,
            "doubtful_tasks": doubtful,
        }


def train_project(project: str) -> dict:
    """Job entry point (thread or rq worker): train ``project``, settings from the environment."""
    return SubRegWeighModel(project=project).fit()


__all__ = ["ConfigError", "SubRegWeighModel", "train_project"]

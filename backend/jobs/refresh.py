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

A version of several labeling controls (issue 62; :mod:`backend.serving.controls`) is refreshed
per NER control, each from what its ``controls/<i>`` folder keeps and the tasks as that control
reads them: its CRF trained again (at most :data:`~subregweigh.crf.CRF_FIRST_EXAMPLES` of its
annotations), mixed with its scouts' distributions, its entries scored again and merged with the
other controls' as stored (:func:`~backend.serving.controls.merge_entries`). A classification
control's parts are linked and its entries kept: its next training weighs its changes.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from backend.config.settings import Settings
from backend.jobs.phases import PhaseClock
from backend.labelstudio.client import LabelStudioAPI, annotator_names
from backend.labelstudio.tasks import (
    TaskRead,
    annotated_examples,
    fingerprint,
    name_annotators,
    score_tasks,
)
from backend.review import reviews
from backend.serving.controls import control_entry, merge_entries
from backend.serving.publish import Staged, serve_version, with_scales
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

# Files of a version that a refresh writes anew (or drops: COMPLETE), besides each refitted
# CRF; the rest (the scouts, their distributions) it links.
_REWRITTEN = {"scores.json", "meta.json", "COMPLETE"}


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
    scored again from the annotations it stored.

    A version of several labeling controls (issue 62) is refreshed per NER control: each
    control's CRF trained again on that control's annotations, mixed with that control's kept
    distributions, its entries merged with the other controls' as stored
    (:func:`_refresh_controls`)."""
    clock = PhaseClock()
    base = store.current_version()
    reason = _not_refreshable(store, base, spec)
    if reason:
        return {"refreshed": False, "reason": reason}
    if store.meta(base).get("weighers"):
        return _refresh_controls(api, store, settings, spec, base, meanwhile, clock)
    srw = weigher(settings, store, base)
    standing, read_project = _standing(api, store, spec)
    items = standing[0]
    annotated = annotated_examples(items)
    if len(annotated) > _bound():
        return {"refreshed": False, "reason": f"more than {_bound()} annotations"}
    clock.lap("fetch")
    beside: dict = {}
    reference = reference_examples(settings, spec)
    refit = _refit(store, srw, spec, annotated, reference, meanwhile, beside)
    clock.lap("crf")
    stored = store.scores(base)
    fresh = _scored_again(refit.srw, spec, items, stored, load_scout_proba(store.versions / base))
    scores = {**stored, **fresh}
    clock.lap("score")
    version = _publish(api, store, base, {"": refit.srw}, scores, len(annotated), len(fresh))
    if version is None:
        return {"refreshed": False, "reason": "a newer version was published meanwhile"}
    remember(store, version, refit.srw)
    clock.lap("publish")
    return _refreshed(store, base, version, fresh, [refit], read_project, beside, clock)


@dataclass(frozen=True)
class _Refit:
    """One control's CRF trained again (:func:`_refit`).

    Attributes
    ----------
    srw : SubRegWeigh
        The version's weigher with the refitted CRF, its scouts shared.
    annotations : int
        The annotations it trained on (the reference corpus's not counted).
    reviewed : int
        How many of them a reviewer decided (each counted ``REVIEWED_WEIGHT`` times).
    """

    srw: object
    annotations: int
    reviewed: int


def _bound() -> int:
    """The most annotations a control's refresh trains its CRF on
    (:data:`~subregweigh.crf.CRF_FIRST_EXAMPLES`: where the CRF trains in seconds)."""
    from subregweigh.crf import CRF_FIRST_EXAMPLES

    return CRF_FIRST_EXAMPLES


def _standing(api: LabelStudioAPI, store: ProjectStore, spec: LabelingSpec) -> tuple[list, bool]:
    """The annotated tasks as they now stand, one list per control of ``spec.each()`` (a
    classification control's: ``[]``, a refresh keeps its entries), and whether the project was
    read from Label Studio for them: the kept ones (:mod:`backend.store.snapshot`, each NER
    control's of several), else the project read once and parsed once per NER control, each
    reading kept."""
    controls = spec.each()
    names = [c.from_name if spec.several else None for c in controls]
    kept = [snapshot.load(store, n) if c.task == "ner" else [] for c, n in zip(controls, names)]
    if all(items is not None for items in kept):
        return kept, False
    # none kept (a deletion since, or kept by an older backend): read
    read_at = time.time()
    project = store.project
    tasks = name_annotators(api.tasks(int(project)), annotator_names(api, project))
    standing = []
    for control, name in zip(controls, names, strict=True):
        items = []
        if control.task == "ner":
            items = [i for i in TaskRead.of(tasks, control).items if i.examples]
            snapshot.keep_project(store, items, read_at, control=name)
        standing.append(items)
    return standing, True


def _refit(store, srw, control, annotated, reference, meanwhile, beside) -> _Refit:
    """``srw`` (a version's, or one control's of it) with its CRF trained again
    (:meth:`SubRegWeigh.refit_crf`) on ``annotated`` (``control``'s annotations as they now
    stand; those a reviewer decided counted :data:`~subregweigh.review.REVIEWED_WEIGHT` times)
    and the ``reference`` examples, ``meanwhile`` run beside CRFsuite (its seconds in
    ``beside``)."""
    decided = reviews.decided(store, annotated, control.task)
    verified = [ex for ex in annotated if ex.id in decided] * (REVIEWED_WEIGHT - 1)
    refitted = srw.refit_crf(
        [*annotated, *verified, *reference],
        meanwhile=None if meanwhile is None else _timed(meanwhile, beside),
    )
    return _Refit(refitted, len(annotated), len(decided))


def _scored_again(refitted, control, items, stored: dict, kept: dict) -> dict:
    """``control``'s entries of ``items`` that can be scored again from the ``kept``
    distributions (:func:`_covered` against ``stored``, its entries as the version holds them)
    scored with the ``refitted`` weigher (one quick pass), each with what the version's K
    candidates and the reviewers' baselines gave the same annotations."""
    covered = [item for item in items if _covered(item, stored, kept)]
    examples = annotated_examples(covered)
    if not examples:
        return {}
    ordinary = refitted.weigh_deterministic(
        examples, scout_proba=[kept[ex.id][1] for ex in examples]
    )
    fresh = score_tasks(refitted, control, covered, quick=True, ordinary=ordinary)
    reviews.stamp_saved(fresh, {}, before=stored)  # the baselines of the decisions stay
    return {task: _with_k_columns(e, stored[task]) for task, e in fresh.items()}


def _refresh_controls(api, store, settings, spec, base, meanwhile, clock) -> dict:
    """:func:`refresh_project` of a version of several labeling controls: each NER control's
    CRF trained again on that control's annotations as they now stand and mixed with the
    distributions its folder keeps; the classification controls' parts linked and their
    entries kept; every task a NER control scores again merged
    (:func:`backend.serving.controls.merge_entries`) with its other controls' stored entries;
    published as a new version of the same control folders, the refitted CRFs in theirs."""
    parts = _ner_parts(store, base)
    standing, read_project = _standing(api, store, spec)
    by_name = dict(zip((c.from_name for c in spec.each()), standing, strict=True))
    for part in parts:
        if len(annotated_examples(by_name[part["control"]])) > _bound():
            return {
                "refreshed": False,
                "reason": f"{part['control']!r}: more than {_bound()} annotations",
            }
    clock.lap("fetch")
    controls = {c.from_name: c for c in spec.each()}
    refits, beside = {}, {}
    for part in parts:
        name, folder = part["control"], part["folder"]
        annotated = annotated_examples(by_name[name])
        srw = weigher(settings, store, base, folder)
        refits[folder] = _refit(store, srw, controls[name], annotated, [], meanwhile, beside)
        meanwhile = None  # run beside the first CRF
    clock.lap("crf")
    stored = store.scores(base)  # with the changed tasks' rescores, run beside the CRF
    fresh = {}
    for part in parts:
        name, folder = part["control"], part["folder"]
        own = {t: e for t, e in ((t, control_entry(m, name)) for t, m in stored.items()) if e}
        kept = load_scout_proba(store.versions / base / folder)
        fresh[name] = _scored_again(refits[folder].srw, controls[name], by_name[name], own, kept)
    merged = _merged(spec, stored, fresh)
    clock.lap("score")
    n_annotations = sum(r.annotations for r in refits.values())
    crfs = {folder: r.srw for folder, r in refits.items()}
    version = _publish(api, store, base, crfs, {**stored, **merged}, n_annotations, len(merged))
    if version is None:
        return {"refreshed": False, "reason": "a newer version was published meanwhile"}
    for folder, srw in crfs.items():
        remember(store, version, srw, folder)
    clock.lap("publish")
    refitted = list(refits.values())
    return _refreshed(store, base, version, merged, refitted, read_project, beside, clock)


def _ner_parts(store: ProjectStore, base: str) -> list[dict]:
    """The NER controls' parts of ``base``, a version of several controls (its meta's
    ``weighers``): those a refresh trains again."""
    return [p for p in store.meta(base)["weighers"] if p.get("task") == "ner"]


def _merged(spec: LabelingSpec, stored: dict, fresh: Mapping[str, dict]) -> dict:
    """The merged entries (:func:`backend.serving.controls.merge_entries`) of every task a
    control scored again (``fresh``: control name -> task id -> its new entry), each other
    control's entry as ``stored`` holds it (:func:`backend.serving.controls.control_entry`)."""
    tasks = list(dict.fromkeys(task for entries in fresh.values() for task in entries))
    per_control = []
    for control in spec.each():
        name = control.from_name
        own = {}
        for task in tasks:
            entry = fresh.get(name, {}).get(task) or control_entry(stored[task], name)
            if entry is not None:
                own[task] = entry
        per_control.append(own)
    return merge_entries(spec, per_control)


def _refreshed(store, base, version, fresh, refits, read_project, beside, clock) -> dict:
    """What a refresh that served ``version`` in place of ``base`` returns (the rescore records
    it as ``last_refresh``), logged; the status says Label Studio has it."""
    seconds = clock.total()
    annotations = sum(r.annotations for r in refits)
    reviewed = sum(r.reviewed for r in refits)
    last = {
        "version": version,
        "of": base,
        "tasks": len(fresh),
        "annotations": annotations,
        "reviewed": reviewed,
        "read_project": read_project,
        "seconds": seconds,
        "phase_seconds": dict(clock.seconds),
        "rescore_beside_crf_seconds": beside.get("seconds"),
        "finished_at": time.time(),
    }
    # the rescore that ran it records last_refresh beside its last_rescore, in one write
    store.update_status(scores_in_label_studio=version)
    logger.info(
        "project %s: refreshed version %s into %s: %d CRF%s retrained on %d annotations (%d "
        "reviewed, counted %d times; %s), %d tasks scored again, in Label Studio after %.1f s "
        "(%s)",
        store.project,
        base,
        version,
        len(refits),
        "" if len(refits) == 1 else "s",
        annotations,
        reviewed,
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
    parts = store.meta(base).get("weighers")
    if spec.several or parts:
        return _controls_not_refreshable(store, base, spec, parts or [])
    if spec.task != "ner":
        return "classification: no CRF"
    if store.meta(base).get("early"):
        return "an early version serves: its training is not done"
    return _part_not_refreshable(store.versions / base)


def _part_not_refreshable(folder: Path) -> str | None:
    """Why the parts in ``folder`` (a version's, or one NER control's of several) cannot be
    refreshed, or None."""
    from subregweigh.crf import crf_path

    if not (folder / SCOUT_PROBA).is_file():
        return "the version kept no scout distributions (made before refreshes, or without a CRF)"
    if not crf_path(folder).is_file():
        return "the version has no CRF (SRW_CRF off)"
    return None


def _controls_not_refreshable(
    store: ProjectStore, base: str, spec: LabelingSpec, parts: list[dict]
) -> str | None:
    """:func:`_not_refreshable` of a project weighing several labeling controls: its version
    must weigh them (the config may have changed since), one of them NER, and each NER
    control's parts be refreshable."""
    if not parts:
        return "several labeling controls, a version of one: the next training weighs each"
    weighed = {c.from_name: c.task for c in spec.each()}
    if any(weighed.get(p.get("control")) != p.get("task") for p in parts):
        return "the labeling controls changed since the version: the next training weighs them"
    ner = [p for p in parts if p.get("task") == "ner"]
    if not ner:
        return "classification: no CRF"
    for part in ner:
        why = _part_not_refreshable(store.versions / base / part["folder"])
        if why:
            return f"{part['control']!r}: {why}"
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
    crfs: Mapping[str, object],
    scores: dict,
    n_annotations: int,
    n_tasks: int,
) -> str | None:
    """A new version of ``base``'s scouts (hard links; copies where the filesystem has none),
    the refitted CRFs (``crfs``: the folder within the version, ``""`` for a version of one
    control, -> the refitted weigher) and ``scores``, staged, then served by the one publish
    path (:func:`backend.serving.publish.serve_version`, replacing ``base``): its predictions
    are in Label Studio before it becomes the version serving (whoever reads the serving
    version finds them there), then it is the project's model version. Its name, or None
    (nothing published, its predictions deleted) when another version has replaced ``base``
    meanwhile."""
    from subregweigh.crf import crf_path

    version = new_version_name()
    staging = store.staging_dir()
    source = store.versions / base
    rewritten = {Path(name) for name in _REWRITTEN} | {crf_path(folder) for folder in crfs}
    try:
        for path in sorted(source.rglob("*")):
            relative = path.relative_to(source)
            if path.is_dir() or relative in rewritten:
                continue
            _link(path, staging / relative)  # the same scouts and distributions, the same texts
        for folder, srw in crfs.items():
            srw.crf_.save(crf_path(staging / folder))
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
        meta, scales = with_scales(meta, scores)  # a version of its own, on its own scale
        atomic_write_json(staging / "meta.json", meta)
    except BaseException:
        store.discard(staging)
        raise
    if not serve_version(api, Staged(store, staging, version, scores, scales), replacing=base):
        return None
    return version

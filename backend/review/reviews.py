"""Reviewers' decisions on scored tasks, kept: ``MODEL_DIR/<project>/reviews.json``.

What a save decides is :mod:`backend.review.decisions`' (the review control where the project's
config has it, else the save itself); how decisions change what is served is
:mod:`backend.review.served`'s. This module reads them from Label Studio and keeps them.

A webhook only says *which* task changed. Its body is never trusted for a decision: the rescore
that follows reads the task from Label Studio, within the project (:func:`decide`), and judges
each annotation the serving version scored against its baseline, the content and ``updated_at``
a training or a rescore last read from Label Studio (kept in the scored record as ``saved``,
:func:`stamp_saved`). Only a save Label Studio names a user for (``updated_by``), newer than
that baseline, decides (:func:`backend.review.decisions.vouched_save`): an imported annotation, a
replayed event and a record scored from a caller's tasks (``/predict``) decide nothing.

``reviews.json`` is written atomically under the project's lock, so two reviewers deciding at
once lose nothing, and lives outside the versions: decisions survive restarts and retrains. It
is bounded: one current decision per annotation (keyed ``<task>/<annotation>``; of a project
weighing several labeling controls, one per annotation and control, keyed
``<task>/<annotation>/<control>`` and naming its ``control``; each with the hash of
the content it decided, :func:`content_hash`, so a confirmation never applies once the labels
change), each with its reviewer, the time Label Studio saved it, and each reviewer's latest
decision on that annotation (``reviewers``: agreement in the report); and the last
:data:`HISTORY` decisions.

:func:`review_inputs` turns the decisions into the report's input
(:func:`subregweigh.report.review_summary`, :func:`subregweigh.report.reviewer_summary`).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from backend.labelstudio.tasks import TaskRead
from backend.review import copies, decisions, served
from backend.review.decisions import (
    CONFIRMED,
    COUNTED,
    FIXED,
    SELF_REVIEWED,
    WITHDRAWN,
    annotation_key,
    content_hash,
)
from backend.store.scores_view import ScoresView
from backend.store.store import ProjectStore
from subregweigh.example import Example
from subregweigh.io.atomic import atomic_write_json
from subregweigh.io.dataset import example_record
from subregweigh.report import NONE_LABEL
from subregweigh.served import served_score
from subregweigh.tags import entity_spans

logger = logging.getLogger(__name__)

__all__ = [
    "CONFIRMED",
    "FIXED",
    "SELF_REVIEWED",
    "Judged",
    "content_hash",
    "decide",
    "judge",
    "load",
    "review_inputs",
]

HISTORY = 1_000  # decisions kept in reviews.json's history, the newest


def record_labels(record: Mapping) -> list[str]:
    """The labels an annotation record holds: NER its entity types (``"O"`` when none),
    classification its classes."""
    if "tags" in record:
        return sorted({etype for etype, _, _ in entity_spans(record["tags"])}) or [
            NONE_LABEL["ner"]
        ]
    if "label" in record:
        return [record["label"]]
    return sorted(record.get("labels") or []) or [NONE_LABEL["classification"]]


# a key of the earlier layout: "<decision>:task/annotation/hash" (keys now start with the task)
_EARLIER = re.compile(r"[a-z]+:")


def _path(store: ProjectStore):
    return store.root / "reviews.json"


def load(store: ProjectStore) -> dict:
    """``reviews.json``: ``{"decisions": {"task/annotation": its current decision},
    "history": [[time, task, annotation, decision, reviewer], ...]}`` (the last
    :data:`HISTORY`); empty when there is none (or it is unreadable: logged, and rewritten by
    the next decision). A project weighing several controls keys each control's decision
    ``"task/annotation/<control>"`` (:func:`backend.review.decisions.annotation_key`), each
    history entry naming its control last. A file of the earlier layout (one entry per decision
    and content, keyed ``"<decision>:task/annotation/hash"``) reads as its latest decision per
    annotation."""
    try:
        value = json.loads(_path(store).read_text())
    except FileNotFoundError:
        value = {}
    except (OSError, ValueError) as err:
        logger.warning("project %s: %s is unreadable (%s)", store.project, _path(store), err)
        value = {}
    if not isinstance(value, dict):
        value = {}
    decisions = value.get("decisions") if isinstance(value.get("decisions"), dict) else {}
    if any(_EARLIER.match(key) for key in decisions):  # the earlier layout: the latest each
        latest: dict[str, dict] = {}
        for d in sorted(decisions.values(), key=lambda d: d.get("last_at", 0)):
            key = f"{d['task']}/{d['annotation']}"
            fixed = d.get("decision") == FIXED or latest.get(key, {}).get("fixed", False)
            latest[key] = {**latest.get(key, {}), **d, "fixed": fixed}
        decisions = latest
    history = value.get("history") if isinstance(value.get("history"), list) else []
    return {"decisions": decisions, "history": history[-HISTORY:]}


# --------------------------------------------------------------------------------- recording


def _scored_index(scores: dict) -> dict[str, dict]:
    # A project weighing several labeling controls keeps a record per annotation and control
    # (backend.serving.controls), each judged on its own: keyed as its decision is kept.
    index: dict[str, dict] = {}
    for entry in scores.values():
        for record in entry.get("annotations") or ():
            if isinstance(record, dict) and "id" in record and "score" in record:
                index.setdefault(
                    annotation_key(record["id"], record.get("control")),
                    {
                        "hash": content_hash(record),
                        "score": float(record["score"]),
                        "labels": record_labels(record),
                        "saved": record.get("saved"),  # the baseline a save is judged against
                        **{k: record[k] for k in ("words", "tags") if k in record},  # NER slips
                    },
                )
    return index


SCORED_CACHED = 8  # versions whose scored annotations a process keeps
# scored_annotations(store, version): ``"task/annotation"`` (``"task/annotation/<control>"`` for
# a record of several controls) -> ``{"hash", "score", "labels",
# "saved"}`` (and NER's words and tags) of every annotation ``version`` scored, kept per process
# until scores.json changes (:class:`backend.store.scores_view.ScoresView`): what a rescore judges
# its decisions against.
scored_annotations = ScoresView(_scored_index, SCORED_CACHED)


def saved_times(tasks: Sequence[Mapping]) -> dict[str, str]:
    """``"task/annotation"`` -> the annotation's ``updated_at``, for ``tasks`` as Label Studio
    returned them (the export, or
    :meth:`~backend.labelstudio.client.LabelStudioAPI.project_tasks`)."""
    out = {}
    for task in tasks:
        for annotation in task.get("annotations") or ():
            if isinstance(annotation, Mapping) and isinstance(annotation.get("updated_at"), str):
                out[f"{task['id']}/{annotation.get('id')}"] = annotation["updated_at"]
    return out


def stamp_saved(scores: Mapping[str, dict], times: Mapping[str, str], before=None) -> None:
    """Give each annotation record of ``scores`` its ``saved``: ``{"at", "hash"}``, the time
    Label Studio says the annotation was saved (``times``, :func:`saved_times`) and the content
    that time belongs to: the baseline a later save is judged against (:func:`decide`). Without
    a time from Label Studio (``/predict``'s tasks come from the caller), the record keeps the
    baseline of the same annotation in ``before`` (task id -> the stored entry), if any. In
    place."""
    for task, entry in scores.items():
        old = {
            r.get("id"): r.get("saved")
            for r in ((before or {}).get(task) or {}).get("annotations") or ()
            if isinstance(r, Mapping)
        }
        for record in entry.get("annotations") or ():
            at = times.get(record.get("id"))
            if at is not None:
                record["saved"] = {"at": at, "hash": content_hash(record)}
            elif old.get(record.get("id")):
                record["saved"] = old[record.get("id")]


@dataclass(frozen=True)
class Judged:
    """What one read of tasks decided (:func:`judge`).

    Attributes
    ----------
    made : dict
        ``"task/annotation"`` -> decision, of those it decided (:func:`decide`'s answer).
    slips : frozenset of str
        The slips (``"word\\0type"`` keys, :data:`backend.review.served.SLIP_SEP`) whose
        weight the decisions changed: the tasks that repeat them are to be rewritten as served
        (what the rescore does with them; empty when none moved).
    """

    made: dict
    slips: frozenset


def decide(
    store: ProjectStore,
    version: str,
    spec,
    read: TaskRead,
    allow_self: bool = False,
) -> dict[str, str]:
    """:func:`judge`'s decisions alone: ``"task/annotation"`` -> decision."""
    return judge(store, version, spec, read, allow_self).made


def judge(
    store: ProjectStore,
    version: str,
    spec,
    read: TaskRead,
    allow_self: bool = False,
    reads: Sequence[TaskRead] | None = None,
) -> Judged:
    """Judge every scored annotation of ``read`` (this project's tasks, as Label Studio returned
    them just now, never a webhook's body) against what ``version`` scored and what the last
    decision on it left (:func:`backend.review.decisions.outcome`; ``allow_self``: the project's
    ``self_review``), and keep what they decide. Returns a :class:`Judged`: ``"task/annotation"``
    -> decision (:data:`~backend.review.decisions.WITHDRAWN` for a withdrawn one), and the slips
    whose weight they changed, handed to the caller (the rescore), never queued in the status.
    An annotation the version has not scored (newer) decides nothing: its rescore scores
    it.

    A project weighing several labeling controls (``spec.others``) is judged per control: each
    control's reading of ``read.raw`` against that control's scored record, its decision named
    ``"task/annotation/<control>"`` (with the review control, a *wrong (fixed)* fixes the
    controls whose labels changed and confirms the others:
    :func:`backend.review.decisions.beside_fixes`). ``reads``: ``read.raw`` as each control
    read it already (:func:`backend.serving.controls.read_each`), not parsed again; None: read
    here."""
    scored = scored_annotations(store, version)
    controls = spec.each()
    several = len(controls) > 1
    judged = []
    for i, control in enumerate(controls):
        name = control.from_name if several else None
        if i == 0:
            # a version of one control names none; of several, each record names its own
            wanted = (name, None) if several else (None, control.from_name)
        else:
            wanted = (name,)
        if reads is not None:
            this = reads[i]
        else:
            this = read if i == 0 else TaskRead.of(read.raw, control)
        for task, item in this.pairs():
            raw = {
                f"{task['id']}/{a.get('id')}": a
                for a in task.get("annotations") or ()
                if isinstance(a, Mapping)
            }
            for ex in item.examples if item else ():
                record = next(
                    (r for n in wanted if (r := scored.get(annotation_key(ex.id, n)))), None
                )
                if record is not None:
                    annotation = raw.get(ex.id, {})
                    judged.append(
                        decisions.judged(ex.id, ex, control, record, annotation, version, name)
                    )
    if not judged:
        return Judged({}, frozenset())
    if several and spec.review is not None:
        decisions.beside_fixes(judged)
    first = controls[0].from_name if several else None
    scales = version_scales(store, version)
    return _keep(store, judged, spec.review is not None, allow_self, first, scales)


def _seen(
    j: Mapping,
    record: Mapping,
    confirmed: Mapping,
    fixed: served.Slips,
    first: str | None,
    scales: served.Scales,
) -> float:
    """The score the reviewer saw: the annotation's (its control's record, of several) as the
    queue served it before this save (1 if confirmed, on its version's scale, its slips'
    repeats applied), not the stored one."""
    key, control = served.decided_key(j, "scored_hash"), j.get("control")
    if served.held(confirmed, key, control, first):
        return 1.0
    replaced = served.held(fixed.fixed, key, control, first)
    repeats = 0 if replaced else served.slip_repeats(record, fixed.counts)
    return served_score(served.on_scale(j, scales), repeats)


def _prior(kept: Mapping, key: str, j: Mapping, first: str | None) -> tuple[dict, str | None]:
    """The current decision on ``j``'s record (``{}`` for none), and where an earlier one lies
    that is to move to ``key``: a decision of the ``first`` control kept before decisions named
    their control, under the bare ``"task/annotation"``."""
    if key in kept or j.get("control") is None or j["control"] != first:
        return kept.get(key) or {}, None
    bare = f"{j['task']}/{j['annotation']}"
    earlier = kept.get(bare)
    if isinstance(earlier, dict) and earlier.get("control") is None:
        return earlier, bare
    return {}, None


def _keep(
    store: ProjectStore,
    judged: list[dict],
    control: bool,
    allow_self: bool,
    first: str | None = None,
    scales: served.Scales = served.NO_SCALES,
) -> Judged:
    """Keep what each of ``judged`` decides in reviews.json, under the project's lock: one
    current decision per annotation (and control, of several: ``first`` names the first) and a
    bounded history. Returns them with the slips that start or stop counting, whose repeats'
    predictions the rescore rewrites: every slip whose weight the decisions changed
    (:func:`backend.review.served.slips`)."""
    made: dict[str, str] = {}
    with store.locked():
        reviews = load(store)
        confirmed, fixed = served.confirmed(reviews), served.slips(reviews)  # as served so far
        now = time.time()
        for j in judged:
            key = annotation_key(f"{j['task']}/{j['annotation']}", j.get("control"))
            prior, earlier = _prior(reviews["decisions"], key, j, first)
            seen = _seen(j, j.pop("scored_words", {}), confirmed, fixed, first, scales)
            new = decisions.outcome(j, prior, control, seen, allow_self)
            if new is None:
                continue
            if earlier is not None:
                reviews["decisions"].pop(earlier, None)  # kept under its control's key now
            if new["decision"] == WITHDRAWN:
                reviews["decisions"].pop(key, None)
            else:
                new.update(at=prior.get("at", now), last_at=now, count=prior.get("count", 0) + 1)
                reviews["decisions"][key] = new
            entry = [round(now, 3), j["task"], j["annotation"], new["decision"], j["reviewer"]]
            if j.get("control") is not None:
                entry.append(j["control"])
            reviews["history"] = [*reviews["history"][-(HISTORY - 1) :], entry]
            made[key] = new["decision"]
            logger.info(
                "project %s: annotation %s of task %s %s%s by %s%s (served at %.3f with "
                "version %s)",
                store.project,
                j["annotation"],
                j["task"],
                f"({j['control']}) " if j.get("control") is not None else "",
                new["decision"],
                j["reviewer"],
                f", its annotator (would have {new['chosen']})"
                if new["decision"] == SELF_REVIEWED
                else "",
                seen,
                j["version"],
            )
        if made:
            atomic_write_json(_path(store), reviews)
        weights = served.slips(reviews).counts
    moved = frozenset(
        served.SLIP_SEP.join(pair)
        for pair in {*fixed.counts, *weights}
        if fixed.counts.get(pair) != weights.get(pair)
    )
    return Judged(made, moved)  # the rescore rewrites the predictions of their repeats


# --------------------------------------------------------------------------------- serving


def version_scales(store: ProjectStore, version: str | None) -> served.Scales:
    """The one scale ``version`` serves its scores on (:func:`backend.review.served.scales_of`
    of its meta); none for no version."""
    return served.scales_of(store.meta(version)) if version is not None else served.NO_SCALES


def serving_state(
    store: ProjectStore, version: str | None
) -> tuple[dict[str, dict], served.Scales, served.Slips]:
    """``(confirmed, scales, slips)`` of ``version`` from one read of reviews.json: what serving
    needs (:func:`backend.review.served.confirmed`, :func:`version_scales`,
    :func:`backend.review.served.slips`)."""
    reviews = load(store)
    return served.confirmed(reviews), version_scales(store, version), served.slips(reviews)


def confirmed_keys(store: ProjectStore) -> dict[str, dict]:
    """``"task/annotation/hash"`` -> decision, of every confirmed annotation content."""
    return served.confirmed(load(store))


def fixed_slips(store: ProjectStore) -> served.Slips:
    """The slips of every fix kept in reviews.json, which the served scores move up where
    they recur."""
    return served.slips(load(store))


def decided(store: ProjectStore, examples: Sequence[Example], task: str) -> set[str]:
    """The ids of ``examples`` (annotations as Label Studio holds them now, ids
    ``"task/annotation"``) whose current content a reviewer decided: confirmed it, or saved it
    as the fix. An annotation changed since its decision is not among them, nor one its
    annotator alone reviewed (:data:`~backend.review.decisions.SELF_REVIEWED`)."""
    kept = load(store)["decisions"]
    return {
        ex.id
        for ex in examples
        if ex.id in kept
        and kept[ex.id].get("decision") != SELF_REVIEWED
        and kept[ex.id].get("hash") == content_hash(example_record(ex, task))
    }


@dataclass(frozen=True)
class Serving:
    """What serving a version's predictions needs, from one read of reviews.json: the
    confirmed contents (:func:`backend.review.served.confirmed`), the version's scale
    (:func:`backend.review.served.scales_of`), the fixed slips
    (:func:`backend.review.served.slips`) and the copies that disagree with what reviewers
    decided of them (:func:`backend.review.copies.state`)."""

    confirmed: dict
    scales: served.Scales
    slips: served.Slips
    copies: copies.CopiesState


def serving(
    store: ProjectStore, scores: Mapping[str, dict], scales: served.Scales, index=None
) -> Serving:
    """:class:`Serving` for ``scores`` (a version's stored predictions, all of them: which
    copies are decided is read there) on the version's ``scales`` (:func:`version_scales`, or
    a staged version's :attr:`backend.serving.publish.Staged.scales`); ``index``:
    :func:`backend.review.copies.index` of them where the caller has it
    (:data:`backend.review.copies.copies_view`), else built here."""
    kept = load(store)
    linked = index if index is not None else copies.index(scores)
    return Serving(
        served.confirmed(kept), scales, served.slips(kept), copies.state(linked, scores, kept)
    )


def serve(task: str, entry: dict, state: Serving) -> dict:
    """``entry`` (``task``'s stored prediction) as served: on its version's scale, the
    reviewers' decisions applied (:func:`backend.review.served.served_entry`, the decided copies
    that contradict it among them) and a note naming its copies that disagree
    (:func:`backend.review.copies.with_notes`)."""
    contradicted = state.copies.contradicted.get(task, 0)
    out = served.served_entry(task, entry, state.confirmed, state.scales, state.slips, contradicted)
    return copies.with_notes(task, out, state.copies)


def served_scores(
    store: ProjectStore,
    scores: Mapping[str, dict],
    scales: served.Scales,
    whole: Mapping[str, dict] | None = None,
    index=None,
) -> dict[str, dict]:
    """``scores`` (task id -> stored prediction) as served (:func:`serve`) on their version's
    ``scales`` (:func:`version_scales`). ``whole``: the version's scores ``scores`` is a part of
    (None: ``scores`` is all of them), where its copies are found; ``index``: their
    :func:`backend.review.copies.index`, if the caller has it."""
    state = serving(store, whole if whole is not None else scores, scales, index)
    return {task: serve(task, entry, state) for task, entry in scores.items()}


# --------------------------------------------------------------------------------- report


def review_inputs(
    store: ProjectStore, control: str | None = None, first: str | None = None
) -> dict | None:
    """The decisions as the report takes them. For
    :func:`subregweigh.report.review_summary`, one item per task with a confirmation or a fix
    (*unsure* and reverted fixes say nothing of a flag): ``score`` (the lowest score its
    annotations were served with when decided), ``fixed`` (any of them fixed), ``labels`` (what
    they held); plus ``tasks``. For :func:`subregweigh.report.reviewer_summary`, ``decisions``:
    ``{"item", "reviewer", "decision"}`` lists, each reviewer's latest decision on each
    annotation (and control, of several: ``"task/annotation/<control>"``). None before any
    decision.

    ``control``: of a project weighing several labeling controls, that control's decisions
    alone (a decision naming no control is the ``first`` control's); None: every decision."""
    kept = [
        d
        for d in load(store)["decisions"].values()
        if control is None or d.get("control", first) == control
    ]
    tasks: dict[str, dict] = {}
    items, who, what = [], [], []
    for d in kept:
        each = dict(d.get("reviewers") or {})
        if d.get("decision") == SELF_REVIEWED or not each:  # an annotator's own, apart
            each.setdefault(d.get("reviewer", ""), d["decision"])
        for reviewer, decision in each.items():
            items.append(annotation_key(f"{d['task']}/{d['annotation']}", d.get("control")))
            who.append(reviewer)
            what.append(decision)
        if d.get("decision") not in COUNTED:
            continue
        item = tasks.setdefault(d["task"], {"score": 1.0, "fixed": False, "labels": set()})
        item["score"] = min(item["score"], float(d["score"]))
        item["fixed"] |= d["decision"] == FIXED or bool(d.get("fixed"))
        item["labels"].update(d.get("labels") or ())
    if not items:
        return None
    order = sorted(tasks, key=int)
    return {
        "tasks": order,
        "score": [tasks[t]["score"] for t in order],
        "fixed": [tasks[t]["fixed"] for t in order],
        "labels": [sorted(tasks[t]["labels"]) for t in order],
        "decisions": {"item": items, "reviewer": who, "decision": what},
    }

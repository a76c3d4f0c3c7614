"""Reviewers' decisions on scored tasks: confirm an annotation as correct, or fix it.

Label Studio Community has no review workflow, and the backend may not change a project's
labeling config, so the gestures are two every annotator already has, and Label Studio sends
``ANNOTATION_UPDATED`` (with the annotation, the task's ``data`` and the project's
``label_config``) for both:

* **confirm**: save the annotation with its labels unchanged. Label Studio 1.23's UI keeps
  Update disabled until something changes, so the reviewer adds a note to a region (its meta)
  and Updates; through the API, ``PATCH /api/annotations/{id}`` with the result as it is.
* **fix**: change the labels and Update (``PATCH /api/annotations/{id} {"result": [...]}``).

A webhook only says *which* task changed. Its body is never trusted for a decision: the rescore
that follows reads the task from Label Studio, within the project (:func:`decide`), and judges
each annotation the serving version scored against its baseline, the content and ``updated_at``
a training or a rescore last read from Label Studio (kept in the scored record as ``saved``):
other labels are a fix; the same labels are a confirmation only if Label Studio saved the
annotation after the baseline, so a replayed or made-up event confirms nothing.

Decisions are kept in ``MODEL_DIR/<project>/reviews.json`` (atomic writes under the project's
lock, so two reviewers deciding at once lose nothing), outside the versions: they survive
restarts and retrains. The file is bounded: one current decision per annotation (keyed
``<task>/<annotation>``, with the hash of the content it decided, :func:`content_hash`, so a
confirmation never applies once the labels change) and the last :data:`HISTORY` decisions.

:func:`served` gives a confirmed annotation the score 1 (fully reliable) wherever the backend
serves a score (``/predict``, the predictions a training or a rescore writes, the report), so
the task leaves the top of the queue and stays out across retrains; the stored scores stay the
scout's. The scout itself trains unweighted on every current annotation: a confirmed one with
weight 1, a fixed one with its new labels.

:func:`review_inputs` turns the decisions into the engine's
:func:`subregweigh.report.review_summary` input: one item per decided task, its lowest score
when decided, whether any of its annotations was fixed, the labels it held.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from backend.scores_view import ScoresView
from backend.store import ProjectStore
from backend.tasks import read_tasks
from subregweigh import review
from subregweigh.example import Example
from subregweigh.io.atomic import atomic_write_json
from subregweigh.io.dataset import example_record
from subregweigh.report import NONE_LABEL
from subregweigh.tags import entity_spans

logger = logging.getLogger(__name__)

CONFIRMED, FIXED = "confirmed", "fixed"
HISTORY = 1_000  # decisions kept in reviews.json's history, the newest
# An annotation's served score is multiplied by this for every repeat of a fixed slip: halved
# per repeat, as the review-loop benchmark's `propagate` policy, which reads 90% of CoNLL-2003
# test's errors in half the sentences of the static ranking (benchmarks/review_loop.py).
SLIP_BOOST = 0.5
SLIP_SEP = "\0"  # joins (word, type) into a status key
CONFIRMED_NOTE = (
    "a reviewer confirmed this annotation: served as fully reliable (score 1) until it changes"
)
_CONTENT = ("words", "tags", "text", "label", "labels")


def content_hash(record: Mapping) -> str:
    """A short hash of an annotation record's words and labels (what the scout scores): equal
    for an annotation updated unchanged, different once a label or the text changes."""
    payload = {key: record[key] for key in _CONTENT if key in record}
    return hashlib.sha1(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def content_key(task: str, record: Mapping) -> str:
    """``"task/annotation/hash"``: a stored annotation record's content, as confirmations are
    keyed (:func:`confirmed_keys`)."""
    return f"{task}/{str(record['id']).split('/')[-1]}/{content_hash(record)}"


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


def _path(store: ProjectStore):
    return store.root / "reviews.json"


def load(store: ProjectStore) -> dict:
    """``reviews.json``: ``{"decisions": {"task/annotation": its current decision},
    "history": [[time, task, annotation, decision], ...]}`` (the last :data:`HISTORY`); empty
    when there is none (or it is unreadable: logged, and rewritten by the next decision). A
    file of the earlier layout (one entry per decision and content) reads as its latest
    decision per annotation."""
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
    if any(":" in key for key in decisions):  # the earlier layout: the latest per annotation
        latest: dict[str, dict] = {}
        for d in sorted(decisions.values(), key=lambda d: d.get("last_at", 0)):
            key = f"{d['task']}/{d['annotation']}"
            fixed = d.get("decision") == FIXED or latest.get(key, {}).get("fixed", False)
            latest[key] = {**latest.get(key, {}), **d, "fixed": fixed}
        decisions = latest
    history = value.get("history") if isinstance(value.get("history"), list) else []
    return {"decisions": decisions, "history": history[-HISTORY:]}


def confirmed_keys(store: ProjectStore) -> set[str]:
    """``"task/annotation/hash"`` of every confirmed annotation content."""
    return _confirmed(load(store))


def _confirmed(reviews: dict) -> set[str]:
    return {
        f"{d['task']}/{d['annotation']}/{d['hash']}"
        for d in reviews["decisions"].values()
        if d.get("decision") == CONFIRMED
    }


# --------------------------------------------------------------------------------- recording


def _scored_index(scores: dict) -> dict[str, dict]:
    return {
        record["id"]: {
            "hash": content_hash(record),
            "score": float(record["score"]),
            "labels": record_labels(record),
            "saved": record.get("saved"),  # the baseline a save is judged against (decide)
            **{k: record[k] for k in ("words", "tags") if k in record},  # NER: a fix's slips
        }
        for entry in scores.values()
        for record in entry.get("annotations") or ()
        if isinstance(record, dict) and "id" in record and "score" in record
    }


SCORED_CACHED = 8  # versions whose scored annotations a process keeps
# scored_annotations(store, version): ``"task/annotation"`` -> ``{"hash", "score", "labels",
# "saved"}`` (and NER's words and tags) of every annotation ``version`` scored, kept per process
# until scores.json changes (:class:`backend.scores_view.ScoresView`): what a rescore judges its
# decisions against.
scored_annotations = ScoresView(_scored_index, SCORED_CACHED)


def _when(value) -> float | None:
    """Label Studio's ``updated_at`` (ISO 8601) as seconds, None when missing or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def saved_times(tasks: Sequence[Mapping]) -> dict[str, str]:
    """``"task/annotation"`` -> the annotation's ``updated_at``, for ``tasks`` as Label Studio
    returned them (the export, or :meth:`~backend.labelstudio.LabelStudioAPI.project_tasks`)."""
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


def decide(store: ProjectStore, version: str, spec, tasks: Sequence[Mapping]) -> dict[str, str]:
    """Judge every scored annotation of ``tasks`` (this project's, as Label Studio returned
    them just now, never a webhook's body) against what ``version`` scored and what the last
    decision on it left, and keep what they decide. Returns ``"task/annotation"`` -> decision.

    * Other labels than the baseline's (the content last read from Label Studio by a training
      or a rescore, or the last decision's): **fixed**.
    * The same labels, saved after the baseline (Label Studio's ``updated_at``): **confirmed**.
      The same labels not saved since (a replayed or made-up event) decide nothing, and neither
      does an annotation whose baseline has no time (a version made before times were kept).
    """
    scored = scored_annotations(store, version)
    judged = []
    for task in tasks:
        parsed = read_tasks([task], spec)
        item = parsed.tasks[0] if parsed.tasks else None
        examples = {ex.id: ex for ex in (item.examples if item else ())}
        saved = saved_times([task])
        for key, ex in examples.items():
            record = scored.get(key)
            if record is None:
                continue  # newer than the version: the rescore scores it, nothing to judge
            judged.append(_judged(key, ex, spec, record, saved.get(key), version))
    if not judged:
        return {}
    return _keep(store, judged)


def _judged(key: str, ex: Example, spec, record: dict, saved_at, version: str) -> dict:
    """What Label Studio's annotation ``ex`` (saved at ``saved_at``) is, beside the
    ``record`` the version scored."""
    task, annotation = key.split("/", 1)
    slips = []
    if "words" in record and "tags" in record:
        before = Example(id=key, words=tuple(record["words"]), label=tuple(record["tags"]))
        slips = sorted(review.slip_keys(before, ex)) if before.words == ex.words else []
    return {
        "task": task,
        "annotation": annotation,
        "slips": [list(s) for s in slips],
        "hash": content_hash(example_record(ex, spec.task)),
        "saved_at": saved_at,
        "scored_hash": record["hash"],
        "baseline": record.get("saved") or {},
        "score": record["score"],
        "labels": record["labels"],
        "version": version,
    }


def _decision(judged: dict, prior: dict) -> str | None:
    """The decision ``judged`` makes after ``prior`` (the annotation's current decision, or
    {}), or None."""
    # the newer of the two: what Label Studio held when last read, or what was last decided
    known = [
        (_when(judged["baseline"].get("at")), judged["baseline"].get("hash")),
        (_when(prior.get("saved_at")), prior.get("hash")),
    ]
    known = [(at, h) for at, h in known if h is not None]
    dated = [(at, h) for at, h in known if at is not None]
    base_at, base_hash = max(dated) if dated else (None, None)
    if base_hash is None:
        base_hash = known[-1][1] if known else judged["scored_hash"]
    saved = _when(judged["saved_at"])
    if saved is not None and base_at is not None and saved <= base_at:
        return None  # not saved since: read before, or decided already
    if judged["hash"] != base_hash:
        return FIXED
    if saved is None or base_at is None:
        return None  # the same labels, and no time to prove a save since
    return CONFIRMED


def _keep(store: ProjectStore, judged: list[dict]) -> dict[str, str]:
    """Keep each of ``judged`` that decides something in reviews.json, under the project's
    lock: one current decision per annotation and a bounded history."""
    made: dict[str, str] = {}
    new_slips: dict[str, int] = {}
    with store.locked():
        reviews = load(store)
        now = time.time()
        for j in judged:
            key = f"{j['task']}/{j['annotation']}"
            prior = reviews["decisions"].get(key) or {}
            decision = _decision(j, prior)
            if decision is None:
                continue
            fix_slips = j["slips"] if decision == FIXED else []
            if fix_slips and not prior.get("slips"):
                new_slips.update({SLIP_SEP.join(s): 1 for s in fix_slips})
            reviews["decisions"][key] = {
                "decision": decision,
                **{k: j[k] for k in ("task", "annotation", "hash", "saved_at")},
                # the score, labels and version it was first decided with
                **{k: prior.get(k, j[k]) for k in ("score", "labels", "version")},
                "fixed": decision == FIXED or bool(prior.get("fixed")),
                "at": prior.get("at", now),
                "last_at": now,
                "count": prior.get("count", 0) + 1,
                **(
                    {"slips": fix_slips, "scored_hash": j["scored_hash"]}
                    if fix_slips
                    else {k: prior[k] for k in ("slips", "scored_hash") if k in prior}
                ),
            }
            reviews["history"] = [
                *reviews["history"][-(HISTORY - 1) :],
                [round(now, 3), j["task"], j["annotation"], decision],
            ]
            made[key] = decision
            logger.info(
                "project %s: annotation %s of task %s %s by a reviewer (score %.3f with "
                "version %s)",
                store.project,
                j["annotation"],
                j["task"],
                decision,
                j["score"],
                j["version"],
            )
        if made:
            atomic_write_json(_path(store), reviews)
    if new_slips:  # the next rescore rewrites the predictions of the tasks that repeat them
        store.update_status(slips_pending=lambda pending: {**new_slips, **(pending or {})})
    return made


# --------------------------------------------------------------------------------- serving


@dataclass(frozen=True)
class Slips:
    """The slips reviewers fixed: ``counts``, (word, entity type or O) -> how many fixes changed
    an annotation of that word as that type (:func:`subregweigh.review.slip_keys`); ``fixed``,
    the content keys of the annotations as those fixes found them (not repeats of their own
    slip: their rescore is on its way)."""

    counts: Counter
    fixed: frozenset


def fixed_slips(store: ProjectStore) -> Slips:
    """The slips of every fix kept in reviews.json, which the served scores move up where
    they recur."""
    return _slips(load(store))


def _slips(reviews: dict) -> Slips:
    counts: Counter = Counter()
    fixed = set()
    for d in reviews["decisions"].values():
        if d.get("slips"):
            counts.update(tuple(s) for s in d["slips"])
            fixed.add(f"{d['task']}/{d['annotation']}/{d.get('scored_hash')}")
    return Slips(counts, frozenset(fixed))


def serving_state(store: ProjectStore) -> tuple[set[str], Slips]:
    """``(confirmed_keys, fixed_slips)`` from one read of reviews.json: what serving needs."""
    reviews = load(store)
    return _confirmed(reviews), _slips(reviews)


def slip_repeats(record: Mapping, slips: Mapping) -> int:
    """How often an NER annotation ``record`` repeats the fixed ``slips``
    (:func:`subregweigh.review.slip_repeats`); 0 for classification."""
    if not slips or "words" not in record or "tags" not in record:
        return 0
    return review.slip_repeats(record["words"], record["tags"], slips)


def record_repeats(task: str, record: Mapping, slips: Slips | None) -> int:
    """How often the annotation ``record`` of ``task`` repeats a fixed slip; 0 for one a fix
    replaced (its rescore is on its way)."""
    if slips is None or not slips.counts or content_key(task, record) in slips.fixed:
        return 0
    return slip_repeats(record, slips.counts)


def _score(record: Mapping, confirmed: bool, repeats: int) -> float:
    return 1.0 if confirmed else float(record["score"]) * SLIP_BOOST**repeats


def served_score(
    task: str, record: Mapping, confirmed: set[str], slips: Slips | None = None
) -> float:
    """The score an annotation ``record`` of ``task`` is served with: 1 once a reviewer
    confirmed its content, else its stored score times :data:`SLIP_BOOST` per repeat of a
    fixed slip."""
    if content_key(task, record) in confirmed:
        return 1.0
    return _score(record, False, record_repeats(task, record, slips))


def served_entry(task: str, entry: dict, confirmed: set[str], slips: Slips | None = None) -> dict:
    """``entry`` (a stored prediction) as served: each annotation whose current content a
    reviewer confirmed counts as score 1; each other one's score is multiplied by
    :data:`SLIP_BOOST` for every repeat of a slip reviewers fixed elsewhere (``slips``,
    :func:`fixed_slips`), so the same convention slip moves up the queue; the task's score is
    the lowest of its annotations'. When every annotation is confirmed, its regions' notes say
    so. A copy when anything changes; the stored entry is never modified."""
    records = entry.get("annotations") or ()
    if not records or not (confirmed or (slips and slips.counts)):
        return entry
    mine = [content_key(task, r) in confirmed for r in records]
    repeats = [0 if ok else record_repeats(task, r, slips) for r, ok in zip(records, mine)]
    if not any(mine) and not any(repeats):
        return entry
    score = min(_score(r, ok, n) for r, ok, n in zip(records, mine, repeats))
    out = {**entry, "score": score, "confirmed": sum(mine)}
    if any(repeats):
        out["slip_repeats"] = sum(repeats)
    if all(mine):
        out["result"] = [
            {**region, "meta": {"text": [CONFIRMED_NOTE]}} if "meta" in region else region
            for region in entry.get("result") or ()
        ]
    return out


def served(store: ProjectStore, scores: Mapping[str, dict]) -> dict[str, dict]:
    """``scores`` (task id -> stored prediction) as served (:func:`served_entry`)."""
    confirmed, slips = serving_state(store)
    return {task: served_entry(task, entry, confirmed, slips) for task, entry in scores.items()}


# --------------------------------------------------------------------------------- report


def review_inputs(store: ProjectStore) -> dict | None:
    """The decisions as :func:`subregweigh.report.review_summary` takes them, one item per
    decided task: ``score`` (the lowest score its annotations had when decided), ``fixed``
    (any of them fixed), ``labels`` (what they held); plus ``tasks``. None before any decision."""
    tasks: dict[str, dict] = {}
    for d in load(store)["decisions"].values():
        item = tasks.setdefault(d["task"], {"score": 1.0, "fixed": False, "labels": set()})
        item["score"] = min(item["score"], float(d["score"]))
        item["fixed"] |= d["decision"] == FIXED or bool(d.get("fixed"))
        item["labels"].update(d.get("labels") or ())
    if not tasks:
        return None
    order = sorted(tasks, key=int)
    return {
        "tasks": order,
        "score": [tasks[t]["score"] for t in order],
        "fixed": [tasks[t]["fixed"] for t in order],
        "labels": [sorted(tasks[t]["labels"]) for t in order],
    }

"""Reviewers' decisions on scored tasks: confirm an annotation as correct, or fix it.

Label Studio Community has no review workflow, and the backend may not change a project's
labeling config, so the gestures are two every annotator already has, and Label Studio sends
``ANNOTATION_UPDATED`` (with the annotation, the task's ``data`` and the project's
``label_config``) for both:

* **confirm**: save the annotation with its labels unchanged. Label Studio 1.23's UI keeps
  Update disabled until something changes, so the reviewer adds a note to a region (its meta)
  and Updates; through the API, ``PATCH /api/annotations/{id}`` with the result as it is.
* **fix**: change the labels and Update (``PATCH /api/annotations/{id} {"result": [...]}``).

:func:`record_decision` reads the annotation as the engine reads it and compares it with what
the serving version scored (the annotation's record in ``scores.json``) and with what the last
decision on it left: the same labels are a confirmation, other labels a fix.

A decision is kept in ``MODEL_DIR/<project>/reviews.json`` (atomic writes under the project's
lock, so two reviewers deciding at once lose nothing), outside the versions: it survives
restarts and retrains. Its key is ``<decision>:<task>/<annotation>/<content hash>``, the hash
over the annotation's words and labels (:func:`content_hash`), so a decision never applies to
another annotation, nor to the same annotation once its labels change: an edit undoes a
confirmation by itself.

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
import os
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from backend.store import ProjectStore, no_space, project_id, unwritten_projects
from backend.tasks import ConfigError, parse_label_config, read_tasks
from subregweigh import review
from subregweigh.example import Example
from subregweigh.io.atomic import atomic_write_json
from subregweigh.io.dataset import example_record
from subregweigh.report import NONE_LABEL
from subregweigh.tags import entity_spans

logger = logging.getLogger(__name__)

CONFIRMED, FIXED = "confirmed", "fixed"
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
    """``reviews.json``: ``{"decisions": {key: decision}, "seen": {"task/annotation": hash}}``;
    empty when there is none (or it is unreadable: logged, and rewritten by the next decision)."""
    try:
        value = json.loads(_path(store).read_text())
    except FileNotFoundError:
        value = {}
    except (OSError, ValueError) as err:
        logger.warning("project %s: %s is unreadable (%s)", store.project, _path(store), err)
        value = {}
    if not isinstance(value, dict):
        value = {}
    value.setdefault("decisions", {})
    value.setdefault("seen", {})
    return value


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


# scores.json path -> ((inode, mtime, size), its annotations as scored_annotations gives them)
_scored: OrderedDict[str, tuple[tuple, dict]] = OrderedDict()
_scored_lock = threading.Lock()
SCORED_CACHED = 8  # versions whose scored annotations a process keeps


def scored_annotations(store: ProjectStore, version: str) -> dict[str, dict]:
    """``"task/annotation"`` -> ``{"hash", "score", "labels"}`` of every annotation ``version``
    scored. Kept per process until scores.json changes (the :data:`SCORED_CACHED` most recently
    used versions): a project of 14,000 NER tasks stores 17 MiB of scores, which take about a
    second to parse, and a webhook that judges a decision should not pay that every time."""
    path = store.versions / version / "scores.json"
    held = os.path.abspath(store.root) in unwritten_projects()  # a full disk: kept in memory
    try:
        st = path.stat()
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
    except FileNotFoundError:
        stamp = None
    with _scored_lock:
        hit = _scored.get(str(path))
        if hit is not None and hit[0] == stamp and not held:
            _scored.move_to_end(str(path))
            return hit[1]
    index = {
        record["id"]: {
            "hash": content_hash(record),
            "score": float(record["score"]),
            "labels": record_labels(record),
            **{k: record[k] for k in ("words", "tags") if k in record},  # NER: a fix's slips
        }
        for entry in store.scores(version).values()
        for record in entry.get("annotations") or ()
        if isinstance(record, dict) and "id" in record and "score" in record
    }
    if stamp is not None and not held:  # read after the stat: a newer file only reloads
        with _scored_lock:
            _scored[str(path)] = (stamp, index)
            while len(_scored) > SCORED_CACHED:
                _scored.popitem(last=False)
    return index


class _NoDecision(Exception):
    """Why a webhook decides nothing; ``unreadable``: the event itself is at fault (a WARNING)
    rather than a task or annotation the serving version has not scored (INFO)."""

    def __init__(self, why: str, unreadable: bool = False):
        super().__init__(why)
        self.unreadable = unreadable


def _event_parts(body: Mapping) -> tuple[str, str, dict, dict]:
    """``(task id, annotation id, annotation, task)`` of an ANNOTATION_UPDATED webhook."""
    annotation = body.get("annotation")
    task = body.get("task")
    if not isinstance(annotation, dict) or not isinstance(annotation.get("result"), list):
        raise _NoDecision("it carries no annotation with a result list", unreadable=True)
    if type(annotation.get("id")) is not int:
        raise _NoDecision("its annotation has no integer id", unreadable=True)
    try:
        task_id = project_id(task if isinstance(task, dict) else annotation.get("task"))
    except ValueError:
        raise _NoDecision("it names no task id", unreadable=True) from None
    if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
        raise _NoDecision(f"it carries no data of task {task_id}", unreadable=True)
    return task_id, str(annotation["id"]), annotation, task


def _judged(store: ProjectStore, body: Mapping) -> dict:
    """What an ANNOTATION_UPDATED webhook says about a scored annotation (before it is compared
    with earlier decisions); :class:`_NoDecision` when it says nothing."""
    task_id, annotation_id, annotation, task = _event_parts(body)
    version = store.current_version()
    if version is None:
        raise _NoDecision("no version scores the project yet")
    key = f"{task_id}/{annotation_id}"
    scored = scored_annotations(store, version).get(key)
    if scored is None:
        raise _NoDecision(
            f"version {version} has not scored annotation {annotation_id} of task {task_id} "
            "(the task or the annotation is newer, or gone): nothing to confirm or fix"
        )
    project = body.get("project")
    config = project.get("label_config") if isinstance(project, dict) else None
    try:
        spec = parse_label_config(config)
    except ConfigError as err:
        raise _NoDecision(f"its labeling config cannot be read ({err})", unreadable=True) from None
    parsed = read_tasks([{"id": task_id, "data": task["data"], "annotations": [annotation]}], spec)
    examples = parsed.tasks[0].examples if parsed.tasks and parsed.tasks[0] else ()
    if not examples:
        why = "; ".join(parsed.warnings) or "it is cancelled or empty"
        raise _NoDecision(f"annotation {annotation_id} of task {task_id} is not usable: {why}")
    slips = []
    if "words" in scored and "tags" in scored:
        before = Example(id=key, words=tuple(scored["words"]), label=tuple(scored["tags"]))
        slips = (
            sorted(review.slip_keys(before, examples[0]))
            if before.words == examples[0].words
            else []
        )
    return {
        "task": task_id,
        "annotation": annotation_id,
        "slips": [list(s) for s in slips],
        "hash": content_hash(example_record(examples[0], spec.task)),
        "scored_hash": scored["hash"],
        "score": scored["score"],
        "labels": scored["labels"],
        "version": version,
    }


def record_decision(store: ProjectStore, body: Mapping) -> str | None:
    """Judge an ANNOTATION_UPDATED webhook (see the module's docstring) and keep the decision:
    ``"confirmed"``, ``"fixed"``, or None when it decides nothing (a WARNING for an event that
    cannot be read, an INFO line for a task or annotation the serving version has not scored).
    Never raises: a webhook must count its event whatever this finds."""
    try:
        return _keep(store, _judged(store, body))
    except _NoDecision as why:
        (logger.warning if why.unreadable else logger.info)(
            "project %s: ANNOTATION_UPDATED decides nothing%s: %s",
            store.project,
            " (the webhook is unreadable)" if why.unreadable else "",
            why,
        )
    except Exception as err:  # a full disk, a damaged version: the event still counts
        logger.warning(
            "project %s: a reviewer's decision was not kept (%s: %s)%s",
            store.project,
            type(err).__name__,
            err,
            "; the disk of MODEL_DIR is full" if no_space(err) else "",
        )
    return None


def _keep(store: ProjectStore, judged: dict) -> str:
    """Add ``judged`` to reviews.json under the project's lock: the labels scored, or those the
    last decision left, are a confirmation; other labels a fix."""
    key = f"{judged['task']}/{judged['annotation']}"
    with store.locked():
        reviews = load(store)
        unchanged = judged["hash"] in {judged["scored_hash"], reviews["seen"].get(key)}
        decision = CONFIRMED if unchanged else FIXED
        now = time.time()
        slot = f"{decision}:{key}/{judged['hash']}"
        old = reviews["decisions"].get(slot) or {}
        reviews["decisions"][slot] = {
            "decision": decision,
            **{k: judged[k] for k in ("task", "annotation", "hash")},
            # a repeat keeps the score, labels and version it was first decided with
            **{k: old.get(k, judged[k]) for k in ("score", "labels", "version")},
            "at": old.get("at", now),
            "last_at": now,
            "count": old.get("count", 0) + 1,
            **(
                {"slips": judged["slips"], "scored_hash": judged["scored_hash"]}
                if decision == FIXED and judged["slips"]
                else {}
            ),
        }
        reviews["seen"][key] = judged["hash"]
        atomic_write_json(_path(store), reviews)
    if decision == FIXED and judged["slips"] and not old:
        # the next rescore rewrites the predictions of the tasks that repeat them
        new = {SLIP_SEP.join(s): 1 for s in judged["slips"]}
        store.update_status(
            slips_pending=lambda pending: {**new, **(pending or {})},
        )
    logger.info(
        "project %s: annotation %s of task %s %s by a reviewer (score %.3f with version %s)",
        store.project,
        judged["annotation"],
        judged["task"],
        decision,
        judged["score"],
        judged["version"],
    )
    return decision


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
        if d.get("decision") == FIXED and d.get("slips"):
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
        item["fixed"] |= d["decision"] == FIXED
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

"""Reviewers' decisions as the queue serves them: pure functions over ``reviews.json``'s content
(:func:`backend.review.reviews.load`) and a version's stored predictions.

* A **confirmed** annotation scores 1 (fully reliable) wherever the backend serves a score
  (``/predict``, the predictions a training or a rescore writes, the report), so the task leaves
  the top of the queue and stays out across retrains, until the annotation changes. When every
  annotation of a task is confirmed, its prediction shows the confirmed annotation itself (its
  own regions or choices, each with a note naming the reviewer), not the scout's suggestion:
  a confirmed MISC must not be shown as the scout's PER at 100%.
* A **fix**'s slips move up their repeats: an annotation's served score is multiplied by
  :data:`~subregweigh.served.SLIP_BOOST` per repeat of a convention reviewers fixed elsewhere (an
  entity, its words and type, or a capitalised word outside the entities:
  :func:`subregweigh.review.slip_keys`), as often as that slip's weight: the fixes that changed it
  less the decided annotations that held it unchanged (:func:`subregweigh.review.net_slips`), so a
  convention reviewers keep confirming stops moving its repeats up.
* A **decided copy** (:mod:`backend.review.copies`: a task of the same text or entity string a
  reviewer confirmed or fixed) that labels a task otherwise halves the task's served score, once
  per such copy (``contradicted``), so that a decision on one copy moves up those that
  contradict it.

The policy itself (the boost, confirmed = 1, a task at its lowest annotation's score) is the
engine's, :mod:`subregweigh.served`, which the review-loop benchmark measures; this module applies
it to the backend's records (``reviews.json``'s decisions, a version's stored predictions). The
stored scores stay the scout's; only what is served changes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from backend.review.decisions import (
    BY_CONTROL,
    CONFIRMED,
    FIXED,
    REVERTED,
    content_hash,
    vouched,
    when,
)
from subregweigh import review
from subregweigh.served import served_score as policy_score
from subregweigh.served import task_score

# decisions whose annotation's unchanged pairs a reviewer saw and let stand (unsure says nothing)
HELD = (CONFIRMED, FIXED, REVERTED)
SLIP_SEP = "\0"  # joins (text, type) into a status key


def content_key(task: str, record: Mapping) -> str:
    """``"task/annotation/hash"``: a stored annotation record's content, as confirmations are
    keyed (:func:`confirmed`)."""
    return f"{task}/{str(record['id']).split('/')[-1]}/{content_hash(record)}"


def confirmed(reviews: Mapping) -> dict[str, dict]:
    """``"task/annotation/hash"`` -> its decision, of every annotation content a reviewer
    vouched for (:func:`backend.review.decisions.vouched`: confirmed, or fixed through the review
    control): served as fully reliable."""
    return {
        f"{d['task']}/{d['annotation']}/{d['hash']}": d
        for d in reviews["decisions"].values()
        if vouched(d.get("decision"), d.get("by") == BY_CONTROL)
    }


@dataclass(frozen=True)
class Slips:
    """The slips reviewers fixed: ``counts``, (text, entity type or O) -> its weight, the fixes
    that changed an annotation of that entity or word as that type
    (:func:`subregweigh.review.slip_keys`) less the decided annotations that held it
    unchanged, where positive
    (:func:`subregweigh.review.net_slips`); ``fixed``, the content keys of the annotations as
    those fixes found them (not repeats of their own slip: their rescore is on its way)."""

    counts: Counter
    fixed: frozenset


def slips(reviews: Mapping) -> Slips:
    """The slips of every fix that counts (not reverted) in ``reviews``, weighed against the
    pairs every decided annotation held (decisions kept before they kept their pairs weigh
    nothing against)."""
    decided = []
    fixed = set()
    for d in reviews["decisions"].values():
        counting = bool(d.get("slips")) and d.get("fixed", True)
        if counting:
            fixed.add(f"{d['task']}/{d['annotation']}/{d.get('scored_hash')}")
        held = d.get("pairs") or () if d.get("decision") in HELD else ()
        if counting or held:
            decided.append((held, d["slips"] if counting else ()))
    return Slips(review.net_slips(decided), frozenset(fixed))


def slip_repeats(record: Mapping, counts: Mapping) -> int:
    """How often an NER annotation ``record`` repeats the fixed slips ``counts``
    (:func:`subregweigh.review.slip_repeats`); 0 for classification."""
    if not counts or "words" not in record or "tags" not in record:
        return 0
    return review.slip_repeats(record["words"], record["tags"], counts)


def record_repeats(task: str, record: Mapping, fixed: Slips | None) -> int:
    """How often the annotation ``record`` of ``task`` repeats a fixed slip; 0 for one a fix
    replaced (its rescore is on its way)."""
    if fixed is None or not fixed.counts or content_key(task, record) in fixed.fixed:
        return 0
    return slip_repeats(record, fixed.counts)


def _score(record: Mapping, is_confirmed: bool, repeats: int, contradicted: int = 0) -> float:
    return policy_score(record["score"], repeats, is_confirmed, contradicted=contradicted)


def served_score(
    task: str,
    record: Mapping,
    confirmed: Mapping | set,
    fixed: Slips | None = None,
    contradicted: int = 0,
) -> float:
    """The score an annotation ``record`` of ``task`` is served with: 1 once a reviewer
    confirmed its content (``confirmed``: :func:`confirmed`, or its keys), else its stored
    score times :data:`~subregweigh.served.SLIP_BOOST` per repeat of a fixed slip, as often as its
    weight, and per decided copy of its task that labels it otherwise (``contradicted``,
    :func:`subregweigh.copies.contradicted`)."""
    if content_key(task, record) in confirmed:
        return 1.0
    return _score(record, False, record_repeats(task, record, fixed), contradicted)


def confirmed_note(decision: Mapping) -> str:
    """The note on a confirmed task's prediction: who confirmed it, and when."""
    who = decision.get("reviewer") or "a reviewer"
    at = when(decision.get("saved_at"))
    day = f" on {decision['saved_at'][:10]}" if at is not None else ""
    done = "fixed" if decision.get("decision") == FIXED else "confirmed"
    return f"{done} by {who}{day}: served as fully reliable (score 1) until it changes"


def confirmed_result(decision: Mapping) -> list[dict]:
    """A confirmed task's prediction result: the annotation's own regions or choices (kept with
    its decision), each at score 1 with :func:`confirmed_note`. An NER annotation without
    regions (no entity, confirmed) has none to show: its prediction is empty at score 1."""
    note = {"text": [confirmed_note(decision)]}
    # the note first: the Data Manager's "Prediction results" column shows this order
    return [{"meta": note, **region, "score": 1.0} for region in decision.get("result") or ()]


def served_entry(
    task: str,
    entry: dict,
    confirmed: Mapping,
    fixed: Slips | None = None,
    contradicted: int = 0,
) -> dict:
    """``entry`` (a stored prediction) as served: each annotation whose current content a
    reviewer confirmed counts as score 1; each other one's score is multiplied by
    :data:`~subregweigh.served.SLIP_BOOST` for every repeat of a slip reviewers fixed elsewhere
    (``fixed``), so the same convention slip moves up the queue, and for every decided copy of
    the task that labels it otherwise (``contradicted``: :mod:`backend.review.copies`); the
    task's score is the lowest of
    its annotations'. When every annotation is confirmed, the result is the confirmed annotation's
    own (:func:`confirmed_result`; empty for a decision made before decisions kept it: the
    scout's suggestion is never shown as confirmed). A copy when anything changes; the stored
    entry is never modified."""
    records = entry.get("annotations") or ()
    if not records or not (confirmed or (fixed and fixed.counts) or contradicted):
        return entry
    keys = [content_key(task, r) for r in records]
    mine = [key in confirmed for key in keys]
    repeats = [0 if ok else record_repeats(task, r, fixed) for r, ok in zip(records, mine)]
    if not any(mine) and not any(repeats) and not contradicted:
        return entry
    score = task_score(_score(r, ok, n, contradicted) for r, ok, n in zip(records, mine, repeats))
    out = {**entry, "score": score, "confirmed": sum(mine)}
    if contradicted:
        out["contradicted"] = contradicted
    if any(repeats):
        out["slip_repeats"] = sum(repeats)
    if all(mine):
        decisions = [confirmed[key] for key in keys if isinstance(confirmed, Mapping)]
        shown = next((d for d in decisions if "result" in d), None)
        out["result"] = confirmed_result(shown) if shown is not None else []
    return out

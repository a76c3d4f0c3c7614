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
* A project weighing **several labeling controls** keeps a record per annotation and control,
  and a decision per record (it names its ``control``; one naming none is the first control's,
  :func:`found`): a task whose every control's record is confirmed serves 1; one with a control
  fixed and the others unreviewed serves as a fix does, its lowest record's score.

* Every **version serves on one scale** (:mod:`subregweigh.scale`): an annotation's stored score
  goes through its version's map (:func:`fit_scales`, kept in the version's meta as ``scale``;
  a project of one NER control) before the decisions apply, so that about the share of
  annotations the version's own served tagging labels otherwise serves under 0.5, whatever
  the version. Classification and several controls, unmeasured, serve as stored.

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
from subregweigh.scale import ScoreScale, fit_scale
from subregweigh.served import served_score as policy_score
from subregweigh.served import task_score

# decisions whose annotation's unchanged pairs a reviewer saw and let stand (unsure says nothing)
HELD = (CONFIRMED, FIXED, REVERTED)
SLIP_SEP = "\0"  # joins (text, type) into a status key


def _key(task, annotation, digest, control: str | None = None) -> str:
    key = f"{task}/{annotation}/{digest}"
    return key if control is None else f"{key}/{control}"


def content_key(task: str, record: Mapping) -> str:
    """``"task/annotation/hash"``: a stored annotation record's content, as confirmations are
    keyed (:func:`confirmed`); ``"task/annotation/hash/<control>"`` for a record of one of
    several controls (it names its ``control``)."""
    return _key(task, str(record["id"]).split("/")[-1], content_hash(record), record.get("control"))


def decided_key(decision: Mapping, digest_key: str = "hash") -> str:
    """The content key (:func:`content_key`) of what ``decision`` (one of ``reviews.json``'s)
    decided: its ``hash`` (or ``digest_key``), of its control where it names one."""
    return _key(
        decision["task"], decision["annotation"], decision.get(digest_key), decision.get("control")
    )


def first_control(entry: Mapping) -> str | None:
    """The first control of a stored entry of several controls (its ``controls``, in the
    order weighed), where a decision naming no control belongs; None for one control."""
    return next(iter(entry.get("controls") or ()), None)


def found(keys, task: str, record: Mapping, first: str | None = None) -> str | None:
    """The key under which ``keys`` (a mapping or set of content keys) holds ``record``'s
    content, or None: its own (:func:`content_key`), or, for a record of the ``first`` control
    (:func:`first_control`), the key of a decision that names no control (kept before decisions
    named theirs: it decided the first control's labels)."""
    return held(keys, content_key(task, record), record.get("control"), first)


def held(keys, key: str, control: str | None, first: str | None = None) -> str | None:
    """:func:`found` for a content ``key`` already made, of the record of ``control``."""
    if not keys:
        return None
    if key in keys:
        return key
    if control is not None and control == first:
        plain = key[: -len(control) - 1]
        if plain in keys:
            return plain
    return None


def confirmed(reviews: Mapping) -> dict[str, dict]:
    """Content key (:func:`decided_key`) -> its decision, of every annotation content a
    reviewer vouched for (:func:`backend.review.decisions.vouched`: confirmed, or fixed through
    the review control): served as fully reliable."""
    return {
        decided_key(d): d
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
            fixed.add(decided_key(d, "scored_hash"))
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


def record_repeats(
    task: str, record: Mapping, fixed: Slips | None, first: str | None = None
) -> int:
    """How often the annotation ``record`` of ``task`` repeats a fixed slip; 0 for one a fix
    replaced (its rescore is on its way). ``first``: the task's first control
    (:func:`first_control`), None for one control."""
    if fixed is None or not fixed.counts or found(fixed.fixed, task, record, first):
        return 0
    return slip_repeats(record, fixed.counts)


# ------------------------------------------------------------------------------ one scale

Scales = Mapping[str, ScoreScale]  # control name ("" for a project of one) -> its version's scale
ONE_CONTROL = ""  # the scale's key of a project of one labeling control (its records name none)
NO_SCALES: Scales = {}  # a version stored before its scale was: served as stored


def fit_scales(scores: Mapping[str, dict]) -> dict[str, ScoreScale]:
    """A version's scales (:func:`subregweigh.scale.fit_scale`), from its stored predictions
    ``scores``: per control, fitted on the annotation records that say whether the served
    tagging agrees with them (``agrees``: NER's,
    :func:`backend.labelstudio.tasks.stored_prediction`); ``{}`` where none does, and for a
    project of several labeling controls (not measured: its controls would serve on two
    scales)."""
    kept: dict[str, tuple[list, list]] = {}
    for entry in scores.values():
        for record in entry.get("annotations") or ():
            # of one control only: a task of several serves its lowest control's score, and a
            # classification control beside, unscaled, would drop down the queue under NER's
            if "agrees" in record and "control" not in record:
                score, disagrees = kept.setdefault(record.get("control") or ONE_CONTROL, ([], []))
                score.append(float(record["score"]))
                disagrees.append(not record["agrees"])
    return {control: fit_scale(*pair) for control, pair in kept.items()}


def scales_json(scales: Scales) -> dict:
    """``scales`` as a version's meta keeps them (``scale``)."""
    return {control: scale.to_json() for control, scale in scales.items()}


def scales_of(meta: Mapping) -> dict[str, ScoreScale]:
    """The scales a version's ``meta`` keeps (:func:`scales_json`); ``{}`` for one stored before
    versions had one."""
    return {control: ScoreScale.from_json(v) for control, v in (meta.get("scale") or {}).items()}


def on_scale(record: Mapping, scales: Scales) -> float:
    """An annotation ``record``'s stored score on its version's one scale (``scales``): as
    stored where its control has none."""
    scale = scales.get(record.get("control") or ONE_CONTROL) if scales else None
    return float(record["score"]) if scale is None else scale(float(record["score"]))


def _scaled(records, scales: Scales) -> bool:
    return bool(scales) and any((r.get("control") or ONE_CONTROL) in scales for r in records)


def _score(
    record: Mapping, is_confirmed: bool, repeats: int, contradicted: int, scales: Scales
) -> float:
    if is_confirmed:
        return policy_score(record["score"], repeats, True)
    return policy_score(on_scale(record, scales), repeats, contradicted=contradicted)


def served_score(
    task: str,
    record: Mapping,
    confirmed: Mapping | set,
    scales: Scales,
    fixed: Slips | None = None,
    contradicted: int = 0,
    first: str | None = None,
) -> float:
    """The score an annotation ``record`` of ``task`` is served with: 1 once a reviewer
    confirmed its content (``confirmed``: :func:`confirmed`, or its keys), else its stored
    score on its version's scale (``scales``, :func:`on_scale`) times
    :data:`~subregweigh.served.SLIP_BOOST` per repeat of a fixed slip, as often as its
    weight, and per decided copy of its task that labels it otherwise (``contradicted``,
    :func:`subregweigh.copies.contradicted`). ``first``: the first control of the task's entry
    (:func:`first_control`), where a record of several controls is."""
    if found(confirmed, task, record, first):
        return 1.0
    repeats = record_repeats(task, record, fixed, first)
    return _score(record, False, repeats, contradicted, scales)


def confirmed_note(decision: Mapping) -> str:
    """The note on a confirmed task's prediction: who confirmed it, and when (prefixed by its
    control's name, where it names one, as every note of several controls is)."""
    who = decision.get("reviewer") or "a reviewer"
    at = when(decision.get("saved_at"))
    day = f" on {decision['saved_at'][:10]}" if at is not None else ""
    done = "fixed" if decision.get("decision") == FIXED else "confirmed"
    control = f"{decision['control']}: " if decision.get("control") is not None else ""
    return f"{control}{done} by {who}{day}: served as fully reliable (score 1) until it changes"


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
    scales: Scales,
    fixed: Slips | None = None,
    contradicted: int = 0,
) -> dict:
    """``entry`` (a stored prediction) as served: each annotation whose current content a
    reviewer confirmed counts as score 1; each other one's score, on its version's scale
    (``scales``, :func:`on_scale`), is multiplied by
    :data:`~subregweigh.served.SLIP_BOOST` for every repeat of a slip reviewers fixed elsewhere
    (``fixed``), so the same convention slip moves up the queue, and for every decided copy of
    the task that labels it otherwise (``contradicted``: :mod:`backend.review.copies`); the
    task's score is the lowest of
    its annotations'. A project weighing several controls keeps a record per annotation and
    control, each confirmed on its own: the task serves 1 once every control's record is. When
    every annotation is confirmed, the result is the confirmed annotation's own, each control's
    (:func:`confirmed_result`; empty for a decision made before decisions kept it: the
    scout's suggestion is never shown as confirmed). A copy when anything changes; the stored
    entry is never modified."""
    records = entry.get("annotations") or ()
    scaled = _scaled(records, scales)
    if not records or not (confirmed or (fixed and fixed.counts) or contradicted or scaled):
        return entry
    first = first_control(entry)
    keys = [found(confirmed, task, r, first) for r in records]
    mine = [key is not None for key in keys]
    repeats = [0 if ok else record_repeats(task, r, fixed, first) for r, ok in zip(records, mine)]
    if not any(mine) and not any(repeats) and not contradicted and not scaled:
        return entry
    score = task_score(
        _score(r, ok, n, contradicted, scales) for r, ok, n in zip(records, mine, repeats)
    )
    out = {**entry, "score": score, "confirmed": sum(mine)}
    if contradicted:
        out["contradicted"] = contradicted
    if any(repeats):
        out["slip_repeats"] = sum(repeats)
    if all(mine):
        out["result"] = _confirmed_results(records, keys, confirmed)
    return out


def _confirmed_results(records, keys, confirmed) -> list[dict]:
    """A confirmed task's result: per control (one for a project of one), the first of its
    decisions that kept the annotation's regions (:func:`confirmed_result`)."""
    if not isinstance(confirmed, Mapping):
        return []
    shown: dict = {}
    for record, key in zip(records, keys):
        decision = confirmed[key]
        if "result" in decision:
            shown.setdefault(record.get("control"), decision)
    return [region for decision in shown.values() for region in confirmed_result(decision)]

"""What a reviewer's save decides about one annotation: pure functions, no I/O.

Two ways to decide, by the project's labeling config
(:func:`backend.labelstudio.tasks.parse_label_config`):

* **the review control** (``<Choices name="srw_review">``,
  :data:`~subregweigh.io.labelstudio.REVIEW_CONTROL`): only it decides. *correct* confirms the
  annotation as saved, *wrong (fixed)* records a fix, *unsure* is recorded and changes no score.
  A save without a choice that changes the labels is a fix too, when another user than the
  annotator made it (a reviewer retyping a region need not also choose *wrong (fixed)*); one
  that changes nothing withdraws the annotation's decision. Every save that carries a choice is
  a decision by the user who saved it; the annotator's own plain saves are edits.
* **saves** (a config without the control): an annotation saved with the labels it was scored
  with is confirmed, with other labels fixed; the same labels confirm only when Label Studio
  saved the annotation after the baseline (the content and time a training or a rescore last
  read), so a replayed or made-up event decides nothing.

Either way a decision is **vouched for by Label Studio** or it is nothing (issue 58): it counts
only when Label Studio names the user who saved the annotation, its ``updated_by`` (set by every
save made through Label Studio's API or UI, ``null`` on an imported annotation, which therefore
never decides), and shows the save newer than the baseline the version scored (``updated_at``).
An import's ``completed_by`` is whatever the importer wrote, so it never names a reviewer, and a
replayed or id-only event finds no newer save and decides nothing new (:func:`vouched_save`).

A save by the annotator herself (``updated_by`` is ``completed_by``) is a **self-review**: kept
as :data:`SELF_REVIEWED`, it neither confirms nor counts as a fix, and never replaces another
reviewer's decision, unless the project allows it (``self_review``), when it decides as any
save does and is marked ``self`` (:func:`outcome`). A decision names its reviewer with the time
Label Studio saved it (seen through a real Label Studio 1.23.2: a second user's ``PATCH`` sets
``updated_by`` to that user and leaves ``completed_by``). A fix keeps the content it was made
against (``original``); a later save that brings the labels back to it **reverts** the fix,
which then stops counting as one.

:func:`judged` reads one annotation beside what the serving version scored; :func:`outcome`
gives the annotation's new decision from it and its current one. :mod:`backend.review.reviews` keeps
them.

A project weighing **several labeling controls** (issue 62) is judged **per control**: each
control's record of an annotation is read and decided on its own, and the decision names its
control (``control``; a decision kept before decisions named theirs is the first control's,
:func:`annotation_key`). A save fixes the controls whose labels it changed and confirms the
others; with the review control, *correct* confirms every control's record, and *wrong (fixed)*
fixes those whose labels changed against what was scored and confirms the others
(:func:`beside_fixes`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime

from subregweigh import review
from subregweigh.example import Example
from subregweigh.io.dataset import example_record
from subregweigh.io.labelstudio import REVIEW_CHOICES, annotator
from subregweigh.report import SELF_REVIEWED  # the report counts it apart, under this name

CONFIRMED, FIXED, UNSURE, REVERTED = "confirmed", "fixed", "unsure", "reverted"
WITHDRAWN = "withdrawn"  # the history's word for a choice cleared: the decision is gone
# the review control's choices -> the decisions they make
CHOSEN = dict(zip(REVIEW_CHOICES, (CONFIRMED, FIXED, UNSURE)))
# Decisions that say whether a flag was right: what the flags' precision counts.
COUNTED = (CONFIRMED, FIXED)
BY_CONTROL, BY_SAVE = "control", "save"
_CONTENT = ("words", "tags", "text", "label", "labels")


def annotation_key(annotation: str, control: str | None = None) -> str:
    """Where ``reviews.json`` keeps the decision on ``annotation`` (``"task/annotation"``): that
    id for a project weighing one control; ``"task/annotation/<control>"`` for one control's
    record of a project weighing several (a decision kept under the bare id, naming no control,
    is the first control's). Task and annotation ids are numbers, so the control's name may
    hold anything."""
    return annotation if control is None else f"{annotation}/{control}"


def content_hash(record: Mapping) -> str:
    """A short hash of an annotation record's words and labels (what the scout scores): equal
    for an annotation updated unchanged, different once a label or the text changes."""
    payload = {key: record[key] for key in _CONTENT if key in record}
    return hashlib.sha1(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def when(value) -> float | None:
    """Label Studio's ``updated_at`` (ISO 8601) as seconds, None when missing or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def review_choice(annotation: Mapping, control: str) -> str | None:
    """The review control's choice in ``annotation``'s result; None when none is chosen."""
    for region in annotation.get("result") or ():
        if isinstance(region, Mapping) and region.get("from_name") == control:
            value = region.get("value")
            choices = value.get("choices") if isinstance(value, Mapping) else None
            if isinstance(choices, list) and choices and isinstance(choices[0], str):
                return choices[0]
    return None


def user_id(value) -> int | str | None:
    """The user id in a ``completed_by`` or ``updated_by`` (an id, or ``{"id", "email"}`` as
    :func:`backend.labelstudio.tasks.name_annotators` leaves it); None when there is none."""
    if isinstance(value, Mapping):
        value = value.get("id")
    if isinstance(value, bool) or not isinstance(value, (int, str)) or value == "":
        return None
    return value


def reviewer(annotation: Mapping) -> str:
    """Who Label Studio says saved ``annotation`` last: its ``updated_by``, named as annotators
    are (an email where the backend could name the user, else ``"user <id>"``); ``""`` when
    Label Studio names nobody (an imported annotation, never saved through Label Studio since):
    such an annotation decides nothing. ``completed_by`` is never a reviewer: an import sets it
    to any user it likes."""
    return annotator({"completed_by": annotation.get("updated_by")})


def self_review(annotation: Mapping) -> bool:
    """Whether ``annotation`` was last saved by the user it was made by (``updated_by`` is
    ``completed_by``): its annotator reviewing her own work."""
    saver = user_id(annotation.get("updated_by"))
    return saver is not None and saver == user_id(annotation.get("completed_by"))


def own_regions(annotation: Mapping, from_name: str) -> list[dict]:
    """``annotation``'s regions of the labeling control ``from_name``, as a prediction holds
    them (without ids, notes or scores): what a confirmed task's prediction shows."""
    return [
        {key: region[key] for key in ("from_name", "to_name", "type", "value") if key in region}
        for region in annotation.get("result") or ()
        if isinstance(region, Mapping) and region.get("from_name") == from_name
    ]


def judged(
    key: str,
    ex: Example,
    spec,
    record: Mapping,
    annotation: Mapping,
    version: str,
    control: str | None = None,
) -> dict:
    """What Label Studio's ``annotation`` (read into ``ex``) is beside the ``record`` the
    version scored: its content, when and by whom it was saved, its review choice where the
    config has the control, and (NER) the slips a fix of it makes and the convention pairs the
    scored annotation held (:func:`subregweigh.review.convention_pairs`). ``spec``: the control
    weighed (one of :meth:`~subregweigh.io.labelstudio.LabelingSpec.each`); ``control``: its
    name where the project weighs several (None: one, the decision names none)."""
    task, ann = key.split("/", 1)
    slips, pairs = [], []
    if "words" in record and "tags" in record:
        before = Example(id=key, words=tuple(record["words"]), label=tuple(record["tags"]))
        slips = sorted(review.slip_keys(before, ex)) if before.words == ex.words else []
        pairs = sorted(review.convention_pairs(before.words, before.label))
    out = {
        "task": task,
        "annotation": ann,
        "slips": [list(s) for s in slips],
        "pairs": [list(p) for p in pairs],
        "hash": content_hash(example_record(ex, spec.task)),
        "saved_at": annotation.get("updated_at"),
        "reviewer": reviewer(annotation),
        "self": self_review(annotation),
        "result": own_regions(annotation, spec.from_name),
        "scored_hash": record["hash"],
        "scored_words": {k: record[k] for k in ("words", "tags") if k in record},
        "baseline": record.get("saved") or {},
        "score": record["score"],
        "labels": record["labels"],
        "version": version,
    }
    if control is not None:
        out["control"] = control
    if spec.review:
        out["choice"] = review_choice(annotation, spec.review)
    return out


def beside_fixes(judged: list[dict]) -> list[dict]:
    """``judged`` (:func:`judged`, several controls' records of the same annotations, a
    project with the review control) with each *wrong (fixed)* kept for the controls whose
    labels changed against what was scored: each other control's record of that annotation is
    marked ``as_scored``, which the choice confirms (:func:`outcome`). Where no control's labels
    changed, the choice stands for every one of them, as for a project of one control: nothing
    says which was wrong. In place; returns ``judged``."""
    fixes = [j for j in judged if CHOSEN.get(j.get("choice")) == FIXED]
    changed: dict[str, set] = {}
    for j in fixes:
        if j["hash"] != j["scored_hash"]:
            changed.setdefault(f"{j['task']}/{j['annotation']}", set()).add(j.get("control"))
    for j in fixes:
        mine = changed.get(f"{j['task']}/{j['annotation']}")
        if mine and j.get("control") not in mine:
            j["as_scored"] = True
    return judged


def vouched_save(j: Mapping) -> bool:
    """Whether Label Studio vouches for the save ``j`` (:func:`judged`) as one made after the
    version scored the annotation: a named user saved it (``updated_by``), at a time Label
    Studio gives, newer than the baseline the scoring read (``saved``). An imported annotation
    (no ``updated_by``), one scored without a read from Label Studio (no baseline) and a save
    the scoring already read decide nothing."""
    saved, scored = when(j["saved_at"]), when(j["baseline"].get("at"))
    return bool(j["reviewer"]) and saved is not None and scored is not None and saved > scored


def _by_save(j: Mapping, prior: Mapping) -> str | None:
    """The decision a save makes in a project without the control, or None."""
    if not vouched_save(j):
        return None
    # against the newer of the two: what Label Studio held when last read, or what was last
    # decided (a replay of the decided save finds nothing newer)
    base_at, base_hash = when(j["baseline"].get("at")), j["baseline"].get("hash")
    last = when(prior.get("saved_at"))
    if last is not None and prior.get("hash") is not None and last >= base_at:
        base_at, base_hash = last, prior["hash"]
    if when(j["saved_at"]) <= base_at:
        return None  # decided already
    return FIXED if j["hash"] != (base_hash or j["scored_hash"]) else CONFIRMED


def _by_control(j: Mapping, prior: Mapping) -> str | None:
    """The decision a save makes in a project with the control (:data:`WITHDRAWN` for a
    cleared choice), or None."""
    if not vouched_save(j):
        return None
    mine = prior.get("by") == BY_CONTROL
    if j["choice"] is None:
        # another user's save of other labels is their fix, choice or not: a fix of one
        # region's type takes 3 clicks (the region, its label, Update; issue 61)
        if not j.get("self") and _by_save(j, prior) == FIXED:
            return FIXED
        # a cleared choice withdraws; a fix made without one has none to clear
        return WITHDRAWN if mine and not prior.get("implied") else None
    decision = CHOSEN.get(j["choice"])
    if decision is None:
        return None  # a choice the control does not define: nothing to read
    if decision == FIXED and j.get("as_scored"):
        decision = CONFIRMED  # another control's labels were the fix (beside_fixes)
    last = when(prior.get("saved_at"))
    if mine and last is not None and when(j["saved_at"]) <= last:
        return None  # read before
    return decision


def vouched(decision: str, control: bool) -> bool:
    """Whether a decision vouches for the annotation as it now is: a confirmation, or a fix made
    through the review control (the reviewer fixed it, with *wrong (fixed)* or without a
    choice: the labels it now holds are the reviewer's). A fix by a plain save of a project
    without the control is an edit the scout rescores."""
    return decision == CONFIRMED or (control and decision == FIXED)


def outcome(
    j: Mapping, prior: Mapping, control: bool, seen: float, allow_self: bool = False
) -> dict | None:
    """The annotation's decision after the save ``j`` (:func:`judged`), given its current one
    ``prior`` ({} for none); ``seen``: the score the reviewer saw (as served); ``allow_self``:
    the project lets an annotator review her own annotation (``self_review``). None: nothing
    decided; ``{"decision": WITHDRAWN}``: the decision is withdrawn.

    A fix records the content it was made against (``original``); once the labels are back to
    it, the fix is reverted: ``fixed`` turns False and its slips go (a *wrong (fixed)* or a
    save of other labels then reads :data:`REVERTED`).

    A self-review the project does not allow reads :data:`SELF_REVIEWED` (what it would have
    been is its ``chosen``): no confirmation, no fix, no slips, no held pairs, and not among the
    ``reviewers``; a fix a reviewer made before keeps counting. On content another reviewer
    already decided it changes nothing (None)."""
    decision = _by_control(j, prior) if control else _by_save(j, prior)
    if decision is None or decision == WITHDRAWN:
        return None if decision is None else {"decision": WITHDRAWN}
    selfish = bool(j.get("self")) and not allow_self
    reviewed = prior.get("decision") not in (None, SELF_REVIEWED)
    if selfish and reviewed and prior.get("hash") == j["hash"]:
        return None  # the annotator re-saved what a reviewer decided: it stands
    chosen = decision
    # (a fix kept before fixes kept their original: the content its slips were found in)
    original = prior.get("original", prior.get("scored_hash") if prior.get("fixed") else None)
    reverted = original is not None and j["hash"] == original
    if decision == FIXED and reverted:
        decision = REVERTED
    elif decision == FIXED and original is None and j["hash"] != j["scored_hash"] and not selfish:
        original = j["scored_hash"]  # the labels the fix changed
    if selfish:
        decision = SELF_REVIEWED
    fixed = decision == FIXED or (bool(prior.get("fixed")) and not reverted)
    if decision == FIXED and j["slips"]:
        slips = {"slips": j["slips"], "scored_hash": j["scored_hash"]}
    elif fixed:
        slips = {k: prior[k] for k in ("slips", "scored_hash") if k in prior}
    else:
        slips = {}
    who = j["reviewer"]
    first = prior if reviewed else {}  # the score, labels and version first decided
    reviewers = dict(prior.get("reviewers") or {})
    if not selfish:  # each reviewer's latest decision on the annotation: agreement in the report
        reviewers[who] = decision
    return {
        "decision": decision,
        "chosen": chosen,
        "by": BY_CONTROL if control else BY_SAVE,
        **{k: j[k] for k in ("task", "annotation", "hash", "saved_at", "reviewer")},
        **({"control": j["control"]} if j.get("control") is not None else {}),
        **({"self": True} if j.get("self") else {}),
        # a fix saved without a choice (_by_control): a later unchanged save keeps it
        **({"implied": True} if control and j.get("choice") is None else {}),
        "score": first.get("score", seen),
        **{k: first.get(k, j[k]) for k in ("labels", "version")},
        "fixed": fixed,
        **({"original": original} if original is not None else {}),
        "reviewers": reviewers,
        **({"result": j["result"]} if vouched(decision, control) else {}),
        **slips,
        # what the reviewer saw and left: a decision's unchanged pairs weigh against a slip
        **({"pairs": j["pairs"]} if j.get("pairs") and not selfish else {}),
    }

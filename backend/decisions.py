"""What a reviewer's save decides about one annotation: pure functions, no I/O.

Two ways to decide, by the project's labeling config (:func:`backend.tasks.parse_label_config`):

* **the review control** (``<Choices name="srw_review">``,
  :data:`~subregweigh.io.labelstudio.REVIEW_CONTROL`): only it decides. *correct* confirms the
  annotation as saved, *wrong (fixed)* records a fix, *unsure* is recorded and changes no score;
  a save without a choice withdraws the annotation's decision. Every save that carries a choice
  is a decision by the user who saved it; plain saves of a project with the control are edits.
* **saves** (a config without the control): an annotation saved with the labels it was scored
  with is confirmed, with other labels fixed; the same labels confirm only when Label Studio
  saved the annotation after the baseline (the content and time a training or a rescore last
  read), so a replayed or made-up event decides nothing.

Either way a decision names its **reviewer**: the user Label Studio 1.23 reports as the one who
saved the annotation, its ``updated_by`` (set by every update, ``null`` until the first), else
its ``completed_by`` (who created it) (:func:`reviewer`; seen through a real Label Studio
1.23.2: a second user's ``PATCH`` sets ``updated_by`` to that user and leaves ``completed_by``),
with the time Label Studio saved it (``updated_at``). A fix keeps the content it was made
against (``original``); a later save that brings the labels back to it **reverts** the fix,
which then stops counting as one.

:func:`judged` reads one annotation beside what the serving version scored; :func:`outcome`
gives the annotation's new decision from it and its current one. :mod:`backend.reviews` keeps
them.
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

CONFIRMED, FIXED, UNSURE, REVERTED = "confirmed", "fixed", "unsure", "reverted"
WITHDRAWN = "withdrawn"  # the history's word for a choice cleared: the decision is gone
# the review control's choices -> the decisions they make
CHOSEN = dict(zip(REVIEW_CHOICES, (CONFIRMED, FIXED, UNSURE)))
# Decisions that say whether a flag was right: what the flags' precision counts.
COUNTED = (CONFIRMED, FIXED)
BY_CONTROL, BY_SAVE = "control", "save"
_CONTENT = ("words", "tags", "text", "label", "labels")


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


def reviewer(annotation: Mapping) -> str:
    """Who saved ``annotation`` last: its ``updated_by``, else its ``completed_by``, named as
    annotators are (an email where the backend could name the user, else ``"user <id>"``);
    ``""`` when Label Studio says neither."""
    for key in ("updated_by", "completed_by"):
        name = annotator({"completed_by": annotation.get(key)})
        if name:
            return name
    return ""


def own_regions(annotation: Mapping, from_name: str) -> list[dict]:
    """``annotation``'s regions of the labeling control ``from_name``, as a prediction holds
    them (without ids, notes or scores): what a confirmed task's prediction shows."""
    return [
        {key: region[key] for key in ("from_name", "to_name", "type", "value") if key in region}
        for region in annotation.get("result") or ()
        if isinstance(region, Mapping) and region.get("from_name") == from_name
    ]


def judged(key: str, ex: Example, spec, record: Mapping, annotation: Mapping, version: str) -> dict:
    """What Label Studio's ``annotation`` (read into ``ex``) is beside the ``record`` the
    version scored: its content, when and by whom it was saved, its review choice where the
    config has the control, and (NER) the slips a fix of it makes and the convention pairs the
    scored annotation held (:func:`subregweigh.review.convention_pairs`)."""
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
        "result": own_regions(annotation, spec.from_name),
        "scored_hash": record["hash"],
        "scored_words": {k: record[k] for k in ("words", "tags") if k in record},
        "baseline": record.get("saved") or {},
        "score": record["score"],
        "labels": record["labels"],
        "version": version,
    }
    if spec.review:
        out["choice"] = review_choice(annotation, spec.review)
    return out


def _by_save(j: Mapping, prior: Mapping) -> str | None:
    """The decision a save makes in a project without the control, or None."""
    # the newer of the two: what Label Studio held when last read, or what was last decided
    known = [
        (when(j["baseline"].get("at")), j["baseline"].get("hash")),
        (when(prior.get("saved_at")), prior.get("hash")),
    ]
    known = [(at, h) for at, h in known if h is not None]
    dated = [(at, h) for at, h in known if at is not None]
    base_at, base_hash = max(dated) if dated else (None, None)
    if base_hash is None:
        base_hash = known[-1][1] if known else j["scored_hash"]
    saved = when(j["saved_at"])
    if saved is not None and base_at is not None and saved <= base_at:
        return None  # not saved since: read before, or decided already
    if j["hash"] != base_hash:
        return FIXED
    if saved is None or base_at is None:
        return None  # the same labels, and no time to prove a save since
    return CONFIRMED


def _by_control(j: Mapping, prior: Mapping) -> str | None:
    """The decision a save makes in a project with the control (:data:`WITHDRAWN` for a
    cleared choice), or None."""
    mine = prior.get("by") == BY_CONTROL
    if j["choice"] is None:
        return WITHDRAWN if mine else None
    decision = CHOSEN.get(j["choice"])
    if decision is None:
        return None  # a choice the control does not define: nothing to read
    saved, last = when(j["saved_at"]), when(prior.get("saved_at"))
    if mine and saved is not None and last is not None and saved <= last:
        return None  # read before
    if mine and saved is None and (decision, j["hash"]) == (prior.get("chosen"), prior.get("hash")):
        return None  # no time, and nothing changed
    return decision


def vouched(decision: str, control: bool) -> bool:
    """Whether a decision vouches for the annotation as it now is: a confirmation, or a fix made
    through the review control (the reviewer fixed it and chose *wrong (fixed)*: the labels it
    now holds are the reviewer's). A fix by a plain save is an edit the scout rescores."""
    return decision == CONFIRMED or (control and decision == FIXED)


def outcome(j: Mapping, prior: Mapping, control: bool, seen: float) -> dict | None:
    """The annotation's decision after the save ``j`` (:func:`judged`), given its current one
    ``prior`` ({} for none); ``seen``: the score the reviewer saw (as served). None: nothing
    decided; ``{"decision": WITHDRAWN}``: the decision is withdrawn.

    A fix records the content it was made against (``original``); once the labels are back to
    it, the fix is reverted: ``fixed`` turns False and its slips go (a *wrong (fixed)* or a
    save of other labels then reads :data:`REVERTED`)."""
    decision = _by_control(j, prior) if control else _by_save(j, prior)
    if decision is None or decision == WITHDRAWN:
        return None if decision is None else {"decision": WITHDRAWN}
    chosen = decision
    # (a fix kept before fixes kept their original: the content its slips were found in)
    original = prior.get("original", prior.get("scored_hash") if prior.get("fixed") else None)
    reverted = original is not None and j["hash"] == original
    if decision == FIXED and reverted:
        decision = REVERTED
    elif decision == FIXED and original is None and j["hash"] != j["scored_hash"]:
        original = j["scored_hash"]  # the labels the fix changed
    fixed = decision == FIXED or (bool(prior.get("fixed")) and not reverted)
    if decision == FIXED and j["slips"]:
        slips = {"slips": j["slips"], "scored_hash": j["scored_hash"]}
    elif fixed:
        slips = {k: prior[k] for k in ("slips", "scored_hash") if k in prior}
    else:
        slips = {}
    who = j["reviewer"]
    first = prior if prior.get("decision") else {}  # the score, labels and version first decided
    return {
        "decision": decision,
        "chosen": chosen,
        "by": BY_CONTROL if control else BY_SAVE,
        **{k: j[k] for k in ("task", "annotation", "hash", "saved_at", "reviewer")},
        "score": first.get("score", seen),
        **{k: first.get(k, j[k]) for k in ("labels", "version")},
        "fixed": fixed,
        **({"original": original} if original is not None else {}),
        # each reviewer's latest decision on the annotation: agreement in the report
        "reviewers": {**(prior.get("reviewers") or {}), who: decision},
        **({"result": j["result"]} if vouched(decision, control) else {}),
        **slips,
        # what the reviewer saw and left: a decision's unchanged pairs weigh against a slip
        **({"pairs": j["pairs"]} if j.get("pairs") else {}),
    }

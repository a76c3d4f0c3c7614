"""Copies that disagree, as the queue serves them: the engine's :mod:`subregweigh.copies` over a
version's stored predictions and the reviewers' decisions.

* :func:`index`: a version's stored annotations (``scores.json``) read into the engine's
  :class:`~subregweigh.copies.Copies` (tasks with the same text, or NER the same entity string,
  labelled differently), kept per process until scores.json changes (:data:`copies_view`).
* :func:`state`: with the decisions, which linked tasks a reviewer decided (every annotation's
  current content confirmed, or fixed) and how many decided copies contradict each task
  (:func:`subregweigh.copies.contradicted`, which the served score halves by:
  :func:`subregweigh.served.served_score`).
* :func:`with_notes`: a served prediction with a note naming the copies that disagree (*task
  260 labels 'Raw Illest' as person*; a fixed copy's label suggested), on the region of the
  entity concerned (NER) or the choice (classification).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from backend.review.decisions import CONFIRMED, FIXED
from backend.review.served import decided_key, first_control, found
from backend.store.scores_view import ScoresView
from subregweigh import copies as engine
from subregweigh.copies import Copies, Labelled


def _labelled(task: str, records: Sequence[Mapping]) -> Labelled | None:
    if not records:
        return None
    first = records[0]
    if "words" in first:
        words = tuple(first["words"])
        labels = tuple(tuple(r["tags"]) for r in records if "tags" in r)
    else:
        words = tuple(str(first.get("text", "")).split())
        labels = tuple(
            (r["label"],) if "label" in r else tuple(sorted(r.get("labels") or ())) for r in records
        )
    return Labelled(task, words, labels)


def index(scores: Mapping[str, dict]) -> Copies:
    """The copies that disagree among ``scores`` (task id -> stored prediction, its
    ``annotations`` records: NER ``words`` and ``tags``, classification ``text`` and ``label``
    or ``labels``). A project of several labeling controls (records naming their ``control``,
    :func:`backend.serving.controls.merge_entries`) finds each control's apart
    (:func:`subregweigh.copies.by_control`): two tasks disagree where one control labels them
    otherwise, never by one control's labels against another's."""
    per_control: dict[str | None, dict[str, list[Mapping]]] = {}
    for task, entry in scores.items():
        for record in entry.get("annotations") or ():
            if isinstance(record, Mapping):
                control = record.get("control")
                per_control.setdefault(control, {}).setdefault(task, []).append(record)
    each = {control: _find(records) for control, records in per_control.items()}
    if set(each) <= {None}:  # one control: its records name none
        return each.get(None) or engine.find_copies([], "classification")
    return engine.by_control({c: copies for c, copies in each.items() if c is not None})


def _find(records: Mapping[str, list[Mapping]]) -> Copies:
    """The copies among one control's records (task id -> its records)."""
    items = [item for task, rs in records.items() if (item := _labelled(task, rs))]
    ner = any("words" in rs[0] for rs in records.values())
    return engine.find_copies(items, "ner" if ner else "classification")


VIEWS_CACHED = 8  # versions whose copies a process keeps
# copies_view(store, version): index() of the version's stored scores, kept until they change.
copies_view = ScoresView(index, VIEWS_CACHED)


@dataclass(frozen=True)
class CopiesState:
    """The copies of a version's tasks with what reviewers decided of them.

    Attributes
    ----------
    copies : Copies
        :func:`index` of the version's scores.
    decided : dict
        Task id -> ``"confirmed"`` or ``"fixed"``, for the linked tasks whose every stored
        annotation's current content a reviewer confirmed or fixed.
    contradicted : dict
        Task id -> how many decided copies label it otherwise
        (:func:`subregweigh.copies.contradicted`).
    """

    copies: Copies
    decided: dict[str, str] = field(default_factory=dict)
    contradicted: dict[str, int] = field(default_factory=dict)
    members: dict = field(default_factory=dict, repr=False)


def decisions_by_content(reviews: Mapping) -> dict[str, str]:
    """Content key (``"task/annotation/hash"``, :func:`backend.review.served.decided_key`) ->
    ``"confirmed"`` or ``"fixed"``: each annotation content a reviewer confirmed or saved as the
    fix (a reverted fix, *unsure* and a self-review say nothing of its copies)."""
    return {
        decided_key(d): d["decision"]
        for d in reviews["decisions"].values()
        if d.get("decision") in (CONFIRMED, FIXED) and d.get("hash")
    }


def state(copies: Copies, scores: Mapping[str, dict], reviews: Mapping) -> CopiesState:
    """``copies`` (:func:`index` of ``scores``, a version's stored predictions, all of them)
    with ``reviews`` (``reviews.json``'s content): which linked tasks are decided, and how many
    decided copies contradict each task. Cost: the decisions, and the groups holding a decided
    task."""
    if not copies.groups:
        return CopiesState(copies)
    by_content = decisions_by_content(reviews)
    decided: dict[str, str] = {}
    for task in {key.split("/", 1)[0] for key in by_content}:
        if task not in copies.of_task or task not in scores:
            continue
        records = scores[task].get("annotations") or ()
        first = first_control(scores[task])
        made = [by_content.get(found(by_content, task, r, first)) for r in records]
        if made and all(made):
            decided[task] = FIXED if FIXED in made else CONFIRMED
    return CopiesState(
        copies,
        decided,
        engine.contradicted(copies, decided),
        engine.decided_members(copies, decided),
    )


def linked_tasks(copies: Copies, tasks) -> set[str]:
    """Every task in a group of ``tasks`` (their copies that disagree, and those that agree
    with them there), ``tasks`` left out: whose notes or served scores a change of ``tasks``
    may change."""
    out: set[str] = set()
    for task in tasks:
        for g in copies.of_task.get(str(task), ()):
            out.update(copies.groups[g].values)
    return out - {str(t) for t in tasks}


def _normalised(text) -> str:
    return " ".join(str(text or "").split())


def with_notes(task: str, entry: dict, copies: CopiesState) -> dict:
    """``entry`` (a served prediction) with a note for each link of ``task``
    (:func:`subregweigh.copies.links`, bounded): added to the meta of the region over the link's
    entity string (NER; else the first region), or of the choice (classification). A copy when
    a note is added, its ``copies`` the tasks named; ``entry`` as it is when ``task`` has no
    copies that disagree, or its prediction has no region to hold a note."""
    if task not in copies.copies.of_task or not entry.get("result"):
        return entry
    linked = engine.links(copies.copies, task, copies.decided, copies.members)
    if not linked:
        return entry
    result = [dict(region) for region in entry["result"]]
    noted: list[str] = []
    for link in linked:
        said = engine.link_note(link)
        # several controls: the note goes on a region of the link's control, and names it
        mine = [r for r in result if link.control is None or r.get("from_name") == link.control]
        if not mine:
            continue
        noted.extend(other.task for other in link.named)
        where = next(
            (
                r
                for r in mine
                if link.entity is not None
                and _normalised((r.get("value") or {}).get("text")) == link.entity
            ),
            mine[0],
        )
        if link.control is not None:
            said = f"{link.control}: {said}"
        meta = dict(where.get("meta") or {})
        meta["text"] = [*(meta.get("text") or ()), said]
        where["meta"] = meta
    if not noted:
        return entry
    return {**entry, "result": result, "copies": noted}

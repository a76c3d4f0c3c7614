"""Copies that disagree: tasks with the same text, or (NER) the same entity string, labelled
differently, linked; pure functions over one :class:`Labelled` per task, by hashing alone.

* **The same text**: two tasks whose words are the same (whitespace normalised, case kept)
  and whose labels differ (classification: the classes; NER: the tag sequences) are copies
  that disagree.
* **The same entity string** (NER): two tasks that annotate the same words as an entity
  (``'Raw Illest'``, case kept) with different types disagree on it.

:func:`find_copies` groups the tasks by each key (a text, an entity string) in one pass, and
keeps the groups holding two labels or more (:class:`CopyGroup`): its cost is the number of
tasks and annotated entities, never the number of pairs; a project of several labeling
controls finds each control's copies apart and joins them (:func:`by_control`), each group
naming its control. :func:`links` reads one task's links
from its groups, naming at most :data:`MAX_NAMED` other tasks per group and counting the rest;
:func:`contradicted` counts, for each task, the decided copies (a reviewer confirmed or fixed
them) that label it otherwise, the number the served score halves by
(:func:`subregweigh.served.served_score`); :func:`note` says a task's links in one bounded
sentence, a fixed copy's label suggested.

Example (NER)::

    copies = find_copies([Labelled("12", words, (tags_as_group,)),
                          Labelled("260", words, (tags_as_person,))], "ner")
    note(links(copies, "12"))
    # "task 260, the same text, labels 'Raw Illest' as person"
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from subregweigh.example import Task
from subregweigh.tags import entity_spans

TEXT, ENTITY = "text", "entity"
CONFIRMED, FIXED = "confirmed", "fixed"  # what a decided copy's decision is
MAX_NAMED = 3  # other tasks a link names, the rest counted ("and 4 more")
MAX_LINKS = 3  # links (groups) a task's note says, the rest counted
MAX_CONTRADICTED = 10  # decided copies counted against a task: 0.5**10 is the bottom already

Kind = Literal["text", "entity"]


@dataclass(frozen=True)
class Labelled:
    """One task's text and labels, as :func:`find_copies` reads them.

    Attributes
    ----------
    task : str
        The task's id.
    words : tuple of str
        Its text, split on whitespace (so normalised: ``"a  b"`` and ``"a b"`` are the same).
    labels : tuple of tuple of str
        One label per annotation (:attr:`subregweigh.example.Example.label`): NER one IOB2 tag
        per word, classification the sorted classes. Empty: unannotated, linked to nothing.
    """

    task: str
    words: tuple[str, ...]
    labels: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class CopyGroup:
    """Tasks sharing one key that label it in two ways or more.

    Attributes
    ----------
    kind : {"text", "entity"}
        What the tasks share: the same text, or (NER) an entity string.
    key : str
        The text (words joined by single spaces) or the entity string.
    values : dict
        Task id -> what it labels the key as: for ``"text"`` the sorted distinct labels of
        its annotations (each a tuple: tags or classes), for ``"entity"`` the sorted entity
        types its annotations give the string. At least two distinct values.
    task : {"ner", "classification"}, default "ner"
        What the labels are: IOB2 tag sequences or classes.
    control : str or None, default None
        The labeling control whose labels these are, in a project of several
        (:func:`by_control`); None for one.
    """

    kind: Kind
    key: str
    values: dict[str, tuple]
    task: Task = "ner"
    control: str | None = None
    by_value: dict[tuple, tuple[str, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        by_value: dict[tuple, list[str]] = defaultdict(list)
        for task, value in self.values.items():
            by_value[value].append(task)
        object.__setattr__(self, "by_value", {v: tuple(ts) for v, ts in by_value.items()})

    def others(self, task: str) -> int:
        """How many tasks of the group label the key otherwise than ``task``."""
        return len(self.values) - len(self.by_value[self.values[task]])


@dataclass(frozen=True)
class Copies:
    """The copies of a set of tasks that disagree (:func:`find_copies`).

    Attributes
    ----------
    groups : tuple of CopyGroup
        Every group of two labels or more, texts first, then entity strings (several controls:
        each control's in turn, :func:`by_control`).
    of_task : dict
        Task id -> the indices in ``groups`` of the groups it is in; a task linked to nothing
        is not a key.
    """

    groups: tuple[CopyGroup, ...]
    of_task: dict[str, tuple[int, ...]]

    def linked(self, task: str) -> set[str]:
        """Every task that disagrees with ``task`` in one of its groups (all of them: for
        tests and small projects; :func:`links` is the bounded reading)."""
        out: set[str] = set()
        for g in self.of_task.get(task, ()):
            group = self.groups[g]
            out.update(t for t, v in group.values.items() if v != group.values[task])
        return out


def normalised(words: Iterable[str]) -> str:
    """The key of a text: its words joined by single spaces (case kept)."""
    return " ".join(" ".join(words).split())


def _entities(words: Sequence[str], tags: Sequence[str]) -> Iterable[tuple[str, str]]:
    for etype, start, end in entity_spans(tags):
        yield normalised(words[start:end]), etype


def find_copies(tasks: Sequence[Labelled], kind: Task) -> Copies:
    """Group ``tasks`` by their text and (``kind="ner"``) by each entity string they annotate,
    and keep the groups whose tasks label the key in two ways or more.

    Parameters
    ----------
    tasks : sequence of Labelled, shape (n_tasks,)
        Each task once (a repeated id: the last one counts).
    kind : {"ner", "classification"}

    Returns
    -------
    Copies
        Built in one pass over the tasks and their entities (dicts keyed by text): no pair of
        tasks is compared.
    """
    texts: dict[str, dict[str, tuple]] = defaultdict(dict)
    strings: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    for item in tasks:
        labels = tuple(sorted(set(item.labels)))
        if not labels:
            continue
        texts[normalised(item.words)][item.task] = labels
        if kind == "ner":
            for tags in labels:
                for string, etype in _entities(item.words, tags):
                    strings[string][item.task].add(etype)
    groups = [
        CopyGroup(TEXT, key, values, kind)
        for key, values in texts.items()
        if len(set(values.values())) > 1
    ]
    groups += [
        CopyGroup(ENTITY, key, {t: tuple(sorted(types)) for t, types in by_task.items()}, kind)
        for key, by_task in strings.items()
        if len({frozenset(types) for types in by_task.values()}) > 1
    ]
    return _indexed(groups)


def _indexed(groups: Sequence[CopyGroup]) -> Copies:
    of_task: dict[str, list[int]] = defaultdict(list)
    for g, group in enumerate(groups):
        for task in group.values:
            of_task[task].append(g)
    return Copies(tuple(groups), {t: tuple(gs) for t, gs in of_task.items()})


def by_control(per_control: Mapping[str, Copies]) -> Copies:
    """The copies of a project of several labeling controls, from each control's
    (:func:`find_copies` over that control's labels alone): every group kept, naming its
    control, so that two tasks disagree only where one control labels them otherwise."""
    return _indexed(
        [
            replace(group, control=control)
            for control, copies in per_control.items()
            for group in copies.groups
        ]
    )


# ------------------------------------------------------------------------------ decisions


def contradicted(copies: Copies, decided: Mapping[str, str]) -> dict[str, int]:
    """Task id -> how many decided copies label it otherwise (at most
    :data:`MAX_CONTRADICTED`; tasks with none are left out).

    ``decided``: task id -> its decision (:data:`CONFIRMED` or :data:`FIXED`), for the tasks
    whose current labels a reviewer vouched for. A decided copy counts once however many
    groups it shares with the task. Cost: the members of the groups that hold a decided task,
    times at most :data:`MAX_CONTRADICTED`."""
    against: dict[str, set[str]] = defaultdict(set)
    for group in copies.groups:
        mine = {t: v for t, v in group.values.items() if t in decided}
        if not mine:
            continue
        decided_by_value: dict[tuple, list[str]] = defaultdict(list)
        for task, value in mine.items():
            decided_by_value[value].append(task)
        for task, value in group.values.items():
            seen = against[task]
            for other_value, tasks in decided_by_value.items():
                if other_value == value:
                    continue
                for other in tasks:
                    if len(seen) >= MAX_CONTRADICTED:
                        break
                    seen.add(other)
    return {task: len(by) for task, by in against.items() if by}


# ------------------------------------------------------------------------------ links


@dataclass(frozen=True)
class Other:
    """One other task a link names: what it says where it differs.

    Attributes
    ----------
    task : str
    entity : str or None
        NER: the entity string it labels otherwise (``None`` for classification).
    labels : tuple of str
        NER: the types it gives ``entity`` (empty: it leaves the string unannotated);
        classification: its classes.
    decision : str or None
        :data:`CONFIRMED` or :data:`FIXED` when a reviewer decided it, else None.
    """

    task: str
    entity: str | None
    labels: tuple[str, ...]
    decision: str | None = None


@dataclass(frozen=True)
class Link:
    """One group of a task's copies that disagree with it, bounded.

    Attributes
    ----------
    kind : {"text", "entity"}
    named : tuple of Other
        At most :data:`MAX_NAMED` of the group's tasks that label it otherwise, decided ones
        first (a fix, then a confirmation), then by task id.
    more : int
        How many more tasks of the group label it otherwise.
    entity : str or None
        NER: the entity string the link is about (for a text link, the first entity where the
        first task named differs): where a prediction shows the note.
    control : str or None
        The labeling control the copies disagree on (:attr:`CopyGroup.control`).
    """

    kind: Kind
    named: tuple[Other, ...]
    more: int
    entity: str | None = None
    control: str | None = None


def _task_order(task: str):
    return (0, int(task), "") if task.isdigit() else (1, 0, task)


def _first_difference(mine: tuple, theirs: tuple, words: Sequence[str]) -> tuple[str, tuple]:
    """(entity string, its types in ``theirs``) where two sets of tag sequences of the same
    words differ first: an entity of theirs that mine lacks, else one of mine they lack (its
    types then ``()``)."""
    have = {(s, e, t) for tags in mine for t, s, e in entity_spans(tags)}
    give = {(s, e, t) for tags in theirs for t, s, e in entity_spans(tags)}
    extra = sorted(give - have) or sorted(have - give)
    if not extra:
        return "", ()
    s, e, _ = extra[0]
    string = normalised(words[s:e])
    return string, tuple(sorted({t for s2, e2, t in give if (s2, e2) == (s, e)}))


_RANK = {FIXED: 0, CONFIRMED: 1, None: 2}


def decided_members(copies: Copies, decided: Mapping[str, str]) -> dict[int, tuple[str, ...]]:
    """Group index -> its decided tasks (``decided``: task id -> decision), for the groups that
    hold any: what :func:`links` names first. Cost: the decided tasks' groups."""
    out: dict[int, list[str]] = defaultdict(list)
    for task in decided:
        for g in copies.of_task.get(task, ()):
            out[g].append(task)
    return {g: tuple(tasks) for g, tasks in out.items()}


def links(
    copies: Copies,
    task: str,
    decided: Mapping[str, str] | None = None,
    members: Mapping[int, Sequence[str]] | None = None,
    max_links: int = MAX_LINKS,
) -> tuple[Link, ...]:
    """``task``'s links (:class:`Link`), at most ``max_links``: its text's group first, then its
    entity strings', those with decided copies first; a task named in an earlier link is not
    named again. ``decided``: task id -> :data:`CONFIRMED` or :data:`FIXED`; ``members``:
    :func:`decided_members` of it, computed once by a caller serving many tasks (else here).
    Cost: the groups of ``task``, each its distinct labels, its decided tasks and
    :data:`MAX_NAMED` others."""
    decided = decided or {}
    if members is None:
        members = decided_members(copies, decided)
    indices = sorted(
        copies.of_task.get(task, ()),
        key=lambda g: (
            copies.groups[g].kind != TEXT,
            -len(members.get(g, ())),
            -copies.groups[g].others(task),
        ),
    )
    out: list[Link] = []
    named_already: set[str] = {task}
    for g in indices:
        group = copies.groups[g]
        mine = group.values[task]
        candidates = [t for t in members.get(g, ()) if group.values[t] != mine]
        candidates.sort(key=lambda t: (_RANK[decided.get(t)], _task_order(t)))
        for value, tasks in sorted(group.by_value.items()):
            if value != mine:
                candidates += sorted(tasks[: MAX_NAMED + len(named_already)], key=_task_order)
        fresh = list(dict.fromkeys(t for t in candidates if t not in named_already))
        named = fresh[:MAX_NAMED]
        if not named:
            continue
        others = tuple(_other(group, task, t, decided.get(t)) for t in named)
        # the group's others named by an earlier link are not "more" either
        before = sum(group.values.get(t, mine) != mine for t in named_already)
        named_already.update(named)
        entity = group.key if group.kind == ENTITY else others[0].entity
        more = group.others(task) - len(named) - before
        out.append(Link(group.kind, others, more, entity, group.control))
        if len(out) == max_links:
            break
    return tuple(out)


def _other(group: CopyGroup, task: str, other: str, decision) -> Other:
    value = group.values[other]
    if group.task != "ner":
        labels = tuple(sorted({label for labels in value for label in labels}))
        return Other(other, None, labels, decision)
    if group.kind == ENTITY:
        return Other(other, group.key, value, decision)
    string, types = _first_difference(group.values[task], value, group.key.split(" "))
    return Other(other, string, types, decision)


def _listed(words: Sequence[str]) -> str:
    words = list(words)
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _says(other: Other, first: bool, same_text: bool) -> str:
    """One named task's clause: *task 260, the same text, labels 'Raw Illest' as person*."""
    who = f"task {other.task}" + (", the same text," if same_text and first else "")
    if other.entity is None:  # classification
        what = _listed(other.labels) if other.labels else "no class"
        if other.decision == FIXED:
            return f"{who} was fixed to {what} by a reviewer: suggested here"
        if other.decision == CONFIRMED:
            return f"{who} is confirmed as {what} by a reviewer"
        return f"{who} is annotated {what}"
    said = f"'{other.entity}' as {_listed(other.labels)}" if other.labels else None
    if other.decision == FIXED:
        fix = f"label {said}" if said else f"leave '{other.entity}' unannotated"
        return f"{who} was fixed to {fix} by a reviewer: suggested here"
    verb = f"labels {said}" if said else f"does not annotate '{other.entity}'"
    if other.decision == CONFIRMED:
        return f"{who} {verb}, confirmed by a reviewer"
    return f"{who} {verb}"


def link_note(link: Link) -> str:
    """One link in words: *task 260 labels 'Raw Illest' as person; task 300 labels it as
    group; and 4 more tasks label it otherwise*."""
    same_text = link.kind == TEXT
    clauses = [_says(o, i == 0, same_text) for i, o in enumerate(link.named)]
    if link.more:
        one = link.more == 1
        tasks = f"{link.more} more task{'' if one else 's'}"
        where = " of the same text" if same_text else ""
        if link.named[0].entity is None:
            verb = "is" if one else "are"
            clauses.append(f"and {tasks}{where} {verb} annotated otherwise")
        else:
            clauses.append(f"and {tasks}{where} label{'s' if one else ''} it otherwise")
    return "; ".join(clauses)


def note(found: Sequence[Link]) -> str | None:
    """A task's links (:func:`links`) in one sentence, each link's clauses bounded by
    :data:`MAX_NAMED`; None when it has none."""
    if not found:
        return None
    return "; ".join(link_note(link) for link in found)

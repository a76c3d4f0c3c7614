"""One row per annotation: the input of a project report.

An :class:`AnnotationTable` holds, for every annotation a report covers, its task, annotator,
words, gold label, the scout's majority prediction and scores. It is built from a
:class:`~subregweigh.weigh.WeighResult` (:meth:`AnnotationTable.from_result`) or from weights
records as ``subregweigh weigh`` writes them to JSONL (:meth:`AnnotationTable.from_records`,
which the ML backend's stored scores are too), checking each record and naming the one at
fault. The numbers are :mod:`subregweigh.report`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from subregweigh.example import DataError, Example, Task
from subregweigh.options import DEFAULT_SCORE


@dataclass
class AnnotationTable:
    """One row per annotation; every list and array has length n.

    Attributes
    ----------
    task : {"ner", "classification"}
    ids : list of str
        Example ids (Label Studio, every annotation: ``"task/annotation"``).
    tasks : list of str
        The task each annotation belongs to; the annotations of one task share it.
    annotators : list of str
        Who made each annotation; ``""`` where unknown.
    words : list of tuple of str
    gold : list of tuple of str
        The annotation's label: NER, one IOB2 tag per word; classification, sorted classes.
    majority : list of tuple of str
        The scout's most frequent prediction over the K candidates (same form as ``gold``).
    score : ndarray of float, shape (n,)
        The quality score that ranks (lower = more doubtful), in [0, 1].
    reliability : ndarray of float, shape (n,)
        The paper's c/K; NaN where unknown.
    entity_probability : list of list of (type, start, end, probability)
        NER: each gold entity's mean over K of its lowest p(gold tag); empty lists otherwise.
    """

    task: Task
    ids: list[str]
    tasks: list[str]
    annotators: list[str]
    words: list[tuple[str, ...]]
    gold: list[tuple[str, ...]]
    majority: list[tuple[str, ...]]
    score: np.ndarray
    reliability: np.ndarray
    entity_probability: list[list[tuple[str, int, int, float]]]

    def __post_init__(self):
        n = len(self.ids)
        for name in ("tasks", "annotators", "words", "gold", "majority", "entity_probability"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} has length {len(getattr(self, name))}, expected {n}")
        self.score = np.asarray(self.score, dtype=float)
        self.reliability = np.asarray(self.reliability, dtype=float)
        if self.score.shape != (n,) or self.reliability.shape != (n,):
            raise ValueError(f"score and reliability must have shape ({n},)")

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def from_result(
        cls,
        examples: Sequence[Example],
        result,
        task: Task,
        score: str = DEFAULT_SCORE,
        tasks: Sequence[str] | None = None,
    ) -> AnnotationTable:
        """The table of ``examples`` weighed into ``result`` (a :class:`WeighResult`), ranked by
        its score ``score``. ``tasks`` defaults to the example ids (one annotation per task)."""
        n = len(examples)
        return cls(
            task=task,
            ids=[ex.id for ex in examples],
            tasks=list(tasks) if tasks is not None else [ex.id for ex in examples],
            annotators=[ex.annotator for ex in examples],
            words=[tuple(ex.words) for ex in examples],
            gold=[tuple(ex.label) for ex in examples],
            majority=[tuple(m) for m in result.majority],
            score=result.score(score),
            reliability=result.reliability,
            entity_probability=[list(e) for e in result.entity_probability]
            if task == "ner" and result.entity_probability
            else [[] for _ in range(n)],
        )

    @classmethod
    def from_records(
        cls, records: Sequence[Mapping], where: Sequence[str] | None = None
    ) -> AnnotationTable:
        """The table of weights records as ``subregweigh weigh`` writes them to JSONL.

        Each record: ``id``; NER ``words`` and ``tags``, or classification ``text`` and
        ``label`` / ``labels``; ``majority``; ``score`` (else ``reliability``); optional
        ``reliability``, ``entity_probability`` (``[{"type", "start", "end", "probability"}]``),
        ``annotator`` and ``task`` (default: the id). ``where`` names each record in errors
        (default ``"record <i>"``).

        Raises
        ------
        DataError
            ``"{where}: ..."`` for a record that lacks a field or holds a wrong value.
        """
        if not records:
            raise DataError(f"{where[0] if where else 'records'}: no records to report on")
        where = (
            list(where) if where is not None else [f"record {i + 1}" for i in range(len(records))]
        )
        task: Task = "ner" if "tags" in records[0] else "classification"
        columns: dict[str, list] = {
            k: []
            for k in (
                "ids",
                "tasks",
                "annotators",
                "words",
                "gold",
                "majority",
                "score",
                "reliability",
                "entity_probability",
            )
        }
        for record, at in zip(records, where):
            _record_into(columns, record, at, task)
        return cls(task=task, **columns)


def _field(record: Mapping, key: str, at: str):
    if key not in record:
        raise DataError(f"{at}: no {key!r} field (a weights record of `subregweigh weigh`?)")
    return record[key]


def _strings(value, key: str, at: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DataError(f"{at}: {key!r} must be a list of strings, got {str(value)[:60]}")
    return tuple(value)


def _unit(value, key: str, at: str, missing_ok: bool = False) -> float:
    if value is None and missing_ok:
        return float("nan")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise DataError(f"{at}: {key!r} must be a number in [0, 1], got {value!r}")
    return float(value)


def _record_into(columns: dict[str, list], record: Mapping, at: str, task: Task) -> None:
    """Append one weights record's values to ``columns`` (see ``from_records``)."""
    if not isinstance(record, Mapping):
        raise DataError(f"{at}: expected a JSON object")
    ex_id = str(_field(record, "id", at))
    if task == "ner":
        words = _strings(_field(record, "words", at), "words", at)
        gold = _strings(_field(record, "tags", at), "tags", at)
    else:
        text = _field(record, "text", at)
        if not isinstance(text, str):
            raise DataError(f"{at}: 'text' must be a string")
        words = tuple(text.split())
        if "labels" in record:
            gold = tuple(sorted(_strings(record["labels"], "labels", at)))
        else:
            label = _field(record, "label", at)
            if not isinstance(label, str):
                raise DataError(f"{at}: 'label' must be a string (NER records have 'tags')")
            gold = (label,)
    majority = _strings(_field(record, "majority", at), "majority", at)
    if task == "ner" and not (len(words) == len(gold) == len(majority)):
        raise DataError(
            f"{at}: {len(words)} words, {len(gold)} tags and {len(majority)} majority tags"
        )
    score = record.get("score", record.get("reliability"))
    if score is None:
        raise DataError(f"{at}: no 'score' or 'reliability' field")
    entities = []
    for entity in record.get("entity_probability") or []:
        try:
            entities.append(
                (
                    str(entity["type"]),
                    int(entity["start"]),
                    int(entity["end"]),
                    _unit(entity["probability"], "probability", at),
                )
            )
        except (KeyError, TypeError, ValueError):
            raise DataError(f"{at}: malformed 'entity_probability' entry {entity!r}") from None
    annotator = record.get("annotator") or ""
    columns["ids"].append(ex_id)
    columns["tasks"].append(str(record.get("task", ex_id)))
    columns["annotators"].append(str(annotator))
    columns["words"].append(words)
    columns["gold"].append(gold)
    columns["majority"].append(majority if task == "ner" else tuple(sorted(majority)))
    columns["score"].append(_unit(score, "score", at))
    columns["reliability"].append(_unit(record.get("reliability"), "reliability", at, True))
    columns["entity_probability"].append(entities)

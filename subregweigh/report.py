"""The numbers of a project report: pure aggregations over one row per annotation.

A report answers where the doubt sits: how the scores spread against the share of errors one
expects (:func:`score_summary`), which gold labels the scout's majority contradicts and with
what (:func:`label_confusion`, :func:`label_rows`; for NER over entity spans), which annotators'
work it doubts (:func:`annotator_rows`), and which tasks to open first
(:func:`most_doubtful_tasks`), and what reviewers' decisions say (:func:`review_summary`,
:func:`reviewer_summary`). :func:`build_report` puts them together into one plain-JSON
dict, the ``/report.json`` of the ML backend and what :mod:`subregweigh.report_html` renders.

The input is an :class:`~subregweigh.annotations.AnnotationTable` (one row per annotation,
from a WeighResult or from weights records). No I/O, no plotting, no Label Studio packages.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from subregweigh.annotations import AnnotationTable
from subregweigh.example import Task
from subregweigh.io.weights import to_json
from subregweigh.learned import Learned
from subregweigh.tags import entity_spans

# The label standing for "no label" on either side of a confusion matrix.
NONE_LABEL = {"ner": "O", "classification": "(none)"}
UNKNOWN_ANNOTATOR = "(unknown)"

__all__ = [
    "AnnotationTable",
    "annotator_rows",
    "build_report",
    "class_pairs",
    "entity_pairs",
    "entity_segments",
    "label_confusion",
    "label_rows",
    "most_doubtful_tasks",
    "review_summary",
    "reviewer_summary",
    "score_summary",
    "wilson_interval",
]


# --------------------------------------------------------------------------------- scores


def score_summary(
    score, threshold: float = 0.5, expected_error_rate: float | None = None, bins: int = 10
) -> dict:
    """How many annotations look doubtful, against how many errors one expects.

    Parameters
    ----------
    score : array-like of float, shape (n,)
        Quality scores in [0, 1], lower = more doubtful.
    threshold : float, default 0.5
        Below it an annotation counts as doubtful (the Data Manager filter
        "Prediction score < 0.5").
    expected_error_rate : float in [0, 1] or None, default None
        The share of wrong annotations one expects (say, from a past audit). None: the scores'
        own estimate, ``mean(1 - score)``, the expected share of errors if each score were the
        probability that its annotation is right (an overestimate for NER, whose score is a
        soft minimum over its entities and words).
    bins : int, default 10
        Histogram bins over [0, 1].

    Returns
    -------
    dict
        ``n``, ``threshold``, ``n_doubtful``, ``doubtful_share``; ``expected_error_rate`` and
        its ``expected_source`` (``"given"`` or ``"estimated"``), ``n_expected`` (that rate
        times n, rounded) and ``review_threshold``: the score below or at which the
        ``n_expected`` most doubtful annotations lie (None if ``n_expected`` is 0); ``mean``;
        ``histogram``: ``{"edges": [bins + 1], "counts": [bins]}``.
    """
    score = np.asarray(score, dtype=float)
    n = len(score)
    estimated = float(np.mean(1.0 - score)) if n else 0.0
    if expected_error_rate is not None and not 0.0 <= expected_error_rate <= 1.0:
        raise ValueError(f"expected_error_rate must be in [0, 1], got {expected_error_rate}")
    rate = estimated if expected_error_rate is None else float(expected_error_rate)
    n_expected = int(round(rate * n))
    counts, edges = np.histogram(score, bins=bins, range=(0.0, 1.0))
    n_doubtful = int((score < threshold).sum())
    return {
        "n": n,
        "threshold": threshold,
        "n_doubtful": n_doubtful,
        "doubtful_share": n_doubtful / n if n else 0.0,
        "expected_error_rate": rate,
        "expected_source": "estimated" if expected_error_rate is None else "given",
        "n_expected": n_expected,
        "review_threshold": float(np.sort(score)[n_expected - 1]) if n_expected else None,
        "mean": float(score.mean()) if n else None,
        "histogram": {"edges": edges.tolist(), "counts": counts.tolist()},
    }


# --------------------------------------------------------------------------------- labels


def entity_pairs(gold: Sequence[str], predicted: Sequence[str]) -> list[tuple[str, str, bool]]:
    """Pair the entities of two IOB2 tag sequences of one sentence.

    An entity of ``gold`` pairs with the ``predicted`` one of exactly its span; left over, with
    the remaining predicted entity that overlaps it most (first of equals; a *boundary*
    difference); else with ``"O"``. Predicted entities left over pair with a gold ``"O"``.

    Returns
    -------
    list of (gold type, predicted type, boundary differs)
        ``"O"`` on the side without an entity.
    """
    left = entity_spans(predicted)
    pairs, unmatched = [], []
    for etype, start, end in entity_spans(gold):
        exact = next((p for p in left if p[1:] == (start, end)), None)
        if exact is None:
            unmatched.append((etype, start, end))
        else:
            left.remove(exact)
            pairs.append((etype, exact[0], False))
    for etype, start, end in unmatched:
        overlap = [min(end, e) - max(start, s) for _, s, e in left]
        best = int(np.argmax(overlap)) if overlap and max(overlap) > 0 else None
        if best is None:
            pairs.append((etype, "O", False))
        else:
            pairs.append((etype, left.pop(best)[0], True))
    pairs.extend(("O", p[0], False) for p in left)
    return pairs


def class_pairs(
    gold: Sequence[str], predicted: Sequence[str], none: str = NONE_LABEL["classification"]
) -> list[tuple[str, str, bool]]:
    """Pair the classes of one classification example: one gold class against the predicted
    one (or ``none``); several (multi-label), class by class: in both, in one only.
    Same form as :func:`entity_pairs` (the third item is always False)."""
    if len(gold) == 1 and len(predicted) <= 1:
        return [(gold[0], predicted[0] if predicted else none, False)]
    both = set(gold) & set(predicted)
    return (
        [(c, c, False) for c in sorted(both)]
        + [(c, none, False) for c in sorted(set(gold) - both)]
        + [(none, c, False) for c in sorted(set(predicted) - both)]
    )


def label_confusion(
    task: Task, gold: Sequence[Sequence[str]], majority: Sequence[Sequence[str]]
) -> dict:
    """Gold label x the scout's majority label, over all annotations.

    NER counts entity spans (:func:`entity_pairs`), classification classes
    (:func:`class_pairs`); :data:`NONE_LABEL` stands for "no entity" / "no class".

    Returns
    -------
    dict
        ``labels``: list of str, the labels seen (sorted; the none label last);
        ``matrix``: list of lists of int, shape (n_labels, n_labels), rows gold, columns
        scout; ``boundary``: per gold label, how many of its entities the scout gives the same
        type over another span (NER; a part of the diagonal); ``none``: the none label.
    """
    none = NONE_LABEL[task]
    pairs: Counter = Counter()
    boundary: Counter = Counter()
    for g, m in zip(gold, majority):
        found = entity_pairs(g, m) if task == "ner" else class_pairs(g, m, none)
        for a, b, moved in found:
            pairs[a, b] += 1
            boundary[a] += moved and a == b
    labels = sorted({label for pair in pairs for label in pair} - {none}) + [none]
    index = {label: i for i, label in enumerate(labels)}
    matrix = np.zeros((len(labels), len(labels)), dtype=int)
    for (a, b), count in pairs.items():
        matrix[index[a], index[b]] = count
    return {
        "labels": labels,
        "matrix": matrix.tolist(),
        "boundary": {label: int(boundary[label]) for label in labels if boundary[label]},
        "none": none,
    }


def label_rows(confusion: Mapping) -> list[dict]:
    """Per gold label (the none label included when the scout adds labels the annotations
    lack): how often the scout's majority disagrees, and with what, most often first.

    Returns
    -------
    list of dict
        ``label``, ``n`` (its row total), ``agree`` (same label; for NER same span too),
        ``disagree``, ``disagree_share``, ``boundary`` (NER: same type over another span, a
        part of ``disagree``), ``confused_with``: ``[{"label", "n"}]`` of the other scout
        labels, most frequent first. Sorted by ``disagree_share``, highest first, then by label.
    """
    labels, matrix, none = confusion["labels"], np.asarray(confusion["matrix"]), confusion["none"]
    rows = []
    for i, label in enumerate(labels):
        n = int(matrix[i].sum())
        if not n:
            continue
        moved = int(confusion["boundary"].get(label, 0))
        agree = int(matrix[i, i]) - moved if label != none else 0
        others = [
            {"label": labels[j], "n": int(matrix[i, j])}
            for j in np.argsort(-matrix[i], kind="stable")
            if j != i and matrix[i, j]
        ]
        rows.append(
            {
                "label": label,
                "n": n,
                "agree": agree,
                "disagree": n - agree,
                "disagree_share": (n - agree) / n,
                "boundary": moved,
                "confused_with": others,
            }
        )
    return sorted(rows, key=lambda r: (-r["disagree_share"], r["label"]))


# --------------------------------------------------------------------------------- annotators


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a share ``k / n`` (95% for the default ``z``); (0, 1) for
    n = 0. Unlike ``p +- z * se`` it stays in [0, 1] and is wide for small n, as it should be."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def annotator_rows(
    annotators: Sequence[str], score, threshold: float = 0.5, small: int = 10
) -> list[dict]:
    """Per annotator: how many annotations, their mean score, the share below ``threshold``.

    Parameters
    ----------
    annotators : sequence of str, length n
        ``""`` counts as :data:`UNKNOWN_ANNOTATOR`.
    score : array-like of float, shape (n,)
    threshold : float, default 0.5
    small : int, default 10
        Fewer annotations than this mark a row ``small``: its share says little.

    Returns
    -------
    list of dict
        ``annotator``, ``n``, ``mean_score``, ``n_doubtful``, ``doubtful_share``,
        ``interval`` (the share's 95% Wilson interval, [low, high]), ``small``. Sorted by
        ``doubtful_share``, highest first, then by more annotations, then by name.
    """
    score = np.asarray(score, dtype=float)
    names = np.array([a or UNKNOWN_ANNOTATOR for a in annotators], dtype=object)
    rows = []
    for name in sorted(set(names)):
        mine = score[names == name]
        k = int((mine < threshold).sum())
        rows.append(
            {
                "annotator": name,
                "n": len(mine),
                "mean_score": float(mine.mean()),
                "n_doubtful": k,
                "doubtful_share": k / len(mine),
                "interval": list(wilson_interval(k, len(mine))),
                "small": len(mine) < small,
            }
        )
    return sorted(rows, key=lambda r: (-r["doubtful_share"], -r["n"], r["annotator"]))


# --------------------------------------------------------------------------------- tasks


def most_doubtful_tasks(tasks: Sequence[str], score, top: int = 20) -> list[list[int]]:
    """The ``top`` tasks whose least reliable annotation scores lowest (a task's score is its
    minimum), each as its rows, lowest score first. Ties keep the input order."""
    score = np.asarray(score, dtype=float)
    rows: dict[str, list[int]] = {}
    for i in np.argsort(score, kind="stable"):
        rows.setdefault(tasks[i], []).append(int(i))
    return list(rows.values())[:top]


def entity_segments(
    words: Sequence[str],
    tags: Sequence[str],
    other: Sequence[str],
    probability: Sequence[tuple[str, int, int, float]] = (),
) -> list[dict]:
    """The words of a sentence cut at the entities of ``tags``, for display.

    Returns
    -------
    list of dict
        ``text`` (words joined by spaces), ``label`` (entity type or None), ``differs``
        (an entity that ``other`` lacks with that exact span and type), ``probability``
        (the entity's p(gold) from ``probability``, or None).
    """
    theirs = set(entity_spans(other))
    probs = {(t, s, e): p for t, s, e, p in probability}
    out, pos = [], 0
    for etype, start, end in entity_spans(tags):
        if start > pos:
            out.append(_segment(words[pos:start]))
        span = (etype, start, end)
        out.append(
            {
                **_segment(words[start:end], etype),
                "differs": span not in theirs,
                "probability": probs.get(span),
            }
        )
        pos = end
    if pos < len(words):
        out.append(_segment(words[pos:]))
    return out


def _segment(words: Sequence[str], label: str | None = None) -> dict:
    return {"text": " ".join(words), "label": label, "differs": False, "probability": None}


def _display_label(label: Sequence[str], none: str) -> str:
    return ", ".join(label) if label else none


def _annotation_view(table: AnnotationTable, i: int) -> dict:
    """One annotation of a doubtful task, as the report shows it."""
    view = {
        "id": table.ids[i],
        "annotator": table.annotators[i] or UNKNOWN_ANNOTATOR,
        "score": float(table.score[i]),
        "reliability": _finite(table.reliability[i]),
    }
    if table.task == "ner":
        view["gold"] = entity_segments(
            table.words[i], table.gold[i], table.majority[i], table.entity_probability[i]
        )
        view["scout"] = entity_segments(table.words[i], table.majority[i], table.gold[i])
        view["agrees"] = table.gold[i] == table.majority[i]
    else:
        none = NONE_LABEL["classification"]
        view["text"] = " ".join(table.words[i])
        view["gold"] = _display_label(table.gold[i], none)
        view["scout"] = _display_label(table.majority[i], none)
        view["agrees"] = table.gold[i] == table.majority[i]
    return view


def _finite(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


# --------------------------------------------------------------------------------- reviews

# The score thresholds at which :func:`review_summary` measures the flags' precision.
REVIEW_THRESHOLDS = tuple(round(0.1 * i, 1) for i in range(1, 11))


def _decided(fixed: np.ndarray, mask: np.ndarray) -> dict:
    n, k = int(mask.sum()), int((fixed & mask).sum())
    return {
        "reviewed": n,
        "confirmed": n - k,
        "fixed": k,
        "precision": k / n if n else None,
        "interval": list(wilson_interval(k, n)) if n else None,
    }


def review_summary(
    score,
    fixed,
    labels: Sequence[Sequence[str]],
    threshold: float = 0.5,
    thresholds: Sequence[float] = REVIEW_THRESHOLDS,
) -> dict:
    """What reviewers' decisions say about the flags: of the reviewed items a score flagged
    (``score < threshold``), how many the reviewers confirmed as correct and how many they
    fixed; the flags' precision as the reviewers judged it is ``fixed / reviewed``.

    Parameters
    ----------
    score : array-like of float, shape (n,)
        Each reviewed item's score when it was decided (lower = more doubtful).
    fixed : array-like of bool, shape (n,)
        Whether the reviewers changed it (True) or confirmed it unchanged (False).
    labels : sequence of sequences of str, length n
        The labels each item held when it was decided; an item counts under each of them.
    threshold : float, default 0.5
        Below it an item counts as flagged.
    thresholds : sequence of float, default 0.1, 0.2, ..., 1.0
        Where ``by_threshold`` measures the precision.

    Returns
    -------
    dict
        ``threshold``; ``reviewed``, ``confirmed``, ``fixed``, ``precision`` (None when
        nothing flagged was reviewed) and ``interval`` (its 95% Wilson interval) of the flagged
        items; ``all``: the same over every decided item, flagged or not; ``by_label``: the same
        per label (``label`` first), sorted by label; ``by_threshold``: the same at each of
        ``thresholds`` (``threshold`` first).
    """
    score = np.asarray(score, dtype=float)
    fixed = np.asarray(fixed, dtype=bool)
    if not (len(score) == len(fixed) == len(labels)):
        raise ValueError(
            f"score, fixed and labels must have one entry per item, got {len(score)}, "
            f"{len(fixed)} and {len(labels)}"
        )
    flagged = score < threshold
    by_label = []
    for label in sorted({label for held in labels for label in held}):
        holds = np.array([label in held for held in labels], dtype=bool)
        by_label.append({"label": label, **_decided(fixed, flagged & holds)})
    return {
        "threshold": threshold,
        **_decided(fixed, flagged),
        "all": _decided(fixed, np.ones(len(score), dtype=bool)),
        "by_label": by_label,
        "by_threshold": [{"threshold": t, **_decided(fixed, score < t)} for t in thresholds],
    }


REVIEWER_DECISIONS = ("confirmed", "fixed", "unsure")
# an annotator's save of her own annotation: counted per person, apart from the decisions
SELF_REVIEWED = "self-reviewed"


def reviewer_summary(
    items: Sequence[str], reviewers: Sequence[str], decisions: Sequence[str]
) -> dict:
    """What each reviewer decided, and how often two reviewers of the same item agree.

    Parameters
    ----------
    items, reviewers, decisions : sequences of str, one entry per reviewer and item
        The item decided (an annotation), who decided it (``""`` counts as
        :data:`UNKNOWN_ANNOTATOR`) and their latest decision on it: one of
        :data:`REVIEWER_DECISIONS`, or :data:`SELF_REVIEWED` (an annotator's review of her
        own annotation: counted apart, never a decision nor in the agreement); others, such
        as a reverted fix, are left out.

    Returns
    -------
    dict
        ``reviewers``: per reviewer ``reviewer``, ``decided``, ``confirmed``, ``fixed``,
        ``unsure``, ``self_reviewed``, ``fixed_share`` (fixed / (confirmed + fixed), None
        when neither),
        ``pairs`` (their decisions on items another reviewer decided too, once per other
        reviewer), ``agree`` (of those, the same decision) and ``agreement`` (agree / pairs,
        None without pairs); most decisions first, then by name. ``agreement``: over the items
        two or more reviewers decided, ``annotations`` (how many), ``pairs``, ``agree``,
        ``share``.
    """
    if not (len(items) == len(reviewers) == len(decisions)):
        raise ValueError(
            f"items, reviewers and decisions must have one entry each, got {len(items)}, "
            f"{len(reviewers)} and {len(decisions)}"
        )
    by_item: dict[str, dict[str, str]] = {}
    zero = dict.fromkeys(("decided", *REVIEWER_DECISIONS, "self_reviewed", "pairs", "agree"), 0)
    rows: dict[str, dict] = {}
    for item, who, decision in zip(items, reviewers, decisions):
        if decision in REVIEWER_DECISIONS:
            by_item.setdefault(item, {})[who or UNKNOWN_ANNOTATOR] = decision
        elif decision == SELF_REVIEWED:
            who = who or UNKNOWN_ANNOTATOR
            rows.setdefault(who, {"reviewer": who, **zero})["self_reviewed"] += 1
    for decided in by_item.values():
        for who, decision in decided.items():
            row = rows.setdefault(who, {"reviewer": who, **zero})
            others = [d for other, d in decided.items() if other != who]
            row["decided"] += 1
            row[decision] += 1
            row["pairs"] += len(others)
            row["agree"] += sum(d == decision for d in others)
    for row in rows.values():
        judged = row["confirmed"] + row["fixed"]
        row["fixed_share"] = row["fixed"] / judged if judged else None
        row["agreement"] = row["agree"] / row["pairs"] if row["pairs"] else None
    # each pair was counted from both sides
    pairs, agree = (sum(r[k] for r in rows.values()) // 2 for k in ("pairs", "agree"))
    return {
        "reviewers": sorted(
            rows.values(), key=lambda r: (-r["decided"], -r["self_reviewed"], r["reviewer"])
        ),
        "agreement": {
            "annotations": sum(len(decided) > 1 for decided in by_item.values()),
            "pairs": pairs,
            "agree": agree,
            "share": agree / pairs if pairs else None,
        },
    }


# --------------------------------------------------------------------------------- all of it


def build_report(
    table: AnnotationTable,
    *,
    threshold: float = 0.5,
    top: int = 20,
    expected_error_rate: float | None = None,
    meta: Mapping | None = None,
    selftest: Mapping | None = None,
    task_url: Callable[[str], str] | None = None,
    reviews: Mapping | None = None,
    learned: Learned | None = None,
) -> dict:
    """The whole report as plain JSON values.

    Parameters
    ----------
    table : AnnotationTable
    threshold : float, default 0.5
        Scores below it count as doubtful.
    top : int, default 20
        How many of the most doubtful tasks to list.
    expected_error_rate : float or None, default None
        See :func:`score_summary`.
    meta : mapping, optional
        About the model: ``version``, ``trained_at``, ``settings``, ... (shown as given).
    selftest : mapping, optional
        A :func:`subregweigh.selftest.self_test` result to show beside the scores.
    task_url : callable, optional
        task id -> the address of the task (in Label Studio); None: no links.
    reviews : mapping, optional
        The reviewers' decisions, ``{"score", "fixed", "labels"}`` as :func:`review_summary`
        takes them (one entry per reviewed item) and, optionally, ``decisions``: ``{"item",
        "reviewer", "decision"}`` as :func:`reviewer_summary` takes them; None: no decisions
        yet.
    learned : Learned or None, default None
        NER: what the scouts learned of their training annotations (the weigher's
        :attr:`~subregweigh.weigh.SubRegWeigh.learned_`); the page warns when too little.

    Returns
    -------
    dict
        ``task``, ``meta``, ``summary`` (:func:`score_summary`), ``confusion``
        (:func:`label_confusion`), ``labels`` (:func:`label_rows`), ``learned`` (``learned``'s
        :meth:`~subregweigh.learned.Learned.to_json`, or None), ``annotators``
        (:func:`annotator_rows`), ``doubtful`` (the ``top`` tasks: ``task``, ``url``,
        ``score`` (the minimum), ``annotations``: each shown with its gold label and the
        scout's suggestion), ``selftest``, ``reviews`` (:func:`review_summary` at
        ``threshold``, with :func:`reviewer_summary`'s ``reviewers`` and ``agreement``, or
        None), and ``annotations``: every annotation's ``id``,
        ``task``, ``annotator``, ``score`` and ``reliability``.
    """
    if not len(table):
        raise ValueError("no annotations to report on")
    confusion = label_confusion(table.task, table.gold, table.majority)
    doubtful = []
    for rows in most_doubtful_tasks(table.tasks, table.score, top):
        task = table.tasks[rows[0]]
        doubtful.append(
            {
                "task": task,
                "url": task_url(task) if task_url else None,
                "score": float(table.score[rows[0]]),
                "annotations": [_annotation_view(table, i) for i in rows],
            }
        )
    return {
        "task": table.task,
        "meta": to_json(dict(meta or {})),
        "summary": score_summary(table.score, threshold, expected_error_rate),
        "confusion": confusion,
        "labels": label_rows(confusion),
        "learned": learned.to_json() if learned is not None else None,
        "annotators": annotator_rows(table.annotators, table.score, threshold),
        "doubtful": doubtful,
        "selftest": to_json(dict(selftest)) if selftest else None,
        "reviews": _reviews(reviews, threshold) if reviews is not None else None,
        "annotations": [
            {
                "id": table.ids[i],
                "task": table.tasks[i],
                "annotator": table.annotators[i],
                "score": float(table.score[i]),
                "reliability": _finite(table.reliability[i]),
            }
            for i in range(len(table))
        ],
    }


def _reviews(reviews: Mapping, threshold: float) -> dict:
    out = review_summary(reviews["score"], reviews["fixed"], reviews["labels"], threshold)
    if reviews.get("decisions") is not None:
        given = reviews["decisions"]
        out.update(reviewer_summary(given["item"], given["reviewer"], given["decision"]))
    return out

"""A ranking that learns from a reviewer's decisions (NER), for the review-loop benchmark
(``python -m benchmarks.review_loop``, its ``learn`` policy); benchmark-only, not a benchmark of
its own, and not in the product: the Label Studio backend serves the static ranking with the
fixes' slips (:mod:`subregweigh.review`).

A static ranking reads the scout once. A reviewer who has decided some flagged sentences (an
error, fixed; or correct, confirmed) has said more: which kinds of disagreement between the
annotation and the scout turned out to be real errors on this project, and which annotation
conventions were slipped. :class:`ReviewRanker` ranks the undecided sentences with that:

* :func:`sentence_features`: per sentence, how doubtful the scout is (the lowest and summed
  surprisal of a gold tag, the words it doubts), the sentence's shape (length, entities, upper
  case), and how the scout's own tagging disagrees with the annotation, by kind (``type``,
  ``boundary``, ``missing``, ``spurious``, as :mod:`subregweigh.compare` names them) and by type
  pair (``ORG>LOC``: annotated ORG, the scout says LOC);
* :func:`slip_counts`: per sentence, how often it repeats a fixed sentence's slip: the (word,
  type) pairs the original annotation had in a span the fix changed
  (:func:`benchmarks.word_slips.slip_keys`, the product's before 2026-11-29);
* a logistic regression on the decided sentences' features and slip counts, balanced between
  errors and confirmations, scores the rest. Until the decisions hold ``min_each`` errors and
  ``min_each`` confirmations, the static ranking (the served score) stands.

No retraining of the scout: a refit takes milliseconds. See the review-loop benchmark's page for
what it finds against the static ranking.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from benchmarks.word_slips import slip_keys, slip_repeats
from subregweigh.compare import span_changes
from subregweigh.example import Example

_FLOOR = 1e-6  # p(gold) below this counts as this: surprisal stays finite


def _surprisal(gold: np.ndarray) -> np.ndarray:
    return -np.log(np.maximum(gold, _FLOOR))


def sentence_features(
    examples: Sequence[Example], gold: Sequence[np.ndarray], predicted: Sequence[Sequence[str]]
) -> tuple[np.ndarray, list[str]]:
    """What a review can learn from, per sentence.

    Parameters
    ----------
    examples : sequence of Example, length n
        NER examples (IOB2 tags) as annotated.
    gold : sequence of ndarray, length n
        Per example, the scout's probability of each word's annotated tag, shape (n_words,).
    predicted : sequence of sequence of str, length n
        Per example, the scout's own tag of each word (its argmax).

    Returns
    -------
    (X, names)
        ``X``: ndarray, shape (n, n_features); ``names``: the column names, sorted after the
        fixed ones (``min_surprisal``, ``sum_surprisal``, ``doubted_words``, ``log_length``,
        ``entities``, ``upper_case``), then ``kind:<kind>`` and ``pair:<annotated>><scout's>``
        counts for the disagreements that occur.
    """
    fixed = ["min_surprisal", "sum_surprisal", "doubted_words", "log_length", "entities"]
    fixed.append("upper_case")
    rows = []
    for ex, g, tags in zip(examples, gold, predicted, strict=True):
        s = _surprisal(np.asarray(g, dtype=float))
        row = {
            "min_surprisal": float(s.max()),
            "sum_surprisal": float(s.sum()),
            "doubted_words": float((np.asarray(g) < 0.5).sum()),
            "log_length": float(np.log1p(len(ex.words))),
            "entities": float(sum(t.startswith("B-") for t in ex.label)),
            "upper_case": float(np.mean([w.isupper() and len(w) > 1 for w in ex.words])),
        }
        for change in span_changes(ex.label, list(tags)):
            annotated = change.original[0] if change.original else "O"
            scouts = change.corrected[0] if change.corrected else "O"
            for name in (f"kind:{change.kind}", f"pair:{annotated}>{scouts}"):
                row[name] = row.get(name, 0.0) + 1.0
        rows.append(row)
    names = fixed + sorted({k for row in rows for k in row} - set(fixed))
    return np.array([[row.get(k, 0.0) for k in names] for row in rows]).reshape(
        -1, len(names)
    ), names


def slip_counts(examples: Sequence[Example], fixes: Sequence[tuple[int, Example]]) -> np.ndarray:
    """Per example, how often a fixed sentence's slip recurs in it (:func:`slip_repeats`):
    summed over the fixes, the (word, type) pairs it shares with that fix's :func:`slip_keys`.

    ``fixes``: ``(index into examples, the sentence as fixed)``. Returns float, shape (n,); a
    fixed sentence counts its own pairs too (rank only the undecided ones). Two fixes of the same
    slip count twice: the more often reviewers fixed it, the likelier it recurs as an error.
    """
    slips = Counter(key for i, fixed in fixes for key in slip_keys(examples[i], fixed))
    return np.array([float(slip_repeats(ex.words, ex.label, slips)) for ex in examples])


class ReviewRanker:
    """Doubt scores for undecided sentences, learned from the decided ones.

    Parameters
    ----------
    C : float, default 0.05
        Inverse strength of the logistic regression's L2 penalty. Strong: a review round holds
        tens of decisions, not thousands.
    min_each : int, default 3
        Decided errors and confirmations each needed before the learned score replaces the
        static one.

    Attributes
    ----------
    scaler_ : StandardScaler or None
        ``X`` standardised over every row, decided or not: the decided ones are the most
        doubtful, and their spread alone would misweigh the penalty.
    model_ : LogisticRegression or None
        Fitted on the scaled features and the raw slip counts (a count of fixes is already on a
        meaningful scale; standardising a mostly-zero column would blow it up). None while the
        decisions are too few.
    """

    def __init__(self, C: float = 0.05, min_each: int = 3):
        self.C = C
        self.min_each = min_each

    def _design(self, X: np.ndarray, slips: np.ndarray) -> np.ndarray:
        return np.column_stack([self.scaler_.transform(X), np.asarray(slips, dtype=float)])

    def fit(
        self, X: np.ndarray, slips: np.ndarray, decided: np.ndarray, is_error: np.ndarray
    ) -> ReviewRanker:
        """``X``: :func:`sentence_features`, shape (n, n_features); ``slips``:
        :func:`slip_counts` of the fixes so far, shape (n,); ``decided``: indices of the decided
        rows; ``is_error``: bool, one per index."""
        X, decided = np.asarray(X, dtype=float), np.asarray(decided, dtype=int)
        is_error = np.asarray(is_error, dtype=bool)
        if len(decided) != len(is_error):
            raise ValueError(f"{len(decided)} decided rows but {len(is_error)} decisions")
        if len(slips) != len(X):
            raise ValueError(f"{len(X)} rows of features but {len(slips)} slip counts")
        errors = int(is_error.sum())
        if min(errors, len(is_error) - errors) < self.min_each:
            self.scaler_ = self.model_ = None
            return self
        self.scaler_ = StandardScaler().fit(X)
        self.model_ = LogisticRegression(C=self.C, class_weight="balanced", max_iter=1000)
        self.model_.fit(self._design(X, slips)[decided], is_error)
        return self

    def doubt(self, X: np.ndarray, slips: np.ndarray, static: np.ndarray) -> np.ndarray:
        """Doubt, shape (n,): higher is more likely an error. ``static``: the served quality
        (lower is more doubtful), used until :meth:`fit` has enough decisions."""
        if self.model_ is None:
            return -np.asarray(static, dtype=float)
        return self.model_.decision_function(self._design(np.asarray(X, dtype=float), slips))

"""Baseline detectors to measure SubRegWeigh against.

Every function returns *quality* scores of shape (n,), like ``WeighResult.reliability``: lower
means more doubtful. Trivial ones (random order, text length, entity count, an entity first)
show what a detector gets for free; cleanlab's label quality scores (Northcutt et al.; ``pip
install cleanlab``) are the standard confident-learning detector, here on the same scout's
predicted probabilities: in-sample (the scout that was fitted on the data, as SubRegWeigh uses
it) or out-of-fold (:func:`out_of_fold_proba`, one scout per fold, as cleanlab recommends).

With its default settings cleanlab's score is the scout's p(gold) on the ordinary segmentation
(NER: its minimum over words; classification: ``WeighResult.deterministic_probability``),
computed by cleanlab's own code.
"""

from __future__ import annotations

import copy
from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np
from sklearn.model_selection import KFold
from tqdm.auto import tqdm

from subregweigh.example import Example, Task
from subregweigh.tags import entity_spans


def random_scores(n: int, random_state: int | np.random.Generator | None = None) -> np.ndarray:
    """Uniform random scores in [0, 1), shape (n,): the chance ranking."""
    return np.random.default_rng(random_state).random(n)


def length_scores(examples: Sequence[Example]) -> np.ndarray:
    """Minus the number of words, shape (n,): longer texts first (more labels to get wrong)."""
    return -np.array([len(ex.words) for ex in examples], dtype=float)


def entity_count_scores(examples: Sequence[Example]) -> np.ndarray:
    """NER: minus the number of gold entities, shape (n,): entity-rich sentences first."""
    return -np.array([len(entity_spans(ex.label)) for ex in examples], dtype=float)


def entity_first_scores(
    examples: Sequence[Example], random_state: int | np.random.Generator | None = None
) -> np.ndarray:
    """NER: annotations holding an entity first, in random order among themselves, then the
    rest, shape (n,): what a reviewer who skips the empty annotations finds."""
    has = np.array([bool(entity_spans(ex.label)) for ex in examples])
    return np.where(has, 0.0, 1.0) + 0.5 * random_scores(len(examples), random_state)


def label_indices(
    examples: Sequence[Example], labels: Sequence[str], task: Task, multi_label: bool = False
) -> list:
    """Gold labels as indices into ``labels`` (the columns of the predicted probabilities).

    Returns
    -------
    list, length n
        NER: ndarray of int, shape (n_words,), per example. Single-label: int. Multi-label:
        list of int.

    Raises
    ------
    ValueError
        If a gold label is not in ``labels``.
    """
    index = {label: i for i, label in enumerate(labels)}
    unknown = {label for ex in examples for label in ex.label if label not in index}
    if unknown:
        raise ValueError(f"gold labels missing from the label space: {sorted(unknown)}")
    if task == "ner":
        return [np.array([index[t] for t in ex.label], dtype=np.int64) for ex in examples]
    if multi_label:
        return [[index[c] for c in ex.label] for ex in examples]
    return [index[ex.label[0]] for ex in examples]


def cleanlab_scores(
    given: list, pred_probs: Sequence[np.ndarray], task: Task, multi_label: bool = False, **kwargs
) -> np.ndarray:
    """cleanlab's label quality score per example, shape (n,), in [0, 1].

    Parameters
    ----------
    given : list, length n
        Gold label indices, as :func:`label_indices` returns them.
    pred_probs : sequence of ndarray, length n
        NER: shape (n_words, n_labels) each; classification: shape (n_labels,) each (softmax
        rows; multi-label: per-class sigmoids), as ``Scout.predict_proba`` returns them.
    task : {"ner", "classification"}
    multi_label : bool, default False
    **kwargs
        Passed to cleanlab (e.g. ``sentence_score_method="softmin"`` for NER, ``method=...``).
        Defaults are cleanlab's: self-confidence, and the minimum over words for NER.

    Notes
    -----
    NER uses ``cleanlab.token_classification.rank.get_label_quality_scores``, single-label
    classification ``cleanlab.rank.get_label_quality_scores`` and multi-label classification
    ``cleanlab.multilabel_classification.rank.get_label_quality_scores``.
    """
    if task == "ner":
        from cleanlab.token_classification.rank import get_label_quality_scores

        scores, _ = get_label_quality_scores([list(g) for g in given], list(pred_probs), **kwargs)
        return np.asarray(scores, dtype=float)
    probs = np.stack([np.asarray(p, dtype=float) for p in pred_probs])
    if multi_label:
        from cleanlab.multilabel_classification.rank import get_label_quality_scores

        return np.asarray(get_label_quality_scores(list(given), probs, **kwargs), dtype=float)
    from cleanlab.rank import get_label_quality_scores

    return np.asarray(get_label_quality_scores(np.asarray(given), probs, **kwargs), dtype=float)


def align_proba(
    pred_probs: Sequence[np.ndarray], from_labels: Sequence[str], to_labels: Sequence[str]
) -> list[np.ndarray]:
    """Reorder the last axis of each array from ``from_labels`` to ``to_labels``.

    A label in ``to_labels`` that the model did not know gets probability 0 (a fold's scout may
    miss a rare label). Shapes: (..., len(from_labels)) -> (..., len(to_labels)).
    """
    missing = set(from_labels) - set(to_labels)
    if missing:
        raise ValueError(f"labels not in the target label space: {sorted(missing)}")
    cols = [list(from_labels).index(label) if label in from_labels else -1 for label in to_labels]
    cols_arr = np.array(cols, dtype=np.int64)
    out = []
    for p in pred_probs:
        p = np.asarray(p)
        aligned = np.take(p, np.maximum(cols_arr, 0), axis=-1)
        aligned[..., cols_arr < 0] = 0.0
        out.append(aligned)
    return out


def out_of_fold_proba(
    examples: Sequence[Example],
    scout,
    labels: Sequence[str],
    n_folds: int = 5,
    random_state: int = 0,
    progress: bool = True,
) -> list[np.ndarray]:
    """Predicted probabilities of every example from a scout that did not train on it.

    The examples are split into ``n_folds`` shuffled folds (sklearn ``KFold``); for each fold a
    copy of the unfitted ``scout`` is fitted on the other folds and predicts the held-out one.

    Parameters
    ----------
    examples : sequence of Example, length n
    scout : Scout
        Unfitted settings; copied per fold (its ``random_state`` is offset by the fold number).
    labels : sequence of str
        Label space of the returned columns, e.g. a scout fitted on all the data's ``labels_``.
    n_folds : int, default 5
    random_state : int, default 0
    progress : bool, default True

    Returns
    -------
    list of ndarray, length n
        As ``Scout.predict_proba``, columns in the order of ``labels``.
    """
    if not 2 <= n_folds <= len(examples):
        raise ValueError(f"need 2 <= n_folds <= {len(examples)} examples, got {n_folds}")
    out: list[np.ndarray | None] = [None] * len(examples)
    folds = KFold(n_folds, shuffle=True, random_state=random_state).split(np.arange(len(examples)))
    for fold, (train, test) in enumerate(
        tqdm(list(folds), desc="out-of-fold scouts", unit="fold", disable=not progress)
    ):
        fold_scout = copy.deepcopy(scout)
        fold_scout.progress = False
        fold_scout.random_state = scout.random_state + fold
        fold_scout.fit([examples[i] for i in train])
        proba = fold_scout.predict_proba([examples[i] for i in test])
        for i, p in zip(test, align_proba(proba, fold_scout.labels_, labels)):
            out[i] = p
    return out  # type: ignore[return-value]


def consistency_scores(examples: Sequence[Example], task: Task) -> np.ndarray:
    """A model-free detector: how consistently the data set labels the same thing, shape (n,).

    NER: per word form (case kept), the share of its occurrences in ``examples`` with this
    example's entity type for it (``O`` included, B-/I- folded); an example scores the lowest
    over its words. Classification: the share of the examples with this exact text that carry
    this label. Seen once: 1. Catches the convention slips of real annotators ("Reuters" an ORG
    here, MISC there), blind to any error the rest of the data set repeats.
    """
    if task == "ner":
        keyed = [
            list(zip(ex.words, (tag.split("-", 1)[-1] for tag in ex.label), strict=True))
            for ex in examples
        ]
    else:
        keyed = [[(ex.text, ex.label)] for ex in examples]
    counts: dict = defaultdict(Counter)
    for pairs in keyed:
        for key, label in pairs:
            counts[key][label] += 1
    scores = np.ones(len(examples))
    for i, pairs in enumerate(keyed):
        for key, label in pairs:
            total = sum(counts[key].values())
            if total > 1:
                scores[i] = min(scores[i], counts[key][label] / total)
    return scores

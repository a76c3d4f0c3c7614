"""Baseline detectors: trivial scores, cleanlab on given probabilities, out-of-fold wiring."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.baselines import (
    align_proba,
    cleanlab_scores,
    entity_count_scores,
    label_indices,
    length_scores,
    out_of_fold_proba,
    random_scores,
)
from subregweigh.example import Example

NER = [
    Example("a", ("Peter", "met", "Mary", "in", "Paris"), ("B-PER", "O", "B-PER", "O", "B-LOC")),
    Example("b", ("Hello",), ("O",)),
    Example("c", ("New", "York", "Times"), ("B-ORG", "I-ORG", "I-ORG")),
]
NER_LABELS = ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]


def test_trivial_scores():
    r = random_scores(50, random_state=3)
    assert r.shape == (50,) and ((0 <= r) & (r < 1)).all()
    np.testing.assert_array_equal(r, random_scores(50, random_state=3))
    assert not np.array_equal(r, random_scores(50, random_state=4))
    # quality scores: lower is more doubtful, so the longest / entity-richest text is lowest
    np.testing.assert_array_equal(length_scores(NER), [-5, -1, -3])
    np.testing.assert_array_equal(entity_count_scores(NER), [-3, 0, -1])


def test_label_indices():
    idx = label_indices(NER, NER_LABELS, "ner")
    assert [i.tolist() for i in idx] == [[5, 0, 5, 0, 1], [0], [3, 4, 4]]
    cls = [Example("0", ("w",), ("pos",)), Example("1", ("w",), ("neg",))]
    assert label_indices(cls, ["neg", "pos"], "classification") == [1, 0]
    ml = [Example("0", ("w",), ("a", "c")), Example("1", ("w",), ())]
    assert label_indices(ml, ["a", "b", "c"], "classification", multi_label=True) == [[0, 2], []]
    with pytest.raises(ValueError, match="B-MISC"):
        label_indices([Example("x", ("w",), ("B-MISC",))], NER_LABELS, "ner")


def _rows(n_words, gold, p_gold, n_labels, rng):
    """Probability rows with p(gold) given and the rest spread at random."""
    rows = np.zeros((n_words, n_labels))
    for w, (g, p) in enumerate(zip(gold, p_gold)):
        rest = rng.dirichlet(np.ones(n_labels - 1)) * (1 - p)
        rows[w] = np.insert(rest, g, p)
    return rows


def test_cleanlab_ner_default_is_min_gold_probability():
    rng = np.random.default_rng(0)
    given = label_indices(NER, NER_LABELS, "ner")
    p_gold = [[0.9, 0.8, 0.3, 0.95, 0.7], [0.99], [0.6, 0.5, 0.4]]
    probs = [_rows(len(g), g, p, len(NER_LABELS), rng) for g, p in zip(given, p_gold)]
    scores = cleanlab_scores(given, probs, "ner")
    np.testing.assert_allclose(scores, [0.3, 0.99, 0.4])
    softmin = cleanlab_scores(given, probs, "ner", sentence_score_method="softmin")
    assert softmin.shape == (3,) and (softmin >= scores - 1e-12).all()


def test_cleanlab_classification():
    probs = [np.array([0.2, 0.8]), np.array([0.9, 0.1]), np.array([0.4, 0.6])]
    np.testing.assert_allclose(cleanlab_scores([1, 1, 0], probs, "classification"), [0.8, 0.1, 0.4])
    # multi-label: a label contradicted by confident sigmoids scores lower than a confirmed one
    sig = [np.array([0.95, 0.05, 0.9]), np.array([0.95, 0.05, 0.9])]
    ml = cleanlab_scores([[0, 2], [1]], sig, "classification", multi_label=True)
    assert ml.shape == (2,) and ((0 <= ml) & (ml <= 1)).all() and ml[0] > ml[1]


def test_align_proba():
    p = [np.array([[0.7, 0.3], [0.1, 0.9]]), np.array([0.5, 0.5])]
    out = align_proba(p, ["O", "B-PER"], ["B-LOC", "B-PER", "O"])
    np.testing.assert_allclose(out[0], [[0, 0.3, 0.7], [0, 0.9, 0.1]])
    np.testing.assert_allclose(out[1], [0, 0.5, 0.5])
    np.testing.assert_allclose(p[0], [[0.7, 0.3], [0.1, 0.9]])  # inputs untouched
    with pytest.raises(ValueError, match="B-MISC"):
        align_proba(p, ["O", "B-MISC"], ["O"])


class FoldScout:
    """Stands in for Scout: remembers its training ids, 'predicts' a row saying which it was."""

    fitted: list[set[str]] = []

    def __init__(self, random_state=0):
        self.random_state = random_state
        self.progress = True

    def fit(self, examples):
        self.train_ids = {ex.id for ex in examples}
        FoldScout.fitted.append(self.train_ids)
        self.labels_ = sorted({c for ex in examples for c in ex.label})
        return self

    def predict_proba(self, examples):
        # probability 1 on the first known label, so alignment can be checked
        return [np.eye(len(self.labels_))[0] for _ in examples]


def test_out_of_fold_proba_never_predicts_a_training_example():
    FoldScout.fitted = []
    data = [Example(str(i), ("w",), ("a" if i else "rare",)) for i in range(23)]
    out = out_of_fold_proba(data, FoldScout(random_state=7), ["a", "rare"], n_folds=5)
    assert len(FoldScout.fitted) == 5 and len(out) == 23
    held_out = [set(ex.id for ex in data) - ids for ids in FoldScout.fitted]
    # every example held out by exactly one fold, and predicted
    assert sorted(i for fold in held_out for i in fold) == sorted(ex.id for ex in data)
    assert all(p.shape == (2,) for p in out)
    # the fold that held out "rare" never saw it: its columns come back aligned, rare at 0
    rare_fold = next(i for i, fold in enumerate(held_out) if "0" in fold)
    assert "rare" not in {
        c for ex in data if ex.id in FoldScout.fitted[rare_fold] for c in ex.label
    }
    np.testing.assert_array_equal(out[0], [1, 0])
    with pytest.raises(ValueError, match="n_folds"):
        out_of_fold_proba(data[:3], FoldScout(), ["a"], n_folds=5)

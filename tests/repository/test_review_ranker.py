"""The review-loop benchmark's ranker (benchmarks.review_ranker): features of a scout's doubt,
slips of fixed sentences (subregweigh.review), and a ranking that learns from decisions. On real
CoNLL sentences and the session's tiny real scout."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.baselines import label_indices
from benchmarks.review_ranker import ReviewRanker, sentence_features, slip_counts
from benchmarks.word_slips import slip_keys
from subregweigh.example import Example


def _outputs(scout, examples):
    proba = scout.predict_proba(examples)
    given = label_indices(examples, scout.labels_, "ner")
    gold = [p[np.arange(len(g)), g] for p, g in zip(proba, given)]
    tags = [[scout.labels_[j] for j in p.argmax(axis=1)] for p in proba]
    return gold, tags


def test_features_of_a_real_scout_count_its_disagreements(tiny_scout, tiny_ner_data):
    examples = tiny_ner_data[:30]
    gold, tags = _outputs(tiny_scout, examples)
    X, names = sentence_features(examples, gold, tags)
    assert X.shape == (30, len(names))
    assert names[:2] == ["min_surprisal", "sum_surprisal"]
    column = {name: X[:, k] for k, name in enumerate(names)}
    # the lowest p(gold) is the largest surprisal; a sentence the scout tags as annotated has none
    assert np.allclose(column["min_surprisal"], [-np.log(max(g.min(), 1e-6)) for g in gold])
    agree = [i for i, (ex, t) in enumerate(zip(examples, tags)) if list(ex.label) == t]
    kinds = [n for n in names if n.startswith("kind:")]
    assert agree and all(X[i, [names.index(k) for k in kinds]].sum() == 0 for i in agree)
    assert column["entities"].tolist() == [sum(t[:2] == "B-" for t in ex.label) for ex in examples]


def test_features_name_the_kind_and_type_pair_of_each_disagreement():
    ex = Example(id="s1", words=("Japan", "beat", "Syria", "."), label=("B-LOC", "O", "B-LOC", "O"))
    scouts = ["B-ORG", "O", "O", "O"]  # a type change and a missed entity
    X, names = sentence_features([ex], [np.array([0.1, 0.9, 0.2, 0.9])], [scouts])
    row = dict(zip(names, X[0]))
    assert row["kind:type"] == 1 and row["pair:LOC>ORG"] == 1
    assert row["kind:spurious"] == 1 and row["pair:LOC>O"] == 1
    assert row["doubted_words"] == 2


def test_a_fixed_slip_counts_where_the_same_word_has_the_same_annotation():
    original = [
        Example(id="s2", words=("Leeds", "won", "."), label=("B-LOC", "O", "O")),
        Example(id="s3", words=("Leeds", "lost", "."), label=("B-LOC", "O", "O")),
        Example(id="s4", words=("Leeds", "drew", "."), label=("B-ORG", "O", "O")),
        Example(id="s5", words=("Rain", "fell", "."), label=("O", "O", "O")),
    ]
    fixed = Example(id="s6", words=("Leeds", "won", "."), label=("B-ORG", "O", "O"))
    assert slip_keys(original[0], fixed) == {("Leeds", "LOC")}
    assert slip_counts(original, [(0, fixed)]).tolist() == [1, 1, 0, 0]
    assert slip_counts(original, []).tolist() == [0, 0, 0, 0]
    fixed_too = Example(id="s9", words=("Leeds", "lost", "."), label=("B-ORG", "O", "O"))
    twice = slip_counts(original, [(0, fixed), (1, fixed_too)])
    assert twice.tolist() == [2, 2, 0, 0]  # the same slip fixed twice counts twice


def test_the_ranker_keeps_the_static_order_until_it_has_both_kinds_of_decision():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    static = rng.random(40)
    slips = np.zeros(40)
    ranker = ReviewRanker(min_each=3).fit(X, slips, [0, 1, 2, 3], [True, True, False, False])
    assert ranker.model_ is None
    assert np.array_equal(ranker.doubt(X, slips, static), -static)


def test_the_ranker_learns_which_feature_marks_an_error():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 4))
    is_error = X[:, 2] > 0.8  # only the third feature says which are errors
    decided, slips = np.arange(60), np.zeros(200)
    ranker = ReviewRanker().fit(X, slips, decided, is_error[decided])
    doubt = ranker.doubt(X, slips, static=np.ones(200))
    rest = np.arange(60, 200)
    top = rest[np.argsort(-doubt[rest])[: int(is_error[rest].sum())]]
    assert is_error[top].mean() > 0.8 > 2 * is_error[rest].mean()


def test_the_ranker_moves_up_sentences_that_repeat_fixed_slips():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 3))  # says nothing about the errors
    slips = (rng.random(200) < 0.2).astype(float)
    is_error = (slips > 0) & (rng.random(200) < 0.8)
    decided = np.arange(80)
    doubt = ReviewRanker().fit(X, slips, decided, is_error[decided]).doubt(X, slips, np.ones(200))
    rest = np.arange(80, 200)
    assert doubt[rest][slips[rest] > 0].min() > doubt[rest][slips[rest] == 0].max()


def test_the_ranker_refuses_inputs_that_do_not_match():
    with pytest.raises(ValueError, match="3 decided rows but 2 decisions"):
        ReviewRanker().fit(np.zeros((5, 2)), np.zeros(5), [0, 1, 2], [True, False])
    with pytest.raises(ValueError, match="5 rows of features but 4 slip counts"):
        ReviewRanker().fit(np.zeros((5, 2)), np.zeros(4), [0, 1], [True, False])

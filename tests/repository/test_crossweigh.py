"""The CrossWeigh baseline of the benchmarks (benchmarks.crossweigh): entity-disjoint folds, and
its weights from real scouts."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.crossweigh import CrossWeigh, entity_surfaces, fold_splits
from subregweigh.scout import Scout


@pytest.mark.slow  # trains a real scout per fold
def test_crossweigh_weights_and_reliability(tiny_ner_data):
    cw = CrossWeigh(
        Scout(epochs=1, progress=False),
        n_folds=3,
        n_iterations=1,
        epsilon=0.5,
        random_state=0,
        progress=False,
    )
    res = cw.weigh(tiny_ner_data)
    n = len(tiny_ner_data)
    assert res.ids == [ex.id for ex in tiny_ner_data]
    assert res.mistakes.shape == (n,) and set(res.mistakes.tolist()) <= {0, 1}
    np.testing.assert_allclose(res.weight, 0.5**res.mistakes)
    np.testing.assert_allclose(res.reliability, 1 - res.mistakes / 1)
    # a scout after one epoch on 40 sentences gets some whole sentences right, not all
    assert 0 < res.mistakes.sum() < n
    assert set(res.columns()) == {"reliability", "mistakes"}
    with pytest.raises(ValueError, match="n_folds"):
        CrossWeigh(n_folds=61).weigh(tiny_ner_data)


@pytest.mark.parametrize("n_folds", [3, 10])
def test_fold_splits_entity_disjoint(conll_train, n_folds):
    examples = conll_train[:300]
    surfaces = [entity_surfaces(ex) for ex in examples]
    rng = np.random.default_rng(0)
    for _ in range(2):  # two iterations from the same generator: different permutations
        splits = fold_splits(examples, n_folds, rng, entity_disjoint=True)
        assert len(splits) == n_folds
        tests = np.concatenate([test for _, test in splits])
        assert sorted(tests.tolist()) == list(range(len(examples)))  # one test fold each
        dropped = 0
        for train, test in splits:
            assert not set(train.tolist()) & set(test.tolist())
            held_out = set().union(*(surfaces[i] for i in test))
            for i in train:
                assert not surfaces[i] & held_out
            # only sentences sharing a surface with the test fold are dropped
            others = sorted(set(range(len(examples))) - set(test.tolist()))
            expected = [i for i in others if not surfaces[i] & held_out]
            assert train.tolist() == expected
            dropped += len(others) - len(train)
            assert len(train) > 0
        assert dropped > 0  # the constraint is active on real data


def test_fold_splits_plain_kfold(conll_train):
    examples = conll_train[:50]
    splits = fold_splits(examples, 5, np.random.default_rng(1), entity_disjoint=False)
    for train, test in splits:
        assert sorted(train.tolist() + test.tolist()) == list(range(50))
        assert len(test) == 10

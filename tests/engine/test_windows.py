"""The windows a long text is read in (subregweigh.windows): word-aligned, overlapping, each word
owned once by a window where it has context on both sides."""

import numpy as np
import pytest

from subregweigh.windows import owners, plan_windows


def _check(lengths, budget, stride):
    windows = plan_windows(lengths, budget, stride)
    lengths = np.asarray(lengths)
    cum = np.concatenate([[0], np.cumsum(lengths)])
    n = len(lengths)
    assert windows.owner.shape == (n,)
    assert windows.spans[0][0] == 0 and windows.spans[-1][1] == n
    for k, (start, end) in enumerate(windows.spans):
        assert start < end
        if k not in windows.cut:
            assert cum[end] - cum[start] <= budget
        if k:
            assert windows.spans[k - 1][0] < start <= windows.spans[k - 1][1]  # moves, overlaps
    for word, k in enumerate(windows.owner):
        start, end = windows.spans[k]
        assert start <= word < end  # each owner's window contains its word
        left = np.inf if start == 0 else cum[word] - cum[start]
        right = np.inf if end == n else cum[end] - cum[word + 1]
        # the overlap is the stride where the next window still fits its first new word
        overlap = min(stride, budget - 2 * lengths.max())
        assert min(left, right) >= (overlap - lengths.max()) // 2
    return windows


def test_a_text_that_fits_is_one_window():
    windows = plan_windows([1, 2, 3, 0, 4], budget=10)
    assert windows.spans == [(0, 5)]
    assert windows.owner.tolist() == [0] * 5
    assert windows.cut == []


def test_an_empty_text_is_one_empty_window():
    windows = plan_windows([], budget=10)
    assert windows.spans == [(0, 0)] and windows.owner.shape == (0,)


@pytest.mark.parametrize("stride", [0, 8, 16, 31])
def test_many_windows_own_every_word_once_with_context(stride):
    rng = np.random.default_rng(stride)
    lengths = rng.integers(1, 5, size=400)
    windows = _check(lengths, budget=32, stride=stride)
    assert len(windows.spans) > 10
    assert np.bincount(windows.owner, minlength=len(windows.spans)).sum() == 400  # once each


def test_the_default_stride_is_half_the_budget():
    lengths = [1] * 100
    windows = _check(lengths, budget=20, stride=10)
    assert plan_windows(lengths, 20).spans == windows.spans
    starts = [start for start, _ in windows.spans]
    assert starts[:3] == [0, 10, 20]


def test_a_word_longer_than_the_budget_is_its_own_window_cut():
    lengths = [2, 2, 30, 2, 2]
    windows = plan_windows(lengths, budget=8, stride=2)
    k = int(windows.owner[2])
    assert windows.spans[k] == (2, 3)
    assert windows.cut == [k]
    assert windows.spans[0][0] == 0 and windows.spans[-1][1] == 5


def test_words_without_subwords_are_owned_too():
    lengths = [0, 3, 0, 0, 3, 3, 0, 3, 3, 0]
    windows = _check(lengths, budget=7, stride=3)
    assert len(windows.spans) > 1


def test_deterministic():
    lengths = np.random.default_rng(0).integers(1, 9, size=300)
    first, second = plan_windows(lengths, 64, 16), plan_windows(lengths, 64, 16)
    assert first.spans == second.spans
    assert np.array_equal(first.owner, second.owner)


def test_owners_prefers_the_window_with_the_most_context():
    # 10 one-subword words, windows 0-7 and 4-10: word 4 has 2 subwords after it in the first
    # window, 0 before it in the second; word 5 1 and 1 (a tie: the earlier); word 6 0 and 2
    spans = [(0, 7), (4, 10)]
    owner = owners([1] * 10, spans)
    assert owner.tolist() == [0, 0, 0, 0, 0, 0, 1, 1, 1, 1]


def test_bad_budget_and_stride_are_named():
    with pytest.raises(ValueError, match="budget=0"):
        plan_windows([1], 0)
    with pytest.raises(ValueError, match="stride=5"):
        plan_windows([1], 5, 5)

"""Overlapping, word-aligned windows over a text longer than the encoder reads at once.

Pure functions over arrays of subword counts: :func:`plan_windows` cuts a text into windows of at
most ``budget`` subwords that overlap by about ``stride`` subwords, and gives each word the
window that owns it, the one where it has the most context on both sides (:func:`owners`). A
text that fits is one window; the scout reads a long text window by window and takes each
word's prediction from its owner (:mod:`subregweigh.scout`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np


class Windows(NamedTuple):
    """A text's windows.

    spans : list of (start, end)
        Word indices of each window, ``end`` exclusive, in text order; consecutive windows
        overlap, and together they cover every word.
    owner : ndarray of int64, shape (n_words,)
        The window each word's prediction comes from (an index into ``spans``).
    cut : list of int
        Windows holding one word longer than the budget, read cut to its first ``budget``
        subwords.
    """

    spans: list[tuple[int, int]]
    owner: np.ndarray
    cut: list[int]


def plan_windows(lengths: Sequence[int], budget: int, stride: int | None = None) -> Windows:
    """The windows of a text whose words have ``lengths`` subwords (shape (n_words,)).

    Parameters
    ----------
    lengths : sequence of int, shape (n_words,)
        Each word's subword count (0 for a word with no subword).
    budget : int
        Subwords per window, the special tokens excluded; at least 1.
    stride : int or None, default=None
        Subwords that consecutive windows share, at least (when the words allow it: the next
        window must still reach past the previous one). ``None``: half the budget, so that
        every owned word has about a quarter of the budget of context on each side. At most
        ``budget - 1``.

    Returns
    -------
    Windows
        One window ``(0, n_words)`` when the text fits. A word longer than ``budget`` is a
        window of its own, listed in ``cut``.
    """
    if budget < 1:
        raise ValueError(f"budget={budget}: a window holds at least 1 subword")
    stride = budget // 2 if stride is None else stride
    if not 0 <= stride < budget:
        raise ValueError(f"stride={stride}: expected 0 to budget - 1 ({budget - 1})")
    lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)
    n = len(lengths)
    cum = np.concatenate([[0], np.cumsum(lengths)])
    if cum[-1] <= budget:
        return Windows([(0, n)], np.zeros(n, dtype=np.int64), [])

    spans: list[tuple[int, int]] = []
    cut: list[int] = []
    start = 0
    while start < n:
        # the furthest end that fits; a word over the budget alone
        end = int(np.searchsorted(cum, cum[start] + budget, side="right")) - 1
        end = min(max(end, start + 1), n)
        if cum[end] - cum[start] > budget:
            cut.append(len(spans))
        spans.append((start, end))
        if end == n:
            break
        start = _next_start(cum, start, end, budget, stride)
    return Windows(spans, owners(lengths, spans), cut)


def _next_start(cum: np.ndarray, start: int, end: int, budget: int, stride: int) -> int:
    """The first word of the window after ``(start, end)``: the latest start in
    ``(start, end]`` that shares at least ``stride`` subwords with it and still fits the word at
    ``end``; else the earliest that fits it; else ``end`` (no overlap)."""
    candidates = np.arange(start + 1, end + 1)
    shared = cum[end] - cum[candidates]
    fits = cum[end + 1] - cum[candidates] <= budget
    good = candidates[fits & (shared >= stride)]
    if len(good):
        return int(good[-1])
    fitting = candidates[fits]
    return int(fitting[0]) if len(fitting) else end


def owners(lengths: Sequence[int], spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """Each word's owning window among ``spans``: of the windows that hold it, the one where
    its context on the nearer side (subwords between it and the window's edge, unbounded where
    the edge is the text's) is largest; ties go to the earlier window.

    Returns
    -------
    ndarray of int64, shape (n_words,)
    """
    lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)
    n = len(lengths)
    cum = np.concatenate([[0], np.cumsum(lengths)])
    best = np.full(n, -1, dtype=np.int64)
    best_context = np.full(n, -np.inf)
    for k, (start, end) in enumerate(spans):
        words = np.arange(start, end)
        left = np.where(start == 0, np.inf, cum[words] - cum[start]).astype(float)
        right = np.where(end == n, np.inf, cum[end] - cum[words + 1]).astype(float)
        context = np.minimum(left, right)
        better = context > best_context[words]
        best[words[better]] = k
        best_context[words[better]] = context[better]
    if (best < 0).any():
        raise ValueError(f"word {int(np.flatnonzero(best < 0)[0])} is in no window")
    return best

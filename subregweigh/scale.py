"""One scale for the scores of successive versions: a version's raw scores mapped so that the
share of annotations under :data:`THRESHOLD` is the share its own served tagging labels
otherwise, pure.

A filter such as Label Studio's *Prediction score < 0.5* means "the model doubts this" only if
the scores of every version sit on one scale. Raw p(gold) does not: on 300-tweet projects, where
the product rests on the CRF, no task scored under 0.5 although about a fifth were wrong. The map
is monotone piecewise-linear through (0, 0), (knot, 0.5) and (1, 1), the knot the version's
``share``-quantile, ``share`` the fraction of its annotations whose served tagging (the tags the
score is read from, what it suggests instead) differs from them: so the order and its ties
stay, and the share under 0.5 is the version's own estimate of its error rate. Measured in
``benchmarks/version_scale.py`` against the raw scores and three other estimates of the share
(``docs/evaluation.md``, *Scores of successive versions on one scale*).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

THRESHOLD = 0.5  # the score the knot is mapped to: the Data Manager's "Prediction score < 0.5"
_INSIDE = 1e-6  # the knot stays inside (0, 1), so the map is strictly increasing


@dataclass(frozen=True)
class ScoreScale:
    """A version's map of raw scores onto the one scale.

    Attributes
    ----------
    knot : float
        The raw score served as :data:`THRESHOLD`, in (0, 1).
    share : float
        The share of the version's annotations meant to fall under :data:`THRESHOLD`.
    """

    knot: float
    share: float

    def __call__(self, score):
        """``score`` (a float, or an array of any shape, in [0, 1]) on the one scale: a float
        for a float, else an array of the same shape."""
        out = np.interp(score, [0.0, self.knot, 1.0], [0.0, THRESHOLD, 1.0])
        return float(out) if np.ndim(score) == 0 else out

    def to_json(self) -> dict:
        return {"knot": self.knot, "share": self.share}

    @classmethod
    def from_json(cls, data) -> ScoreScale:
        return cls(float(data["knot"]), float(data["share"]))


def scale_at(score, share: float) -> ScoreScale:
    """The scale whose knot is the ``share``-quantile of ``score`` (shape (n,), n >= 1): about
    ``share`` of ``score`` falls under :data:`THRESHOLD` once mapped."""
    score = np.asarray(score, dtype=float)
    if not score.size:
        raise ValueError("a scale needs at least one score")
    share = float(np.clip(share, 0.0, 1.0))
    knot = float(np.clip(np.quantile(score, share), _INSIDE, 1.0 - _INSIDE))
    return ScoreScale(knot, share)


def fit_scale(score, disagrees) -> ScoreScale:
    """The scale of a version whose annotations scored ``score`` (shape (n,)) and whose served
    tagging differs from them where ``disagrees`` (shape (n,), bool): :func:`scale_at` the share
    that disagrees."""
    disagrees = np.asarray(disagrees, dtype=bool)
    if disagrees.shape != np.shape(score):
        raise ValueError(f"{disagrees.shape} disagreements for {np.shape(score)} scores")
    return scale_at(score, float(disagrees.mean()) if disagrees.size else 0.0)


def disagreements(labels: Sequence[Sequence], tagging: Sequence[Sequence]) -> np.ndarray:
    """Shape (n,), bool: where ``tagging`` (one label sequence per annotation) differs from
    the annotations' ``labels``."""
    if len(labels) != len(tagging):
        raise ValueError(f"{len(tagging)} taggings for {len(labels)} annotations")
    return np.array([tuple(t) != tuple(g) for g, t in zip(labels, tagging)], dtype=bool)

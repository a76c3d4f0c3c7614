"""The served-score policy of the review queue: what reviewers' decisions make of an
annotation's score, pure.

* A **confirmed** annotation is served at :data:`CONFIRMED_SCORE` (1, fully reliable): it
  leaves the top of the queue until it changes.
* An annotation that repeats slips reviewers fixed elsewhere (:func:`subregweigh.review.slip_keys`,
  counted by :func:`subregweigh.review.slip_repeats` as often as each slip's net weight,
  :func:`subregweigh.review.net_slips`) is served at its score times :data:`SLIP_BOOST` per
  repeat (:func:`slip_factor`), so the same convention slip moves up the queue.
* An annotation of a task whose copies disagree with it (the same text, or an entity string,
  labelled otherwise: :mod:`subregweigh.copies`) is halved too, once per copy a reviewer
  decided (confirmed or fixed) that labels it otherwise (:func:`subregweigh.copies.contradicted`):
  a decision on one copy moves the others that contradict it up the queue.
* A task is served at the lowest of its annotations' served scores (:func:`task_score`).

The Label Studio backend serves these scores over its kept decisions (``backend.review.served``),
and the review-loop benchmark reads its queue with them (``benchmarks/review_loop.py``), so the
lab measures the policy the product ships.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

# An annotation's served score is multiplied by this for every repeat of a fixed slip: halved
# per repeat, as the review-loop benchmark's `propagate` policy, which reads 90% of CoNLL-2003
# test's errors in half the sentences of the static ranking (benchmarks/review_loop.py).
SLIP_BOOST = 0.5
CONFIRMED_SCORE = 1.0  # a reviewer vouched for the annotation as it stands


def slip_factor(repeats, boost: float = SLIP_BOOST):
    """What a score is multiplied by for ``repeats`` repeats of fixed slips: ``boost`` to that
    power (elementwise for an array of repeats)."""
    if np.ndim(repeats):
        return boost ** np.asarray(repeats, dtype=float)
    return boost**repeats


def served_score(score, repeats=0, confirmed=False, boost: float = SLIP_BOOST, contradicted=0):
    """The score an annotation is served with: :data:`CONFIRMED_SCORE` once ``confirmed``, else
    ``score`` times :func:`slip_factor` of its ``repeats`` plus ``contradicted``, the decided
    copies that label its task otherwise (:func:`subregweigh.copies.contradicted`; 0 by
    default). A float for one annotation; an array, elementwise, where any argument is one."""
    if np.ndim(score) or np.ndim(repeats) or np.ndim(confirmed) or np.ndim(contradicted):
        times = np.asarray(repeats) + np.asarray(contradicted)
        out = np.asarray(score, dtype=float) * slip_factor(times, boost)
        return np.where(confirmed, CONFIRMED_SCORE, out)
    if confirmed:
        return CONFIRMED_SCORE
    return float(score) * slip_factor(repeats + contradicted, boost)


def task_score(served: Iterable[float]) -> float:
    """A task's served score: the lowest of its annotations' (``served``, from
    :func:`served_score`), the most doubtful one leading it up the queue."""
    return min(served)

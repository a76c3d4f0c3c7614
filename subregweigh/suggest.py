"""What the scout suggests instead of an annotation, with its confidence.

A score says *how much* the scout believes an annotation; a reviewer also wants to know *what*
it would say instead, and how sure it is. Both come from outputs the weighing already has (no
forward pass of their own):

* classification, :func:`class_suggestion`: from every label's probability on the ordinary
  segmentation (``WeighResult.class_probability``), the annotated labels and the scout's, each
  with its probability, and the next most probable alternatives;
* NER, :func:`span_suggestions`: where the scout's tagging (``WeighResult.majority``) and the
  annotation disagree, entity by entity (:func:`subregweigh.compare.span_changes`, annotation as
  the original and the scout as the correction), with the scout's confidence in each side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from subregweigh.compare import span_changes

# A multi-label scout suggests a label when its probability is above this (logit > 0).
MULTI_LABEL_THRESHOLD = 0.5


@dataclass(frozen=True)
class ClassSuggestion:
    """What the scout says of one classification annotation; every label with the scout's
    probability of it, most probable first.

    Attributes
    ----------
    annotated : tuple of (label, probability)
        The annotated labels. A label the scout does not know has probability 0.
    suggested : tuple of (label, probability)
        The scout's labels: its most probable one (single-label), or every label above
        :data:`MULTI_LABEL_THRESHOLD` (multi-label; possibly none).
    alternatives : tuple of (label, probability)
        The next most probable labels, neither annotated nor suggested.
    probability : float
        The scout's probability of its suggestion as a whole, the way the "deterministic"
        score measures an annotation: single-label, p(suggested); multi-label, the lowest
        over labels of p(its decision on that label).
    """

    annotated: tuple[tuple[str, float], ...]
    suggested: tuple[tuple[str, float], ...]
    alternatives: tuple[tuple[str, float], ...]
    probability: float

    @property
    def agrees(self) -> bool:
        """Whether the scout suggests exactly the annotated labels."""
        return {c for c, _ in self.annotated} == {c for c, _ in self.suggested}


def class_suggestion(
    proba,
    labels: Sequence[str],
    annotated: Sequence[str],
    multi_label: bool = False,
    n_alternatives: int = 2,
) -> ClassSuggestion:
    """The scout's suggestion for one classification annotation.

    Parameters
    ----------
    proba : array-like of float, shape (n_labels,)
        The scout's probability of each label (a row of ``WeighResult.class_probability``, or
        of :meth:`Scout.predict_proba`): single-label, a softmax; multi-label, one sigmoid per
        label.
    labels : sequence of str, length n_labels
        The labels of ``proba``'s columns (``WeighResult.labels``, ``Scout.labels_``).
    annotated : sequence of str
        The annotation's labels (``Example.label``).
    multi_label : bool, default=False
    n_alternatives : int, default=2
        How many alternatives to list at most.

    Returns
    -------
    ClassSuggestion
    """
    proba = np.asarray(proba, dtype=float)
    if proba.shape != (len(labels),):
        raise ValueError(f"proba has shape {proba.shape}; expected ({len(labels)},), one per label")
    p = dict(zip(labels, proba.tolist()))
    ranked = sorted(labels, key=lambda c: -p[c])  # stable: equal probabilities in label order
    if multi_label:
        suggested = [c for c in ranked if p[c] > MULTI_LABEL_THRESHOLD]
        decisions = np.where(proba > MULTI_LABEL_THRESHOLD, proba, 1.0 - proba)
        confidence = float(decisions.min()) if decisions.size else 1.0
    else:
        suggested = ranked[:1]
        confidence = p[ranked[0]] if ranked else 0.0
    taken = set(annotated) | set(suggested)
    alternatives = [c for c in ranked if c not in taken][: max(n_alternatives, 0)]
    return ClassSuggestion(
        annotated=tuple(
            sorted(((c, p.get(c, 0.0)) for c in dict.fromkeys(annotated)), key=lambda a: -a[1])
        ),
        suggested=tuple((c, p[c]) for c in suggested),
        alternatives=tuple((c, p[c]) for c in alternatives),
        probability=confidence,
    )


@dataclass(frozen=True)
class SpanSuggestion:
    """One entity on which the scout's tagging and the annotation disagree.

    Spans are ``(type, start, end, confidence)``, word indices, end exclusive; None where that
    side has no entity.

    Attributes
    ----------
    kind : {"type", "boundary", "missing", "spurious"}
        As :func:`subregweigh.compare.span_changes` names them, the annotation being the
        original: ``type``, the same words with another type; ``boundary``, overlapping words;
        ``missing``, an entity the scout finds and the annotation lacks; ``spurious``, an
        annotated entity where the scout finds none.
    annotated : (type, start, end, confidence) or None
        The annotated entity, with the scout's probability of it.
    suggested : (type, start, end, confidence) or None
        The scout's entity, with its confidence in it.
    """

    kind: str
    annotated: tuple[str, int, int, float] | None
    suggested: tuple[str, int, int, float] | None


def span_suggestions(
    annotated: Sequence[str],
    suggested: Sequence[str],
    annotated_confidence: Sequence[tuple[str, int, int, float]] = (),
    suggested_confidence: Sequence[tuple[str, int, int, float]] = (),
) -> list[SpanSuggestion]:
    """Where the scout's tags ``suggested`` disagree with the annotation's ``annotated``.

    Parameters
    ----------
    annotated, suggested : sequence of str, length n_words
        IOB2 tags: the annotation's (``Example.label``) and the scout's (``WeighResult.majority``).
    annotated_confidence : sequence of (type, start, end, confidence)
        The scout's confidence in each annotated entity (``WeighResult.entity_probability`` of
        the example); an entity missing here gets NaN.
    suggested_confidence : sequence of (type, start, end, confidence)
        The scout's confidence in each of its entities (``WeighResult.majority_entities``: its
        probability on the ordinary segmentation, or the share of the K copies predicting it);
        an entity missing here gets NaN.

    Returns
    -------
    list of SpanSuggestion
        In order of position; ``[]`` when the two tag the same entities.
    """
    of_annotated = {tuple(e[:3]): float(e[3]) for e in annotated_confidence}
    of_suggested = {tuple(e[:3]): float(e[3]) for e in suggested_confidence}

    def scored(span, confidence):
        return None if span is None else (*span, confidence.get(tuple(span), float("nan")))

    return [
        SpanSuggestion(
            change.kind,
            scored(change.original, of_annotated),
            scored(change.corrected, of_suggested),
        )
        for change in span_changes(annotated, suggested)
    ]

"""The slips of fixed sentences (NER): what a reviewer's fix says about the annotation's other
sentences.

A fix changes some spans of an annotated sentence; the (word, type) pairs the original annotation
had there (:func:`slip_keys`) are its slip, a convention the annotator may have slipped on
elsewhere too. :func:`slip_repeats` counts how often a tagged sentence repeats the slips fixed so
far: the Label Studio backend lowers the served score of such sentences (``backend.reviews``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from subregweigh.compare import span_changes
from subregweigh.example import Example


def slip_keys(original: Example, fixed: Example) -> set[tuple[str, str]]:
    """The (word, type or O) pairs of ``original`` in the spans that ``fixed`` changed, for
    words that can carry a convention: capitalised, or inside an entity."""
    keys = set()
    for change in span_changes(original.label, fixed.label):
        _, start, end = change.original or change.corrected
        for j in range(start, end):
            word, kind = original.words[j], original.label[j].split("-", 1)[-1]
            if word[:1].isupper() or kind != "O":
                keys.add((word, kind))
    return keys


def word_types(words: Sequence[str], tags: Sequence[str]) -> set[tuple[str, str]]:
    """The (word, entity type or O) pairs of a tagged sentence, as :func:`slip_keys` names a
    slip."""
    return {(w, t.split("-", 1)[-1]) for w, t in zip(words, tags)}


def slip_repeats(words: Sequence[str], tags: Sequence[str], slips: Mapping) -> int:
    """How often a tagged sentence repeats the fixed ``slips`` ((word, type) -> how many fixes
    changed it): summed over its distinct pairs, the fixes of each."""
    return sum(slips[pair] for pair in word_types(words, tags) if pair in slips)

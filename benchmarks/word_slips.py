"""Slips keyed by single words (the product's until 2026-11-29): a fix's slip is the (word,
type) pairs of the words it changed, and a sentence repeats it where it holds one of those
words as that type, inside any entity.

Kept for the lab: ``review_loop --slip-keys word`` and the explorations built on it
(:mod:`benchmarks.review_ranker`, :mod:`benchmarks.exploration.missed_errors`). The product
keys a slip by the whole entity (:mod:`subregweigh.review`), which found more of CoNLL-2003
test's real errors in the review loop.
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
            if _can_carry(word, kind):
                keys.add((word, kind))
    return keys


def _can_carry(word: str, kind: str) -> bool:
    return word[:1].isupper() or kind != "O"


def convention_pairs(words: Sequence[str], tags: Sequence[str]) -> set[tuple[str, str]]:
    """The (word, entity type or O) pairs of a tagged sentence that can carry a convention
    (capitalised, or inside an entity): what a fix of it can name as a slip."""
    return {(w, t) for w, t in word_types(words, tags) if _can_carry(w, t)}


def word_types(words: Sequence[str], tags: Sequence[str]) -> set[tuple[str, str]]:
    """The (word, entity type or O) pairs of a tagged sentence."""
    return {(w, t.split("-", 1)[-1]) for w, t in zip(words, tags)}


def slip_repeats(words: Sequence[str], tags: Sequence[str], slips: Mapping) -> int:
    """How often a tagged sentence repeats the fixed ``slips`` ((word, type) -> its weight):
    summed over its distinct pairs, the weight of each."""
    return sum(slips[pair] for pair in word_types(words, tags) if pair in slips)

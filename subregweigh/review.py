"""The slips of fixed sentences (NER): what a reviewer's fix says about the annotation's other
sentences.

A sentence's conventions (:func:`convention_pairs`) are its entities, each as its words and
type ("Czech Republic", LOC), and its capitalised words outside them ("WESTERN", O). A fix
changes some spans; the conventions of the original annotation there (:func:`slip_keys`) are
its slip, a convention the annotator may have slipped on elsewhere too. :func:`net_slips`
weighs each slip by the review so far: the fixes that changed it, less the decided sentences
that held it and were right there; a slip that reviewers confirmed as often as they fixed it is
a word form, not a convention. :func:`slip_repeats` counts how often a tagged sentence repeats
the slips: the Label Studio backend lowers the served score of such sentences
(``backend.review.served``).

An entity is keyed whole: "Czech" typed LOC alone is one convention, "Czech Republic" as LOC
another, and confirming the second says nothing about the first. Keyed by single words instead
(each word of an entity with the entity's type), the review-loop benchmark found fewer of
CoNLL-2003 test's real errors (``benchmarks/review_loop.py --slip-keys``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence

from subregweigh.compare import span_changes
from subregweigh.example import Example
from subregweigh.tags import entity_spans

OUTSIDE = "O"  # the type of a convention outside every entity

# How many times a refit of the CRF between trainings counts an annotation a reviewer decided
# (confirmed, or saved as the fix): the reviewed conventions outweigh the unreviewed annotations'
# slips. Chosen on the review loop over CoNLL-2003's real errors: 0.735 of the errors found at
# twice their number read, against 0.717 counted once, 0.735 five times (a wider spread) and
# 0.728 ten times (benchmarks/results/review-loop-refit-weight-*.md). The backend's refresh
# (``backend.jobs.refresh``) and the review-loop benchmark both count by it.
REVIEWED_WEIGHT = 3


def convention_pairs(words: Sequence[str], tags: Sequence[str]) -> set[tuple[str, str]]:
    """The conventions of a tagged sentence (IOB2 ``tags``), as (text, type) pairs: each
    entity as its words joined by spaces and its type, and each capitalised word outside the
    entities with :data:`OUTSIDE`; what a fix of it can name as a slip (:func:`slip_keys`)."""
    return {(text, kind) for kind, _, _, text in _conventions(words, tags)}


def slip_keys(original: Example, fixed: Example) -> set[tuple[str, str]]:
    """The conventions (:func:`convention_pairs`) of ``original`` that ``fixed`` changed: those
    that overlap a span the fix changed (an entity of ``original`` or of ``fixed``)."""
    changed = [c.original or c.corrected for c in span_changes(original.label, fixed.label)]
    return {
        (text, kind)
        for kind, s, e, text in _conventions(original.words, original.label)
        if any(s < end and start < e for _, start, end in changed)
    }


def _conventions(words: Sequence[str], tags: Sequence[str]) -> list[tuple[str, int, int, str]]:
    """``(type, start, end, text)`` of each convention of a tagged sentence
    (:func:`convention_pairs`), word indices, end exclusive."""
    spans = entity_spans(tags)
    inside = {j for _, start, end in spans for j in range(start, end)}
    out = [(kind, start, end, " ".join(words[start:end])) for kind, start, end in spans]
    out += [
        (OUTSIDE, j, j + 1, word)
        for j, word in enumerate(words)
        if j not in inside and word[:1].isupper()
    ]
    return out


def net_slips(decided: Iterable[tuple[Collection, Collection]]) -> Counter:
    """Each fixed slip's weight after a review: (text, type) -> the fixes that changed it less
    the decided sentences that held it where no fix changed it; only the positive ones.

    ``decided``: per decided sentence, ``(pairs, slips)``: its :func:`convention_pairs` as it
    was annotated when decided, and the :func:`slip_keys` its fix changed (empty for a
    sentence confirmed as right). Counting the fixes alone found fewer of CoNLL-2003 test's
    real errors in the review-loop benchmark (``--propagate-rule``)."""
    fixes, held = tally_decisions(decided)
    return Counter({pair: n - held[pair] for pair, n in fixes.items() if n > held[pair]})


def tally_decisions(decided: Iterable[tuple[Collection, Collection]]) -> tuple[Counter, Counter]:
    """``(fixes, held)`` over the ``decided`` sentences (as :func:`net_slips` takes them):
    (text, type) -> the fixes that changed it, and -> the decided sentences that held it where
    no fix of theirs changed it."""
    fixes: Counter = Counter()
    held: Counter = Counter()
    for pairs, slips in decided:
        changed = {tuple(s) for s in slips}
        fixes.update(changed)
        held.update({tuple(p) for p in pairs} - changed)
    return fixes, held


def slip_repeats(words: Sequence[str], tags: Sequence[str], slips: Mapping) -> int:
    """How often a tagged sentence repeats the fixed ``slips`` ((text, type) -> its weight,
    :func:`net_slips`): summed over its distinct conventions (:func:`convention_pairs`), the
    weight of each."""
    return sum(slips[pair] for pair in convention_pairs(words, tags) if pair in slips)

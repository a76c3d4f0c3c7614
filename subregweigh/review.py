"""The slips of fixed sentences (NER): what a reviewer's fix says about the annotation's other
sentences.

A fix changes some spans of an annotated sentence; the (word, type) pairs the original annotation
had there (:func:`slip_keys`) are its slip, a convention the annotator may have slipped on
elsewhere too. :func:`net_slips` weighs each slip by the review so far: the fixes that changed it,
less the decided sentences that held it and were right there; a slip that reviewers confirmed as
often as they fixed it is a word form, not a convention. :func:`slip_repeats` counts how often a
tagged sentence repeats the slips: the Label Studio backend lowers the served score of such
sentences (``backend.served``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence

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
    (capitalised, or inside an entity): what a fix of it can name as a slip
    (:func:`slip_keys`)."""
    return {(w, t) for w, t in word_types(words, tags) if _can_carry(w, t)}


def net_slips(decided: Iterable[tuple[Collection, Collection]]) -> Counter:
    """Each fixed slip's weight after a review: (word, type) -> the fixes that changed it less
    the decided sentences that held it where no fix changed it; only the positive ones.

    ``decided``: per decided sentence, ``(pairs, slips)``: its :func:`convention_pairs` as it
    was annotated when decided, and the :func:`slip_keys` its fix changed (empty for a
    sentence confirmed as right). Counting the fixes alone found fewer of CoNLL-2003 test's
    real errors in the review-loop benchmark (``--propagate-rule``)."""
    fixes, held = tally_decisions(decided)
    return Counter({pair: n - held[pair] for pair, n in fixes.items() if n > held[pair]})


def tally_decisions(decided: Iterable[tuple[Collection, Collection]]) -> tuple[Counter, Counter]:
    """``(fixes, held)`` over the ``decided`` sentences (as :func:`net_slips` takes them):
    (word, type) -> the fixes that changed it, and -> the decided sentences that held it where
    no fix of theirs changed it."""
    fixes: Counter = Counter()
    held: Counter = Counter()
    for pairs, slips in decided:
        changed = {tuple(s) for s in slips}
        fixes.update(changed)
        held.update({tuple(p) for p in pairs} - changed)
    return fixes, held


def word_types(words: Sequence[str], tags: Sequence[str]) -> set[tuple[str, str]]:
    """The (word, entity type or O) pairs of a tagged sentence, as :func:`slip_keys` names a
    slip."""
    return {(w, t.split("-", 1)[-1]) for w, t in zip(words, tags)}


def slip_repeats(words: Sequence[str], tags: Sequence[str], slips: Mapping) -> int:
    """How often a tagged sentence repeats the fixed ``slips`` ((word, type) -> its weight,
    :func:`net_slips`): summed over its distinct pairs, the weight of each."""
    return sum(slips[pair] for pair in word_types(words, tags) if pair in slips)

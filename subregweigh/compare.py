"""Two annotations of the same examples: which examples differ, and how their entities changed.

The ground truth of a real-error benchmark (an original annotation against its correction, say
CoNLL-2003 test against CoNLL++) and the record of what a reviewer fixed are both this
comparison. Entity changes are classified per span, as annotation guidelines talk about them:

* ``type``: the same words, another entity type;
* ``boundary``: an entity that overlaps the other's but covers other words (one word too long);
* ``missing``: an entity of the correction that the original does not annotate at all;
* ``spurious``: an entity of the original with no overlapping entity in the correction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from subregweigh.example import Example
from subregweigh.tags import entity_spans

CHANGE_KINDS = ("type", "boundary", "missing", "spurious")


@dataclass(frozen=True)
class SpanChange:
    """One entity that differs between ``original`` and ``corrected`` (spans ``(type, start,
    end)``, word indices, end exclusive; None where that side has no entity)."""

    kind: str
    original: tuple[str, int, int] | None
    corrected: tuple[str, int, int] | None


def _overlaps(a: tuple[str, int, int], b: tuple[str, int, int]) -> bool:
    return a[1] < b[2] and b[1] < a[2]


def span_changes(original: Sequence[str], corrected: Sequence[str]) -> list[SpanChange]:
    """The entity changes from IOB2 tags ``original`` to ``corrected`` (same length), in order
    of position: ``[]`` when they annotate the same entities.

    A span of the original that the correction keeps exactly is no change. Of the rest, one with
    the same boundaries in the correction is a ``type`` change; one overlapping a corrected
    span, a ``boundary`` change (once per pair); an original span overlapping none, ``spurious``;
    a corrected span overlapping none of the original's, ``missing``.
    """
    if len(original) != len(corrected):
        raise ValueError(f"tag sequences differ in length: {len(original)} and {len(corrected)}")
    before, after = set(entity_spans(original)), set(entity_spans(corrected))
    gone = sorted(before - after, key=lambda s: s[1:])
    new = sorted(after - before, key=lambda s: s[1:])
    changes = []
    for span in list(gone):
        retyped = next((s for s in new if s[1:] == span[1:]), None)
        if retyped is not None:
            changes.append(SpanChange("type", span, retyped))
            gone.remove(span)
            new.remove(retyped)
    paired: set = set()
    for span in gone:  # spans of one annotation never overlap: these overlap only new ones
        overlapping = [s for s in new if _overlaps(span, s)]
        changes.extend(SpanChange("boundary", span, s) for s in overlapping)
        paired.update(overlapping)
        if not overlapping:
            changes.append(SpanChange("spurious", span, None))
    changes.extend(SpanChange("missing", None, s) for s in new if s not in paired)
    return sorted(changes, key=lambda c: (c.original or c.corrected)[1:])


def differs(original: Sequence[Example], corrected: Sequence[Example]) -> np.ndarray:
    """Whether each example's label differs between two annotations of the same examples,
    bool array of shape (n,). Raises ValueError, naming the first example that does not match
    (another text, another length), when they are not the same examples in the same order."""
    if len(original) != len(corrected):
        raise ValueError(f"{len(original)} examples against {len(corrected)}")
    for i, (a, b) in enumerate(zip(original, corrected, strict=True)):
        if a.words != b.words:
            raise ValueError(
                f"example {i} ({a.source or a.id}) has other words than its correction "
                f"({b.source or b.id})"
            )
    return np.array([a.label != b.label for a, b in zip(original, corrected)], dtype=bool)


def change_counts(original: Sequence[Example], corrected: Sequence[Example]) -> Counter:
    """How many entity changes of each kind (:data:`CHANGE_KINDS`) the correction makes."""
    counts: Counter = Counter({kind: 0 for kind in CHANGE_KINDS})
    for a, b in zip(original, corrected, strict=True):
        counts.update(change.kind for change in span_changes(a.label, b.label))
    return counts

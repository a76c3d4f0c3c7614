"""Character spans over raw text <-> one IOB2 tag per word.

Annotation tools (Label Studio among them) store NER labels as character spans over the raw
text; the engine works on words. This module splits text into words with their character
offsets and turns character spans into IOB2 word tags. It is pure: no I/O, no annotation-tool
packages; problems come back as warning strings so the caller decides what to do with them.

Not to be confused with :func:`subregweigh.tags.spans_to_tags`, whose spans are word indices.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

import regex

WORD = regex.compile(r"[\w\p{M}]+|[^\w\s\p{M}]\p{M}*")
"""Words are runs of letters, digits and combining marks ("Zu\u0308rich", Devanagari), and
every other non-space character on its own."""


def words_with_offsets(text: str) -> list[tuple[str, int, int]]:
    """``(word, start, end)`` of every word of ``text``; end-exclusive character offsets."""
    return [(m.group(), m.start(), m.end()) for m in WORD.finditer(text)]


def spans_to_tags(
    text: str, spans: Iterable[tuple[int, int, str]], where: str = ""
) -> tuple[list[tuple[str, int, int]], list[str], list[str]]:
    """IOB2 word tags from character spans.

    Parameters
    ----------
    text : str
    spans : iterable of (start, end, label)
        End-exclusive character offsets, as Label Studio writes them.
    where : str
        Names the task in warnings.

    Returns
    -------
    words : list of (word, start, end)
    tags : list of str, one per word
    warnings : list of str
        A span outside the text or covering no word is dropped; a span that cuts a word grows
        to the whole word; a span overlapping an earlier one (by start, longest first) is
        dropped, since BIO tags cannot overlap.

    The words a span covers are found by bisection over the words' offsets: a task of many
    words and regions costs O((words + regions) log words), not their product.
    """
    words = words_with_offsets(text)
    starts, ends = [ws for _, ws, _ in words], [we for _, _, we in words]
    tags = ["O"] * len(words)
    warnings = []
    taken = [False] * len(words)
    for start, end, label in sorted(spans, key=lambda s: (s[0], -(s[1] - s[0]))):
        if not (0 <= start < end <= len(text)):
            warnings.append(
                f"{where}: span {start}-{end} ({label}) lies outside the text "
                f"of {len(text)} characters; skipped"
            )
            continue
        # the words with ws < end and we > start: both offsets rise with the word's index
        covered = range(bisect.bisect_right(ends, start), bisect.bisect_left(starts, end))
        if not covered:
            warnings.append(f"{where}: span {start}-{end} ({label}) covers no word; skipped")
            continue
        first, last = covered[0], covered[-1]
        if words[first][1] < start or words[last][2] > end:
            warnings.append(
                f"{where}: span {start}-{end} ({label}) {text[start:end]!r} cuts a word; "
                f"widened to {words[first][1]}-{words[last][2]}"
            )
        if any(taken[i] for i in covered):
            warnings.append(f"{where}: span {start}-{end} ({label}) overlaps another span; skipped")
            continue
        for i in covered:
            taken[i] = True
            tags[i] = ("B-" if i == first else "I-") + label
    return words, tags, warnings


def utf16_to_char_offset(text: str, offset: int) -> int | None:
    """The character index of UTF-16 code unit ``offset`` in ``text``, or None if ``offset``
    falls inside a surrogate pair or beyond the text.

    JavaScript counts string positions in UTF-16 code units, in which a character outside the
    Basic Multilingual Plane (most emoji) counts twice; older Label Studio versions wrote such
    offsets.
    """
    units = 0
    for i, ch in enumerate(text):
        if units == offset:
            return i
        if units > offset:
            return None
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(text) if units == offset else None

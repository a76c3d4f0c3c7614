"""Label Studio results <-> the engine's word-level examples.

Label Studio stores NER labels as character spans over the raw text and classifications as
choices. The engine works on words: NER gets one IOB2 tag per word, classification the sorted
tuple of classes. These functions are pure; problems are reported as warnings (strings naming the
task) so the caller can log them and carry on with the rest of the project.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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
    """
    words = words_with_offsets(text)
    tags = ["O"] * len(words)
    warnings = []
    taken = [False] * len(words)
    for start, end, label in sorted(spans, key=lambda s: (s[0], -(s[1] - s[0]))):
        if not (0 <= start < end <= len(text)):
            warnings.append(f"{where}: span {start}-{end} ({label}) lies outside the text "
                            f"of {len(text)} characters; skipped")
            continue
        covered = [i for i, (_, ws, we) in enumerate(words) if ws < end and we > start]
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


def labels_result(
    text: str, spans: Iterable[tuple[int, int, str]], from_name: str, to_name: str,
    scores: Iterable[float] | None = None,
) -> list[dict]:
    """Label Studio ``labels`` regions for character spans, with a per-region score."""
    scores = list(scores) if scores is not None else None
    result = []
    for i, (start, end, label) in enumerate(spans):
        region = {
            "from_name": from_name,
            "to_name": to_name,
            "type": "labels",
            "value": {"start": start, "end": end, "text": text[start:end], "labels": [label]},
        }
        if scores is not None:
            region["score"] = float(scores[i])
        result.append(region)
    return result


def choices_result(labels: Sequence[str], from_name: str, to_name: str) -> list[dict]:
    """A Label Studio ``choices`` result (empty when no class is predicted)."""
    if not labels:
        return []
    return [{
        "from_name": from_name,
        "to_name": to_name,
        "type": "choices",
        "value": {"choices": list(labels)},
    }]

"""IOB tag sequences: scheme detection, IOB1 -> IOB2 conversion, validation and spans.

A tag is ``"O"``, ``"B-X"`` or ``"I-X"`` where ``X`` is a non-empty entity type. In IOB2 every
entity starts with ``B-``; in IOB1 (original CoNLL-2003) an entity starts with ``I-`` and
``B-`` is used only to separate two adjacent entities of the same type.
"""

from __future__ import annotations

from typing import Iterable, Literal, Sequence

from .example import DataError, Example

Scheme = Literal["IOB1", "IOB2"]


def _split(tag: str) -> tuple[str, str] | None:
    """``"B-PER" -> ("B", "PER")``, ``"O" -> ("O", "")``; ``None`` for anything else."""
    if tag == "O":
        return "O", ""
    if len(tag) > 2 and tag[0] in "BI" and tag[1] == "-":
        return tag[0], tag[2:]
    return None


def _continues(prev: str | None, etype: str) -> bool:
    """Whether ``I-etype`` may follow ``prev`` in IOB2 (``prev=None`` = sentence start)."""
    return prev is not None and prev != "O" and prev[2:] == etype


def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """Convert one IOB1 tag sequence to IOB2.

    An ``I-X`` that starts a span (first word, or after ``O`` or another type) becomes ``B-X``.
    Existing ``B-`` tags and ``O`` are kept. Tags are not validated here.

    Parameters
    ----------
    tags : sequence of str, shape (n_words,)

    Returns
    -------
    list of str, shape (n_words,)
    """
    out: list[str] = []
    prev: str | None = None
    for tag in tags:
        if tag.startswith("I-") and not _continues(prev, tag[2:]):
            out.append("B-" + tag[2:])
        else:
            out.append(tag)
        prev = tag  # compare with the *original* previous tag: IOB1 spans are defined on it
    return out


def detect_scheme(tag_sequences: Iterable[Sequence[str]]) -> Scheme:
    """Guess the scheme of a whole data set.

    Returns ``"IOB1"`` if any ``I-X`` starts a span (first word, or after ``O`` or a tag of
    another type), which IOB2 forbids; ``"IOB2"`` otherwise (also for data with no entities,
    where both schemes coincide).
    """
    for tags in tag_sequences:
        prev: str | None = None
        for tag in tags:
            if tag.startswith("I-") and not _continues(prev, tag[2:]):
                return "IOB1"
            prev = tag
    return "IOB2"


def _first_iob2_error(tags: Sequence[str]) -> tuple[int, str] | None:
    """``(word_index, reason)`` of the first invalid IOB2 tag, or ``None`` if all are valid."""
    prev: str | None = None
    for i, tag in enumerate(tags):
        parts = _split(tag)
        if parts is None:
            return i, f"unknown tag {tag!r} (expected O, B-X or I-X)"
        if parts[0] == "I" and not _continues(prev, parts[1]):
            after = "sentence start" if prev is None else repr(prev)
            return i, f"{tag!r} follows {after}; in IOB2 it must follow B-{parts[1]} or {tag}"
        prev = tag
    return None


def validate_iob2(tags: Sequence[str], where: str) -> None:
    """Raise :class:`DataError` unless ``tags`` is a valid IOB2 sequence.

    Parameters
    ----------
    tags : sequence of str, shape (n_words,)
    where : str
        Prefix for the message, e.g. ``"train.jsonl:12"`` or an example id.

    Raises
    ------
    DataError
        ``"{where}: word {i}: ..."`` with the 0-based word index of the first bad tag.
    """
    err = _first_iob2_error(tags)
    if err is not None:
        raise DataError(f"{where}: word {err[0]}: {err[1]}")


def entity_spans(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """Entity spans of an IOB2 sequence.

    Parameters
    ----------
    tags : sequence of str, shape (n_words,)
        IOB2 tags. A stray ``I-X`` (invalid IOB2) is treated as starting a span, as conlleval does.

    Returns
    -------
    list of (type, start, end)
        ``end`` is exclusive, so ``tags[start:end]`` is the span; ordered by ``start``.
    """
    spans: list[tuple[str, int, int]] = []
    etype: str | None = None
    start = 0
    for i, tag in enumerate(tags):
        if tag.startswith("I-") and etype == tag[2:]:
            continue
        if etype is not None:
            spans.append((etype, start, i))
            etype = None
        if tag.startswith(("B-", "I-")):
            etype, start = tag[2:], i
    if etype is not None:
        spans.append((etype, start, len(tags)))
    return spans


def spans_to_tags(spans: Iterable[tuple[str, int, int]], n: int) -> list[str]:
    """IOB2 tags for ``n`` words from ``(type, start, end_exclusive)`` spans.

    Raises
    ------
    ValueError
        If a span is empty, out of ``[0, n)`` or overlaps another span.
    """
    tags = ["O"] * n
    for etype, start, end in spans:
        if not (0 <= start < end <= n):
            raise ValueError(f"span {(etype, start, end)} is empty or outside 0..{n}")
        if any(t != "O" for t in tags[start:end]):
            raise ValueError(f"span {(etype, start, end)} overlaps another span")
        tags[start] = "B-" + etype
        tags[start + 1 : end] = ["I-" + etype] * (end - start - 1)
    return tags


def entity_types(examples: Iterable[Example]) -> list[str]:
    """Sorted entity types (``"PER"``, ...) used by the tags of NER examples."""
    return sorted({tag[2:] for ex in examples for tag in ex.label if tag != "O"})

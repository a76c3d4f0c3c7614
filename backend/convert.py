"""Label Studio results <-> the engine's word-level examples.

Label Studio stores NER labels as character spans over the raw text and classifications as
choices. The engine works on words: NER gets one IOB2 tag per word, classification the sorted
tuple of classes. The conversion itself (:func:`words_with_offsets`, :func:`spans_to_tags`)
is :mod:`subregweigh.spans`, re-exported here; the result builders below are Label Studio's
shapes. These functions are pure; problems are reported as warnings (strings naming the
task) so the caller can log them and carry on with the rest of the project.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

# The pure span <-> word-tag conversion lives in the engine; re-exported here for the backend.
from subregweigh.spans import WORD, spans_to_tags, words_with_offsets

__all__ = ["WORD", "choices_result", "labels_result", "spans_to_tags", "words_with_offsets"]


def labels_result(
    text: str,
    spans: Iterable[tuple[int, int, str]],
    from_name: str,
    to_name: str,
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
    return [
        {
            "from_name": from_name,
            "to_name": to_name,
            "type": "choices",
            "value": {"choices": list(labels)},
        }
    ]

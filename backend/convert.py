"""The engine's predictions -> Label Studio results (the regions a prediction holds).

Label Studio stores NER labels as character spans over the raw text and classifications as
choices. The way in (tasks -> examples) is the engine's :mod:`subregweigh.io.labelstudio`;
these are the shapes of the way out. Pure functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


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

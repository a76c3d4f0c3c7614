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
    notes: Iterable[str | None] | None = None,
) -> list[dict]:
    """Label Studio ``labels`` regions for character spans, with a per-region score and, where
    ``notes`` has one, a note in the region's meta (Label Studio shows it with the region)."""
    scores = list(scores) if scores is not None else None
    notes = list(notes) if notes is not None else None
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
        if notes is not None and notes[i]:
            region["meta"] = {"text": [notes[i]]}
        result.append(region)
    return result


def doubt_notes(
    suggested: Sequence[tuple[str, int, int, float]],
    annotated: Sequence[tuple[str, int, int, float]],
    per: str = "copies",
) -> list[str | None]:
    """Per suggested entity, how the annotation differs there (None where it agrees).

    Parameters
    ----------
    suggested : sequence of (type, start, end, agreement)
        The scout's majority entities (word offsets), with the share of the K copies that
        predict each (``per="copies"``), or its ordinary prediction's entities with the
        scout's probability of each (``per="probability"``).
    annotated : sequence of (type, start, end, probability)
        The annotation's entities, with the scout's p(gold) of each.
    """
    notes = []
    for etype, start, end, share in suggested:
        same = [a for a in annotated if (a[1], a[2]) == (start, end)]
        overlapping = [a for a in annotated if a[1] < end and start < a[2]]
        scout = (
            f"the scout says {etype} on {share:.0%} of the copies"
            if per == "copies"
            else f"the scout says {etype} (p {share:.2f})"
        )
        if same and same[0][0] == etype:
            notes.append(None)
        elif same:
            notes.append(f"annotated as {same[0][0]} (p {same[0][3]:.2f}); {scout}")
        elif overlapping:
            notes.append(f"annotated as {overlapping[0][0]} over other words; {scout}")
        else:
            notes.append(f"not annotated; {scout}")
    return notes


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

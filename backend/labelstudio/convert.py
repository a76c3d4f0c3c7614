"""The engine's predictions -> Label Studio results (the regions a prediction holds).

Label Studio stores NER labels as character spans over the raw text and classifications as
choices. The way in (tasks -> examples) is the engine's :mod:`subregweigh.io.labelstudio`;
these are the shapes of the way out. Pure functions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from subregweigh.suggest import ClassSuggestion, SpanSuggestion


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


# Where a NER version rests on the CRF (the scout learned too little of the project;
# subregweigh.learned), its notes name what judges and say why.
CRF_JUDGES = "the CRF"
RESTING_NOTE = (
    "the scout learned too little of this project, so the CRF and the other annotations judge"
)


def _says(who: str, what: str, confidence: float, per: str, verb: str = "says") -> str:
    if per == "copies":
        return f"{who} {verb} {what} on {confidence:.0%} of the copies"
    return f"{who} {verb} {what} (p {confidence:.2f})"


def doubt_regions(
    entities: Sequence[tuple[str, int, int, float]],
    suggestions: Sequence[SpanSuggestion],
    words: Callable[[int, int], str],
    per: str = "copies",
    resting: bool = False,
) -> tuple[list[tuple[str, int, int, float]], list[str | None]]:
    """The regions of an annotated task's prediction and their notes: where the annotation
    differs, how, with the scout's suggested span (None where it agrees).

    Parameters
    ----------
    entities : sequence of (type, start, end, confidence)
        The scout's entities (word offsets), with the share of the K copies that predict each
        (``per="copies"``) or the scout's probability of each (``per="probability"``).
    suggestions : sequence of SpanSuggestion
        :func:`subregweigh.suggest.span_suggestions` of the annotation against those entities.
    words : callable (start, end) -> str
        The text of words ``start:end``, to name an annotated span the scout moves.
    resting : bool, default False
        The entities are the CRF's with the project's memory, the scout having learned too
        little (``SubRegWeigh.rests_on_crf_``): each note names the CRF and says why
        (:data:`RESTING_NOTE`).

    Returns
    -------
    regions : list of (type, start, end, confidence)
        ``entities``, and each annotated entity the scout finds no entity on (``spurious``),
        with the scout's probability of it: the reviewer sees it to delete it; in order of
        position.
    notes : list of str or None, one per region
    """
    annotated_as: dict[tuple, list[str]] = {}  # per scout entity, what the annotation says
    dropped = [s.annotated for s in suggestions if s.kind == "spurious"]
    for s in suggestions:
        if s.kind == "spurious":
            continue
        said = "not annotated"
        if s.annotated:
            etype, start, end, p = s.annotated
            where = f' over "{words(start, end)}"' if s.kind == "boundary" else ""
            said = f"annotated as {etype}{where} (p {p:.2f})"
        annotated_as.setdefault(tuple(s.suggested[:3]), []).append(said)
    who = CRF_JUDGES if resting else "the scout"
    notes: dict[tuple, str] = {}
    for etype, start, end, confidence in entities:
        said = annotated_as.get((etype, start, end))
        if said == ["not annotated"]:  # a missed entity: the note names it, as a reviewer reads it
            found = _says(who, f'"{words(start, end)}" as {etype}', confidence, per, "finds")
            notes[etype, start, end] = f"not annotated: {found}"
        elif said:
            scout = _says(who, etype, confidence, per)
            notes[etype, start, end] = f"{' and '.join(said)}; {scout}"
    for etype, start, end, p in dropped:
        notes[etype, start, end] = f"annotated as {etype} (p {p:.2f}); {who} finds no entity"
    if resting:
        notes = {where: f"{note}; {RESTING_NOTE}" for where, note in notes.items()}
    regions = sorted([*entities, *dropped], key=lambda e: (e[1], e[2]))
    return regions, [notes.get(tuple(region[:3])) for region in regions]


def class_note(suggestion: ClassSuggestion) -> str:
    """One classification annotation against the scout's suggestion
    (:func:`subregweigh.suggest.class_suggestion`), for the result's meta: *annotated sports
    (p 0.12); the scout suggests politics (p 0.71); next: tech (p 0.10), arts (p 0.07)*."""

    def listed(pairs) -> str:
        return ", ".join(f"{label} (p {p:.2f})" for label, p in pairs) or "no label"

    note = f"annotated {listed(suggestion.annotated)}"
    if suggestion.agrees:
        note += ", as the scout suggests"
    else:
        note += f"; the scout suggests {listed(suggestion.suggested)}"
    if suggestion.alternatives:
        note += f"; next: {listed(suggestion.alternatives)}"
    return note


def choices_result(
    labels: Sequence[str],
    from_name: str,
    to_name: str,
    score: float | None = None,
    note: str | None = None,
) -> list[dict]:
    """A Label Studio ``choices`` result (empty when no class is predicted), with the scout's
    probability of it as its ``score`` and ``note`` in its meta, where given."""
    if not labels:
        return []
    # The note first: the Data Manager's "Prediction results" column shows the result's JSON
    # in this order, cut after a few lines; with Postgres (jsonb) it comes first anyway.
    result = {"meta": {"text": [note]}} if note else {}
    result |= {
        "from_name": from_name,
        "to_name": to_name,
        "type": "choices",
        "value": {"choices": list(labels)},
    }
    if score is not None:
        result["score"] = float(score)
    return [result]

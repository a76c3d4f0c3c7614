"""A project weighing several labeling controls (issue 62): one weigher per control, trained on
that control's annotations alone and kept in its version's ``controls/<i>`` folder
(:data:`CONTROLS_DIR`); a task's stored entry merged from each control's
(:func:`merge_entries`): its score the lowest of them (a task scores as its least reliable
annotation of any control), its result every control's regions, each note naming its control
(*sentiment: annotated positive (p 0.12); the scout suggests negative (p 0.81)*), each
annotation record keeping its control.

A project weighing one control never comes here: its entries are
:func:`backend.labelstudio.tasks.score_tasks`' as they were.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from backend.labelstudio.tasks import TaskRead, fingerprint, score_tasks
from subregweigh.io.labelstudio import LabelingSpec, ParsedTasks
from subregweigh.options import DEFAULT_SCORE

# A version of several controls keeps control i's parts in CONTROLS_DIR/<i> (names may hold
# spaces and colons; the meta's "weighers" maps each folder to its control).
CONTROLS_DIR = "controls"


def control_folder(version_folder: Path, index: int) -> Path:
    """Where the ``index``-th control's parts of a version of several controls lie."""
    return version_folder / CONTROLS_DIR / str(index)


def read_each(raw: Sequence, spec: LabelingSpec, first: TaskRead | None = None) -> list[TaskRead]:
    """``raw`` tasks read once per control weighed (:meth:`LabelingSpec.each`), in order;
    ``first``: ``raw`` as the caller read it with ``spec`` already (the first control's
    reading: ``spec``'s ``others`` change none of it), not parsed again."""
    controls = spec.each()
    head = [first] if first is not None else [TaskRead.of(raw, controls[0])]
    return [*head, *(TaskRead.of(raw, control) for control in controls[1:])]


def read_subset(read: TaskRead, indices: Sequence[int]) -> TaskRead:
    """The tasks of ``read`` at ``indices``, as read (not parsed again)."""
    parsed = ParsedTasks([read.parsed.tasks[i] for i in indices])
    return TaskRead([read.raw[i] for i in indices], parsed)


def _combined(prints: Sequence[str | None]) -> str:
    return hashlib.sha1(json.dumps(list(prints)).encode()).hexdigest()


def fingerprints(reads: Sequence[TaskRead]) -> list[str | None]:
    """Per task (in the order read), what changes whenever its reading under any control
    changes: the controls' :func:`~backend.labelstudio.tasks.fingerprint` combined; None for a
    task no control could read."""
    out = []
    for items in zip(*(read.parsed.tasks for read in reads), strict=True):
        if all(item is None for item in items):
            out.append(None)
        else:
            out.append(_combined([fingerprint(i) if i is not None else None for i in items]))
    return out


def _named(region: dict, control: str) -> dict:
    """``region`` with its note, if any, prefixed by the name of the control it belongs to."""
    notes = (region.get("meta") or {}).get("text")
    if not notes:
        return region
    return {**region, "meta": {**region["meta"], "text": [f"{control}: {n}" for n in notes]}}


def merge_entries(spec: LabelingSpec, per_control: Sequence[Mapping[str, dict]]) -> dict:
    """One stored entry per task from each control's (``per_control[i]``: control ``i`` of
    ``spec.each()``, task id -> :func:`~backend.labelstudio.tasks.stored_prediction`).

    A task's ``score`` is its controls' lowest (``controls`` keeps each control's), its
    ``result`` every control's regions (each note prefixed ``"<control>: "``), its
    ``annotations`` every control's records, each with its ``control``; ``reliability`` and
    ``probability`` are keyed ``"<control>:<example id>"``; the ``fingerprint`` is
    :func:`fingerprints`' (a control that could not read the task counts as None), and
    ``fingerprints`` keeps each control's (what a refresh of one control checks:
    :func:`control_entry`)."""
    names = [control.from_name for control in spec.each()]
    tasks = list(dict.fromkeys(task for entries in per_control for task in entries))
    merged = {}
    for task in tasks:
        parts = [(n, e[task]) for n, e in zip(names, per_control, strict=True) if task in e]
        entry = {
            "result": [_named(r, name) for name, e in parts for r in e["result"]],
            "score": min(e["score"] for _, e in parts),
            "fingerprint": _combined(
                [e[task]["fingerprint"] if task in e else None for e in per_control]
            ),
            "controls": {name: e["score"] for name, e in parts},
            "fingerprints": {name: e["fingerprint"] for name, e in parts},
        }
        for key in ("reliability", "probability"):
            entry[key] = {f"{name}:{k}": v for name, e in parts for k, v in e[key].items()}
        records = [{**r, "control": name} for name, e in parts for r in e.get("annotations", ())]
        if records:
            entry["annotations"] = records
        merged[task] = entry
    return merged


def _unnamed(region: dict, control: str) -> dict:
    """``region`` as its control scored it: :func:`_named` undone."""
    notes = (region.get("meta") or {}).get("text")
    prefix = f"{control}: "
    if not notes:
        return region
    text = [n[len(prefix) :] if n.startswith(prefix) else n for n in notes]
    return {**region, "meta": {**region["meta"], "text": text}}


def control_entry(merged: Mapping, control: str) -> dict | None:
    """``control``'s own entry (:func:`~backend.labelstudio.tasks.stored_prediction`) in a task's
    ``merged`` one (:func:`merge_entries`), or None where that control did not score the task
    (or the entry predates ``fingerprints``): what a refresh keeps of the controls it does not
    score again and merges back unchanged."""
    scores = merged.get("controls") or {}
    prints = merged.get("fingerprints") or {}
    if control not in scores or control not in prints:
        return None
    prefix = f"{control}:"
    entry = {
        "result": [
            _unnamed(r, control)
            for r in merged.get("result") or ()
            if r.get("from_name") == control
        ],
        "score": scores[control],
        "fingerprint": prints[control],
    }
    for key in ("reliability", "probability"):
        entry[key] = {
            k[len(prefix) :]: v for k, v in (merged.get(key) or {}).items() if k.startswith(prefix)
        }
    records = [
        {k: v for k, v in r.items() if k != "control"}
        for r in merged.get("annotations") or ()
        if r.get("control") == control
    ]
    if records:
        entry["annotations"] = records
    return entry


def score_several(
    weighers: Mapping[str, object],
    spec: LabelingSpec,
    reads: Sequence[TaskRead],
    score_name: str = DEFAULT_SCORE,
) -> dict:
    """Tasks scored by every control's fitted weigher (``weighers``: control name -> its
    SubRegWeigh; a control without one is not scored), read per control (:func:`read_each`),
    merged (:func:`merge_entries`)."""
    per_control = []
    for control, read in zip(spec.each(), reads, strict=True):
        srw = weighers.get(control.from_name)
        scored = score_tasks(srw, control, read.items, score_name) if srw is not None else {}
        per_control.append(scored)
    return merge_entries(spec, per_control)

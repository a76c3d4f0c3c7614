"""Why a task is flagged, written into its data for the labeling view and the Data Manager.

With a project's ``write_reason`` on (off by default: the backend then never writes task data),
each job that serves scores (a training, a rescore) writes every served task's reason, the
first sentence of its prediction's note (:func:`reason`), into the task's data field
:data:`~subregweigh.io.labelstudio.REASON_FIELD` (``srw_reason``). The review control's
``<Header value="$srw_reason"/>`` shows it above the choices, with no tab or region to open, and
the Data Manager lists the field as a column (Label Studio adds a data field to the project's
columns when a task's data is saved).

Bounded: a reason is at most :data:`MAX_CHARS` characters, and a job writes at most
:data:`WRITES_PER_JOB` tasks (the tasks it just rescored first, then the lowest served scores:
the head of the review queue); the rest follow with the next jobs. ``MODEL_DIR/<project>/
reasons.json`` keeps what each task was given, so an unchanged reason is never written again.

Label Studio 1.23 replaces a task's data whole on ``PATCH /api/tasks/ID``: the task's data is
read right before (``fields=task_only``) and sent back with only ``srw_reason`` changed. A
task whose data Label Studio shows otherwise than it stores it (a ``$undefined$`` field, a
storage link it answers presigned) is left alone: sending it back would change it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping

from backend.config.settings import Settings
from backend.labelstudio.client import LabelStudioAPI, LabelStudioUnavailable
from backend.review import reviews
from backend.store.store import ProjectStore
from subregweigh.io.atomic import atomic_write_json
from subregweigh.io.labelstudio import REASON_FIELD

logger = logging.getLogger(__name__)

MAX_CHARS = 240  # a reason's length in the task's data, "…" included
WRITES_PER_JOB = 200  # task data writes per job (Label Studio 1.23: some 40 ms each)
FILE = "reasons.json"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_LINK = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)  # s3://, gs://, https://...


def _note(region: Mapping) -> str:
    """A region's note in one line: the first sentence of each of its ``meta.text`` entries
    (the scout's, then those added after it, e.g. the copies'), its full stop dropped, joined
    by "; "."""
    text = (region.get("meta") or {}).get("text")
    entries = text if isinstance(text, list) else [text]
    said = (first_sentence(t).removesuffix(".") for t in entries if isinstance(t, str))
    return "; ".join(s for s in said if s)


def first_sentence(note: str) -> str:
    """``note`` up to its first sentence's end (a ``.``, ``!`` or ``?`` before a space)."""
    return _SENTENCE_END.split(note.strip(), 1)[0]


def capped(text: str, limit: int = MAX_CHARS) -> str:
    """``text`` in at most ``limit`` characters, ending in "…" where cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def reason(entry: Mapping) -> str:
    """A served prediction ``entry``'s reason, one line of at most :data:`MAX_CHARS`.

    ``score 0.04: "Paris": annotated as ORG (p 0.04); the scout says LOC (p 0.94)``: the
    served score, then the first sentence of the note of the lowest-scored region that has
    one (for NER the region's words first, where the notes differ; ``(+2 more on the
    prediction's regions)`` when others have notes too). A task whose every annotation a
    reviewer decided says who decided it and when. Without any note: that the scout
    agrees with the annotation, or (unannotated) that the score is the scout's own agreement.
    """
    score = entry.get("score")
    head = f"score {score:.2f}: " if isinstance(score, (int, float)) else ""
    noted = [
        (float(r.get("score", 1.0)), i, r)
        for i, r in enumerate(entry.get("result") or ())
        if isinstance(r, Mapping) and _note(r)
    ]
    records = entry.get("annotations") or ()
    if records and entry.get("confirmed") == len(records):  # every annotation decided
        # who decided, as each region's first note says (:func:`confirmed_note`), not the
        # notes added after it: a confirmed task's copies are flagged on the copies
        first = next((r for r in entry.get("result") or () if isinstance(r, Mapping)), {})
        said = (first.get("meta") or {}).get("text") or ["confirmed by a reviewer"]
        text = first_sentence(str(said[0]))
    elif noted:
        _, _, region = min(noted, key=lambda n: n[:2])
        text = _note(region)
        if len({_note(r) for *_, r in noted}) > 1:  # notes that differ: say which region
            words = (region.get("value") or {}).get("text")
            if region.get("type") == "labels" and isinstance(words, str) and words:
                text = f"{json.dumps(words, ensure_ascii=False)}: {text}"
            if len(noted) > 1:
                text += f" (+{len(noted) - 1} more on the prediction's regions)"
    elif records:
        text = "the scout agrees with the annotation"
    else:
        text = "not annotated: the scout's own prediction, scored by how often its copies agree"
    return capped(head + text)


def _load(store: ProjectStore) -> dict[str, str]:
    try:
        kept = json.loads((store.root / FILE).read_text())
    except (OSError, ValueError):
        return {}
    return kept.get("written", {}) if isinstance(kept, dict) else {}


def _writable(data) -> bool:
    """Whether task ``data`` as Label Studio lists it can be sent back as it stores it."""
    if not isinstance(data, dict) or "$undefined$" in data:
        return False
    return not any(
        isinstance(v, str) and _LINK.match(v) for k, v in data.items() if k != REASON_FIELD
    )


def write_reasons(
    api: LabelStudioAPI,
    store: ProjectStore,
    settings: Settings,
    first: Iterable[str] = (),
    limit: int = WRITES_PER_JOB,
) -> int:
    """Write the reasons (:func:`reason`) of the tasks the serving version scores into their
    data field ``srw_reason``, where ``settings.write_reason`` (the project's) is on: those
    whose reason changed since written, ``first`` (task ids) first, then by served score, at
    most ``limit``. Only ``srw_reason`` changes; a failure is logged (the scores are served
    already) and the rest wait for the next job. Returns how many tasks were written."""
    if not settings.write_reason:
        return 0
    version = store.current_version()
    if version is None:
        return 0
    first = {str(task) for task in first}
    with store.locked("reasons"):
        scales = reviews.version_scales(store, version)
        shown = reviews.served_scores(store, store.scores(version), scales)
        wanted = {task: reason(entry) for task, entry in shown.items()}
        written = _load(store)
        stale = [task for task, text in wanted.items() if written.get(task) != text]
        if not stale:
            return 0
        stale.sort(key=lambda t: (t not in first, float(shown[t].get("score", 1.0)), int(t)))
        batch = stale[:limit]
        done = 0
        try:
            for task in api.project_tasks(int(store.project), batch, fields="task_only"):
                key, data = str(task["id"]), task.get("data")
                if not _writable(data):
                    written[key] = wanted[key]  # left alone, not asked again
                    continue
                if data.get(REASON_FIELD) != wanted[key]:
                    api.set_task_data(int(task["id"]), {**data, REASON_FIELD: wanted[key]})
                    done += 1
                written[key] = wanted[key]
        except LabelStudioUnavailable as err:
            logger.warning(
                "project %s: the reasons of %d tasks are not written (%s); the next job tries",
                store.project,
                len(batch),
                err,
            )
        kept = {task: text for task, text in written.items() if task in wanted}
        try:
            atomic_write_json(store.root / FILE, {"version": version, "written": kept})
        except OSError as err:  # rewritten by the next job: the field is the same then
            logger.warning("project %s: %s not saved: %s", store.project, FILE, err)
    if done:
        left = len(stale) - len(batch)
        logger.info(
            "project %s: wrote why %d tasks are flagged into their %s%s",
            store.project,
            done,
            REASON_FIELD,
            f" ({left} left for the next jobs)" if left > 0 else "",
        )
    return done

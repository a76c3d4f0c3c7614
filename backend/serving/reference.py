"""A reference corpus: annotated data the scout trains on beside a project's annotations.

A new batch of annotations usually joins a corpus annotated by the same guidelines. A scout
trained on both learns the corpus's conventions from more data than the project holds, and a
slip the project makes consistently stands out against them: on CoNLL-2003's test set, its
14,041 training sentences as the reference raise the real-error AP from 0.282 to 0.418
(docs/evaluation.md). The reference trains the scout only; its examples are never ranked or
written to Label Studio.

The server's administrator puts the files in MODEL_DIR/references; SRW_REFERENCE (or a project's
``reference`` extra parameter) names one of them by its file name, never a path
(:class:`backend.config.settings.Settings` checks both). The file is read with the engine's readers
(:func:`subregweigh.io.read_dataset`: CoNLL, TSV, JSONL, a Label Studio export) and must label
what the project labels, with the project's labels.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from backend.config.settings import Settings
from subregweigh.example import DataError, Example
from subregweigh.io import read_dataset
from subregweigh.io.labelstudio import LabelingSpec
from subregweigh.tags import entity_types

_read: dict[tuple, tuple[list[Example], str]] = {}  # (path, size, mtime) -> (examples, task)
_lock = threading.Lock()


class ReferenceError(DataError):
    """A reference corpus that cannot train this project's scout; the message says why."""


def reference_examples(settings: Settings, spec: LabelingSpec) -> list[Example]:
    """SRW_REFERENCE's examples for a project labelled as ``spec`` (none without one).

    The last file read stays in memory until it changes on disk: a server retrains its
    projects with the same corpus.

    Raises
    ------
    ReferenceError
        When the file cannot be read, holds no examples, or does not fit the project: another
        task, or labels the project's config does not have.
    """
    path = settings.reference_path
    if path is None:
        return []
    try:
        stat = path.stat()
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        with _lock:
            if key not in _read:
                examples, task = read_dataset(path)
                _read.clear()
                _read[key] = (examples, task)
            examples, task = _read[key]
    except (OSError, DataError) as err:
        raise ReferenceError(f"the reference {settings.reference} cannot be read: {err}") from err
    _check(settings.reference, examples, task, spec)
    return examples


def _check(name: str, examples: Sequence[Example], task: str, spec: LabelingSpec) -> None:
    if not examples:
        raise ReferenceError(f"the reference {name} holds no examples")
    if task != spec.task:
        raise ReferenceError(
            f"the reference {name} holds {_TASK_WORDS[task]}; the project labels "
            f"{_TASK_WORDS[spec.task]}"
        )
    if task == "ner":
        used = entity_types(examples)
    else:
        used = sorted({label for ex in examples for label in ex.label})
        several = next((ex for ex in examples if len(ex.label) > 1), None)
        if several is not None and not spec.multi_label:
            raise ReferenceError(
                f"the reference {name} gives example {several.id} several labels; the "
                "project's config allows one"
            )
    unknown = [label for label in used if spec.labels is not None and label not in spec.labels]
    if unknown:
        raise ReferenceError(
            f"the reference {name} uses labels the project's config does not have: "
            f"{', '.join(unknown)} (the project's: {', '.join(spec.labels or ())})"
        )


_TASK_WORDS = {"ner": "entity spans (NER)", "classification": "text classes"}

"""Data sets in and out, by format: the dispatch over :mod:`~subregweigh.io.readers` and
:mod:`~subregweigh.io.labelstudio`, and :func:`write_dataset`, which writes examples so that
:func:`read_dataset` reads them back.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from subregweigh.example import DataError, Example, Task
from subregweigh.io.atomic import PathLike, atomic_open
from subregweigh.io.labelstudio import Annotations
from subregweigh.io.labelstudio_export import read_label_studio
from subregweigh.io.readers import read_conll, read_jsonl, read_tsv

# File extensions -> reader. Anything else (e.g. ``eng.train``, ``eng.testa``) is CoNLL.
TSV_EXTS = {".tsv"}
JSONL_EXTS = {".jsonl", ".json", ".ndjson"}


def check_task(task: str) -> None:
    """Raise ValueError unless ``task`` is ``"ner"`` or ``"classification"``."""
    if task not in ("ner", "classification"):
        raise ValueError(f"task must be 'ner' or 'classification', got {task!r}")


def check_ner(ex: Example) -> None:
    """Raise DataError unless ``ex`` has one tag per word."""
    if len(ex.words) != len(ex.label):
        raise DataError(
            f"{ex.id}: {len(ex.words)} words but {len(ex.label)} tags; not an NER example"
        )


def example_record(ex: Example, task: str) -> dict[str, Any]:
    """The JSONL form of ``ex`` (what :func:`~subregweigh.io.readers.read_jsonl` reads)."""
    if task == "ner":
        check_ner(ex)
        return {"id": ex.id, "words": list(ex.words), "tags": list(ex.label)}
    rec: dict[str, Any] = {"id": ex.id, "text": ex.text}
    if len(ex.label) == 1:
        rec["label"] = ex.label[0]
    else:
        rec["labels"] = list(ex.label)
    return rec


def _check_unique_ids(examples: Sequence[Example]) -> None:
    seen: dict[str, Example] = {}
    for ex in examples:
        if ex.id in seen:
            raise DataError(
                f"{ex.source or ex.id}: duplicate id {ex.id!r} (also at "
                f"{seen[ex.id].source or '?'})"
            )
        seen[ex.id] = ex


def _looks_like_json_array(path: PathLike) -> bool:
    """Whether the first non-space character of ``path`` (after a BOM) is ``[``."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
            while head:
                stripped = head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")
                if stripped:
                    return stripped.startswith(b"[")
                head = f.read(4096)
    except (IsADirectoryError, PermissionError, FileNotFoundError):
        return False  # the reader reports it, naming the file
    return False


Format = Literal["conll", "tsv", "jsonl", "label-studio"]


def dataset_format(path: PathLike, format: Format | None = None) -> Format:
    """The format :func:`read_dataset` reads ``path`` as: ``format`` if given, else by the
    extension (see there). DataError for a ``.csv`` file, which holds no data set."""
    if format is not None:
        return format
    suffix = Path(path).suffix.lower()
    if suffix in TSV_EXTS:
        return "tsv"
    if suffix == ".json" and _looks_like_json_array(path):
        return "label-studio"
    if suffix in JSONL_EXTS:
        return "jsonl"
    if suffix == ".csv":
        raise DataError(f"{path}: cannot read .csv data; use .tsv, .jsonl or CoNLL, or pass format")
    return "conll"


def read_dataset(
    path: PathLike,
    *,
    format: Format | None = None,
    text_field: str | None = None,
    annotations: Annotations = "latest",
) -> tuple[list[Example], Task]:
    """Read a data set, choosing the reader by ``format`` or by the file extension.

    ``.conll``/``.txt``/``.bio``/``.iob`` and names without a known extension (``eng.train``)
    are CoNLL (NER); ``.tsv`` is TSV (classification); ``.jsonl``/``.json``/``.ndjson`` is
    JSONL (either task), except a ``.json`` file whose first non-space character is ``[``:
    that is a Label Studio JSON export (:func:`read_label_studio`, either task).

    Parameters
    ----------
    path : str or path-like
    format : {"conll", "tsv", "jsonl", "label-studio"}, optional
        Default: by extension, as above.
    text_field : str, optional
        Label Studio exports: the key of the text in each task's ``data`` (default: its only
        string field). The other formats ignore it.
    annotations : {"latest", "all"}, default "latest"
        Label Studio exports: each task's latest non-cancelled annotation (example id = task
        id), or every non-cancelled one (id ``"task/annotation"``, as the ML backend weighs
        them). The other formats ignore it.

    Returns
    -------
    examples : list of Example
        With unique ids.
    task : {"ner", "classification"}
    """
    format = dataset_format(path, format)
    if format == "conll":
        examples, task = read_conll(path), "ner"
    elif format == "tsv":
        examples, task = read_tsv(path), "classification"
    elif format == "jsonl":
        examples, task = read_jsonl(path)
    elif format == "label-studio":
        examples, task = read_label_studio(path, text_field=text_field, annotations=annotations)
    else:
        raise ValueError(
            f"format must be 'conll', 'tsv', 'jsonl' or 'label-studio', got {format!r}"
        )
    _check_unique_ids(examples)
    return examples, task  # type: ignore[return-value]


def write_dataset(path: PathLike, examples: Sequence[Example], *, task: Task) -> None:
    """Write examples (no weights) in a format :func:`read_dataset` reads back.

    ``.conll``/``.txt``/``.bio``/``.iob`` -> ``word<TAB>tag`` lines (NER), ``.tsv`` -> a
    ``sentence<TAB>label`` table (single-label classification), ``.jsonl`` -> one object per
    example as in :func:`~subregweigh.io.weights.write_weighted_jsonl`, without ``weight``.
    Written atomically.
    """
    check_task(task)
    suffix = Path(path).suffix.lower()
    with atomic_open(path) as f:
        if suffix == ".jsonl":
            for ex in examples:
                f.write(json.dumps(example_record(ex, task), ensure_ascii=False) + "\n")
        elif suffix in (".conll", ".txt", ".bio", ".iob") and task == "ner":
            for ex in examples:
                check_ner(ex)
                f.writelines(f"{word}\t{tag}\n" for word, tag in zip(ex.words, ex.label))
                f.write("\n")
        elif suffix == ".tsv" and task == "classification":
            f.write("sentence\tlabel\n")
            for ex in examples:
                f.write(f"{ex.text}\t{','.join(ex.label)}\n")
        else:
            raise DataError(
                f"{path}: cannot write {task} data as {suffix or 'a file without extension'}; "
                "use .jsonl, .conll (NER) or .tsv (classification)"
            )

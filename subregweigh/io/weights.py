"""Per-example weights in and out.

Output formats (all written atomically):

* weighted CoNLL: ``word<TAB>tag<TAB>weight`` per word, the sentence weight on every line
  (CrossWeigh's layout), a blank line after each sentence;
* JSONL: ``{"id", "words", "tags" | "text", "label" | "labels", "weight", **extra}``;
* CSV: columns ``id, words, tags | text, label, weight, *extra``.

:func:`read_weights` reads any of them back, matched to the examples by id (JSONL, CSV) or by
order and words (CoNLL). Errors raise :class:`~subregweigh.example.DataError` naming
``"{path}:{line}: "``.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from subregweigh.example import DataError, Example, Task
from subregweigh.io.atomic import PathLike, atomic_open
from subregweigh.io.dataset import JSONL_EXTS, check_ner, check_task, example_record
from subregweigh.io.readers import read_lines
from subregweigh.tags import _first_iob2_error

# Field names of the JSONL/CSV outputs; ``extra`` columns may not reuse them.
_RESERVED = {"id", "words", "tags", "text", "label", "labels", "weight"}


def _check_weights(examples: Sequence[Example], weights: Any) -> np.ndarray:
    w = np.asarray(weights, dtype=float)
    if w.shape != (len(examples),):
        raise ValueError(f"weights must have shape ({len(examples)},), got {w.shape}")
    if not np.all(np.isfinite(w)):
        bad = int(np.flatnonzero(~np.isfinite(w))[0])
        raise ValueError(f"weight of example {examples[bad].id!r} is {w[bad]}")
    return w


def _check_extra(extra: Mapping[str, Any] | None, n: int) -> dict[str, Any]:
    if not extra:
        return {}
    out = {}
    for key, values in extra.items():
        if key in _RESERVED:
            raise ValueError(
                f"extra column {key!r} clashes with a reserved field {sorted(_RESERVED)}"
            )
        if len(values) != n:
            raise ValueError(f"extra column {key!r} has length {len(values)}, expected {n}")
        out[key] = values
    return out


def to_json(value: Any) -> Any:
    """numpy scalars/arrays and tuples -> plain JSON values; NaN/inf -> ``None``.

    Anything else is returned unchanged, so ``json.dumps`` rejects what it cannot encode.
    """
    if isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_weighted_conll(path: PathLike, examples: Sequence[Example], weights: Any) -> None:
    """Write NER examples as ``word<TAB>tag<TAB>weight`` lines (CrossWeigh's layout).

    Parameters
    ----------
    path : str or path-like
    examples : sequence of Example, length n
        NER examples; words must not contain whitespace.
    weights : array-like, shape (n,)
        One weight per sentence, repeated on each of its lines with full float precision.

    A blank line follows each sentence. Written atomically.
    """
    w = _check_weights(examples, weights)
    with atomic_open(path) as f:
        for ex, wi in zip(examples, w):
            check_ner(ex)
            ws = repr(float(wi))  # shortest repr that round-trips exactly
            for word, tag in zip(ex.words, ex.label):
                if not word or len(word.split()) != 1 or word.strip() != word:
                    raise DataError(f"{ex.id}: word {word!r} is empty or contains whitespace")
                f.write(f"{word}\t{tag}\t{ws}\n")
            f.write("\n")


def write_weighted_jsonl(
    path: PathLike,
    examples: Sequence[Example],
    weights: Any,
    extra: Mapping[str, Any] | None = None,
    *,
    task: Task,
) -> None:
    """Write one JSON object per example.

    Fields: ``id``; NER: ``words``, ``tags``; classification: ``text`` (words joined by
    spaces) and ``label`` (single label) or ``labels`` (any other count); then ``weight``
    and one field per ``extra`` column. numpy values become plain JSON; NaN/inf become null.

    Parameters
    ----------
    path : str or path-like
    examples : sequence of Example, length n
    weights : array-like, shape (n,)
    extra : dict of str -> array-like of length n, optional
        Per-example columns (e.g. ``reliability``, ``c``, majority prediction).
    task : {"ner", "classification"}

    Written atomically: a value that cannot be encoded leaves any existing file untouched.
    """
    check_task(task)
    w = _check_weights(examples, weights)
    cols = _check_extra(extra, len(examples))
    with atomic_open(path) as f:
        for i, ex in enumerate(examples):
            rec = example_record(ex, task)
            rec["weight"] = float(w[i])
            for key, values in cols.items():
                rec[key] = to_json(values[i])
            f.write(json.dumps(rec, ensure_ascii=False, allow_nan=False) + "\n")


def write_weighted_csv(
    path: PathLike,
    examples: Sequence[Example],
    weights: Any,
    extra: Mapping[str, Any] | None = None,
    *,
    task: Task,
) -> None:
    """Write a CSV file with a header row.

    Columns: ``id``; NER: ``words`` and ``tags`` (space-joined); classification: ``text`` and
    ``label`` (labels joined by ``","``); then ``weight`` and the ``extra`` columns. Scalars
    are written with ``str`` (full float precision), NaN/inf as an empty cell, lists and
    arrays as JSON. Written atomically.

    Parameters
    ----------
    path : str or path-like
    examples : sequence of Example, length n
    weights : array-like, shape (n,)
    extra : dict of str -> array-like of length n, optional
    task : {"ner", "classification"}
    """
    check_task(task)
    w = _check_weights(examples, weights)
    cols = _check_extra(extra, len(examples))
    head = ["id", "words", "tags"] if task == "ner" else ["id", "text", "label"]
    with atomic_open(path) as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(head + ["weight"] + list(cols))
        for i, ex in enumerate(examples):
            if task == "ner":
                check_ner(ex)
                row = [ex.id, " ".join(ex.words), " ".join(ex.label)]
            else:
                row = [ex.id, ex.text, ",".join(ex.label)]
            row.append(repr(float(w[i])))
            for values in cols.values():
                v = to_json(values[i])
                if v is None:
                    v = ""
                elif isinstance(v, (list, dict)):
                    v = json.dumps(v, ensure_ascii=False, allow_nan=False)
                elif not isinstance(v, (str, int, float, bool)):
                    raise TypeError(f"cannot write {type(v).__name__} to CSV (example {ex.id!r})")
                row.append(v)
            writer.writerow(row)


def write_weights(
    path: PathLike,
    examples: Sequence[Example],
    weights: Any,
    *,
    task: Task,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Write weights in the format given by the extension of ``path``.

    ``.conll``/``.txt`` -> :func:`write_weighted_conll` (NER only; ``extra`` is not written,
    the format has no room for it), ``.jsonl`` -> :func:`write_weighted_jsonl`, ``.csv`` ->
    :func:`write_weighted_csv`. Any other extension raises :class:`DataError`.
    """
    check_task(task)
    suffix = Path(path).suffix.lower()
    if suffix in (".conll", ".txt"):
        if task != "ner":
            raise DataError(f"{path}: weighted CoNLL holds NER data only; use .jsonl or .csv")
        write_weighted_conll(path, examples, weights)
    elif suffix == ".jsonl":
        write_weighted_jsonl(path, examples, weights, extra, task=task)
    elif suffix == ".csv":
        write_weighted_csv(path, examples, weights, extra, task=task)
    else:
        raise DataError(
            f"{path}: unknown output extension {suffix!r}; use .conll, .txt, .jsonl or .csv"
        )


def _parse_weight(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise DataError(f"{where}: weight must be a number, got {value!r}")
    try:
        w = float(value)
    except (TypeError, ValueError):
        raise DataError(f"{where}: weight must be a number, got {value!r}") from None
    if not math.isfinite(w):
        raise DataError(f"{where}: weight must be finite, got {value!r}")
    return w


def _weights_by_id(
    name: str, pairs: list[tuple[int, str, Any]], examples: Sequence[Example]
) -> np.ndarray:
    """Match ``(line, id, weight)`` records to ``examples`` by id."""
    index: dict[str, int] = {}
    for i, ex in enumerate(examples):
        if ex.id in index:
            raise ValueError(f"duplicate example id {ex.id!r}")
        index[ex.id] = i
    out = np.full(len(examples), np.nan)
    seen_line: dict[str, int] = {}
    for lineno, ex_id, value in pairs:
        where = f"{name}:{lineno}"
        if ex_id not in index:
            raise DataError(f"{where}: unknown id {ex_id!r}")
        if ex_id in seen_line:
            raise DataError(f"{where}: duplicate id {ex_id!r} (first on line {seen_line[ex_id]})")
        seen_line[ex_id] = lineno
        out[index[ex_id]] = _parse_weight(value, where)
    missing = [ex.id for ex in examples if ex.id not in seen_line]
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise DataError(f"{name}: no weight for id(s) {missing[:5]}{more}")
    return out


def read_records(path: PathLike) -> list[tuple[int, dict]]:
    """``(line number, record)`` for every object of a JSONL weights file (blank lines skipped).

    Raises
    ------
    DataError
        ``"{path}:{line}: ..."`` for invalid JSON, or a line that holds no object with ``id``
        and ``weight``.
    """
    name = str(path)
    records = []
    for lineno, line in enumerate(read_lines(path), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(
                f"{name}:{lineno}: invalid JSON ({e.msg} at column {e.colno})"
            ) from None
        if not isinstance(obj, dict) or "id" not in obj or "weight" not in obj:
            raise DataError(f"{name}:{lineno}: expected an object with 'id' and 'weight'")
        records.append((lineno, obj))
    return records


def _read_weights_jsonl(name: str, path: PathLike, examples: Sequence[Example]) -> np.ndarray:
    pairs = [(lineno, str(obj["id"]), obj["weight"]) for lineno, obj in read_records(path)]
    return _weights_by_id(name, pairs, examples)


def _read_weights_csv(name: str, path: PathLike, examples: Sequence[Example]) -> np.ndarray:
    text = "\n".join(read_lines(path))
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if not header:
        raise DataError(f"{name}:1: expected a header row with 'id' and 'weight'")
    for col in ("id", "weight"):
        if col not in header:
            raise DataError(f"{name}:1: no column {col!r}; the columns are {header}")
    ii, wi = header.index("id"), header.index("weight")
    pairs = []
    for row in reader:
        if not row:
            continue
        if len(row) != len(header):
            raise DataError(
                f"{name}:{reader.line_num}: expected {len(header)} fields, got {len(row)}"
            )
        pairs.append((reader.line_num, row[ii], row[wi]))
    return _weights_by_id(name, pairs, examples)


def _parse_weighted_conll(
    path: PathLike,
) -> tuple[list[tuple[list[int], list[str], list[str], float]], int]:
    """``(line numbers, words, tags, weight)`` per sentence, and the file's line count."""
    name = str(path)
    lines = read_lines(path)
    sentences: list[tuple[list[int], list[str], list[str], float]] = []
    cur: tuple[list[int], list[str], list[str], float] | None = None
    for lineno, line in enumerate(lines, 1):
        cols = line.split()
        if not cols:
            if cur is not None:
                sentences.append(cur)
                cur = None
            continue
        if len(cols) != 3:
            raise DataError(
                f"{name}:{lineno}: expected 3 columns (word tag weight), got {len(cols)}"
            )
        w = _parse_weight(cols[2], f"{name}:{lineno}")
        if cur is None:
            cur = ([], [], [], w)
        elif w != cur[3]:
            raise DataError(
                f"{name}:{lineno}: weight {w} differs from {cur[3]} on line {cur[0][0]}"
            )
        cur[0].append(lineno)
        cur[1].append(cols[0])
        cur[2].append(cols[1])
    if cur is not None:
        sentences.append(cur)
    return sentences, len(lines)


def read_weighted_conll(path: PathLike) -> tuple[list[Example], np.ndarray]:
    """Read a file written by :func:`write_weighted_conll`.

    Returns
    -------
    examples : list of Example
        Ids ``"0"``, ``"1"``, ... in sentence order; tags validated as IOB2.
    weights : ndarray of float, shape (n,)

    Raises
    ------
    DataError
        ``"{path}:{line}: ..."`` for a line without 3 columns, a bad or non-constant weight
        inside a sentence, an invalid tag, or a file without sentences.
    """
    name = str(path)
    sentences, n_lines = _parse_weighted_conll(path)
    if not sentences:
        raise DataError(f"{name}:{max(n_lines, 1)}: no sentences found")
    examples = []
    for i, (linenos, words, tags, _) in enumerate(sentences):
        err = _first_iob2_error(tags)
        if err is not None:
            raise DataError(f"{name}:{linenos[err[0]]}: {err[1]}")
        examples.append(Example(str(i), tuple(words), tuple(tags), f"{name}:{linenos[0]}"))
    return examples, np.array([s[3] for s in sentences], dtype=float)


def _read_weights_conll(name: str, path: PathLike, examples: Sequence[Example]) -> np.ndarray:
    sentences, n_lines = _parse_weighted_conll(path)
    for k, (linenos, words, _, _) in enumerate(sentences):
        if k >= len(examples):
            raise DataError(
                f"{name}:{linenos[0]}: more sentences than the {len(examples)} examples"
            )
        ex = examples[k]
        for j, (lineno, word) in enumerate(zip(linenos, words)):
            if j >= len(ex.words) or word != ex.words[j]:
                expected = ex.words[j] if j < len(ex.words) else "end of sentence"
                raise DataError(
                    f"{name}:{lineno}: word {word!r} does not match example {ex.id!r} "
                    f"({expected!r})"
                )
        if len(words) != len(ex.words):
            raise DataError(
                f"{name}:{linenos[-1]}: sentence {k} (id {ex.id!r}) ends after {len(words)} words, "
                f"expected {len(ex.words)}"
            )
    if len(sentences) != len(examples):
        raise DataError(
            f"{name}:{max(n_lines, 1)}: {len(sentences)} sentences, expected {len(examples)}"
        )
    return np.array([s[3] for s in sentences], dtype=float)


def read_weights(path: PathLike, examples: Sequence[Example]) -> np.ndarray:
    """Read per-example weights written by :func:`write_weights`.

    Parameters
    ----------
    path : str or path-like
        ``.jsonl``/``.json`` or ``.csv`` (records matched to ``examples`` by ``id``; extra
        fields ignored) or anything else as weighted CoNLL (``word tag weight`` lines, one
        sentence per example, matched by order; words must equal the examples' words).
    examples : sequence of Example, length n

    Returns
    -------
    ndarray of float, shape (n,)

    Raises
    ------
    DataError
        Unknown, duplicate or missing id; sentence count or word mismatch; bad weight value.
    """
    name = str(path)
    suffix = Path(path).suffix.lower()
    if suffix in JSONL_EXTS:
        return _read_weights_jsonl(name, path, examples)
    if suffix == ".csv":
        return _read_weights_csv(name, path, examples)
    return _read_weights_conll(name, path, examples)

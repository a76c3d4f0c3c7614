"""Reading data sets and writing weighted outputs.

Input formats
-------------
* CoNLL (NER): one ``token [POS chunk] tag`` line per word (2 or 4 whitespace-separated
  columns), blank lines between sentences, ``-DOCSTART-`` lines skipped. IOB1 is converted
  to IOB2.
* TSV (classification): a header row, then one example per row (GLUE SST-2 layout).
* JSONL (either task): one object per line, ``{"id"?, "words": [...], "tags": [...]}`` for NER
  or ``{"id"?, "text": "...", "label": "x"}`` / ``{"id"?, "text": ..., "labels": [...]}``.

Every error in the data raises :class:`~subregweigh.example.DataError` whose message starts
with ``"{path}:{line}: "`` (1-based line numbers).

Ids are ``"0"``, ``"1"``, ... in file order unless a JSONL object gives an ``"id"``.

Output formats (all written atomically)
---------------------------------------
* weighted CoNLL: ``word<TAB>tag<TAB>weight`` per word, the sentence weight on every line
  (CrossWeigh's layout), a blank line after each sentence;
* JSONL: ``{"id", "words", "tags" | "text", "label" | "labels", "weight", **extra}``;
* CSV: columns ``id, words, tags | text, label, weight, *extra``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator, Literal, Mapping, Sequence

import numpy as np

from .example import DataError, Example, Task
from .tags import _first_iob2_error, detect_scheme, iob1_to_iob2

PathLike = str | os.PathLike

# File extensions -> reader. Anything else (e.g. ``eng.train``, ``eng.testa``) is CoNLL.
_CONLL_EXTS = {".conll", ".txt", ".bio", ".iob"}
_TSV_EXTS = {".tsv"}
_JSONL_EXTS = {".jsonl", ".json", ".ndjson"}

# Field names of the JSONL/CSV outputs; ``extra`` columns may not reuse them.
_RESERVED = {"id", "words", "tags", "text", "label", "labels", "weight"}


# --------------------------------------------------------------------------- reading helpers


def _read_lines(path: PathLike) -> list[str]:
    """Lines of a UTF-8 file without line endings (LF or CRLF; a BOM is dropped)."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not valid UTF-8 ({e.reason})") from None
    # str.splitlines would also split on \x1c, \x85, \u2028 ..., shifting line numbers.
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


# --------------------------------------------------------------------------- CoNLL


def read_conll(
    path: PathLike,
    *,
    tag_column: int = -1,
    scheme: Literal["auto", "IOB1", "IOB2"] = "auto",
) -> list[Example]:
    """Read a CoNLL NER file.

    Parameters
    ----------
    path : str or path-like
        2-column (``token tag``) or 4-column (``token POS chunk NER``) whitespace-separated
        file. Sentences are separated by empty or whitespace-only lines; ``-DOCSTART-`` lines
        are skipped and also end a sentence. Every word line must have the same column count.
    tag_column : int, default -1
        Column holding the NER tag (the word is always column 0).
    scheme : {"auto", "IOB1", "IOB2"}, default "auto"
        Tag scheme of the file. ``"auto"`` decides over the whole file with
        :func:`~subregweigh.tags.detect_scheme`; IOB1 is converted to IOB2. Tags are then
        validated as IOB2, so a file forced to ``"IOB2"`` with an ``I-X`` starting a span fails.

    Returns
    -------
    list of Example
        Ids ``"0"``, ``"1"``, ... in sentence order; ``source`` is ``"path:line"`` of the
        sentence's first word.

    Raises
    ------
    DataError
        ``"{path}:{line}: ..."`` for a wrong column count, an unknown or inconsistent tag, or
        a file without sentences.
    """
    if scheme not in ("auto", "IOB1", "IOB2"):
        raise ValueError(f"scheme must be 'auto', 'IOB1' or 'IOB2', got {scheme!r}")
    name = str(path)
    lines = _read_lines(path)

    # (line numbers, words, tags) per sentence; line numbers locate bad tags later.
    sentences: list[tuple[list[int], list[str], list[str]]] = []
    cur: tuple[list[int], list[str], list[str]] = ([], [], [])
    ncols = 0
    ncols_line = 0
    for lineno, line in enumerate(lines, 1):
        cols = line.split()
        if not cols or cols[0] == "-DOCSTART-":
            if cur[0]:
                sentences.append(cur)
                cur = ([], [], [])
            continue
        if len(cols) not in (2, 4):
            raise DataError(f"{name}:{lineno}: expected 2 or 4 columns, got {len(cols)}")
        if not ncols:
            ncols, ncols_line = len(cols), lineno
            if not -ncols <= tag_column < ncols:
                raise DataError(
                    f"{name}:{lineno}: tag_column {tag_column} is out of range for {ncols} columns"
                )
        elif len(cols) != ncols:
            raise DataError(
                f"{name}:{lineno}: expected {ncols} columns like line {ncols_line}, got {len(cols)}"
            )
        cur[0].append(lineno)
        cur[1].append(cols[0])
        cur[2].append(cols[tag_column])
    if cur[0]:
        sentences.append(cur)
    if not sentences:
        raise DataError(f"{name}:{max(len(lines), 1)}: no sentences found")

    if scheme == "auto":
        scheme = detect_scheme(tags for _, _, tags in sentences)
    examples: list[Example] = []
    for i, (linenos, words, tags) in enumerate(sentences):
        if scheme == "IOB1":
            tags = iob1_to_iob2(tags)
        err = _first_iob2_error(tags)
        if err is not None:
            raise DataError(f"{name}:{linenos[err[0]]}: {err[1]}")
        examples.append(Example(str(i), tuple(words), tuple(tags), f"{name}:{linenos[0]}"))
    return examples


# --------------------------------------------------------------------------- TSV


def _parse_label_cell(cell: str, where: str) -> tuple[str, ...]:
    """``"b,a" -> ("a", "b")``; a single label gives a 1-tuple."""
    labels = [part.strip() for part in cell.split(",")]
    if any(not lab for lab in labels):
        raise DataError(f"{where}: empty label in {cell!r}")
    return tuple(sorted(set(labels)))


def read_tsv(
    path: PathLike, *, text_column: str = "sentence", label_column: str = "label"
) -> list[Example]:
    """Read a tab-separated classification file with a header row.

    Parameters
    ----------
    path : str or path-like
    text_column : str, default "sentence"
    label_column : str, default "label"
        A cell may hold several labels separated by ``","`` (multi-label).

    Returns
    -------
    list of Example
        ``words = text.split()``, ``label`` = sorted tuple of the labels; ids ``"0"``, ``"1"``,
        ... in row order. Blank lines are skipped.

    Raises
    ------
    DataError
        Missing header or column (naming the columns present), a row with the wrong number of
        fields, empty text or label.
    """
    name = str(path)
    lines = _read_lines(path)
    if not lines or not lines[0].strip():
        raise DataError(f"{name}:1: expected a header row naming {text_column!r} and {label_column!r}")
    header = [h.strip() for h in lines[0].split("\t")]
    for col in (text_column, label_column):
        if col not in header:
            raise DataError(f"{name}:1: no column {col!r}; the columns are {header}")
    ti, li = header.index(text_column), header.index(label_column)

    examples: list[Example] = []
    for lineno, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != len(header):
            raise DataError(
                f"{name}:{lineno}: expected {len(header)} tab-separated fields, got {len(fields)}"
            )
        where = f"{name}:{lineno}"
        words = tuple(fields[ti].split())
        if not words:
            raise DataError(f"{where}: empty text in column {text_column!r}")
        label = _parse_label_cell(fields[li], where)
        examples.append(Example(str(len(examples)), words, label, where))
    if not examples:
        raise DataError(f"{name}:{len(lines)}: no examples after the header")
    return examples


# --------------------------------------------------------------------------- JSONL


def _str_list(value: Any, key: str, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise DataError(f"{where}: {key!r} must be a list of non-empty strings")
    return value


def _label_str(value: Any, key: str, where: str) -> str:
    # Integer class ids (e.g. SST-2's 0/1) are kept as their decimal string.
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise DataError(f"{where}: {key!r} must hold non-empty strings or integers, got {value!r}")
    return str(value)


def read_jsonl(path: PathLike) -> tuple[list[Example], Task]:
    """Read a JSON-lines file of NER or classification examples.

    Parameters
    ----------
    path : str or path-like
        One object per line, all of one form:

        * NER: ``{"id"?: str|int, "words": [str, ...], "tags": [str, ...]}`` with IOB2 tags;
        * classification: ``{"id"?: str|int, "text": str, "label": str|int}`` or
          ``{"id"?, "text": str, "labels": [str|int, ...]}`` (multi-label).

        Blank lines are skipped. A missing ``"id"`` becomes the example's index (``"0"``, ...).

    Returns
    -------
    examples : list of Example
    task : {"ner", "classification"}

    Raises
    ------
    DataError
        ``"{path}:{line}: ..."`` for invalid JSON, missing keys, a words/tags count mismatch,
        invalid IOB2, empty text or words, mixed forms, or a duplicate id.
    """
    name = str(path)
    examples: list[Example] = []
    task: Task | None = None
    task_line = 0
    id_line: dict[str, int] = {}
    for lineno, line in enumerate(_read_lines(path), 1):
        if not line.strip():
            continue
        where = f"{name}:{lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{where}: invalid JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(obj, dict):
            raise DataError(f"{where}: expected a JSON object, got {type(obj).__name__}")

        if "words" in obj and "text" in obj:
            raise DataError(f"{where}: object has both 'words' (NER) and 'text' (classification)")
        if "words" in obj:
            form: Task = "ner"
            if "tags" not in obj:
                raise DataError(f"{where}: NER object has 'words' but no 'tags'")
            words = _str_list(obj["words"], "words", where)
            tags = _str_list(obj["tags"], "tags", where)
            if not words:
                raise DataError(f"{where}: empty 'words'")
            if len(words) != len(tags):
                raise DataError(f"{where}: {len(words)} words but {len(tags)} tags")
            err = _first_iob2_error(tags)
            if err is not None:
                raise DataError(f"{where}: word {err[0]}: {err[1]}")
            label = tuple(tags)
        elif "text" in obj:
            form = "classification"
            if not isinstance(obj["text"], str):
                raise DataError(f"{where}: 'text' must be a string")
            words = obj["text"].split()
            if not words:
                raise DataError(f"{where}: empty 'text'")
            if ("label" in obj) == ("labels" in obj):
                raise DataError(f"{where}: classification object needs exactly one of 'label', 'labels'")
            if "label" in obj:
                label = (_label_str(obj["label"], "label", where),)
            else:
                if not isinstance(obj["labels"], list):
                    raise DataError(f"{where}: 'labels' must be a list")
                label = tuple(sorted({_label_str(v, "labels", where) for v in obj["labels"]}))
        else:
            raise DataError(
                f"{where}: expected 'words' and 'tags' (NER) or 'text' and 'label' "
                f"(classification); keys are {sorted(obj)}"
            )
        if task is None:
            task, task_line = form, lineno
        elif form != task:
            raise DataError(f"{where}: {form} object, but line {task_line} is {task}")

        if "id" in obj:
            raw = obj["id"]
            if isinstance(raw, bool) or not isinstance(raw, (str, int)) or raw == "":
                raise DataError(f"{where}: 'id' must be a non-empty string or integer, got {raw!r}")
            ex_id = str(raw)
        else:
            ex_id = str(len(examples))
        if ex_id in id_line:
            raise DataError(f"{where}: duplicate id {ex_id!r} (first on line {id_line[ex_id]})")
        id_line[ex_id] = lineno
        examples.append(Example(ex_id, tuple(words), label, where))
    if task is None:
        raise DataError(f"{name}:1: no examples found")
    return examples, task


# --------------------------------------------------------------------------- dispatch


def _check_unique_ids(examples: Sequence[Example]) -> None:
    seen: dict[str, Example] = {}
    for ex in examples:
        if ex.id in seen:
            raise DataError(
                f"{ex.source or ex.id}: duplicate id {ex.id!r} (also at {seen[ex.id].source or '?'})"
            )
        seen[ex.id] = ex


def read_dataset(
    path: PathLike, *, format: Literal["conll", "tsv", "jsonl"] | None = None
) -> tuple[list[Example], Task]:
    """Read a data set, choosing the reader by ``format`` or by the file extension.

    ``.conll``/``.txt``/``.bio``/``.iob`` and names without a known extension (``eng.train``)
    are CoNLL (NER); ``.tsv`` is TSV (classification); ``.jsonl``/``.json``/``.ndjson`` is
    JSONL (either task).

    Returns
    -------
    examples : list of Example
        With unique ids.
    task : {"ner", "classification"}
    """
    if format is None:
        suffix = Path(path).suffix.lower()
        if suffix in _TSV_EXTS:
            format = "tsv"
        elif suffix in _JSONL_EXTS:
            format = "jsonl"
        elif suffix == ".csv":
            raise DataError(f"{path}: cannot read .csv data; use .tsv, .jsonl or CoNLL, or pass format")
        else:
            format = "conll"
    if format == "conll":
        examples, task = read_conll(path), "ner"
    elif format == "tsv":
        examples, task = read_tsv(path), "classification"
    elif format == "jsonl":
        examples, task = read_jsonl(path)
    else:
        raise ValueError(f"format must be 'conll', 'tsv' or 'jsonl', got {format!r}")
    _check_unique_ids(examples)
    return examples, task  # type: ignore[return-value]


# --------------------------------------------------------------------------- atomic writes


def _fsync_dir(directory: Path) -> None:
    # Makes the rename durable; not possible on every platform, hence best effort.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def check_writable(path: PathLike, suffixes: Sequence[str] | None = None) -> None:
    """Fail early, naming ``path``, if it cannot be written: no such directory, a directory
    itself, or (with ``suffixes``) an extension we do not write. Call before long work."""
    path = Path(path)
    if suffixes is not None and path.suffix.lower() not in suffixes:
        raise DataError(f"{path}: unknown output extension {path.suffix!r}; use {', '.join(suffixes)}")
    if path.is_dir():
        raise DataError(f"{path}: is a directory, not a file")
    if not path.parent.is_dir():
        raise DataError(f"{path}: the directory {path.parent} does not exist")


@contextmanager
def atomic_open(path: PathLike, mode: str = "w", *, encoding: str = "utf-8") -> Iterator[IO[Any]]:
    """Open ``path`` for writing so that it is replaced only if the block succeeds.

    Writes go to a temporary file in the same directory, which on success is flushed,
    fsynced and moved over ``path`` with :func:`os.replace`. If the block raises, the
    temporary file is removed and an existing file at ``path`` is left untouched.

    Parameters
    ----------
    path : str or path-like
    mode : {"w", "wt", "wb"}, default "w"
        Text mode writes ``encoding`` with no newline translation (``"\\n"`` stays ``"\\n"``).
    encoding : str, default "utf-8"
    """
    if mode not in ("w", "wt", "wb"):
        raise ValueError(f"mode must be 'w', 'wt' or 'wb', got {mode!r}")
    path = Path(path)
    check_writable(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if mode == "wb":
            f = os.fdopen(fd, "wb")
        else:
            f = os.fdopen(fd, "w", encoding=encoding, newline="")
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        # mkstemp creates 0600; give the file the permissions a plain open() would have.
        try:
            st_mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            st_mode = 0o666 & ~umask
        os.chmod(tmp, st_mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)


def atomic_write_text(path: PathLike, text: str, *, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_open`)."""
    with atomic_open(path, "w", encoding=encoding) as f:
        f.write(text)


# --------------------------------------------------------------------------- writers


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
            raise ValueError(f"extra column {key!r} clashes with a reserved field {sorted(_RESERVED)}")
        if len(values) != n:
            raise ValueError(f"extra column {key!r} has length {len(values)}, expected {n}")
        out[key] = values
    return out


def _to_json(value: Any) -> Any:
    """numpy scalars/arrays and tuples -> plain JSON values; NaN/inf -> ``None``.

    Anything else is returned unchanged, so ``json.dumps`` rejects what it cannot encode.
    """
    if isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _to_json(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _check_task(task: str) -> None:
    if task not in ("ner", "classification"):
        raise ValueError(f"task must be 'ner' or 'classification', got {task!r}")


def _check_ner(ex: Example) -> None:
    if len(ex.words) != len(ex.label):
        raise DataError(f"{ex.id}: {len(ex.words)} words but {len(ex.label)} tags; not an NER example")


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
            _check_ner(ex)
            ws = repr(float(wi))  # shortest repr that round-trips exactly
            for word, tag in zip(ex.words, ex.label):
                if not word or len(word.split()) != 1 or word.strip() != word:
                    raise DataError(f"{ex.id}: word {word!r} is empty or contains whitespace")
                f.write(f"{word}\t{tag}\t{ws}\n")
            f.write("\n")


def _record(ex: Example, task: str) -> dict[str, Any]:
    if task == "ner":
        _check_ner(ex)
        return {"id": ex.id, "words": list(ex.words), "tags": list(ex.label)}
    rec: dict[str, Any] = {"id": ex.id, "text": ex.text}
    if len(ex.label) == 1:
        rec["label"] = ex.label[0]
    else:
        rec["labels"] = list(ex.label)
    return rec


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
    _check_task(task)
    w = _check_weights(examples, weights)
    cols = _check_extra(extra, len(examples))
    with atomic_open(path) as f:
        for i, ex in enumerate(examples):
            rec = _record(ex, task)
            rec["weight"] = float(w[i])
            for key, values in cols.items():
                rec[key] = _to_json(values[i])
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
    _check_task(task)
    w = _check_weights(examples, weights)
    cols = _check_extra(extra, len(examples))
    head = ["id", "words", "tags"] if task == "ner" else ["id", "text", "label"]
    with atomic_open(path) as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(head + ["weight"] + list(cols))
        for i, ex in enumerate(examples):
            if task == "ner":
                _check_ner(ex)
                row = [ex.id, " ".join(ex.words), " ".join(ex.label)]
            else:
                row = [ex.id, ex.text, ",".join(ex.label)]
            row.append(repr(float(w[i])))
            for values in cols.values():
                v = _to_json(values[i])
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
    _check_task(task)
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
        raise DataError(f"{path}: unknown output extension {suffix!r}; use .conll, .txt, .jsonl or .csv")


def write_dataset(path: PathLike, examples: Sequence[Example], *, task: Task) -> None:
    """Write examples (no weights) in a format :func:`read_dataset` reads back.

    ``.conll``/``.txt``/``.bio``/``.iob`` -> ``word<TAB>tag`` lines (NER), ``.tsv`` -> a
    ``sentence<TAB>label`` table (single-label classification), ``.jsonl`` -> one object per
    example as in :func:`write_weighted_jsonl`, without ``weight``. Written atomically.
    """
    _check_task(task)
    suffix = Path(path).suffix.lower()
    with atomic_open(path) as f:
        if suffix == ".jsonl":
            for ex in examples:
                f.write(json.dumps(_record(ex, task), ensure_ascii=False) + "\n")
        elif suffix in (".conll", ".txt", ".bio", ".iob") and task == "ner":
            for ex in examples:
                _check_ner(ex)
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


# --------------------------------------------------------------------------- reading weights


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


def _weights_by_id(name: str, pairs: list[tuple[int, str, Any]], examples: Sequence[Example]) -> np.ndarray:
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


def _read_weights_jsonl(name: str, path: PathLike, examples: Sequence[Example]) -> np.ndarray:
    pairs = []
    for lineno, line in enumerate(_read_lines(path), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{name}:{lineno}: invalid JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(obj, dict) or "id" not in obj or "weight" not in obj:
            raise DataError(f"{name}:{lineno}: expected an object with 'id' and 'weight'")
        pairs.append((lineno, str(obj["id"]), obj["weight"]))
    return _weights_by_id(name, pairs, examples)


def _read_weights_csv(name: str, path: PathLike, examples: Sequence[Example]) -> np.ndarray:
    text = "\n".join(_read_lines(path))
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
            raise DataError(f"{name}:{reader.line_num}: expected {len(header)} fields, got {len(row)}")
        pairs.append((reader.line_num, row[ii], row[wi]))
    return _weights_by_id(name, pairs, examples)


def _parse_weighted_conll(path: PathLike) -> tuple[list[tuple[list[int], list[str], list[str], float]], int]:
    """``(line numbers, words, tags, weight)`` per sentence, and the file's line count."""
    name = str(path)
    lines = _read_lines(path)
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
            raise DataError(f"{name}:{lineno}: expected 3 columns (word tag weight), got {len(cols)}")
        w = _parse_weight(cols[2], f"{name}:{lineno}")
        if cur is None:
            cur = ([], [], [], w)
        elif w != cur[3]:
            raise DataError(f"{name}:{lineno}: weight {w} differs from {cur[3]} on line {cur[0][0]}")
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
            raise DataError(f"{name}:{linenos[0]}: more sentences than the {len(examples)} examples")
        ex = examples[k]
        for j, (lineno, word) in enumerate(zip(linenos, words)):
            if j >= len(ex.words) or word != ex.words[j]:
                expected = ex.words[j] if j < len(ex.words) else "end of sentence"
                raise DataError(
                    f"{name}:{lineno}: word {word!r} does not match example {ex.id!r} ({expected!r})"
                )
        if len(words) != len(ex.words):
            raise DataError(
                f"{name}:{linenos[-1]}: sentence {k} (id {ex.id!r}) ends after {len(words)} words, "
                f"expected {len(ex.words)}"
            )
    if len(sentences) != len(examples):
        raise DataError(f"{name}:{max(n_lines, 1)}: {len(sentences)} sentences, expected {len(examples)}")
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
    if suffix in _JSONL_EXTS:
        return _read_weights_jsonl(name, path, examples)
    if suffix == ".csv":
        return _read_weights_csv(name, path, examples)
    return _read_weights_conll(name, path, examples)

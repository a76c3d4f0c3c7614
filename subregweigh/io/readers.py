"""Readers of the plain data formats: CoNLL (NER), TSV (classification) and JSONL (either).

* CoNLL (NER): one ``token [POS chunk] tag`` line per word (2 or 4 whitespace-separated
  columns), blank lines between sentences, ``-DOCSTART-`` lines skipped. IOB1 is converted
  to IOB2.
* TSV (classification): a header row, then one example per row (GLUE SST-2 layout).
* JSONL (either task): one object per line, ``{"id"?, "words": [...], "tags": [...]}`` for NER
  or ``{"id"?, "text": "...", "label": "x"}`` / ``{"id"?, "text": ..., "labels": [...]}``.

Every error in the data raises :class:`~subregweigh.example.DataError` whose message starts
with ``"{path}:{line}: "`` (1-based line numbers). Ids are ``"0"``, ``"1"``, ... in file order
unless a JSONL object gives an ``"id"``. Classification texts are split into words at
whitespace (``str.split``), as the Label Studio reader does (:mod:`subregweigh.io.labelstudio`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from subregweigh.example import DataError, Example, Task
from subregweigh.tags import _first_iob2_error, detect_scheme, iob1_to_iob2

PathLike = str | os.PathLike


def read_text(path: PathLike) -> str:
    """The text of a UTF-8 file (a BOM is dropped)."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not valid UTF-8 ({e.reason})") from None


def read_lines(path: PathLike) -> list[str]:
    """Lines of a UTF-8 file without line endings (LF or CRLF; a BOM is dropped)."""
    text = read_text(path)
    # str.splitlines would also split on \x1c, \x85, \u2028 ..., shifting line numbers.
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


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
    lines = read_lines(path)

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
    lines = read_lines(path)
    if not lines or not lines[0].strip():
        raise DataError(
            f"{name}:1: expected a header row naming {text_column!r} and {label_column!r}"
        )
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
    for lineno, line in enumerate(read_lines(path), 1):
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
                raise DataError(
                    f"{where}: classification object needs exactly one of 'label', 'labels'"
                )
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

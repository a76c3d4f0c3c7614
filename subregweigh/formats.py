"""Reading data sets and writing weighted outputs.

Input formats
-------------
* CoNLL (NER): one ``token [POS chunk] tag`` line per word (2 or 4 whitespace-separated
  columns), blank lines between sentences, ``-DOCSTART-`` lines skipped. IOB1 is converted
  to IOB2.
* TSV (classification): a header row, then one example per row (GLUE SST-2 layout).
* JSONL (either task): one object per line, ``{"id"?, "words": [...], "tags": [...]}`` for NER
  or ``{"id"?, "text": "...", "label": "x"}`` / ``{"id"?, "text": ..., "labels": [...]}``.
* Label Studio JSON export (either task): a JSON array of tasks with their annotations; NER
  from ``labels`` regions (character spans), classification from ``choices``. See
  :func:`read_label_studio`.

Every error in the data raises :class:`~subregweigh.example.DataError` whose message starts
with ``"{path}:{line}: "`` (1-based line numbers), or ``"{path}:task {id}: "`` for a Label
Studio export.

Ids are ``"0"``, ``"1"``, ... in file order unless a JSONL object gives an ``"id"``; a Label
Studio export's ids are its task ids.

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
import logging
import math
import os
import tempfile
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Iterator, Literal, Mapping, Sequence

import numpy as np

from .example import DataError, Example, Task
from .spans import spans_to_tags, utf16_to_char_offset
from .tags import _first_iob2_error, detect_scheme, iob1_to_iob2

logger = logging.getLogger(__name__)

PathLike = str | os.PathLike

# File extensions -> reader. Anything else (e.g. ``eng.train``, ``eng.testa``) is CoNLL.
_CONLL_EXTS = {".conll", ".txt", ".bio", ".iob"}
_TSV_EXTS = {".tsv"}
_JSONL_EXTS = {".jsonl", ".json", ".ndjson"}

# Field names of the JSONL/CSV outputs; ``extra`` columns may not reuse them.
_RESERVED = {"id", "words", "tags", "text", "label", "labels", "weight"}


# --------------------------------------------------------------------------- reading helpers


def _read_text(path: PathLike) -> str:
    """The text of a UTF-8 file (a BOM is dropped)."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not valid UTF-8 ({e.reason})") from None


def _read_lines(path: PathLike) -> list[str]:
    """Lines of a UTF-8 file without line endings (LF or CRLF; a BOM is dropped)."""
    text = _read_text(path)
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


# --------------------------------------------------------------------------- Label Studio export

# Label Studio result types -> the task they annotate.
_LS_KINDS: dict[str, Task] = {"labels": "ner", "choices": "classification"}
_LS_KIND_NAMES = {"ner": "labels (NER)", "classification": "choices (classification)"}


def _ls_time(annotation: dict) -> float:
    """When an annotation was last saved (``updated_at``, else ``created_at``); -inf if unknown."""
    for key in ("updated_at", "created_at"):
        value = annotation.get(key)
        if isinstance(value, str):
            try:  # Python 3.10's fromisoformat does not read a trailing "Z"
                stamp = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            except ValueError:
                continue
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=timezone.utc)
            return stamp.timestamp()
    return -math.inf


def _latest_annotation(annotations: list[dict]) -> dict | None:
    """The most recently saved non-cancelled annotation (ties: higher id, then later in list)."""
    best, best_key = None, None
    for pos, ann in enumerate(annotations):
        if ann.get("was_cancelled"):
            continue
        ann_id = ann.get("id")
        key = (_ls_time(ann), ann_id if type(ann_id) is int else -1, pos)
        if best_key is None or key > best_key:
            best, best_key = ann, key
    return best


def _ls_text(task: dict, text_field: str | None, where: str) -> str:
    data = task.get("data")
    if not isinstance(data, dict):
        raise DataError(f"{where}: 'data' must be an object holding the task's text")
    if text_field is not None:
        if text_field not in data:
            raise DataError(
                f"{where}: no {text_field!r} in data (fields: "
                f"{', '.join(map(repr, data)) or 'none'})"
            )
        text = data[text_field]
        if not isinstance(text, str):
            raise DataError(f"{where}: data[{text_field!r}] is {type(text).__name__}, not text")
    else:
        fields = [key for key, value in data.items() if isinstance(value, str)]
        if len(fields) > 1:
            raise DataError(
                f"{where}: data has several text fields ({', '.join(map(repr, fields))}); pass "
                f"--text-field"
            )
        if not fields:
            raise DataError(
                f"{where}: data has no text field (fields: {', '.join(map(repr, data)) or 'none'})"
            )
        text = data[fields[0]]
    try:  # JSON may carry lone surrogates ("\ud800"), which no tokenizer can encode
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise DataError(f"{where}: the text is not valid Unicode (a lone surrogate)") from None
    return text


def _ls_offset(value: dict, key: str, where: str) -> int:
    raw = value.get(key)
    if isinstance(raw, float) and raw.is_integer():
        raw = int(raw)
    if type(raw) is not int:
        raise DataError(f"{where}: '{key}' must be an integer character offset, got {raw!r}")
    return raw


def _ls_span(text: str, value: dict, where: str, notes: list[str]) -> tuple[int, int]:
    """Character ``(start, end)`` of a ``labels`` region, checked against the text."""
    start, end = _ls_offset(value, "start", where), _ls_offset(value, "end", where)
    quoted = value.get("text")
    if isinstance(quoted, str) and text[start:end] != quoted and start >= 0 and end >= 0:
        # Older Label Studio versions counted UTF-16 code units (an emoji counts twice).
        s16, e16 = utf16_to_char_offset(text, start), utf16_to_char_offset(text, end)
        if s16 is not None and e16 is not None and text[s16:e16] == quoted:
            start, end = s16, e16
        elif 0 <= start < end <= len(text):
            notes.append(
                f"{where}: the region's text {quoted!r} differs from "
                f"{text[start:end]!r} at {start}-{end} in the task; offsets used"
            )
    if not 0 <= start < end <= len(text):
        raise DataError(
            f"{where}: span {start}-{end} lies outside the text of {len(text)} characters"
        )
    return start, end


def _ls_strings(value: dict, key: str, where: str) -> list[str]:
    items = value.get(key)
    if not isinstance(items, list) or not items or not all(isinstance(v, str) and v for v in items):
        raise DataError(
            f"{where}: '{key}' must be a non-empty list of non-empty strings, got {items!r}"
        )
    return items


def read_label_studio(path: PathLike, text_field: str | None = None) -> tuple[list[Example], Task]:
    """Read a Label Studio JSON export (Project > Export > JSON).

    Parameters
    ----------
    path : str or path-like
        A JSON array of tasks, ``{"id", "data": {...}, "annotations": [{"id", "result": [...],
        "was_cancelled", "updated_at", ...}], ...}``. Per task, the latest (by ``updated_at``,
        else ``created_at``, then id) non-cancelled annotation is used; predictions are ignored.

        * NER: ``labels`` regions, ``{"value": {"start", "end", "labels": [...]}}`` with
          end-exclusive character offsets. The text is split into words by
          :func:`subregweigh.spans.words_with_offsets` (as the Label Studio backend does) and
          the spans become IOB2 tags; an annotation without regions is all ``O``.
        * classification: ``choices`` regions; ``words = text.split()``, ``label`` = the
          sorted tuple of the chosen classes (several for multi-label projects, as in
          :func:`read_jsonl`).

    text_field : str, optional
        Key of the text in each task's ``data``. Default: the only string field of ``data``.

    Returns
    -------
    examples : list of Example
        One per task with a usable annotation, in export order; ``id`` is the Label Studio task
        id (as a string), ``source`` is ``"{path}:task {id}"``.
    task : {"ner", "classification"}

    Tasks without a non-cancelled annotation, and classification annotations without a choice,
    are skipped with one logged warning each. So are span problems that IOB2 cannot hold (a
    span that cuts a word is widened to the whole word; a span overlapping another is dropped).

    Raises
    ------
    DataError
        ``"{path}:{line}: ..."`` for invalid JSON; ``"{path}:task {id}: ..."`` for a task
        without text or with several text fields, a region outside the text or with malformed
        offsets or labels, both labels and choices in one export, a duplicate task id, ...
    """
    name = str(path)
    try:
        tasks = json.loads(_read_text(path))
    except json.JSONDecodeError as e:
        raise DataError(f"{name}:{e.lineno}: invalid JSON ({e.msg} at column {e.colno})") from None
    except RecursionError:
        raise DataError(f"{name}: invalid JSON (nested too deeply)") from None
    if not isinstance(tasks, list):
        raise DataError(
            f"{name}:1: expected a JSON array of Label Studio tasks, got {type(tasks).__name__}"
        )
    if not tasks:
        raise DataError(f"{name}:1: the export holds no tasks")

    task: Task | None = None
    task_where = ""
    control: tuple[Any, str] | None = None  # (from_name, where first seen)
    # Pass 1: per annotated task its text and its annotation's spans or choices.
    parsed: list[tuple[str, str, str, list[tuple[int, int, str]], list[str]]] = []
    seen: set[str] = set()
    notes: list[str] = []
    ignored_types: set[str] = set()
    n_unannotated = 0
    for i, item in enumerate(tasks):
        if not isinstance(item, dict):
            raise DataError(
                f"{name}: item {i} of the array is {type(item).__name__}, not a task object"
            )
        raw_id = item.get("id")
        if isinstance(raw_id, bool) or not isinstance(raw_id, (int, str)) or raw_id == "":
            hint = ""
            if "data" not in item and ({"words", "text"} & set(item)):
                hint = (
                    "; this looks like an array of examples, not a Label Studio export: "
                    "write one JSON object per line (.jsonl)"
                )
            raise DataError(
                f"{name}: item {i} of the array has no valid task 'id' (got {raw_id!r}){hint}"
            )
        task_id = str(raw_id)
        where = f"{name}:task {task_id}"
        if task_id in seen:
            raise DataError(f"{where}: duplicate task id")
        seen.add(task_id)
        annotations = item.get("annotations") or []
        if not isinstance(annotations, list) or not all(isinstance(a, dict) for a in annotations):
            raise DataError(f"{where}: 'annotations' must be a list of objects")
        annotation = _latest_annotation(annotations)
        if annotation is None:
            n_unannotated += 1
            continue
        text = _ls_text(item, text_field, where)
        ann_where = f"{where}: annotation {annotation.get('id')}"
        regions = annotation.get("result") or []
        if not isinstance(regions, list):
            raise DataError(f"{ann_where}: 'result' must be a list of regions")
        spans: list[tuple[int, int, str]] = []
        choices: list[str] = []
        for region in regions:
            if not isinstance(region, dict):
                raise DataError(f"{ann_where}: a region is {type(region).__name__}, not an object")
            rtype = region.get("type")
            kind = _LS_KINDS.get(rtype) if isinstance(rtype, str) else None
            if kind is None:
                ignored_types.add(str(rtype))
                continue
            if task is None:
                task, task_where = kind, where
            elif kind != task:
                raise DataError(
                    f"{where}: has {_LS_KIND_NAMES[kind]} regions, but {task_where} has "
                    f"{_LS_KIND_NAMES[task]}; an export must hold one of the two"
                )
            from_name = region.get("from_name")
            if control is None:
                control = (from_name, where)
            elif from_name != control[0]:
                raise DataError(
                    f"{where}: {region.get('type')} from the control {from_name!r}, but "
                    f"{control[1]} has them from {control[0]!r}; subregweigh reads one "
                    "<Labels> or <Choices> control per export"
                )
            region_where = f"{ann_where}: region {region.get('id')}"
            value = region.get("value")
            if not isinstance(value, dict):
                raise DataError(f"{region_where}: 'value' must be an object")
            if kind == "ner":
                labels = _ls_strings(value, "labels", region_where)
                start, end = _ls_span(text, value, region_where, notes)
                spans.extend((start, end, label) for label in labels)
            else:
                choices.extend(_ls_strings(value, "choices", region_where))
        parsed.append((task_id, where, text, spans, choices))

    if ignored_types:
        logger.warning(
            "%s: ignored result regions of type %s (subregweigh reads labels and choices)",
            name,
            ", ".join(sorted(ignored_types)),
        )
    if n_unannotated:
        logger.warning(
            "%s: %d of %d tasks have no annotation (or only cancelled ones); skipped",
            name,
            n_unannotated,
            len(tasks),
        )
    if task is None:
        raise DataError(
            f"{name}: no annotation has labels (NER) or choices (classification) "
            f"regions ({len(parsed)} annotated tasks of {len(tasks)})"
        )

    # Pass 2: examples.
    examples: list[Example] = []
    no_choice = []
    for task_id, where, text, spans, choices in parsed:
        if task == "ner":
            words, tags, span_notes = spans_to_tags(text, spans, where)
            notes.extend(span_notes)
            label = tuple(tags)
            ex_words = tuple(w for w, _, _ in words)
        else:
            if not choices:
                no_choice.append(task_id)
                continue
            label = tuple(sorted(set(choices)))
            ex_words = tuple(text.split())
        if not ex_words:
            raise DataError(f"{where}: empty text")
        examples.append(Example(task_id, ex_words, label, where))
    if no_choice:
        logger.warning(
            "%s: %d annotated tasks have no choice in their latest annotation "
            "(task %s ...); skipped",
            name,
            len(no_choice),
            ", ".join(no_choice[:5]),
        )
    if notes:
        logger.warning(
            "%s: %d span problem(s) IOB2 tags cannot hold, first: %s",
            name,
            len(notes),
            notes[0].removeprefix(f"{name}:"),
        )
        for note in notes:
            logger.debug("%s", note)
    if not examples:
        raise DataError(f"{name}: none of the {len(tasks)} tasks has a usable annotation")
    return examples, task


# --------------------------------------------------------------------------- dispatch


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


def read_dataset(
    path: PathLike,
    *,
    format: Literal["conll", "tsv", "jsonl", "label-studio"] | None = None,
    text_field: str | None = None,
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
        elif suffix == ".json" and _looks_like_json_array(path):
            format = "label-studio"
        elif suffix in _JSONL_EXTS:
            format = "jsonl"
        elif suffix == ".csv":
            raise DataError(
                f"{path}: cannot read .csv data; use .tsv, .jsonl or CoNLL, or pass format"
            )
        else:
            format = "conll"
    if format == "conll":
        examples, task = read_conll(path), "ner"
    elif format == "tsv":
        examples, task = read_tsv(path), "classification"
    elif format == "jsonl":
        examples, task = read_jsonl(path)
    elif format == "label-studio":
        examples, task = read_label_studio(path, text_field=text_field)
    else:
        raise ValueError(
            f"format must be 'conll', 'tsv', 'jsonl' or 'label-studio', got {format!r}"
        )
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
        raise DataError(
            f"{path}: unknown output extension {path.suffix!r}; use {', '.join(suffixes)}"
        )
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
            raise ValueError(
                f"extra column {key!r} clashes with a reserved field {sorted(_RESERVED)}"
            )
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
        raise DataError(
            f"{ex.id}: {len(ex.words)} words but {len(ex.label)} tags; not an NER example"
        )


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
        raise DataError(
            f"{path}: unknown output extension {suffix!r}; use .conll, .txt, .jsonl or .csv"
        )


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


def _read_weights_jsonl(name: str, path: PathLike, examples: Sequence[Example]) -> np.ndarray:
    pairs = []
    for lineno, line in enumerate(_read_lines(path), 1):
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
    if suffix in _JSONL_EXTS:
        return _read_weights_jsonl(name, path, examples)
    if suffix == ".csv":
        return _read_weights_csv(name, path, examples)
    return _read_weights_conll(name, path, examples)
